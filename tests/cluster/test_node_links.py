"""The inter-node protocol (issue 32, item 6) and what the HTTP API does with it (item 5): real
etcd, real nodes, pika and the HTTP API, and raw sockets speaking the handshake by hand.

Checked: any node's API lists the other nodes' queues and connections with their ``node``, sums
their figures in the overview, closes a connection another node holds; the "clustering"
listener is listed; a connection that is not a node, a node with a wrong secret or another
cluster's id is refused with a log line naming the address and the node it claimed, and the
node still serves the others; a record carrying a class that is not allowed is not unpickled
(nothing runs) and closes that link only. Waits are on what the API shows or the log says.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import socket
import struct
import time
from urllib.parse import quote

import pika
import pytest

from tests.cluster.cluster_nodes import api, wait_until

TIMEOUT_S = 30.0
MAGIC = b"WARREN-NODE 1\n"  # warren/cluster/links.py's protocol, written out here as a client would


def cluster_port(node) -> int:
    return next(entry["port"] for entry in api(node, "overview")["listeners"]
                if entry["protocol"] == "clustering" and entry["node"] == node_name_of(node))


def node_name_of(node) -> str:
    return api(node, "overview")["node"]


def proof(secret: str, role: str, cluster_id: str, first: str, second: str) -> str:
    return hmac.new(secret.encode(), "|".join((role, cluster_id, first, second)).encode(), hashlib.sha256).hexdigest()


def handshake(port: int, cluster_id: str, secret: str, name: str = "intruder") -> tuple[socket.socket, dict]:
    """The dialler's side by hand: the listener's first answer, and the socket after our proof."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    nonce = os.urandom(32).hex()
    sock.sendall(MAGIC + json.dumps({"node": name, "cluster_id": cluster_id, "nonce": nonce}).encode() + b"\n")
    reader = sock.makefile("rb")
    hello = json.loads(reader.readline())
    sock.sendall(json.dumps({"proof": proof(secret, "dialler", cluster_id, hello["nonce"], nonce)}).encode() + b"\n")
    return sock, {"hello": hello, "reader": reader, "nonce": nonce}


def closed_by_peer(sock: socket.socket, reader) -> bool:
    try:
        return reader.read(1) == b""
    except (ConnectionError, socket.timeout):
        return False


def cluster_identity(etcd, cluster: str) -> tuple[str, str]:
    keys = etcd.get_prefix(f"/warren/{cluster}/")
    secret = keys[f"/warren/{cluster}/secret"]
    return json.loads(keys[f"/warren/{cluster}/id"])["id"], secret.decode() if isinstance(secret, bytes) else secret


def test_any_node_lists_and_acts_on_the_others_objects(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    held = pika.BlockingConnection(pika.URLParameters(a.url))
    try:
        held.channel().queue_declare(f"on-a-{uid}", durable=True)
        own = pika.BlockingConnection(pika.URLParameters(b.url))
        own.channel().queue_declare(f"on-b-{uid}")
        own.close()

        def listed():
            queues = {(q["name"], q["node"]) for q in api(b, "queues")}
            return queues if {(f"on-a-{uid}", "a"), (f"on-b-{uid}", "b")} <= queues else None
        wait_until(listed, TIMEOUT_S, "node b listing both nodes' queues")
        assert api(b, "overview")["object_totals"]["queues"] >= 2

        connections = wait_until(lambda: [c for c in api(b, "connections") if c["node"] == "a"], TIMEOUT_S,
                                 "node b listing node a's connection")
        assert len(connections) == 1 and connections[0]["user"] == "guest"
        protocols = {(e["node"], e["protocol"]) for e in api(b, "overview")["listeners"]}
        assert {("a", "clustering"), ("b", "clustering")} <= protocols

        # closed through node b's API, on node a
        api(b, f"connections/{quote(connections[0]['name'], safe='')}", "DELETE")
        deadline = time.monotonic() + TIMEOUT_S
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker, match="320"):
            while time.monotonic() < deadline:
                held.process_data_events(time_limit=0.2)
    finally:
        if held.is_open:
            held.close()


def test_strangers_wrong_secrets_and_hostile_records_are_refused(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    port = cluster_port(a)
    cluster_id, secret = cluster_identity(etcd1, cluster_name)

    # not the protocol at all
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(100) == b""
    wait_until(lambda: "not Warren's inter-node protocol" in a.log(), TIMEOUT_S, "the stranger's refusal logged")

    # the right cluster, a wrong secret: node a proves it holds the secret, then refuses ours
    sock, seen = handshake(port, cluster_id, "not the secret", name="mallory")
    with sock:
        assert seen["hello"]["node"] == "a"
        assert seen["hello"]["proof"] == proof(secret, "listener", cluster_id, seen["nonce"], seen["hello"]["nonce"])
        assert closed_by_peer(sock, seen["reader"])
    line = wait_until(lambda: [x for x in a.log().splitlines() if "'mallory'" in x], TIMEOUT_S, "logged")[0]
    assert "refused an inter-node connection from 127.0.0.1:" in line and "a wrong cluster secret" in line

    # another cluster's id: refused before anything is proved
    with socket.create_connection(("127.0.0.1", port), timeout=10) as other:
        other.sendall(MAGIC + json.dumps({"node": "eve", "cluster_id": "0" * 36, "nonce": "ab" * 32}).encode() + b"\n")
        assert other.recv(100) == b""
    wait_until(lambda: "(node 'eve'): another cluster's id" in a.log(), TIMEOUT_S, "logged")

    # the secret, and a record that would run a command if it were unpickled freely
    marker = a.data_dir / f"pwned-{uid}"

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    sock, seen = handshake(port, cluster_id, secret)
    with sock:
        assert json.loads(seen["reader"].readline()) == {"ok": True}
        data = pickle.dumps(("q", 1, "api_rows", ("queues", (Hostile(),))))
        sock.sendall(struct.pack(">I", len(data)) + data)
        assert closed_by_peer(sock, seen["reader"])
    wait_until(lambda: "sent a record this node does not take" in a.log(), TIMEOUT_S, "the hostile record logged")
    assert "a record may not carry posix.system" in a.log() and not marker.exists()

    # node a still serves node b, whose API still lists node a's queues
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    conn.channel().queue_declare(f"still-{uid}")
    conn.close()
    wait_until(lambda: any(q["name"] == f"still-{uid}" and q["node"] == "a" for q in api(b, "queues")),
               TIMEOUT_S, "node b listing node a's queue after the refusals")
