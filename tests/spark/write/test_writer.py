"""``df.write`` / ``writeStream`` ``.format("warren")`` through a real local SparkSession and broker.

Covers the issue's list: 100k rows arrive complete under confirms (count, and ids and bodies
checked against the row each came from); a nacked publish (x-overflow=reject-publish) and a
returned mandatory publish fail the write; a re-run with the same ``writeId`` is dropped by
a deduplicating queue; ``writeStream`` (from files and from the rate source) publishes every
micro-batch, and a micro-batch that Spark replays after a lost commit is dropped by
deduplication while a plain queue shows it really was published twice. The last tests check
the row encoding without Spark.
"""

from __future__ import annotations

import time

import pytest

from tests.spark.pika_admin import NO_DEDUP, NO_DEDUP_REASON, admin, get_all, message_count

pytestmark = pytest.mark.timeout(180)  # the first test also pays for the SparkSession

ROWS = 100_000


def _spark_error_text(excinfo) -> str:
    return str(excinfo.value)


def test_100k_rows_arrive_complete_with_confirms(spark, broker, uid):
    queue = f"sw-100k-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue)
        df = spark.range(0, ROWS, numPartitions=2).selectExpr(
            "concat('m-', cast(id as string)) as body",  # a string body goes out as UTF-8
            f"'{queue}' as routing_key",
            "map('row', cast(id as string)) as headers",
            "named_struct('content_type', 'text/plain', 'delivery_mode', 2, "
            "'timestamp', timestamp_seconds(1700000000 + id)) as properties",
        )
        df.write.format("warren").option("url", broker.url).option("exchange", "") \
            .option("writeId", f"w{uid}").mode("append").save()
        assert message_count(ch, queue) == ROWS
        sample = get_all(ch, queue, 300)
        assert len(sample) == 300
        half = ROWS // 2  # spark.range splits 0..ROWS-1 into two equal, ordered partitions
        for _method, props, body in sample:
            row = int(body.decode()[2:])
            partition, index = divmod(row, half)
            assert props.message_id == f"w{uid}:0:{partition}:{index}"
            assert props.headers["x-deduplication-header"] == props.message_id
            assert props.headers["row"] == str(row)
            assert props.content_type == "text/plain" and props.delivery_mode == 2
            assert props.timestamp == 1700000000 + row
        ch.queue_delete(queue)


def test_routing_key_column_and_option(spark, broker, uid):
    """The column routes each row; the routingKey option, when given, routes every row."""
    with admin(broker) as ch:
        a, b = f"sw-rk-a-{uid}", f"sw-rk-b-{uid}"
        for q in (a, b):
            ch.queue_declare(q)
        rows = [(f"x{i}".encode(), a if i % 3 else b) for i in range(30)]
        df = spark.createDataFrame(rows, "body binary, routing_key string")
        df.write.format("warren").option("url", broker.url).option("exchange", "").mode("append").save()
        assert (message_count(ch, a), message_count(ch, b)) == (20, 10)
        df.write.format("warren").option("url", broker.url).option("exchange", "") \
            .option("routingKey", b).mode("append").save()
        assert (message_count(ch, a), message_count(ch, b)) == (20, 40)
        for q in (a, b):
            ch.queue_delete(q)


def test_nacked_publish_fails_the_task(spark, broker, uid):
    queue = f"sw-nack-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue, arguments={"x-max-length": 10, "x-overflow": "reject-publish"})
        df = spark.range(0, 100, numPartitions=1).selectExpr("cast(cast(id as string) as binary) as body")
        with pytest.raises(Exception) as excinfo:
            df.write.format("warren").option("url", broker.url).option("exchange", "") \
                .option("routingKey", queue).mode("append").save()
        assert "basic.nack" in _spark_error_text(excinfo)
        assert message_count(ch, queue) == 10
        ch.queue_delete(queue)


def test_returned_mandatory_publish_fails_the_task(spark, broker, uid):
    exchange = f"sw-unbound-{uid}"
    with admin(broker) as ch:
        ch.exchange_declare(exchange, "direct", auto_delete=False)
        df = spark.range(0, 5, numPartitions=1).selectExpr("cast(cast(id as string) as binary) as body")
        with pytest.raises(Exception) as excinfo:
            df.write.format("warren").option("url", broker.url).option("exchange", exchange) \
                .option("routingKey", "nowhere").option("mandatory", "true").mode("append").save()
        text = _spark_error_text(excinfo)
        assert "returned a mandatory publish" in text and "NO_ROUTE" in text
        # without mandatory the same write succeeds: unroutable messages are dropped, as in AMQP
        df.write.format("warren").option("url", broker.url).option("exchange", exchange) \
            .option("routingKey", "nowhere").mode("append").save()
        ch.exchange_delete(exchange)


def test_bad_columns_fail_before_any_task(spark, broker):
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as body", "id as extra")
    with pytest.raises(Exception) as excinfo:
        df.write.format("warren").option("url", broker.url).option("exchange", "").mode("append").save()
    assert "does not know the column(s) extra" in _spark_error_text(excinfo)


@pytest.mark.skipif(NO_DEDUP, reason=NO_DEDUP_REASON)
def test_rerun_with_the_same_write_id_is_deduplicated(spark, broker, uid):
    """What a retried task does: the same rows with the same ids. A dedup queue keeps one copy."""
    queue = f"sw-dedup-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue, arguments={"x-message-deduplication": True, "x-cache-size": 10_000})
        df = spark.range(0, 2000, numPartitions=2).selectExpr("cast(cast(id as string) as binary) as body")

        def write(write_id):
            df.write.format("warren").option("url", broker.url).option("exchange", "") \
                .option("routingKey", queue).option("writeId", write_id).mode("append").save()

        write(f"a{uid}")
        write(f"a{uid}")
        assert message_count(ch, queue) == 2000
        write(f"b{uid}")  # another write id: other keys, all kept
        assert message_count(ch, queue) == 4000
        ch.queue_delete(queue)


def _stream_query(spark, source_dir, checkpoint, broker, exchange):
    return (spark.readStream.schema("body string").option("maxFilesPerTrigger", 1).parquet(str(source_dir))
            .writeStream.format("warren").option("url", broker.url).option("exchange", exchange)
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())


def test_write_stream_and_a_replayed_micro_batch(spark, broker, uid, tmp_path):
    """Two micro-batches arrive; Spark replays the last after its commit is lost: the dedup
    queue keeps one copy, the plain queue beside it receives the replay again. (Against
    RabbitMQ, which has no deduplication, only the plain queue is checked.)"""
    source = tmp_path / "source"
    for n in range(2):
        spark.range(n * 100, (n + 1) * 100, numPartitions=1).selectExpr("concat('s-', cast(id as string)) as body") \
            .write.mode("append").parquet(str(source))
    checkpoint = tmp_path / "checkpoint"
    exchange = f"sw-stream-{uid}"
    plain, dedup = f"sw-stream-plain-{uid}", f"sw-stream-dedup-{uid}"
    queues = (plain,) if NO_DEDUP else (plain, dedup)
    with admin(broker) as ch:
        ch.exchange_declare(exchange, "fanout")
        ch.queue_declare(plain)
        if not NO_DEDUP:
            ch.queue_declare(dedup, arguments={"x-message-deduplication": True, "x-cache-size": 10_000})
        for q in queues:
            ch.queue_bind(q, exchange)

        query = _stream_query(spark, source, checkpoint, broker, exchange)
        assert query.awaitTermination(120)
        assert query.exception() is None
        batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
        assert len(batches) == 2  # one file per trigger
        assert all(message_count(ch, q) == 200 for q in queues)

        # lose the last commit: on restart Spark runs batch 1 again with the same offsets
        last = max(batches)
        (checkpoint / "commits" / str(last)).unlink()
        crc = checkpoint / "commits" / f".{last}.crc"
        if crc.exists():
            crc.unlink()
        replay = _stream_query(spark, source, checkpoint, broker, exchange)
        assert replay.awaitTermination(120)
        assert replay.exception() is None
        assert replay.id == query.id
        assert message_count(ch, plain) == 300  # the replay really published batch 1 again
        if not NO_DEDUP:
            assert message_count(ch, dedup) == 200  # and deduplication dropped every copy

        messages = get_all(ch, queues[-1], 300)
        ids = {props.message_id for _m, props, _b in messages}
        assert len(ids) == 200  # the replayed copies carry the same ids as the first run
        assert all(i.startswith(f"{query.id}:") for i in ids)
        assert {i.split(":")[1] for i in ids} == {str(b) for b in batches}
        for q in queues:
            ch.queue_delete(q)
        ch.exchange_delete(exchange)


# --- row → message encoding, without Spark ---------------------------------------------------

def _encode(batch, **options):
    import pyspark.sql.types as T

    from warren.spark.write.messages import MessageEncoder
    from warren.spark.write.columns import RowLayout, WriteOptions

    spark_types = {"body": T.BinaryType(), "routing_key": T.StringType(),
                   "headers": T.MapType(T.StringType(), T.StringType()),
                   "properties": T.StructType([T.StructField("priority", T.IntegerType()),
                                               T.StructField("timestamp", T.TimestampType()),
                                               T.StructField("message_id", T.StringType())])}
    schema = T.StructType([T.StructField(n, spark_types[n]) for n in batch.schema.names])
    opts = WriteOptions.from_options({"exchange": "", **options})
    return list(MessageEncoder(RowLayout.from_schema(schema, opts), opts, "q:7:3:").messages(batch))


@pytest.mark.parametrize("dedup", ["x-deduplication-header", "my-key", ""])
def test_id_only_fast_path_encodes_as_basic_properties(dedup):
    import pyarrow as pa

    from warren.spec.amqp0_9_1 import BasicProperties

    batch = pa.record_batch([pa.array([b"a", None, b"c"])], names=["body"])
    out = _encode(batch, dedupHeader=dedup)
    for row, (_exchange, _key, properties, body) in enumerate(out):
        mid = f"q:7:3:{row}"
        want = BasicProperties(headers={dedup: mid} if dedup else None, message_id=mid)
        assert properties == want.encode()
        assert body == [b"a", b"", b"c"][row]


def test_properties_struct_headers_and_ids():
    import datetime

    import pyarrow as pa

    from warren.spec.amqp0_9_1 import BasicProperties

    ts = pa.array([datetime.datetime(2024, 1, 1, 0, 0, 5), None, None], type=pa.timestamp("us", tz="UTC"))
    props = pa.StructArray.from_arrays([pa.array([1, None, 3], pa.int32()), ts, pa.array(["own", None, None])],
                                       names=["priority", "timestamp", "message_id"],
                                       mask=pa.array([False, False, True]))  # row 2: a null struct
    headers = pa.array([[("k", "v")], None, []], type=pa.map_(pa.string(), pa.string()))
    batch = pa.record_batch([pa.array([b"x"] * 3), pa.array(["r0", None, "r2"]), headers, props],
                            names=["body", "routing_key", "headers", "properties"])
    decoded = [(key, BasicProperties.decode(p, 0)[0]) for _x, key, p, _b in _encode(batch)]
    (k0, p0), (k1, p1), (k2, p2) = decoded
    assert (k0, k1, k2) == ("r0", "", "r2")
    assert (p0.priority, p0.timestamp, p0.message_id) == (1, 1704067205, "own")  # the row's id wins
    assert p0.headers == {"k": "v", "x-deduplication-header": "q:7:3:0"}
    assert (p1.priority, p1.timestamp, p1.message_id) == (None, None, "q:7:3:1")
    assert (p2.priority, p2.message_id) == (None, "q:7:3:2")  # a null struct sets nothing
    assert p2.headers == {"x-deduplication-header": "q:7:3:2"}


def test_write_stream_from_the_rate_source(spark, broker, uid, tmp_path):
    """The rate-micro-batch source: every row of every committed micro-batch arrives."""
    queue = f"sw-rate-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue)
        query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 50).option("numPartitions", 2)
                 .load().selectExpr("cast(cast(value as string) as binary) as body")
                 .writeStream.format("warren").option("url", broker.url).option("exchange", "")
                 .option("routingKey", queue).option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="100 milliseconds").start())
        try:
            deadline = time.monotonic() + 60
            while sum(p["numInputRows"] for p in query.recentProgress) < 100 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            query.stop()
        assert query.exception() is None
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows >= 100
        # stop() may interrupt a batch after its rows were published but before it was
        # reported: never fewer messages than reported rows, at most one batch more
        assert rows <= message_count(ch, queue) <= rows + 50
        values = sorted(int(b) for _m, _p, b in get_all(ch, queue, rows + 50))
        assert values[:rows] == list(range(rows))  # the source's values 0, 1, 2, ... each once
        ch.queue_delete(queue)
