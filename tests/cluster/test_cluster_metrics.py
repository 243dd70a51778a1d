"""/metrics/cluster on a real cluster (issue 32, item 5; warren/metrics/cluster_view.py): real etcd,
three `warren serve` nodes, two with a Prometheus port. Node n2's /metrics/cluster holds n1's and
its own /metrics families, each sample labelled with its node; /metrics stays n2's alone, as
RabbitMQ's does; a node without a Prometheus port, then a node killed with kill -9, is listed 0
in ``warren_cluster_metrics_nodes`` and its samples are gone. Waits are on what a scrape shows,
bounded."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pika
import pytest

from tests.cluster.cluster_nodes import wait_until
from tests.metrics.scrape import fetch, promtool_check, samples, value

pytest.importorskip("prometheus_client", reason="prometheus-client (the test extra) parses the exposition")

LEASE_TTL = "2"  # seconds: the killed node leaves the running ones within a few of them
TIMEOUT_S = 30.0  # a scrape shows a publish at once; a kill, once the lease ends (etcd may round it up)


def metrics_url(node) -> str:
    ready = json.loads(Path(node.args[node.args.index("--ready-file") + 1]).read_text())
    return f"http://127.0.0.1:{ready['prometheus_port']}"


def fill(node, queue: str, count: int) -> None:
    """Queue ``queue`` on ``node`` (client-local) with ``count`` messages, confirmed."""
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue)
        for i in range(count):
            ch.basic_publish("", queue, b"m%d" % i)
    finally:
        conn.close()


def by_node(parsed: dict, family: str) -> dict:
    """{node: value} of the samples of ``family`` (labelled only with their node)."""
    return {dict(labels)["rabbitmq_node"]: v for (name, labels), v in parsed.items()
            if name == family and len(labels) == 1}


def test_any_node_answers_for_every_running_node_each_labelled(etcd1, nodes, cluster_name):
    n1, n2 = (nodes.start(etcd1.endpoints, cluster_name, name, "--cluster-lease-ttl", LEASE_TTL,
                          "--prometheus-port", "0") for name in ("n1", "n2"))
    nodes.start(etcd1.endpoints, cluster_name, "n3", "--cluster-lease-ttl", LEASE_TTL)  # no Prometheus port
    fill(n1, "cm-on-n1", 3)
    fill(n2, "cm-on-n2", 5)

    def both_counted():
        parsed = samples(fetch(metrics_url(n2) + "/metrics/cluster")[0])
        return parsed if by_node(parsed, "rabbitmq_queue_messages_ready") == {"n1": 3, "n2": 5} else None

    parsed = wait_until(both_counted, TIMEOUT_S, "n2's /metrics/cluster: 3 ready on n1, 5 on n2")
    assert by_node(parsed, "rabbitmq_queues") == {"n1": 1, "n2": 1}
    assert by_node(parsed, "warren_cluster_metrics_nodes") == {"n1": 1, "n2": 1, "n3": 0}
    identities = {dict(labels)["rabbitmq_node"]: dict(labels)["rabbitmq_cluster_permanent_id"]
                  for (name, labels) in parsed if name == "rabbitmq_identity_info"}
    assert sorted(identities) == ["n1", "n2"] and len(set(identities.values())) == 1  # one cluster's id
    assert all("rabbitmq_node" in dict(labels) for _, labels in parsed)
    if shutil.which("promtool"):
        text = fetch(metrics_url(n2) + "/metrics/cluster")[0]
        checked = promtool_check(text)
        assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    # any node answers the same: n1's view
    assert by_node(samples(fetch(metrics_url(n1) + "/metrics/cluster")[0]),
                   "rabbitmq_queue_messages_ready") == {"n1": 3, "n2": 5}

    # /metrics stays the node's own, unlabelled (dashboards sum over the nodes they scrape)
    own = samples(fetch(metrics_url(n2) + "/metrics")[0])
    assert value(own, "rabbitmq_queue_messages_ready") == 5 and value(own, "rabbitmq_queues") == 1
    assert not [labels for labels in (dict(lab) for name, lab in own if name != "rabbitmq_identity_info")
                if "rabbitmq_node" in labels]

    # kill -9 of n1: n2 answers for itself, and says n1 is left out
    n1.signal(signal.SIGKILL)
    n1.proc.wait(timeout=30)

    def n1_left_out():
        parsed = samples(fetch(metrics_url(n2) + "/metrics/cluster")[0])
        return parsed if by_node(parsed, "warren_cluster_metrics_nodes").get("n1") == 0 else None

    parsed = wait_until(n1_left_out, TIMEOUT_S, "n2's /metrics/cluster leaving the killed n1 out")
    assert by_node(parsed, "warren_cluster_metrics_nodes") == {"n1": 0, "n2": 1, "n3": 0}
    assert by_node(parsed, "rabbitmq_queue_messages_ready") == {"n2": 5}
    assert {dict(labels)["rabbitmq_node"] for (name, labels) in parsed
            if name != "warren_cluster_metrics_nodes"} == {"n2"}
