"""The inter-node protocol: authenticated links between the nodes of a cluster.

Why: a node answers for the whole cluster (RabbitMQ's nodes ask each other over Erlang
distribution); what it needs of another node it asks over a link. Each node listens on its
cluster port (``--cluster-port``, announced in its member record as ``cluster_port``: the
"clustering" listener of ``/api/overview``) and dials another node when it first needs to send
it something. A node writes to another only over the link it dialled, and reads on the link the
other dialled: requests, answers and one-way messages from one node to another travel one
connection, in the order they were sent.

**Authentication** (the cluster secret, RabbitMQ's Erlang cookie): each side proves it holds the
secret without sending it, over fresh random nonces from both sides, so a recorded exchange
proves nothing later:

1. the dialler sends ``WARREN-NODE 1`` and a JSON line: its node name, the cluster id, its
   nonce, its cluster port (where the listener sends what it sends back; with
   ``--cluster-advertise``, the host and port it advertises);
2. the listener answers a JSON line: its node name, its nonce, and its proof,
   HMAC-SHA256(secret, "listener" | cluster id | dialler's nonce | listener's nonce);
3. the dialler checks it (a listener without the secret is dropped) and sends its own proof,
   HMAC-SHA256(secret, "dialler" | cluster id | listener's nonce | dialler's nonce);
4. the listener checks it and answers ``ok``; a wrong or missing proof, another cluster's id or
   a malformed line is refused, the connection closed and a log line says who (address, the
   node name it gave) and why. The whole handshake is bounded (``HANDSHAKE_TIMEOUT``).

With ``--cluster-tls`` the link runs inside TLS made from the node's own certificate options
(``--tls-cert``, ``--tls-key``, ``--tls-ca``): each side presents its certificate and verifies the
other's against the CA; the secret is still checked inside.

**Records** after the handshake: a 4-octet length and a pickled tuple, as between the worker
processes of one node (warren/spread/links.py): a request ``("q", id, op, args)`` answered by
``("a", id, error, result)``, or a one-way message ``("m", op, args)``. Unlike those, a link between machines unpickles with an allow-list
(``_Restricted``): plain data (tuples, lists, dicts, strings, numbers) and the few classes named
in ``ALLOWED``, nothing else, so even a peer holding the secret cannot make this node run code
by sending a crafted record. An error raised by the handler travels as its class name and text
and is raised again on the asking side as the same ``warren.errors`` class.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import io
import json
import logging
import os
import pickle
import ssl
import struct

from warren import errors as amqp_errors

__all__ = ["NodeLinks", "NodeUnavailable", "ALLOWED", "MAGIC"]

log = logging.getLogger("warren.cluster")

MAGIC = b"WARREN-NODE 1\n"
HANDSHAKE_TIMEOUT = 10.0  # seconds for the whole handshake, either side
ASK_TIMEOUT = 5.0  # seconds a node waits for another's answer (an API list waits that long for a stalled node)
LINE_MAX = 4096  # a handshake line longer than this is refused
RECORD_MAX = 64 * 1024 * 1024
READ_TURN_S = 0.02  # a link's reader hands the loop over at least this often
_LENGTH = struct.Struct(">I")

# the classes a record may carry besides plain data: (module, name)
ALLOWED = frozenset({("warren.management.api.stats", "Ranges"),
                     # what an AMQP field table may hold besides plain data (a stream offset's
                     # timestamp, a decimal): value types whose unpickling runs no code of the peer's
                     ("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta"),
                     ("decimal", "Decimal"),
                     # a 0-10 dtx branch's name and outcome (warren/spread/dtx.py): a tuple, an int
                     ("warren.broker.dtx", "Xid"), ("warren.broker.dtx", "XaStatus")})


class NodeUnavailable(ConnectionError):
    """The other node cannot be reached, refused us, or its link closed before it answered."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a record may not carry {module}.{name}")


def _loads(data: bytes):
    return _Restricted(io.BytesIO(data)).load()


def _proof(secret: str, role: str, cluster_id: str, first: str, second: str) -> str:
    message = "|".join((role, cluster_id, first, second)).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


async def _line(reader: asyncio.StreamReader) -> dict:
    raw = await reader.readline()
    if not raw.endswith(b"\n") or len(raw) > LINE_MAX:
        raise ValueError("no complete handshake line")
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("a handshake line that is not a JSON object")
    return value


def _send_line(writer: asyncio.StreamWriter, value: dict) -> None:
    writer.write(json.dumps(value).encode() + b"\n")


class _Peer:
    """Another node as this one knows it: the link this node dialled to it (everything this node
    sends it goes there, in order), what waits to be written until that link is up, and the
    requests it has not answered yet (its answers come on the link it dialled to this node)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.writer: asyncio.StreamWriter | None = None
        self.dialling: asyncio.Task | None = None
        self.backlog: list[bytes] = []  # records made while the link was being dialled
        self.waiting: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.address: tuple[str, int] | None = None  # where it listens, as its hello said
        self.watching: asyncio.Task | None = None  # ends when our dialled link closes
        self.sent = 0  # octets written to it, and read from it (/api/nodes' cluster_links)
        self.received = 0

    def ready(self) -> bool:
        return self.writer is not None and not self.writer.is_closing()

    def fail_all(self, why: str) -> None:
        waiting, self.waiting = self.waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(NodeUnavailable(why))


class NodeLinks:
    """This node's links: ``start`` listens; ``ask(node, op, *args)`` asks another node and
    ``tell(node, op, *args)`` tells it something that needs no answer.

    Each node writes to another only over the link it dialled to it, and reads what that node
    sends on the link that node dialled: so whatever one node sends another (requests, answers,
    one-way messages) arrives in the order it was sent, which the queues served across nodes
    rely on (a consume's deliveries after its answer, a flush's answer after the deliveries it
    let through: warren/cluster/reach.py).

    ``cluster`` is the ClusterNode (its name, cluster id, secret, and ``members``: where each
    running node listens); the ``handler`` answers the others: ``node_request(node, op, args)``
    (a result, an awaitable of one, or a raised ``AMQPError``), ``node_message(node, op, args)``
    and ``node_lost(node)`` (the link from that node closed: it stopped or died)."""

    def __init__(self, cluster, handler, *, server_ssl: ssl.SSLContext | None = None,
                 client_ssl: ssl.SSLContext | None = None) -> None:
        self.cluster = cluster
        self.handler = handler
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.port: int | None = None
        # (host, port) the other nodes dial this one at, when not this host and ``port``
        # (``--cluster-advertise``): told in the handshake, so answers come back that way too
        self.advertised: tuple[str, int] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._peers: dict[str, _Peer] = {}
        self._answering: set[asyncio.Task] = set()
        self.refused = 0  # connections refused at the handshake (logs, tests)
        self.closed = False

    def _peer(self, node: str) -> _Peer:
        peer = self._peers.get(node)
        if peer is None:
            peer = self._peers[node] = _Peer(node)
        return peer

    @property
    def secret(self) -> str:
        return self.cluster.secret

    # --- listening and answering -------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._accepted, host, port, ssl=self.server_ssl,
                                                  ssl_handshake_timeout=HANDSHAKE_TIMEOUT if self.server_ssl else None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._answering.add(task)
        peer = writer.get_extra_info("peername")
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        try:
            try:
                node = await asyncio.wait_for(self._admit(reader, writer, where), HANDSHAKE_TIMEOUT)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ssl.SSLError) as e:
                self.refused += 1
                log.warning("cluster: refused an inter-node connection from %s: %s", where,
                            "no handshake in time" if isinstance(e, asyncio.TimeoutError) else f"it failed ({e})")
                return
            if node is None:
                return
            await self._read_from(node, reader)
        except asyncio.CancelledError:
            return  # this node is stopping (close): nothing to report
        finally:
            self._answering.discard(task)
            writer.close()

    async def _admit(self, reader, writer, where: str) -> str | None:
        """The listener's side of the handshake: the dialling node's name, or None (refused, logged)."""
        cluster_id = self.cluster.cluster_id
        magic = await reader.readexactly(len(MAGIC))
        claimed = "?"
        try:
            if magic != MAGIC:
                raise ValueError("not Warren's inter-node protocol")
            hello = await _line(reader)
            claimed = str(hello.get("node", "?"))[:100]
            their_nonce = hello.get("nonce")
            if hello.get("cluster_id") != cluster_id:
                raise ValueError(f"another cluster's id ({str(hello.get('cluster_id'))[:40]})")
            if not isinstance(their_nonce, str) or not 32 <= len(their_nonce) <= 128:
                raise ValueError("no nonce")
            nonce = os.urandom(32).hex()
            _send_line(writer, {"node": self.cluster.node_name, "nonce": nonce,
                                "proof": _proof(self.secret, "listener", cluster_id, their_nonce, nonce)})
            await writer.drain()
            answer = await _line(reader)
            expected = _proof(self.secret, "dialler", cluster_id, nonce, their_nonce)
            if not isinstance(answer.get("proof"), str) or not hmac.compare_digest(answer["proof"], expected):
                raise ValueError("a wrong cluster secret" if answer.get("proof") else "no proof of the cluster secret")
        except ValueError as e:
            self.refused += 1
            log.warning("cluster: refused an inter-node connection from %s (node %r): %s", where, claimed, e)
            return None
        _send_line(writer, {"ok": True})
        await writer.drain()
        port, host = hello.get("port"), hello.get("host")
        if isinstance(port, int) and 0 < port < 65536:  # where to send it what we send it (answers)
            if not isinstance(host, str) or not host:
                host = writer.get_extra_info("peername")[0]
            self._peer(claimed).address = (host, port)
        log.info("cluster: node %s linked from %s", claimed, where)
        return claimed

    async def _read_from(self, node: str, reader) -> None:
        """What ``node`` sends on the link it dialled: its requests (answered over ours), its
        answers to ours, its messages; in the order it sent them."""
        why = f"the link from node {node} closed"
        loop = asyncio.get_running_loop()
        turn_ends = loop.time() + READ_TURN_S
        try:
            while not self.closed:
                if loop.time() > turn_ends:
                    # records already buffered are read without a pause: a node that sends a
                    # flood must not keep this node's loop (its lease's renewals) waiting
                    await asyncio.sleep(0)
                    turn_ends = loop.time() + READ_TURN_S
                try:
                    record, size = await self._read_record(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except (pickle.UnpicklingError, ValueError, EOFError, struct.error) as e:
                    why = f"node {node} sent a record this node does not take ({e})"
                    log.error("cluster: %s; closing its link", why)
                    return
                self._peer(node).received += size
                kind = record[0] if isinstance(record, tuple) and record else None
                if kind == "q" and len(record) == 4:
                    _, rid, op, args = record
                    task = asyncio.ensure_future(self._answer(node, op, args))
                    task.add_done_callback(lambda t, rid=rid: self._send_answer(node, rid, t))
                elif kind == "a" and len(record) == 4:
                    self._answered(node, *record[1:])
                elif kind == "m" and len(record) == 3:
                    try:
                        self.handler.node_message(node, record[1], record[2])
                    except Exception:
                        log.exception("cluster: node %s's message %r failed here", node, record[1])
                else:
                    why = f"node {node} sent a record that is neither a request, an answer nor a message"
                    log.error("cluster: %s; closing its link", why)
                    return
        finally:
            self._lost(node, why)

    def _lost(self, node: str, why: str) -> None:
        """The link from ``node`` closed: what it had not answered will not be, the link to it
        is dropped too (a node that comes back is dialled afresh), and the handler hears it."""
        peer = self._peers.get(node)
        if peer is not None:
            if peer.writer is not None:
                peer.writer.close()
                peer.writer = None
            peer.fail_all(why)
        if not self.closed:
            lost = getattr(self.handler, "node_lost", None)
            if lost is not None:
                lost(node)

    async def _answer(self, node: str, op: str, args):
        result = self.handler.node_request(node, op, args)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _send_answer(self, node: str, rid: int, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            if not isinstance(error, amqp_errors.AMQPError):
                log.error("cluster: a request from another node failed", exc_info=(type(error), error,
                                                                                  error.__traceback__))
            record = ("a", rid, amqp_errors.error_record(error, "another node"), None)
        else:
            record = ("a", rid, None, task.result())
        self._send(node, record)

    def _answered(self, node: str, rid: int, error, result) -> None:
        peer = self._peers.get(node)
        fut = peer.waiting.pop(rid, None) if peer is not None else None
        if fut is None or fut.done():
            return
        if error is None:
            fut.set_result(result)
        else:
            fut.set_exception(amqp_errors.error_from_record(error))

    @staticmethod
    async def _read_record(reader):
        (n,) = _LENGTH.unpack(await reader.readexactly(4))
        if n > RECORD_MAX:
            raise ValueError(f"a record of {n} octets")
        return _loads(await reader.readexactly(n)), n + 4

    # --- dialling, asking and telling ------------------------------------------------------------

    async def ask(self, node: str, op: str, *args, timeout: float | None = ASK_TIMEOUT):
        """``op`` run by ``node``: its result, the error it raised, or NodeUnavailable
        (``timeout`` None: as long as the link lasts)."""
        if self.closed:
            raise NodeUnavailable("this node is stopping")
        peer = self._peer(node)
        peer.next_id += 1
        rid = peer.next_id
        fut = asyncio.get_running_loop().create_future()
        peer.waiting[rid] = fut
        self._send(node, ("q", rid, op, args))
        try:
            if timeout is None:
                return await fut
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise NodeUnavailable(f"node {node} did not answer {op} within {timeout:g} s") from None
        finally:
            peer.waiting.pop(rid, None)

    async def drained(self, node: str) -> None:
        """Until what was written to ``node`` is down to the link's buffer limit (a snapshot,
        part by part), or at once if it is not linked."""
        peer = self._peers.get(node)
        if peer is not None and peer.ready():
            try:
                await peer.writer.drain()
            except (ConnectionError, OSError):
                pass  # (its close fails what waits for it)

    def tell(self, node: str, op: str, *args, now: bool = False) -> None:
        """A one-way message to ``node``, after everything sent it before (``now``: the
        workers' links' flag, meaningless here: every record is written at once)."""
        if not self.closed:
            self._send(node, ("m", op, args))

    def _send(self, node: str, record: tuple) -> None:
        data = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
        peer = self._peer(node)
        peer.sent += len(data) + 4
        if peer.ready() and not peer.backlog:
            peer.writer.write(_LENGTH.pack(len(data)) + data)
            return
        peer.backlog.append(_LENGTH.pack(len(data)) + data)
        if peer.dialling is None:
            peer.dialling = asyncio.ensure_future(self._connect(peer))

    async def _connect(self, peer: _Peer) -> None:
        """Dial ``peer`` and write what waited; if it cannot be reached, what waited is dropped
        and its requests fail."""
        try:
            reader, writer = await self._dial(peer)
        except NodeUnavailable as e:
            peer.dialling = None
            peer.backlog.clear()
            peer.fail_all(str(e))
            log.warning("cluster: %s", e)
            if not self.closed:  # not running for us until it writes its record again
                lost = getattr(self.handler, "node_lost", None)
                if lost is not None:
                    lost(peer.node)
            return
        peer.writer, peer.dialling = writer, None
        backlog, peer.backlog = peer.backlog, []
        writer.write(b"".join(backlog))
        peer.watching = asyncio.ensure_future(self._watch(peer, reader, writer))

    async def _watch(self, peer: _Peer, reader, writer) -> None:
        """The other node writes nothing on the link we dialled: its end is read for its close."""
        try:
            while await reader.read(4096):
                pass
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        if peer.writer is writer:
            peer.writer = None
            writer.close()
            peer.fail_all(f"the link to node {peer.node} closed")

    def link_all(self) -> None:
        """Link to every other running node now (RabbitMQ's nodes connect to each other at
        once): a node's death is then seen by every other at once, by its link closing."""
        for node in self.running_peers():
            peer = self._peers.get(node)
            if peer is None or not (peer.ready() or peer.dialling):
                self.tell(node, "hello")

    def status(self) -> list[dict]:
        """RabbitMQ's ``cluster_links`` of this node's ``/api/nodes`` row: one per linked node."""
        out = []
        for node, peer in sorted(self._peers.items()):
            if not peer.ready():
                continue
            sock, there = peer.writer.get_extra_info("sockname"), peer.writer.get_extra_info("peername")
            out.append({"name": node, "peer_addr": there[0], "peer_port": there[1], "sock_addr": sock[0],
                        "sock_port": sock[1],
                        "stats": {"send_bytes": peer.sent, "send_bytes_details": {"rate": 0.0},
                                  "recv_bytes": peer.received, "recv_bytes_details": {"rate": 0.0}}})
        return out

    def running_peers(self) -> list[str]:
        """The other nodes that run (``ClusterNode.running``: not one whose link just closed) and
        announced a cluster port."""
        me, cluster = self.cluster.node_name, self.cluster
        return sorted(name for name, record in list(cluster.members.items())
                      if name != me and cluster.running(name) and record.get("cluster_port"))

    async def _dial(self, peer: _Peer):
        if self.closed:
            raise NodeUnavailable("this node is stopping")
        node = peer.node
        record = self.cluster.members.get(node)
        if record is not None and record.get("cluster_port"):
            host, port = record.get("cluster_host") or record.get("amqp_host") or "127.0.0.1", record["cluster_port"]
        elif peer.address is not None:  # it dialled us before etcd's watch told us where it listens
            host, port = peer.address
        else:
            raise NodeUnavailable(f"node {node} is not running")
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=self.client_ssl,
                                        server_hostname=host if self.client_ssl is not None else None),
                HANDSHAKE_TIMEOUT)
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            raise NodeUnavailable(f"cannot reach node {node} at {host}:{port}: {e or 'no answer in time'}") from None
        try:
            await asyncio.wait_for(self._introduce(node, reader, writer), HANDSHAKE_TIMEOUT)
        except (ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ssl.SSLError) as e:
            writer.close()
            raise NodeUnavailable(f"node {node} at {host}:{port} refused this node's link: "
                                  f"{e or 'no handshake in time'}") from None
        return reader, writer

    async def _introduce(self, node: str, reader, writer) -> None:
        """The dialler's side of the handshake (module doc); ValueError if the other node fails it."""
        cluster_id = self.cluster.cluster_id
        nonce = os.urandom(32).hex()
        writer.write(MAGIC)
        introduction = {"node": self.cluster.node_name, "cluster_id": cluster_id, "nonce": nonce, "port": self.port}
        if self.advertised is not None:
            introduction["host"], introduction["port"] = self.advertised
        _send_line(writer, introduction)
        await writer.drain()
        hello = await _line(reader)
        their_nonce = hello.get("nonce")
        expected = _proof(self.secret, "listener", cluster_id, nonce, str(their_nonce))
        if not isinstance(hello.get("proof"), str) or not hmac.compare_digest(hello["proof"], expected):
            raise ValueError("it does not hold the cluster secret")
        _send_line(writer, {"proof": _proof(self.secret, "dialler", cluster_id, str(their_nonce), nonce)})
        await writer.drain()
        if not (await _line(reader)).get("ok"):
            raise ValueError("no ok")

    async def close(self) -> None:
        flush = getattr(self.handler, "flush", None)
        if flush is not None:
            flush()  # what was batched for other nodes this turn is written before the links close
        self.closed = True
        if self._server is not None:
            self._server.close()
        for peer in list(self._peers.values()):
            if peer.writer is not None:
                peer.writer.close()
            for task in (peer.dialling, peer.watching):
                if task is not None:
                    task.cancel()
            peer.fail_all("this node is stopping")
        self._peers.clear()
        for task in list(self._answering):
            task.cancel()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except asyncio.TimeoutError:
                pass
