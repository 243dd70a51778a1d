"""Server life cycle: start listening, serve until a signal, shut down gracefully."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import logging
import os
import platform
import signal
import socket
import sys
import time
from pathlib import Path

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from warren import DISTRIBUTION, __version__, other_distributions
from warren.access import AccessControl
from warren.access.login_throttle import LoginThrottle
from warren.broker.limits import BrokerLimits
from warren.broker.broker import TICK, Broker
from warren.broker.durability import MAX_SYNCS_IN_FLIGHT, Durability
from warren.broker.node import name_node
from warren.broker.queue import Queue
from warren.broker.queues.flow_marks import FlowMarks
from warren.config import Config
from warren.management import HttpServer
from warren.http.limits import HttpLimits
from warren.metrics.probes import SYNC_BUCKETS, Histogram
from warren.server.collector import Collector, tune_young_collections
from warren.server.connection import AMQPConnection
from warren.server.flow_control import ResourceAlarms
from warren.server.handoff import HandoffReceiver
from warren.server.limits import HandshakeGate, output_bound, raise_open_file_limit
from warren.server.loops import new_event_loop
from warren.server.pacing import TurnPacer
from warren.server.queue_flow import QueueFlow
from warren.server.tls import TlsAmqpListener, TlsContexts, TlsError
from warren.management.parameters import GLOBAL_CHECK
from warren.server import logs
from warren.store.damage import DamagedFile
from warren.store.fsync_worker import FsyncWorker
from warren.store.node_file import check_node_files
from warren.store.queue_store import QueueStore

__all__ = ["Server", "StartupError", "LISTENERS_FILE", "Listener", "check_listeners", "listeners_of", "lock_data_dir", "run"]

log = logging.getLogger("warren.server")
# How long a connection counts as one the broker is behind after a read of BACKLOG_READ octets
# or more (amqp0_9_1/connection.py): a flooding publisher is read every 10-50 ms (256 KB of
# small messages), so a window much longer than that sees two floods as two at once
BACKLOG_WINDOW = 0.5

LOCK_FILE = "warren.lock"  # in the data folder: held (flock) for the life of the process
# in the data folder while the broker listens: its pid and ports, for `warren ctl` to find it
# (removed at a clean stop; after kill -9 the pid in it is checked)
LISTENERS_FILE = "listeners.json"


class StartupError(Exception):
    """The broker cannot start (port in use, data folder unwritable or locked); ``str()`` is
    one line for the operator, printed without a traceback."""


_held_locks: list = []  # open lock files: the lock lasts as long as the descriptor


def lock_data_dir(data_dir: Path) -> None:
    """Create the data folder if needed and lock it against a second broker (flock on
    LOCK_FILE, released by the kernel when this process ends, even on kill -9). Errors name the
    folder by its absolute path: `--data-dir` is relative to wherever the command ran."""
    shown = data_dir.resolve()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = open(data_dir / LOCK_FILE, "a+")
    except OSError as e:
        raise StartupError(f"data folder {shown} is not usable: {e.strerror or e}") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        lock.close()
        raise StartupError(f"data folder {shown} is not writable")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        if e.errno in (errno.EAGAIN, errno.EACCES):
            raise StartupError(f"data folder {shown} is in use by another warren serve"
                               + (f" (pid {holder})" if holder else "")) from None
        raise StartupError(f"cannot lock data folder {shown}: {e.strerror or e}") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _held_locks.append(lock)


def web_ui_url(host: str, port: int, tls: bool = False) -> str:
    """The address a person opens in a browser: a wildcard listen address becomes this host's name."""
    shown = socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    if ":" in shown:
        shown = f"[{shown}]"  # an IPv6 address in a URL
    return f"{'https' if tls else 'http'}://{shown}:{port}/"


def _listen_error(what: str, host: str, port: int, e: OSError) -> StartupError:
    reason = "port already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
    return StartupError(f"cannot listen for {what} on {host}:{port}: {reason}")


def check_port(what: str, host: str | None, port: int) -> None:
    """StartupError now, before recovery and its log lines, if host:port cannot be bound (the
    listener itself is made later; a port taken in between still fails cleanly there)."""
    problem = _port_problem(host, port)
    if problem is not None:
        raise StartupError(f"cannot listen for {what} on {host or '*'}:{port}: {problem}")


def _port_problem(host: str | None, port: int) -> str | None:
    """Why host:port cannot be bound now ("port already in use", ...), or None if it can."""
    if port <= 0:
        return None  # ephemeral or off
    try:
        addresses = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except socket.gaierror as e:
        return e.strerror or str(e)
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as e:
                return "port already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
    return None


@dataclass(frozen=True)
class Listener:
    """A port `warren serve` will listen on, with the option that moves it."""

    what: str  # for people: "AMQP", "HTTP API and web UI", ...
    flag: str  # the command-line option that sets its port
    host: str | None
    port: int  # 0 = ephemeral, -1 = off


def listeners_of(config: Config) -> list[Listener]:
    """Every fixed port this configuration listens on (a worker listens on no AMQP port: its
    supervisor does; with --workers, worker i serves Prometheus on port + i, workers.py)."""
    c = config
    out = []
    if c.handoff_socket is None:
        out += [Listener("AMQP", "--port", c.host, c.port), Listener("AMQP over TLS", "--tls-port", c.host, c.tls_port)]
    out.append(Listener("HTTP API and web UI", "--http-port", c.http_host or c.host, c.http_port))
    out.append(Listener("Prometheus metrics", "--prometheus-port", c.prometheus_host or c.http_host or c.host,
                        c.prometheus_port))
    return [one for one in out if one.port > 0]


def check_listeners(config: Config) -> None:
    """Every listener checked before any starts: one StartupError naming every port that cannot
    be bound, each with the option that moves it and a free port to move it to (a newcomer's
    first run is often beside RabbitMQ, which holds 5672, 15672 and 15692: one error, not three
    runs that each find the next)."""
    problems: list[tuple[Listener, str]] = []
    taken: dict[int, Listener] = {}
    for one in listeners_of(config):
        if one.port in taken:  # two options on one port: the second bind would fail later
            problems.append((one, f"the same port as {taken[one.port].flag}"))
            continue
        taken[one.port] = one
        problem = _port_problem(one.host, one.port)
        if problem is not None:
            problems.append((one, problem))
    if not problems:
        return
    busy = "; ".join(f"{one.what} on {one.host or '*'}:{one.port} ({one.flag}): {why}" for one, why in problems)
    moves, chosen = [], set(taken)
    for one, why in problems:
        if why.startswith("port already in use") or why.startswith("the same port"):
            free = _free_port_after(one.host, one.port, chosen)
            if free is not None:
                chosen.add(free)
                moves.append(f"{one.flag} {free}")
    hint = (f"; another broker (RabbitMQ?) may hold them: try warren serve {' '.join(moves)} "
            f"(or 0 for any free port, -1 for off; docs/beside-rabbitmq.md)") if moves else ""
    raise StartupError(f"cannot listen: {busy}{hint}")


def _free_port_after(host: str | None, port: int, avoid: set[int], tries: int = 50) -> int | None:
    """The first port above ``port`` that binds now and is not in ``avoid`` (a suggestion only)."""
    for candidate in range(port + 1, min(port + 1 + tries, 65536)):
        if candidate not in avoid and _port_problem(host, candidate) is None:
            return candidate
    return None


class _GroupCommit:
    """One group commit under way (Server._start_sync): its parts not yet done (the queue
    stores' FsyncWorker job, and a pool thread's job for other stores), the queue stores'
    ``SyncWork``, the first error."""

    __slots__ = ("parts", "started", "works", "error")

    def __init__(self, parts: int, started: float) -> None:
        self.parts = parts
        self.started = started
        self.works: list = []
        self.error: BaseException | None = None


class Server:
    def __init__(self, config: Config, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        try:  # a damaged definitions log or node file stops the start with one line (warren/store/damage.py)
            check_node_files(config.data_dir)
            self.durability = Durability(config.data_dir, fsync=config.fsync)
        except DamagedFile as e:
            raise StartupError(str(e)) from None
        self.durability.request_sync = self._request_sync
        self._sync_pending = False
        self._stores_closed = False
        # while a group commit's completion runs (_sync_done): the connections to flush at its end
        self.sync_flushes: list | None = None
        # a light turn that confirmed publishes gives the core away at its end (pacing.py)
        self.pacer = TurnPacer(loop) if config.yield_after_confirms else None
        # 0-9-1 connections that had a read of BACKLOG_READ octets or more lately (emptied every
        # BACKLOG_WINDOW seconds): the broker takes runs of publishes while it is behind several
        # (amqp0_9_1/connection.py)
        self.backlogged: set = set()
        self._backlog_since = 0.0
        self._globals_checked = 0.0  # a worker's last look at the shared global parameters (_tick)
        # threads for the stores the FsyncWorker does not take (stream stores), one per group
        # commit that may be under way at once (durability.py)
        self._sync_pool = ThreadPoolExecutor(max_workers=MAX_SYNCS_IN_FLIGHT, thread_name_prefix="warren-sync")
        # the queue stores' fsyncs (warren/store/fsync_worker.py), and the group commits under way
        self.fsync_worker = FsyncWorker()
        loop.add_reader(self.fsync_worker.fileno(), self._fsyncs_completed)
        # the queue stores' writes, on a thread of their own that passes each group commit on to
        # the FsyncWorker: the writes go on while an fsync stalls
        self.disk_writer = FsyncWorker(then=self.fsync_worker)
        loop.add_reader(self.disk_writer.fileno(), self._writes_completed)
        self._flush_jobs: dict = {}  # a store's flush handed to the disk writer: job -> (store, DeferredWrites)
        self._last_flush_job = 0  # their jobs are numbered -1, -2, ...; group commits' from 1
        self._writer_jobs = 0  # jobs the disk writer took and has not reported
        self.durability.hand_writes = self._hand_writes
        self._commits: dict[int, _GroupCommit] = {}
        # the publishers congested queues hold back; the queues tell it when they drain
        self.queue_flow = QueueFlow()
        # the flow-control marks of every queue (warren/broker/queues/flow_marks.py); 0 turns a mark off
        Queue.flow = FlowMarks(config.queue_flow_high or sys.maxsize, config.queue_flow_high_bytes or sys.maxsize,
                               self.queue_flow)
        # --worker-mode queues: this worker's part of a node whose vhosts are spread (warren/spread)
        self.spread = None
        if config.peer_fds or (config.worker_mode == "queues" and config.handoff_socket is not None):
            from warren.spread import Spread, parse_peer_fds
            self.spread = Spread(None, config.worker_index, len(config.peer_fds) + 1, parse_peer_fds(config.peer_fds),
                                 config.worker_placement)
            self.spread.on_failure = self._spread_failed
        self.broker = Broker(config.vhosts, durability=self.durability, memory_budget=config.paging_budget(),
                             policy_file=config.policy_file, access=AccessControl.for_config(config),
                             directory=self.spread)
        directory = self.broker.directory  # where the queues live (warren/broker/directory.py)
        self.broker.set_consumer_timeout(config.consumer_timeout)
        # limits and abuse (limits.py, warren/broker/limits.py, warren/access/login_throttle.py)
        open_files = raise_open_file_limit()
        self.handshake_gate = HandshakeGate.for_config(config, open_files)
        self.output_max = output_bound(config)
        self.broker.limits = BrokerLimits.for_config(config)
        # the node's and users' connection limits count every worker's (--worker-mode queues)
        self.broker.limits.counted_elsewhere = directory.counted_elsewhere
        self.broker.limits.count_changed = directory.count_changed
        self.broker.login_throttle = LoginThrottle.for_config(config)
        log.info("limits: %d open files, %s unauthenticated connections at once, connections %s, output "
                 "per client %d octets (docs/security.md)", open_files, self.handshake_gate.limit or "any",
                 config.connection_max or "unlimited", self.output_max)
        self.alarms = ResourceAlarms(self, config.data_dir, config.disk_free_limit, config.memory_limit())
        directory.alarms = self.alarms  # ours block the other workers' publishers too, theirs ours
        self.connections: set[AMQPConnection] = set()
        self._listener: asyncio.AbstractServer | None = None
        self._listeners_file: Path | None = None  # LISTENERS_FILE, once written
        self._stop = asyncio.Event()
        self._signals = 0
        self._tick_handle: asyncio.TimerHandle | None = None  # Broker.tick, every TICK seconds
        self.http: HttpServer | None = None  # the HTTP API (warren/management), unless --http-port -1
        self.collector = Collector()  # full garbage collections (warren/server/collector.py)
        self.handoff: HandoffReceiver | None = None  # a worker's connections from the supervisor
        self.tls: TlsContexts | None = None  # TLS contexts (tls.py), when a TLS port or HTTPS is on
        self.tls_listener: TlsAmqpListener | None = None  # AMQP over TLS (--tls-port)
        self.metrics = None  # the Prometheus endpoint (warren/metrics), unless --prometheus-port -1
        self.parameters = None  # runtime parameters (warren/management/parameters.py), set in startup
        self.federation = None  # shovels and federation links (warren/federation/manager.py)
        self.sync_latency = Histogram(SYNC_BUCKETS)  # seconds per group commit (warren_store_sync_seconds)
        # why the broker stopped by itself (a failed group commit), for a non-zero exit status
        self.failure: str | None = None
        self.cluster = None  # this node's membership with --cluster-etcd (warren/cluster/node.py), set by run()
        self.node_links = None  # its links to the other nodes (warren/cluster/links.py), set in startup
        self.queue_directory = None  # where the cluster's queues live (warren/cluster/queues.py), set in startup
        self.replicas = None  # replicated quorum queues (warren/cluster/replicas.py), set in startup
        self.cluster_files = None  # its node files kept in etcd (warren/cluster/shared_files.py), set by run()

    # --- group commit -----------------------------------------------------------------------

    def _request_sync(self) -> None:
        if not self._sync_pending:
            self._sync_pending = True
            self.loop.call_soon(self._start_sync)  # after this loop iteration's appends

    def _start_sync(self) -> None:
        self._sync_pending = False
        if self._stores_closed:
            return  # shutdown synced and closed every store already
        job = self.durability.begin_sync()
        if job is None:
            return
        number, stores = job
        started = time.perf_counter()
        # Queue stores: fsynced on the FsyncWorker's thread, which never takes the GIL and tells
        # the loop through its eventfd (_fsyncs_completed). A sync waited 0.9 ms of its 1.05 for
        # the GIL when a Python thread did it all (docs/performance.md, session 8). Their writes:
        # here on the loop while nothing is at the disk (no fsync is under way, one group commit
        # at a time: a write then waits for nothing), else on the disk writer's thread, which
        # passes the commit on to the FsyncWorker. A write can wait behind a stalled fsync of
        # the same file, and the stores' flushes past their threshold during a commit go to the
        # disk writer too (_hand_writes): so the loop never waits for the disk, and writes go on
        # while an fsync stalls, what waits being confirms, not memory. Handing every commit's
        # writes over cost 4 % of 1p1c-1KiB-persist-confirm (a thread more to wake per commit).
        # Stream stores keep a pool thread.
        queue_stores = [s for s in stores if type(s) is QueueStore]
        others = [s for s in stores if type(s) is not QueueStore] if len(queue_stores) < len(stores) else ()
        commit = self._commits[number] = _GroupCommit(2 if others else 1, started)
        # a failed write fails its store, and the broker with it (_sync_done); the stores begun
        # before it still go through the worker, so that each sync ends
        # behind writes handed over, the commit's writes go the same way (in order, and passed on
        # to the FsyncWorker after them); when the writer has none left, every job it took was
        # passed on before it said so
        defer = self._writer_jobs > 0
        commit.works, commit.error = self.durability.sync_begin(queue_stores, defer)
        fds, unlinks, dir_fds, writes = [], [], [], []
        for _, work in commit.works:
            if defer:
                writes += work.deferred.writes
            fds += work.fds
            unlinks += work.unlinks
            dir_fds += work.dir_fds
        if defer:
            self._writer_jobs += 1
            self.disk_writer.submit(number, fds, unlinks, dir_fds, writes)
        else:
            self.fsync_worker.submit(number, fds, unlinks, dir_fds)
        if others:
            # The pool thread hands the outcome straight to the loop: one loop turn after the
            # fsync, where run_in_executor's asyncio future took two
            fut = self._sync_pool.submit(self.durability.sync, others)
            fut.add_done_callback(lambda f: self._pool_sync_finished(f, number))

    def _pool_sync_finished(self, fut, number: int) -> None:
        """On the pool's thread: the rest happens on the loop."""
        try:
            self.loop.call_soon_threadsafe(self._sync_part_done, number, fut.exception())
        except RuntimeError:
            pass  # the loop is closed: the process is ending, the stores were synced by shutdown

    def _hand_writes(self, store: QueueStore, batch) -> None:
        """A store's flush past its threshold (QueueStore.writer): the disk writer writes it,
        in order with the group commits' writes."""
        self._last_flush_job -= 1
        self._flush_jobs[self._last_flush_job] = (store, batch)
        self._writer_jobs += 1
        self.disk_writer.submit(self._last_flush_job, [], [], [], batch.writes)

    def _writes_completed(self) -> None:
        """The disk writer's eventfd is readable: each store's buffers it wrote are read from
        its files now (QueueStore.writes_done). It passed each job on to the FsyncWorker itself
        (after a failed write, to fail there)."""
        for job, err in self.disk_writer.completed():
            self._writer_jobs -= 1
            if job < 0:
                store, batch = self._flush_jobs.pop(job)
                store.writes_done(batch, err)
            else:
                for store, work in self._commits[job].works:
                    store.writes_done(work.deferred, err)

    def _fsyncs_completed(self) -> None:
        """The FsyncWorker's eventfd is readable: end the queue stores' part of each group
        commit it finished (QueueStore.sync_end), in the order they began. The disk writer's
        reports first: it reported each job it passed on before passing it (so a commit's
        writes are done, ``writes_done``, before its end), whichever eventfd the loop saw first."""
        self._writes_completed()
        for number, err in self.fsync_worker.completed():
            if number < 0:
                continue  # a store's flush, which had nothing to fsync (_hand_writes)
            commit = self._commits[number]
            for store, work in commit.works:
                try:
                    store.sync_end(work, err)
                except BaseException as e:
                    commit.error = commit.error or e
            commit.works = []
            self._sync_part_done(number, None)

    def _sync_part_done(self, number: int, error: BaseException | None) -> None:
        commit = self._commits[number]
        commit.error = commit.error or error
        commit.parts -= 1
        if not commit.parts:
            del self._commits[number]
            self._sync_done(number, commit.error, commit.started)

    def _sync_done(self, number: int, error: BaseException | None, started: float) -> None:
        self.sync_latency.observe(time.perf_counter() - started)
        if error is not None:
            # the disk refused: nothing more may be confirmed; stop rather than lie
            log.critical("message store sync failed, shutting down: %r", error)
            self.failure = f"message store sync failed: {error!r}"
            self._stop.set()
            return
        # What the sync released (confirms, tx.commit-ok) is written now, not one more loop turn
        # later: the connections that ask for a flush meanwhile (connection.py ``want_flush``)
        # are flushed when end_sync is done.
        self.sync_flushes = flushes = []
        try:
            self.durability.end_sync(number)
        finally:
            self.sync_flushes = None
        for conn in flushes:
            conn.flush()

    def _tick(self) -> None:
        """Timed work of the broker (delayed messages, expiries), every TICK seconds."""
        try:
            self.broker.tick(time.monotonic())
        except Exception:
            log.exception("broker tick failed")
        if self.durability.lazy_acks and not self._stores_closed:
            self.durability.tick(time.monotonic())  # ack logs a group commit left unsynced
        self.collector.tick(time.monotonic())
        now = time.monotonic()
        if now - self._backlog_since >= BACKLOG_WINDOW:
            self._backlog_since = now
            self.backlogged.clear()  # who is still behind says so again with its next large read
        if (self.config.global_parameters_file is not None or self.cluster_files is not None) \
                and now - self._globals_checked >= GLOBAL_CHECK:
            self._globals_checked = now  # a worker: another may have changed cluster_name
            try:
                self.parameters.refresh_global()
            except Exception:
                log.exception("reading the shared global parameters failed")
            self.broker.directory.tick()
        self._tick_handle = self.loop.call_later(TICK, self._tick)

    async def startup(self) -> None:
        c = self.config
        c.data_dir.mkdir(parents=True, exist_ok=True)
        from warren.federation.manager import FederationManager
        from warren.management.parameters import ParameterStore
        # one store: the HTTP API's too; a worker's global parameters are the node's, shared
        shared, node_wide = c.global_parameters_file, c.worker_mode == "queues"
        if self.cluster_files is not None:  # the cluster's, one file kept in etcd (warren/cluster/shared_files.py)
            shared, node_wide = c.data_dir / "parameters.json", True
        self.parameters = ParameterStore.in_data_dir(c.data_dir, shared, node_wide=node_wide)
        self.federation = FederationManager(self.broker, self.parameters)  # validates shovels from now on
        from warren.management.api.common import off_loop
        self.federation.write = off_loop  # a shovel's own delete-after: the HTTP API's writer thread
        if self.cluster_files is not None:  # others' changes applied at once; one node runs each shovel (warren/cluster)
            self.cluster_files.attach(self.broker, self.federation, self.parameters)
        # a worker's API changed them: the others re-read at once (files_changed)
        self.broker.directory.parameters = self.parameters
        # before any client (load_definitions); a --workers worker gets the part of the file with
        # its own vhosts' objects, the supervisor has loaded the rest (warren/server/workers.py)
        if c.definitions is not None:
            from warren.management.definitions import DefinitionsError, load_definitions_file
            try:
                # --worker-mode queues: every worker makes the same objects, each queue on its
                # owner; the runtime parameters are the node's, imported once (worker 0)
                directory = self.broker.directory
                load_definitions_file(self.broker, c.definitions,
                                      self.parameters if directory.index in (None, 0) else None,
                                      apply=directory.define_at_start)
            except DefinitionsError as e:
                raise StartupError(f"cannot load definitions: {e}") from None
        if c.tls_port >= 0 or c.http_tls:
            try:
                self.tls = TlsContexts(c)
            except TlsError as e:
                raise StartupError(str(e)) from None
        # a worker lists its supervisor's TLS port (it ends TLS and relays: relay.py); one process its own
        tls_port = c.tls_port if c.tls_port >= 0 and c.handoff_socket is not None else None
        await self.broker.directory.start()  # linked to the other workers before any client comes
        if c.handoff_socket is not None:  # a worker: connections come from the supervisor (workers.py)
            self.handoff = HandoffReceiver(self)
            await self.handoff.start(c.handoff_socket)
            port = c.port
            log.info("Warren worker %d serving vhosts %s (data in %s)", os.getpid(), ", ".join(c.vhosts),
                     c.data_dir.resolve())
        elif c.port < 0:  # plain AMQP off (--port -1): TLS only
            port = None
        else:
            try:
                self._listener = await self.loop.create_server(
                    lambda: AMQPConnection(self), c.host, c.port, backlog=1024, reuse_address=True)
            except OSError as e:
                raise _listen_error("AMQP", c.host, c.port, e) from None
            port = self._listener.sockets[0].getsockname()[1]
            log.info("Warren listening for AMQP on %s:%d (data in %s)", c.host, port, c.data_dir.resolve())
        if c.tls_port >= 0 and c.handoff_socket is None:
            self.tls_listener = TlsAmqpListener(self.loop, self.tls, lambda: AMQPConnection(self), c.handshake_timeout)
            try:
                tls_port = await self.tls_listener.start(c.host, c.tls_port)
            except OSError as e:
                raise _listen_error("AMQP over TLS", c.host, c.tls_port, e) from None
            log.info("Warren listening for AMQP over TLS on %s:%d (client certificates: %s)", c.host, tls_port,
                     {"none": "not asked", "peer": "verified if sent", "require": "required"}[c.tls_verify])
        self.alarms.start()
        cluster_port = None
        if self.cluster is not None:  # one node's alarm blocks every node's publishers (warren/cluster/alarms.py)
            from warren.cluster.alarms import share_alarms
            share_alarms(self.cluster, self.alarms)
            cluster_port = await self._link_nodes()
        # shovels and federation links: a URI with an empty host is this broker, over loopback
        self.federation.start(port, c.default_user, c.default_pass)
        self._tick_handle = self.loop.call_later(TICK, self._tick)
        http_port = None
        if c.http_port >= 0:
            self.http = HttpServer(self.broker, info=lambda: {
                "amqp_port": port, "http_port": http_port, "connections": len(self.connections),
                "amqps_port": tls_port, "http_tls": c.http_tls,  # the listeners' list (TLS: tls.py)
                "gc": self.collector.stats()}, server=self, limits=HttpLimits(
                    c.http_header_timeout, c.http_body_timeout, c.http_max_header_size, c.http_max_body_size))
            from warren.management.api.merged import PeerApi
            from warren.metrics.collect import snapshot_rows
            # the other workers' APIs and scrapes list ours too
            self.broker.directory.api = PeerApi(self.http.app, more_rows={
                "metrics": lambda per_object: snapshot_rows(self, per_object)})
            try:
                http_port = await self.http.start(c.http_host or c.host, c.http_port,
                                                  ssl_context=self.tls.http_server_context() if c.http_tls else None)
            except OSError as e:
                raise _listen_error("HTTP", c.http_host or c.host, c.http_port, e) from None
            self.broker.http_port = http_port  # announced in connection.start (broker.server_properties)
            log.info("web UI at %s (the HTTP API under /api/)", web_ui_url(c.http_host or c.host, http_port, c.http_tls))
        prometheus_port = await self._start_metrics() if c.prometheus_port >= 0 else None
        self.collector.freeze_startup()  # full passes skip what starting made (collector.py)
        # where `warren ctl` finds this broker without being told (warren/cli/ctl/discover.py), before the ready file
        self._listeners_file = c.data_dir / LISTENERS_FILE
        tmp = self._listeners_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "version": __version__, "host": c.host, "port": port,
                                   "tls_port": tls_port, "http_host": c.http_host or c.host, "http_port": http_port,
                                   "http_tls": c.http_tls, "prometheus_port": prometheus_port}))
        tmp.replace(self._listeners_file)
        if self.cluster is not None:  # the member record lists the listeners (warren/cluster/node.py)
            advertised = {}
            if c.cluster_advertise:  # other nodes dial that address (a NAT, a proxy), not the port itself
                host, _, advertised_port = c.cluster_advertise.rpartition(":")
                advertised = {"cluster_host": host, "cluster_port": int(advertised_port)}
            await self._announce(amqp_port=port, amqps_port=tls_port, http_port=http_port,
                                 prometheus_port=prometheus_port, amqp_host=c.host,
                                 **{"cluster_port": cluster_port, **advertised})
        if c.ready_file:
            tmp = c.ready_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"host": c.host, "port": port, "pid": os.getpid(), "http_port": http_port,
                                       "prometheus_port": prometheus_port, "tls_port": tls_port}))
            tmp.replace(c.ready_file)

    async def _link_nodes(self) -> int:
        """The inter-node links (warren/cluster/links.py): the other nodes' API rows in ours,
        ours in theirs, their queues found and served through ours (warren/cluster/api.py,
        queues.py, reach.py); the port they link to."""
        from warren.cluster.api import ClusterApi
        from warren.cluster.links import NodeLinks
        from warren.cluster.queues import QueueDirectory
        from warren.cluster.etcd import EtcdError
        from warren.cluster.reach import NodeReach
        from warren.cluster.replicas import Replicas
        from warren.cluster.topology import SharedTopology
        c = self.config
        self.queue_directory = QueueDirectory(self.cluster, self.broker)  # where each queue lives, in etcd
        peers = ClusterApi(self.broker.directory, self.queue_directory)
        # replicated quorum queues: led again here, or dropped for the node that leads them now,
        # before this node lists its queues in the directory
        self.replicas = peers.replicas = Replicas(self.cluster, self.broker, peers)
        try:
            await self.replicas.settle()
        except EtcdError as e:
            raise StartupError(f"cannot read cluster {self.cluster.cluster_name!r}'s replicated queues: {e}") from None
        self.queue_directory.start()
        listener = dialler = None
        if c.cluster_tls:  # both sides present and verify certificates (tls.py)
            from warren.server.tls import TlsError, node_link_contexts
            try:
                listener, dialler = node_link_contexts(c)
            except TlsError as e:
                raise StartupError(f"cluster-tls: {e}") from None
        self.node_links = NodeLinks(self.cluster, peers, server_ssl=listener, client_ssl=dialler)
        try:
            cluster_port = await self.node_links.start(c.host, c.cluster_port)
        except OSError as e:
            raise _listen_error("inter-node", c.host, c.cluster_port, e) from None
        if c.cluster_advertise:  # what this node's handshakes tell the nodes it dials
            host, _, advertised_port = c.cluster_advertise.rpartition(":")
            self.node_links.advertised = (host, int(advertised_port))
        peers.links = self.node_links
        # the other nodes' queues served through this one: handles kept from the queue directory
        peers.locator = c.queue_leader_locator  # where a new queue goes
        peers.reach = NodeReach(self.cluster, self.broker)
        peers.reach.failover_expected = self.replicas.failover_expected  # publishes held between leaders
        peers.reach.replica_reads = self.replicas.reads_here  # a stream's followers serve its reads
        peers.reach.start(self.node_links)
        self.cluster.listen("queues", peers.reach.directory_changed)
        self.cluster.listen("members", peers.reach.members_changed)  # linked to every node; its handles
        # every exchange and binding shared through etcd: this node's made etcd's first
        peers.topology = peers.reach.topology = SharedTopology(self.cluster, self.broker)
        peers.topology.reach = peers.reach
        try:
            await peers.topology.start()
        except EtcdError as e:
            raise StartupError(f"cannot read cluster {self.cluster.cluster_name!r}'s exchanges and bindings: {e}") from None
        self.cluster.listen("topology", peers.topology.changed)
        self.broker.directory.elsewhere = peers
        self.replicas.start()
        log.info("cluster: other nodes link to this one on %s:%d", c.host, cluster_port)
        return cluster_port

    async def _announce(self, **listeners) -> None:
        from warren.cluster.etcd import EtcdError
        try:
            await self.cluster.announce(**listeners)
        except EtcdError as e:  # the membership holds without them; the log says why they are missing
            log.warning("cluster: could not list this node's listeners in etcd: %s", e)

    async def _start_metrics(self) -> int:
        """The Prometheus endpoint (warren/metrics), imported only when it is on."""
        from warren.metrics.server import MetricsServer
        c = self.config
        host = c.prometheus_host or c.http_host or c.host
        self.metrics = MetricsServer(self, HttpLimits(c.http_header_timeout, c.http_body_timeout,
                                                      c.http_max_header_size, c.http_max_body_size))
        if self.cluster is not None:  # the other nodes' /metrics/cluster ask this one's text over the links
            self.broker.directory.elsewhere.node_metrics = self.metrics.node_rows
        try:
            return await self.metrics.start(host, c.prometheus_port,  # HTTPS with --http-tls too
                                            ssl_context=self.tls.http_server_context() if c.http_tls else None)
        except OSError as e:
            raise _listen_error("Prometheus metrics", host, c.prometheus_port, e) from None

    async def serve(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._on_signal, sig)
        self.loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
        try:
            await self.startup()
        except StartupError:
            await self.shutdown()  # close what did start, and the stores
            raise
        await self._stop.wait()
        await self.shutdown()

    def _on_hangup(self) -> None:
        """SIGHUP: reopen the log file (logrotate renamed it) and reload the TLS certificates."""
        logs.reopen()
        if self.tls is not None:
            self.tls.reload()

    def _spread_failed(self, why: str) -> None:
        """A link to another worker closed while we run: that worker is gone, the node stops."""
        if not self._stop.is_set():
            self.failure = why
            self._stop.set()

    def request_stop(self) -> None:
        """Shut down as on SIGTERM (a worker whose supervisor has gone)."""
        self._stop.set()

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: exiting now")
            os._exit(1)
        log.info("received %s, shutting down", signal.Signals(sig).name)
        self._stop.set()

    async def shutdown(self) -> None:
        # 1. stop accepting connections (and checking alarms)
        self.broker.directory.stop()
        self.alarms.stop()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._listener is not None:
            self._listener.close()
        if self.tls_listener is not None:
            self.tls_listener.close()
        if self.handoff is not None:
            self.handoff.close()
        if self.http is not None:  # before the stores close: no stream read may start after that
            await self.http.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.federation is not None:  # shovels and links close their connections (to us too)
            await self.federation.stop()
        # 2. connection.close 320 CONNECTION_FORCED to every client
        for conn in list(self.connections):
            conn.shutdown()
        # 3. wait for their close-ok (the connection closes itself) up to the timeout
        deadline = self.loop.time() + self.config.shutdown_timeout
        while self.connections and self.loop.time() < deadline:
            await asyncio.sleep(0.05)
        # 4. abort the rest
        if self.connections:
            log.warning("aborting %d connections that did not close in time", len(self.connections))
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
        if self._listener is not None:
            await self._listener.wait_closed()
        if self.tls_listener is not None:
            await self.tls_listener.wait_closed()
        # --worker-mode queues: group commits waiting for another worker's answer end first (it
        # answers while it stops too), then the links close
        await self.broker.directory.close(lambda: not self._commits, self.config.shutdown_timeout)
        if self.node_links is not None:  # after our clients and their commits: what they sent other
            await self.replicas.stop()  # (a replicated store's last sync is then this node's alone)
            await self.node_links.close()  # nodes' queues has gone (links.close flushes it first)
            await self.queue_directory.stop()
        # 5. flush and close the stores (no group commit may start after this); the group
        # commits at the disk end first, as they would have (QueueStore.sync waits for them)
        self._stores_closed = True
        self.disk_writer.wait_idle()
        self._writes_completed()
        self.fsync_worker.wait_idle()
        self._fsyncs_completed()
        self.durability.close(list(self.broker.all_queues()))
        self._sync_pool.shutdown(wait=True)
        self.loop.remove_reader(self.disk_writer.fileno())
        self.disk_writer.close()  # before the worker it passes jobs on to
        self.loop.remove_reader(self.fsync_worker.fileno())
        self.fsync_worker.close()
        if self._listeners_file is not None:
            self._listeners_file.unlink(missing_ok=True)
        if self.cluster_files is not None:
            await self.cluster_files.stop()
        if self.cluster is not None:  # the member key goes at once (lease revoked)
            await self.cluster.leave()
        log.info("shutdown complete")


def run(config: Config) -> None:
    """Serve until SIGTERM or SIGINT; StartupError if the broker cannot start."""
    lock_data_dir(config.data_dir)  # the supervisor holds it; each worker locks its own sub-folder
    check_listeners(config)  # every port at once, before any listener starts
    if config.handoff_socket is None:  # the supervisor or the one process (a worker is said by its supervisor)
        log.info("Warren %s (%s) starting: Python %s, data in %s", __version__, DISTRIBUTION,
                 platform.python_version(), config.data_dir.resolve())
        for other in other_distributions():
            log.warning("the distribution %r also installs a package named `warren` here and may have overwritten "
                        "files of %s (PyPI's `warren` is an unrelated project; docs/install.md)", other, DISTRIBUTION)
    if config.workers > 1:
        from warren.broker.ownership import LayoutMismatch
        from warren.server.workers import Supervisor
        try:  # the node's users and policies live in the supervisor's folder (warren/store/node_file.py)
            check_node_files(config.data_dir)
        except DamagedFile as e:
            raise StartupError(str(e)) from None
        try:
            Supervisor(config).run()
        except LayoutMismatch as e:
            raise StartupError(str(e)) from None
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
                raise _listen_error("AMQP", config.host, config.port, e) from None
            raise
        except RuntimeError as e:  # a worker did not start (it said why on stderr)
            raise StartupError(str(e)) from None
        return
    from warren.broker.ownership import LayoutMismatch, check_single
    try:
        check_single(config.data_dir)  # a folder that worker processes wrote
    except LayoutMismatch as e:
        raise StartupError(str(e)) from None
    tune_young_collections()
    loop = new_event_loop(config.loop)
    asyncio.set_event_loop(loop)
    cluster, cluster_files = _join_cluster(config, loop) if config.cluster_etcd else (None, None)
    if cluster is None and (config.data_dir / "cluster.json").exists():  # warren/cluster/node.py's record
        log.warning("data folder %s belongs to a cluster (cluster.json) but --cluster-etcd is not given: "
                    "serving it as a single node", config.data_dir.resolve())
    try:
        server = Server(config, loop)
    except BaseException:
        if cluster is not None:
            loop.run_until_complete(cluster.leave())
        loop.close()
        raise
    server.cluster, server.cluster_files = cluster, cluster_files
    if cluster_files is not None:
        cluster_files.start(loop)  # the watcher of the shared metadata
    try:
        loop.run_until_complete(server.serve())
    finally:
        loop.close()
    if server.failure is not None:  # exit 1, so that a service manager sees a failure, not a stop
        raise SystemExit(1)


def _join_cluster(config: Config, loop: asyncio.AbstractEventLoop):
    """--cluster-etcd: create or join the cluster before recovery (a data folder of another cluster
    or a node name already running is refused first); warren.cluster is imported only here."""
    from warren.cluster.node import ClusterError, join
    try:
        cluster = loop.run_until_complete(join(config))
    except ClusterError as e:
        loop.close()
        raise StartupError(str(e)) from None
    name_node(config.node_name)  # the HTTP API, Prometheus and shovels name the node so
    # the node files are the cluster's: taken from etcd (or seeded there) before the broker reads them
    from warren.cluster.etcd import EtcdError
    from warren.cluster.shared_files import SharedFiles
    files = SharedFiles(cluster, config.data_dir)
    try:
        files.take_or_seed()
    except (EtcdError, OSError) as e:
        loop.run_until_complete(cluster.leave())
        loop.close()
        raise StartupError(f"cannot take cluster {config.cluster_name!r}'s metadata: {e}") from None
    return cluster, files
