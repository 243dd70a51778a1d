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
