"""Offset arithmetic and option parsing of the readers (no Spark, no broker)."""

from __future__ import annotations

import pytest

from warren.spark.read.http_api import StreamInfo
from warren.spark.options import OptionError, parse_read_options
from warren.spark.read.planning import DataLossError, admit, resolve_offset, retained_start, split_range

URL = "amqp://bob:s%40cret@broker.example:5673/my%2Fvhost"


def info(first=10, last=99, size=100):
    return StreamInfo("s", first_offset=first, last_offset=last, next_offset=last + 1,
                      messages=last + 1 - first, bytes=(last + 1 - first) * size)


def test_options_are_read_case_insensitively_with_defaults():
    o = parse_read_options({"URL": URL, "Stream": "a, b", "MAXRECORDSPERTRIGGER": "50",
                            "startingoffsets": '{"a": 5}'}, batch=False)
    assert (o.user, o.password, o.vhost) == ("bob", "s@cret", "my/vhost")
    assert o.http_url == "http://broker.example:15672"
    assert o.streams == ("a", "b") and o.max_records_per_trigger == 50
    assert o.starting == {"a": 5, "b": "latest"} and o.fail_on_data_loss is True and o.transport == "http"
    batch = parse_read_options({"url": "amqp://h", "stream": "a", "endingOffsets": "-1", "httpPort": "8080"},
                               batch=True)
    assert batch.vhost == "/" and batch.starting == {"a": "earliest"} and batch.ending == {"a": "latest"}
    assert batch.http_url == "http://h:8080"


@pytest.mark.parametrize("options, message", [
    ({"stream": "a"}, "option url is required"),
    ({"url": "http://h", "stream": "a"}, "amqp:// URL"),
    ({"url": "amqp://h"}, "option stream is required"),
    ({"url": "amqp://h", "stream": "a,a"}, "names a stream twice"),
    ({"url": "amqp://h", "stream": "a", "startingOffsets": '{"b": 1}'}, "not read: b"),
    ({"url": "amqp://h", "stream": "a", "startingOffsets": "soon"}, "expected earliest, latest or an offset"),
    ({"url": "amqp://h", "stream": "a", "maxRecordsPerTrigger": "0"}, "at least 1"),
    ({"url": "amqp://h", "stream": "a", "failOnDataLoss": "maybe"}, "true or false"),
    ({"url": "amqp://h", "stream": "a", "transport": "smtp"}, "http or amqp"),
    ({"url": "amqp://h", "stream": "a", "endingOffsets": "5"}, "for batch reads"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(OptionError, match=message):
        parse_read_options(options, batch=False)


def test_resolve_offset():
    i = info(first=10, last=99)
    assert (resolve_offset("earliest", i), resolve_offset("latest", i), resolve_offset(42, i)) == (10, 100, 42)


def test_retained_start_fails_or_skips():
    assert retained_start("s", 12, 10, True) == 12
    with pytest.raises(DataLossError,
                       match=r"stream 's': offset 3 is no longer retained, the first retained offset is 10"):
        retained_start("s", 3, 10, True)
    assert retained_start("s", 3, 10, False) == 10


def test_admit_shares_records_evenly_and_passes_on_what_a_stream_cannot_use():
    start = {"a": 0, "b": 100, "c": 5}
    end = {"a": 1000, "b": 110, "c": 5}
    assert admit(start, end, None, None, {}) == end
    assert admit(start, end, 100, None, {}) == {"a": 90, "b": 110, "c": 5}
    assert admit(start, end, 4, None, {}) == {"a": 2, "b": 102, "c": 5}


def test_admit_by_bytes_uses_average_record_sizes_and_always_moves():
    start = {"a": 0, "b": 0}
    end = {"a": 1000, "b": 1000}
    assert admit(start, end, None, 10_000, {"a": 100.0, "b": 400.0}) == {"a": 50, "b": 12}
    assert admit(start, end, None, 1, {"a": 100.0, "b": 400.0}) == {"a": 1, "b": 1}
    assert admit(start, end, 10, 10_000, {"a": 100.0, "b": 400.0}) == {"a": 5, "b": 5}
    assert admit({"a": 7}, {"a": 7}, 1, 1, {}) == {"a": 7}


def test_split_range():
    assert [(r.start, r.end) for r in split_range("s", 10, 35, 10)] == [(10, 20), (20, 30), (30, 35)]
    assert split_range("s", 5, 5, 10) == []


def test_pyspark_can_find_the_source_by_its_module_name():
    """pyspark's lookup (pyspark/sql/worker/lookup_data_sources.py) imports every top-level
    module named pyspark_* and registers its DefaultSource under its name()."""
    from pkgutil import iter_modules

    from pyspark.sql.datasource import DataSource

    import pyspark_warren

    assert "pyspark_warren" in {m.name for m in iter_modules() if m.name.startswith("pyspark_")}
    assert issubclass(pyspark_warren.DefaultSource, DataSource)
    assert pyspark_warren.DefaultSource.name() == "warren"


def test_push_filters_turns_comparisons_into_ranges():
    import datetime

    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan, LessThanOrEqual

    from warren.spark.read.planning import push_filters

    utc = datetime.timezone.utc
    t = datetime.datetime(2024, 5, 1, 12, 0, 0, 500, tzinfo=utc)  # 0.5 ms past a millisecond
    filters = [GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 20), LessThanOrEqual(("offset",), 30),
               GreaterThan(("timestamp",), t), LessThanOrEqual(("timestamp",), t + datetime.timedelta(seconds=1)),
               In(("stream",), ("a", "b")), EqualTo(("stream",), "b"), IsNotNull(("offset",)),
               EqualTo(("body",), b"x")]
    pushed, remaining = push_filters(filters)
    ms = int(datetime.datetime(2024, 5, 1, 12, tzinfo=utc).timestamp() * 1000)
    assert (pushed.offset_from, pushed.offset_to) == (10, 20)
    assert (pushed.time_from_ms, pushed.time_to_ms) == (ms + 1, ms + 1001)
    assert pushed.streams == frozenset({"b"})
    # offsets and streams are exact; timestamps are checked again by Spark; the rest is Spark's
    assert remaining == [filters[3], filters[4], filters[7], filters[8]]
    assert pushed.clip(0, 100) == (10, 20) and pushed.clip(15, 17) == (15, 17)
    exact, _ = push_filters([EqualTo(("offset",), 5), GreaterThanOrEqual(("timestamp",), t)])
    assert (exact.offset_from, exact.offset_to, exact.time_from_ms) == (5, 6, ms + 1)
    some, left = push_filters([In(("offset",), (3, 9, 4))])
    assert (some.offset_from, some.offset_to) == (3, 10) and len(left) == 1


def test_push_filters_sends_property_and_header_conditions_to_the_broker_and_keeps_them():
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNotNull

    from warren.spark.read.planning import push_filters

    filters = [EqualTo(("headers", "region"), "eu"), In(("headers", "region"), ["eu", "us"]),
               In(("properties", "app_id"), ["a", "b"]), EqualTo(("content_type",), "text/plain"),
               EqualTo(("properties", "delivery_mode"), 2), EqualTo(("message_id",), "m-1"),
               # not pushed: other operators, nulls, wrong types, U+FFFD, the broker's offset header
               GreaterThan(("headers", "n"), "3"), In(("properties", "type"), ["x", None]),
               EqualTo(("properties", "priority"), "high"), EqualTo(("headers", "bad"), "caf\ufffd"),
               EqualTo(("headers", "x-stream-offset"), "3"), IsNotNull(("headers", "region")),
               EqualTo(("properties", "timestamp"), 5)]
    pushed, remaining = push_filters(filters)
    assert dict(pushed.matches) == {
        "header.region": frozenset({"eu"}), "property.app_id": frozenset({"a", "b"}),
        "property.content_type": frozenset({"text/plain"}), "property.delivery_mode": frozenset({"2"}),
        "property.message_id": frozenset({"m-1"}),
    }
    assert pushed.filtered and not push_filters([])[0].filtered
    assert remaining == filters  # Spark checks every one of them again
