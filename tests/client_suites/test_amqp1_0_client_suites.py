"""The AMQP 1.0 clients' own test suites against Warren (issue 36), through
tools/amqp1_0-client-suites, with the last complete run's passes in ``amqp1_0_record.json`` as
the floor: a test that passed then and fails now is a regression.

* by default the bounded part runs (rabbitmq-amqp-python-client's test_management.py, Proton's
  and rhea's brokered examples: 2 min 20 s at load 10-14 with the venvs and npm packages kept in
  ~/.cache/warren/amqp1_0-client-suites, 4.5 min the first time);
* ``pytest -m client_suites_1_0 tests/client_suites`` (or ``WARREN_CLIENT_SUITES_1_0=1``) runs
  each suite whole (rabbitmq's takes 7-8 minutes).

None of the three suites ships in its registry package, so their sources come from copies of
their repositories (the tool's --source, or where the session's fetch tool puts them); where
there is none these tests skip saying so, and in CI (``CI`` set) they skip too: CI may use only
the registries, and a copy fetched by hand on the machine is not one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "amqp1_0-client-suites"
RECORD = json.loads((Path(__file__).parent / "amqp1_0_record.json").read_text())
MIRRORS = {"rabbitmq": "rabbitmq+rabbitmq-amqp-python-client", "proton": "apache+qpid-proton", "rhea": "amqp+rhea"}


def _full_run_asked(config) -> bool:
    return "client_suites_1_0" in (config.getoption("markexpr") or "") or \
        os.environ.get("WARREN_CLIENT_SUITES_1_0") == "1"


WORK = Path.home() / ".cache" / "warren" / "amqp1_0-client-suites"


def _run(tmp_path: Path, suite: str, whole: bool) -> dict[str, str]:
    if os.environ.get("CI") and os.environ.get("WARREN_CLIENT_SUITES_1_0") != "1":
        pytest.skip("CI: the suites' tests are on GitHub only, not in the registries CI may use")
    if not (Path("/work/.mirror") / MIRRORS[suite] / "repo").exists():
        pytest.skip(f"no copy of {suite}'s repository here: its tests are on GitHub only "
                    f"(tools/amqp1_0-client-suites --source {suite}=PATH runs them by hand)")
    work = WORK / ("whole" if whole else "bounded")
    (work / suite / "results.json").unlink(missing_ok=True)
    args = [sys.executable, str(TOOL), "--suite", suite, "--work", str(work)] + (["--all"] if whole else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=2400)
    results = work / suite / "results.json"
    assert results.exists(), f"the tool ran no test:\n{done.stdout}\n{done.stderr[-3000:]}"
    return json.loads(results.read_text())


def _check(results: dict[str, str], suite: str) -> None:
    recorded = RECORD[suite]["passed"]
    regressions = [n for n in recorded if results.get(n, "passed") != "passed"]
    assert not regressions, f"passed in the recorded run, not now: {regressions}"
    assert any(v == "passed" for v in results.values())


@pytest.mark.parametrize("suite", ["rabbitmq", "proton", "rhea"])
@pytest.mark.timeout(600)
def test_bounded_part_keeps_every_recorded_pass(tmp_path, request, suite):
    if _full_run_asked(request.config):
        pytest.skip("the whole run (test_whole_suites) covers this part")
    _check(_run(tmp_path, suite, whole=False), suite)


@pytest.mark.client_suites_1_0
@pytest.mark.parametrize("suite", ["rabbitmq", "proton", "rhea"])
@pytest.mark.timeout(2400)
def test_whole_suites_keep_every_recorded_pass(tmp_path, request, suite):
    if not _full_run_asked(request.config):
        pytest.skip("the whole suites: pytest -m client_suites_1_0 (or WARREN_CLIENT_SUITES_1_0=1)")
    results = _run(tmp_path, suite, whole=True)
    _check(results, suite)
    assert sum(v == "passed" for v in results.values()) >= RECORD[suite]["counts"]["passed"]
