"""The warren data source through a Spark Connect session (a local Connect server started here
from pyspark's own jars): batch reads with a pushed-down filter, writes, a streaming read into
Parquet and a streaming write into a queue, all from a Connect client in its own process (the
tests' classic session lives in this one).

Two scales share the one test body. ``small`` runs in the default suite: 200 messages, and one
streaming query (the stream read in two micro-batches, written to a queue) instead of two.
``full`` (1000 messages, the streaming read into Parquet in four micro-batches, then the
streaming write) is marked spark_cluster and skipped unless asked for (tests/spark/conftest.py
says how). Most of either is start-up and Spark's work per job and per micro-batch (each
planning step of a Python data source starts Python processes of its own), not the messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.connect_server import ConnectServer
from tests.spark.pika_admin import admin, message_count, wait_for_count
from tests.spark.stream_helpers import declare_stream, publish, wait_committed

pytestmark = [
    pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API"),
]


@dataclass(frozen=True)
class Scale:
    count: int  # messages in the stream
    parquet_trigger: int  # maxRecordsPerTrigger of the streaming read into Parquet; 0: no such query
    write_trigger: int  # maxRecordsPerTrigger of the streaming read written to a queue; 0: no limit

    @property
    def window(self) -> tuple[int, int]:
        """The offsets the pushed-down filter selects: [lo, hi)."""
        return self.count // 10, self.count // 10 + self.count // 20


SCALES = [
    pytest.param(Scale(200, 0, 100), id="small", marks=pytest.mark.timeout(420)),
    pytest.param(Scale(1000, 300, 0), id="full", marks=[pytest.mark.spark_cluster, pytest.mark.timeout(900)]),
]

CLIENT = textwrap.dedent("""
    import json, sys, time
    from pyspark.sql import SparkSession
    import warren.spark

    remote, url, http_url, stream, queue, stream_queue, out, cp, cp2 = sys.argv[1:10]
    parquet_trigger, write_trigger, lo, hi = (int(a) for a in sys.argv[10:14])
    spark = SparkSession.builder.remote(remote).getOrCreate()
    warren.spark.register(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    result = {"connect": type(spark).__module__, "seconds": {}}
    clock = [time.monotonic()]

    def step(name):  # seconds per step, for the failure message and the log
        now = time.monotonic()
        result["seconds"][name] = round(now - clock[0], 1)
        clock[0] = now

    def source(**options):
        r = (spark.read.format("warren").option("url", url).option("httpUrl", http_url)
             .option("stream", stream))
        for key, value in options.items():
            r = r.option(key, value)
        return r

    df = source().load()
    result["columns"] = df.columns
    result["count"] = df.count()
    step("count")
    pushed = (source(pushFilters="true", recordsPerPartition=str(max(1, lo))).load()
              .where(f"offset >= {lo} and offset < {hi}"))
    result["window"] = sorted(r.offset for r in pushed.select("offset").collect())
    step("pushed")
    row = df.where("offset = 7").collect()[0]
    result["row7"] = [row.body.decode(), row.message_id, row.content_type]
    full = source().option("includeHeaders", "true").load().where("offset = 1").collect()[0]
    result["headers1"] = full.headers
    step("rows")

    df.select("body").write.format("warren").mode("append").option("url", url).option("exchange", "") \\
        .option("routingKey", queue).save()
    step("write")

    def stream_source(limit):
        r = (spark.readStream.format("warren").option("url", url).option("httpUrl", http_url)
             .option("stream", stream).option("startingOffsets", "earliest"))
        return (r.option("maxRecordsPerTrigger", limit) if limit else r).load()

    if parquet_trigger:
        q = (stream_source(parquet_trigger).writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", cp).trigger(availableNow=True).start())
        q.awaitTermination()
        archived = spark.read.parquet(out)
        result["stream_rows"] = archived.count()
        result["stream_offsets"] = archived.select("offset").distinct().count()
        step("stream read")

    q2 = (stream_source(write_trigger).select("body")
          .writeStream.format("warren").option("url", url).option("exchange", "").option("routingKey", stream_queue)
          .option("checkpointLocation", cp2).trigger(availableNow=True).start())
    q2.awaitTermination()
    result["stream_write_error"] = str(q2.exception()) if q2.exception() else None
    step("stream write")
    spark.stop()
    print("RESULT " + json.dumps(result))
""")


def _batches(folder) -> int:
    """Micro-batches in a checkpoint's offsets/ or commits/ folder (one file per batch id)."""
    return len([f for f in os.listdir(folder) if f.isdigit()])


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.mark.parametrize("scale", SCALES)
def test_reads_writes_and_streams_through_spark_connect(scale, connect_server, broker, tmp_path, uid):
    count, (lo, hi) = scale.count, scale.window
    stream, queue, stream_queue = f"connect-{uid}", f"connect-out-{uid}", f"connect-stream-out-{uid}"
    declare_stream(broker, stream)
    publish(broker, stream, count)
    wait_committed(broker, stream, count)
    with admin(broker) as ch:
        ch.queue_declare(queue)
        ch.queue_declare(stream_queue)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    r = subprocess.run([sys.executable, str(script), connect_server.url, broker.url, broker.http_url, stream, queue,
                        stream_queue, str(tmp_path / "out"), str(tmp_path / "cp"), str(tmp_path / "cp2"),
                        str(scale.parquet_trigger), str(scale.write_trigger), str(lo), str(hi)],
                       capture_output=True, text=True, timeout=800, cwd=str(tmp_path))
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (r.stdout[-3000:], r.stderr[-5000:],
                                         connect_server.log.read_text(errors="replace")[-3000:])
    result = json.loads(lines[0][len("RESULT "):])
    print("Spark Connect client, seconds per step:", result["seconds"])
    assert "connect" in result["connect"]  # really a Spark Connect session
    assert result["columns"] == ["body", "routing_key", "exchange", "offset", "stream", "timestamp", "message_id",
                                 "content_type"]
    assert result["count"] == count
    assert result["window"] == list(range(lo, hi))
    assert result["row7"] == ['{"i": 7}', "id-7", "application/json"]
    assert result["headers1"] == {"n": "1", "kind": "odd", "ok": "true"}
    if scale.parquet_trigger:  # every offset once in the Parquet files
        assert (result["stream_rows"], result["stream_offsets"]) == (count, count)
    assert result["stream_write_error"] is None
    if scale.write_trigger:  # the streaming read ran in micro-batches of that many rows, each committed
        batches = [json.loads((tmp_path / "cp2" / "offsets" / str(i)).read_text().splitlines()[-1])
                   for i in range(_batches(tmp_path / "cp2" / "offsets"))]
        assert batches == [{stream: n} for n in range(scale.write_trigger, count + 1, scale.write_trigger)]
        assert _batches(tmp_path / "cp2" / "commits") == len(batches)
    with admin(broker) as ch:
        assert message_count(ch, queue) == count
        assert wait_for_count(ch, stream_queue, count) == count
        ch.queue_delete(queue)
        ch.queue_delete(stream_queue)
