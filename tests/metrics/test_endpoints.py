"""/metrics and /metrics/per-object of a real broker, driven by pika, read with prometheus_client's
parser, checked by promtool and compared with RabbitMQ 3.10's rabbitmq_prometheus on the
session's private node (``rabbitmq_node``, tests/rabbitmq_node.py)."""

from __future__ import annotations

import shutil
import time
import urllib.error
import uuid

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.helpers import connect
from tests.metrics.scrape import (
    declarations, fetch, launch_with_metrics, promtool_check, samples, value,
)

pytest.importorskip("prometheus_client", reason="prometheus-client (the test extra) parses the exposition")
if EXTERNAL_URL:
    pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)", allow_module_level=True)

# the families the issue names: they must be at /metrics with RabbitMQ's types
REQUIRED = {
    "rabbitmq_connections": "gauge", "rabbitmq_channels": "gauge", "rabbitmq_consumers": "gauge",
    "rabbitmq_queues": "gauge", "rabbitmq_queue_messages_ready": "gauge", "rabbitmq_queue_messages_unacked": "gauge",
    "rabbitmq_queue_messages": "gauge", "rabbitmq_global_messages_received_total": "counter",
    "rabbitmq_global_messages_routed_total": "counter", "rabbitmq_global_messages_delivered_total": "counter",
    "rabbitmq_global_messages_acknowledged_total": "counter", "rabbitmq_global_messages_confirmed_total": "counter",
    "rabbitmq_global_messages_unroutable_dropped_total": "counter",
    "rabbitmq_connections_opened_total": "counter", "rabbitmq_connections_closed_total": "counter",
    "rabbitmq_alarms_memory_used_watermark": "untyped", "rabbitmq_alarms_free_disk_space_watermark": "untyped",
    "rabbitmq_process_resident_memory_bytes": "gauge", "rabbitmq_build_info": "untyped",
    "rabbitmq_identity_info": "untyped",
}
WARREN_OWN = ("warren_event_loop_lag_seconds", "warren_gc_pause_seconds", "warren_paged_out_bytes",
              "warren_store_sync_seconds", "warren_flow_control_pauses_total")
CLASSIC = {"protocol": "amqp091", "queue_type": "rabbit_classic_queue"}


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    b, base = launch_with_metrics(tmp_path_factory.mktemp("metrics"))
    try:
        yield b, base
    finally:
        b.stop()


def scrape(base: str, per_object: bool = False) -> dict:
    text, _ = fetch(base + ("/metrics/per-object" if per_object else "/metrics"))
    return samples(text)


def poll(condition, timeout: float = 10.0):
    """condition() until it is truthy (the scrape reads live state: a message in flight may lag)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def test_required_families_have_rabbitmqs_types_and_warrens_own_are_there(warren):
    _, base = warren
    text, headers = fetch(base + "/metrics")
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    declared = declarations(text)
    assert {name: declared[name][0] for name in REQUIRED} == REQUIRED
    for name in WARREN_OWN:
        assert name in declared, name
    build = [s for s in samples(text) if s[0] == "rabbitmq_build_info"]
    assert dict(build[0][1])["rabbitmq_version"] == "3.10.8"
    identity = dict(next(s for s in samples(text) if s[0] == "rabbitmq_identity_info")[1])
    assert identity["rabbitmq_node"].startswith("rabbit@")
    assert identity["rabbitmq_cluster_permanent_id"].startswith("rabbitmq-cluster-id-")


def test_queue_depth_per_object_with_vhost_and_queue_labels_and_summed_at_metrics(warren):
    b, base = warren
    name = f"h9-depth-{uuid.uuid4().hex[:8]}"
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(name, auto_delete=False)
        for i in range(3):
            ch.basic_publish("", name, f"m{i}".encode())
        ch.basic_get(name, auto_ack=False)  # one unacked
        labels = {"vhost": "/", "queue": name}
        per_object = poll(lambda: (p := scrape(base, True)) and
                          p.get(("rabbitmq_queue_messages", frozenset(labels.items()))) == 3 and p)
        assert per_object, "the queue's depth never reached 3"
        assert value(per_object, "rabbitmq_queue_messages_ready", **labels) == 2
        assert value(per_object, "rabbitmq_queue_messages_unacked", **labels) == 1
        assert value(per_object, "warren_queue_messages_published_total", **labels) == 3
        assert value(per_object, "warren_queue_messages_delivered_total", **labels) == 1
        aggregated = scrape(base)
        assert value(aggregated, "rabbitmq_queue_messages_ready") >= 2  # one sample, no labels
        assert not [k for k in aggregated if k[0] == "rabbitmq_queue_messages_ready" and k[1]]
        assert value(aggregated, "rabbitmq_queue_messages_unacked") >= 1
        assert value(aggregated, "rabbitmq_queues") >= 1
        assert value(aggregated, "rabbitmq_connections") >= 1 and value(aggregated, "rabbitmq_channels") >= 1
        channels = [dict(k[1])["channel"] for k in per_object if k[0] == "rabbitmq_channel_messages_unacked"]
        assert any(c.endswith("(1)") and " -> " in c for c in channels)  # the HTTP API's channel name
        ch.queue_delete(name)
    finally:
        conn.close()


def test_global_counters_count_and_never_go_back_when_channels_close_and_queues_go(warren):
    b, base = warren
    before = scrape(base)
    name = f"h9-totals-{uuid.uuid4().hex[:8]}"
    conn = connect(b)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(name)
    for i in range(5):
        ch.basic_publish("", name, b"x")  # confirmed (pika waits for each ack)
    ch.basic_publish("amq.direct", "nobody-" + name, b"dropped")
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("amq.direct", "nobody-" + name, b"returned", mandatory=True)
    got = 0
    for method, _, _ in ch.consume(name, inactivity_timeout=5):
        assert method is not None, "a message did not arrive"
        ch.basic_ack(method.delivery_tag)
        got += 1
        if got == 5:
            break
    ch.cancel()
    ch.queue_delete(name)
    conn.close()  # its channel's counts and the queue's are retired: the totals must not drop

    def grew(name_, by, **labels):
        return value(after, name_, **labels) - value(before, name_, **labels) >= by

    after = poll(lambda: (a := scrape(base)) and
                 value(a, "rabbitmq_connections_closed_total") > value(before, "rabbitmq_connections_closed_total")
                 and a)
    assert after, "connections_closed_total did not grow"
    assert grew("rabbitmq_global_messages_received_total", 7, protocol="amqp091")
    assert grew("rabbitmq_global_messages_routed_total", 5, protocol="amqp091")
    assert grew("rabbitmq_global_messages_confirmed_total", 7, protocol="amqp091")
    assert grew("rabbitmq_global_messages_received_confirm_total", 7, protocol="amqp091")
    assert grew("rabbitmq_global_messages_unroutable_dropped_total", 1, protocol="amqp091")
    assert grew("rabbitmq_global_messages_unroutable_returned_total", 1, protocol="amqp091")
    assert grew("rabbitmq_global_messages_delivered_total", 5, **CLASSIC)
    assert grew("rabbitmq_global_messages_acknowledged_total", 5, **CLASSIC)
    assert grew("rabbitmq_connections_opened_total", 1) and grew("rabbitmq_channels_closed_total", 1)
    assert grew("rabbitmq_queues_created_total", 1) and grew("rabbitmq_queues_deleted_total", 1)


def test_store_syncs_and_gc_pauses_are_measured(warren):
    b, base = warren
    name = f"h9-durable-{uuid.uuid4().hex[:8]}"
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(name, durable=True)
        ch.basic_publish("", name, b"persistent", pika.BasicProperties(delivery_mode=2))  # confirmed after fsync
        ch.queue_delete(name)
        for _ in range(1500):  # objects that stay: enough for a young collection in the broker
            ch.queue_declare("", exclusive=True)
    finally:
        conn.close()
    parsed = scrape(base)
    assert value(parsed, "warren_store_sync_seconds_count") >= 1
    assert value(parsed, "warren_store_sync_seconds_bucket", le="+Inf") == value(parsed, "warren_store_sync_seconds_count")
    assert poll(lambda: value(scrape(base), "warren_event_loop_lag_seconds_count") >= 1)  # a tick every 0.25 s
    assert poll(lambda: value(scrape(base), "warren_gc_pause_seconds_count", generation="0") >= 1)


def test_label_values_are_escaped(warren):
    b, base = warren
    name = f'h9 "odd" \\ name {uuid.uuid4().hex[:6]}'
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(name)
        ch.basic_publish("", name, b"x")
        parsed = poll(lambda: (p := scrape(base, True)) and
                      p.get(("rabbitmq_queue_messages_ready", frozenset({"vhost": "/", "queue": name}.items()))) == 1
                      and p)
        assert parsed, "the oddly named queue was not reported with its exact name"
        ch.queue_delete(name)
    finally:
        conn.close()


def test_gzip_when_the_scraper_accepts_it_and_404_elsewhere(warren):
    _, base = warren
    plain, _ = fetch(base + "/metrics/per-object")
    text, headers = fetch(base + "/metrics/per-object", accept_gzip=True)
    assert headers.get("content-encoding") == "gzip"
    assert declarations(text) == declarations(plain)
    with pytest.raises(urllib.error.HTTPError) as e:
        fetch(base + "/api/overview")
    assert e.value.code == 404


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool (Debian's prometheus package, tools/install-test-deps) is not installed")
def test_promtool_accepts_both_endpoints(warren):
    b, base = warren
    conn = connect(b)  # some per-object samples: a queue, a channel, a connection
    try:
        ch = conn.channel()
        name = f"h9-promtool-{uuid.uuid4().hex[:8]}"
        ch.queue_declare(name, exclusive=True)
        ch.basic_publish("", name, b"x")
        for path in ("/metrics", "/metrics/per-object"):
            text, _ = fetch(base + path)
            r = promtool_check(text)
            assert r.returncode == 0, f"{path}: {r.stdout.decode()} {r.stderr.decode()}"
    finally:
        conn.close()


@pytest.fixture(scope="module")
def reference(rabbitmq_node):
    """fetch(path) -> the text of the RabbitMQ node's rabbitmq_prometheus endpoint, scraped while
    that node has a connection, a channel, a consumer and a queue with a ready and an unacked
    message, and has dropped an unroutable one, so its per-object families have samples (it
    leaves out a family without objects)."""
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_node.amqp_url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        name = ch.queue_declare(f"h9-reference-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
        for body in (b"ready", b"unacked"):
            ch.basic_publish("", name, body)
        ch.basic_publish("amq.direct", name, b"unroutable")  # dropped: the unroutable families
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume(name, lambda *_: None)  # takes one, never acks it
        assert poll(lambda: (conn.process_data_events(0.05), _has_queue(rabbitmq_node, name))[1], timeout=30), \
            "RabbitMQ's per-object metrics never showed the queue"
        yield lambda path: fetch(rabbitmq_node.prometheus_url + path, timeout=10)[0]
    finally:
        conn.close()


def _has_queue(node, name: str) -> bool:
    text = fetch(node.prometheus_url + "/metrics/per-object", timeout=10)[0]
    return f'queue="{name}"' in text and "rabbitmq_channel_messages_unacked" in text


@pytest.mark.parametrize("path", ["/metrics", "/metrics/per-object"])
def test_every_rabbitmq_family_matches_the_reference_rabbitmq(warren, reference, path):
    """Same name, TYPE and HELP as RabbitMQ 3.10's; Warren invents no rabbitmq_* name. (RabbitMQ
    leaves its alarm families out of /metrics/per-object; Warren keeps them on both.)"""
    _, base = warren
    theirs = {**declarations(reference("/metrics")), **declarations(reference(path))}
    ours = {k: v for k, v in declarations(fetch(base + path)[0]).items() if not k.startswith("warren_")}
    assert ours, "no families"
    for name, (kind, text) in ours.items():
        assert name in theirs, f"{name} is not one of RabbitMQ's"
        assert (kind, text) == theirs[name], name


# RabbitMQ 3.10 counts these per channel AND exchange or queue (a sample per pair); Warren counts
# them per channel only (one sample labelled ``channel``), a difference recorded in
# docs/compatibility.md (Prometheus metrics). Checked both ways so that a change on either side shows.
PER_CHANNEL_ONLY = {
    "rabbitmq_channel_messages_published_total": {"channel", "exchange", "vhost"},
    "rabbitmq_channel_messages_confirmed_total": {"channel", "exchange", "vhost"},
    "rabbitmq_channel_messages_unroutable_dropped_total": {"channel", "exchange", "vhost"},
    "rabbitmq_channel_messages_unroutable_returned_total": {"channel", "exchange", "vhost"},
    "rabbitmq_channel_messages_acked_total": {"channel", "queue", "vhost"},
}


def test_per_object_labels_match_the_reference_rabbitmq(warren, reference):
    """Per queue: vhost and queue; per channel and connection: channel (as RabbitMQ, which has
    samples of every family Warren serves here), but for PER_CHANNEL_ONLY."""
    b, base = warren
    theirs = reference("/metrics/per-object")
    ref_labels = {}
    for key in samples(theirs):
        ref_labels.setdefault(key[0], set()).update(k for k, _ in key[1])
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(f"h9-labels-{uuid.uuid4().hex[:8]}", exclusive=True)
        checked = 0
        for key in samples(fetch(base + "/metrics/per-object")[0]):
            name, labels = key[0], {k for k, _ in key[1]}
            if not name.startswith(("rabbitmq_queue_", "rabbitmq_channel_", "rabbitmq_connection_")):
                continue
            assert name in ref_labels, f"{name}: RabbitMQ has no sample of it"
            if name in PER_CHANNEL_ONLY:
                assert (labels, ref_labels[name]) == ({"channel"}, PER_CHANNEL_ONLY[name]), name
            else:
                assert labels == ref_labels[name], name
            checked += 1
        assert checked >= 15
    finally:
        conn.close()
