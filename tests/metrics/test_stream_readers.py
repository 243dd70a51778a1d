"""``warren_stream_reader_offset_lag`` at /metrics/per-object: how far behind each reader of a
stream is, an AMQP consumer (pika, by consumer tag) and an HTTP bulk reader that names itself
(``reader=`` on the records endpoint, as the Spark source does with its streaming query's id)."""

from __future__ import annotations

import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.metrics.scrape import fetch, launch_with_metrics, samples
from warren.spark.read.http_api import StreamApi

pytest.importorskip("prometheus_client", reason="prometheus-client (the test extra) parses the exposition")
if EXTERNAL_URL:
    pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)", allow_module_level=True)

pytestmark = pytest.mark.timeout(60)
FAMILY = "warren_stream_reader_offset_lag"


def lags(base: str) -> dict:
    text, _ = fetch(base + "/metrics/per-object")
    return {dict(labels)["reader"]: (dict(labels)["kind"], dict(labels)["queue"], v)
            for (name, labels), v in samples(text).items() if name == FAMILY}


def wait_for(condition, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_consumers_and_named_http_readers_show_their_lag(tmp_path):
    b, base = launch_with_metrics(tmp_path)
    try:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.queue_declare("events", durable=True, arguments={"x-queue-type": "stream"})
        ch.confirm_delivery()
        for i in range(300):
            ch.basic_publish("", "events", b"m%d" % i)
        # a consumer with a prefetch of 100 that acks nothing: it stops 200 behind the end
        ch.basic_qos(prefetch_count=100)
        ch.basic_consume("events", lambda *a: None, consumer_tag="slow-one", arguments={"x-stream-offset": "first"})
        assert wait_for(lambda: lags(base).get("slow-one") == ("amqp", "events", 200.0)), lags(base)

        with StreamApi(b.http_url, "guest", "guest", "/") as api:
            answer = api.records("events", 0, None, 120, 1 << 20, reader="spark:query-1")
            assert answer.count == 120
            assert lags(base)["spark:query-1"] == ("http", "events", 180.0)
            api.records("events", 120, None, 1000, 1 << 20, reader="spark:query-1")
            assert lags(base)["spark:query-1"] == ("http", "events", 0.0)
            api.records("events", 0, None, 10, 1 << 20)  # a reader without a name is not shown
        assert set(lags(base)) == {"slow-one", "spark:query-1"}
        conn.close()
    finally:
        b.stop()
