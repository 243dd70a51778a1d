"""checker.py over synthetic histories: each count, each order case, the lease intervals and the
percentiles, every expected value written out."""

from __future__ import annotations

import pytest

from tests.cluster.faults.checker import check, overlapping_leaders, percentiles


def history(publishes: list[tuple[str, int, str]], deliveries: list[tuple]) -> dict:
    """A history in workload.py's format: ``publishes`` as (publisher, seq, outcome);
    ``deliveries`` as (id, redelivered, consumer) recorded one time unit apart in list order, or
    (id, redelivered, consumer, time)."""
    return {
        "queue": "q", "urls": ["amqp://x"],
        "publishes": [{"id": f"{p}-{n}", "publisher": p, "seq": n, "url": "amqp://x", "outcome": outcome,
                       "sent": float(i), "answered": float(i)} for i, (p, n, outcome) in enumerate(publishes)],
        "deliveries": [{"id": d[0], "redelivered": d[1], "consumer": d[2], "url": "amqp://x",
                        "time": float(d[3] if len(d) > 3 else i)} for i, d in enumerate(deliveries)],
        "stats": {},
    }


def confirmed(publisher: str, count: int) -> list[tuple[str, int, str]]:
    return [(publisher, n, "confirmed") for n in range(count)]


def test_a_clean_history_counts_every_id_once_and_is_ok():
    result = check(history(confirmed("p0", 3) + confirmed("p1", 2),
                           [("p0-0", False, "c0"), ("p1-0", False, "c1"), ("p0-1", False, "c0"),
                            ("p1-1", False, "c0"), ("p0-2", False, "c1")]))
    assert (result.published, result.confirmed, result.nacked, result.unknown) == (5, 5, 0, 0)
    assert (result.delivered, result.deliveries, result.redelivered) == (5, 5, 0)
    assert (result.lost, result.unexpected, result.duplicates, result.reordered) == (0, 0, 0, 0)
    assert result.ok
    assert result.summary() == ("ok: published=5 confirmed=5 nacked=0 unknown=0 delivered=5 deliveries=5 "
                                "redelivered=0 lost=0 unexpected=0 duplicates=0 reordered=0 "
                                "unknown_delivered=0 nacked_delivered=0")


def test_a_confirmed_id_never_delivered_is_lost():
    result = check(history(confirmed("p0", 3), [("p0-0", False, "c0"), ("p0-2", False, "c0")]))
    assert (result.lost, result.lost_ids) == (1, ["p0-1"])
    assert not result.ok
    assert result.summary().startswith("FAILED: ") and " lost=1 " in result.summary()


def test_an_id_delivered_that_nobody_published_is_unexpected():
    result = check(history(confirmed("p0", 1), [("p0-0", False, "c0"), ("p9-4", False, "c1")]))
    assert (result.unexpected, result.unexpected_ids, result.lost) == (1, ["p9-4"], 0)
    assert result.delivered == 2
    assert not result.ok


def test_duplicates_are_deliveries_beyond_the_first_and_do_not_fail_the_run():
    result = check(history(confirmed("p0", 2),
                           [("p0-0", False, "c0"), ("p0-0", True, "c1"), ("p0-1", False, "c0"),
                            ("p0-0", False, "c0")]))
    assert (result.duplicates, result.deliveries, result.delivered, result.redelivered) == (2, 4, 2, 1)
    assert result.ok


def test_nacked_and_unknown_ids_are_counted_and_never_lost():
    result = check(history([("p0", 0, "confirmed"), ("p0", 1, "nacked"), ("p0", 2, "unknown"),
                            ("p0", 3, "pending"), ("p0", 4, "unknown"), ("p0", 5, "nacked")],
                           [("p0-0", False, "c0"), ("p0-2", False, "c0"), ("p0-5", False, "c0")]))
    assert (result.published, result.confirmed, result.nacked, result.unknown) == (6, 1, 2, 3)
    assert (result.unknown_delivered, result.nacked_delivered) == (1, 1)
    assert (result.lost, result.unexpected) == (0, 0)
    assert result.ok


def test_an_outcome_the_workload_never_writes_is_refused():
    with pytest.raises(ValueError, match="maybe"):
        check(history([("p0", 0, "maybe")], []))


def test_a_smaller_confirmed_id_delivered_later_without_redelivery_is_reordered():
    result = check(history(confirmed("p0", 4),
                           [("p0-0", False, "c0"), ("p0-2", False, "c0"), ("p0-3", False, "c0"),
                            ("p0-1", False, "c0")]))
    assert result.reordered == 2
    assert result.reordered_pairs == [("p0-2", "p0-1"), ("p0-3", "p0-1")]
    assert result.ok  # reported, not a failure of the run


def test_order_after_a_redelivery_is_not_reordering():
    # the smaller id came back redelivered: it went back to the queue's head, out of its place
    late_redelivered = check(history(confirmed("p0", 2), [("p0-1", False, "c0"), ("p0-0", True, "c0")]))
    assert late_redelivered.reordered == 0
    # the larger id is the redelivered one: its first delivery was a redelivery
    early_redelivered = check(history(confirmed("p0", 2), [("p0-1", True, "c0"), ("p0-0", False, "c0")]))
    assert early_redelivered.reordered == 0
    # only an id's first delivery counts: p0-1's fresh second delivery comes after p0-0's
    second_delivery = check(history(confirmed("p0", 2), [("p0-1", True, "c0"), ("p0-0", False, "c0"),
                                                         ("p0-1", False, "c0")]))
    assert (second_delivery.reordered, second_delivery.duplicates) == (0, 1)


def test_a_smaller_id_that_was_not_confirmed_may_come_later():
    result = check(history([("p0", 0, "unknown"), ("p0", 1, "confirmed"), ("p0", 2, "nacked"),
                            ("p0", 3, "confirmed")],
                           [("p0-1", False, "c0"), ("p0-3", False, "c0"), ("p0-0", False, "c0"),
                            ("p0-2", False, "c0")]))
    assert result.reordered == 0


def test_order_is_compared_within_one_consumer_and_one_publisher():
    # c1 recorded p0-1 before c0 recorded p0-0: two threads, no order between them
    across_consumers = check(history(confirmed("p0", 2), [("p0-1", False, "c1"), ("p0-0", False, "c0")]))
    assert across_consumers.reordered == 0
    # two publishers interleave freely
    across_publishers = check(history(confirmed("p0", 2) + confirmed("p1", 2),
                                      [("p1-1", False, "c0"), ("p0-1", False, "c0"), ("p0-0", False, "c1"),
                                       ("p1-0", False, "c1")]))
    assert across_publishers.reordered == 0
    same_consumer = check(history(confirmed("p0", 2) + confirmed("p1", 2),
                                  [("p1-1", False, "c0"), ("p0-0", False, "c0"), ("p1-0", False, "c0")]))
    assert same_consumer.reordered_pairs == [("p1-1", "p1-0")]


def test_first_delivery_is_the_earliest_by_time_not_by_place_in_the_list():
    # listed out of order: p0-0 at time 5, p0-1 at time 1 (then again at 9); p0-1 came first
    result = check(history(confirmed("p0", 2), [("p0-0", False, "c0", 5), ("p0-1", False, "c0", 9),
                                                 ("p0-1", False, "c0", 1)]))
    assert result.reordered_pairs == [("p0-1", "p0-0")]
    assert result.duplicates == 1


def test_overlapping_leaders_of_one_queue_on_two_nodes():
    a = ("q1", "a", 1, 0.0, 10.0)
    b = ("q1", "b", 2, 9.5, 20.0)
    assert overlapping_leaders([b, a]) == [(a, b)]


def test_touching_leases_and_other_queues_do_not_overlap():
    hand_over = [("q1", "a", 1, 0.0, 10.0), ("q1", "b", 2, 10.0, 20.0), ("q1", "c", 3, 20.0, None)]
    assert overlapping_leaders(hand_over) == []
    other_queues = [("q1", "a", 1, 0.0, 10.0), ("q2", "b", 1, 5.0, 20.0)]
    assert overlapping_leaders(other_queues) == []
    empty = [("q1", "a", 1, 5.0, 5.0), ("q1", "b", 2, 5.0, 8.0), ("q1", "c", 3, 0.0, 5.0)]
    assert overlapping_leaders(empty) == []


def test_an_open_lease_overlaps_every_later_one():
    open_lease = ("q1", "a", 1, 0.0, None)
    later = ("q1", "b", 2, 1000.0, 1001.0)
    much_later = ("q1", "c", 3, 5000.0, None)
    assert overlapping_leaders([much_later, later, open_lease]) == [
        (open_lease, later), (open_lease, much_later)]


def test_one_node_leading_two_epochs_at_once_overlaps_but_a_lease_seen_twice_does_not():
    twice = [("q1", "a", 4, 0.0, 10.0), ("q1", "a", 4, 2.0, 8.0)]
    assert overlapping_leaders(twice) == []
    two_epochs = [("q1", "a", 4, 0.0, 10.0), ("q1", "a", 5, 2.0, 12.0)]
    assert overlapping_leaders(two_epochs) == [(two_epochs[0], two_epochs[1])]


def test_percentiles_by_nearest_rank():
    values = [float(v) for v in range(100, 0, -1)]  # 1 .. 100, unsorted
    assert percentiles(values) == {50: 50.0, 99: 99.0}
    assert percentiles([3.0, 1.0, 2.0], ps=(0, 50, 100)) == {0: 1.0, 50: 2.0, 100: 3.0}
    assert percentiles([7.0]) == {50: 7.0, 99: 7.0}
    assert percentiles([4.0, 1.0, 3.0, 2.0]) == {50: 2.0, 99: 4.0}  # the 99th of four is the largest
    assert percentiles([]) == {50: None, 99: None}
    with pytest.raises(ValueError):
        percentiles([1.0], ps=(101,))


def test_offset_conflicts_names_two_ids_at_one_offset_one_id_at_two_and_a_consumers_rereads():
    from tests.cluster.faults.checker import offset_conflicts

    def d(i, offset, consumer="c0"):
        return {"id": i, "offset": offset, "consumer": consumer, "redelivered": False, "time": 0.0}
    clean = {"deliveries": [d("p0-0", 0), d("p0-1", 1), d("p0-0", 0, "c1"), d("p0-1", 1, "c1")]}
    assert offset_conflicts(clean) == {"offsets": 2, "conflicts": [], "moved": [], "consumer_duplicates": 0}
    bad = {"deliveries": [d("p0-0", 0), d("p0-1", 1), d("p0-9", 1, "c1"), d("p0-0", 5, "c1"), d("p0-1", 1)]}
    found = offset_conflicts(bad)
    assert found["conflicts"] == [(1, ["p0-1", "p0-9"])]
    assert found["moved"] == [("p0-0", [0, 5])]
    assert found["consumer_duplicates"] == 1  # c0 read offset 1 twice
    # deliveries of a queue (no offset) are not counted
    assert offset_conflicts({"deliveries": [{"id": "x", "consumer": "c0"}]})["offsets"] == 0
