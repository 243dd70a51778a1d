"""The fault harness's runs (issue 33, item 5): a replicated quorum queue on three nodes, two
publishers and two consumers reconnecting through every fault (workload.py), one fault a cycle
(harness.py: kill -9 of the leader, of a follower, of both followers, of an etcd member; the
leader paused past its lease; the leader partitioned from everyone, from etcd alone, from the
other nodes alone (silence, or refusals); its links cut once; every link slow; a slow disk under
the leader; one node's wall clock an hour ahead all along), then a drain after the last one healed, and the checker (checker.py): lost 0, unexpected 0, no two serving intervals of
the queue overlapping; duplicates and each fault kind's recovery times reported. The same on a
replicated stream (five of the kinds), whose consumers go on from their last offset: each offset
names one message on every leader, no message is at two offsets.

Without a marker each fault kind runs once (one to two minutes); ``-m cluster_faults`` runs
WARREN_FAULT_CYCLES cycles (100 by default), the figures docs/clustering.md reports.
WARREN_FAULT_KINDS=pause-leader,kill-leader runs only those kinds, in turn; WARREN_FAULT_NODES=5
runs five nodes (the queue still has three members). WARREN_FAULT_REPORT
names a file for the run's report (JSON) besides the one line printed.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.cluster.etcd_harness import ETCD, MISSING_REASON
from tests.cluster.faults.checker import check, offset_conflicts, overlapping_leaders, percentiles
from tests.cluster.faults.harness import FAULTS, FaultCluster, Nemesis, recovery_times, wait_for
from tests.cluster.faults.workload import QUORUM, STREAM, Workload

QUEUE = "fault-harness"
STREAM_QUEUE = "fault-harness-stream"
# the faults that move or cut off a stream's leader, and one of a follower
STREAM_FAULTS = ("kill-leader", "kill-follower", "pause-leader", "partition-leader", "links-cut")
DRAIN_TIMEOUT_S = 120.0


def kinds_asked(default: tuple[str, ...]) -> tuple[str, ...]:
    """WARREN_FAULT_KINDS (comma-separated, harness.py's names) or ``default``, in turn."""
    asked = tuple(k for k in os.environ.get("WARREN_FAULT_KINDS", "").split(",") if k)
    unknown = set(asked) - set(FAULTS)
    assert not unknown, f"no such fault: {sorted(unknown)} (harness.py FAULTS: {', '.join(FAULTS)})"
    return asked or default


def cycles_asked(request, kinds: tuple[str, ...]) -> int:
    if "cluster_faults" in (request.config.option.markexpr or ""):
        return int(os.environ.get("WARREN_FAULT_CYCLES", "100"))
    return len(kinds)


def report(faults: list[dict], result, overlaps: list, history: dict, cluster: FaultCluster) -> dict:
    times = recovery_times(faults, history["publishes"])
    return {"cycles": len(faults), "check": result.summary(), "lost": result.lost, "unexpected": result.unexpected,
            "duplicates": result.duplicates, "reordered": result.reordered, "overlapping_leaders": len(overlaps),
            "recovery_s": {kind: {"runs": len(v), **{f"p{p}": round(x, 2) for p, x in percentiles(v).items()}}
                           for kind, v in sorted(times.items())},
            "faults": faults, "stats": history["stats"],
            "events": [(round(t, 3), what) for t, what in cluster.events]}


def run(tmp_path, request, queue: str, arguments: dict, kinds: tuple[str, ...], cycles: int):
    """The cluster, the workload on ``queue`` and ``cycles`` faults of ``kinds`` in turn, then the
    drain; the history checked and the report written (returned: result, figures, history,
    intervals, faults)."""
    if ETCD is None:
        pytest.skip(MISSING_REASON)
    cluster = FaultCluster(tmp_path, size=int(os.environ.get("WARREN_FAULT_NODES", "3"))).start()
    workload = None
    try:
        workload = Workload([n.url for n in cluster.nodes], queue, queue_arguments=arguments).start()
        wait_for(lambda: workload.counts()["confirmed"] >= 50, 120, "the first 50 confirms")
        wait_for(lambda: cluster.whole(queue), 60, "the queue on every node")
        nemesis = Nemesis(cluster, workload, queue)
        faults = []
        for i in range(cycles):
            kind = kinds[i % len(kinds)]
            fault = nemesis.inject(kind)
            faults.append(fault)
            counts = workload.counts()
            print(f"[fault harness] {queue} cycle {i + 1}/{cycles} {kind} on {fault['node']}: whole again after "
                  f"{fault['end'] - fault['start']:.1f} s; confirmed {counts['confirmed']}, delivered "
                  f"{counts['delivered']}, reconnects {counts['reconnects']}", file=sys.stderr, flush=True)
        workload.stop_publishing()
        drained = workload.drain(DRAIN_TIMEOUT_S)
        workload.stop()
        history = workload.history()
        result = check(history)
        intervals = [i for i in cluster.intervals() if i[0] == "//" + queue]  # vhost "/", a slash, the name
        overlaps = overlapping_leaders(intervals)
        figures = report(faults, result, overlaps, history, cluster)
        if workload.stream:
            figures["offsets"] = offset_conflicts(history)
        print(f"[fault harness] {json.dumps({k: figures[k] for k in ('cycles', 'check', 'overlapping_leaders', 'recovery_s')})}",
              file=sys.stderr, flush=True)
        # the whole run beside the nodes' logs (a failure is read from them), and where asked
        for path in (tmp_path / "report.json", os.environ.get("WARREN_FAULT_REPORT")):
            if path:
                with open(path, "w") as out:
                    json.dump({**figures, "intervals": intervals, "history": history}, out)
        assert result.lost == 0, (result.summary(), result.lost_ids[:20], drained)
        assert result.unexpected == 0, (result.summary(), result.unexpected_ids[:20])
        assert not overlaps, overlaps
        # every kind moved the queue or kept it serving: each cycle ended with more confirmed
        assert result.confirmed >= 50 + 20 * cycles, result.summary()
        assert not history["stats"]["crashed_threads"], history["stats"]
        return result, figures, history, intervals, faults
    finally:
        if workload is not None:
            workload.stop()
        cluster.stop()


@pytest.mark.cluster_faults
@pytest.mark.timeout(3 * 3600)  # bounded by the cycles asked: each cycle's waits are (harness.py)
def test_faults_lose_no_confirmed_message_and_never_two_leaders_at_once(tmp_path, request):
    kinds = kinds_asked(FAULTS)
    _, _, _, intervals, faults = run(tmp_path, request, QUEUE, QUORUM, kinds, cycles_asked(request, kinds))
    # the leaders' intervals were read: at least one per leader change the faults caused
    taken = sum(1 for f in faults if f["taken"] is not None)
    assert len({(i[1], i[2]) for i in intervals}) >= taken + 1, intervals


@pytest.mark.cluster_faults
@pytest.mark.timeout(3 * 3600)
def test_a_replicated_stream_keeps_every_confirmed_message_at_one_offset_through_faults(tmp_path, request):
    """The same faults on a replicated stream, read by consumers that go on from the offset after
    the last one they had: every confirmed message read, each offset naming one message on every
    leader the stream had, no message at two offsets."""
    kinds = kinds_asked(STREAM_FAULTS)
    _, figures, _, _, _ = run(tmp_path, request, STREAM_QUEUE, STREAM, kinds, cycles_asked(request, kinds))
    offsets = figures["offsets"]
    assert offsets["offsets"] > 0, offsets
    assert not offsets["conflicts"], offsets["conflicts"][:10]
    assert not offsets["moved"], offsets["moved"][:10]
