"""``/metrics/detailed`` (warren/metrics/detailed.py): RabbitMQ's filtered endpoint, by family
and vhost, through a real Prometheus scrape of a Warren with real clients, and beside the
session's private RabbitMQ 3.10 node (``rabbitmq_node``) for names, types, HELP and labels."""

from __future__ import annotations

import time
import urllib.parse
import uuid

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.metrics.scrape import declarations, fetch, launch_with_metrics, samples

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="starts a private Warren with --prometheus-port")

OTHER = "h34-detailed-other"
SERVED = ("queue_coarse_metrics", "queue_consumer_count", "queue_metrics", "channel_metrics",
          "connection_coarse_metrics", "connection_metrics", "connection_churn_metrics", "vhost_status",
          "exchange_names", "exchange_bindings")


def detailed(base: str, families=(), vhosts=()) -> str:
    query = urllib.parse.urlencode([("family", f) for f in families] + [("vhost", v) for v in vhosts])
    return fetch(f"{base}/metrics/detailed" + (f"?{query}" if query else ""))[0]


def names(text: str) -> set[str]:
    return {key[0] for key in samples(text)}


def poll(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def load(amqp_url: str, vhost_urls: list[str], prefix: str):
    """In each vhost: a queue with one ready and one unacked message and a consumer, and a
    binding of amq.direct to it; returns the open connections and the queue names."""
    conns, queues = [], []
    for url in vhost_urls:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        name = ch.queue_declare(f"{prefix}-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
        ch.queue_bind(name, "amq.direct", routing_key=name)
        for body in (b"ready", b"unacked"):
            ch.basic_publish("", name, body)
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume(name, lambda *_: None)  # takes one, never acks it
        conn.process_data_events(0.2)
        conns.append(conn)
        queues.append(name)
    return conns, queues


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    b, base = launch_with_metrics(tmp_path_factory.mktemp("detailed"), "--vhost", "/", "--vhost", OTHER)
    try:
        urls = [f"amqp://guest:guest@127.0.0.1:{b.port}/%2F",
                f"amqp://guest:guest@127.0.0.1:{b.port}/{urllib.parse.quote(OTHER, safe='')}"]
        conns, queues = load(urls[0], urls, "h34-detailed")
        try:
            assert poll(lambda: all(f'queue="{q}"' in detailed(base, ["queue_coarse_metrics"]) for q in queues))
            yield base, queues, conns
        finally:
            for conn in conns:
                conn.close()
    finally:
        b.stop()


def test_without_a_family_only_the_identity_is_answered(warren):
    base, _, _ = warren
    assert names(detailed(base)) == {"rabbitmq_build_info", "rabbitmq_identity_info"}


def test_queue_families_report_each_queue_and_the_vhost_filter_keeps_its_vhost_only(warren):
    base, (mine, other), _ = warren
    every = samples(detailed(base, ["queue_coarse_metrics", "queue_consumer_count"]))
    for q, vhost in ((mine, "/"), (other, OTHER)):
        labels = frozenset({"vhost": vhost, "queue": q}.items())
        assert every[("rabbitmq_detailed_queue_messages_ready", labels)] == 1
        assert every[("rabbitmq_detailed_queue_messages_unacked", labels)] == 1
        assert every[("rabbitmq_detailed_queue_messages", labels)] == 2
        assert every[("rabbitmq_detailed_queue_consumers", labels)] == 1
    only = detailed(base, ["queue_coarse_metrics", "vhost_status"], vhosts=["/"])
    assert f'queue="{mine}"' in only and f'queue="{other}"' not in only
    assert {dict(k[1])["vhost"] for k in samples(only) if k[0] == "rabbitmq_cluster_vhost_status"} == {"/"}
    # a family asked for twice is answered once; no other family comes along
    twice = detailed(base, ["queue_consumer_count", "queue_consumer_count"])
    assert twice.count("# TYPE rabbitmq_detailed_queue_consumers gauge") == 1
    assert "rabbitmq_detailed_queue_messages_ready" not in twice


def test_channel_and_connection_families_are_not_filtered_by_vhost(warren):
    base, _, _ = warren
    text = detailed(base, ["channel_metrics", "connection_coarse_metrics", "connection_metrics"], vhosts=[OTHER])
    parsed = samples(text)
    unacked = [v for (name, _), v in parsed.items() if name == "rabbitmq_detailed_channel_messages_unacked"]
    assert sorted(unacked) == [1, 1]  # a channel in each vhost, each holding its one unacked message
    incoming = [v for (name, _), v in parsed.items() if name == "rabbitmq_detailed_connection_incoming_bytes_total"]
    assert len(incoming) == 2 and all(v > 0 for v in incoming)


def test_cluster_families_name_vhosts_exchanges_and_count_bindings(warren):
    base, (mine, _), _ = warren
    parsed = samples(detailed(base, ["vhost_status", "exchange_names", "exchange_bindings",
                                     "connection_churn_metrics"]))
    assert parsed[("rabbitmq_cluster_vhost_status", frozenset({"vhost": OTHER}.items()))] == 1
    direct = frozenset({"vhost": "/", "exchange": "amq.direct", "type": "direct"}.items())
    assert parsed[("rabbitmq_cluster_exchange_name", direct)] == 1
    assert parsed[("rabbitmq_cluster_exchange_bindings", direct)] >= 1  # this module's binding, at least
    assert not any(dict(k[1]).get("exchange") == "" for k in parsed)  # the default exchange is not listed
    assert parsed[("rabbitmq_detailed_connections_opened_total", frozenset())] >= 2


def test_a_family_warren_does_not_serve_is_named_in_a_comment(warren):
    base, _, _ = warren
    text = detailed(base, ["queue_delivery_metrics", "queue_coarse_metrics"])
    assert "# family queue_delivery_metrics is not served by Warren (docs/metrics.md)\n" in text
    assert "rabbitmq_detailed_queue_messages_ready" in names(text)  # the rest is answered, and parses


@pytest.fixture(scope="module")
def reference(rabbitmq_node):
    """The RabbitMQ node with the same load in two vhosts; fetch(families, vhosts) -> its text."""
    rabbitmq_node.add_vhost(OTHER)
    urls = [rabbitmq_node.amqp_url, rabbitmq_node.amqp_url.rsplit("/", 1)[0] + "/" + urllib.parse.quote(OTHER, safe="")]
    conns, queues = load(urls[0], urls, "h34-reference")
    try:
        base = rabbitmq_node.prometheus_url
        assert poll(lambda: (conns[0].process_data_events(0.05),
                             all(f'queue="{q}"' in detailed(base, ["queue_coarse_metrics"]) for q in queues))[1]), \
            "RabbitMQ's detailed metrics never showed the queues"
        yield lambda families, vhosts=(): detailed(base, families, vhosts)
    finally:
        for conn in conns:
            conn.close()


@pytest.mark.parametrize("family", SERVED)
def test_each_family_matches_the_reference_rabbitmq(warren, reference, family):
    """Every family Warren answers has RabbitMQ's name, TYPE, HELP and label names; what
    RabbitMQ has and Warren leaves out is only what has no Warren equivalent (LEFT_OUT)."""
    base, _, _ = warren
    ours, theirs = detailed(base, [family]), reference([family])
    our_declared, their_declared = declarations(ours), declarations(theirs)
    for name, declared in our_declared.items():
        assert name in their_declared, f"{family}: {name} is not one of RabbitMQ's"
        assert declared == their_declared[name], name
    assert set(their_declared) - set(our_declared) <= LEFT_OUT, set(their_declared) - set(our_declared)
    their_labels: dict = {}
    for name, labels in samples(theirs):
        their_labels.setdefault(name, set()).update(k for k, _ in labels)
    for name, labels in samples(ours):
        if name in ("rabbitmq_build_info", "rabbitmq_identity_info"):
            continue  # Warren's build labels add its product and version (docs/compatibility.md)
        assert {k for k, _ in labels} == their_labels.get(name, {k for k, _ in labels}), name


# RabbitMQ's samples with no Warren equivalent (Erlang processes, consumer utilisation, counters
# RabbitMQ keeps per queue that Warren does not), left out rather than reported as zero
LEFT_OUT = {
    "rabbitmq_detailed_queue_process_reductions_total", "rabbitmq_detailed_queue_consumer_capacity",
    "rabbitmq_detailed_queue_consumer_utilisation", "rabbitmq_detailed_queue_process_memory_bytes",
    "rabbitmq_detailed_queue_messages_ram", "rabbitmq_detailed_queue_messages_ram_bytes",
    "rabbitmq_detailed_queue_messages_unacked_ram", "rabbitmq_detailed_queue_messages_persistent",
    "rabbitmq_detailed_queue_messages_persistent_bytes", "rabbitmq_detailed_queue_messages_bytes",
    "rabbitmq_detailed_queue_messages_unacked_bytes", "rabbitmq_detailed_queue_head_message_timestamp",
    "rabbitmq_detailed_queue_disk_reads_total", "rabbitmq_detailed_queue_disk_writes_total",
    "rabbitmq_detailed_channel_messages_uncommitted", "rabbitmq_detailed_channel_acks_uncommitted",
    "rabbitmq_detailed_consumer_prefetch", "rabbitmq_detailed_channel_prefetch",
    "rabbitmq_detailed_connection_process_reductions_total", "rabbitmq_detailed_connection_incoming_packets_total",
    "rabbitmq_detailed_connection_outgoing_packets_total", "rabbitmq_detailed_connection_pending_packets",
    "rabbitmq_detailed_queues_declared_total",
    "rabbitmq_build_info", "rabbitmq_identity_info",  # Warren's own values, checked at /metrics
    "telemetry_scrape_duration_seconds", "telemetry_scrape_encoded_size_bytes", "telemetry_scrape_size_bytes",
}
