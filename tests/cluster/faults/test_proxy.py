"""The fault harness's TCP proxy (proxy.py): real sockets, an echo server behind it, connections
labelled by a Warren link's hello written by hand; and one pair of real Warren nodes linked
through it and partitioned.

Waits are on what the sockets, the counters or the API show; the only waits for time to pass are
the proxy's own delay, and the short recv that shows a blackholed socket silent yet open.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import socketserver
import threading
import time

import pika
import pytest

from tests.cluster.cluster_nodes import api, wait_until
from tests.cluster.faults.proxy import MAGIC, UNKNOWN, FaultProxy
from tests.ports import free_ports
from warren.config import Config

TIMEOUT_S = 10.0
NODES_TIMEOUT_S = 30.0
SILENCE_S = 0.5  # how long a blackholed socket is listened to and must stay silent


class EchoServer:
    """Echoes every connection's bytes back until it closes; counts the connections it accepted."""

    def __init__(self) -> None:
        outer = self
        self.accepted = 0
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()

        class Echo(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with outer.lock:
                    outer.accepted += 1
                    outer.open.add(self.request)
                try:
                    while data := self.request.recv(65536):
                        self.request.sendall(data)
                except OSError:
                    pass
                finally:
                    with outer.lock:
                        outer.open.discard(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for sock in self.open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.thread.join(TIMEOUT_S)


@pytest.fixture
def echo():
    server = EchoServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy():
    with FaultProxy() as running:
        yield running


def hello(node: str) -> bytes:
    """A Warren link's first bytes as a dialling node writes them (warren/cluster/links.py)."""
    return MAGIC + json.dumps({"node": node, "cluster_id": "c" * 36, "nonce": os.urandom(32).hex(),
                               "port": 1}).encode() + b"\n"


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        data = sock.recv(n - len(got))
        if not data:
            raise AssertionError(f"closed after {len(got)} of {n} octets")
        got += data
    return got


def echoed(sock: socket.socket, data: bytes) -> bool:
    sock.sendall(data)
    return recv_exactly(sock, len(data)) == data


def dial(port: int, node: str | None = None) -> socket.socket:
    """A connection through the proxy, labelled and passing: the hello (if any) came back."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    if node is not None:
        assert echoed(sock, hello(node))
    return sock


def closed(sock: socket.socket) -> bool:
    """The proxy closed it (reset or EOF) rather than leaving it open and silent."""
    sock.settimeout(TIMEOUT_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def silent(sock: socket.socket) -> bool:
    """Nothing arrives for SILENCE_S, and the socket is not closed either."""
    sock.settimeout(SILENCE_S)
    try:
        sock.recv(1)
    except socket.timeout:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(TIMEOUT_S)
    return False


def test_pass_forwards_and_labels_from_the_hello_or_the_front(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as sock:
        assert echoed(sock, b"ping" * 1000)
    # the hello written as Warren writes it, the magic line apart from the JSON line
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        first = hello("c")
        sock.sendall(first[:len(MAGIC)])
        sock.sendall(first[len(MAGIC):])
        assert recv_exactly(sock, len(first)) == first
    # not a Warren link: labelled UNKNOWN, forwarded as it came
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        assert echoed(sock, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    fixed = proxy.front("etcd1", "127.0.0.1", echo.port, source="n1")
    with dial(fixed) as sock:  # labelled before a byte is read
        assert echoed(sock, b"PUT /v3/kv/put")

    counters = wait_until(lambda: (c := proxy.counters()) and all(x["open"] == 0 for x in c.values()) and c,
                          TIMEOUT_S, "every connection seen closed")
    assert set(counters) == {("a", "b"), ("c", "b"), (UNKNOWN, "b"), ("n1", "etcd1")}
    assert counters[("a", "b")]["connections"] == 1
    assert counters[("a", "b")]["forwarded"] == 2 * (len(hello("a")) + 4000)
    assert counters[("n1", "etcd1")]["forwarded"] == 2 * len(b"PUT /v3/kv/put")
    assert all(c["discarded"] == 0 for c in counters.values())


def test_delay_holds_each_chunk_and_keeps_the_order(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    delay_s = 0.3
    with dial(port, "a") as sock:
        proxy.set_link("a", "b", "delay", delay_s)
        assert proxy.link("a", "b") == ("delay", delay_s)
        started = time.monotonic()
        parts = [f"part {i};".encode() for i in range(20)]
        for part in parts:
            sock.sendall(part)
        assert recv_exactly(sock, sum(map(len, parts))) == b"".join(parts)
        assert time.monotonic() - started >= 2 * delay_s  # there and back, each way held
        proxy.set_link("a", "b", "pass")
        assert echoed(sock, b"no longer held")


def test_drop_resets_the_pairs_connections_and_refuses_new_ones(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as dropped, dial(port, "c") as other:
        proxy.set_link("a", "b", "drop")
        assert closed(dropped)
        assert echoed(other, b"another pair passes")
    accepted = echo.accepted
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(hello("a"))
        assert closed(sock)
    assert echo.accepted == accepted  # the target never heard of it
    proxy.set_link("a", "b", "pass")
    with dial(port, "a") as sock:
        assert echoed(sock, b"back")
    assert proxy.counters()[("a", "b")]["connections"] == 3


def test_blackhole_silences_both_ways_and_its_end_resets_what_lost_bytes(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as holed, dial(port, "a") as idle:
        proxy.set_link("a", "b", "blackhole")
        holed.sendall(b"into the void")
        assert silent(holed)
        wait_until(lambda: proxy.counters()[("a", "b")]["discarded"] == len(b"into the void"), TIMEOUT_S,
                   "the bytes counted as discarded")
        # a new connection is accepted and silenced; the target is not dialled
        accepted = echo.accepted
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as fresh:
            fresh.sendall(hello("a"))
            assert silent(fresh)
            assert echo.accepted == accepted
            proxy.set_link("a", "b", "pass")
            assert closed(fresh)  # never joined to its target
        assert closed(holed)  # its stream has a hole
        assert echoed(idle, b"lost nothing, so it goes on")
    with dial(port, "a") as sock:
        assert echoed(sock, b"passes again")
    assert proxy.counters()[("a", "b")]["discarded"] == len(b"into the void") + len(hello("a"))


def test_blackhole_discards_what_the_target_sends_too(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as sock:
        # the bytes reach the target, then the link goes dark before its echo can come back
        proxy.set_link("a", "b", "delay", 1.0)
        sock.sendall(b"echo me")
        wait_until(lambda: proxy.counters()[("a", "b")]["forwarded"] > 2 * len(hello("a")), TIMEOUT_S,
                   "the bytes forwarded to the target")
        proxy.set_link("a", "b", "blackhole")
        assert silent(sock)
        wait_until(lambda: proxy.counters()[("a", "b")]["discarded"] == len(b"echo me"), TIMEOUT_S,
                   "the echo discarded")


def test_cut_resets_once_then_passes(proxy, echo):
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as first, dial(port, "a") as second:
        proxy.set_link("a", "b", "cut")
        assert closed(first) and closed(second)
    assert proxy.link("a", "b") == ("pass", 0.0)
    with dial(port, "a") as sock:
        assert echoed(sock, b"after the cut")
    assert proxy.events()[-1][1] == "a->b cut (2 connections reset)"


def test_partition_both_ways_then_heal(proxy):
    servers = {name: EchoServer() for name in ("a", "b", "c")}
    try:
        ports = {name: proxy.front(name, "127.0.0.1", server.port) for name, server in servers.items()}
        a_to_b, b_to_a, c_to_b = dial(ports["b"], "a"), dial(ports["a"], "b"), dial(ports["b"], "c")
        with a_to_b, b_to_a, c_to_b:
            proxy.partition(["a"], ["b"], state="drop")
            assert closed(a_to_b) and closed(b_to_a)
            assert echoed(c_to_b, b"c is on neither side")
            assert proxy.link("a", "b") == proxy.link("b", "a") == ("drop", 0.0)
            assert proxy.link("a", "c") == ("pass", 0.0)
            proxy.heal()
            assert proxy.link("a", "b") == proxy.link("b", "a") == ("pass", 0.0)
        with dial(ports["b"], "a") as sock:
            assert echoed(sock, b"healed")

        # the default partition is a lost route: silence, not a refusal
        with dial(ports["b"], "a") as sock, dial(ports["b"], "c") as bystander:
            proxy.partition(["a"], ["b", "x"])
            assert proxy.link("x", "a") == ("blackhole", 0.0)
            sock.sendall(b"unheard")
            assert silent(sock)
            assert echoed(bystander, b"heard")
            proxy.heal()
            assert closed(sock)
        events = proxy.events()
        assert [what for _, what in events] == [
            "partition ['a'] | ['b'] drop (2 connections reset)", "heal",
            "partition ['a'] | ['b', 'x'] blackhole", "heal (1 connection reset)"]
        assert [at for at, _ in events] == sorted(at for at, _ in events)
    finally:
        for server in servers.values():
            server.stop()


def test_bad_states_are_refused(proxy):
    with pytest.raises(ValueError, match="not 'slow'"):
        proxy.set_link("a", "b", "slow")
    with pytest.raises(ValueError, match="a delay of 0"):
        proxy.set_link("a", "b", "delay")
    assert proxy.events() == []


def test_stop_closes_listeners_and_connections(echo):
    proxy = FaultProxy().start()
    port = proxy.front("b", "127.0.0.1", echo.port)
    with dial(port, "a") as passing, socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as waiting:
        proxy.stop()
        assert closed(passing) and closed(waiting)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S).close()
    with pytest.raises(RuntimeError, match="not running"):
        proxy.heal()
    proxy.stop()  # twice is harmless


ADVERTISE_MISSING = "warren serve has no --cluster-advertise yet: a node's cluster port cannot be fronted by the proxy"


@pytest.mark.skipif("cluster_advertise" not in {f.name for f in dataclasses.fields(Config)}, reason=ADVERTISE_MISSING)
def test_two_nodes_linked_through_the_proxy_partitioned_and_healed(etcd1, nodes, cluster_name, uid, proxy):
    cluster_ports = dict(zip("ab", free_ports(2)))
    fronts = {name: proxy.front(name, "127.0.0.1", port) for name, port in cluster_ports.items()}
    a, b = (nodes.start(etcd1.endpoints, cluster_name, name, "--cluster-port", str(cluster_ports[name]),
                        "--cluster-advertise", f"127.0.0.1:{fronts[name]}") for name in "ab")
    queue = f"on-a-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    try:
        conn.channel().queue_declare(queue, durable=True)
    finally:
        conn.close()

    def served_by_a_as_b_lists() -> bool:
        """b lists a's queue as served (a row of a's own), not as a down node's queue nor missing."""
        return any(q["name"] == queue and q["node"] == "a" and q.get("state") != "down" for q in api(b, "queues"))

    def b_links_to_a() -> list:
        own = next(row for row in api(b, "nodes") if row["name"] == "b")
        return [link for link in own.get("cluster_links", []) if link["name"] == "a"]

    wait_until(served_by_a_as_b_lists, NODES_TIMEOUT_S, "node b listing node a's queue")
    assert b_links_to_a()[0]["peer_port"] == fronts["a"]  # b dialled a's proxy port, not a's own
    counters = proxy.counters()
    # b asked over the link it dialled; a answered over the link it dialled
    assert counters[("b", "a")]["forwarded"] > 0 and counters[("a", "b")]["forwarded"] > 0

    proxy.partition(["a"], ["b"], state="drop")
    assert re.fullmatch(r"partition \['a'\] \| \['b'\] drop \(\d+ connections? reset\)", proxy.events()[-1][1])
    wait_until(lambda: not served_by_a_as_b_lists(), NODES_TIMEOUT_S, "node a's queue no longer served in b's list")

    proxy.heal()
    wait_until(served_by_a_as_b_lists, NODES_TIMEOUT_S, "node b listing node a's queue again after the heal")
    wait_until(b_links_to_a, NODES_TIMEOUT_S, "node b linked to node a again")
    assert b_links_to_a()[0]["peer_port"] == fronts["a"]
