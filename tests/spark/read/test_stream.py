"""The ``warren`` source through a real local SparkSession against a real broker: batch reads of
offset ranges, readStream micro-batches (memory and Parquet sinks, restarts), retention vs
``failOnDataLoss``, and the AMQP transport giving the same rows as the bulk HTTP path."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import (
    api, comparable, declare_stream, expected_row, publish, wait_committed,
)

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")


def _reader(spark, broker, stream: str, **options):
    r = (spark.read.format("warren").option("url", broker.url).option("httpUrl", broker.http_url)
         .option("stream", stream))
    for key, value in options.items():
        r = r.option(key, value)
    return r


def _stream_reader(spark, broker, stream: str, **options):
    r = (spark.readStream.format("warren").option("url", broker.url).option("httpUrl", broker.http_url)
         .option("stream", stream))
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


@pytest.fixture(scope="module")
def filled(broker):
    """Two streams: ``a`` with 3000 messages, ``b`` with 1000 (module-wide; tests only read)."""
    suffix = uuid.uuid4().hex[:8]
    a, b = f"spark-a-{suffix}", f"spark-b-{suffix}"
    for name, count in ((a, 3000), (b, 1000)):
        declare_stream(broker, name)
        publish(broker, name, count)
        wait_committed(broker, name, count)
    return {"a": a, "b": b}


def test_spark_session_jvm_options(spark):
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args and "-XX:+UseSerialGC" in args


def test_batch_read_of_a_range_equals_what_was_published(spark, broker, filled):
    a = filled["a"]
    df = _reader(spark, broker, a, startingOffsets="100", endingOffsets="2900", recordsPerPartition="700",
                 includeHeaders="true", includeProperties="true").load()
    assert df.rdd.getNumPartitions() == 4  # 2800 records in ranges of 700
    rows = sorted((comparable(r) for r in df.collect()), key=lambda r: r["offset"])
    assert rows == [expected_row(i, i, a) for i in range(100, 2900)]


def test_batch_read_of_several_streams_with_json_offsets(spark, broker, filled):
    a, b = filled["a"], filled["b"]
    df = _reader(spark, broker, f"{a},{b}", startingOffsets=json.dumps({a: 2990, b: "earliest"}),
                 endingOffsets=json.dumps({b: 10})).load()
    got = sorted((r.stream, r.offset) for r in df.select("stream", "offset").collect())
    assert got == [(a, i) for i in range(2990, 3000)] + [(b, i) for i in range(10)]


def test_amqp_transport_gives_the_same_rows_as_http(spark, broker, filled):
    a = filled["a"]
    options = dict(startingOffsets="1234", endingOffsets="1734", recordsPerPartition="200")
    # property_list too: over AMQP the broker's x-stream-offset is cut, and the table it added to
    # a message without headers (every third here) is cut with it
    options.update(includeHeaders="true", includeProperties="true", includePropertyList="true")
    http_rows = _reader(spark, broker, a, **options).load().orderBy("offset").collect()
    amqp_rows = _reader(spark, broker, a, transport="amqp", **options).load().orderBy("offset").collect()
    assert len(http_rows) == 500
    # an AMQP delivery does not carry the time the broker stored it: that column alone is null
    assert all(r.timestamp is None for r in amqp_rows) and all(r.timestamp is not None for r in http_rows)

    def without_time(rows):
        return [{k: v for k, v in r.asDict(recursive=True).items() if k != "timestamp"} for r in rows]

    assert without_time(amqp_rows) == without_time(http_rows)


def test_read_stream_available_now_to_memory_in_several_batches(spark, broker, filled):
    b = filled["b"]
    df = _stream_reader(spark, broker, b, startingOffsets="earliest", maxRecordsPerTrigger="300",
                        includeHeaders="true", includeProperties="true")
    q = df.writeStream.format("memory").queryName("warren_mem").trigger(availableNow=True).start()
    try:
        q.awaitTermination(120)
        assert q.exception() is None
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert sizes == [300, 300, 300, 100]
        rows = spark.sql("select * from warren_mem").collect()
    finally:
        q.stop()
    assert sorted(comparable(r)["offset"] for r in rows) == list(range(1000))
    assert comparable(max(rows, key=lambda r: r.offset)) == expected_row(999, 999, b)


def test_read_stream_to_parquet_resumes_from_its_checkpoint(spark, broker, tmp_path, uid):
    name = f"spark-resume-{uid}"
    declare_stream(broker, name)
    publish(broker, name, 500)
    wait_committed(broker, name, 500)
    out, cp = str(tmp_path / "out"), str(tmp_path / "cp")

    def run():
        df = _stream_reader(spark, broker, name, startingOffsets="earliest")
        q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", cp)
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None

    run()
    publish(broker, name, 700, first=500)
    wait_committed(broker, name, 1200)
    run()
    offsets = [r.offset for r in spark.read.parquet(out).select("offset").collect()]
    assert sorted(offsets) == list(range(1200))


def _truncated_stream(broker, name: str) -> int:
    """A stream whose first segments retention removed; returns its first retained offset once
    retention has caught up (the broker applies it on its one-second tick)."""
    declare_stream(broker, name, {"x-stream-max-segment-size-bytes": 4096, "x-max-length-bytes": 20_000})
    publish(broker, name, 2000)
    wait_committed(broker, name, 2000)
    with api(broker) as client:
        first, deadline = client.info(name).first_offset, time.monotonic() + 15
        while time.monotonic() < deadline:
            time.sleep(1.2)
            now = client.info(name).first_offset
            if now == first:
                break
            first = now
    assert first > 0, "retention removed nothing: the test needs a truncated stream"
    return first


def test_retention_past_the_start_fails_clearly_or_skips(spark, broker, uid):
    name = f"spark-trunc-{uid}"
    first = _truncated_stream(broker, name)
    df = _stream_reader(spark, broker, name, startingOffsets=json.dumps({name: 0}))
    q = df.writeStream.format("memory").queryName("warren_loss").trigger(availableNow=True).start()
    with pytest.raises(Exception) as failure:
        q.awaitTermination(120)
    text = str(failure.value)
    assert f"stream '{name}'" in text and "offset 0 is no longer retained" in text
    assert f"first retained offset is {first}" in text

    rows = _reader(spark, broker, name, startingOffsets="0", failOnDataLoss="false").load().select("offset").collect()
    got = sorted(r.offset for r in rows)
    assert got[0] >= first and got == list(range(got[0], 2000))
