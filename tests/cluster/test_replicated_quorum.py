"""Replicated quorum queues (issue 33, its first part: warren/cluster/replicas.py): a quorum
queue declared on a cluster of three gets three members; a confirmed message is on a majority's
disks; kill -9 of its leader, and a follower takes the queue with every confirmed message, served
through any node. Real etcd, real nodes, pika; counted as the kill tests count: lost (confirmed,
never delivered) and unexpected (delivered, never published) must be 0, duplicates reported.
Waits are on what etcd, the HTTP API or a client shows, never on time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

import pika
import pytest

from tests.cluster.cluster_nodes import api, api_status, members, wait_until

LEASE_TTL = "2"  # the killed leader's lease ends within a few seconds: then its followers vote
TIMEOUT_S = 60.0


def connect(node) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(node.url))


def record(etcd, cluster: str, queue: str) -> dict | None:
    key = f"/warren/{cluster}/replicas/%2F/{urllib.parse.quote(queue, safe='')}"
    value = etcd.get_prefix(key).get(key)
    return json.loads(value) if value is not None else None


def drain(node, queue: str, expected: int) -> list[str]:
    """Every message of ``queue`` through ``node`` (basic.get, acked) until ``expected`` came or the
    queue answers empty after that many."""
    conn = connect(node)
    got: list[str] = []
    try:
        ch = conn.channel()
        while True:
            method, _, body = ch.basic_get(queue, auto_ack=True)
            if body is None:
                if len(got) >= expected:
                    return got
                wait_until(lambda: ch.queue_declare(queue, passive=True).method.message_count > 0, TIMEOUT_S,
                           f"more messages in {queue} ({len(got)} of {expected})")
                continue
            got.append(body.decode())
    finally:
        if conn.is_open:
            conn.close()


def three_nodes(etcd, nodes, cluster_name: str) -> tuple:
    """Nodes a, b and c of a new cluster, with a short lease (a killed node's ends within seconds)."""
    return tuple(nodes.start(etcd.endpoints, cluster_name, n, "--cluster-lease-ttl", LEASE_TTL) for n in "abc")


def taken_from(etcd, cluster: str, queue: str, old: str = "a") -> dict:
    """The queue's record once a node other than ``old`` leads it."""
    return wait_until(lambda: (r := record(etcd, cluster, queue)) and r["leader"] != old and r, TIMEOUT_S,
                      f"a follower takes the queue from {old}")


def named_in_directory(node, queue: str, leader: str) -> None:
    """Wait until ``node``'s /api/queues lists ``queue`` on ``leader`` and ``node`` serves it there:
    the row comes from the leader itself (asked over the links) a moment before the queue
    directory's watch brings ``node`` the leader's key, and with it the queue's handle."""
    wait_until(lambda: any(q["name"] == queue and q.get("node") == leader for q in api(node, "queues")), TIMEOUT_S,
               f"the queue directory names {leader}")

    def served() -> bool:
        conn = connect(node)
        try:
            conn.channel().queue_declare(queue, passive=True)
            return True
        except pika.exceptions.ChannelClosedByBroker:  # (404: its handle still names the old leader)
            return False
        finally:
            if conn.is_open:
                conn.close()
    wait_until(served, TIMEOUT_S, f"node serving {queue} from {leader}")


def test_a_quorum_queue_has_three_members_and_survives_its_leaders_kill(etcd1, nodes, cluster_name, uid):
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    held = record(etcd1, cluster_name, queue)
    assert held is not None and held["leader"] == "a" and held["members"] == ["a", "b", "c"], held
    row = api(b, f"queues/%2F/{queue}")  # RabbitMQ's quorum queue fields, through another node
    assert (row["leader"], row["members"], row["online"]) == ("a", ["a", "b", "c"], ["a", "b", "c"]), row
    ch.confirm_delivery()
    published = [f"m-{i}" for i in range(300)]
    for body in published[:200]:
        ch.basic_publish("", queue, body.encode(), pika.BasicProperties(delivery_mode=2))
    # a consumer takes 50 and acks them: settlements are replicated too
    for _ in range(50):
        method, _, body = ch.basic_get(queue)
        ch.basic_ack(method.delivery_tag)
    for body in published[200:]:
        ch.basic_publish("", queue, body.encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()

    a.proc.kill()  # kill -9 of the leader
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, queue)
    assert taken["leader"] in ("b", "c") and taken["epoch"] >= 2, taken
    other = b if taken["leader"] == "c" else c  # served through the node that is not its leader too
    named_in_directory(other, queue, taken["leader"])
    row = wait_until(lambda: (r := api_status(other, f"queues/%2F/{queue}")[1]) and r.get("leader") == taken["leader"]
                     and r, TIMEOUT_S, "the queue's row through another node names the new leader")
    assert sorted(row["online"]) == ["b", "c"], row
    got = drain(other, queue, 250)
    lost = set(published[50:]) - set(got)
    unexpected = set(got) - set(published)
    assert not lost and not unexpected, (len(lost), sorted(lost)[:5], sorted(unexpected)[:5])
    duplicated = len(got) - len(set(got))
    assert duplicated == 0, duplicated  # nothing was out when the leader died: each came once


@pytest.mark.cluster
def test_a_follower_that_was_down_catches_up_and_the_queue_takes_publishes_meanwhile(
        etcd1, nodes, cluster_name, uid, request):
    """-m cluster: a follower stopped: the queue confirms with the other (a majority of three);
    back, it takes a snapshot; then the leader is killed and that follower can take over with
    everything."""
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (five node starts, two lease expiries): the default run kills a leader "
                    "with both followers in step")
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-back-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    c.stop()  # SIGTERM: a follower gone
    for i in range(100):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    c = nodes.start(etcd1.endpoints, cluster_name, "c", "--cluster-lease-ttl", LEASE_TTL)
    b.proc.kill()  # b held the only copy besides a's: c must have caught up before a goes too
    b.proc.wait(timeout=10)
    conn = connect(a)
    ch = conn.channel()
    ch.confirm_delivery()
    # confirmed now only with c's sync (a majority of three is a and c): c caught up
    ch.basic_publish("", queue, b"after", pika.BasicProperties(delivery_mode=2))
    conn.close()
    a.proc.kill()
    a.proc.wait(timeout=10)
    wait_until(lambda: "b" not in members(etcd1, cluster_name), TIMEOUT_S, "b's lease ended")
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--cluster-lease-ttl", LEASE_TTL,
                    data_dir=nodes.tmp / "data-b")
    taken = taken_from(etcd1, cluster_name, queue)
    assert taken["leader"] == "c", taken  # b's copy stopped at its kill; c's has "after"
    got = drain(c, queue, 101)
    assert sorted(got) == sorted([f"m-{i}" for i in range(100)] + ["after"])


class ClientThread(threading.Thread):
    """A pika client on its own connection through ``node`` until told to stop (``session``);
    whatever it raises is kept for the test to report."""

    def __init__(self, node) -> None:
        super().__init__(daemon=True)
        self.node = node
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            conn = connect(self.node)
            self.session(conn, conn.channel())
            conn.close()
        except BaseException as e:  # noqa: BLE001: the test reports it
            self.failure = e

    def session(self, conn, ch) -> None:
        raise NotImplementedError


class Publisher(ClientThread):
    """Publishes ``<name>:<n>`` with confirms to ``queue`` through ``node`` until told to stop; a
    nack or a return is a publish not confirmed (a queue between leaders takes nothing)."""

    def __init__(self, node, name: str, queue: str, exchange: str = "") -> None:
        super().__init__(node)
        self.name, self.queue, self.exchange = name, queue, exchange
        self.published: set[str] = set()
        self.confirmed: list[str] = []
        self.confirmed_at: list[tuple[float, float]] = []  # (sent, confirmed) of each, time.monotonic()
        self.not_confirmed = 0
        self.refusals: list[tuple[float, str]] = []  # (time.monotonic(), "nack" or "return") of each

    def session(self, conn, ch) -> None:
        ch.confirm_delivery()
        n = 0
        while not self.stop.is_set():
            body = f"{self.name}:{n}"
            n += 1
            self.published.add(body)
            sent = time.monotonic()
            try:
                ch.basic_publish(self.exchange, self.queue, body.encode(), pika.BasicProperties(delivery_mode=2),
                                 mandatory=True)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError) as e:
                self.not_confirmed += 1
                self.refusals.append((time.monotonic(), "nack" if isinstance(e, pika.exceptions.NackError) else "return"))
                continue
            self.confirmed.append(body)
            self.confirmed_at.append((sent, time.monotonic()))


def test_kill_9_of_the_leader_during_confirmed_publishing_loses_nothing(etcd1, nodes, cluster_name, uid):
    """Two publishers, through the two followers' nodes, publish with confirms while the leader is
    killed: publishes between leaders are held, and confirmed once a follower took the queue. Lost (confirmed, never delivered) and unexpected are 0; the time from the kill
    to the first confirm after it is printed."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-kill-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.exchange_declare(f"x-{queue}", "direct", durable=True)
    ch.queue_bind(queue, f"x-{queue}", queue)
    conn.close()
    for node in (b, c):
        wait_until(lambda node=node: any(q["name"] == queue for q in api(node, "queues")), TIMEOUT_S,
                   "the queue known to every node")
        bound = f"exchanges/%2F/x-{queue}/bindings/source"
        wait_until(lambda node=node: any(x["destination"] == queue for x in api(node, bound)), TIMEOUT_S,
                   "the binding known to every node")
    # one through the default exchange, one through an exchange: a binding to a replicated queue
    # is not parked while its followers take it over
    publishers = [Publisher(b, "pb", queue), Publisher(c, "pc", queue, exchange=f"x-{queue}")]
    for p in publishers:
        p.start()
    wait_until(lambda: all(len(p.confirmed) >= 150 or p.failure for p in publishers), TIMEOUT_S,
               "150 confirms each before the kill")
    before = [len(p.confirmed) for p in publishers]
    killed_at = time.monotonic()
    a.proc.kill()
    a.proc.wait(timeout=10)
    wait_until(lambda: all(len(p.confirmed) >= n + 150 or p.failure for p, n in zip(publishers, before)), TIMEOUT_S,
               "150 more confirms each after the kill")
    for p in publishers:
        p.stop.set()
    for p in publishers:
        p.join(TIMEOUT_S)
        assert p.failure is None, p.failure
    # the first confirm of a publish sent after the kill (held until a follower took the queue)
    first_after = min(confirmed for p in publishers for sent, confirmed in p.confirmed_at if sent > killed_at)
    taken = record(etcd1, cluster_name, queue)
    confirmed = {body for p in publishers for body in p.confirmed}
    published = {body for p in publishers for body in p.published}
    got = drain(b, queue, len(confirmed))
    lost = confirmed - set(got)
    unexpected = set(got) - published
    print(f"\nreplicated quorum queue, kill -9 of its leader: confirmed {len(confirmed)}, not confirmed "
          f"{sum(p.not_confirmed for p in publishers)}, delivered {len(got)}, lost {len(lost)}, unexpected "
          f"{len(unexpected)}, duplicated {len(got) - len(set(got))}; new leader {taken['leader']} (epoch "
          f"{taken['epoch']}); from the kill to the first confirm of a publish sent after it: {first_after - killed_at:.2f} s "
          f"(lease TTL {LEASE_TTL} s)")
    assert not lost and not unexpected, (sorted(lost)[:5], sorted(unexpected)[:5])
    # publishes to the queue between leaders are held, then confirmed (reach.py ``hold``): nacked
    # are only those in flight to the dead leader (one at a time per publisher here)
    assert sum(p.not_confirmed for p in publishers) <= 2 * len(publishers), \
        [(p.name, [(round(at - killed_at, 3), kind) for at, kind in p.refusals]) for p in publishers]


def test_a_deleted_replicated_queue_leaves_no_record_and_no_replica(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    queue = f"qq-gone-{uid}"
    conn = connect(b)  # through another node: the queue lives where the locator puts it (b, client-local)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"x", pika.BasicProperties(delivery_mode=2))
    held = record(etcd1, cluster_name, queue)
    assert held["members"] == ["b", "a"], held
    replicas = a.data_dir / "replicas"
    wait_until(lambda: replicas.is_dir() and any(replicas.iterdir()), TIMEOUT_S, "a's replica folder")
    ch.queue_delete(queue)
    conn.close()
    wait_until(lambda: record(etcd1, cluster_name, queue) is None, TIMEOUT_S, "the record deleted")
    wait_until(lambda: not any(replicas.iterdir()), TIMEOUT_S, "a's replica removed")
    # node a no longer routes to it: a mandatory publish through a comes back
    conn = connect(a)
    ch = conn.channel()
    ch.confirm_delivery()

    def returned() -> bool:
        try:
            ch.basic_publish("", queue, b"late", mandatory=True)
        except pika.exceptions.UnroutableError:
            return True
        return False
    wait_until(returned, TIMEOUT_S, "a publish to the deleted queue returned")
    conn.close()


def test_delivery_counts_and_messages_out_survive_the_leaders_kill(etcd1, nodes, cluster_name, uid):
    """Settlements are operations too: a message returned twice comes from the new leader with
    x-delivery-count 2, and one that was out (delivered, not acked) when the leader died comes
    back redelivered."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-count-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    for body in (b"returned", b"out", b"last"):
        ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
    for _ in range(2):
        method, _, body = ch.basic_get(queue)
        assert body == b"returned"
        ch.basic_nack(method.delivery_tag, requeue=True)
    method, _, body = ch.basic_get(queue)
    assert body == b"returned"
    ch.basic_nack(method.delivery_tag, requeue=True)  # a third return...
    holder = connect(a)
    out_ch = holder.channel()
    got = [out_ch.basic_get(queue) for _ in range(2)]
    assert [g[2] for g in got] == [b"returned", b"out"]  # both out, unacked, when the leader dies
    # its confirm: the followers synced every operation before it, the deliveries' marks too (a
    # delivery whose mark had not reached a follower comes back not flagged redelivered)
    ch.basic_publish("", queue, b"barrier", pika.BasicProperties(delivery_mode=2))
    a.proc.kill()
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, queue)
    node = b if taken["leader"] == "b" else c
    conn = connect(node)
    try:
        ch = conn.channel()
        seen = {}
        for _ in range(4):
            method, properties, body = ch.basic_get(queue, auto_ack=True)
            seen[body] = (method.redelivered, (properties.headers or {}).get("x-delivery-count"))
    finally:
        conn.close()
    # "returned" came back three times, then was out once more: its fourth return is the kill's
    assert seen[b"returned"] == (True, 4), seen
    assert seen[b"out"][0] is True, seen
    assert seen[b"out"][1] == 1 and seen[b"last"] == (False, 0) and seen[b"barrier"] == (False, 0), seen


@pytest.mark.cluster
def test_a_stopped_leader_returns_as_a_follower_and_every_node_stopped_and_started_keeps_the_queue(
        etcd1, nodes, cluster_name, uid, request):
    """-m cluster: the leader stopped (SIGTERM): a follower takes the queue at once (the lease is
    revoked); the old leader, started again with its folder, finds another leader and follows.
    Then every node stopped and started: the last leader leads again, and every confirmed message
    is there."""
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (seven node starts): the default run kills a leader and checks what "
                    "the new one holds")
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    c = nodes.start(etcd1.endpoints, cluster_name, "c")
    queue = f"qq-stop-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    for i in range(50):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    a.stop()
    taken = taken_from(etcd1, cluster_name, queue)
    a = nodes.start(etcd1.endpoints, cluster_name, "a", data_dir=nodes.tmp / "data-a")
    leader = b if taken["leader"] == "b" else c
    wait_until(lambda: api(leader, f"queues/%2F/{queue}")["online"] == ["a", "b", "c"], TIMEOUT_S,
               "a back among the online members")
    assert record(etcd1, cluster_name, queue)["leader"] == taken["leader"]  # a follows
    assert not any(q["name"] == queue and q.get("node") == "a" for q in api(a, "queues"))
    conn = connect(a)
    ch = conn.channel()
    ch.confirm_delivery()
    for i in range(50, 60):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    for node in (a, b, c):
        node.stop()
    a, b, c = (nodes.start(etcd1.endpoints, cluster_name, n, data_dir=nodes.tmp / f"data-{n}") for n in "abc")
    got = drain(a, queue, 60)
    assert sorted(got) == sorted(f"m-{i}" for i in range(60)), (len(got), sorted(set(got))[:5])


def test_a_queue_deleted_and_declared_again_at_once_is_replicated_again(etcd1, nodes, cluster_name, uid):
    """Deleted and declared again before the leader's tick saw the delete: the new queue has its
    record taken again (epoch raised) and is replicated, as its leader's kill shows."""
    a, b, _c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-again-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_delete(queue)
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    # taken again (epoch 2) if the leader's tick had not seen the delete yet, else made afresh
    # (epoch 1, after the old record and its replicas went): either way replicated again
    assert record(etcd1, cluster_name, queue)["epoch"] in (1, 2)
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    a.proc.kill()
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, queue)
    named_in_directory(b, queue, taken["leader"])
    assert sorted(drain(b, queue, 20)) == sorted(f"m-{i}" for i in range(20))


def ctl(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "ctl", "--url", node.http_url, *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


def two_members(leader, etcd, cluster: str, queue: str) -> tuple:
    """A quorum queue of two members (a, b) declared through ``leader``: its connection and a
    channel in confirm mode."""
    conn = connect(leader)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum", "x-quorum-initial-group-size": 2})
    assert record(etcd, cluster, queue)["members"] == ["a", "b"]
    ch.confirm_delivery()
    return conn, ch


def test_members_added_and_removed_with_ctl_and_the_added_one_can_take_over(etcd1, nodes, cluster_name, uid):
    """rabbitmq-queues' add_member, delete_member, grow, shrink and quorum_status as `warren ctl`
    commands: a queue of two members (a, b) gets c (a snapshot brings it in step), loses b, and
    when its leader is killed c takes it with every message; shrink and grow move c out and in."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-members-{uid}"
    conn, ch = two_members(a, etcd1, cluster_name, queue)
    for i in range(30):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    run = ctl(b, "add_member", queue, "c")
    assert run.returncode == 0, run.stderr
    assert record(etcd1, cluster_name, queue)["members"] == ["a", "b", "c"]

    def states() -> dict:
        run = ctl(c, "--formatter", "json", "quorum_status", queue)
        assert run.returncode == 0, run.stderr
        return {row["Node Name"]: row["Raft State"] for row in json.loads(run.stdout)}

    wait_until(lambda: states() == {"a": "leader", "b": "follower", "c": "follower"}, TIMEOUT_S, "c in step")
    refused = ctl(b, "delete_member", queue, "a")
    assert refused.returncode != 0 and "leader" in refused.stderr, refused
    assert ctl(a, "delete_member", queue, "b").returncode == 0
    assert record(etcd1, cluster_name, queue)["members"] == ["a", "c"]
    assert ctl(a, "shrink", "c").returncode == 0
    assert record(etcd1, cluster_name, queue)["members"] == ["a"]
    assert ctl(a, "grow", "c", "all", "--queue-pattern", "qq-members-.*").returncode == 0
    assert record(etcd1, cluster_name, queue)["members"] == ["a", "c"]
    wait_until(lambda: states() == {"a": "leader", "c": "follower"}, TIMEOUT_S, "c in step again")
    for i in range(30, 40):  # confirmed once c synced: a majority of two is both
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    # two members cannot lose one (no majority left, as RabbitMQ's): b joins again first
    assert ctl(c, "add_member", queue, "b").returncode == 0
    wait_until(lambda: states() == {"a": "leader", "b": "follower", "c": "follower"}, TIMEOUT_S, "b in step")
    a.proc.kill()
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, queue)
    named_in_directory(b, queue, taken["leader"])
    assert sorted(drain(b, queue, 40)) == sorted(f"m-{i}" for i in range(40))


def test_a_leader_paused_past_its_lease_steps_down_when_it_resumes(etcd1, nodes, cluster_name, uid):
    """SIGSTOP of the leader past its lease: its followers take the queue; publishes through
    another node are confirmed by the new leader; SIGCONT: the old leader finds the record taken,
    stops serving its copy and follows. Nothing confirmed is lost."""
    a, b, _c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-pause-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    a.proc.send_signal(signal.SIGSTOP)
    try:
        taken = taken_from(etcd1, cluster_name, queue)
        named_in_directory(b, queue, taken["leader"])
        conn = connect(b)
        ch = conn.channel()
        ch.confirm_delivery()
        for i in range(20, 40):
            ch.basic_publish("", queue, f"m-{i}".encode(), pika.BasicProperties(delivery_mode=2))
        conn.close()
    finally:
        a.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: queue not in {q["name"] for q in api_local(a)}, TIMEOUT_S, "a stops serving its copy")
    wait_until(lambda: api(a, f"queues/%2F/{queue}").get("leader") == taken["leader"], TIMEOUT_S,
               "a sees the new leader")
    assert sorted(drain(a, queue, 40)) == sorted(f"m-{i}" for i in range(40))


def api_local(node) -> list[dict]:
    """The queues ``node`` itself holds (its /api/queues rows whose node is its own)."""
    me = api(node, "overview")["node"]
    return [q for q in api(node, "queues") if q.get("node") == me]


class Consumer(ClientThread):
    """Consumes ``queue`` through ``node`` (manual acks, prefetch 10) until told to stop; records
    every body and whether the broker cancelled it."""

    def __init__(self, node, queue: str) -> None:
        super().__init__(node)
        self.queue = queue
        self.got: list[str] = []
        self.cancelled = threading.Event()
        self.consuming = threading.Event()

    def session(self, conn, ch) -> None:
        ch.basic_qos(prefetch_count=10)
        ch.add_on_cancel_callback(lambda _frame: self.cancelled.set())

        def on_message(ch, method, _props, body) -> None:
            self.got.append(body.decode())
            ch.basic_ack(method.delivery_tag)

        ch.basic_consume(self.queue, on_message)
        self.consuming.set()
        while not self.stop.is_set():
            conn.process_data_events(time_limit=0.1)


def declared_on_every_node(leader, others, queue: str) -> None:
    """A quorum queue declared through ``leader`` (which leads it), once the other nodes list it."""
    conn = connect(leader)
    conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    conn.close()
    for node in others:
        wait_until(lambda node=node: any(q["name"] == queue for q in api(node, "queues")), TIMEOUT_S,
                   "the queue known to every node")


def confirmed_across_the_kill(leader, publisher: Publisher, receiving) -> set[str]:
    """``publisher`` started: 150 confirms and ``receiving()`` true, then kill -9 of ``leader``,
    then 150 confirms more (a new leader took the queue); the publisher stopped, what it had
    confirmed."""
    publisher.start()
    try:
        wait_until(lambda: len(publisher.confirmed) >= 150 or publisher.failure, TIMEOUT_S, "150 confirms before the kill")
        wait_until(receiving, TIMEOUT_S, "the consumer receiving before the kill")
        before = len(publisher.confirmed)
        leader.proc.kill()
        leader.proc.wait(timeout=10)
        wait_until(lambda: len(publisher.confirmed) >= before + 150 or publisher.failure, TIMEOUT_S,
                   "150 more confirms after the kill")
    finally:
        publisher.stop.set()
        publisher.join(TIMEOUT_S)
    assert publisher.failure is None, publisher.failure
    return set(publisher.confirmed)


def test_a_consumer_on_another_node_keeps_consuming_through_the_leaders_kill(etcd1, nodes, cluster_name, uid):
    """A consumer through node b and a publisher through node c while the leader (a) is killed:
    the consumer is not cancelled (as RabbitMQ keeps a quorum queue's consumers through a leader
    change); it receives every confirmed message, those it had not acked again."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-keep-{uid}"
    declared_on_every_node(a, (b, c), queue)
    consumer = Consumer(b, queue)
    consumer.start()
    assert consumer.consuming.wait(TIMEOUT_S)
    publisher = Publisher(c, "pc", queue)
    confirmed = confirmed_across_the_kill(a, publisher, lambda: consumer.got or consumer.failure)
    wait_until(lambda: confirmed <= set(consumer.got) or consumer.failure or consumer.cancelled.is_set(), TIMEOUT_S,
               "every confirmed message consumed")
    consumer.stop.set()
    consumer.join(TIMEOUT_S)
    assert consumer.failure is None, consumer.failure
    assert not consumer.cancelled.is_set(), "the consumer was cancelled"
    assert not confirmed - set(consumer.got) and not set(consumer.got) - publisher.published


class LinkReceiver(ClientThread):
    """An AMQP 1.0 receiving link on ``queue`` through ``node`` (Qpid Proton's blocking client,
    credit 20, each message accepted) until told to stop: every body, and whether the broker
    detached the link."""

    def __init__(self, node, queue: str) -> None:
        super().__init__(node)
        self.queue = queue
        self.got: list[str] = []
        self.detached = threading.Event()
        self.attached = threading.Event()

    def run(self) -> None:
        from proton.utils import BlockingConnection, LinkDetached
        from proton import Timeout as ProtonTimeout
        try:
            conn = BlockingConnection(f"amqp://guest:guest@{self.node.host}:{self.node.port}", timeout=TIMEOUT_S)
            receiver = conn.create_receiver(f"/queues/{self.queue}", credit=20)
            self.attached.set()
            try:
                while not self.stop.is_set():
                    try:
                        message = receiver.receive(timeout=0.2)
                    except ProtonTimeout:
                        continue
                    self.got.append(bytes(message.body).decode())  # (a data section: pika published octets)
                    receiver.accept()
            except LinkDetached:
                self.detached.set()
            conn.close()
        except BaseException as e:  # noqa: BLE001: the test reports it
            self.failure = e


@pytest.mark.parametrize("through", ["b", "c"])
def test_an_amqp_1_0_link_on_another_node_keeps_receiving_through_the_leaders_kill(
        etcd1, nodes, cluster_name, uid, through):
    """As RabbitMQ 4 keeps a 1.0 link on a quorum queue through a leader change: the link through
    a follower's node stays attached when the leader (a) is killed; the new leader's keeper is
    told the credit the client left (the protocol core kept it), so it goes on receiving every
    confirmed message, those it had not accepted again. The voters tie, so c takes the queue
    (replicas.py ``_elect``): the link through c is then on the queue's own node, the one
    through b on another node."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-link-{uid}"
    declared_on_every_node(a, (b, c), queue)
    receiver = LinkReceiver(b if through == "b" else c, queue)
    receiver.start()
    assert receiver.attached.wait(TIMEOUT_S)
    publisher = Publisher(c if through == "b" else b, "pc", queue)
    confirmed = confirmed_across_the_kill(a, publisher, lambda: receiver.got or receiver.failure)
    wait_until(lambda: confirmed <= set(receiver.got) or receiver.failure or receiver.detached.is_set(), TIMEOUT_S,
               f"every confirmed message received ({len(receiver.got)} got, {len(confirmed)} confirmed)")
    receiver.stop.set()
    receiver.join(TIMEOUT_S)
    assert receiver.failure is None, receiver.failure
    assert not receiver.detached.is_set(), "the link was detached"
    assert not confirmed - set(receiver.got) and not set(receiver.got) - publisher.published


# fetch() without a time-out never drains (message.flush): the credit after the move is what the
# session's stand-in counted and handed the new keeper, given back as transfers complete
SUBSCRIBER_0_10 = r"""
import sys
from qpid.messaging import Connection
host, port, queue = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = Connection("%s:%d" % (host, port), username="guest", password="guest", reconnect=False)
c.open()
ssn = c.session()
r = ssn.receiver(queue)
r.capacity = 20  # window mode: message.flow of 20, given back as transfers complete
ssn.sync()
print("subscribed")
sys.stdout.flush()
while True:
    m = r.fetch()
    ssn.acknowledge(m)
    if m.content == "STOP":
        break
    print("got " + str(m.content))
    sys.stdout.flush()
c.close()
"""


def test_a_0_10_subscription_on_another_node_keeps_receiving_through_the_leaders_kill(
        etcd1, nodes, cluster_name, uid):
    """Qpid's qpid.messaging receiver (Python 2.7, window credit) through node b while the leader
    (a) is killed: its subscription moves to the new leader with the credit the client had left
    (the session's stand-in counts it as the keeper did), so it receives every confirmed
    message without subscribing again."""
    from tests.qpid_python import require_qpid_python
    qp = require_qpid_python()
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-sub-{uid}"
    declared_on_every_node(a, (b, c), queue)
    proc = subprocess.Popen([qp.python, "-c", SUBSCRIBER_0_10, b.host, str(b.port), queue], env=qp.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(line.strip()[4:] for line in proc.stdout
                                                        if line.startswith("got ")), daemon=True)
    publisher = Publisher(c, "pc", queue)
    try:
        assert proc.stdout.readline().strip() == "subscribed", proc.stderr.read()[-2000:]
        reader.start()
        confirmed = confirmed_across_the_kill(a, publisher, lambda: got or proc.poll() is not None)
        wait_until(lambda: confirmed <= set(got) or proc.poll() is not None, TIMEOUT_S,
                   f"every confirmed message received ({len(confirmed - set(got))} missing)")
        conn = connect(c)
        conn.channel().basic_publish("", queue, b"STOP")  # its last fetch
        conn.close()
        proc.wait(timeout=TIMEOUT_S)
        reader.join(TIMEOUT_S)
    finally:
        publisher.stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()[-3000:]
    assert not confirmed - set(got) and not set(got) - publisher.published


def test_delivery_limit_dead_lettering_and_single_active_consumer_hold_across_the_leaders_kill(
        etcd1, nodes, cluster_name, uid):
    """What a quorum queue does on one node goes on on its next leader: a message returned up to
    its x-delivery-limit before the kill is dead-lettered by the new leader at its next return
    (x-death reason "delivery_limit"), and of two consumers kept through the failover only one
    is active (x-single-active-consumer)."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    poisoned, dlq, single = f"qq-poison-{uid}", f"qq-dlq-{uid}", f"qq-sac-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(dlq, durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_declare(poisoned, durable=True, arguments={
        "x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dlq})
    ch.queue_declare(single, durable=True, arguments={"x-queue-type": "quorum", "x-single-active-consumer": True})
    ch.confirm_delivery()
    ch.basic_publish("", poisoned, b"poison", pika.BasicProperties(delivery_mode=2))
    for _ in range(2):  # returned twice: at the limit, still in the queue
        method, _, body = ch.basic_get(poisoned)
        assert body == b"poison"
        ch.basic_nack(method.delivery_tag, requeue=True)
    ch.basic_publish("", poisoned, b"barrier", pika.BasicProperties(delivery_mode=2))  # (the returns synced)
    conn.close()
    for node in (b, c):
        wait_until(lambda node=node: {poisoned, single} <= {q["name"] for q in api(node, "queues")}, TIMEOUT_S,
                   "the queues known to every node")
    consumers = [Consumer(b, single), Consumer(b, single)]
    for consumer in consumers:
        consumer.start()
        assert consumer.consuming.wait(TIMEOUT_S)

    a.proc.kill()
    a.proc.wait(timeout=10)
    for queue in (poisoned, single, dlq):
        named_in_directory(b, queue, taken_from(etcd1, cluster_name, queue)["leader"])
    conn = connect(c)
    ch = conn.channel()
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", single, f"after-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    method, properties, body = ch.basic_get(poisoned)
    assert (body, properties.headers.get("x-delivery-count")) == (b"poison", 2)
    ch.basic_nack(method.delivery_tag, requeue=True)  # its third return: past the limit
    wait_until(lambda: ch.queue_declare(dlq, passive=True).method.message_count == 1, TIMEOUT_S,
               "the poison message dead-lettered")
    method, properties, body = ch.basic_get(dlq, auto_ack=True)
    assert body == b"poison" and properties.headers["x-death"][0]["reason"] == "delivery_limit", properties.headers
    assert ch.basic_get(poisoned, auto_ack=True)[2] == b"barrier"
    conn.close()

    wait_until(lambda: sum(len(x.got) for x in consumers) >= 20, TIMEOUT_S, "the 20 published after the kill")
    for consumer in consumers:
        consumer.stop.set()
        consumer.join(TIMEOUT_S)
        assert consumer.failure is None and not consumer.cancelled.is_set()
    assert sorted(len(x.got) for x in consumers) == [0, 20], [x.got for x in consumers]  # one active
