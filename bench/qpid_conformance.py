"""Qpid's conformance suites against Warren: counts per suite and class, and the failures by class.

    .venv/bin/python bench/qpid_conformance.py                 # both suites, every test
    .venv/bin/python bench/qpid_conformance.py --suite broker_0_10 --pattern '*dtx*'
    .venv/bin/python bench/qpid_conformance.py --write         # also record tests/interop_0_10/conformance.json
    .venv/bin/python bench/qpid_conformance.py --json out.json # the full summary and every result

Runs ``qpid_tests.broker_0_10`` (233 tests) and ``qpid.tests.messaging`` (182, 109 of them the
broker-facing ``endpoints``) from the PyPI qpid-python 1.36 release on pyenv's Python 2.7
(installed by tests/qpid_python.py), each module against a fresh Warren from this checkout on an
ephemeral port (tests/interop_0_10/qpid_suites.py). Prints, for each suite: all tests, the ones
left once Qpid Broker-J's CI ignore list is applied (the issue's yardstick), the QMF tests, the
dtx tests; then passed/failed/skipped per class and each failure with the last line of its error.
``--write`` records the summary that tests/interop_0_10/test_qpid_conformance.py holds as its
floor (do it when more tests pass, not when fewer do). Takes a few minutes for both suites.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.interop_0_10 import qpid_suites  # noqa: E402
from tests.qpid_python import qpid_suite, why_suite_missing  # noqa: E402


def _line(label: str, c: dict) -> str:
    return f"  {label:<28} {c['passed']:>4} passed {c['failed']:>4} failed {c['skipped']:>3} skipped of {c['total']}"


def report(summary: dict) -> None:
    for suite, entry in summary.items():
        print(f"\n{suite} ({qpid_suites.SUITES[suite]})")
        print(_line("all tests", entry["all"]))
        print(_line("Java excludes applied", entry["java_excludes_applied"]))
        if "qmf" in entry:
            print(_line("QMF tests (extra)", entry["qmf"]))
            print(_line("dtx (in the Java subset)", entry["dtx"]))
        print("  per class:")
        for cls, c in entry["classes"].items():
            print(f"    {cls.split('.', 2)[-1]:<52} {c['passed']:>3}/{c['total']:<3} "
                  f"failed {c['failed']:>2} skipped {c['skipped']:>2}")
        if entry["failures"]:
            print("  failures:")
            for cls, tests in entry["failures"].items():
                print(f"    {cls}")
                for name, reason in tests.items():
                    print(f"      {name}: {reason}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=sorted(qpid_suites.SUITES), action="append",
                    help="one suite (repeatable; default both)")
    ap.add_argument("--pattern", action="append", default=[], help="only tests matching (fnmatch, repeatable)")
    ap.add_argument("--per-test", type=float, default=20.0, help="seconds allowed per test before a run is hung")
    ap.add_argument("--write", action="store_true", help="record the summary in tests/interop_0_10/conformance.json")
    ap.add_argument("--json", type=Path, help="write the summary and every test's result to this file")
    ap.add_argument("--log", type=Path, help="write qpid-python-test's whole output to this file")
    args = ap.parse_args()
    qp = qpid_suite()
    if qp is None:
        print(f"cannot run: {why_suite_missing()}", file=sys.stderr)
        return 2
    modules = [qpid_suites.SUITES[s] for s in (args.suite or sorted(qpid_suites.SUITES))]
    log = open(args.log, "w") if args.log else None
    t0 = time.monotonic()

    def progress(file_module: str, got: dict) -> None:
        done = [v for v in got.values() if v is not None]
        print(f"{time.monotonic() - t0:7.1f}s {file_module}: {sum(1 for v in done if v[0] == 'pass')}/{len(got)} "
              f"passed", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="qpid-conformance-") as tmp:
        results = qpid_suites.run(qp, modules, args.pattern, qpid_suites.warren_broker(Path(tmp)),
                                  per_test_s=args.per_test, log=log, progress=progress)
    if log is not None:
        log.close()
    summary = qpid_suites.summarize(results)
    report(summary)
    print(f"\n{len(results)} tests in {time.monotonic() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "results": results}, indent=1, sort_keys=True))
    if args.write:
        if args.pattern or args.suite:
            print("--write records complete runs only (no --suite/--pattern)", file=sys.stderr)
            return 2
        record = {"qpid_python": "1.36.0.post1", "recorded": time.strftime("%Y-%m-%d"), "summary": summary,
                  "passed": sorted(n for n, r in results.items() if r[0] == "pass")}
        qpid_suites.RECORD_FILE.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"recorded in {qpid_suites.RECORD_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
