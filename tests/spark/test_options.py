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
