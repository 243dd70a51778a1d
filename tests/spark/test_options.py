"""The one options module of the readers, the drain and the writer (warren/spark/options.py)."""

from __future__ import annotations

import pytest

from warren.broker.dedup import DEFAULT_HEADER
from warren.spark.options import (
    DrainOptions, OptionError, WriteOptions, bool_option, float_option, int_option, option_map,
)


def test_keys_are_case_insensitive_and_empty_means_not_given():
    o = option_map({"confirmWindow": 7, "Mandatory": "ON", "timeout": ""})
    assert int_option(o, "confirmWindow", 1) == 7
    assert bool_option(o, "mandatory", False) is True
    assert float_option(o, "timeout", 2.5) == 2.5
    assert int_option(o, "missing", None) is None


@pytest.mark.parametrize("fn, value, message", [
    (int_option, "x", "option k must be an integer, not 'x'"),
    (int_option, "0", "option k must be at least 1, not 0"),
    (float_option, "nan", "option k must be at least"),
    (float_option, "-1", "option k must be at least 0.001"),
    (bool_option, "maybe", "option k must be true or false, not 'maybe'"),
])
def test_bad_values_name_the_option(fn, value, message):
    with pytest.raises(OptionError, match=message):
        fn(option_map({"K": value}), "k", None if fn is int_option else 1)


def test_the_writer_uses_it():
    with pytest.raises(OptionError, match="option confirmWindow must be at least 1"):
        WriteOptions.from_options({"confirmwindow": "0"})
    assert WriteOptions.from_options({"confirmWindow": "3", "mandatory": "yes"}).confirm_window == 3


def test_the_drain_uses_it():
    with pytest.raises(OptionError, match="needs the queue option"):
        DrainOptions.from_options({})
    with pytest.raises(OptionError, match="option numPartitions must be an integer"):
        DrainOptions.from_options({"queue": "q", "numpartitions": "two"})
    o = DrainOptions.from_options({"QUEUE": "q", "maxRecords": "10", "numPartitions": "3"})
    assert (o.queue, o.max_records, o.partitions, o.batch_size) == ("q", 10, 3, 1000)


def test_the_writer_marks_messages_with_the_brokers_deduplication_header():
    # the constant comes from warren.codec (spark must not import the broker): same value
    assert WriteOptions().dedup_header == DEFAULT_HEADER


# --- Kafka's option names and semantics (issue 28 point 3) --------------------------------------

URL = {"url": "amqp://guest:guest@127.0.0.1:5672/%2F", "httpUrl": "http://127.0.0.1:1"}


def _read(batch: bool = True, **options):
    from warren.spark.options import parse_read_options

    return parse_read_options({**URL, "stream": "a,b", **options}, batch=batch)


def test_starting_timestamps_take_kafkas_precedence():
    from warren.spark.options import EARLIEST, AtTimestamp

    o = _read(startingOffsets="5", startingOffsetsByTimestamp='{"a": 1000}')
    assert o.starting == {"a": AtTimestamp(1000, "error"), "b": 5}
    o = _read(batch=False, startingOffsetsByTimestamp='{"a": 1000}', startingTimestamp="2000",
              startingOffsetsByTimestampStrategy="LATEST")
    assert o.starting == {"a": AtTimestamp(2000, "latest"), "b": AtTimestamp(2000, "latest")}
    assert _read().starting == {"a": EARLIEST, "b": EARLIEST}


def test_ending_timestamps_are_for_batch_reads():
    from warren.spark.options import LATEST, AtTimestamp

    assert _read(endingTimestamp="3000").ending == {"a": AtTimestamp(3000, "latest"), "b": AtTimestamp(3000, "latest")}
    assert _read(endingOffsetsByTimestamp='{"b": 7}').ending == {"a": LATEST, "b": AtTimestamp(7, "latest")}
    for key in ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"):
        with pytest.raises(OptionError, match=f"option {key} is for batch reads"):
            _read(batch=False, **{key: "1"})


@pytest.mark.parametrize("options, message", [
    ({"startingTimestamp": "soon"}, "option startingTimestamp: expected a timestamp in milliseconds"),
    ({"startingTimestamp": "-1"}, "a timestamp is at least 0"),
    ({"startingOffsetsByTimestamp": '{"c": 1}'}, "names streams that are not read: c"),
    ({"startingOffsetsByTimestamp": "[1]"}, "must be a JSON object"),
    ({"startingOffsetsByTimestampStrategy": "earliest"}, "must be error or latest"),
    ({"maxRecordsPerTrigger": "5", "maxOffsetsPerTrigger": "6"}, "disagree"),
])
def test_bad_timestamp_options_name_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        _read(batch=False, **options)


def test_kafkas_names_are_aliases():
    assert _read(batch=False, maxOffsetsPerTrigger="500").max_records_per_trigger == 500
    assert _read(batch=False, maxOffsetsPerTrigger="500", maxRecordsPerTrigger="500").max_records_per_trigger == 500
    assert _read(minPartitions="4").min_partitions == 4


def test_min_partitions_cuts_a_batch_into_at_least_that_many_tasks():
    from warren.spark.read.planning import per_partition

    assert per_partition(1000, 100_000, None) == 100_000
    assert per_partition(1000, 100_000, 4) == 250
    assert per_partition(1001, 100_000, 4) == 251  # 4 tasks, the last one shorter
    assert per_partition(1000, 100, 4) == 100  # recordsPerPartition still bounds a task
    assert per_partition(3, 100, 8) == 1
    # without recordsPerPartition (batch reads): equal tasks of at most PARTITION_BYTES
    mib = 1024 * 1024
    assert per_partition(1_000_000, None, None, 170 * mib) == 500_000  # two tasks, not 789k + 211k
    assert per_partition(1000, None, None, 1 * mib) == 1000
    assert per_partition(1000, None, 4, 1 * mib) == 250
    assert per_partition(0, None, None, 0) == 1
