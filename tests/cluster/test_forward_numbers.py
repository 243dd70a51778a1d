"""The numbers on the records of messages one node sends another (warren/cluster/
forward_numbers.py, used by reach.py's ``send_forward`` and ``sync``): each record names the
sender's incarnation, its number and the last number whose confirms the sender settled; a sync
names the last number sent, and the receiving node answers whether every record up to it
arrived. The rule is checked here; the fault harness (tests/cluster/faults) cuts real links
under confirmed publishing and counts what was lost: 0."""

from warren.cluster.forward_numbers import Arrived, Sent


def receiver() -> Arrived:
    return Arrived()


def arrive(arrived: Arrived, node: str, incarnation: str, *numbers: int, settled: int = 0) -> None:
    for n in numbers:
        arrived.record(node, (incarnation, n, settled))


def missing(arrived: Arrived, node: str, incarnation: str, upto: int, settled: int = 0) -> bool:
    return arrived.missing(node, (incarnation, upto, settled))


def test_every_record_arrived_in_order_is_a_sync_that_holds():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2, 3)
    assert not missing(r, "n3", "i1", 3)
    assert not missing(r, "n3", "i1", 2)  # (a sync asked before the last record went)


def test_a_record_lost_on_a_broken_link_makes_the_next_sync_a_nack_once():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    arrive(r, "n3", "i1", 4)  # 3 went down with the old link; 4 came on the new one
    assert missing(r, "n3", "i1", 4)
    arrive(r, "n3", "i1", 5)
    assert not missing(r, "n3", "i1", 5, settled=2)  # what follows is judged on its own


def test_the_last_records_lost_before_the_sync_on_a_new_link():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    assert missing(r, "n3", "i1", 4)  # 3 and 4 never came
    arrive(r, "n3", "i1", 3)  # late, from the old link: already judged, no new gap
    arrive(r, "n3", "i1", 5)
    assert not missing(r, "n3", "i1", 5)


def test_a_number_skipped_by_the_sender_is_a_nack():
    # messages dropped unsent when the link was lost: the sender skips their number (node_lost)
    r = receiver()
    arrive(r, "n3", "i1", 1)
    assert missing(r, "n3", "i1", 2)


def test_a_restarted_sender_starts_again():
    r = receiver()
    arrive(r, "n3", "i1", 1, 2)
    arrive(r, "n3", "i2", 1)  # n3's process started again: its numbering too
    assert not missing(r, "n3", "i2", 1)


def test_a_restarted_receiver_counts_on_from_the_last_sync_answered():
    fresh = receiver()  # this node started again: n3's numbers go on from where they were
    arrive(fresh, "n3", "i2", 8, 9, settled=7)  # 1-7 were settled (acked or nacked) with this node's previous process
    assert not missing(fresh, "n3", "i2", 9, settled=7)
    lost = receiver()
    arrive(lost, "n3", "i2", 9, settled=7)  # 8 went to the previous process after the last settling
    assert missing(lost, "n3", "i2", 9, settled=7)
    nothing_new = receiver()
    assert not missing(nothing_new, "n3", "i2", 7, settled=7)
    assert missing(nothing_new, "n3", "i2", 8, settled=7)  # 8 went to the previous process only


def test_a_sync_with_nothing_sent_and_one_from_another_node_are_apart():
    r = receiver()
    assert not missing(r, "n2", "j1", 0)
    assert not r.missing("n2", None)  # (workers' syncs name nothing)
    arrive(r, "n3", "i1", 1)
    assert missing(r, "n2", "j1", 1)
    assert not missing(r, "n3", "i1", 1)


def test_the_sending_side_numbers_skips_and_settles():
    sent, arrived = Sent(), Arrived()
    arrived.record("n1", sent.next("n2"))
    arrived.record("n1", sent.next("n2"))
    assert sent.sync_terms("n2")[1:] == (2, 0)
    assert not arrived.missing("n1", sent.sync_terms("n2"))
    sent.settled("n2", 2)
    sent.skip("n2")  # dropped unsent
    arrived.record("n1", sent.next("n2"))
    assert arrived.missing("n1", sent.sync_terms("n2"))
    sent.settled("n2", 4)
    restarted = Arrived()  # the receiver started again: it counts on from the settled number
    restarted.record("n1", sent.next("n2"))
    assert not restarted.missing("n1", sent.sync_terms("n2"))


# --- which confirm a refused message is (Confirming, the sender; Refusals, the receiver) ----------

class _Confirms:
    def __init__(self, name: str) -> None:
        self.name = name


def test_a_refusal_names_its_record_and_position_and_costs_that_confirm_only():
    """The sender notes each forwarded message's confirm as its channel publishes it; the
    receiver notes the record and position of what a full queue refused; the sync's answer maps
    back to exactly those confirms. A refused message whose confirm was not noted (a publisher
    without confirms, a message held between leaders) makes the answer say "not known", and
    every confirm waiting is a nack then, as before; a refusal whose position is not known costs
    its record's confirms; answered records are forgotten."""
    from warren.cluster.forward_numbers import Confirming, Refusals
    sender, receiver = Confirming(), Refusals()
    a, b = _Confirms("a"), _Confirms("b")
    m1, m2, m3, m4, unconfirmed = object(), object(), object(), object(), object()
    sender.routed(m1, a, 1)
    sender.routed(m2, b, 7)
    sender.routed(m3, a, 2)
    sender.sent("n1", 1, [m1, m2, unconfirmed])
    sender.sent("n1", 2, [m3])
    sender.unsent()
    sender.routed(m4, a, 3)
    sender.sent("n1", 3, [m4])
    sender.unsent()
    sender.sent("n1", 4, [unconfirmed])  # a record of messages with no confirm: nothing noted

    receiver.taking("n2", ("inc", 1, 0))
    receiver.refused("n2", 1)
    receiver.refused("n2", 2)
    receiver.taking("n2", None)
    receiver.taking("n2", ("inc", 3, 0))
    receiver.refused("n2", None)
    receiver.taking("n2", None)
    answer = receiver.answer("n2")
    assert answer == [(1, 1), (1, 2), (3, None)]
    assert receiver.answer("n2") is None  # told once
    assert sender.refused("n1", answer) is None  # position 2 of record 1: no confirm noted
    assert sender.refused("n1", [(1, 1), (3, None)]) == [(b, 7), (a, 3)]
    assert sender.refused("n1", [(4, 0)]) is None  # a record with nothing noted: whose is not known

    sender.settled("n1", 2)
    assert sender.refused("n1", [(3, 0)]) == [(a, 3)]
    assert sender.refused("n1", [(1, 0)]) is None  # record 1 answered and forgotten
    receiver.refused("n2", 0)  # outside a record: its number is not known
    assert receiver.answer("n2") == [(None, 0)]
