"""The inter-node links over TLS (``--cluster-tls``, issue 32 item 6): two real nodes with
certificates of one CA (trustme, tests/e2e/tlscerts.py) link and list each other's queues; a
client that speaks the protocol in clear, or TLS without a certificate of that CA, gets nothing
and the nodes go on. Waits are on what the API shows, bounded."""

from __future__ import annotations

import json
import socket
import ssl

import pika

from tests.cluster.cluster_nodes import api, wait_until
from tests.e2e.tlscerts import Pki

TIMEOUT_S = 30.0


def test_nodes_link_over_tls_and_refuse_clear_text_and_strangers(etcd1, nodes, cluster_name, tmp_path, uid):
    pki = Pki(tmp_path / "pki")
    tls = ["--cluster-tls", "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
           "--tls-ca", str(pki.ca_file)]
    a = nodes.start(etcd1.endpoints, cluster_name, "a", *tls)
    b = nodes.start(etcd1.endpoints, cluster_name, "b", *tls)
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    conn.channel().queue_declare(f"over-tls-{uid}")
    conn.close()
    wait_until(lambda: any(q["name"] == f"over-tls-{uid}" and q["node"] == "a" for q in api(b, "queues")),
               TIMEOUT_S, "node b listing node a's queue over the TLS link")
    port = next(e["port"] for e in api(a, "overview")["listeners"] if e["protocol"] == "clustering" and e["node"] == "a")

    # the protocol in clear, with the cluster's id: a listener in clear would answer its hello;
    # the TLS listener takes it for a broken handshake and closes
    cluster_id = json.loads(etcd1.get_prefix(f"/warren/{cluster_name}/id")[f"/warren/{cluster_name}/id"])["id"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"WARREN-NODE 1\n" + json.dumps({"node": "clear", "cluster_id": cluster_id,
                                                       "nonce": "ab" * 32}).encode() + b"\n")
        assert sock.recv(100) == b""
    # TLS without a certificate: refused by the handshake
    ctx = pki.client_context()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:  # TLS 1.3: the handshake ends before the listener checks us; then it closes (or alerts)
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                sock.sendall(b"WARREN-NODE 1\n")
                got = sock.recv(100)
        except (ssl.SSLError, ConnectionError):
            got = b""
        assert got == b""
    # and the link still works
    assert any(q["node"] == "a" for q in api(b, "queues"))


def test_cluster_tls_needs_a_certificate_and_a_ca(etcd1, nodes, cluster_name):
    line = nodes.refused(etcd1.endpoints, cluster_name, "a", "--cluster-tls")
    assert line == ("Error: cluster-tls needs tls-cert (this node's certificate, tls-key if apart) and tls-ca "
                    "(the CA the other nodes' certificates chain to)"), line
