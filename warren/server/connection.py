"""asyncio glue for one client connection: bytes from the socket to the sans-IO core and back.

``data_received`` feeds the protocol core, hands each event to the 0-9-1 ``ConnectionHandler`` and
writes what the core queued in one ``writelines``. Deliveries caused by other connections
schedule one flush per loop iteration (``want_flush``), so frames leave in batches.
Flow control, outgoing: ``pause_writing``/``resume_writing`` stop and restart deliveries to
this client. Incoming: we stop reading from a connection (TCP then pushes back on the client)
while a resource alarm is raised (flow_control.py) or while a queue it published to is
congested (``throttle``: the queue's backlog passed its flow mark, queues/flow_marks.py), and read again
when the alarm clears or the queue drains (the server's ``QueueFlow``, queue_flow.py, keeps
which connection waits for which queue and calls ``flow_released``). A throttled connection is read again after
``FLOW_MAX_PAUSE_S`` anyway, for one publish: a consumer that never acks, or two connections
each consuming what the other publishes, slow publishers down to a trickle but never deadlock.
Heartbeats: we send one when we have been silent for half the interval, and drop a client
that has been silent for two intervals (as RabbitMQ does).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from warren.codec.frames import FRAME_METHOD, HEARTBEAT_FRAME
from warren.errors import AMQPError, InternalError
from warren.broker.totals import TOTALS
from warren.protocol.amqp0_9_1.adapter import ConnectionHandler
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.amqp0_9_1.delivery import OUTPUT_BATCH
from warren.protocol.events import Method, Publishes
from warren.protocol.amqp0_10.adapter import ConnectionHandler as ConnectionHandler0_10
from warren.protocol.amqp0_10.events import OpenRequested as OpenRequested0_10
from warren.protocol.amqp1_0.events import OpenRequested as OpenRequested1_0
from warren.protocol.header import AMQP_0_10, AMQP_1_0, HEADER_SIZE, NEED_MORE, PREFERRED_HEADER, read_header
from warren.server.handshake import default_vhost, handshake_pending, peer_name, protocol_connection, setup_failed
from warren.server.handshake import stage as handshake_stage
from warren.server.tls import session_of
from warren.server.placement import move as move_to_owner
from warren.spec import amqp0_9_1 as spec

__all__ = ["AMQPConnection"]

log = logging.getLogger("warren.connection")

# The close handshake, as RabbitMQ's reader does it: once close-ok is sent (the client closed)
# or connection.close is sent (we closed), the connection keeps reading and discarding what
# the peer still sends (a client's publishes written behind its close: closing the socket at
# once made them a TCP reset, EPIPE in Node's amqplib, whose close callback then never fired)
# until the peer closes its end or answers close-ok, for at most the negotiated heartbeat
# interval, or CLOSING_TIMEOUT_S without heartbeats or above it.
CLOSING_TIMEOUT_S = 30.0
CLOSE_GRACE_S = 1.0  # after a framing error no close-ok can be read: close sooner
# Fair turns. A connection handles at most one read and EVENTS_PER_TURN events per loop
# iteration, then yields. Without this, one flooding publisher starved everyone else: libuv
# reads a readable socket up to 32 times in a row (8 MiB with uvloop's 256 KiB reads), and a
# 256 KiB read holds 3000 small messages. Measured with shared/perf: 1p1c-16B-autoack consumed
# nothing in the window (the consumer's handshake took seconds); 1p1c-1KiB-persistent
# consumed 150 msg/s while publishing 20k/s. 100 events per turn measured best for consumers
# (1p1c-16B: 22k consumed/s against 14k at 250 and 2.5k at 1000), publish-only unchanged.
EVENTS_PER_TURN = 100
# A read shorter than this that the turn handled whole does not yield: libuv stops reading a
# socket for the iteration after a read that did not fill its buffer (uvloop's is 256,000
# octets; asyncio's selector loop reads once per iteration anyway), so the next read waits for
# the next iteration already. Pausing, a call_soon and resuming cost a publisher that the
# broker keeps up with (reads of a few messages) two io_uring_enter calls and ~11,700
# instructions per read: docs/performance.md, "Runs of publishes".
SMALL_READ = 65536
_CONNECTION_OPEN = spec.ConnectionOpen.INDEX
# --worker-mode queues: a connection's first octets kept for a move at most (placement.py)
MOVE_HISTORY_MAX = 64 * 1024
FLOW_MAX_PAUSE_S = 1.0  # longest pause for a congested queue before one more publish is read


class AMQPConnection(asyncio.Protocol):
    # Slots, not a __dict__: past 30 attributes CPython 3.11 stops sharing an instance dict's
    # keys, and each idle connection paid a 1.6 KB dict of its own (bench/memory.py: 5.6 KB per
    # idle connection against 4.0 before). A new attribute must be named here.
    __slots__ = (
        "server", "config", "loop", "transport", "peer", "conn", "session", "recv_oct", "send_oct",
        "connected_at", "tls", "local", "_api_name", "_header", "_flush_scheduled", "_closing",
        "_turn_scheduled", "_blocked", "_throttled", "_flow_timer", "_more_events", "_told_blocked",
        "_close_timer", "_handshake_timer", "_heartbeat", "_timer", "_received", "_sent", "_idle_ticks",
        "_replay", "_replaying", "_started", "_eof", "_close_reason", "_gated", "_output_max",
        "_refused_at_accept", "_held", "_history", "_event_start", "_answer_held", "__weakref__",
    )

    def __init__(self, server, replay: bytes | None = None) -> None:
        # octets read and written, per read and per write (the HTTP API's recv_oct/send_oct)
        self.recv_oct = 0
        self.send_oct = 0
        self.connected_at = 0.0  # time.time() of the accept (the HTTP API's connected_at)
        self.tls = None  # a TLS connection: its tls.TlsSession (the EXTERNAL login, the HTTP API's ssl columns)
        self.local = None  # our address, where the socket's is not the client's (relayed TLS: relay.py)
        self._api_name: str | None = None  # "peer -> local", the HTTP API's and Prometheus' name, worked out once
        # shared server state
        self.server = server
        self.config = server.config
        self.loop = server.loop
        # per connection
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.conn: ServerConnection | None = None
        self.session: ConnectionHandler | None = None  # the broker side of this connection
        self._header = b""
        self._flush_scheduled = False
        self._closing = False
        # Reading from the socket is paused while a turn is scheduled, an alarm blocks this
        # publisher, or a congested queue throttles it; ``_resume_input`` restarts it.
        self._turn_scheduled = False  # a _next_turn call is pending (input may be buffered)
        self._blocked = False  # a resource alarm stopped reading from this publisher
        self._throttled = False  # held by the server's QueueFlow: a queue it published to is congested
        # or (--worker-mode queues) waiting for another worker's answer (hold_input): no more is read
        self._held = 0  # answers from other workers waited for (warren/spread)
        self._flow_timer: asyncio.TimerHandle | None = None
        self._more_events = False  # the last turn stopped at EVENTS_PER_TURN
        self._told_blocked = False  # we sent connection.blocked
        self._close_timer: asyncio.TimerHandle | None = None  # the close handshake's deadline
        # the handshake deadline (handshake.py): never replaced, by data or by heartbeats
        self._handshake_timer: asyncio.TimerHandle | None = None
        # heartbeats
        self._heartbeat = 0
        self._timer: asyncio.TimerHandle | None = None
        self._received = True
        self._sent = True
        self._idle_ticks = 0
        # a connection handed over by the supervisor (handoff.py): what the client sent so
        # far, replayed on connection_made; nothing goes out until the replay reaches
        # connection.open, since the supervisor answered everything before it
        self._replay = replay
        self._replaying = replay is not None
        # the close line (connection_lost): when it began, whether the client sent EOF, and
        # why the glue itself closed it (heartbeat, refused header); the session knows the rest
        self._started = time.monotonic()
        self._eof = False
        self._close_reason: str | None = None
        # limits (limits.py): counted as unauthenticated until open-ok; unread output bound
        self._gated = False
        self._output_max = server.output_max
        self._refused_at_accept = False
        # --worker-mode queues: what the client sent so far, kept until the connection's first
        # publish or consume says where it belongs (warren/server/placement.py), and where the
        # event being handled starts in the input buffer; None: not kept
        self._history: bytearray | None = None
        self._event_start = 0
        # a durable declare, delete or bind was applied and its definitions fsync is not done:
        # its answer (and all output after it) waits, and so does input (_hold_answer)
        self._answer_held = False

    # --- asyncio callbacks ---------------------------------------------------------------

    @property
    def certificate_login(self):
        """The EXTERNAL login's ``tls.CertificateLogin``: None unless TLS with a verified client certificate."""
        return self.tls.login if self.tls is not None else None

    def connection_made(self, transport) -> None:
        try:
            self._connection_made(transport)
        except Exception as e:
            self._setup_failed(transport, e)

    def _setup_failed(self, transport, e: Exception) -> None:
        """``connection_made`` raised (our bug: nothing there refuses a client). asyncio would
        log it and go on reading the socket into a half-made connection until the handshake
        deadline (if it was set at all): the socket is closed at once instead, with a line
        saying what and who; ``connection_lost`` then undoes what was counted, as for any close."""
        self.transport = transport
        if self.peer is None:
            try:
                self.peer = transport.get_extra_info("peername")
            except Exception:
                pass
        self._closing = True
        self._close_reason = setup_failed(self.peer, e)
        transport.abort()

    def _connection_made(self, transport) -> None:
        self.transport = transport
        if self.peer is None:  # else a relayed TLS connection, whose hand-over said who (relay.py)
            self.peer = transport.get_extra_info("peername")
            self.tls = session_of(transport, self.config)
        self._started = time.monotonic()
        self.connected_at = time.time()
        if not self.server.handshake_gate.admit(peer_name(self.peer)):
            # too many sockets short of open-ok: closed at once, nothing read (limits.py logs it)
            self._closing = self._refused_at_accept = True
            transport.abort()
            return
        self._gated = True
        self.server.connections.add(self)
        self._handshake_timer = self.loop.call_later(self.config.handshake_timeout, self._handshake_timeout)
        if self._replay is not None:
            replay, self._replay = self._replay, None
            self.data_received(replay)

    def data_received(self, data: bytes) -> None:
        pacer = self.server.pacer
        if pacer is not None:
            pacer.read(len(data))
        self._received = True
        self.recv_oct += len(data)
        if self._history is not None:  # --worker-mode queues, until placed (warren/server/placement.py)
            if len(self._history) > MOVE_HISTORY_MAX:  # the cap is on what came before this read:
                self._history = None  # a first read full of publishes may still move with them
            else:
                self._history += data
        if self.conn is None:
            data = self._protocol_header(data)
            if not data:
                return
        self.conn.receive_data(data)
        self._process()
        if self._more_events or len(data) >= SMALL_READ or self._blocked or self._throttled:
            self._yield_turn()

    def eof_received(self) -> None:
        self._eof = True  # returning None lets the transport close itself

    def connection_lost(self, exc) -> None:
        if self._refused_at_accept:
            return  # never counted, logged by the gate (limits.py)
        self.opened()
        self._log_close(exc)
        self.server.connections.discard(self)
        self.server.collector.connection_closed()
        TOTALS.connections_closed += 1
        if self._timer is not None:
            self._timer.cancel()
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        self._drop_throttles()
        if self.session is not None:
            # what goes with it (auto-delete queues) is fsynced by the next group commit, off the
            # loop: nobody waits for an answer (warren/store/aside.py)
            with self.server.durability.definitions.deferred():
                self.session.connection_lost()

    def _log_close(self, exc) -> None:
        """One line per connection, when its socket is gone: who, for how long, and why."""
        session = self.session
        reason = (session.close_reason if session is not None else None) or self._close_reason
        if reason is None:
            if exc is not None:
                reason = f"socket error: {exc.__class__.__name__}: {exc}"
            elif self._eof:
                reason = "client closed the socket (EOF) without connection.close"
            elif handshake_pending(self.conn):
                reason = f"closed by the broker during the handshake ({handshake_stage(self._header, self.conn)})"
            else:
                reason = "closed by the broker"
        who = str(session) if session is not None else f"{peer_name(self.peer)} user=- vhost=-"
        name = session.client_name if session is not None else "-"
        client = json.dumps(name, ensure_ascii=False)
        lived = time.monotonic() - self._started
        peer = peer_name(self.peer)
        log.info("connection closed: %s client=%s lived %.2fs: %s", who, client, lived, reason,
                 extra={"event": "connection.closed", "peer": peer,  # the fields of --log-format json
                        "user": session.username if session is not None else None,
                        "vhost": session.vhost.name if session is not None and session.vhost else None,
                        "client": name, "lived_s": round(lived, 3), "reason": reason})

    def opened(self) -> None:
        """open-ok went out (or the socket closed): no longer counted as unauthenticated, and
        the handshake deadline is dropped at once rather than left to fire for nothing (its
        timer is ~290 B of an idle connection for the rest of handshake_timeout)."""
        if self._gated:
            self._gated = False
            self.server.handshake_gate.done()
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def refuse_later(self, delay: float, error) -> None:
        """Answer a failed login after ``delay`` seconds (login throttle): nothing is read from
        this client meanwhile, and nothing else waits."""
        self.transport.pause_reading()
        self.loop.call_later(delay, self._refuse_now, error)

    def _refuse_now(self, error) -> None:
        if self.transport is None or self.transport.is_closing() or self.session is None or self.session.closed:
            return
        self.session.fail(error)
        self.flush()

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.set_writable(False)

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.set_writable(True)
            self.flush()

    # --- protocol ------------------------------------------------------------------------

    def _protocol_header(self, data: bytes) -> bytes:
        self._header += data
        dialect = read_header(self._header)
        if dialect is NEED_MORE:
            return b""
        if dialect is None:
            self._refuse_header()  # not AMQP at all (say, HTTP) is refused without waiting for 8 octets
            return b""
        rest = self._header[HEADER_SIZE:]
        c = self.config
        self.conn = protocol_connection(dialect, self._header, c, self.server.broker.server_properties(), self.tls)
        if dialect is AMQP_0_10:  # another protocol family over the same broker (warren/protocol/amqp0_10)
            self._history = None  # 0-10 connections are not moved (warren/server/placement.py)
            self.session = ConnectionHandler0_10(self.server.broker, self.conn, self.peer, self, c.anonymous_user)
        elif dialect is AMQP_1_0:  # and a third (warren/protocol/amqp1_0), imported on first use
            from warren.protocol.amqp1_0.adapter import ConnectionHandler as ConnectionHandler1_0
            self._history = None  # 1.0 connections are not moved (warren/server/placement.py)
            self.session = ConnectionHandler1_0(self.server.broker, self.conn, self.peer, self, c.anonymous_user,
                                                default_vhost(c), c.max_message_size)
        else:
            self.conn.backlogged = self.server.backlogged  # runs when the broker is behind several (connection.py)
            self.session = ConnectionHandler(self.server.broker, self.conn, self.peer, self, c.publish_runs)
        self.flush()
        return rest

    def _refuse_header(self) -> None:
        log.info("refused protocol header %r from %s", self._header[:8], self.peer)
        self._close_reason = f"not an AMQP protocol header: {bytes(self._header[:8])!r}"
        if self._header[:1] == b"\x16":  # a TLS handshake record (ClientHello)
            self._close_reason += " (a TLS client on the plain AMQP port: use the TLS port, --tls-port)"
        self.transport.write(PREFERRED_HEADER)
        self.transport.close()
        self._closing = True

    def _process(self) -> None:
        if self._blocked or self._throttled:
            return  # buffered input waits until the alarm clears or the queue drains
        conn = self.conn
        session = self.session
        alarms = self.server.alarms
        budget = EVENTS_PER_TURN  # events, a run of publishes counting as its messages
        self._more_events = False
        placing = self._history is not None  # where each event starts, for a move (placement.py)
        # durable declares, deletes and binds made now leave their fsync to the group commit,
        # off the loop; their answer waits for it (_hold_answer; warren/store/definitions.py)
        definitions = self.server.durability.definitions
        held = definitions.answers_held
        definitions.defer_fsync = True
        try:
            while budget > 0:
                if placing:  # the stream offset of the event about to be read
                    frames = conn.frames
                    self._event_start = frames.base + frames.pos
                try:
                    event = conn.next_event()
                except AMQPError as e:
                    session.fail(e)
                    continue
                except Exception:  # a parser bug of ours, not the client's input: 541 and the traceback
                    log.exception("internal error parsing input on connection %s", session)
                    session.fail(InternalError("internal error"))
                    break
                if event is None:
                    break
                if self._replaying and (type(event) is Method and event.method.INDEX == _CONNECTION_OPEN
                                        or type(event) is OpenRequested0_10 or type(event) is OpenRequested1_0):
                    conn.data_to_send()  # start and tune: the supervisor sent them to the client already
                    self._replaying = False
                session.handle(event)
                budget -= len(event.bodies) if type(event) is Publishes else 1
                if definitions.answers_held != held:
                    self._hold_answer()
                    break
                if self._throttled:
                    break  # a congested queue paused us (throttle): the rest waits
                if alarms.raised and session.published:
                    if not self._blocked:  # else the alarm blocked us during this event (memory.py)
                        self.set_blocked(True, alarms.reason())
                    break
            else:
                self._more_events = True  # budget spent: the rest waits for the next turn
        finally:
            definitions.defer_fsync = False
        self.flush()

    def _hold_answer(self) -> None:
        """The event just handled changed durable definitions, whose fsync the next group commit
        does off the loop: its answer is in the output already and must not leave before that
        fsync, nor anything after it (order), and the client's next method may depend on it.
        So output and input wait, for this connection only; ``_answer_released`` resumes both."""
        self._answer_held = True
        self.hold_input()
        self.server.durability.after_definitions(self._answer_released)

    def _answer_released(self) -> None:
        self._answer_held = False
        self.flush()
        if self.session is not None and self.session.writable:
            self.loop.call_soon(self.session.resume_delivery)  # dispatch may have stopped at a batch
        self.release_input()

    def _yield_turn(self) -> None:
        """Stop reading until the next loop iteration, so other connections get their turn."""
        if self._turn_scheduled or self.transport.is_closing():
            return
        self.transport.pause_reading()
        if not (self._blocked or self._throttled):  # else _resume_input schedules the turn
            self._turn_scheduled = True
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._turn_scheduled = False
        if self.transport is None or self.transport.is_closing() or self._blocked or self._throttled:
            return
        self._process()  # input left from a spent turn, if any
        if self._blocked or self._throttled:
            return
        if self._more_events:
            self._yield_turn()
        else:
            self.transport.resume_reading()

    def _resume_input(self) -> None:
        """Nothing holds this connection any more: handle buffered input next turn, then read."""
        if self._blocked or self._throttled or self._turn_scheduled:
            return
        if self.transport is None or self.transport.is_closing():
            return
        self._turn_scheduled = True
        self.loop.call_soon(self._next_turn)

    # --- flow control: congested queues (queues/flow_marks.py) ----------------------------

    def throttle(self, queue) -> None:
        """We published to a congested queue: stop reading until ``flow_released``."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.server.queue_flow.hold(self, queue):  # the first queue we wait for
            self._throttled = True
            TOTALS.queue_flow_pauses += 1
            self.transport.pause_reading()
            self._flow_timer = self.loop.call_later(FLOW_MAX_PAUSE_S, self._flow_timeout)

    # --- --worker-mode queues: moving to the owner of the queue used (warren/server/placement.py)

    @property
    def placing(self) -> bool:
        """Whether this connection may still move to another worker."""
        return self._history is not None

    def settle(self) -> None:
        """It stays on this worker for good."""
        self._history = None

    def take_history(self) -> tuple[bytes, bytes] | None:
        """For a move (placement.py), once: (the octets answered already, those of the event being
        handled and after it), or None when that split is not known. Stops keeping the history."""
        history, self._history = self._history, None
        if history is None or self.conn is None:
            return None
        # the event's stream offset (the history starts with the 8-octet protocol header); a
        # publish assembled frame by frame began at its method frame, in an earlier read perhaps
        # (placement moves only a connection that published nothing before it)
        start = self._event_start
        if 0 <= self.conn.publish_start < start:
            start = self.conn.publish_start
        start += HEADER_SIZE
        if not HEADER_SIZE <= start < len(history) or history[start] != FRAME_METHOD:
            return None
        return bytes(history[:start]), bytes(history[start:])

    def move_to(self, worker: int) -> bool:
        """Hand the connection to ``worker`` before the event being handled; False: it stays."""
        return move_to_owner(self, worker)

    def moved(self, worker: int) -> None:
        """The connection went to ``worker``: nothing more is read or handled here, and closing
        our descriptor leaves the client's socket to the other process."""
        self._close_reason = f"moved to worker {worker}"
        self.session.note_close(f"moved to worker {worker}, the owner of its queue")
        self._throttled = True  # _process handles nothing after this event
        self.transport.pause_reading()
        self.transport.abort()

    def hold_input(self) -> None:
        """--worker-mode queues: a method waits for another worker's answer (warren/spread), and
        what the client sent after it waits too, as behind a congested queue: its answer must go
        first, and the next method may depend on it."""
        self._held += 1
        self._throttled = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def release_input(self) -> None:
        self._held -= 1
        if not self._held and not self.server.queue_flow.held(self):
            self._throttled = False
            self._resume_input()

    def when_done(self, awaitable, done) -> None:
        """An answer the broker gives later (warren/broker/later.py): nothing more is read from
        the client until ``awaitable`` is done, then ``done(result, error)``, error None on
        success (not called if the loop cancels it: the connection is going)."""
        self.hold_input()
        task = asyncio.ensure_future(awaitable)

        def finished(t) -> None:
            self.release_input()
            if t.cancelled():
                return
            e = t.exception()
            done(None if e is not None else t.result(), e)
        task.add_done_callback(finished)

    def flow_released(self) -> None:
        """Every queue we waited for drained below its low mark (called by the QueueFlow)."""
        self._throttled = self._held > 0
        if self._flow_timer is not None:
            self._flow_timer.cancel()
            self._flow_timer = None
        self._resume_input()

    def _flow_timeout(self) -> None:
        self._flow_timer = None
        self._drop_throttles()
        self._resume_input()

    def _drop_throttles(self) -> None:
        if self._throttled:
            self.server.queue_flow.release(self)
            self._throttled = self._held > 0
        if self._flow_timer is not None:
            self._flow_timer.cancel()
            self._flow_timer = None

    @property
    def blocked(self) -> bool:
        """Publishers held by a resource alarm (connection.blocked): the HTTP API's state."""
        return self._blocked

    @property
    def throttled(self) -> bool:
        """Reading paused for a congested queue (flow control)."""
        return self._throttled

    def set_blocked(self, blocked: bool, reason: str) -> None:
        """A resource alarm was raised or cleared (flow_control.py): stop or restart reading."""
        session = self.session
        if session is None or self.transport is None or self.transport.is_closing():
            return
        if blocked:
            if not session.published or self._blocked:
                return  # only publishers are blocked, as RabbitMQ does
            if not self.conn.is_open:
                return  # closing: what it still sends is read and dropped (_read_until_closed)
            self._blocked = True
            TOTALS.alarm_flow_pauses += 1
            self.transport.pause_reading()
            if session.capabilities.get("connection.blocked") and self.conn.is_open:
                self.conn.send_method(0, spec.ConnectionBlocked(reason))
                self._told_blocked = True
        else:
            if not self._blocked:
                return
            self._blocked = False
            if self._told_blocked and self.conn.is_open:
                self.conn.send_method(0, spec.ConnectionUnblocked())
            self._told_blocked = False
            self._resume_input()  # frames may be buffered already
        self.flush()

    # --- output (called by the session) --------------------------------------------------

    def want_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            held = self.server.sync_flushes
            if held is None:
                self.loop.call_soon(self.flush)
            else:  # asked by a group commit's completion: flushed at its end (Server._sync_done)
                held.append(self)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self.transport is None or self.transport.is_closing() or self._answer_held:
            return  # (held: _hold_answer)
        if self._replaying:
            self.conn.data_to_send()  # a hand-over's replay, before connection.open: the client has it
            return
        session = self.session
        if session.before_flush() and self.server.pacer is not None:
            self.server.pacer.confirmed = True
        conn = self.conn
        batch_full = conn.out_bytes >= OUTPUT_BATCH
        data = conn.data_to_send()
        if data:
            self._sent = True
            # one joined buffer: a writev of thousands of small parts costs more than the copy
            out = b"".join(data)
            self.send_oct += len(out)
            self.transport.write(out)
            if self.transport.get_write_buffer_size() > self._output_max:
                self._drop_unread_output()
                return
        if batch_full and session.writable:
            self.loop.call_soon(session.resume_delivery)  # dispatch stopped at the batch limit

    def _drop_unread_output(self) -> None:
        """The client left more than the bound unread (limits.py): close it rather than grow."""
        size = self.transport.get_write_buffer_size()
        log.warning("closing connection %s: %d octets of output not read by the client (limit %d, "
                    "--max-output-buffer)", self.session or peer_name(self.peer), size, self._output_max)
        self._close_reason = (f"client did not read its output: {size} octets unsent "
                              f"(limit {self._output_max}, --max-output-buffer)")
        if self.session is not None:
            self.session.note_close(self._close_reason)
            self.session.connection_lost()  # channels closed, unacked messages requeued
        self.transport.abort()

    def close_after_flush(self) -> None:
        """The close handshake is over: write what is queued; if the peer's close-ok ended our
        close, close the socket now, else (we sent close-ok) let the peer close it, reading and
        discarding what it still sends until then (CLOSING_TIMEOUT_S)."""
        self.flush()
        if self.transport is None:
            return
        if self.conn is not None and self.conn.sent_close_ok:
            self._read_until_closed(self._closing_timeout())
        else:
            self.transport.close()

    def close_soon(self) -> None:
        """We sent connection.close: wait for the peer's close-ok (CLOSING_TIMEOUT_S), then close."""
        self.flush()
        readable = self.conn is not None and self.conn.reads_input
        self._read_until_closed(self._closing_timeout() if readable else CLOSE_GRACE_S)

    def _closing_timeout(self) -> float:
        heartbeat = self._heartbeat
        return heartbeat if 0 < heartbeat < CLOSING_TIMEOUT_S else CLOSING_TIMEOUT_S

    def _read_until_closed(self, timeout: float) -> None:
        """Keep reading (and discarding, the sans-IO core does) until the peer closes its end,
        or ``timeout`` seconds; the first call sets the deadline."""
        if self.transport.is_closing():
            return
        if self._close_timer is None:
            self._close_timer = self.loop.call_later(timeout, self._force_close)
        if self._blocked or self._throttled:  # nothing held back any more: the input is dropped
            self._blocked = False
            self._drop_throttles()
            self._resume_input()

    def _force_close(self) -> None:
        self._close_timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # --- timers --------------------------------------------------------------------------

    def _handshake_timeout(self) -> None:
        """The handshake deadline passed: drop the client unless open-ok went out (handshake.py)."""
        self._handshake_timer = None
        if self.transport is None or self.transport.is_closing() or not handshake_pending(self.conn):
            return
        log.warning("closing connection from %s: handshake not completed in %gs (%s)",
                    peer_name(self.peer), self.config.handshake_timeout, handshake_stage(self._header, self.conn))
        self.transport.abort()

    def start_heartbeat(self, seconds: int) -> None:
        # the handshake deadline keeps running beside this timer until open-ok
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heartbeat = seconds
        if seconds:
            self._idle_ticks = 0
            self._timer = self.loop.call_later(seconds / 2, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if not self._sent:
            if not self._answer_held:
                self.conn.send_heartbeat()
                self.flush()
            else:
                # output held for a definitions fsync (_hold_answer): what went out so far is whole
                # frames, so a heartbeat may go now, ahead of the held ones (0-10's connection.
                # heartbeat, 1.0's empty frame: their cores make it without queueing it)
                frame = HEARTBEAT_FRAME if type(self.conn) is ServerConnection else self.conn.heartbeat_frame()
                if frame:
                    self.transport.write(frame)
        self._sent = False
        if self._received or self._answer_held:  # held: we are the ones not reading (_hold_answer)
            self._idle_ticks = 0
        else:
            self._idle_ticks += 1
            if self._idle_ticks >= 4:  # two heartbeat intervals of silence
                log.warning("missed heartbeats from client %s, timeout: %ds", self.session, self._heartbeat)
                self._close_reason = f"heartbeat timeout: nothing received for {2 * self._heartbeat}s"
                self.transport.abort()
                return
        self._received = False
        self._timer = self.loop.call_later(self._heartbeat / 2, self._heartbeat_tick)

    # --- shutdown ------------------------------------------------------------------------

    def shutdown(self) -> None:
        if self.session is not None and self.conn.is_open:
            self.session.shutdown()
            self.flush()
            # a publisher held by an alarm or a congested queue is read again: its close-ok
            # must get through (the closing connection discards anything else it sends)
            self._read_until_closed(self._closing_timeout())
        elif self.transport is not None:
            self.transport.close()

    # --- read models: how the HTTP API and Prometheus name a connection

    def peer_address(self) -> tuple[str, int]:
        peer = self.peer  # None before the socket was accepted
        if isinstance(peer, tuple) and len(peer) >= 2:
            return str(peer[0]), int(peer[1])
        return "", 0

    def local_address(self) -> tuple[str, int]:
        if self.local is not None:  # a TLS connection a --workers supervisor relays (warren/server/relay.py)
            return self.local
        transport = self.transport
        sock = transport.get_extra_info("sockname") if transport is not None else None
        if isinstance(sock, tuple) and len(sock) >= 2:
            return str(sock[0]), int(sock[1])
        return "", 0

    def api_name(self) -> str:
        """RabbitMQ's name of a connection, ``peer -> local`` (the HTTP API's and Prometheus')."""
        name = self._api_name
        if name is None:
            (ph, pp), (lh, lp) = self.peer_address(), self.local_address()
            name = self._api_name = f"{ph}:{pp} -> {lh}:{lp}"  # the socket's addresses do not change: worked out once
        return name
