"""The stream filter's parts (warren/broker/queues/stream_filter.py): the Bloom filter of each
block of offsets, the runs of blocks a filtered consumer reads, and the consume arguments.
Over a socket with pika: tests/e2e/test_stream_filtering.py."""

from __future__ import annotations

import random

import pytest

from warren.broker.queues.stream_filter import BLOCK, FilterIndex, consumer_filter, filter_size
from warren.errors import PreconditionFailed


def want(*values, unfiltered=False, bits=128):
    return consumer_filter("queue 's'", {"x-stream-filter": list(values), "x-stream-match-unfiltered": unfiltered},
                           bits)


def test_a_block_holding_a_value_always_may_match_it():
    rng = random.Random(1)
    index = FilterIndex(16, 0)
    values = [f"v{i}" for i in range(50)]
    placed = {}
    for offset in range(BLOCK * 40):
        v = rng.choice(values)
        index.add(offset, v)
        placed.setdefault(offset // BLOCK, set()).add(v)
    for block, held in placed.items():
        for v in held:
            assert index.may_match(block, want(v)), (block, v)  # a Bloom filter has no false negatives


def test_blocks_without_the_value_are_skipped():
    index = FilterIndex(16, 0)
    for offset in range(BLOCK * 10):
        index.add(offset, "emea" if offset // BLOCK in (3, 4, 8) else "amer")
    last = BLOCK * 10 - 1
    assert index.candidates(0, last, want("emea")) == (3 * BLOCK, 5 * BLOCK)
    assert index.candidates(5 * BLOCK, last, want("emea")) == (8 * BLOCK, 9 * BLOCK)
    assert index.candidates(9 * BLOCK, last, want("emea")) == (last + 1, last + 1)
    assert index.candidates(3 * BLOCK + 7, last, want("emea")) == (3 * BLOCK + 7, 5 * BLOCK)


def test_unfiltered_messages_match_only_when_asked():
    index = FilterIndex(16, 0)
    for offset in range(BLOCK * 3):
        index.add(offset, None if offset // BLOCK == 1 else "amer")
    last = BLOCK * 3 - 1
    assert index.candidates(0, last, want("emea")) == (last + 1, last + 1)
    assert index.candidates(0, last, want("emea", unfiltered=True)) == (BLOCK, 2 * BLOCK)


def test_blocks_from_before_the_index_started_are_never_skipped():
    index = FilterIndex(16, BLOCK + 5)  # a restart: offsets below BLOCK + 5 were written before it
    for offset in range(BLOCK + 5, BLOCK * 4):
        index.add(offset, "amer")
    assert index.candidates(0, BLOCK * 4 - 1, want("emea")) == (0, 2 * BLOCK)


def test_retention_forgets_whole_blocks_below_the_first_offset():
    index = FilterIndex(16, 0)
    for offset in range(BLOCK * 3):
        index.add(offset, "x" if offset % 2 else None)
    index.forget_before(BLOCK + 1)
    assert sorted(index.blooms) == [1, 2] and sorted(index.unfiltered) == [1, 2]


@pytest.mark.parametrize("arguments, error", [
    ({"x-stream-filter": 7}, "x-stream-filter"),
    ({"x-stream-filter": []}, "x-stream-filter"),
    ({"x-stream-filter": ["a", 1]}, "x-stream-filter"),
    ({"x-stream-filter": "a", "x-stream-match-unfiltered": "yes"}, "x-stream-match-unfiltered"),
])
def test_wrong_consume_arguments_are_406_naming_the_argument(arguments, error):
    with pytest.raises(PreconditionFailed, match=f"invalid arg '{error}'"):
        consumer_filter("queue 's' in vhost '/'", arguments, 128)


def test_no_filter_argument_means_no_filter_and_sizes_stay_in_rabbitmqs_range():
    assert consumer_filter("q", {"x-stream-offset": "first"}, 128) is None
    assert consumer_filter("q", None, 128) is None
    assert filter_size({}) == 16 and filter_size({"x-stream-filter-size-bytes": 32}) == 32
    assert filter_size({"x-stream-filter-size-bytes": 1000}) == 255


def test_the_records_endpoints_view_reads_only_blocks_that_may_match(tmp_path):
    """FilteredRecords over a real StreamStore: the answer holds whole blocks holding a wanted
    routing key or value, none of the others, and says where to go on from."""
    from warren.broker.queues.stream_filter import FilteredRecords, records_filter
    from warren.store.stream_format import parse_entries
    from warren.store.stream_store import StreamStore

    store = StreamStore(tmp_path / "s", fsync=False)
    index = FilterIndex(16, 0)
    try:
        for offset in range(BLOCK * 20):
            key = "hot" if offset // BLOCK in (2, 3, 11) else "cold"
            value = "emea" if offset // BLOCK == 17 else None
            assert store.append(b"\x00\x01k\x00\x00\x00\x00m", 0) == offset
            index.add(offset, value, key)
        store.sync()

        def offsets_read(query, start=0, end=None, max_records=10_000):
            view = FilteredRecords(store, index, records_filter(query, index.bits))
            first, count, data = view.read_raw(start, max_records, 1 << 20, end)
            got = [o for o, _ts, _rec in parse_entries(data)]
            assert len(got) == count
            return got, first + count

        got, following = offsets_read({"routing_key": "hot"})
        assert got == [*range(2 * BLOCK, 4 * BLOCK), *range(11 * BLOCK, 12 * BLOCK)]
        assert following == 20 * BLOCK
        got, following = offsets_read({"routing_key": "hot"}, max_records=BLOCK)  # a page: go on from its end
        assert got == list(range(2 * BLOCK, 3 * BLOCK)) and following == 3 * BLOCK
        got, following = offsets_read({"filter": "emea"}, end=15 * BLOCK)
        assert got == [] and following == 15 * BLOCK
        got, _ = offsets_read({"filter": "emea"})
        assert got == list(range(17 * BLOCK, 18 * BLOCK))
        with pytest.raises(ValueError, match="match_unfiltered"):
            records_filter({"filter": "x", "match_unfiltered": "maybe"}, 128)
    finally:
        store.close()
