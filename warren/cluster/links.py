"""The inter-node protocol: authenticated links between the nodes of a cluster.

Why: a node answers for the whole cluster (RabbitMQ's nodes ask each other over Erlang
distribution); what it needs of another node it asks over a link. Each node listens on its
cluster port (``--cluster-port``, announced in its member record as ``cluster_port``: the
"clustering" listener of ``/api/overview``) and dials another node when it first needs it; the
node that dialled asks, the other answers, on that connection.

**Authentication** (the cluster secret, RabbitMQ's Erlang cookie): each side proves it holds the
secret without sending it, over fresh random nonces from both sides, so a recorded exchange
proves nothing later:

1. the dialler sends ``WARREN-NODE 1`` and a JSON line: its node name, the cluster id, its
   nonce;
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
``("a", id, error, result)``. Unlike those, a link between machines unpickles with an allow-list
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
_LENGTH = struct.Struct(">I")

# the classes a record may carry besides plain data: (module, name)
ALLOWED = frozenset({("warren.management.api.stats", "Ranges")})


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


class _Dialled:
    """A link this node opened to another: requests out, answers in."""

    def __init__(self, node: str, reader, writer) -> None:
        self.node = node
        self.reader = reader
        self.writer = writer
        self.waiting: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.reading: asyncio.Task | None = None

    def fail_all(self, why: str) -> None:
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(NodeUnavailable(why))
        self.waiting.clear()


class NodeLinks:
    """This node's links: ``start`` listens, ``ask(node, op, *args)`` asks another node.

    ``cluster`` is the ClusterNode (its name, cluster id, secret, and ``members``: where each
    running node listens); ``handler.node_request(node, op, args)`` answers the others (a result,
    an awaitable of one, or a raised ``AMQPError``)."""

    def __init__(self, cluster, handler, *, server_ssl: ssl.SSLContext | None = None,
                 client_ssl: ssl.SSLContext | None = None) -> None:
        self.cluster = cluster
        self.handler = handler
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.port: int | None = None
        self._server: asyncio.AbstractServer | None = None
        self._dialled: dict[str, _Dialled] = {}
        self._dialling: dict[str, asyncio.Future] = {}
        self._answering: set[asyncio.Task] = set()
        self.refused = 0  # connections refused at the handshake (logs, tests)
        self.closed = False

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
            await self._answer_records(node, reader, writer)
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
        log.info("cluster: node %s linked from %s", claimed, where)
        return claimed

    async def _answer_records(self, node: str, reader, writer) -> None:
        while not self.closed:
            try:
                record = await self._read_record(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            except (pickle.UnpicklingError, ValueError, EOFError, struct.error) as e:
                log.error("cluster: node %s sent a record this node does not take (%s); closing its link", node, e)
                return
            if not (isinstance(record, tuple) and len(record) == 4 and record[0] == "q"):
                log.error("cluster: node %s sent a record that is not a request; closing its link", node)
                return
            _, rid, op, args = record
            task = asyncio.ensure_future(self._answer(node, op, args))
            task.add_done_callback(lambda t, rid=rid: self._send_answer(writer, rid, t))

    async def _answer(self, node: str, op: str, args):
        result = self.handler.node_request(node, op, args)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _send_answer(self, writer, rid: int, task: asyncio.Task) -> None:
        if writer.is_closing():
            return
        error = task.exception()
        if error is not None:
            if not isinstance(error, amqp_errors.AMQPError):
                log.error("cluster: a request from another node failed", exc_info=(type(error), error,
                                                                                  error.__traceback__))
            record = ("a", rid, amqp_errors.error_record(error, "another node"), None)
        else:
            record = ("a", rid, None, task.result())
        data = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
        writer.write(_LENGTH.pack(len(data)) + data)

    @staticmethod
    async def _read_record(reader):
        (n,) = _LENGTH.unpack(await reader.readexactly(4))
        if n > RECORD_MAX:
            raise ValueError(f"a record of {n} octets")
        return _loads(await reader.readexactly(n))

    # --- dialling and asking -------------------------------------------------------------------

    async def ask(self, node: str, op: str, *args, timeout: float = ASK_TIMEOUT):
        """``op`` run by ``node``: its result, the error it raised, or NodeUnavailable."""
        link = await self._link(node)
        link.next_id += 1
        rid = link.next_id
        fut = asyncio.get_running_loop().create_future()
        link.waiting[rid] = fut
        data = pickle.dumps(("q", rid, op, args), pickle.HIGHEST_PROTOCOL)
        link.writer.write(_LENGTH.pack(len(data)) + data)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise NodeUnavailable(f"node {node} did not answer {op} within {timeout:g} s") from None
        finally:
            link.waiting.pop(rid, None)

    def running_peers(self) -> list[str]:
        """The other nodes that run and announced a cluster port."""
        me = self.cluster.node_name
        return sorted(name for name, record in self.cluster.members.items()
                      if name != me and record.get("state") == "running" and record.get("cluster_port"))

    async def _link(self, node: str) -> _Dialled:
        link = self._dialled.get(node)
        if link is not None and not link.writer.is_closing():
            return link
        pending = self._dialling.get(node)
        if pending is None:
            pending = asyncio.ensure_future(self._dial(node))
            self._dialling[node] = pending
            pending.add_done_callback(lambda _f: self._dialling.pop(node, None))
        return await asyncio.shield(pending)

    async def _dial(self, node: str) -> _Dialled:
        if self.closed:
            raise NodeUnavailable("this node is stopping")
        record = self.cluster.members.get(node)
        if record is None or not record.get("cluster_port"):
            raise NodeUnavailable(f"node {node} is not running")
        host, port = record.get("amqp_host") or "127.0.0.1", record["cluster_port"]
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
        link = _Dialled(node, reader, writer)
        link.reading = asyncio.ensure_future(self._read_answers(link))
        self._dialled[node] = link
        return link

    async def _introduce(self, node: str, reader, writer) -> None:
        """The dialler's side of the handshake (module doc); ValueError if the other node fails it."""
        cluster_id = self.cluster.cluster_id
        nonce = os.urandom(32).hex()
        writer.write(MAGIC)
        _send_line(writer, {"node": self.cluster.node_name, "cluster_id": cluster_id, "nonce": nonce})
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

    async def _read_answers(self, link: _Dialled) -> None:
        why = f"the link to node {link.node} closed"
        try:
            while True:
                record = await self._read_record(link.reader)
                if not (isinstance(record, tuple) and len(record) == 4 and record[0] == "a"):
                    why = f"node {link.node} sent a record that is not an answer"
                    break
                _, rid, error, result = record
                fut = link.waiting.pop(rid, None)
                if fut is None or fut.done():
                    continue
                if error is None:
                    fut.set_result(result)
                else:
                    fut.set_exception(amqp_errors.error_from_record(error))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except (pickle.UnpicklingError, ValueError, EOFError, struct.error) as e:
            why = f"node {link.node} sent a record this node does not take ({e})"
            log.error("cluster: %s; closing its link", why)
        finally:
            if self._dialled.get(link.node) is link:
                del self._dialled[link.node]
            link.writer.close()
            link.fail_all(why)

    async def close(self) -> None:
        self.closed = True
        if self._server is not None:
            self._server.close()
        for link in list(self._dialled.values()):
            link.writer.close()
            link.fail_all("this node is stopping")
            if link.reading is not None:
                link.reading.cancel()
        self._dialled.clear()
        for task in list(self._answering):
            task.cancel()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except asyncio.TimeoutError:
                pass
