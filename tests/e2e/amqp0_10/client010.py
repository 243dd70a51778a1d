"""Drive Warren's sans-IO 0-10 client mode (warren.protocol.amqp0_10.client) over a real socket.

No 0-10 client runs on Python 3, so the suite speaks 0-10 through this: blocking, every wait
bounded, events a wait does not ask for kept for the next one. ``Session`` wraps one attached
session: commands with ``sync`` wait for their completion (or raise ``SessionException`` with
the broker's execution.exception), transfers the broker sends are collected per destination.
"""

from __future__ import annotations

import socket
import time
from collections import deque

from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.client import ClientConnection
from warren.spec import amqp0_10 as spec

TIMEOUT = 5.0
UNLIMITED = 0xFFFFFFFF


class ConnectionLost(Exception):
    pass


class SessionException(Exception):
    """The broker refused a command: ``code`` is the execution.exception's error code."""

    def __init__(self, exc) -> None:
        super().__init__(f"{exc.error_code} {exc.description}")
        self.code, self.description, self.command_id = exc.error_code, exc.description, exc.command_id


class Client010:
    def __init__(self, broker, username: str = "guest", password: str = "guest", *, handshake: bool = True,
                 **kw) -> None:
        self.conn = ClientConnection(username, password, **kw)
        self.sock = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT)
        self.events: deque = deque()
        self.eof = False
        self.sessions: dict[int, "Session"] = {}
        self.flush()
        if handshake:
            self.wait(ev.Opened)

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(b"".join(bytes(d) for d in data))

    def pump(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no event in time; pending: {list(self.events)!r}")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError(f"no event in time; pending: {list(self.events)!r}") from None
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            raise ConnectionLost("the server closed the socket")
        self.conn.receive_data(data)
        while (event := self.conn.next_event()) is not None:
            session = self.sessions.get(getattr(event, "channel", None))
            if session is not None and session.take(event):
                continue
            self.events.append(event)
        self.flush()

    def wait(self, want, timeout: float = TIMEOUT, channel: int | None = None):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if (want(e) if not isinstance(want, type) else isinstance(e, want)) and (
                        channel is None or getattr(e, "channel", None) == channel):
                    del self.events[i]
                    return e
            self.pump(deadline)

    def session(self, channel: int = 1, name: bytes | None = None) -> "Session":
        s = Session(self, channel, name or f"session-{channel}-{id(self)}".encode())
        self.sessions[channel] = s
        self.conn.attach(channel, s.name)
        self.flush()
        self.wait(ev.SessionAttached, channel=channel)
        return s

    def close(self):
        self.conn.close()
        self.flush()
        closed = self.wait(ev.ConnectionClosed)
        self.sock.close()
        return closed

    def __enter__(self) -> "Client010":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if not self.eof and not self.conn.closed and not self.conn.closing:
                self.close()
        except (OSError, TimeoutError, ConnectionLost):
            pass
        finally:
            self.sock.close()


class Message:
    def __init__(self, event) -> None:
        self.id = event.command_id
        self.destination = event.command.destination
        self.acquire_mode = event.command.acquire_mode
        self.body = event.body
        self.delivery = event.header_struct(spec.MessageDeliveryProperties)
        self.properties = event.header_struct(spec.MessageMessageProperties)

    def __repr__(self) -> str:
        return f"<Message #{self.id} {self.destination!r} {self.body!r}>"


class Session:
    def __init__(self, client: Client010, channel: int, name: bytes) -> None:
        self.client, self.channel, self.name = client, channel, name
        self.completed: set[int] = set()  # our command ids the broker completed
        self.results: dict[int, object] = {}
        self.exception = None
        self.incoming: dict[str, deque] = {}
        self.detached = None

    def take(self, event) -> bool:
        """Keep what belongs to this session; False for what the client's wait should see."""
        kind = type(event)
        if kind is ev.Completed:
            self.completed.update(event.ids)
            return True
        if kind is ev.ExecutionResult:
            self.results[event.command_id] = event.value
            return True
        if kind is ev.ExecutionException:
            self.exception = event.exception
            return True
        if kind is ev.Command and event.name == "message.transfer":
            self.incoming.setdefault(event.command.destination, deque()).append(Message(event))
            return True
        if kind is ev.SessionDetached:
            self.detached = event
            return False
        return False

    def _wait_for(self, done, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.exception is not None:
                raise SessionException(self.exception)
            self.client.pump(deadline)
        if self.exception is not None:
            raise SessionException(self.exception)

    def send(self, command, sync: bool = True, timeout: float = TIMEOUT, header=None, body=None):
        """Send a command; with ``sync`` wait for its completion and return its result (or None)."""
        conn = self.client.conn
        if body is not None or header is not None:
            cid = conn.send_command(self.channel, command, sync, header, body if body is not None else b"")
        else:
            cid = conn.send_command(self.channel, command, sync)
        self.client.flush()
        if sync:
            self._wait_for(lambda: cid in self.completed, timeout)
            return self.results.get(cid)
        return cid

    def transfer(self, destination: str, body: bytes, routing_key: str = "", sync: bool = True,
                 delivery: spec.MessageDeliveryProperties | None = None,
                 properties: spec.MessageMessageProperties | None = None, **kw):
        dp = delivery or spec.MessageDeliveryProperties()
        if routing_key:
            dp.routing_key = routing_key
        header = [s for s in (dp, properties) if s is not None]
        return self.send(spec.MessageTransfer(destination=destination, **kw), sync, header=header, body=body)

    def sync(self, timeout: float = TIMEOUT) -> None:
        self.send(spec.ExecutionSync(), True, timeout)

    def subscribe(self, queue: str, destination: str, accept_mode: int = 0, acquire_mode: int = 0,
                  credit: int | None = UNLIMITED, octets: int | None = UNLIMITED, **kw) -> None:
        self.send(spec.MessageSubscribe(queue=queue, destination=destination, accept_mode=accept_mode,
                                        acquire_mode=acquire_mode, **kw), sync=False)
        self.send(spec.MessageSetFlowMode(destination=destination, flow_mode=0), sync=False)
        if octets is not None:
            self.send(spec.MessageFlow(destination=destination, unit=1, value=octets), sync=False)
        if credit is not None:
            self.send(spec.MessageFlow(destination=destination, unit=0, value=credit), sync=False)
        self.sync()

    def get(self, destination: str, timeout: float = TIMEOUT) -> Message:
        q = self.incoming.setdefault(destination, deque())
        self._wait_for(lambda: bool(q), timeout)
        msg = q.popleft()
        self.client.conn.complete(self.channel, msg.id)
        self.client.flush()
        return msg

    def nothing(self, destination: str, wait: float = 0.3) -> bool:
        """True when no transfer for ``destination`` arrives within ``wait`` seconds."""
        q = self.incoming.setdefault(destination, deque())
        try:
            self._wait_for(lambda: bool(q), wait)
        except TimeoutError:
            return True
        return False

    def accept(self, *ids: int, sync: bool = True) -> None:
        from warren.codec.amqp0_10.sets import SequenceSet
        self.send(spec.MessageAccept(transfers=SequenceSet.of(ids)), sync)
