"""The numbers on the records of messages one node sends another (warren/cluster/reach.py
``send_forward``): a sync names the last number sent, and the receiving node answers whether
every record up to it arrived. The rule is checked here on the receiving side's bookkeeping;
the fault harness (tests/cluster/faults) cuts real links under confirmed publishing and counts
what was lost: 0."""

from warren.cluster.reach import NodeReach


def receiver() -> NodeReach:
    return NodeReach(cluster=None, broker=None)


def arrive(reach: NodeReach, node: str, incarnation: str, *numbers: int) -> None:
    for n in numbers:
        reach._forward_arrived(node, (b"batch", (incarnation, n)))


def test_every_record_arrived_in_order_is_a_sync_that_holds():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2, 3)
    assert not r._forwards_missing("n3", ("i1", 3))
    assert not r._forwards_missing("n3", ("i1", 2))  # (a sync asked before the last record went)


def test_a_record_lost_on_a_broken_link_makes_the_next_sync_a_nack_once():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    arrive(r, "n3", "i1", 4)  # 3 went down with the old link; 4 came on the new one
    assert r._forwards_missing("n3", ("i1", 4))
    arrive(r, "n3", "i1", 5)
    assert not r._forwards_missing("n3", ("i1", 5))  # what follows is judged on its own


def test_the_last_records_lost_before_the_sync_on_a_new_link():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    assert r._forwards_missing("n3", ("i1", 4))  # 3 and 4 never came
    arrive(r, "n3", "i1", 3)  # late, from the old link: already judged, no new gap
    arrive(r, "n3", "i1", 5)
    assert not r._forwards_missing("n3", ("i1", 5))


def test_a_number_skipped_by_the_sender_is_a_nack():
    # messages dropped unsent when the link was lost: the sender skips their number (node_lost)
    r = receiver()
    arrive(r, "n3", "i1", 1)
    assert r._forwards_missing("n3", ("i1", 2))


def test_a_restarted_sender_starts_again_and_a_restarted_receiver_nacks_once():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    arrive(r, "n3", "i2", 1)  # n3's process started again: its numbering too
    assert not r._forwards_missing("n3", ("i2", 1))
    fresh = receiver()  # this node started again: n3's numbers go on from where they were
    arrive(fresh, "n3", "i2", 7)
    assert fresh._forwards_missing("n3", ("i2", 7))
    arrive(fresh, "n3", "i2", 8)
    assert not fresh._forwards_missing("n3", ("i2", 8))


def test_a_sync_with_nothing_sent_and_one_from_another_node_are_apart():
    r = receiver()
    assert not r._forwards_missing("n2", ("j1", 0))
    assert not r._forwards_missing("n2", None)  # (workers' syncs name nothing)
    arrive(r, "n3", "i1", 1)
    assert r._forwards_missing("n2", ("j1", 1))
    assert not r._forwards_missing("n3", ("i1", 1))
