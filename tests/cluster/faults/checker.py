"""The checker of the fault harness (issue 33, item 5): pure functions over a workload's history
(workload.py's module docstring gives its format) and over the leaders' lease intervals.

What ``check`` counts:

* **lost**: ids confirmed to a publisher and never delivered to a consumer. Must be 0.
* **unexpected**: ids delivered that no publisher published. Must be 0.
* **duplicates**: deliveries beyond the first of each id (redelivered or not): reported, allowed.
* **reordered**: the order rule is "a publisher's order is kept except after a redelivery",
  checked within each consumer's stream of deliveries, as follows. For each id take its *first
  delivery*: the earliest of its deliveries, by time. An id B is *reordered* when, among the first
  deliveries one consumer recorded, B's comes before that of an id A of the same publisher with
  A < B (by sequence number), where:

  - A was confirmed. The publishers wait for each confirm before publishing the next id, so a
    confirmed A was in the queue before B was sent; an unconfirmed A ("unknown" or "nacked") may
    have reached the queue after B, or through a node that forwarded it late;
  - neither first delivery carries the redelivered flag: a redelivered message goes back to the
    queue's head out of its place, by design.

  The comparison stays within one consumer (across its reconnections, which follow each other in
  its thread) because two consumers record in two threads: a message the queue handed to c0 first
  may be recorded after one it handed to c1 later, so the recording order of two consumers says
  nothing about the queue's. A run with one consumer checks the order of everything.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

OUTCOMES = ("confirmed", "nacked", "unknown")


@dataclass
class Result:
    """``check``'s counts; the ``*_ids`` lists and ``reordered_pairs`` name what was counted."""

    published: int  # ids a publisher attempted
    confirmed: int
    nacked: int
    unknown: int  # the connection went before the answer ("pending" in a history counts here)
    delivered: int  # distinct ids delivered
    deliveries: int  # every delivery, duplicates included
    redelivered: int  # deliveries that carried the redelivered flag
    lost: int  # confirmed, never delivered
    unexpected: int  # delivered, never published
    duplicates: int  # deliveries beyond the first of each id
    reordered: int  # ids delivered before a smaller confirmed id of their publisher (module docstring)
    unknown_delivered: int  # "unknown" ids that did reach the queue
    nacked_delivered: int  # "nacked" ids delivered all the same (a nack promises nothing either way)
    lost_ids: list[str] = field(default_factory=list)
    unexpected_ids: list[str] = field(default_factory=list)
    reordered_pairs: list[tuple[str, str]] = field(default_factory=list)  # (B, the smaller A after it)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.unexpected == 0

    def summary(self) -> str:
        counts = ("published", "confirmed", "nacked", "unknown", "delivered", "deliveries", "redelivered",
                  "lost", "unexpected", "duplicates", "reordered", "unknown_delivered", "nacked_delivered")
        verdict = "ok" if self.ok else "FAILED"
        return f"{verdict}: " + " ".join(f"{name}={getattr(self, name)}" for name in counts)


def check(history: dict) -> Result:
    """Count ``history`` (workload.py's format) as the module docstring says."""
    publishes = {}
    for record in history["publishes"]:
        outcome = "unknown" if record["outcome"] == "pending" else record["outcome"]
        if outcome not in OUTCOMES:
            raise ValueError(f"{record['id']}: outcome {record['outcome']!r} is none of {OUTCOMES}")
        if record["id"] in publishes:
            raise ValueError(f"{record['id']} published twice: ids must be unique")
        publishes[record["id"]] = (record["publisher"], record["seq"], outcome)
    outcomes = Counter(outcome for _, _, outcome in publishes.values())

    deliveries = history["deliveries"]
    in_time_order = sorted(range(len(deliveries)), key=lambda i: (deliveries[i]["time"], i))
    first_of: dict[str, int] = {}
    for i in in_time_order:
        first_of.setdefault(deliveries[i]["id"], i)
    delivered = set(first_of)

    confirmed = {i for i, (_, _, outcome) in publishes.items() if outcome == "confirmed"}
    lost_ids = sorted(confirmed - delivered)
    unexpected_ids = sorted(delivered - set(publishes))
    pairs = _reordered(deliveries, in_time_order, first_of, publishes)
    return Result(
        published=len(publishes), confirmed=outcomes["confirmed"], nacked=outcomes["nacked"],
        unknown=outcomes["unknown"], delivered=len(delivered), deliveries=len(deliveries),
        redelivered=sum(1 for d in deliveries if d["redelivered"]),
        lost=len(lost_ids), unexpected=len(unexpected_ids), duplicates=len(deliveries) - len(delivered),
        reordered=len(pairs),
        unknown_delivered=sum(1 for i in delivered if i in publishes and publishes[i][2] == "unknown"),
        nacked_delivered=sum(1 for i in delivered if i in publishes and publishes[i][2] == "nacked"),
        lost_ids=lost_ids, unexpected_ids=unexpected_ids, reordered_pairs=pairs)


def _reordered(deliveries: list[dict], in_time_order: list[int], first_of: dict[str, int],
               publishes: dict) -> list[tuple[str, str]]:
    """(B, A) for each reordered id B, A being the smallest confirmed id of B's publisher whose
    first delivery follows B's in the same consumer's stream (module docstring)."""
    # per (consumer, publisher): the (seq, id, confirmed) of first, not redelivered deliveries, in time order
    streams: dict[tuple[str, str], list[tuple[int, str, bool]]] = defaultdict(list)
    for i in in_time_order:
        delivery = deliveries[i]
        if first_of[delivery["id"]] != i or delivery["redelivered"] or delivery["id"] not in publishes:
            continue
        publisher, seq, outcome = publishes[delivery["id"]]
        streams[(delivery["consumer"], publisher)].append((seq, delivery["id"], outcome == "confirmed"))
    pairs = []
    for stream in streams.values():
        smallest_after: tuple[int, str] | None = None  # the smallest confirmed (seq, id) later in the stream
        for seq, message, confirmed in reversed(stream):
            if smallest_after is not None and smallest_after[0] < seq:
                pairs.append((message, smallest_after[1]))
            if confirmed and (smallest_after is None or seq < smallest_after[0]):
                smallest_after = (seq, message)
    return sorted(pairs)


def overlapping_leaders(intervals) -> list[tuple[tuple, tuple]]:
    """Pairs of lease intervals of one queue that overlap in time although they belong to two
    nodes, or to two epochs (of one node or two): two leaders at once.

    ``intervals`` are ``(queue, node, epoch, start, end)``, ``start`` and ``end`` on one clock; an
    ``end`` of None is an interval still open (to infinity). Intervals are half-open,
    [start, end): one that ends exactly when the next starts (end == start, a clean hand-over)
    does not overlap it, and an empty one (start == end) overlaps nothing. The same (queue, node,
    epoch) listed twice is one leader seen twice, not two. Each pair is (earlier start, later start)."""
    by_queue: dict = defaultdict(list)
    for interval in intervals:
        by_queue[interval[0]].append(tuple(interval))
    pairs = []
    for leases in by_queue.values():
        leases.sort(key=lambda lease: (lease[3], _end(lease)))
        for i, first in enumerate(leases):
            for second in leases[i + 1:]:
                if second[3] >= _end(first):
                    break  # sorted by start: no later lease starts before ``first`` ends either
                if _end(second) > first[3] and second[1:3] != first[1:3]:
                    pairs.append((first, second))
    return pairs


def _end(lease: tuple) -> float:
    return math.inf if lease[4] is None else lease[4]


def offset_conflicts(history: dict) -> dict:
    """A stream's offsets checked (deliveries that carry one): ``{"offsets": n, "conflicts":
    [(offset, [ids])], "moved": [(id, [offsets])], "consumer_duplicates": n}``. Two ids at one
    offset (an offset that named another record after a failover) or one id at two offsets (a
    message appended twice) must not happen; a consumer reading an offset twice (it went on from
    its last recorded offset, which it had already had) is counted."""
    ids_at: dict = defaultdict(set)
    offsets_of: dict = defaultdict(set)
    per_consumer: Counter = Counter()
    for d in history["deliveries"]:
        offset = d.get("offset")
        if offset is None:
            continue
        ids_at[offset].add(d["id"])
        offsets_of[d["id"]].add(offset)
        per_consumer[(d["consumer"], offset)] += 1
    return {"offsets": len(ids_at),
            "conflicts": sorted((o, sorted(ids)) for o, ids in ids_at.items() if len(ids) > 1),
            "moved": sorted((i, sorted(os)) for i, os in offsets_of.items() if len(os) > 1),
            "consumer_duplicates": sum(n - 1 for n in per_consumer.values())}


def percentiles(values, ps=(50, 99)) -> dict:
    """``{p: the p-th percentile of values}`` by the nearest-rank method (a value that occurred:
    the smallest one with at least p % of the values at or below it); None for no values."""
    ordered = sorted(values)
    out = {}
    for p in ps:
        if not 0 <= p <= 100:
            raise ValueError(f"percentile {p} is not within 0..100")
        out[p] = ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1] if ordered else None
    return out
