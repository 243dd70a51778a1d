"""Users, vhosts, permissions, policies and parameters are one state for the cluster, kept in
etcd (warren/cluster/shared_files.py): a change made through one node's HTTP API acts on the
others within a second, two nodes changing at once both keep their change, a node restarted
takes what changed while it was down, and without etcd a change is refused (503) while AMQP goes
on. Real etcd, real nodes, real clients (pika, the HTTP API over urllib)."""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request

import pika
import pytest

from tests.cluster.cluster_nodes import declare, declare_refused, publish_and_get, wait_until
from tests.cluster.etcd_harness import ETCD, MISSING_REASON, EtcdCluster
from tests.conftest import launch_broker

APPLIED_S = 10.0  # a change reaches the other nodes within a second; the bound allows a loaded machine
LEASE_TTL = "2"  # the killed node's name is free again within a few seconds


def api(node, method: str, path: str, body=None, timeout: float = 30.0) -> tuple[int, object]:
    """One HTTP API call as guest: (status, JSON answer or None)."""
    request = urllib.request.Request(node.http_url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except ValueError:
            return e.code, raw.decode(errors="replace")


def ok(answer: tuple[int, object]) -> object:
    status, body = answer
    assert 200 <= status < 300, answer
    return body


def q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def connect(node, user="guest", password="guest", vhost="/") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        node.host, node.port, vhost, pika.PlainCredentials(user, password), connection_attempts=1,
        socket_timeout=10, blocked_connection_timeout=10))


def logs_in(node, user, password, vhost="/") -> bool:
    try:
        connect(node, user, password, vhost).close()
        return True
    except pika.exceptions.AMQPError:
        return False


def users_of(node) -> set[str]:
    return {u["name"] for u in ok(api(node, "GET", "/api/users"))}


def test_users_vhosts_permissions_and_policies_made_on_one_node_act_on_the_others(etcd1, nodes, cluster_name):
    n1 = nodes.start(etcd1.endpoints, cluster_name, "n1")
    n2 = nodes.start(etcd1.endpoints, cluster_name, "n2")
    n3 = nodes.start(etcd1.endpoints, cluster_name, "n3")
    # a user added through node 1's API logs in over AMQP on node 2
    ok(api(n1, "PUT", "/api/users/alice", {"password": "pw-a", "tags": ""}))
    ok(api(n1, "PUT", "/api/permissions/%2F/alice", {"configure": ".*", "write": ".*", "read": ".*"}))
    wait_until(lambda: logs_in(n2, "alice", "pw-a"), APPLIED_S, "alice logs in on n2")
    assert "access.json changed by another node" in n2.log()
    assert "changed by another node" not in n1.log()  # its own changes are not written back (no echo)
    # a vhost made on node 2 is usable on node 3, and its deletion too
    ok(api(n2, "PUT", "/api/vhosts/v2", {}))
    ok(api(n2, "PUT", "/api/permissions/v2/guest", {"configure": ".*", "write": ".*", "read": ".*"}))
    wait_until(lambda: logs_in(n3, "guest", "guest", "v2"), APPLIED_S, "guest opens v2 on n3")
    conn = connect(n3, vhost="v2")
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("in-v2", durable=True)
    ch.basic_publish("", "in-v2", b"hello v2")
    assert ch.basic_get("in-v2", auto_ack=True)[2] == b"hello v2"
    conn.close()
    ok(api(n2, "DELETE", "/api/vhosts/v2"))
    wait_until(lambda: not logs_in(n3, "guest", "guest", "v2"), APPLIED_S, "v2 gone on n3")
    wait_until(lambda: "v2" not in {v["name"] for v in ok(api(n3, "GET", "/api/vhosts"))}, APPLIED_S,
               "v2 not listed on n3")
    # permissions cleared on node 3 act on node 1
    ok(api(n3, "DELETE", "/api/permissions/%2F/alice"))
    wait_until(lambda: not logs_in(n1, "alice", "pw-a"), APPLIED_S, "alice refused on n1")
    # a policy set on node 1 acts on a queue declared on node 2
    conn = connect(n2)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("ml.q", durable=True)
    ok(api(n1, "PUT", "/api/policies/%2F/ml", {"pattern": "^ml\\.", "definition": {"max-length": 2},
                                                "apply-to": "queues"}))
    wait_until(lambda: ok(api(n2, "GET", "/api/queues/%2F/ml.q")).get("policy") == "ml", APPLIED_S,
               "the policy in force on n2's queue")
    for i in range(5):
        ch.basic_publish("", "ml.q", f"m{i}".encode())
    assert ch.queue_declare("ml.q", passive=True).method.message_count == 2
    conn.close()
    # definitions imported through node 2 are exported by node 3
    ok(api(n2, "POST", "/api/definitions", {
        "users": [{"name": "imported", "password_hash": "", "tags": ""}],
        "vhosts": [{"name": "v-imported"}],
        "permissions": [{"user": "imported", "vhost": "v-imported", "configure": ".*", "write": ".*", "read": ".*"}],
        "policies": [{"vhost": "v-imported", "name": "p-imported", "pattern": ".*", "apply-to": "queues",
                      "definition": {"max-length": 5}, "priority": 0}]}))

    def exported():
        d = ok(api(n3, "GET", "/api/definitions"))
        return ("imported" in {u["name"] for u in d["users"]} and "v-imported" in {v["name"] for v in d["vhosts"]}
                and "p-imported" in {p["name"] for p in d["policies"]})
    wait_until(exported, APPLIED_S, "the imported definitions exported by n3")
    # a runtime parameter and a global one, set on node 3, are listed by node 1
    ok(api(n3, "PUT", "/api/global-parameters/shared-note", {"value": "from n3"}))
    wait_until(lambda: api(n1, "GET", "/api/global-parameters/shared-note")[0] == 200, APPLIED_S,
               "the global parameter on n1")


def test_two_nodes_adding_users_and_policies_at_once_both_keep_theirs(etcd1, nodes, cluster_name):
    n1 = nodes.start(etcd1.endpoints, cluster_name, "n1")
    n2 = nodes.start(etcd1.endpoints, cluster_name, "n2")
    errors = []

    def add(node, prefix):
        try:
            for i in range(8):
                ok(api(node, "PUT", f"/api/users/{prefix}{i}", {"password": "x", "tags": ""}))
                if i % 2:
                    ok(api(node, "PUT", f"/api/policies/%2F/{prefix}{i}",
                           {"pattern": f"^{prefix}{i}$", "definition": {"max-length": i}}))
        except BaseException as e:  # said by the test, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=add, args=(n, p)) for n, p in ((n1, "one-"), (n2, "two-"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    wanted = {f"{p}{i}" for p in ("one-", "two-") for i in range(8)}
    policies = {f"{p}{i}" for p in ("one-", "two-") for i in range(1, 8, 2)}
    for node in (n1, n2):
        wait_until(lambda: wanted <= users_of(node), APPLIED_S, f"every user on {node.port}")
        wait_until(lambda: policies <= {p["name"] for p in ok(api(node, "GET", "/api/policies"))}, APPLIED_S,
                   f"every policy on {node.port}")


def test_the_first_node_seeds_the_cluster_and_a_node_restarted_takes_what_changed_while_it_was_down(
        etcd1, nodes, cluster_name, tmp_path):
    # a single node's users become the cluster's when it creates the cluster
    alone = launch_broker(tmp_path, "--workers", "1", data_dir=tmp_path / "data-n1")
    nodes.started.append(alone)
    ok(api(alone, "PUT", "/api/users/from-before", {"password": "pw0", "tags": ""}))
    ok(api(alone, "PUT", "/api/permissions/%2F/from-before", {"configure": ".*", "write": ".*", "read": ".*"}))
    alone.stop()
    n1 = nodes.start(etcd1.endpoints, cluster_name, "n1", "--cluster-lease-ttl", LEASE_TTL, data_dir=alone.data_dir)
    n2 = nodes.start(etcd1.endpoints, cluster_name, "n2", "--cluster-lease-ttl", LEASE_TTL)
    assert logs_in(n2, "from-before", "pw0")  # at once: n2 took the cluster's users before serving
    n2.proc.kill()  # kill -9
    n2.proc.wait(timeout=10)
    ok(api(n1, "PUT", "/api/users/while-down", {"password": "pw", "tags": ""}))
    ok(api(n1, "PUT", "/api/permissions/%2F/while-down", {"configure": ".*", "write": ".*", "read": ".*"}))
    prefix = f"/warren/{cluster_name}/nodes/"
    wait_until(lambda: prefix + "n2" not in etcd1.get_prefix(prefix), 30, "the killed node's lease ends")
    again = nodes.start(etcd1.endpoints, cluster_name, "n2", "--cluster-lease-ttl", LEASE_TTL, data_dir=n2.data_dir)
    assert logs_in(again, "while-down", "pw")  # at once: taken before the broker read its files


@pytest.fixture
def own_etcd(tmp_path):
    """A one-member etcd of this test's own, which it stops."""
    if ETCD is None:
        pytest.skip(MISSING_REASON)
    etcd = EtcdCluster(tmp_path / "etcd", 1).start()
    try:
        yield etcd
    finally:
        etcd.stop()


def test_without_etcd_a_change_is_refused_and_amqp_goes_on(own_etcd, nodes, cluster_name):
    n1 = nodes.start(own_etcd.endpoints, cluster_name, "n1")
    ok(api(n1, "PUT", "/api/users/before", {"password": "pw", "tags": ""}))
    declare(n1, "still-serving")
    own_etcd.stop()
    status, body = api(n1, "PUT", "/api/users/after", {"password": "pw", "tags": ""})
    assert status == 503, (status, body)
    assert body["error"] == "service_unavailable" and "etcd" in body["reason"], body
    assert "a change of access.json was refused" in n1.log()
    assert "after" not in users_of(n1)
    # publishing and consuming on an existing queue go on; a new queue is a change: refused
    assert publish_and_get(n1, "still-serving", declare=False) == b"to still-serving"
    assert "etcd" in declare_refused(n1, "new-while-down")
    assert "before" in users_of(n1)


def consumers(plain, queue: str) -> int:
    conn = connect(plain)
    try:
        return conn.channel().queue_declare(queue, passive=True).method.consumer_count
    finally:
        conn.close()


def moves(plain, body: bytes) -> bool:
    """A message published to the shovel's source queue on ``plain`` reaches its destination."""
    conn = connect(plain)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "s-src", body)
        got = wait_until(lambda: ch.basic_get("s-dst", auto_ack=True)[2], APPLIED_S, f"{body!r} shovelled")
        return got == body
    finally:
        conn.close()


def test_one_node_runs_each_shovel_and_another_takes_it_when_that_node_dies(etcd1, nodes, cluster_name, tmp_path):
    plain = launch_broker(tmp_path, "--workers", "1", data_dir=tmp_path / "plain-data")
    nodes.started.append(plain)  # stopped with the nodes
    conn = connect(plain)
    for queue in ("s-src", "s-dst"):
        conn.channel().queue_declare(queue, durable=True)
    conn.close()
    n1 = nodes.start(etcd1.endpoints, cluster_name, "n1", "--cluster-lease-ttl", LEASE_TTL)
    n2 = nodes.start(etcd1.endpoints, cluster_name, "n2", "--cluster-lease-ttl", LEASE_TTL)
    uri = f"amqp://guest:guest@127.0.0.1:{plain.port}"
    ok(api(n1, "PUT", "/api/parameters/shovel/%2F/s1",
           {"value": {"src-uri": uri, "src-queue": "s-src", "dest-uri": uri, "dest-queue": "s-dst"}}))

    key = f"/warren/{cluster_name}/runs/shovel/%2F/s1"  # which node runs it (warren/cluster/runs.py)
    name = wait_until(lambda: etcd1.get_prefix(key).get(key), APPLIED_S, "a node runs the shovel").decode()
    runner, other = (n1, n2) if name == "n1" else (n2, n1)
    # the other node has the definition too (its listeners heard of it in the same loop turn)
    wait_until(lambda: api(other, "GET", "/api/parameters/shovel/%2F/s1")[0] == 200, APPLIED_S, "the shovel defined")
    assert moves(plain, b"first")
    assert consumers(plain, "s-src") == 1, "the shovel runs on both nodes"
    runner.proc.kill()  # kill -9: its lease ends, its key goes, the other node takes the shovel
    runner.proc.wait(timeout=10)
    wait_until(lambda: etcd1.get_prefix(key).get(key) == ("n2" if name == "n1" else "n1").encode(), 30,
               "the other node takes the shovel")
    assert moves(plain, b"second")
    assert consumers(plain, "s-src") == 1
    ok(api(other, "DELETE", "/api/parameters/shovel/%2F/s1"))
    prefix = f"/warren/{cluster_name}/runs/"
    wait_until(lambda: not etcd1.get_prefix(prefix), APPLIED_S, "the shovel's run key released")


@pytest.mark.cluster
def test_with_two_etcd_members_of_three_gone_a_change_is_refused_on_every_node(nodes, cluster_name, request):
    """-m cluster: three etcd members, two killed; each change waits for the last member's
    time-out (5 s) before it is refused (about 18 s here)."""
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (two 5 s time-outs): the default run stops a one-member etcd")
    etcd3 = request.getfixturevalue("etcd3")  # started only when the test runs
    a = nodes.start(etcd3.endpoints, cluster_name, "a")
    b = nodes.start(etcd3.endpoints, cluster_name, "b")
    ok(api(a, "PUT", "/api/vhosts/kept", {}))
    wait_until(lambda: "kept" in {v["name"] for v in ok(api(b, "GET", "/api/vhosts"))}, APPLIED_S, "kept on b")
    for node in (a, b):
        declare(node, f"existing-{node.port}")  # publishing to existing queues goes on without etcd
    etcd3.kill(0)
    etcd3.kill(1)  # one member of three left: it answers, but cannot commit
    for node in (a, b):
        status, body = api(node, "PUT", "/api/policies/%2F/late", {"pattern": "^late$", "definition": {"max-length": 1}})
        assert status == 503 and "no quorum" in body["reason"], (status, body)
        assert "a change of policies.json was refused" in node.log()
        assert "late" not in {p["name"] for p in ok(api(node, "GET", "/api/policies"))}
        assert "kept" in {v["name"] for v in ok(api(node, "GET", "/api/vhosts"))}
        queue = f"existing-{node.port}"
        assert publish_and_get(node, queue, declare=False) == f"to {queue}".encode()
        assert "etcd" in declare_refused(node, f"new-{node.port}")  # a new queue is a change: refused


def test_one_node_runs_a_federated_exchanges_links_and_another_takes_them_when_that_node_dies(
        etcd1, nodes, cluster_name, tmp_path):
    """Exchanges and policies are the cluster's, so every node would run an exchange's federation
    links; one does (warren/cluster/runs.py), and when it dies another takes them over. The
    upstream's queue is named after the cluster, not the node (as RabbitMQ's), so what the upstream
    received meanwhile waits there and arrives: nothing published upstream is lost."""
    upstream = launch_broker(tmp_path, "--workers", "1", data_dir=tmp_path / "upstream-data")
    nodes.started.append(upstream)  # stopped with the nodes
    conn = connect(upstream)
    conn.channel().exchange_declare("fed.x", "direct", durable=True)
    conn.close()
    n1 = nodes.start(etcd1.endpoints, cluster_name, "n1", "--cluster-lease-ttl", LEASE_TTL)
    n2 = nodes.start(etcd1.endpoints, cluster_name, "n2", "--cluster-lease-ttl", LEASE_TTL)
    ok(api(n1, "PUT", "/api/parameters/federation-upstream/%2F/up",
           {"value": {"uri": f"amqp://guest:guest@127.0.0.1:{upstream.port}"}}))
    ok(api(n1, "PUT", "/api/policies/%2F/fed", {"pattern": r"^fed\.x$", "apply-to": "exchanges",
                                                 "definition": {"federation-upstream": "up"}}))
    conn = connect(n1)
    conn.channel().exchange_declare("fed.x", "direct", durable=True)
    conn.close()

    key = f"/warren/{cluster_name}/runs/exchange/%2F/fed.x"
    name = wait_until(lambda: etcd1.get_prefix(key).get(key), APPLIED_S, "a node runs the exchange's links").decode()
    runner, other = (n1, n2) if name == "n1" else (n2, n1)
    conn = connect(other)  # the queue lives on the node that survives
    ch = conn.channel()
    ch.queue_declare("fed-q", durable=True)
    ch.queue_bind("fed-q", "fed.x", "k")
    conn.close()
    upstream_queue = "federation: fed.x -> warren:/:fed.x"  # the cluster's name: warren (set_cluster_name)
    wait_until(lambda: consumers_if_any(upstream, upstream_queue) == 1, APPLIED_S, "the link consumes upstream")
    wait_until(lambda: upstream_bound(upstream), APPLIED_S, "fed-q's binding key bound upstream by the link")
    assert arrived(upstream, other, [b"m-%d" % i for i in range(10)]) == [b"m-%d" % i for i in range(10)]
    assert consumers(upstream, upstream_queue) == 1, "the exchange's links run on more than one node"
    links = ok(api(other, "GET", "/api/federation-links"))  # every node's links
    assert [(link["exchange"], link["status"]) for link in links] == [("fed.x", "running")], links

    runner.proc.kill()  # kill -9: its link's consumer goes at once, its run key with its lease
    runner.proc.wait(timeout=10)
    wait_until(lambda: consumers_if_any(upstream, upstream_queue) == 0, APPLIED_S, "the dead node's link gone")
    during = [b"during-%d" % i for i in range(10)]
    publish_confirmed(upstream, during)  # waits in the upstream's queue until the other node's link runs
    wait_until(lambda: etcd1.get_prefix(key).get(key) == other_name(name).encode(), 30,
               "the other node takes the exchange's links")
    assert arrived(upstream, other, [], expect=during) == during
    assert consumers(upstream, upstream_queue) == 1
    ok(api(other, "DELETE", "/api/policies/%2F/fed"))
    wait_until(lambda: not etcd1.get_prefix(key), APPLIED_S, "the run released once no policy federates it")


def upstream_bound(upstream) -> bool:
    """The link bound the upstream's fed.x with fed-q's key (what it would drop otherwise)."""
    return any(b["source"] == "fed.x" and b["routing_key"] == "k" for b in ok(api(upstream, "GET", "/api/bindings")))


def other_name(name: str) -> str:
    return "n2" if name == "n1" else "n1"


def consumers_if_any(broker, queue: str) -> int:
    """The consumers of ``queue`` on ``broker``, 0 while it does not exist."""
    conn = connect(broker)
    try:
        return conn.channel().queue_declare(queue, passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker:
        return 0
    finally:
        if conn.is_open:
            conn.close()


def publish_confirmed(broker, bodies: list[bytes]) -> None:
    conn = connect(broker)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        for body in bodies:
            ch.basic_publish("fed.x", "k", body, pika.BasicProperties(delivery_mode=2))
    finally:
        conn.close()


def arrived(upstream, node, bodies: list[bytes], expect: list[bytes] | None = None) -> list[bytes]:
    """Publish ``bodies`` to the upstream's fed.x, then read fed-q through ``node`` until as many
    messages as were published (or ``expect``ed) came: what came, in order."""
    publish_confirmed(upstream, bodies)
    want = len(bodies) if expect is None else len(expect)
    conn = connect(node)
    got: list[bytes] = []
    try:
        ch = conn.channel()

        def one_more() -> bool:
            body = ch.basic_get("fed-q", auto_ack=True)[2]
            if body is not None:
                got.append(body)
            return len(got) >= want

        wait_until(one_more, 30, f"{want} messages federated")
        return got
    finally:
        conn.close()
