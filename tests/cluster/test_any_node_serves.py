"""Any node serves any queue (issue 32, item 3): a client connected to node b declares, publishes
to, gets from, consumes from, acks, requeues and purges a queue that lives on node a; with real
etcd, real nodes and pika. Waits are on what a client or the HTTP API sees, never on time.

Checked: confirmed publishes through node b are on node a's queue (counted by a client of node
a); a passive declare through b counts them; an inequivalent redeclare is refused 406 by a's
check; an exclusive declare of another node's queue is 405; basic.get and basic.ack through b
take them off a's queue; a consumer on b with a prefetch of 2 holds 2 unacked at a time; a
channel closed with unacked messages puts them back (redelivered); a binding made through b
routes b's publishes to a's queue; purge and delete through b; a node that goes cancels the
consumers of its queues elsewhere, and nodes still serve their own queues.
"""

from __future__ import annotations

import signal

import pika
import pytest

from tests.cluster.cluster_nodes import api, wait_until

TIMEOUT_S = 30.0


def connect(node) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(node.url))


def depth(conn: pika.BlockingConnection, name: str) -> int:
    return conn.channel().queue_declare(name, passive=True).method.message_count


def known_on(node, name: str) -> None:
    """Wait until ``node`` serves ``name`` (a passive declare through it answers)."""
    def served():
        conn = connect(node)
        try:
            conn.channel().queue_declare(name, passive=True)
            return True
        except pika.exceptions.ChannelClosedByBroker:
            return False
        finally:
            if conn.is_open:
                conn.close()
    wait_until(served, TIMEOUT_S, f"node serving queue {name}")


def test_a_client_of_node_b_uses_a_queue_of_node_a(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    name = f"on-a-{uid}"
    on_a = connect(a)
    on_a.channel().queue_declare(name, durable=True)
    known_on(b, name)  # node b's watch of the queue directory brings it within moments
    on_b = connect(b)
    try:
        ch = on_b.channel()
        assert ch.queue_declare(name, passive=True).method.message_count == 0
        assert ch.queue_declare(name, durable=True).method.message_count == 0  # equivalent: ok
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", name, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2), mandatory=True)
        assert depth(on_a, name) == 20  # on node a, counted there
        assert ch.queue_declare(name, passive=True).method.message_count == 20

        # a's equivalence check, through b
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            on_b.channel().queue_declare(name, durable=False)
        assert refused.value.reply_code == 406 and "inequivalent arg 'durable'" in refused.value.reply_text
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as locked:
            on_b.channel().queue_declare(name, durable=True, exclusive=True)
        assert locked.value.reply_code == 405

        # get and ack through b
        ch = on_b.channel()
        method, _, body = ch.basic_get(name)
        assert body == b"m0" and method.message_count == 19
        ch.basic_ack(method.delivery_tag)
        method, _, body = ch.basic_get(name, auto_ack=True)
        assert body == b"m1"
        assert depth(on_a, name) == 18

        # a consumer on b with a prefetch of 2: two unacked at a time, acks let the rest come
        ch.basic_qos(prefetch_count=2)
        got = []

        def on_message(channel, method, properties, body):
            got.append((method.delivery_tag, body))
        tag = ch.basic_consume(name, on_message)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), len(got) >= 2)[1], TIMEOUT_S, "two deliveries")
        on_b.process_data_events(time_limit=0.3)
        assert len(got) == 2  # the prefetch holds the third back
        for delivery_tag, _ in list(got):
            ch.basic_ack(delivery_tag)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), len(got) >= 4)[1], TIMEOUT_S, "two more")
        assert [body for _, body in got[:4]] == [b"m2", b"m3", b"m4", b"m5"]
        ch.basic_cancel(tag)
        # two unacked when the channel closes: back on a's queue, redelivered
        ch.close()
        wait_until(lambda: depth(on_a, name) == 16, TIMEOUT_S, "the unacked two back on node a's queue")
        ch = on_b.channel()
        method, _, body = ch.basic_get(name, auto_ack=True)
        assert body == b"m4" and method.redelivered

        # a binding made through b routes b's publishes to a's queue
        ch.queue_bind(name, "amq.direct", routing_key=f"k-{uid}")
        ch.confirm_delivery()
        ch.basic_publish("amq.direct", f"k-{uid}", b"routed", pika.BasicProperties(delivery_mode=2), mandatory=True)
        assert depth(on_a, name) == 16
        assert ch.queue_purge(name).method.message_count == 16
        assert depth(on_a, name) == 0

        # deleted through b: gone from a
        ch.basic_publish("", name, b"last", pika.BasicProperties(delivery_mode=2))
        assert ch.queue_delete(name).method.message_count == 1
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as missing:
            on_a.channel().queue_declare(name, passive=True)
        assert missing.value.reply_code == 404
    finally:
        for conn in (on_a, on_b):
            if conn.is_open:
                conn.close()


def test_a_node_that_goes_cancels_the_consumers_of_its_queues(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    on_a = connect(a)
    on_a.channel().queue_declare(f"q-{uid}", durable=True)
    on_a.close()
    known_on(b, f"q-{uid}")
    on_b = connect(b)
    try:
        ch = on_b.channel()
        ch.queue_declare(f"own-{uid}")
        cancelled = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        tag = ch.basic_consume(f"q-{uid}", lambda *args: None)
        a.signal(signal.SIGKILL)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), cancelled)[1], TIMEOUT_S,
                   "basic.cancel of the consumer of node a's queue")
        assert cancelled == [tag]
        # node b goes on serving its own queue; a's durable queue is refused as RabbitMQ 3.10 does
        ch.basic_publish("", f"own-{uid}", b"x")
        assert ch.queue_declare(f"own-{uid}", passive=True).method.message_count == 1
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as down:
            ch.queue_declare(f"q-{uid}", durable=True)
        assert down.value.reply_code == 404 and "is down or inaccessible" in down.value.reply_text
        rows = wait_until(lambda: [q for q in api(b, "queues") if q["name"] == f"q-{uid}" and q.get("state") == "down"],
                          TIMEOUT_S, "node a's queue listed down")
        assert rows[0]["node"] == "a"
    finally:
        if on_b.is_open:
            on_b.close()


def test_exchanges_and_bindings_made_on_one_node_route_on_every_node(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    exchange, queue = f"x-{uid}", f"bound-{uid}"
    on_a = connect(a)
    on_b = connect(b)
    try:
        # a consumer's usual declarations, all on node a: exchange, queue, binding, and an
        # exclusive server-named queue bound to a fanout (a reply or broadcast queue)
        ch = on_a.channel()
        ch.exchange_declare(exchange, "topic", durable=True)
        ch.queue_declare(queue, durable=True)
        ch.queue_bind(queue, exchange, routing_key="orders.*")
        ch.exchange_declare(f"fan-{uid}", "fanout")
        private = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(private, f"fan-{uid}")

        # a publisher's, on node b: the exchange is there (declare-ok came after etcd took it);
        # node b makes the bindings once its watch brings them (within moments)
        wait_until(lambda: {(x["source"], x["destination"]) for x in api(b, "bindings/%2F")}
                   >= {(exchange, queue), (f"fan-{uid}", private)}, TIMEOUT_S, "node b holding node a's bindings")
        pub = on_b.channel()
        pub.exchange_declare(exchange, "topic", durable=True)  # equivalent: ok
        pub.confirm_delivery()
        pub.basic_publish(exchange, "orders.new", b"routed across", pika.BasicProperties(delivery_mode=2),
                          mandatory=True)
        with pytest.raises(pika.exceptions.UnroutableError):
            pub.basic_publish(exchange, "invoices.new", b"nowhere", mandatory=True)
        pub.basic_publish(f"fan-{uid}", "", b"to the exclusive queue", mandatory=True)
        wait_until(lambda: depth(on_a, queue) == 1, TIMEOUT_S, "the message on node a's queue")
        assert ch.basic_get(private, auto_ack=True)[2] == b"to the exclusive queue"
        # an exclusive queue of a connection on node a: used through node b, 405
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as locked:
            on_b.channel().basic_get(private)
        assert locked.value.reply_code == 405

        # node a's check holds on node b: the exchange's type is node a's
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as inequivalent:
            on_b.channel().exchange_declare(exchange, "direct", durable=True)
        assert inequivalent.value.reply_code == 406

        # unbound through node b: node a no longer routes that way either
        pub = on_b.channel()
        pub.queue_unbind(queue, exchange, routing_key="orders.*")
        pub.confirm_delivery()
        with pytest.raises(pika.exceptions.UnroutableError):
            pub.basic_publish(exchange, "orders.new", b"unbound", mandatory=True)
        ch = on_a.channel()
        ch.confirm_delivery()
        wait_until(lambda: _unroutable(ch, exchange, "orders.new"), TIMEOUT_S, "node a's binding gone")

        # deleted through node a: gone on node b (once its watch brought it)
        ch.exchange_delete(exchange)
        wait_until(lambda: exchange not in {x["name"] for x in api(b, "exchanges/%2F")}, TIMEOUT_S,
                   "node b without the exchange")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as missing:
            on_b.channel().exchange_declare(exchange, "topic", passive=True)
        assert missing.value.reply_code == 404
        rows = {x["name"] for x in api(b, f"exchanges/%2F")}
        assert exchange not in rows and f"fan-{uid}" in rows
    finally:
        for conn in (on_a, on_b):
            if conn.is_open:
                conn.close()


def _unroutable(ch, exchange: str, routing_key: str) -> bool:
    try:
        ch.basic_publish(exchange, routing_key, b"probe", mandatory=True)
    except pika.exceptions.UnroutableError:
        return True
    ch.connection.channel().queue_purge(f"bound-{exchange[2:]}")  # it was routed: not gone yet
    return False


def test_a_node_takes_the_changes_made_while_it_was_down(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    conn = connect(b)
    ch = conn.channel()
    ch.exchange_declare(f"old-{uid}", "direct", durable=True)
    ch.queue_declare(f"kept-{uid}", durable=True)
    ch.queue_bind(f"kept-{uid}", f"old-{uid}", routing_key="k")
    conn.close()
    b.stop()
    conn = connect(a)
    ch = conn.channel()
    ch.exchange_delete(f"old-{uid}")
    ch.exchange_declare(f"new-{uid}", "fanout", durable=True)
    conn.close()
    b = nodes.start(etcd1.endpoints, cluster_name, "b", data_dir=b.data_dir)
    names = {x["name"] for x in api(b, "exchanges/%2F")}  # made etcd's before it listened
    assert f"new-{uid}" in names and f"old-{uid}" not in names
    known_on(b, f"kept-{uid}")
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_bind(f"kept-{uid}", f"new-{uid}")
        ch.confirm_delivery()
        ch.basic_publish(f"new-{uid}", "", b"after", mandatory=True)
        assert ch.queue_declare(f"kept-{uid}", passive=True).method.message_count == 1
    finally:
        conn.close()


def test_queue_leader_locator_places_new_queues(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--queue-leader-locator", "a")
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(f"placed-{uid}", durable=True)  # b's locator: node a
        # RabbitMQ 3.10's classic queues name theirs x-queue-master-locator (x-queue-leader-locator
        # is refused there, as here)
        ch.queue_declare(f"local-{uid}", durable=True, arguments={"x-queue-master-locator": "client-local"})
        private = ch.queue_declare("", exclusive=True).method.queue  # exclusive: always here
        ch.confirm_delivery()
        ch.basic_publish("", f"placed-{uid}", b"on a", pika.BasicProperties(delivery_mode=2))
        assert ch.basic_get(f"placed-{uid}", auto_ack=True)[2] == b"on a"  # at once, through b
        wait_until(lambda: len({q["name"] for q in api(a, "queues")} & {f"placed-{uid}", f"local-{uid}", private}) == 3,
                   TIMEOUT_S, "all three listed")
        nodes_of = {q["name"]: q["node"] for q in api(a, "queues")}
        assert nodes_of[f"placed-{uid}"] == "a"
        assert nodes_of[f"local-{uid}"] == "b" and nodes_of[private] == "b"
        # min-masters (4.x's balanced): a new queue goes to the node with fewer queues (a has
        # one, b two)
        ch.queue_declare(f"balanced-{uid}", arguments={"x-queue-master-locator": "min-masters"})
        wait_until(lambda: any(q["name"] == f"balanced-{uid}" and q["node"] == "a" for q in api(b, "queues")),
                   TIMEOUT_S, "the balanced queue on node a")
    finally:
        conn.close()


def test_a_0_10_client_of_node_b_uses_a_queue_of_node_a(etcd1, nodes, cluster_name, uid):
    """Qpid's qpid.messaging (0-10, Python 2.7) through node b: the same broker operations as
    0-9-1's reach node a's queue: a sender's messages land there, a receiver fetches and
    acknowledges them, what it does not acknowledge comes back."""
    from tests.interop_0_10.test_cross_version import qpid
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    name = f"q010-{uid}"
    on_a = connect(a)
    try:
        on_a.channel().queue_declare(name, durable=True)
        known_on(b, name)
        printed = qpid(r"""
c = connect()
s = c.session()
snd = s.sender(sys.argv[2])
for i in range(5):
    snd.send(Message(content="m%d" % i, durable=True), sync=True)
r = s.receiver(sys.argv[2])
got = [r.fetch(timeout=10).content for i in range(3)]
s.acknowledge(sync=True)
r2 = c.session().receiver(sys.argv[2])
r2.fetch(timeout=10)  # never acknowledged: back on node a's queue when the connection closes
print(json.dumps(got))
c.close()
""", b.port, name)
        assert printed == [["m0", "m1", "m2"]]
        wait_until(lambda: depth(on_a, name) == 2, TIMEOUT_S, "two left on node a's queue")
        ch = on_a.channel()
        method, _, body = ch.basic_get(name, auto_ack=True)
        assert body == b"m3" and method.redelivered
        assert ch.basic_get(name, auto_ack=True)[2] == b"m4"
    finally:
        on_a.close()


def test_definitions_exported_and_imported_through_any_node_cover_the_cluster(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    on_a = connect(a)
    try:
        ch = on_a.channel()
        ch.exchange_declare(f"ex-{uid}", "direct", durable=True)
        ch.queue_declare(f"qa-{uid}", durable=True, arguments={"x-max-length": 10})
        ch.queue_bind(f"qa-{uid}", f"ex-{uid}", routing_key="r")
    finally:
        on_a.close()
    known_on(b, f"qa-{uid}")

    def exported(node) -> tuple:
        defs = api(node, "definitions")
        return ({q["name"]: q["arguments"] for q in defs["queues"] if q["name"].endswith(uid)},
                {x["name"] for x in defs["exchanges"] if x["name"].endswith(uid)},
                {(x["source"], x["destination"], x["routing_key"]) for x in defs["bindings"]
                 if x["destination"].endswith(uid)})
    wait_until(lambda: exported(b)[2], TIMEOUT_S, "node b holding the binding")
    assert exported(b) == exported(a) == ({f"qa-{uid}": {"x-max-length": 10}}, {f"ex-{uid}"},
                                          {(f"ex-{uid}", f"qa-{uid}", "r")})

    # an import through node b: a new queue made there, its binding to it and to node a's queue
    # shared, and node a's queue's declaration checked by node a (equivalent: taken)
    body = {"queues": [{"name": f"qb-{uid}", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}},
                       {"name": f"qa-{uid}", "vhost": "/", "durable": True, "auto_delete": False,
                        "arguments": {"x-max-length": 10}}],
            "bindings": [{"source": f"ex-{uid}", "vhost": "/", "destination": f"qb-{uid}", "destination_type": "queue",
                          "routing_key": "r2", "arguments": {}}]}
    api(b, "definitions", "POST", body)
    rows = {q["name"]: q["node"] for q in api(a, "queues") if q["name"].endswith(uid)}
    assert rows == {f"qa-{uid}": "a", f"qb-{uid}": "b"}
    wait_until(lambda: (f"ex-{uid}", f"qb-{uid}", "r2") in exported(a)[2], TIMEOUT_S, "node a holding the import's binding")


def test_a_stream_and_direct_reply_to_across_nodes(etcd1, nodes, cluster_name, uid):
    """A stream on node a read from its first offset through node b; an RPC whose client is on
    node b (direct reply-to) and whose server is on node a gets its answer."""
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--queue-leader-locator", "a")
    on_a, on_b = connect(a), connect(b)
    try:
        ch = on_b.channel()
        ch.queue_declare(f"s-{uid}", durable=True, arguments={"x-queue-type": "stream"})  # made on node a
        ch.confirm_delivery()
        for i in range(10):
            ch.basic_publish("", f"s-{uid}", b"m%d" % i)
        ch.basic_qos(prefetch_count=5)
        got = []
        ch.basic_consume(f"s-{uid}", lambda c, m, p, body: (got.append(body), c.basic_ack(m.delivery_tag)),
                         arguments={"x-stream-offset": "first"})
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), len(got) >= 10)[1], TIMEOUT_S,
                   "the stream read through node b")
        assert got == [b"m%d" % i for i in range(10)]
        assert {q["name"]: q["node"] for q in api(a, "queues")}[f"s-{uid}"] == "a"

        server = on_a.channel()
        server.queue_declare(f"rpc-{uid}")  # node a's own (client-local there)
        known_on(b, f"rpc-{uid}")  # else node b, its watch behind, finds no queue to route to
        client = on_b.channel()
        replies = []
        client.basic_consume("amq.rabbitmq.reply-to", lambda c, m, p, body: replies.append(body), auto_ack=True)
        client.basic_publish("", f"rpc-{uid}", b"ask", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        def request():
            got = server.basic_get(f"rpc-{uid}", auto_ack=True)
            return got if got[0] is not None else None
        method, properties, body = wait_until(request, TIMEOUT_S, "the request on node a")
        assert body == b"ask" and properties.reply_to.startswith("amq.rabbitmq.reply-to.")
        server.basic_publish("", properties.reply_to, b"answer")
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), replies)[1], TIMEOUT_S, "the reply on node b")
        assert replies == [b"answer"]
    finally:
        for conn in (on_a, on_b):
            if conn.is_open:
                conn.close()


def test_one_name_declared_through_two_nodes_at_once_is_one_queue(etcd1, nodes, cluster_name, uid):
    """Two clients declare the same new names at the same moment, one through each node: each
    name becomes one queue, on one node (the queue directory's claim, warren/cluster/queues.py),
    and both declares are answered ok; a message published through either node is got once."""
    import threading

    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    names = [f"both-{uid}-{i}" for i in range(20)]
    answers: dict[str, list] = {"a": [], "b": []}
    start = threading.Barrier(2, timeout=TIMEOUT_S)

    def declare_all(node, which: str) -> None:
        conn = connect(node)
        try:
            ch = conn.channel()
            start.wait()
            for name in names:
                answers[which].append(ch.queue_declare(name, durable=True).method.queue)
        finally:
            conn.close()

    threads = [threading.Thread(target=declare_all, args=(n, w)) for n, w in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert answers == {"a": names, "b": names}
    rows = api(a, "queues")
    homes = {}
    for row in rows:
        if row["name"] in names:
            homes.setdefault(row["name"], []).append(row["node"])
    assert sorted(homes) == sorted(names) and all(len(h) == 1 for h in homes.values()), homes
    on_a, on_b = connect(a), connect(b)
    try:
        pub = on_a.channel()
        pub.confirm_delivery()
        for name in names:
            pub.basic_publish("", name, name.encode(), mandatory=True)
        got = on_b.channel()
        assert [got.basic_get(name, auto_ack=True)[2] for name in names] == [n.encode() for n in names]
        assert [depth(on_a, name) for name in names] == [0] * len(names)
    finally:
        on_a.close()
        on_b.close()


def test_one_exchange_name_declared_with_two_types_at_once_is_one_exchange(etcd1, nodes, cluster_name, uid):
    """Node a declares new exchanges as direct while node b declares the same names as fanout, at
    the same moment: of each pair one declare is ok and the other 406 (RabbitMQ's inequivalent
    'type'), and both nodes end with the winner's type (topology.py writes a new exchange only if
    no node wrote that name meanwhile)."""
    import threading

    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    names = [f"x-both-{uid}-{i}" for i in range(20)]
    outcome: dict[str, dict[str, str]] = {"a": {}, "b": {}}
    start = threading.Barrier(2, timeout=TIMEOUT_S)

    def declare_all(node, which: str, kind: str) -> None:
        conn = connect(node)
        try:
            ch = conn.channel()
            start.wait()
            for name in names:
                try:
                    ch.exchange_declare(name, kind, durable=True)
                    outcome[which][name] = kind
                except pika.exceptions.ChannelClosedByBroker as e:
                    assert e.reply_code == 406 and "inequivalent arg 'type'" in e.reply_text, e
                    outcome[which][name] = "406"
                    ch = conn.channel()
        finally:
            conn.close()

    threads = [threading.Thread(target=declare_all, args=(n, w, k)) for n, w, k in
               ((a, "a", "direct"), (b, "b", "fanout"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    for name in names:
        pair = sorted([outcome["a"].get(name), outcome["b"].get(name)])
        assert pair in (["406", "direct"], ["406", "fanout"]), (name, pair)
        winner = pair[1]
        for node in (a, b):
            wait_until(lambda node=node: api(node, f"exchanges/%2F/{name}")["type"] == winner, TIMEOUT_S,
                       f"{name} is {winner} on node {node.port}")


@pytest.mark.parametrize("first_exclusive", [True, False], ids=["exclusive-then-shared", "shared-then-exclusive"])
def test_a_name_freed_a_moment_ago_is_declared_again_at_once(etcd1, nodes, cluster_name, first_exclusive):
    """A queue gone a moment ago (its exclusive owner closed, or its last consumer: auto-delete)
    is still listed in etcd and held as a handle by the other node until the queue directory's
    next write; a declare of its name right after, as on one node, is answered ok, not 405 for
    the exclusive queue that was. Node b places shared queues on node a and keeps exclusive
    ones, so the name moves between the nodes at each round."""
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--queue-leader-locator", "a")
    name = f"freed-{cluster_name}"
    for _ in range(5):
        for exclusive in (first_exclusive, not first_exclusive):
            conn = connect(b)
            ch = conn.channel()
            ch.queue_declare(name, exclusive=exclusive, auto_delete=True)
            ch.basic_consume(name, lambda *args: None)
            conn.close()  # the queue goes: its owner closed, or its last consumer
    assert api(a, "nodes")  # both nodes still serve
