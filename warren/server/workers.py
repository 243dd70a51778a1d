"""Both cores: a supervisor process and N worker processes, each worker owning whole vhosts.

Why this shape: Warren's broker state is plain Python objects on one event loop, and
CPython 3.11 runs one thread of Python at a time, so a second core needs a second process.
Virtual hosts share nothing but the user list (queues, exchanges, bindings, policies are per
vhost), so processes that own disjoint vhosts need no coordination at all: each worker is an
ordinary Warren (``Server``) with its own event loop, its own data folder
(``<data>/workers/<i>``) and only its own vhosts. The owner of a vhost is fixed by its name
(``owner_of``), so a restart with the same ``--workers`` finds every vhost's data again.

The supervisor listens on the AMQP port and runs each new connection's handshake with the
sans-IO core up to connection.open, which names the vhost; then it hands the socket and the
octets received so far to the owning worker (handoff.py) and forgets the connection. From
then on the client talks to the worker directly: the supervisor carries no traffic (but TLS's).

AMQP 0-10 (Qpid's qpid.messaging) is handed over the same way: the supervisor runs its own
handshake (warren/protocol/amqp0_10/connection.py) to connection.open, and a client that names no
vhost (qpid.messaging names none) gets the supervisor's default, which the record carries so the
worker's replay opens the same one. A TLS connection cannot be handed over (its session lives
in our OpenSSL objects): the supervisor ends TLS, runs the same handshake, hands the worker one
end of a socket pair and relays the plaintext (relay.py; docs/security.md).

With ``--worker-mode queues`` (experimental) every worker serves every vhost instead and owns
some of its queues (warren/spread): the supervisor deals connections out in turn, either
protocol family's, and makes a socket pair per pair of workers (their links; docs/performance.md,
"One vhost over worker processes").
Each worker has its own HTTP API port (``--http-port`` + i; all ephemeral with 0), listed in
the ready file. The memory budget and the memory watermark are split evenly between workers.
A worker that dies takes the supervisor down with it (and the others: fail whole, restart
whole); the workers stop when the supervisor goes, even on kill -9 (their hand-over channel
closes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from warren.access import AccessControl
from warren.access import FILE_NAME as ACCESS_FILE_NAME
from warren.access.login_throttle import LoginThrottle
from warren.access.login import log_in, unknown_vhost, vhost_of_hostname
from warren.broker.broker import Broker
from warren.broker.connection import client_name
from warren.broker.policies import FILE_NAME
from warren.config import Config
from warren.errors import AMQPError, ConnectionAccessRefused, NotAllowed
from warren.management.parameters import GLOBAL_FILE_NAME, ParameterStore
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.amqp0_10 import events as events_0_10
from warren.protocol.amqp0_10.connection import ServerConnection as ServerConnection0_10
from warren.protocol.amqp0_10.session import CLOSE as CLOSE_0_10
from warren.protocol.events import ConnectionClosed, Method
from warren.protocol.amqp1_0 import events as events_1_0
from warren.protocol.amqp1_0.connection import ServerConnection as ServerConnection1_0
from warren.protocol.header import HEADER_SIZE, NEED_MORE, PREFERRED_HEADER, read_header
from warren.server.handoff_records import (
    FAILED_LOGIN, RECORD_MAX, Relayed, pack_failed_login, pack_handoff, pack_relayed, unpack_failed_login,
)
from warren.server.handshake import default_vhost, handshake_pending, peer_name, protocol_connection, setup_failed
from warren.server.handshake import stage as handshake_stage
from warren.server.limits import HandshakeGate, raise_open_file_limit
from warren.server.loops import new_event_loop
from warren.broker.ownership import PLACEMENT, check_layout, place
from warren.server.relay import Relay
from warren.server.tls import TlsAmqpListener, TlsContexts, TlsError, session_of
from warren.spec import amqp0_9_1 as spec

__all__ = ["Supervisor", "owner_of"]

log = logging.getLogger("warren.workers")

WORKER_START_TIMEOUT_S = 60.0
RUN_DIR_NOTE = "workers-run-dir"  # in the data folder: the run folder (in /tmp) of the running supervisor
_START_OK = spec.ConnectionStartOk.INDEX
_OPEN = spec.ConnectionOpen.INDEX


def owner_of(vhost: str, workers: int, placement: int = PLACEMENT) -> int:
    """The worker that owns a vhost: fixed by its name, so it never moves between restarts
    (ownership.py: the data folder's rule)."""
    return place(vhost, vhost, workers, placement)


def clear_stale_run_dir(data_dir: Path) -> None:
    """Remove the run folder (the workers' sockets and settings, in /tmp) of a supervisor that
    was killed on this data folder before it could (kill -9, a crash). Only the folder the data
    folder's note names, only one of ours by its name, and only now: this process holds the data
    folder's lock (server.lock_data_dir), so the supervisor that made it is gone."""
    note = data_dir / RUN_DIR_NOTE
    try:
        old = Path(note.read_text().strip())
    except OSError:
        return
    if old.name.startswith("warren-workers-") and old.parent == Path(tempfile.gettempdir()) and old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        log.info("removed %s, the run folder of a supervisor that did not stop cleanly", old)
    note.unlink(missing_ok=True)


class Worker:
    def __init__(self, index: int, vhosts: tuple[str, ...], run_dir: Path) -> None:
        self.index = index
        self.vhosts = vhosts
        self.socket_path = run_dir / f"worker-{index}.sock"
        self.ready_file = run_dir / f"worker-{index}.json"
        self.proc: subprocess.Popen | None = None
        self.channel: socket.socket | None = None
        self.http_port: int | None = None
        self.prometheus_port: int | None = None
        self.peer_fds: dict[int, int] = {}  # --worker-mode queues: the other worker -> our end's descriptor

    def hand_over(self, sock, received: bytes, peer, vhost: str, relayed: Relayed | None = None) -> None:
        fd = os.dup(sock.fileno())
        record = (pack_handoff(str(peer[0]), int(peer[1]), received, vhost) if relayed is None
                  else pack_relayed(relayed, vhost, received))
        try:
            socket.send_fds(self.channel, [record], [fd])
        finally:
            os.close(fd)  # the worker has its own descriptor now


class Greeter(asyncio.Protocol):
    """One new client connection, until its connection.open names the vhost.

    A connection that ends here (refused, timed out, gone) is logged as the single-process
    server logs it (warren/server/connection.py ``_log_close``, the adapters' ``fail``): a
    "connection error on PEER user=... vhost=-: CODE TEXT (why)" line for a refusal and one
    "connection closed: ..." line, so an operator's log reads the same with or without workers.
    A handed-over connection's close line is its worker's."""

    def __init__(self, supervisor: "Supervisor") -> None:
        self.sup = supervisor
        self.transport = None
        self.peer = None
        self.conn: ServerConnection | ServerConnection0_10 | None = None
        self.received = bytearray()
        self._timer = None
        self._gated = False  # counted by the supervisor's HandshakeGate (limits.py) until handed over
        # for the close line: who (the login's user name), the client's properties, since when, why
        self.username: str | None = None
        self.client_properties: dict = {}
        self._started = time.monotonic()
        self._close_reason: str | None = None
        self._eof = False
        self._handed_over = False
        self._refused_at_accept = False
        self.tls = None  # on the TLS port: its tls.TlsSession (the EXTERNAL login)
        self.relay: Relay | None = None  # a TLS connection after connection.open (relay.py)

    def __str__(self) -> str:
        return f"{peer_name(self.peer)} user={self.username or '-'} vhost=-"

    def connection_made(self, transport) -> None:
        try:
            self._connection_made(transport)
        except Exception as e:  # our bug: closed at once, not left to the handshake deadline
            self.transport = transport
            self._close_reason = setup_failed(self.peer, e)
            transport.abort()

    def _connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.tls = session_of(transport, self.sup.config)
        if not self.sup.handshake_gate.admit(peer_name(self.peer)):
            self._refused_at_accept = True  # logged by the gate
            transport.abort()  # too many sockets short of open: closed at accept (limits.py)
            return
        self._gated = True
        self._timer = self.sup.loop.call_later(self.sup.config.handshake_timeout, self._timeout)

    def eof_received(self) -> None:
        self._eof = True  # returning None lets the transport close itself

    def pause_writing(self) -> None:  # the client reads slower than its worker writes (relay.py)
        if self.relay is not None:
            self.relay.client_cannot_take_more()

    def resume_writing(self) -> None:
        if self.relay is not None:
            self.relay.client_drained()

    def connection_lost(self, exc) -> None:
        if self.relay is not None:
            self.relay.client_closed()
            self.sup.relays.discard(self.relay)
        self._ungate()
        if self._timer is not None:
            self._timer.cancel()
        self.transport = None
        if not self._handed_over and not self._refused_at_accept:
            self._log_close(exc)

    def _log_close(self, exc) -> None:
        reason = self._close_reason
        if reason is None:
            if exc is not None:
                reason = f"socket error: {exc.__class__.__name__}: {exc}"
            elif self._eof:
                reason = "client closed the socket (EOF) without connection.close"
            else:
                reason = f"closed by the broker during the handshake ({handshake_stage(self.received, self.conn)})"
        name = client_name(self.client_properties)
        lived = time.monotonic() - self._started
        log.info("connection closed: %s client=%s lived %.2fs: %s", self, json.dumps(name, ensure_ascii=False),
                 lived, reason, extra={"event": "connection.closed", "peer": peer_name(self.peer),
                                       "user": self.username, "vhost": None, "client": name,
                                       "lived_s": round(lived, 3), "reason": reason})

    def _ungate(self) -> None:
        if self._gated:
            self._gated = False
            self.sup.handshake_gate.done()

    def data_received(self, data: bytes) -> None:
        if self.relay is not None:  # a TLS connection, its worker's now
            self.relay.from_client(data)
            return
        self.received += data
        if len(self.received) > RECORD_MAX:
            log.warning("closing connection from %s: handshake larger than %d octets", peer_name(self.peer),
                        RECORD_MAX)
            self._close_reason = f"handshake larger than {RECORD_MAX} octets"
            self.transport.abort()
            return
        if self.conn is None:
            dialect = read_header(self.received)
            if dialect is NEED_MORE:
                return
            if dialect is None:
                self._refuse_header()
                return
            # the same offer and limits as the single-process server (handshake.py)
            self.conn = protocol_connection(dialect, self.received, self.sup.config,
                                            self.sup.current_server_properties(), self.tls)
            data = bytes(self.received[HEADER_SIZE:])
        self.conn.receive_data(data)
        if type(self.conn) is ServerConnection0_10:
            self._events_0_10()
            return
        if type(self.conn) is ServerConnection1_0:
            self._events_1_0()
            return
        try:
            while (event := self.conn.next_event()) is not None:
                if type(event) is ConnectionClosed:
                    self._write()
                    self.transport.close()
                    return
                if type(event) is Method and event.channel == 0:
                    index = event.method.INDEX
                    if index == _START_OK:
                        self.client_properties = event.method.client_properties or {}
                        self._login(event.method.mechanism, event.method.response)
                    elif index == _OPEN:
                        self._open(event.method.virtual_host)
                        return
        except AMQPError as e:
            self._failed(e)
            return
        self._write()

    def _events_1_0(self) -> None:
        """An AMQP 1.0 handshake up to the client's open: its SASL login checked here (PLAIN,
        EXTERNAL on verified TLS, ANONYMOUS only with --anonymous-user), then the connection goes
        to the worker owning the vhost of open's hostname (``vhost:NAME``, else the default), as
        0-9-1's and 0-10's do (under --worker-mode queues: to the next worker in turn)."""
        try:
            while (event := self.conn.next_event()) is not None:
                kind = type(event)
                if kind is events_1_0.SaslInit:
                    self._login(event.mechanism, event.response)
                elif kind is events_1_0.OpenRequested:
                    self._write()  # our AMQP header after SASL: the client has it before the worker's open
                    self._open(vhost_of_hostname(event.hostname, self.sup.default_vhost))
                    return
                else:  # a protocol error answered by the core, or the client's close
                    self._write()
                    self.sup.loop.call_later(1.0, self._close)
                    return
        except AMQPError as e:
            self._failed(e)
            return
        self._write()

    def _events_0_10(self) -> None:
        """An AMQP 0-10 handshake up to connection.open (the 0-9-1 one is in data_received)."""
        try:
            while (event := self.conn.next_event()) is not None:
                kind = type(event)
                if kind is events_0_10.LoginRequested:
                    self.client_properties = event.client_properties or {}
                    self._login(event.mechanism, event.response)
                elif kind is events_0_10.OpenRequested:
                    self._open(event.virtual_host)
                    return
                elif kind is events_0_10.PeerError:  # answered by the protocol core already
                    log.warning("connection error on %s: %s", self, event.text)
                    self._close_reason = f"{event.text} (connection.close)"
                    self._write()
                    self.sup.loop.call_later(1.0, self._close)
                    return
                elif kind is events_0_10.ConnectionClosed:
                    self._write()
                    self.transport.close()
                    return
        except AMQPError as e:
            self._failed(e)
            return
        self._write()

    def _failed(self, e: AMQPError) -> None:
        """The handshake (either protocol's) raised: refuse now, or after a throttled login's delay."""
        if e.throttle_delay:  # a throttled failed login (login_throttle.py): the answer waits
            self.transport.pause_reading()
            self.sup.loop.call_later(e.throttle_delay, self._refuse, e)
            return
        self._refuse(e)

    def _login(self, mechanism: str, response: bytes) -> None:
        """The login step the single-process server takes (warren/access/login.py ``log_in``: the
        same mechanisms, throttle, refusals and reasons), against the shared access store, re-read
        first: a user or password may have changed through a worker's HTTP API (a stat)."""
        sup = self.sup
        sup.access.refresh()
        start_ok = type(self.conn) is ServerConnection  # 0-9-1: connection.start's offer; 0-10, 1.0: SASL's
        self.username = log_in(sup.access, sup.login_throttle, mechanism, response,
                               self.peer[0] if self.peer else None,
                               certificate=self.tls.login if self.tls is not None else None,
                               offered=None if start_ok else self.conn.mechanisms,
                               start_offer=self.conn.mechanisms if start_ok else None,
                               anonymous_user=sup.config.anonymous_user)
        self.conn.accept_login()

    def _open(self, vhost: str) -> None:
        self.sup.access.refresh()  # a vhost created since (through a worker's HTTP API)
        worker = self.sup.owner(vhost)
        if worker is None:
            self._refuse(unknown_vhost(vhost, self.username))
            return
        if self.tls is not None:
            self._relay(worker, vhost)
            return
        self.transport.pause_reading()  # what follows stays in the socket for the worker
        sock = self.transport.get_extra_info("socket")
        try:
            worker.hand_over(sock, bytes(self.received), self.peer, vhost)
        except OSError as e:
            log.error("could not hand the connection from %s to worker %d: %s", self, worker.index, e)
            self._close_reason = f"could not hand it to worker {worker.index}: {e}"
            self.transport.abort()
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._ungate()  # the worker counts it from here until its open-ok
        self._handed_over = True  # its close line will be the worker's
        self.transport.abort()  # closes our descriptor only: the worker holds the connection now

    def _relay(self, worker: Worker, vhost: str) -> None:
        """A TLS connection at connection.open: the worker gets one end of a socket pair and the
        client's octets so far, we relay the rest (relay.py)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        local = self.transport.get_extra_info("sockname") or ("", 0)
        relayed = Relayed((str(self.peer[0]), int(self.peer[1])), (str(local[0]), int(local[1])), self.tls)
        try:
            worker.hand_over(theirs, bytes(self.received), self.peer, vhost, relayed)
        except OSError as e:
            ours.close()
            log.error("could not hand the TLS connection from %s to worker %d: %s", self, worker.index, e)
            self._close_reason = f"could not hand it to worker {worker.index}: {e}"
            self.transport.abort()
            return
        finally:
            theirs.close()  # the worker has its own descriptor now
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._ungate()
        self._handed_over = True  # its close line will be the worker's
        self.relay = Relay(self.sup.loop, self.transport)
        self.sup.relays.add(self.relay)
        self.relay.start(ours)

    def _refuse(self, error: AMQPError) -> None:
        if self.transport is None:
            return  # gone while a throttled answer waited
        detail = error.log_detail  # what the client is not told (why a login failed)
        log.warning("connection error on %s: %d %s%s", self, error.reply_code, error.reply_text,
                    f" ({detail})" if detail else "")
        self._close_reason = error.close_reason
        if type(self.conn) is ServerConnection1_0:  # as the 1.0 adapter answers (amqp1_0/adapter.py)
            if isinstance(error, ConnectionAccessRefused):
                self.conn.refuse_login()
            else:
                self.conn.refuse_open("amqp:not-found" if isinstance(error, NotAllowed) else "amqp:unauthorized-access",
                                      error.text)
        elif type(self.conn) is ServerConnection0_10:  # as the 0-10 adapter answers (amqp0_10/adapter.py)
            if isinstance(error, ConnectionAccessRefused):
                self.conn.refuse_login()
            else:
                self.conn.close_connection(CLOSE_0_10.INVALID_PATH if isinstance(error, NotAllowed)
                                           else CLOSE_0_10.CONNECTION_FORCED, error.text)
        else:
            self.conn.close_connection(error.reply_code, error.reply_text, error.class_id, error.method_id)
        self._write()
        self.sup.loop.call_later(1.0, self._close)

    def _refuse_header(self) -> None:
        log.info("refused protocol header %r from %s", bytes(self.received[:8]), peer_name(self.peer))
        self._close_reason = f"not an AMQP protocol header: {bytes(self.received[:8])!r}"
        if self.received[:1] == b"\x16":  # a TLS handshake record (ClientHello)
            self._close_reason += " (a TLS client on the plain AMQP port: use the TLS port, --tls-port)"
        self.transport.write(PREFERRED_HEADER)
        self.transport.close()

    def _write(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            data = self.conn.data_to_send() if self.conn is not None else []
            if data:
                self.transport.write(b"".join(bytes(d) for d in data))

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _timeout(self) -> None:
        """The handshake deadline (handshake.py) passed before the hand-over: drop the client."""
        self._timer = None
        if self.transport is None:
            return
        if handshake_pending(self.conn):
            stage = handshake_stage(self.received, self.conn)
            log.warning("closing connection from %s: handshake not completed in %gs (%s)", peer_name(self.peer),
                        self.sup.config.handshake_timeout, stage)
            self._close_reason = f"handshake not completed in {self.sup.config.handshake_timeout:g}s ({stage})"
        self.transport.abort()  # a refused client that never answered our close goes too


class Supervisor:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.loop: asyncio.AbstractEventLoop | None = None
        n = config.workers
        # the data folder's worker count, mode and placement rule (LayoutMismatch if another's)
        self.placement = check_layout(config.data_dir, n, config.worker_mode)
        clear_stale_run_dir(config.data_dir)
        self.run_dir = Path(tempfile.mkdtemp(prefix="warren-workers-"))
        (config.data_dir / RUN_DIR_NOTE).write_text(str(self.run_dir))
        # the one access store (users, vhosts, permissions) of the supervisor and every worker
        config.access_file = config.access_file or config.data_dir / ACCESS_FILE_NAME
        self.access = AccessControl.for_config(config)
        for v in config.vhosts:
            self.access.ensure_vhost(v)
        # --definitions FILE: users, vhosts, permissions, limits and policies here, before any
        # worker starts (they are shared); each vhost's objects by the worker that owns it
        try:
            self.definitions = self._load_shared_definitions() if config.definitions is not None else None
        except RuntimeError:
            self.run_dir.rmdir()
            raise
        owned: list[list[str]] = [[] for _ in range(n)]
        self.spread = config.worker_mode == "queues"  # every worker serves every vhost (warren/spread)
        for info in self.access.vhosts():
            for i in (range(n) if self.spread else (owner_of(info.name, n, self.placement),)):
                owned[i].append(info.name)
        self._next_worker = 0  # --worker-mode queues: connections are dealt out in turn
        # every worker is started: a vhost created at run time goes to its owner by name
        self.workers = [Worker(i, tuple(owned[i]), self.run_dir) for i in range(n)]
        # the node's global parameters (cluster_name, announced in connection.start), shared
        # with the workers, which may change them through their HTTP APIs
        self.global_parameters = ParameterStore(None, config.data_dir / GLOBAL_FILE_NAME)
        self._properties_broker = Broker((), access=AccessControl())
        self.worker_died = False  # a worker exited by itself: the node stops, with status 1
        self._global_parameters_read()
        # the vhost of a 0-10 connection.open that names none, as the single-process server's
        self.default_vhost = default_vhost(config)
        # the handshake happens here: its limits too (limits.py, login_throttle.py)
        self.handshake_gate = HandshakeGate.for_config(config, raise_open_file_limit())
        self.login_throttle = LoginThrottle.for_config(config)
        self._stop: asyncio.Event | None = None
        self._listener: asyncio.AbstractServer | None = None  # the AMQP port, bound in run()
        self.port = config.port  # the AMQP port it listens on (the ephemeral one with --port 0)
        # AMQP over TLS: the TLS ends here and the plaintext is relayed to the workers (relay.py)
        self.tls: TlsContexts | None = None
        self.tls_listener: TlsAmqpListener | None = None
        self.tls_port: int | None = None  # the port it listens for AMQP over TLS on, bound in run()
        self.relays: set[Relay] = set()  # TLS connections being relayed
        self._stop_deadline: float | None = None  # when a worker still running at the stop is killed

    def _load_shared_definitions(self) -> dict:
        """Import the shared part of the definitions file (warren/management/definitions.py);
        the document, for the workers' parts. RuntimeError (a start-up error) if it fails."""
        from warren.management.definitions import DefinitionsError, import_shared_definitions, read_definitions_file
        c = self.config
        try:
            doc = read_definitions_file(c.definitions)
        except DefinitionsError as e:
            raise RuntimeError(f"cannot load definitions: {e}") from None
        try:
            import_shared_definitions(self.access, c.policy_file or c.data_dir / FILE_NAME, doc)
        except DefinitionsError as e:
            raise RuntimeError(f"cannot load definitions: {c.definitions}: {e}") from None
        # each worker imports the objects of the vhosts it owns (vhosts_part): one in a vhost that
        # does not exist would belong to no worker and vanish, where one process refuses the file
        known = {v.name for v in self.access.vhosts()}
        for key, what in (("parameters", "parameter {component}/{name}"), ("exchanges", "exchange '{name}'"),
                          ("queues", "queue '{name}'"), ("bindings", "binding of '{destination}' to '{source}'")):
            for item in doc.get(key) or ():
                vhost = item.get("vhost", "/") if isinstance(item, dict) else "/"
                if vhost not in known:
                    name = what.format_map({k: item.get(k) for k in ("component", "name", "destination", "source")})
                    raise RuntimeError(f"cannot load definitions: {c.definitions}: {name}: vhost '{vhost}' "
                                       "does not exist")
        log.info("definitions loaded from %s: users, vhosts, permissions, limits and policies; each vhost's "
                 "parameters, exchanges, queues and bindings go to its worker", c.definitions)
        return doc

    def _worker_definitions(self, w: Worker) -> Path:
        """The part of the definitions file worker ``w`` imports at its start: its vhosts' objects."""
        from warren.management.definitions import vhosts_part
        path = self.run_dir / f"worker-{w.index}-definitions.json"
        path.write_text(json.dumps(vhosts_part(self.definitions, w.vhosts)))
        return path

    def owner(self, vhost: str) -> Worker | None:
        """The worker serving ``vhost``, None if no such vhost exists (the access store's)."""
        if self.access.vhost(vhost) is None:
            return None
        if self.spread:  # any worker serves any vhost: in turn
            self._next_worker = (self._next_worker + 1) % len(self.workers)
            return self.workers[self._next_worker]
        return self.workers[owner_of(vhost, len(self.workers), self.placement)]

    # --- workers -----------------------------------------------------------------------------

    def _worker_settings(self) -> Path:
        """Every setting of the supervisor as a TOML file for its workers (config_sources.py), so an
        option reaches them with no code here; their command line below overrides what differs."""
        from warren.config_sources import to_toml
        path = self.run_dir / "worker-settings.toml"
        path.write_text(to_toml(dataclasses.replace(self.config, workers=1, ready_file=None), hide=()))
        return path

    def _reopen_logs(self) -> None:
        """SIGHUP (logrotate): reopen our log file, reload the TLS certificates (new TLS
        connections use them, open ones keep theirs) and pass the signal on to the workers."""
        from warren.server.logs import reopen
        reopen()
        if self.tls is not None:
            self.tls.reload()
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.send_signal(signal.SIGHUP)

    def current_server_properties(self) -> dict:
        """connection.start's properties, with the node's cluster_name as a worker last set it
        (a stat of global_parameters.json per connection; read again when it changed)."""
        if self.global_parameters.refresh_global():
            self._global_parameters_read()
        return self.server_properties

    def _global_parameters_read(self) -> None:
        name = self.global_parameters.global_parameters.get("cluster_name")
        self._properties_broker.cluster_name = name if isinstance(name, str) and name else "warren"
        self.server_properties = self._properties_broker.server_properties()

    def _worker_args(self, w: Worker) -> list[str]:
        c = self.config
        n = c.workers
        http = -1 if c.http_port < 0 else (0 if c.http_port == 0 else c.http_port + w.index)
        args = [sys.executable, "-m", "warren", "serve", "--config", str(self._worker_settings()),
                "--host", c.host, "--port", str(self.port),
                "--tls-port", str(self.tls_port if self.tls_port is not None else -1),  # for their APIs' listener lists
                "--data-dir", str(c.data_dir / "workers" / str(w.index)),
                "--handoff-socket", str(w.socket_path), "--ready-file", str(w.ready_file),
                "--policy-file", str(c.policy_file or c.data_dir / FILE_NAME),
                "--access-file", str(c.access_file),
                "--global-parameters-file", str(self.global_parameters.global_path),
                "--heartbeat", str(c.heartbeat), "--handshake-timeout", str(c.handshake_timeout),
                "--frame-max", str(c.frame_max),
                "--channel-max", str(c.channel_max), "--fsync" if c.fsync else "--no-fsync",
                "--memory-budget", str(c.paging_budget() // n),
                "--memory-high-watermark", str(c.memory_high_watermark / n if c.memory_high_watermark < 1
                                               else c.memory_high_watermark // n),
                "--disk-free-limit", str(c.disk_free_limit),
                "--queue-flow-high", str(c.queue_flow_high), "--queue-flow-high-bytes", str(c.queue_flow_high_bytes),
                "--loop", c.loop, "--http-port", str(http), "--log-level", c.log_level,
                "--http-header-timeout", str(c.http_header_timeout), "--http-body-timeout", str(c.http_body_timeout),
                "--http-max-body-size", str(c.http_max_body_size)]
        if c.http_host:
            args += ["--http-host", c.http_host]
        # Prometheus metrics: each worker is a node of its own, on port + i (as the HTTP API)
        prometheus = -1 if c.prometheus_port < 0 else (0 if c.prometheus_port == 0 else c.prometheus_port + w.index)
        args += ["--prometheus-port", str(prometheus)]
        for v in w.vhosts:
            args += ["--vhost", v]
        if self.definitions is not None:  # its vhosts' part of --definitions (the shared part is loaded)
            args += ["--definitions", str(self._worker_definitions(w))]
        if self.spread:
            args += ["--worker-mode", "queues", "--worker-index", str(w.index),
                     "--worker-placement", str(self.placement)]
            for peer, fd in sorted(w.peer_fds.items()):
                args += ["--peer-fd", f"{peer}:{fd}"]
        return args

    def _link_workers(self) -> list:
        """--worker-mode queues: one socket pair per pair of workers (warren/spread/links.py); each
        worker inherits its ends. Returns every descriptor made, which the supervisor closes once
        the workers have theirs."""
        made = []
        for w in self.workers:
            w.peer_fds = {}
        if not self.spread:
            return made
        for a in self.workers:
            for b in self.workers[a.index + 1:]:
                sa, sb = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                made += [sa, sb]
                a.peer_fds[b.index] = sa.fileno()
                b.peer_fds[a.index] = sb.fileno()
        return made

    def _start_workers(self) -> None:
        links = self._link_workers()
        try:
            for w in self.workers:
                w.proc = subprocess.Popen(self._worker_args(w), stdin=subprocess.DEVNULL,
                                          pass_fds=tuple(w.peer_fds.values()))
        finally:
            for sock in links:  # the workers hold their own ends now
                sock.close()
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        for w in self.workers:
            while not w.ready_file.exists():
                if w.proc.poll() is not None:
                    raise RuntimeError(f"worker {w.index} exited with {w.proc.returncode} while starting")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {w.index} did not start in {WORKER_START_TIMEOUT_S:.0f}s")
                time.sleep(0.02)
            ready = json.loads(w.ready_file.read_text())
            w.http_port = ready.get("http_port")
            w.prometheus_port = ready.get("prometheus_port")
            w.channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            w.channel.connect(str(w.socket_path))
            w.channel.settimeout(5.0)  # a hand-over is a few KB to a local worker; never block for long
            self.loop.add_reader(w.channel.fileno(), self._from_worker, w)
        # one login throttle for the node: each process tells the others what it counts (handoff.py)
        self.login_throttle.on_failure = self._tell_failed_login

    def _from_worker(self, w: Worker) -> None:
        """A record from worker ``w`` on its hand-over channel: a failed login it counted. One
        per call (the channel has a time-out: a second recv could wait for it)."""
        try:
            record = w.channel.recv(RECORD_MAX, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            record = b""
        if not record:  # the worker closed its end: it is stopping (_watch_workers sees to it)
            self.loop.remove_reader(w.channel.fileno())
            return
        if record[:1] == FAILED_LOGIN:
            host = unpack_failed_login(record)
            self.login_throttle.count_elsewhere(host)
            self._tell_failed_login(host, skip=w)

    def _tell_failed_login(self, host: str, skip: Worker | None = None) -> None:
        record = pack_failed_login(host)
        for w in self.workers:
            if w is not skip and w.channel is not None:
                try:
                    w.channel.send(record)
                except OSError as e:
                    log.warning("could not tell worker %d of a failed login from %s: %s", w.index, host, e)

    def _signal_workers(self, sig) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.send_signal(sig)

    def _stop_workers(self, sig=signal.SIGTERM) -> None:
        """Stop what still runs (``_serve`` stopped the workers already unless they failed to
        start), killing a worker that outlives the shutdown time-out; close the channels."""
        self._signal_workers(sig)
        deadline = self._stop_deadline or time.monotonic() + self.config.shutdown_timeout + 10
        for w in self.workers:
            if w.proc is None:
                continue
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop in time; killing it", w.index)
                w.proc.kill()
                w.proc.wait()
        for w in self.workers:
            if w.channel is not None:
                if self.loop is not None and not self.loop.is_closed():
                    self.loop.remove_reader(w.channel.fileno())
                w.channel.close()
                w.channel = None

    def _watch_workers(self) -> None:
        if self._stop.is_set():  # we are stopping them: their exits are ours (_stop_workers_serving)
            return
        for w in self.workers:
            if w.proc.poll() is not None:
                log.critical("worker %d (pid %d) exited with %s; stopping", w.index, w.proc.pid, w.proc.returncode)
                self.worker_died = True
                self._stop.set()
                return
        self.loop.call_later(0.5, self._watch_workers)

    # --- life cycle --------------------------------------------------------------------------

    async def _serve(self) -> None:
        c = self.config
        self._stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        self.loop.add_signal_handler(signal.SIGHUP, self._reopen_logs)
        # connection.start announces the HTTP API that sees the default vhost (as the ready file does)
        self._properties_broker.http_port = self.workers[owner_of(self.default_vhost, len(self.workers),
                                                                  self.placement)].http_port
        self.server_properties = self._properties_broker.server_properties()
        listener = self._listener
        if listener is not None:
            await listener.start_serving()
        port = self.port
        tls_port = self.tls_port
        if self.tls_listener is not None:  # the workers are up: a TLS connection is relayed to one at its open
            self.tls_listener.serve()
            log.info("Warren listening for AMQP over TLS on %s:%d (relayed to the workers; client certificates: %s)",
                     c.host, tls_port, {"none": "not asked", "peer": "verified if sent", "require": "required"}[c.tls_verify])
        log.info("Warren listening on %s:%s with %d workers: %s", c.host, port if listener is not None else "- (TLS only)",
                 len(self.workers),
                 "; ".join(f"{w.index} (pid {w.proc.pid}): {', '.join(w.vhosts) or '-'}" for w in self.workers))
        if c.ready_file:
            home = self.workers[owner_of(self.default_vhost, len(self.workers), self.placement)]
            tmp = c.ready_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({
                "host": c.host, "port": port if listener is not None else None, "tls_port": tls_port,
                "pid": os.getpid(),
                # the API of the worker that owns the default vhost: the one that sees its queues
                "http_port": home.http_port, "prometheus_port": home.prometheus_port,
                "workers": [{"index": w.index, "pid": w.proc.pid, "vhosts": list(w.vhosts),
                             "http_port": w.http_port, "prometheus_port": w.prometheus_port}
                            for w in self.workers]}))
            tmp.replace(c.ready_file)
        self._watch_workers()
        await self._stop.wait()
        if listener is not None:
            listener.close()
            await listener.wait_closed()
        if self.tls_listener is not None:
            self.tls_listener.close()
            await self.tls_listener.wait_closed()
        await self._stop_workers_serving()

    async def _stop_workers_serving(self) -> None:
        """Stop the workers while our loop runs, so that what they write as they close their
        connections (connection.close) reaches the TLS clients we relay for, then let the relays
        finish. One still running at the time-out is killed by ``_stop_workers``."""
        self._signal_workers(signal.SIGTERM)
        self._stop_deadline = deadline = time.monotonic() + self.config.shutdown_timeout + 10
        while time.monotonic() < deadline and any(w.proc is not None and w.proc.poll() is None for w in self.workers):
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 1.0
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def run(self) -> None:
        c = self.config
        c.data_dir.mkdir(parents=True, exist_ok=True)
        self.loop = new_event_loop(c.loop)
        asyncio.set_event_loop(self.loop)
        try:
            # the AMQP port is bound before the workers start, so that they know it with --port 0:
            # a shovel or federation link to "amqp://" (this broker) connects to it (federation/)
            if c.port >= 0:  # else TLS only (--port -1)
                self._listener = self.loop.run_until_complete(self.loop.create_server(
                    lambda: Greeter(self), c.host, c.port, backlog=1024, reuse_address=True, start_serving=False))
                self.port = self._listener.sockets[0].getsockname()[1]
            if c.tls_port >= 0:  # bound now too: the workers' APIs list it (as the plain one, above)
                try:
                    self.tls = TlsContexts(c)
                except TlsError as e:
                    raise RuntimeError(str(e)) from None
                self.tls_listener = TlsAmqpListener(self.loop, self.tls, lambda: Greeter(self), c.handshake_timeout)
                self.tls_port = self.loop.run_until_complete(self.tls_listener.start(c.host, c.tls_port, serve=False))
            self._start_workers()
            self.loop.run_until_complete(self._serve())
        finally:
            self._stop_workers()
            if self._listener is not None:
                self._listener.close()  # closed already, unless the workers failed to start
            if self.tls_listener is not None:
                self.tls_listener.close()
                self.loop.run_until_complete(self.tls_listener.wait_closed())
            self.loop.close()
            (self.run_dir / "worker-settings.toml").unlink(missing_ok=True)
            for w in self.workers:
                for p in (w.socket_path, w.ready_file, self.run_dir / f"worker-{w.index}-definitions.json"):
                    p.unlink(missing_ok=True)
            try:
                self.run_dir.rmdir()
            except OSError:
                pass
            (self.config.data_dir / RUN_DIR_NOTE).unlink(missing_ok=True)
        if self.worker_died:  # exit 1 as a single process does on a failure (server.py ``run``)
            raise SystemExit(1)
            log.info("shutdown complete")
