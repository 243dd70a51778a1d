"""`warren ctl cluster_status`: rabbitmqctl 3.10's layout, from the HTTP API (/api/overview,
/api/nodes, /api/feature-flags where there is one)."""

from __future__ import annotations

from warren.cli.ctl.node import cluster_status_text, cluster_status_value

# what RabbitMQ 3.10.8's management API answered for a one-node broker (abridged), and what its
# rabbitmqctl cluster_status printed for it (Debian's rabbitmq-server, session 20)
RABBIT_OVERVIEW = {"node": "r@localhost", "cluster_name": "r@vm", "rabbitmq_version": "3.10.8",
                   "product_name": "RabbitMQ", "product_version": "3.10.8", "erlang_version": "25.2.3",
                   "listeners": [{"node": "r@localhost", "protocol": "http", "ip_address": "::", "port": 60911},
                                 {"node": "r@localhost", "protocol": "clustering", "ip_address": "::", "port": 42375},
                                 {"node": "r@localhost", "protocol": "amqp", "ip_address": "127.0.0.1", "port": 56489}]}
RABBIT_NODES = [{"name": "r@localhost", "running": True, "mem_alarm": False, "disk_free_alarm": False,
                 "partitions": [], "being_drained": False}]
RABBITMQCTL = """Basics

Cluster name: r@vm

Disk Nodes

r@localhost

Running Nodes

r@localhost

Versions

r@localhost: RabbitMQ 3.10.8 on Erlang 25.2.3

Maintenance status

Node: r@localhost, status: not under maintenance

Alarms

(none)

Network Partitions

(none)

Listeners

Node: r@localhost, interface: [::], port: 60911, protocol: http, purpose: HTTP API
Node: r@localhost, interface: [::], port: 42375, protocol: clustering, purpose: inter-node and CLI tool communication
Node: r@localhost, interface: 127.0.0.1, port: 56489, protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0

Feature flags

Flag: quorum_queue, state: enabled"""


def test_the_layout_is_rabbitmqctls():
    value = cluster_status_value(RABBIT_OVERVIEW, RABBIT_NODES, [{"name": "quorum_queue", "state": "enabled"}])
    assert cluster_status_text(value, is_rabbitmq=True) == RABBITMQCTL


def test_alarms_and_a_second_node():
    nodes = [dict(RABBIT_NODES[0], mem_alarm=True), {"name": "s@h", "running": False, "disk_free_alarm": True}]
    value = cluster_status_value(RABBIT_OVERVIEW, nodes, [])
    text = cluster_status_text(value, is_rabbitmq=True)
    assert "\n\nDisk Nodes\n\nr@localhost\ns@h\n\nRunning Nodes\n\nr@localhost\n\n" in text
    assert "\n\nAlarms\n\nMemory alarm on node r@localhost\nFree disk space alarm on node s@h\n\n" in text
    assert text.endswith("Feature flags\n\n(none)")
