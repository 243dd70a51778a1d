"""/metrics/cluster (warren/metrics/cluster_view.py): every node's /metrics families, each sample
labelled ``rabbitmq_node``, one header per family. Here without a cluster: the merge on its own,
a single node (its own figures, labelled the same way) and a --worker-mode queues node (the
node's figures once, from any worker). A real cluster: tests/cluster/test_cluster_metrics.py."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e.helpers import connect
from tests.metrics.scrape import declarations, fetch, launch_with_metrics, promtool_check, samples, value
from warren.metrics.cluster_view import merge_nodes

pytest.importorskip("prometheus_client", reason="prometheus-client (the test extra) parses the exposition")

SCRAPE_TIMEOUT_S = 15.0  # a published message shows in the next scrapes, on two busy cores


def wait_for(condition, what: str, timeout: float = SCRAPE_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.05)


# --- the merge, without a broker ------------------------------------------------------------------

NODE_TEXT = """# HELP rabbitmq_queues Queues available
# TYPE rabbitmq_queues gauge
rabbitmq_queues {queues}
# HELP rabbitmq_identity_info RabbitMQ node & cluster identity info
# TYPE rabbitmq_identity_info untyped
rabbitmq_identity_info{{rabbitmq_node="{node}",rabbitmq_cluster="c"}} 1
# HELP rabbitmq_global_messages_received_total Total number of messages received from publishers
# TYPE rabbitmq_global_messages_received_total counter
rabbitmq_global_messages_received_total{{protocol="amqp091"}} {received}
# HELP warren_event_loop_lag_seconds How late the event loop ran a timer
# TYPE warren_event_loop_lag_seconds histogram
warren_event_loop_lag_seconds_bucket{{le="0.01"}} 3
warren_event_loop_lag_seconds_bucket{{le="+Inf"}} 4
warren_event_loop_lag_seconds_sum 0.5
warren_event_loop_lag_seconds_count 4
# HELP warren_store_damaged_records_total Messages lost to damaged files
# TYPE warren_store_damaged_records_total counter
"""


def test_merge_groups_each_family_once_and_labels_every_sample_with_its_node():
    texts = [("n2", NODE_TEXT.format(node="n2", queues=5, received=50)),
             ("n1", NODE_TEXT.format(node="n1", queues=3, received=30))]
    text = "".join(merge_nodes(texts, ["n3"]))
    assert text.count("# HELP rabbitmq_queues ") == 1 and text.count("# TYPE warren_event_loop_lag_seconds ") == 1
    parsed = samples(text)
    assert value(parsed, "rabbitmq_queues", rabbitmq_node="n1") == 3
    assert value(parsed, "rabbitmq_queues", rabbitmq_node="n2") == 5
    assert value(parsed, "rabbitmq_global_messages_received_total", rabbitmq_node="n2", protocol="amqp091") == 50
    assert value(parsed, "warren_event_loop_lag_seconds_bucket", rabbitmq_node="n1", le="+Inf") == 4
    assert value(parsed, "warren_event_loop_lag_seconds_count", rabbitmq_node="n2") == 4
    # the identity names its node already: kept as it was, once per node
    assert value(parsed, "rabbitmq_identity_info", rabbitmq_node="n1", rabbitmq_cluster="c") == 1
    assert sum(1 for name, _ in parsed if name == "rabbitmq_identity_info") == 2
    assert "warren_store_damaged_records_total" in declarations(text)  # a family without samples stays
    # which nodes the answer holds; n3 was left out
    assert {dict(labels)["rabbitmq_node"]: v for (name, labels), v in parsed.items()
            if name == "warren_cluster_metrics_nodes"} == {"n1": 1, "n2": 1, "n3": 0}
    # every sample is a node's: no two are the same series
    assert all("rabbitmq_node" in dict(labels) for _, labels in parsed)
    assert len(parsed) == sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def test_a_node_name_that_needs_escaping_is_escaped():
    node = 'odd"name\\x'
    parsed = samples("".join(merge_nodes([(node, NODE_TEXT.format(node="n", queues=1, received=0))], [])))
    assert value(parsed, "rabbitmq_queues", rabbitmq_node=node) == 1
    assert value(parsed, "warren_cluster_metrics_nodes", rabbitmq_node=node) == 1


# --- a node alone -----------------------------------------------------------------------------------

@pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
def test_a_single_node_answers_for_itself_labelled_with_its_name(tmp_path):
    b, base = launch_with_metrics(tmp_path)
    try:
        name = f"mc-{uuid.uuid4().hex[:8]}"
        conn = connect(b)
        ch = conn.channel()
        ch.queue_declare(name)
        for i in range(3):
            ch.basic_publish("", name, b"m%d" % i)
        conn.process_data_events(0)
        plain = wait_for(lambda: (lambda p: p if value(p, "rabbitmq_queue_messages_ready") == 3 else None)(
            samples(fetch(base + "/metrics")[0])), "3 messages ready at /metrics")
        node = dict(next(labels for name_, labels in plain if name_ == "rabbitmq_identity_info"))["rabbitmq_node"]

        text, headers = fetch(base + "/metrics/cluster", accept_gzip=True)
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        assert headers["content-encoding"] == "gzip"
        parsed = samples(text)
        assert value(parsed, "rabbitmq_queue_messages_ready", rabbitmq_node=node) == 3
        assert value(parsed, "rabbitmq_queues", rabbitmq_node=node) == value(plain, "rabbitmq_queues")
        assert value(parsed, "warren_cluster_metrics_nodes", rabbitmq_node=node) == 1
        assert all(dict(labels).get("rabbitmq_node") == node for _, labels in parsed)
        # the families of /metrics, with their types, and the nodes gauge
        plain_text = fetch(base + "/metrics")[0]
        assert declarations(text) == {**declarations(plain_text), "warren_cluster_metrics_nodes": (
            "gauge", declarations(text)["warren_cluster_metrics_nodes"][1])}
        # /metrics stays the node's, unlabelled
        assert ("rabbitmq_queues", frozenset()) in samples(plain_text)
        # the scrape is timed as the others are
        again = samples(fetch(base + "/metrics")[0])
        assert value(again, "warren_scrape_duration_seconds", endpoint="/metrics/cluster") > 0
        if shutil.which("promtool"):
            checked = promtool_check(text)
            assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
        ch.queue_delete(name)
        conn.close()
    finally:
        b.stop()


# --- --worker-mode queues: any worker answers for the node, once ---------------------------------------

@pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
def test_each_worker_answers_for_the_whole_node_once(tmp_path):
    from warren.spread import queue_owner
    b = launch_broker(tmp_path, "--workers", "2", "--worker-mode", "queues", "--vhost", "/",
                      "--prometheus-port", "0")
    try:
        ready = json.loads(Path(b.args[b.args.index("--ready-file") + 1]).read_text())
        ports = [w["prometheus_port"] for w in ready["workers"]]
        # a queue on each worker: 2 messages on worker 0's, 5 on worker 1's
        names = {}
        for i in range(200):
            name = f"mcw-{i}"
            names.setdefault(queue_owner("/", name, 2), name)
            if len(names) == 2:
                break
        conn = connect(b)
        ch = conn.channel()
        for owner, count in ((0, 2), (1, 5)):
            ch.queue_declare(names[owner])
            for _ in range(count):
                ch.basic_publish("", names[owner], b"x")
        conn.process_data_events(0)
        for port in ports:
            def seven_ready():
                parsed = samples(fetch(f"http://127.0.0.1:{port}/metrics/cluster")[0])
                nodes = [labels for name, labels in parsed if name == "warren_cluster_metrics_nodes"]
                ready_ = [v for (name, _), v in parsed.items() if name == "rabbitmq_queue_messages_ready"]
                return (nodes, ready_) if ready_ == [7] else None

            nodes, _ = wait_for(seven_ready, f"worker on port {port}: the node's 7 messages, once")
            assert len(nodes) == 1  # one node
        for name in names.values():
            ch.queue_delete(name)
        conn.close()
    finally:
        b.stop()
