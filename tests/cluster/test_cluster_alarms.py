"""Resource alarms are the cluster's (issue 32, item 3): a disk alarm on one node blocks the
publishers of every node, as in a RabbitMQ cluster, and clears when that node leaves; real etcd,
real nodes, pika's connection.blocked and connection.unblocked. Waits are on what the client is
told and what the health check answers, bounded."""

from __future__ import annotations

import time

import pika

from tests.cluster.cluster_nodes import api_status, wait_until

TIMEOUT_S = 30.0


def health(node, check: str) -> tuple[int, dict]:
    return api_status(node, f"health/checks/{check}")


def test_a_disk_alarm_on_one_node_blocks_the_publishers_of_another(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a", "--disk-free-limit", "0")
    full = nodes.start(etcd1.endpoints, cluster_name, "full", "--disk-free-limit", str(10**18))  # always alarmed
    told = []
    conn = pika.BlockingConnection(pika.URLParameters(a.url + "?blocked_connection_timeout=60"))
    try:
        conn.add_on_connection_blocked_callback(lambda c, frame: told.append(("blocked", frame.method.reason)))
        conn.add_on_connection_unblocked_callback(lambda c, frame: told.append(("unblocked", None)))
        ch = conn.channel()
        ch.queue_declare(f"alarmed-{uid}")
        ch.basic_publish("", f"alarmed-{uid}", b"first")
        deadline = time.monotonic() + TIMEOUT_S
        while not told and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert told and told[0][0] == "blocked" and "disk (node full)" in told[0][1], told

        # the cluster's check names the node with the alarm; node a's own check has none
        status, body = health(a, "alarms")
        assert status == 503 and body["alarms"] == [{"node": "full", "resource": "disk"}], body
        assert health(a, "local-alarms")[0] == 200
        assert health(full, "local-alarms")[1]["alarms"] == [{"node": "full", "resource": "disk"}]

        # the node with the alarm leaves: its alarm goes with it, node a's publishers go on
        full.stop()
        deadline = time.monotonic() + TIMEOUT_S
        while len(told) < 2 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert told[1:] == [("unblocked", None)], told
        wait_until(lambda: health(a, "alarms")[0] == 200, TIMEOUT_S, "node a's cluster alarm check passing")
        ch.confirm_delivery()
        ch.basic_publish("", f"alarmed-{uid}", b"second")
        assert ch.queue_declare(f"alarmed-{uid}", passive=True).method.message_count == 2
    finally:
        conn.close()
