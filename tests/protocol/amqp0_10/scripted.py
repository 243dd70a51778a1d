"""The 0-10 server state machine behind a real socket, with a scripted stand-in for the broker.

Warren's broker has no 0-10 adapter yet (issue 14: it comes after the broker seam), so the
protocol layer is checked against the real qpid.messaging client with ``ScriptedBroker``: in-
memory queues and just enough of message.subscribe/flow/flush/accept for a sender and a
receiver. It is a test peer for the protocol layer, not a broker: no routing beyond the default
exchange, no durability. ``ScriptedServer`` runs one connection per accepted socket in a thread
and records every octet the client sent (``received``), which is how the fixture
``qpid_messaging_session.bin`` was captured (``capture_fixture`` below).
"""

from __future__ import annotations

import socket
import threading
from collections import deque

from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.connection import ServerConnection
from warren.spec import amqp0_10 as spec

UNLIMITED = 0xFFFFFFFF


class _Subscription:
    def __init__(self, queue: str, accept_mode, acquire_mode) -> None:
        self.queue = queue
        self.accept_mode, self.acquire_mode = accept_mode or 0, acquire_mode or 0
        self.messages = 0
        self.octets = 0


class ScriptedBroker:
    """Answers the commands of one connection (see module docstring)."""

    def __init__(self) -> None:
        self.queues: dict[str, deque] = {}
        self.exchanges = {"": "direct", "amq.direct": "direct", "amq.topic": "topic", "amq.fanout": "fanout"}
        self.subscriptions: dict[tuple[int, str], _Subscription] = {}
        self.log: list = []  # every event, for the test to look at

    def handle(self, conn: ServerConnection, e) -> None:
        self.log.append(e)
        if isinstance(e, ev.LoginRequested):
            if e.mechanism == "PLAIN" and e.response != b"\0guest\0guest":
                conn.refuse_login()
            else:
                conn.accept_login()
        elif isinstance(e, ev.OpenRequested):
            conn.accept_open()
        elif isinstance(e, ev.SessionDetached):
            for key in [k for k in self.subscriptions if k[0] == e.channel]:
                del self.subscriptions[key]
        elif isinstance(e, ev.Command):
            self._command(conn, e)
            self._deliver(conn)

    def _command(self, conn: ServerConnection, e: ev.Command) -> None:
        c, name = e.command, e.name
        if name == "exchange.query":
            kind = self.exchanges.get(c.name or "")
            conn.send_result(e.channel, e.command_id, spec.ExchangeExchangeQueryResult(
                type=kind, not_found=kind is None))
            return
        if name == "queue.query":
            q = self.queues.get(c.queue or "")
            result = spec.QueueQueueQueryResult() if q is None else spec.QueueQueueQueryResult(
                queue=c.queue, message_count=len(q), subscriber_count=0)
            conn.send_result(e.channel, e.command_id, result)
            return
        if name == "queue.declare":
            if c.passive and c.queue not in self.queues:
                conn.send_exception(e.channel, e.command_id, spec.ExecutionErrorCode.NOT_FOUND,
                                    f"queue {c.queue!r} not found")
                return
            self.queues.setdefault(c.queue, deque())
        elif name == "queue.delete":
            self.queues.pop(c.queue, None)
        elif name == "message.transfer":
            dp = e.header_struct(spec.MessageDeliveryProperties)
            key = dp.routing_key if dp is not None else None
            if (c.destination or "") == "" and key in self.queues:
                self.queues[key].append((e.header or [], e.body or b""))
        elif name == "message.subscribe":
            if c.queue not in self.queues:
                conn.send_exception(e.channel, e.command_id, spec.ExecutionErrorCode.NOT_FOUND,
                                    f"queue {c.queue!r} not found")
                return
            self.subscriptions[(e.channel, c.destination)] = _Subscription(c.queue, c.accept_mode, c.acquire_mode)
        elif name == "message.flow":
            sub = self.subscriptions.get((e.channel, c.destination))
            if sub is not None:
                value = UNLIMITED if c.value is None else c.value
                if c.unit == spec.MessageCreditUnit.BYTE:
                    sub.octets = UNLIMITED if value == UNLIMITED else min(UNLIMITED, sub.octets + value)
                else:
                    sub.messages = UNLIMITED if value == UNLIMITED else min(UNLIMITED, sub.messages + value)
        elif name == "message.flush":
            sub = self.subscriptions.get((e.channel, c.destination))
            if sub is not None:
                self._deliver(conn)
                sub.messages = sub.octets = 0
        elif name == "message.stop":
            sub = self.subscriptions.get((e.channel, c.destination))
            if sub is not None:
                sub.messages = sub.octets = 0
        elif name == "message.cancel":
            self.subscriptions.pop((e.channel, c.destination), None)
        # exchange.declare/bind, set-flow-mode, accept/release/reject, tx.*: nothing to keep here
        conn.complete(e.channel, e.command_id)

    def _deliver(self, conn: ServerConnection) -> None:
        for (channel, destination), sub in self.subscriptions.items():
            q = self.queues.get(sub.queue)
            while q and sub.messages and sub.octets:
                header, body = q.popleft()
                dp = next((s for s in header if isinstance(s, spec.MessageDeliveryProperties)), None)
                mp = next((s for s in header if isinstance(s, spec.MessageMessageProperties)), None)
                conn.send_transfer(channel, destination, body, dp, mp, sub.accept_mode, sub.acquire_mode)
                if sub.messages != UNLIMITED:
                    sub.messages -= 1
                if sub.octets != UNLIMITED:
                    sub.octets = max(0, sub.octets - len(body))


class ScriptedServer:
    """Listens on 127.0.0.1 (an ephemeral port); serves each connection with a ServerConnection
    and a ScriptedBroker in a thread of its own."""

    def __init__(self, **connection_options) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.options = connection_options
        self.received: list[bytes] = []  # per connection: every octet the client sent
        self.brokers: list[ScriptedBroker] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(client, len(self.received)), daemon=True)
            self.received.append(b"")
            self.brokers.append(ScriptedBroker())
            self._threads.append(t)
            t.start()

    def _serve(self, client: socket.socket, index: int) -> None:
        client.settimeout(0.2)
        conn = None
        broker = self.brokers[index]
        try:
            header = b""
            while len(header) < 8 and not self._stop.is_set():
                try:
                    data = client.recv(8 - len(header))
                except socket.timeout:
                    continue
                if not data:
                    return
                header += data
            self.received[index] += header
            conn = ServerConnection({"product": "warren test"}, **self.options)
            client.sendall(b"".join(bytes(p) for p in conn.data_to_send()))
            while not self._stop.is_set() and not conn.is_closed:
                try:
                    data = client.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                self.received[index] += data
                conn.receive_data(data)
                while (e := conn.next_event()) is not None:
                    broker.handle(conn, e)
                out = b"".join(bytes(p) for p in conn.data_to_send())
                if out:
                    client.sendall(out)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.errors.append(e)
        finally:
            client.close()

    def close(self) -> None:
        self._stop.set()
        self._accept.join(5)
        for t in self._threads:
            t.join(5)
        self.sock.close()


# What the qpid.messaging client does in the fixture and the live test (Python 2.7).
QPID_SCRIPT = r"""
import sys
from qpid.messaging import Connection, Message
conn = Connection("127.0.0.1:%s" % sys.argv[1], username="guest", password="guest", sasl_mechanisms="PLAIN")
conn.open()
ssn = conn.session()
snd = ssn.sender("warren-q; {create: always}")
snd.send(Message(content=u"hello", subject="greeting", properties={"k": 1}, correlation_id="c-1", durable=True))
rcv = ssn.receiver("warren-q")
m = rcv.fetch(timeout=10)
ssn.acknowledge()
print("%r %r %r %r %r" % (m.content, m.subject, m.properties.get("k"), m.correlation_id, m.durable))
ssn.close()
conn.close()
"""


def capture_fixture(path) -> bytes:  # pragma: no cover - run by hand to refresh the fixture
    """Run QPID_SCRIPT against a ScriptedServer and write what the client sent to ``path``."""
    from tests.qpid_python import require_qpid_python

    qp = require_qpid_python()
    server = ScriptedServer()
    try:
        result = qp.run(QPID_SCRIPT, timeout=60, args=[str(server.port)])
        assert result.returncode == 0, result.stderr
    finally:
        server.close()
    data = server.received[0]
    with open(path, "wb") as f:
        f.write(data)
    return data
