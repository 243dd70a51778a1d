"""Replicated streams (issue 33, item 2; warren/cluster/replicas.py): a stream declared on a
cluster of three gets `x-initial-cluster-size` members (3 by default); a confirmed message is on a
majority's disks; kill -9 of its leader, and a follower takes the stream with every confirmed
message at the same offset, read through any node over AMQP (x-stream-offset) and over the HTTP
API's bulk reads that the Spark source uses. Real etcd, real nodes, pika; waits are on what etcd, the
HTTP API or a client shows.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request

import pika

from tests.cluster.cluster_nodes import GUEST, api_status, wait_until
from tests.cluster.test_replicated_quorum import TIMEOUT_S, connect, record, taken_from, three_nodes
from warren.store.stream_format import parse_entries

STREAM = {"x-queue-type": "stream"}


def read_stream(node, stream: str, expected: int) -> list[tuple[int, str]]:
    """(offset, body) of every message from the first offset, through ``node``, until ``expected``
    came (x-stream-offset "first", manual acks as RabbitMQ's streams want)."""
    conn = connect(node)
    got: list[tuple[int, str]] = []
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        for method, properties, body in ch.consume(stream, arguments={"x-stream-offset": "first"},
                                                   inactivity_timeout=TIMEOUT_S):
            assert method is not None, f"no message within {TIMEOUT_S:g} s after {len(got)} of {expected}"
            got.append((properties.headers["x-stream-offset"], body.decode()))
            ch.basic_ack(method.delivery_tag)
            if len(got) >= expected:
                break
        ch.cancel()
    finally:
        if conn.is_open:
            conn.close()
    return got


def bulk_read(node, stream: str) -> list[tuple[int, bytes]]:
    """Every committed entry through the HTTP API's bulk read (the Spark source's): (offset, record)."""
    out, offset = [], 0
    while True:
        request = urllib.request.Request(f"{node.http_url}/api/streams/%2F/{stream}/records?offset={offset}",
                                         headers={"Authorization": GUEST})
        with urllib.request.urlopen(request, timeout=10) as resp:
            first = int(resp.headers["X-Warren-First-Offset"])
            count = int(resp.headers["X-Warren-Record-Count"])
            data = resp.read()
        if count == 0:
            return out
        entries = parse_entries(data, verify=True)
        assert [e[0] for e in entries] == list(range(first, first + count))
        out += [(o, r) for o, _, r in entries]
        offset = first + count


def test_a_stream_has_three_members_and_keeps_every_confirmed_offset_through_its_leaders_kill(
        etcd1, nodes, cluster_name, uid):
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    stream = f"st-{uid}"
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(stream, durable=True, arguments=STREAM)
    held = record(etcd1, cluster_name, stream)
    assert held is not None and held["members"] == ["a", "b", "c"] and held["type"] == "stream", held
    ch.confirm_delivery()
    published = [f"m-{i}" for i in range(300)]
    for body in published:
        ch.basic_publish("", stream, body.encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()
    before = read_stream(b, stream, len(published))  # through a follower's node, from the leader
    assert [body for _, body in before] == published
    records_before = bulk_read(a, stream)
    assert len(records_before) == len(published)

    a.proc.kill()  # kill -9 of the leader
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, stream)
    assert taken["leader"] in ("b", "c") and taken["epoch"] >= 2, taken
    leader = b if taken["leader"] == "b" else c
    other = c if leader is b else b
    wait_until(lambda: (r := api_status(other, f"queues/%2F/{stream}")[1]) and r.get("leader") == taken["leader"],
               TIMEOUT_S, "the stream's row through another node names the new leader")
    after = read_stream(other, stream, len(published))
    assert after == before  # every confirmed message, at the same offset, nothing more
    assert bulk_read(leader, stream) == records_before  # the Spark source's reads: the same offsets and records
    assert bulk_read(other, stream) == records_before  # through a node that is not its leader too

    # the new leader takes appends after the last offset, and a follower back from the dead catches up
    conn = connect(other)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", stream, b"after", pika.BasicProperties(delivery_mode=2))
    conn.close()
    got = read_stream(leader, stream, len(published) + 1)
    assert got[-1] == (before[-1][0] + 1, "after"), got[-3:]


class StreamConsumer:
    """A consumer of ``stream`` through ``node`` from its first offset, kept open: what it got
    as (offset, body), and whether the broker cancelled it."""

    def __init__(self, node, stream: str) -> None:
        self.conn = connect(node)
        ch = self.conn.channel()
        ch.basic_qos(prefetch_count=50)
        self.got: list[tuple[int, str]] = []
        self.cancelled = False
        ch.add_on_cancel_callback(lambda frame: setattr(self, "cancelled", True))

        def on_message(channel, method, properties, body) -> None:
            self.got.append((properties.headers["x-stream-offset"], body.decode()))
            channel.basic_ack(method.delivery_tag)
        ch.basic_consume(stream, on_message, arguments={"x-stream-offset": "first"})

    def until(self, condition, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {TIMEOUT_S:g} s: {what} ({len(self.got)} got)"
            self.conn.process_data_events(time_limit=0.1)

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


def publish(node, stream: str, bodies: list[str]) -> None:
    conn = connect(node)
    ch = conn.channel()
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", stream, body.encode(), pika.BasicProperties(delivery_mode=2))
    conn.close()


def test_followers_serve_a_streams_reads_up_to_its_commit_and_go_on_through_its_leaders_kill(
        etcd1, nodes, cluster_name, uid):
    """RabbitMQ reads a stream from the member on the consumer's node: with the leader paused
    (SIGSTOP), every confirmed message is still read through each follower's node, over AMQP and
    over the HTTP bulk reads, at the leader's offsets; a consumer on a follower's node goes on
    through the leader's kill -9 and reads what the new leader appends; the one on the node that
    takes the stream over is cancelled, as the leader's consumers are."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    stream = f"stf-{uid}"
    conn = connect(a)
    conn.channel().queue_declare(stream, durable=True, arguments=STREAM)
    conn.close()
    published = [f"m-{i}" for i in range(200)]
    publish(a, stream, published)
    expected = list(enumerate(published))
    leader_records = bulk_read(a, stream)

    os.kill(a.proc.pid, signal.SIGSTOP)  # (the leader told its commit before it confirmed)
    try:
        for follower in (b, c):
            assert read_stream(follower, stream, len(published)) == expected
            assert bulk_read(follower, stream) == leader_records
        consumers = {"b": StreamConsumer(b, stream), "c": StreamConsumer(c, stream)}
        for consumer in consumers.values():
            consumer.until(lambda consumer=consumer: len(consumer.got) >= len(published), "the replica's messages")
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)

    a.proc.kill()
    a.proc.wait(timeout=10)
    taken = taken_from(etcd1, cluster_name, stream)
    leader, follower = ("b", "c") if taken["leader"] == "b" else ("c", "b")
    publish(b if leader == "b" else c, stream, ["after-0", "after-1"])
    on_follower, on_leader = consumers[follower], consumers[leader]
    try:
        on_follower.until(lambda: len(on_follower.got) >= len(published) + 2, "the new leader's appends")
        assert on_follower.got == expected + [(200, "after-0"), (201, "after-1")]
        assert not on_follower.cancelled
        on_leader.until(lambda: on_leader.cancelled, "the cancel of the consumer on the node that took it")
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_a_stream_consumer_on_a_node_without_a_replica_is_cancelled_when_its_leader_dies(
        etcd1, nodes, cluster_name, uid):
    """As RabbitMQ's: a stream consumer resumes from an offset its client knows, so the broker
    cancels it (basic.cancel, the client asked for consumer cancel notifications) rather than
    starting it again from its first offset spec. Node c holds no replica (two members): its
    consumer reads from the leader."""
    a, b, c = three_nodes(etcd1, nodes, cluster_name)
    stream = f"stc-{uid}"
    conn = connect(a)
    conn.channel().queue_declare(stream, durable=True, arguments={**STREAM, "x-initial-cluster-size": 2})
    conn.close()
    assert record(etcd1, cluster_name, stream)["members"] == ["a", "b"]
    consumer = connect(c)
    ch = consumer.channel()
    ch.basic_qos(prefetch_count=10)
    cancelled = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(stream, lambda *args: None, arguments={"x-stream-offset": "first"})
    a.proc.kill()
    a.proc.wait(timeout=10)
    deadline_checks = 0
    while not cancelled and deadline_checks < TIMEOUT_S * 10:
        consumer.process_data_events(time_limit=0.1)
        deadline_checks += 1
    assert cancelled == [tag]
    consumer.close()
    # (one of two members left is no majority: nobody takes it until node a returns, as RabbitMQ's)
    assert record(etcd1, cluster_name, stream)["leader"] == "a"
