"""A user's connection limit counts the user's connections on every node (issue 32, item 3:
limits behave as on one node, as RabbitMQ counts them over its cluster): real etcd, two real
nodes, the user and its limit made through node a's API (shared metadata), pika connections on
both nodes. Waits are on the counts each node writes into its member record in etcd."""

from __future__ import annotations

import json

import pika
import pytest

from tests.cluster.cluster_nodes import api, wait_until

TIMEOUT_S = 30.0


def counted(etcd, cluster: str, node: str) -> int:
    key = f"/warren/{cluster}/nodes/{node}"
    record = etcd.get_prefix(key).get(key)
    return json.loads(record).get("counts", {}).get("user/lim", 0) if record else -1


def connect(node) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(f"amqp://lim:secret@127.0.0.1:{node.port}/%2F"))


def test_a_users_connection_limit_counts_every_node(etcd1, nodes, cluster_name):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    api(a, "users/lim", "PUT", {"password": "secret", "tags": ""})
    api(a, "permissions/%2F/lim", "PUT", {"configure": ".*", "write": ".*", "read": ".*"})
    api(a, "user-limits/lim/max-connections", "PUT", {"value": 2})
    wait_until(lambda: any(u["user"] == "lim" for u in api(b, "user-limits")), TIMEOUT_S, "node b has the limit")

    first = connect(a)
    wait_until(lambda: counted(etcd1, cluster_name, "a") == 1, TIMEOUT_S, "node a's count in etcd")
    second = connect(b)  # one here, one on node a: the limit is reached
    with pytest.raises(pika.exceptions.AMQPConnectionError) as refused:
        connect(b)
    assert "user connection limit (2) is reached" in str(refused.value) or "530" in str(refused.value), refused.value
    assert "connection refused for user 'lim': user connection limit (2) is reached" in b.log()

    first.close()  # node a's connection goes: node b admits one again
    wait_until(lambda: counted(etcd1, cluster_name, "a") == 0, TIMEOUT_S, "node a's count back to 0")
    third = connect(b)
    third.close()
    second.close()
