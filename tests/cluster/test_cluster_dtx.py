"""0-10 dtx branches across the nodes of a cluster (warren/spread/dtx.py's parts, held by the
node of the queue whose message a branch accepted; the branch lives on its session's node).
Real etcd, real nodes; Qpid's own dtx suite with its client on node b and its queues on node a,
then kill -9 of either node around a prepared branch, a home that goes before its prepare, and a
commit while a part's node is down. Waits are on what a client sees, never on time."""

from __future__ import annotations

import signal
import uuid

import pika
import pytest

from tests.cluster.cluster_nodes import members, wait_until

TIMEOUT_S = 60.0
LEASE_TTL = "2"  # a killed node's name is free again soon after (its restart waits for that)


def _pair(nodes, etcd, cluster):
    """Nodes a and b, b placing every new queue on a (its clients' queues live on a)."""
    a = nodes.start(etcd.endpoints, cluster, "a", "--cluster-lease-ttl", LEASE_TTL)
    b = nodes.start(etcd.endpoints, cluster, "b", "--cluster-lease-ttl", LEASE_TTL, "--queue-leader-locator", "a")
    return a, b


def _counts(node, queues) -> list[int]:
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        ch = conn.channel()
        return [ch.queue_declare(q, passive=True).method.message_count for q in queues]
    finally:
        conn.close()


def _queue_node(node, name: str) -> str:
    from tests.cluster.cluster_nodes import api
    return api(node, f"queues/%2F/{name}")["node"]


def _swap_prepared(b, uid: str, prepare: bool = True):
    """Through node b: a persistent message published to queue src (on node a), then a branch
    that accepts it and publishes one to dest (on node a too); ended and, with ``prepare``,
    prepared. Returns (xid, src, dest, the client, its session): the caller closes the client."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    src, dest = f"dtx-src-{uid}", f"dtx-dest-{uid}"
    client = Client010(b)
    s = client.session(1)
    for q in (src, dest):
        s.send(spec.QueueDeclare(queue=q, durable=True))
    s.transfer("", b"swap me", routing_key=src, delivery=spec.MessageDeliveryProperties(delivery_mode=2))
    xid = spec.DtxXid(format=7, global_id=uid.encode(), branch_id=b"b")
    s.send(spec.DtxSelect())
    assert s.send(spec.DtxStart(xid=xid)).status == 0
    s.subscribe(src, "d")
    m = s.get("d")
    assert m.body == b"swap me"
    s.accept(m.id)
    s.transfer("", b"swapped", routing_key=dest, delivery=spec.MessageDeliveryProperties(delivery_mode=2))
    assert s.send(spec.DtxEnd(xid=xid)).status == 0
    if prepare:
        assert s.send(spec.DtxPrepare(xid=xid)).status == 0
    return xid, src, dest, client, s


def _in_doubt(node) -> set:
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    with Client010(node) as client:
        r = client.session(1).send(spec.DtxRecover())
        return {(x.format, bytes(x.global_id), bytes(x.branch_id)) for x in r.in_doubt}


def _outcome(node, command) -> int:
    from tests.e2e.amqp0_10.client010 import Client010
    with Client010(node) as client:
        return client.session(1).send(command).status


def _restart(nodes, etcd, cluster, name: str, killed, *extra: str):
    wait_until(lambda: name not in members(etcd, cluster), TIMEOUT_S, f"node {name}'s lease ended")
    return nodes.start(etcd.endpoints, cluster, name, "--cluster-lease-ttl", LEASE_TTL, *extra,
                       data_dir=nodes.tmp / f"data-{name}")


def test_qpids_dtx_suite_with_its_client_on_another_node_than_its_queues(tmp_path, etcd1, nodes):
    """Qpid's qpid_tests.broker_0_10.dtx (Qpid's Python client on 2.7), each module file against
    a fresh pair whose node b places every queue on node a: every test recorded as passing on one
    node (tests/interop_0_10/conformance.json) passes through node b."""
    from tests.interop_0_10 import qpid_suites
    from tests.interop_0_10.test_qpid_conformance import RECORD
    from tests.qpid_python import require_qpid_suite
    if RECORD is None:
        pytest.skip("no conformance.json recorded yet (bench/qpid_conformance.py --write)")
    qp = require_qpid_suite()

    def start_pair():
        cluster = f"t{uuid.uuid4().hex[:10]}"
        a, b = _pair(nodes, etcd1, cluster)

        def stop():
            b.stop()
            a.stop()
        return b.port, stop
    results = qpid_suites.run(qp, [qpid_suites.SUITES["broker_0_10"]], ["qpid_tests.broker_0_10.dtx.*"], start_pair)
    recorded = [n for n in RECORD["passed"] if n.startswith("qpid_tests.broker_0_10.dtx.")]
    assert len(recorded) >= 20 and set(recorded) <= set(results)
    failed = [f"{n}: {results[n][0]} {results[n][1]}" for n in recorded if results[n][0] != qpid_suites.PASS]
    assert not failed


def test_a_prepared_branch_survives_kill_9_of_the_node_holding_its_part(etcd1, nodes, cluster_name, uid):
    """The accepted message's node a records the branch's part at prepare; killed and restarted,
    it holds the message again (node b, the branch's home, says it is prepared), and a commit
    through node b acks it there and publishes the other."""
    a, b = _pair(nodes, etcd1, cluster_name)
    xid, src, dest, client, _ = _swap_prepared(b, uid)
    client.close()
    assert _queue_node(a, src) == "a" and _queue_node(a, dest) == "a"
    assert list((nodes.tmp / "data-a" / "dtx").glob("*.held"))  # the part's record, on node a
    assert _counts(b, [src, dest]) == [0, 0]
    a.signal(signal.SIGKILL)
    a.proc.wait(timeout=10)
    a = _restart(nodes, etcd1, cluster_name, "a", a)
    wait_until(lambda: "holds 1 messages for branch" in a.log(), TIMEOUT_S, "node a asking node b about its part")
    assert _counts(a, [src, dest]) == [0, 0]  # held for the branch again, not delivered
    assert (7, uid.encode(), b"b") in _in_doubt(b)
    from warren.spec import amqp0_10 as spec
    assert _outcome(b, spec.DtxCommit(xid=xid, one_phase=False)) == 0
    assert _counts(a, [src, dest]) == [0, 1]
    assert not list((nodes.tmp / "data-a" / "dtx").glob("*"))
    assert _in_doubt(b) == set()


def test_a_prepared_branch_survives_kill_9_of_its_home_and_rolls_back(etcd1, nodes, cluster_name, uid):
    """Node b, the branch's home, killed after the prepare: node a keeps the part (in doubt)
    while b is down, b comes back with the branch prepared, and a rollback through b puts the
    accepted message back in its queue on a, redelivered; nothing is published."""
    a, b = _pair(nodes, etcd1, cluster_name)
    xid, src, dest, client, _ = _swap_prepared(b, uid)
    b.signal(signal.SIGKILL)
    b.proc.wait(timeout=10)
    client.sock.close()  # (its node is gone: no close handshake)
    wait_until(lambda: "b" not in members(etcd1, cluster_name), TIMEOUT_S, "node b's lease ended")
    assert _counts(a, [src, dest]) == [0, 0]  # prepared: held while its home is down
    b = _restart(nodes, etcd1, cluster_name, "b", b, "--queue-leader-locator", "a")
    assert (7, uid.encode(), b"b") in _in_doubt(b)
    assert (7, uid.encode(), b"b") in _in_doubt(a)  # a transaction manager may ask any node
    from warren.spec import amqp0_10 as spec
    assert _outcome(a, spec.DtxRollback(xid=xid)) == 0  # run by b, asked through a
    wait_until(lambda: _counts(a, [src])[0] == 1, TIMEOUT_S, "the accepted message back on node a")
    assert _counts(a, [dest]) == [0]
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    try:
        method, _, body = conn.channel().basic_get(src, auto_ack=True)
        assert body == b"swap me" and method.redelivered
    finally:
        conn.close()
    assert not list((nodes.tmp / "data-a" / "dtx").glob("*"))


def test_a_home_that_goes_before_the_prepare_gives_the_part_back(etcd1, nodes, cluster_name, uid):
    """Node b killed after dtx.end (node a holds the accepted message for the branch) and before
    dtx.prepare: the branch lived in b's memory only, so node a puts the message back at once."""
    a, b = _pair(nodes, etcd1, cluster_name)
    _, src, dest, client, _ = _swap_prepared(b, uid, prepare=False)
    assert _counts(a, [src, dest]) == [0, 0]
    b.signal(signal.SIGKILL)
    b.proc.wait(timeout=10)
    client.sock.close()  # (its node is gone: no close handshake)
    wait_until(lambda: _counts(a, [src])[0] == 1, TIMEOUT_S, "the held message back in its queue")
    assert "is gone before branch" in a.log() and _counts(a, [dest]) == [0]


def test_a_commit_while_a_parts_node_is_down_is_refused_and_the_branch_stays_prepared(etcd1, nodes, cluster_name,
                                                                                       uid):
    """Node a down: a commit through node b is refused (404, naming node a) and applies
    nothing; the branch stays in doubt, and once node a is back the same commit completes."""
    from tests.e2e.amqp0_10.client010 import SessionException
    from warren.spec import amqp0_10 as spec
    a, b = _pair(nodes, etcd1, cluster_name)
    xid, src, dest, client, _ = _swap_prepared(b, uid)
    client.close()
    a.signal(signal.SIGKILL)
    a.proc.wait(timeout=10)
    wait_until(lambda: "a" not in members(etcd1, cluster_name), TIMEOUT_S, "node a's lease ended")
    with pytest.raises(SessionException) as refused:
        _outcome(b, spec.DtxCommit(xid=xid, one_phase=False))
    assert refused.value.code == 404 and "node 'a'" in refused.value.description
    assert (7, uid.encode(), b"b") in _in_doubt(b)
    a = _restart(nodes, etcd1, cluster_name, "a", a)
    wait_until(lambda: "holds 1 messages for branch" in a.log(), TIMEOUT_S, "node a asking node b about its part")
    assert _outcome(b, spec.DtxCommit(xid=xid, one_phase=False)) == 0
    assert _counts(b, [src, dest]) == [0, 1]
    assert _in_doubt(b) == set()
