#!/usr/bin/env python3
"""The fuzzing harness, for as long as asked (nightly): hostile frame sequences against Warren.

    python bench/fuzz.py [--minutes 30] [--batch 200] [--listen 0.3] [--rss-limit-mib 300]
                         [--broker-arg=--frame-max=65536 ...]
    python bench/fuzz.py --stateful [--minutes 30] [--batch 200]

``--stateful`` runs the stateful hostile-client fuzzer instead (tests/protocol/test_hostile_fuzz.py:
0-9-1 channels, 0-10 sessions and the HTTP API kept open across steps, fed valid then mutated
methods, property lists, field tables and 0-10 structs) in batches of ``--batch`` examples, each
with a fresh seed (printed), and stops at the first 541 or HTTP 5xx, or a traceback in the log.

The same cases as the suite's bounded run (tests/e2e/fuzzframes.py, tests/e2e/test_fuzz.py):
after a valid handshake, mutated and truncated frames, huge declared sizes, wrong frame-end
octets, random class/method ids, bad field-table types, tables nested thousands deep, bad
property lists, random octets instead of a protocol header. A fresh broker is started with a
temporary data folder; a pika control client publishes and consumes throughout; the broker's
resident memory is sampled after every batch.

Hypothesis runs in batches of ``--batch`` examples, each batch with a fresh random seed, until
the time is up. A failing example is shrunk and printed, and the run stops with status 1; so
do a dead broker, a traceback in its log, a control-client failure, or RSS past the limit.
At the end: examples run, answers by kind and reply code, RSS at start/peak/end, the control
client's round trips and slowest latency.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.conftest import launch_broker  # noqa: E402
from tests.e2e.fuzzframes import ControlClient, cases, check_outcome, ensure_queue, rss_kib, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to fuzz (default 10)")
    ap.add_argument("--batch", type=int, default=200, help="examples per Hypothesis run (a fresh seed each)")
    ap.add_argument("--listen", type=float, default=0.3, help="seconds to wait for the broker's answer per case")
    ap.add_argument("--rss-limit-mib", type=float, default=300.0, help="fail if the broker's RSS grows past this")
    ap.add_argument("--broker-arg", action="append", default=[], help="extra `warren serve` argument (repeatable)")
    ap.add_argument("--stateful", action="store_true", help="the stateful fuzzer (541s and HTTP 5xx are failures)")
    args = ap.parse_args()
    if args.stateful:
        return stateful(args)

    tmp = Path(tempfile.mkdtemp(prefix="warren-fuzz-"))
    b = launch_broker(tmp, *args.broker_arg)
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    stats: collections.Counter = collections.Counter()
    examples = 0
    status = 0
    control = None
    try:
        ensure_queue(b.host, b.port, queue)
        control = ControlClient(b.host, b.port)
        control.start()
        start_rss = peak = rss_kib(b.proc.pid)
        deadline = time.monotonic() + args.minutes * 60
        print(f"fuzzing {b.host}:{b.port} (pid {b.proc.pid}, log {b.log_path}) for {args.minutes:g} min", flush=True)

        @settings(max_examples=args.batch, deadline=None, database=None, print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(queue))
        def batch(case):
            nonlocal examples
            out = run_case(b.host, b.port, case, listen_s=args.listen)
            examples += 1
            answer = ",".join(f"{'ch' if scope == 'channel' else 'conn'}{code}" for scope, code, _ in out.codes)
            answer = answer or ("closed" if out.closed else "-")
            stats[(case.kind, answer)] += 1
            check_outcome(case, out)
            assert b.proc.poll() is None, "the broker died"

        while time.monotonic() < deadline:
            batch()
            rss = rss_kib(b.proc.pid)
            peak = max(peak, rss)
            log = b.log()
            if "Traceback" in log or "internal error on connection" in log:
                print("FAIL: a traceback in the broker's log:\n" + log[log.find("Traceback") - 2000:][:6000])
                status = 1
                break
            if (rss - start_rss) / 1024 > args.rss_limit_mib:
                print(f"FAIL: RSS grew {(rss - start_rss) / 1024:.0f} MiB (limit {args.rss_limit_mib:g})")
                status = 1
                break
            if control.failures:
                print(f"FAIL: the control client: {control.failures}")
                status = 1
                break
            left = max(0.0, deadline - time.monotonic())
            print(f"  {examples} examples, RSS {rss / 1024:.0f} MiB, {len(control.latencies)} control round trips, "
                  f"{left / 60:.1f} min left", flush=True)
    except Exception as e:  # noqa: BLE001 - a failing example (shrunk by Hypothesis) or a dead broker
        print(f"FAIL: {type(e).__name__}: {e}")
        status = 1
    finally:
        if control is not None:
            control.stop()
        end_rss = rss_kib(b.proc.pid) if b.proc.poll() is None else 0
        b.stop()
    print(f"\n{examples} examples; answers by kind:")
    for (kind, answer), n in sorted(stats.items()):
        print(f"  {kind:20s} {answer:24s} {n}")
    if control is not None and control.latencies:
        print(f"control client: {len(control.latencies)} round trips, slowest {max(control.latencies) * 1000:.0f} ms, "
              f"failures {control.failures or 'none'}")
    if examples:
        print(f"broker RSS: start {start_rss / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, end {end_rss / 1024:.0f} MiB")
    if status == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed run keeps its data folder and log
    else:
        print(f"the broker's log and data folder: {tmp}")
    print("PASS" if status == 0 else "FAIL")
    return status


def stateful(args) -> int:
    """Batches of the stateful fuzzer against one fresh broker until the time is up."""
    import os
    import random

    tmp = Path(tempfile.mkdtemp(prefix="warren-fuzz-"))
    b = launch_broker(tmp, *args.broker_arg)
    status, batches = 0, 0
    total = collections.Counter()
    try:
        deadline = time.monotonic() + args.minutes * 60
        print(f"stateful fuzzing {b.host}:{b.port} (log {b.log_path}) for {args.minutes:g} min", flush=True)
        while time.monotonic() < deadline:
            os.environ["WARREN_FUZZ_SEED"] = str(random.SystemRandom().randrange(2**32))
            import importlib
            import tests.protocol.test_hostile_fuzz as fuzz
            fuzz = importlib.reload(fuzz)  # takes the new seed
            try:
                tally = fuzz.run(b, args.batch)
            except Exception as e:  # noqa: BLE001 - a finding, shrunk and printed by Hypothesis
                print(f"FAIL (seed {fuzz.SEED}): {type(e).__name__}: {e}")
                status = 1
                break
            batches += 1
            total.update(tally.codes)
            print(f"  batch {batches}: {tally.summary()}", flush=True)
            if "Traceback" in b.log():
                print("FAIL: a traceback in the broker's log:\n" + b.log()[b.log().find("Traceback") - 2000:][:6000])
                status = 1
                break
    finally:
        b.stop()
    print(f"\n{batches} batches of {args.batch}; answers:")
    for (scope, code), n in sorted(total.items()):
        print(f"  {scope:20s} {code:4d} {n}")
    if status == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"the broker's log and data folder: {tmp}")
    print("PASS" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
