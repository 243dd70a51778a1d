"""Session bookkeeping of the 0-10 session layer (warren.protocol.amqp0_10.session.Session)."""

from hypothesis import given, strategies as st

from warren.codec.amqp0_10.sets import SEQ_MOD, SequenceSet
from warren.protocol.amqp0_10.session import Session


def test_completion_in_any_order_reports_everything_not_known_completed():
    s = Session(1, b"s")
    s.in_next = 5
    for i in (3, 0, 4):
        assert s.complete(i)
    assert not s.complete(3) and not s.complete(7)  # twice, or never received
    assert s.completed_set() == SequenceSet([(0, 0), (3, 4)])
    s.complete(1)
    s.complete(2)
    assert s.completed_set() == SequenceSet([(0, 4)])
    s.known_completed(SequenceSet([(0, 2)]))
    assert s.completed_set() == SequenceSet([(3, 4)])


@given(st.permutations(range(12)))
def test_whatever_the_order_all_completed_is_one_range(order):
    s = Session(1, b"s")
    s.command_point(SEQ_MOD - 6)  # through the wrap
    s.in_next += 12
    for k in order:
        s.complete(s.in_low - (s.in_low - (SEQ_MOD - 6)) + k)
    assert s.completed_set() == SequenceSet([(SEQ_MOD - 6, 5)])


def test_a_hostile_completed_range_only_covers_what_we_sent():
    s = Session(1, b"s")
    s.out_next = 3
    assert s.peer_completed(SequenceSet([(0, SEQ_MOD - 1)])) == [0, 1, 2]
    assert s.peer_completed(SequenceSet([(0, 2)])) == []
    assert s.out_low == 3 and not s.out_done


def test_syncs_complete_once_their_predecessors_have():
    s = Session(1, b"s")
    s.in_next = 3
    s.syncs.append(2)
    s.complete(1)
    assert s.in_low == 0 and 2 not in s.in_done
    s.complete(0)
    assert s.in_low == 3 and not s.syncs
