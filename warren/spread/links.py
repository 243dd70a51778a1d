"""Links between the worker processes of one node, for one vhost spread over them.

Why: with ``--worker-mode queues`` every worker serves every vhost and owns some of its queues
(``__init__.py``); a worker asks another to apply a definition, or tells it something, over a
link. The supervisor makes one Unix stream socket pair per pair of workers before it starts them
(``socket.socketpair``: nothing listens, nobody else can connect) and passes each worker its ends
as inherited descriptors, ``--peer-fd PEER:FD``.

What travels: records, each a 4-octet length and a pickled tuple. Pickle because both ends are
this program, started by the same supervisor from the same files, and the socket pair admits no
one else; a record is a request ``("q", id, op, args)`` answered by ``("a", id, error, result)``,
or a one-way ``("m", op, args)``. Records to one peer are written once per loop turn (a burst of
them costs one ``send``), and read in the order written: a peer's answers and messages arrive in
the order it sent them, which the definitions rely on (``definitions.py``).

An error raised by a request's handler travels as its class name and text and is
raised again on the asking side as the same ``warren.errors`` class, so a refusal found by the
worker that decides reads to the client exactly as it would in one process.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import pickle
import socket
import struct

from warren import errors as amqp_errors

__all__ = ["PeerLinks", "PeerGone"]

log = logging.getLogger("warren.spread")

_LENGTH = struct.Struct(">I")
RECORD_MAX = 64 * 1024 * 1024  # a record this large is a bug on the other end: the link fails


class PeerGone(ConnectionError):
    """The other worker's end closed: the node is failing (workers.py stops it whole)."""


class _Link(asyncio.Protocol):
    def __init__(self, links: "PeerLinks", peer: int) -> None:
        self.links = links
        self.peer = peer
        self.transport = None
        self.buffer = bytearray()
        self.out: list[bytes] = []
        self._flush_scheduled = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        # known at once: a record the peer wrote before we started may be read (and answered)
        # before ``PeerLinks.start`` resumes from its await
        self.links.links[self.peer] = self

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        pos = 0
        end = len(buf)
        records = []
        while end - pos >= 4:
            (n,) = _LENGTH.unpack_from(buf, pos)
            if n > RECORD_MAX:
                log.critical("link to worker %d: a record of %d octets; closing the link", self.peer, n)
                self.transport.close()
                return
            if end - pos - 4 < n:
                break
            records.append(pickle.loads(memoryview(buf)[pos + 4:pos + 4 + n]))
            pos += 4 + n
        del buf[:pos]
        for record in records:
            self.links._received(self.peer, record)

    def connection_lost(self, exc) -> None:
        self.transport = None
        self.links._lost(self.peer, exc)

    def send(self, record) -> None:
        data = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
        self.out.append(_LENGTH.pack(len(data)))
        self.out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self.out and self.transport is not None:
            self.transport.write(b"".join(self.out))
        self.out.clear()


class PeerLinks:
    """This worker's links to the others: ``request``, ``broadcast`` and ``tell``.

    ``handler`` answers the others: ``handler.peer_request(peer, op, args)`` returns the result
    (or an awaitable of it) or raises an ``AMQPError``; ``handler.peer_message(peer, op, args)``
    takes a one-way message; ``handler.peer_lost(peer)`` hears that a link closed."""

    def __init__(self, index: int, count: int, fds: dict[int, int]) -> None:
        self.index = index
        self.count = count
        self.fds = dict(fds)
        self.links: dict[int, _Link] = {}
        self.handler = None
        self._next_id = 0
        self._waiting: dict[int, tuple[int, asyncio.Future]] = {}
        self.closed = False

    @property
    def peers(self) -> list[int]:
        return sorted(self.links)

    async def start(self, handler) -> None:
        self.handler = handler
        loop = asyncio.get_running_loop()
        for peer, fd in sorted(self.fds.items()):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
            sock.setblocking(False)
            await loop.create_unix_connection(lambda peer=peer: _Link(self, peer), sock=sock)

    def close(self) -> None:
        self.closed = True
        for link in self.links.values():
            link.flush()
            if link.transport is not None:
                link.transport.close()
        for _, fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(PeerGone("the node is stopping"))
        self._waiting.clear()

    # --- asking and telling --------------------------------------------------------------

    def request(self, peer: int, op: str, *args) -> asyncio.Future:
        """Ask ``peer`` to run ``op``: a future of its result (or of the error it raised)."""
        fut = asyncio.get_running_loop().create_future()
        link = self.links.get(peer)
        if link is None or link.transport is None:
            fut.set_exception(PeerGone(f"no link to worker {peer}"))
            return fut
        self._next_id += 1
        self._waiting[self._next_id] = (peer, fut)
        link.send(("q", self._next_id, op, args))
        return fut

    def broadcast(self, op: str, *args, skip: int | None = None) -> asyncio.Future:
        """``request`` of every other worker (but ``skip``): a future of their results, by peer."""
        peers = [p for p in self.peers if p != skip]
        futures = [self.request(p, op, *args) for p in peers]

        async def gather():
            return dict(zip(peers, await asyncio.gather(*futures)))
        return asyncio.ensure_future(gather())

    def tell(self, peer: int, op: str, *args, now: bool = False) -> None:
        """A one-way message to ``peer`` (dropped if its link is gone: the node is stopping).
        Records are written at the end of the loop turn, together; ``now`` writes this one (and
        what waited before it) at once: for what must reach the other worker before anything
        this turn writes to a client can (a connection count before the connection's open-ok)."""
        link = self.links.get(peer)
        if link is not None and link.transport is not None:
            link.send(("m", op, args))
            if now:
                link.flush()

    # --- receiving -----------------------------------------------------------------------

    def _received(self, peer: int, record) -> None:
        kind = record[0]
        if kind == "q":
            _, rid, op, args = record
            try:
                result = self.handler.peer_request(peer, op, args)
            except Exception as e:
                self._answer(peer, rid, e, None)
                return
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(lambda t: self._answer(peer, rid, t.exception(), None if t.exception()
                                                              else t.result()))
            else:
                self._answer(peer, rid, None, result)
        elif kind == "a":
            _, rid, error, result = record
            waiting = self._waiting.pop(rid, None)
            if waiting is None or waiting[1].done():
                return
            if error is None:
                waiting[1].set_result(result)
            else:
                waiting[1].set_exception(amqp_errors.error_from_record(error))
        elif kind == "m":
            _, op, args = record
            try:
                self.handler.peer_message(peer, op, args)
            except Exception:
                log.exception("worker %d's message %s from worker %d failed", self.index, op, peer)

    def _answer(self, peer: int, rid: int, error, result) -> None:
        link = self.links.get(peer)
        if link is None or link.transport is None:
            return
        if error is not None:
            if not isinstance(error, amqp_errors.AMQPError):
                log.error("worker %d: a request from worker %d failed", self.index, peer,
                          exc_info=(type(error), error, error.__traceback__))
            error = amqp_errors.error_record(error, "another worker")
        link.send(("a", rid, error, result))

    def _lost(self, peer: int, exc) -> None:
        self.links.pop(peer, None)
        for rid, (p, fut) in list(self._waiting.items()):
            if p == peer:
                del self._waiting[rid]
                if not fut.done():
                    fut.set_exception(PeerGone(f"the link to worker {peer} closed"))
        if not self.closed and self.handler is not None:
            self.handler.peer_lost(peer)
