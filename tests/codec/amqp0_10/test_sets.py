"""sequence-set values and serial arithmetic (warren.codec.amqp0_10.sets)."""

from hypothesis import given, strategies as st

from warren.codec.amqp0_10.sets import SEQ_MOD, SequenceSet, serial_add, serial_diff, serial_lt


def test_serial_arithmetic_wraps():
    assert serial_add(SEQ_MOD - 1, 1) == 0
    assert serial_diff(0, SEQ_MOD - 1) == 1 and serial_diff(SEQ_MOD - 1, 0) == -1
    assert serial_lt(SEQ_MOD - 5, 3) and not serial_lt(3, SEQ_MOD - 5)


def test_a_range_through_the_wrap_holds_its_ids():
    s = SequenceSet([(SEQ_MOD - 2, 1)])
    assert list(s) == [SEQ_MOD - 2, SEQ_MOD - 1, 0, 1]
    assert 0 in s and SEQ_MOD - 1 in s and 2 not in s and len(s) == 4


@given(st.sets(st.integers(0, 50), max_size=20), st.integers(0, SEQ_MOD - 1))
def test_of_builds_the_fewest_ranges_holding_exactly_the_ids(offsets, base):
    ids = {(base + o) % SEQ_MOD for o in offsets}
    s = SequenceSet.of(ids)
    assert set(s) == ids and len(s) == len(ids)
    # no two ranges touch: each gap between them is at least one id
    assert len(s.ranges) == sum(1 for i in ids if (i - 1) % SEQ_MOD not in ids) or len(ids) == SEQ_MOD
