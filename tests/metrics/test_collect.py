"""warren/metrics/collect.py without a broker: a scrape under ``--worker-mode queues`` adds the
other workers' snapshots into its own, and every per-object list must come across (session 16's CI
found the stream readers' rows left behind: a stream on the other worker showed no reader)."""

from __future__ import annotations

import dataclasses

from warren.metrics.collect import Snapshot, add_snapshot


def test_add_snapshot_carries_every_list_of_rows():
    lists = [f.name for f in dataclasses.fields(Snapshot)
             if f.type in ("list", list) and f.name not in ("queue_sums", "channel_sums", "connection_sums")]
    assert "stream_reader_rows" in lists and "queue_rows" in lists
    mine, theirs = Snapshot(per_object=True), Snapshot(per_object=True)
    for name in lists:
        getattr(theirs, name).append(("row of", name))
    add_snapshot(mine, theirs)
    missing = [name for name in lists if ("row of", name) not in getattr(mine, name)]
    assert not missing, f"add_snapshot drops the other worker's {missing}"
