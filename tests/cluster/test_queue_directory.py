"""Where each queue lives (issue 32, items 3-5, the HTTP API's and the down node's part): real etcd,
real nodes, pika and the HTTP API.

A queue of node a is shown, read, purged, declared again and deleted through node b's HTTP API
(node a does it); an exclusive queue of a connection on node a is locked (405) for node b's; killed with kill -9, node a's durable queue is listed by node b as ``state:
down`` (its transient one gone with a's lease), is 404 by name, and a declare of it through node
b is refused as RabbitMQ 3.10 refuses it; node a started again has the queue back with every
confirmed message. Waits are on what the API shows, bounded.
"""

from __future__ import annotations

import signal

import pika
import pytest

from tests.cluster.cluster_nodes import api, api_status, members, wait_until

LEASE_TTL = "2"
TIMEOUT_S = 40.0


def status_of(node, path: str, method: str = "GET", body=None) -> int:
    return api_status(node, path, method, body)[0]


def shown(node, name: str, messages: int) -> dict | None:
    """The queue's row as ``node`` shows it, once it shows ``messages`` messages."""
    status, row = api_status(node, f"queues/%2F/{name}")
    return row if status == 200 and row.get("messages") == messages else None


def queue_rows(node, name: str) -> list[dict]:
    return [q for q in api(node, "queues/%2F") if q["name"] == name]


def test_a_queue_of_another_node_through_the_api_then_down_then_back(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a", "--cluster-lease-ttl", LEASE_TTL)
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--cluster-lease-ttl", LEASE_TTL)
    durable, transient = f"kept-{uid}", f"gone-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(durable, durable=True)
    ch.queue_declare(transient)
    for i in range(3):
        ch.basic_publish("", durable, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()

    # shown by node b, as node a shows it
    row = wait_until(lambda: shown(b, durable, 3), TIMEOUT_S, "node b showing node a's queue with 3 messages")
    assert row["node"] == "a" and row["durable"] is True
    # read through node b: node a takes them (and puts them back)
    status, got = api_status(b, f"queues/%2F/{durable}/get", "POST",
                             {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"})
    assert status == 200 and [m["payload"] for m in got] == ["m0", "m1"]
    # declared again through node b: node a answers (it exists), node b makes no queue of its own
    assert status_of(b, f"queues/%2F/{durable}", "PUT", {"durable": True}) == 204
    assert [q["node"] for q in queue_rows(b, durable)] == ["a"]
    # an equivalence refused by node a reads as node a's refusal
    assert status_of(b, f"queues/%2F/{durable}", "PUT", {"durable": False}) == 400
    # purged through node b
    assert status_of(b, f"queues/%2F/{durable}/contents", "DELETE") == 204
    wait_until(lambda: api(a, f"queues/%2F/{durable}").get("messages") == 0, TIMEOUT_S, "node a's queue purged")

    # an exclusive queue of a connection on node a is locked for node b's clients, as RabbitMQ's
    holder = pika.BlockingConnection(pika.URLParameters(a.url))
    holder.channel().queue_declare(f"mine-{uid}", exclusive=True)
    key = f"/warren/{cluster_name}/queues/%2F/mine-{uid}/a"  # the queue directory (warren/cluster/queues.py)
    wait_until(lambda: etcd1.get_prefix(key), TIMEOUT_S, "node a's exclusive queue in the queue directory")
    other = pika.BlockingConnection(pika.URLParameters(b.url))
    for use in (lambda ch: ch.queue_declare(f"mine-{uid}"), lambda ch: ch.basic_get(f"mine-{uid}")):
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as locked:
            use(other.channel())
        assert locked.value.reply_code == 405
    other.close()
    holder.close()

    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    ch = conn.channel()
    ch.confirm_delivery()
    for i in range(2):
        ch.basic_publish("", durable, f"n{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()

    # kill -9: the durable queue is down, the transient one gone with node a's lease
    a.signal(signal.SIGKILL)
    a.proc.wait(timeout=30)
    wait_until(lambda: [q.get("state") for q in queue_rows(b, durable)] == ["down"] and not queue_rows(b, transient),
               TIMEOUT_S, "node b listing the durable queue down and the transient one gone")
    down = queue_rows(b, durable)[0]
    assert down == {"name": durable, "vhost": "/", "node": "a", "state": "down", "type": "classic", "durable": True,
                    "auto_delete": False, "exclusive": False, "arguments": {}}
    assert status_of(b, f"queues/%2F/{durable}") == 404  # as RabbitMQ 3.10
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        conn.channel().queue_declare(durable, durable=True)
    assert refused.value.reply_code == 404
    assert refused.value.reply_text == (f"NOT_FOUND - home node 'a' of durable queue '{durable}' in vhost '/' "
                                        f"is down or inaccessible")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        conn.channel().queue_declare(durable, passive=True)
    assert refused.value.reply_code == 404
    conn.close()

    # node a again, with its data folder, once its lease ended (the others saw it down at once,
    # by its link closing): the queue is back with every confirmed message
    wait_until(lambda: "a" not in members(etcd1, cluster_name), TIMEOUT_S, "node a's lease ended")
    nodes.start(etcd1.endpoints, cluster_name, "a", "--cluster-lease-ttl", LEASE_TTL, data_dir=a.data_dir)
    wait_until(lambda: shown(b, durable, 2), TIMEOUT_S, "node b showing the queue back with its 2 messages")
    assert status_of(b, f"queues/%2F/{durable}", "DELETE") == 204
    wait_until(lambda: not queue_rows(b, durable), TIMEOUT_S, "the queue deleted through node b")
