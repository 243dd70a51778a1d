"""A member catching up takes a snapshot while its queue goes on (issue 33, item 4: "catches up
from the leader's log (or a snapshot of it) without stopping the queue"; warren/cluster/
replicas.py ``Leader.snapshot_to``): the snapshot is read on a thread, part by part, and the
operations the queue makes meanwhile follow it. The oracle is the stores themselves: once the
new member has confirmed a sync of everything, its replica, opened in this process after its
node stopped, holds exactly the leader's live messages, records and returned marks alike. Real
etcd, real nodes, pika clients publishing and consuming throughout.
"""

from __future__ import annotations

import hashlib
import json

import pika

from tests.cluster.cluster_nodes import wait_until
from tests.cluster.test_replicated_quorum import (
    TIMEOUT_S, ClientThread, Publisher, ctl, three_nodes, two_members,
)
from warren.store.queue_store import QueueStore

FILLED = 5000  # five snapshot parts of 1,000 (replicas.py SNAPSHOT_CHUNK)
TAKEN = 1500


class Taker(ClientThread):
    """basic.get through ``node`` up to TAKEN messages: two acked, the third requeued (a returned
    mark, a quorum queue's delivery count); then ten more requeued, which stay; then idle until
    told to stop."""

    def __init__(self, node, queue: str) -> None:
        super().__init__(node)
        self.queue = queue
        self.taken = 0

    def session(self, conn, ch) -> None:
        while not self.stop.is_set() and self.taken < TAKEN:
            method, _, _ = ch.basic_get(self.queue)
            if method is None:
                continue
            self.taken += 1
            if self.taken % 3:
                ch.basic_ack(method.delivery_tag)
            else:  # (taken again by the next get: at the queue's head)
                ch.basic_nack(method.delivery_tag, requeue=True)
        held = [ch.basic_get(self.queue)[0] for _ in range(10)]
        last = [m for m in held if m is not None][-1]
        ch.basic_nack(last.delivery_tag, multiple=True, requeue=True)  # ten left with a returned mark
        self.stop.wait(TIMEOUT_S)


def live_messages(path) -> dict[int, tuple[bytes, int]]:
    """seq -> (record, returned marks) of every live message of the queue store at ``path``."""
    store = QueueStore(str(path))
    try:
        return {seq: (bytes(store.read(seq)), store.returned(seq)) for seq, _ in store.unacked()}
    finally:
        store.close()


def test_a_member_added_to_a_busy_queue_catches_up_to_the_leaders_very_messages(etcd1, nodes, cluster_name, uid):
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    queue = f"qq-snap-{uid}"
    conn, ch = two_members(a, etcd1, cluster_name, queue)
    for i in range(FILLED):
        ch.basic_publish("", queue, f"fill-{i}".encode() * 64, pika.BasicProperties(delivery_mode=2))

    publisher, consumer = Publisher(a, "p", queue), Taker(b, queue)
    publisher.start()
    consumer.start()
    try:
        wait_until(lambda: publisher.confirmed and consumer.taken, TIMEOUT_S, "publishing and consuming")
        assert ctl(a, "add_member", queue, "c").returncode == 0

        def states() -> dict:
            run = ctl(a, "--formatter", "json", "quorum_status", queue)
            assert run.returncode == 0, run.stderr
            return {row["Node Name"]: row["Raft State"] for row in json.loads(run.stdout)}
        wait_until(lambda: states().get("c") == "follower", TIMEOUT_S, "c in step after its snapshot")
        seen = len(publisher.confirmed)
        wait_until(lambda: len(publisher.confirmed) > seen + 20, TIMEOUT_S, "publishes confirmed after it")
    finally:
        for client in (publisher, consumer):
            client.stop.set()
            client.join(TIMEOUT_S)
    assert publisher.failure is None and consumer.failure is None, (publisher.failure, consumer.failure)

    # with b gone, a confirm needs c's sync of every operation so far: c holds everything then
    b.proc.kill()
    b.proc.wait(timeout=10)
    ch.basic_publish("", queue, b"last", pika.BasicProperties(delivery_mode=2))
    conn.close()
    c.stop()  # (a alone is no majority of three: nobody takes the queue meanwhile)
    a.stop()
    digest = hashlib.sha256(f"/\0{queue}".encode()).hexdigest()[:32]
    leader = live_messages(nodes.tmp / "data-a" / "queues" / digest)
    replica = live_messages(nodes.tmp / "data-c" / "replicas" / digest)
    assert len(leader) > FILLED - TAKEN and any(returned for _, returned in leader.values())
    assert replica.keys() == leader.keys()
    assert replica == leader
    # in step from its one snapshot on: the operations made meanwhile followed it, none missing
    assert "follower c is out of step" not in a.log()
