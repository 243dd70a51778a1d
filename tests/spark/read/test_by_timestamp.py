"""Kafka's options for where a read starts and ends by time, and its option names
(warren/spark/options.py, read/planning.py): ``startingTimestamp`` /
``startingOffsetsByTimestamp`` with the ``error`` and ``latest`` strategies for batch and
streaming reads, ``endingTimestamp`` for batch reads, ``maxOffsetsPerTrigger`` and
``minPartitions``.

Two rounds of messages stored at different times: the first round, committed; then (once the
broker's clock has passed the first round's last store time, which the HTTP API reports) the
second. A time between the rounds must split the reads exactly.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import api, declare_stream, publish_raw, wait_committed
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = [pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API"),
              pytest.mark.timeout(300)]

FIRST, SECOND = 40, 60


@pytest.fixture(scope="module")
def two_rounds(broker):
    import uuid

    name = f"ts-{uuid.uuid4().hex[:8]}"
    declare_stream(broker, name)
    props = BasicProperties().encode()
    publish_raw(broker, f"{name}.k", [b"first-%d" % i for i in range(FIRST)], props)
    wait_committed(broker, name, FIRST)
    with api(broker) as client:
        split = client.info(name).last_timestamp_ms + 1  # the first round is stored before this
    deadline = time.monotonic() + 10
    while time.time() * 1000 <= split + 1:  # the broker's clock (this machine's) past the split
        assert time.monotonic() < deadline
        time.sleep(0.001)
    publish_raw(broker, f"{name}.k", [b"second-%d" % i for i in range(SECOND)], props)
    wait_committed(broker, name, FIRST + SECOND)
    return name, split


def _read(spark, broker, name, **options):
    r = spark.read.format("warren").option("url", broker.url).option("stream", name)
    for key, value in options.items():
        r = r.option(key, str(value))
    return r.load()


def _bodies(df) -> list[str]:
    return [bytes(r.body).decode() for r in df.orderBy("offset").select("body").collect()]


def test_batch_reads_start_and_end_by_time(spark, broker, two_rounds):
    name, split = two_rounds
    assert _bodies(_read(spark, broker, name, startingTimestamp=split)) == [f"second-{i}" for i in range(SECOND)]
    assert _bodies(_read(spark, broker, name, endingTimestamp=split)) == [f"first-{i}" for i in range(FIRST)]
    assert _read(spark, broker, name, startingOffsetsByTimestamp=f'{{"{name}": {split}}}', endingOffsets=FIRST + 5,
                 ).count() == 5
    # minPartitions: at least that many tasks
    assert _read(spark, broker, name, minPartitions=4).rdd.getNumPartitions() >= 4


def test_a_time_after_the_last_record_fails_or_starts_at_the_end(spark, broker, two_rounds):
    name, _ = two_rounds
    future = int(time.time() * 1000) + 3_600_000
    with pytest.raises(Exception, match="no record stored at .* or later"):
        _read(spark, broker, name, startingTimestamp=future).count()
    latest = _read(spark, broker, name, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert latest.count() == 0


def test_a_streaming_query_starts_by_time_in_batches_of_max_offsets_per_trigger(spark, broker, two_rounds,
                                                                               uid):
    name, split = two_rounds
    table = f"ts_{uid}".replace("-", "_")
    df = (spark.readStream.format("warren").option("url", broker.url).option("stream", name)
          .option("startingTimestamp", str(split)).option("maxOffsetsPerTrigger", "25").load())
    query = df.writeStream.format("memory").queryName(table).trigger(availableNow=True).start()
    try:
        query.awaitTermination(120)
        assert query.exception() is None
        rows = _bodies(spark.table(table))
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    assert rows == [f"second-{i}" for i in range(SECOND)]
    assert [p["numInputRows"] for p in batches] == [25, 25, 10]
