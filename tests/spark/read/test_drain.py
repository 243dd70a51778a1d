"""``spark.read.format("warren").option("mode", "drain")`` through a real SparkSession and broker.

Messages are published with pika (not Warren's writer), drained by Spark, and the queue is then
inspected with pika again: every message comes back exactly once, with its properties and
headers, and the queue is left empty; ``maxRecords`` stops early and leaves the rest.
"""

from __future__ import annotations

import datetime

import pika
import pytest

from tests.spark.pika_admin import admin, message_count, wait_for_count

pytestmark = pytest.mark.timeout(180)  # may be the first Spark test of the process


def _drain(spark, broker, queue, **options):
    reader = spark.read.format("warren").option("mode", "drain").option("url", broker.url).option("queue", queue)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_drain_returns_every_message_and_empties_the_queue(spark, broker, uid):
    queue = f"sd-all-{uid}"
    count = 3000
    with admin(broker) as ch:
        ch.queue_declare(queue)
        ch.exchange_declare(f"sd-x-{uid}", "direct")
        ch.queue_bind(queue, f"sd-x-{uid}", "k")
        for i in range(count):
            props = pika.BasicProperties(
                content_type="text/plain", delivery_mode=2, priority=i % 10, message_id=f"id-{i}",
                timestamp=1_700_000_000 + i, correlation_id="c" if i % 2 else None,
                headers={"n": i, "flag": i % 2 == 0, "text": "t", "raw": b"\xffz", "nested": {"a": [1, "b"]}})
            ch.basic_publish(f"sd-x-{uid}", "k", f"m-{i}".encode(), props)
        assert wait_for_count(ch, queue, count) == count

        rows = _drain(spark, broker, queue, numPartitions=2, batchSize=700, includeHeaders="true",
                      includeProperties="true").collect()
        assert message_count(ch, queue) == 0
        assert len(rows) == count
        assert sorted(int(r.body.decode()[2:]) for r in rows) == list(range(count))
        for r in rows:
            i = int(r.body.decode()[2:])
            assert (r.exchange, r.routing_key, r.offset, r.stream, r.timestamp) == (f"sd-x-{uid}", "k", None, None, None)
            assert (r.message_id, r.content_type) == (f"id-{i}", "text/plain")
            p = r.properties
            assert (p.content_type, p.delivery_mode, p.priority, p.message_id) == ("text/plain", 2, i % 10, f"id-{i}")
            assert p.correlation_id == ("c" if i % 2 else None) and p.reply_to is None
            assert p.timestamp == datetime.datetime.fromtimestamp(1_700_000_000 + i, datetime.timezone.utc) \
                .replace(tzinfo=None)  # the session time zone is UTC; Spark hands back naive datetimes
            assert r.headers == {"n": str(i), "flag": "true" if i % 2 == 0 else "false", "text": "t",
                                 "raw": "\ufffdz", "nested": '{"a":[1,"b"]}'}  # as the stream readers render it
        ch.queue_delete(queue)
        ch.exchange_delete(f"sd-x-{uid}")


def test_drain_stops_at_max_records_and_leaves_the_rest(spark, broker, uid):
    queue = f"sd-max-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue)
        for i in range(100):
            ch.basic_publish("", queue, str(i).encode())
        assert wait_for_count(ch, queue, 100) == 100
        rows = _drain(spark, broker, queue, numPartitions=2, maxRecords=31, batchSize=4).collect()
        assert len(rows) == 31
        assert message_count(ch, queue) == 69
        left = set()
        while (got := ch.basic_get(queue, auto_ack=True))[0] is not None:
            left.add(int(got[2]))
        assert left | {int(r.body) for r in rows} == set(range(100))  # nothing lost, nothing twice
        assert not left & {int(r.body) for r in rows}
        ch.queue_delete(queue)


def test_drain_of_an_empty_queue_is_empty(spark, broker, uid):
    queue = f"sd-empty-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue)
        assert _drain(spark, broker, queue, numPartitions=3).count() == 0
        ch.queue_delete(queue)


def test_drain_of_a_missing_queue_fails_clearly(spark, broker, uid):
    with pytest.raises(Exception) as excinfo:
        _drain(spark, broker, f"sd-missing-{uid}").collect()
    assert "404" in str(excinfo.value) and f"sd-missing-{uid}" in str(excinfo.value)


def test_drain_needs_a_queue(spark, broker):
    with pytest.raises(Exception) as excinfo:
        spark.read.format("warren").option("mode", "drain").option("url", broker.url).load().collect()
    assert "mode=drain needs the queue option" in str(excinfo.value)
