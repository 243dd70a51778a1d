"""kill -9 of a node while every node takes confirmed publishes (issue 32, "How it is judged"):
three real nodes, pika publishers with confirms publishing unique ids to durable queues, of
their own node in the first test, of other nodes in the second (through node b to queues on
nodes a and c). Node c is killed with kill -9 mid-stream while the others go on; then started
again with its data folder. Counted per queue: lost (confirmed, never delivered) and unexpected
(delivered, never published) must be 0; duplicated is reported. A nack, or a mandatory publish
returned (a queue whose node is down takes nothing, as in RabbitMQ 3.10), is a publish not
confirmed (the publisher goes on). Nothing waits on time: on counts of confirms, a bounded wait
on the restarted node's queue in the API.
"""

from __future__ import annotations

import signal
import threading

import pika

from tests.cluster.cluster_nodes import api_status, members, wait_until

LEASE_TTL = "2"
TIMEOUT_S = 60.0
BEFORE_KILL = 150  # confirms on node c before it is killed
AFTER_KILL = 150  # more confirms on each surviving node after it


class Publisher(threading.Thread):
    """Publishes ``<node>:<n>`` with confirms until told to stop or its connection fails."""

    def __init__(self, node, name: str, queue: str | None = None) -> None:
        super().__init__(daemon=True)
        self.node, self.name, self.queue = node, name, queue or f"kill9-{name}"
        self.nacked = 0  # nacks and returns: not confirmed as stored
        self.returned = 0
        self.published: set[str] = set()  # sent, confirmed or not (unknown when the node died)
        self.confirmed: list[str] = []
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            conn = pika.BlockingConnection(pika.URLParameters(self.node.url))
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(self.queue, durable=True)
            n = 0
            while not self.stop.is_set():
                body = f"{self.name}:{n}"
                self.published.add(body)
                n += 1
                try:
                    ch.basic_publish("", self.queue, body.encode(), pika.BasicProperties(delivery_mode=2),
                                     mandatory=True)
                except pika.exceptions.NackError:
                    self.nacked += 1  # not confirmed: may or may not be there
                    continue
                except pika.exceptions.UnroutableError:
                    self.returned += 1  # no queue took it (its node is down): returned, then acked
                    continue
                self.confirmed.append(body)  # basic_publish returned: the broker confirmed it
            conn.close()
        except (pika.exceptions.AMQPError, OSError) as e:  # the killed node's publisher ends here
            self.failure = e


def drain(node, queue: str) -> list[str]:
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        ch = conn.channel()
        got = []
        while True:
            method, _props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                return got
            got.append(body.decode())
    finally:
        conn.close()


def test_kill_9_of_one_node_loses_nothing_confirmed_anywhere(etcd1, nodes, cluster_name):
    started = {name: nodes.start(etcd1.endpoints, cluster_name, name, "--cluster-lease-ttl", LEASE_TTL)
               for name in ("a", "b", "c")}
    publishers = {name: Publisher(node, name) for name, node in started.items()}
    for p in publishers.values():
        p.start()
    wait_until(lambda: len(publishers["c"].confirmed) >= BEFORE_KILL, TIMEOUT_S, "node c confirming publishes")
    marks = {name: len(p.confirmed) for name, p in publishers.items()}
    started["c"].signal(signal.SIGKILL)
    started["c"].proc.wait(timeout=30)
    publishers["c"].join(timeout=TIMEOUT_S)
    assert publishers["c"].failure is not None, "node c's publisher did not see its node die"
    for name in ("a", "b"):  # the others go on while node c is gone
        wait_until(lambda name=name: len(publishers[name].confirmed) >= marks[name] + AFTER_KILL, TIMEOUT_S,
                   f"node {name} confirming after node c's kill")
        publishers[name].stop.set()
        publishers[name].join(timeout=TIMEOUT_S)
        assert publishers[name].failure is None, publishers[name].failure

    # its name is free once its lease ends (a start before that is refused: the name is running)
    wait_until(lambda: "c" not in members(etcd1, cluster_name), TIMEOUT_S, "node c's lease ended")
    started["c"] = nodes.start(etcd1.endpoints, cluster_name, "c", "--cluster-lease-ttl", LEASE_TTL,
                               data_dir=started["c"].data_dir)
    # node a's API sees node c's queue running again (the queue directory, through the link)
    wait_until(lambda: api_status(started["a"], "queues/%2F/kill9-c")[0] == 200, TIMEOUT_S,
               "node c's queue shown by node a after the restart")
    report = {}
    for name, p in publishers.items():
        delivered = drain(started[name], p.queue)
        lost = set(p.confirmed) - set(delivered)
        unexpected = set(delivered) - p.published
        report[name] = (len(p.confirmed), len(delivered), len(lost), len(delivered) - len(set(delivered)),
                        len(unexpected))
        assert not lost and not unexpected, (name, sorted(lost)[:5], sorted(unexpected)[:5])
    print("\nper node: confirmed, delivered, lost, duplicated, unexpected:", report)


def test_kill_9_of_a_queue_node_loses_nothing_confirmed_through_another_node(etcd1, nodes, cluster_name):
    started = {name: nodes.start(etcd1.endpoints, cluster_name, name, "--cluster-lease-ttl", LEASE_TTL)
               for name in ("a", "b", "c")}
    for name in ("a", "c"):  # each queue lives on its own node, declared there
        conn = pika.BlockingConnection(pika.URLParameters(started[name].url))
        conn.channel().queue_declare(f"across-{name}", durable=True)
        conn.close()
    # through node b to node a's and node c's queues, and from node c to node a's
    publishers = {"b>a": Publisher(started["b"], "b>a", "across-a"), "b>c": Publisher(started["b"], "b>c", "across-c"),
                  "c>a": Publisher(started["c"], "c>a", "across-a")}
    for p in publishers.values():
        p.start()
    wait_until(lambda: min(len(p.confirmed) for p in publishers.values()) >= BEFORE_KILL, TIMEOUT_S,
               "every publisher confirmed through another node")
    mark = len(publishers["b>a"].confirmed)
    started["c"].signal(signal.SIGKILL)
    started["c"].proc.wait(timeout=30)
    publishers["c>a"].join(timeout=TIMEOUT_S)
    assert publishers["c>a"].failure is not None, "node c's publisher did not see its node die"
    # node b goes on taking what goes to node a's queue; node c's queue is refused meanwhile (nacks)
    wait_until(lambda: len(publishers["b>a"].confirmed) >= mark + AFTER_KILL, TIMEOUT_S,
               "node b confirming to node a's queue after node c's kill")
    wait_until(lambda: publishers["b>c"].returned or publishers["b>c"].failure, TIMEOUT_S,
               "node b returning (unroutable) what goes to node c's queue while c is down")
    for name in ("b>a", "b>c"):
        publishers[name].stop.set()
        publishers[name].join(timeout=TIMEOUT_S)
    assert publishers["b>a"].failure is None, publishers["b>a"].failure

    wait_until(lambda: "c" not in members(etcd1, cluster_name), TIMEOUT_S, "node c's lease ended")
    started["c"] = nodes.start(etcd1.endpoints, cluster_name, "c", "--cluster-lease-ttl", LEASE_TTL,
                               data_dir=started["c"].data_dir)
    wait_until(lambda: api_status(started["b"], "queues/%2F/across-c")[0] == 200, TIMEOUT_S,
               "node c's queue served through node b after the restart")
    # node c started again knows nothing of how node b numbers what it sends it (reach.py
    # ``send_forward``): it counts on from the last number a sync of b's covered, so b's next
    # confirmed publish to it is confirmed, not nacked (pika raises NackError on a nack)
    conn = pika.BlockingConnection(pika.URLParameters(started["b"].url))
    ch = conn.channel()
    ch.confirm_delivery()
    publishers["b>c"].published.add("b>c:after-restart")
    ch.basic_publish("", "across-c", b"b>c:after-restart", pika.BasicProperties(delivery_mode=2))
    conn.close()
    # drained through node b, the node neither queue lives on
    delivered = {"across-a": drain(started["b"], "across-a"), "across-c": drain(started["b"], "across-c")}
    report = {}
    for name, p in publishers.items():
        queue = delivered[p.queue]
        mine = [body for body in queue if body.startswith(name + ":")]
        lost = set(p.confirmed) - set(mine)
        unexpected = set(mine) - p.published
        report[name] = (len(p.confirmed), p.nacked, p.returned, len(mine), len(lost), len(mine) - len(set(mine)),
                        len(unexpected))
        assert not lost and not unexpected, (name, sorted(lost)[:5], sorted(unexpected)[:5])
    strangers = [body for queue in delivered.values() for body in queue if body.split(":")[0] not in publishers]
    assert not strangers, strangers[:5]
    print("\nper publisher: confirmed, nacked, returned, delivered, lost, duplicated, unexpected:", report)
