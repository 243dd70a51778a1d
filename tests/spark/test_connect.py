"""The warren data source through a Spark Connect session (a local Connect server started here
from pyspark's own jars): batch reads with a pushed-down filter, writes, a streaming read into
Parquet and a streaming write into a queue, all from a Connect client in its own process (the
tests' classic session lives in this one).

Marked spark_cluster: skipped unless asked for (tests/spark/conftest.py says how)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.connect_server import ConnectServer
from tests.spark.pika_admin import admin, message_count, wait_for_count
from tests.spark.stream_helpers import declare_stream, publish, wait_committed

pytestmark = [
    pytest.mark.spark_cluster,
    pytest.mark.timeout(900),
    pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API"),
]

COUNT = 1000

CLIENT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import warren.spark

    remote, url, http_url, stream, queue, stream_queue, out, cp, cp2 = sys.argv[1:]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    warren.spark.register(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    result = {"connect": type(spark).__module__}

    def source(**options):
        r = (spark.read.format("warren").option("url", url).option("httpUrl", http_url)
             .option("stream", stream))
        for key, value in options.items():
            r = r.option(key, value)
        return r

    df = source().load()
    result["columns"] = df.columns
    result["count"] = df.count()
    pushed = source(pushFilters="true", recordsPerPartition="100").load().where("offset >= 100 and offset < 150")
    result["window"] = sorted(r.offset for r in pushed.select("offset").collect())
    row = df.where("offset = 7").collect()[0]
    result["row7"] = [row.body.decode(), row.message_id, row.content_type]
    full = source().option("includeHeaders", "true").load().where("offset = 1").collect()[0]
    result["headers1"] = full.headers

    df.select("body").write.format("warren").mode("append").option("url", url).option("exchange", "") \\
        .option("routingKey", queue).save()

    q = (spark.readStream.format("warren").option("url", url).option("httpUrl", http_url).option("stream", stream)
         .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", 300).load()
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", cp)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    archived = spark.read.parquet(out)
    result["stream_rows"] = archived.count()
    result["stream_offsets"] = archived.select("offset").distinct().count()

    q2 = (spark.readStream.format("warren").option("url", url).option("httpUrl", http_url).option("stream", stream)
          .option("startingOffsets", "earliest").load().select("body")
          .writeStream.format("warren").option("url", url).option("exchange", "").option("routingKey", stream_queue)
          .option("checkpointLocation", cp2).trigger(availableNow=True).start())
    q2.awaitTermination()
    result["stream_write_error"] = str(q2.exception()) if q2.exception() else None
    spark.stop()
    print("RESULT " + json.dumps(result))
""")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server.start()
    finally:
        server.stop()


def test_reads_writes_and_streams_through_spark_connect(connect_server, broker, tmp_path, uid):
    stream, queue, stream_queue = f"connect-{uid}", f"connect-out-{uid}", f"connect-stream-out-{uid}"
    declare_stream(broker, stream)
    publish(broker, stream, COUNT)
    wait_committed(broker, stream, COUNT)
    with admin(broker) as ch:
        ch.queue_declare(queue)
        ch.queue_declare(stream_queue)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    r = subprocess.run([sys.executable, str(script), connect_server.url, broker.url, broker.http_url, stream, queue,
                        stream_queue, str(tmp_path / "out"), str(tmp_path / "cp"), str(tmp_path / "cp2")],
                       capture_output=True, text=True, timeout=800, cwd=str(tmp_path))
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (r.stdout[-3000:], r.stderr[-5000:],
                                         connect_server.log.read_text(errors="replace")[-3000:])
    result = json.loads(lines[0][len("RESULT "):])
    assert "connect" in result["connect"]  # really a Spark Connect session
    assert result["columns"] == ["body", "routing_key", "exchange", "offset", "stream", "timestamp", "message_id",
                                 "content_type"]
    assert result["count"] == COUNT
    assert result["window"] == list(range(100, 150))
    assert result["row7"] == ['{"i": 7}', "id-7", "application/json"]
    assert result["headers1"] == {"n": "1", "kind": "odd", "ok": "true"}
    assert (result["stream_rows"], result["stream_offsets"]) == (COUNT, COUNT)
    assert result["stream_write_error"] is None
    with admin(broker) as ch:
        assert message_count(ch, queue) == COUNT
        assert wait_for_count(ch, stream_queue, COUNT) == COUNT
        ch.queue_delete(queue)
        ch.queue_delete(stream_queue)
