"""Sans-IO server side of an AMQP 1.0 connection: bytes in, events out, bytes to send.

No sockets and no asyncio. The caller has read the client's 8-octet header, ``AMQP 3 1 0 0``
(SASL first, part 5 §5.3) or ``AMQP 0 1 0 0`` (no SASL layer), then::

    conn = ServerConnection(sasl=True, mechanisms=("PLAIN",), ...)  # queues our header (+ mechanisms)
    conn.receive_data(data)                                           # what came after that header
    while (event := conn.next_event()) is not None:
        ...act on the event (warren.protocol.amqp1_0.events): sasl_accept, accept_open,
        accept_attach, send_transfer, settle_incoming, detach_link, close_connection...
    transport.write(b"".join(conn.data_to_send()))

The layers, in order (``Phase``): the SASL exchange (sasl-mechanisms, the client's sasl-init, our
sasl-outcome; the client then sends ``AMQP 0 1 0 0`` again and we answer it), the client's open
and ours (§2.4.1), then sessions and links until close. The connection decides nothing about
logins, virtual hosts or addresses: it stops at ``SaslInit``, ``OpenRequested`` and
``AttachRequested`` until the adapter answers (input after them waits, so a client's pipelined
frames are read only once its login and open are settled).

Errors (§2.8.15 ff.): what breaks a link detaches it with an error (a transfer beyond the credit
granted: ``amqp:link:transfer-limit-exceeded``; a message past ``max_message_size``:
``amqp:link:message-size-exceeded``); what breaks a session ends it (a frame naming an
unattached handle: ``amqp:session:unattached-handle``; an attach on a handle in use:
``amqp:session:handle-in-use``; a transfer beyond our window: ``amqp:session:window-violation``);
anything else closes the connection (octets that do not decode: ``amqp:decode-error``; a
broken frame header or a frame larger than our max-frame-size: ``amqp:connection:framing-error``;
a performative the state does not allow: ``amqp:illegal-state``; a frame on a channel no session
began on: ``amqp:not-found``). Each answer is also a ``PeerError`` event, for the log. After
our close, input is read and dropped until the client's close.

Past 600 lines on purpose: every performative's handler and the state it checks are in this one
file (the bookkeeping they share, windows and credit, is ``session.py``).
"""

from __future__ import annotations

import enum
import struct

from warren.codec.amqp1_0.frames import EMPTY_FRAME, FRAME_AMQP, FRAME_SASL, FrameReader, FramingError, encode_frame, split_body
from warren.codec.amqp1_0.types import DecodeError, Symbol, as_list
from warren.protocol.amqp1_0 import events as ev
from warren.protocol.amqp1_0.session import INCOMING_WINDOW, LINK_CREDIT, OUTGOING_WINDOW, Link, Session, serial_add
from warren.spec import amqp1_0 as spec

__all__ = ["ServerConnection", "Phase", "HEADER_SASL", "HEADER_AMQP", "MAX_FRAME_SIZE"]

HEADER_SASL = b"AMQP\x03\x01\x00\x00"
HEADER_AMQP = b"AMQP\x00\x01\x00\x00"
MAX_FRAME_SIZE = 131_072  # octets: our max-frame-size (RabbitMQ's default frame_max)
_TRANSFER_FRAME_MAX = 1 << 20  # our outgoing frames stay below this whatever the client allows
E, CE, SE, LE = spec.AmqpError, spec.ConnectionError, spec.SessionError, spec.LinkError


class Phase(enum.Enum):
    SASL_INIT = "waiting for sasl-init"
    SASL_DECIDING = "checking the login"
    AMQP_HEADER = "waiting for the AMQP 0 1 0 0 header after SASL"
    AWAIT_OPEN = "waiting for open"
    OPENING = "opening the virtual host"
    OPEN = "open"
    CLOSE_SENT = "close sent, waiting for the client's"
    CLOSED = "closed"


class _Protocol:
    """What the HTTP API and the logs call this protocol."""

    title = "AMQP 1.0"
    key = "1.0"


def _error(condition, description: str | None = None):
    return spec.Error(condition=Symbol(condition.value if isinstance(condition, enum.Enum) else condition),
                      description=description)


class ServerConnection:
    """One server-side AMQP 1.0 connection (see module docstring)."""

    dialect = _Protocol()

    def __init__(self, sasl: bool = True, mechanisms=("PLAIN",), container_id: str = "warren",
                 max_frame_size: int = MAX_FRAME_SIZE, channel_max: int = 0xFFFF, idle_timeout_ms: int = 60_000,
                 max_message_size: int = 128 << 20, properties: dict | None = None) -> None:
        self.frame_max = max_frame_size  # ours: what the client may send
        self.channel_max = channel_max
        self.idle_timeout_ms = idle_timeout_ms
        self.max_message_size = max_message_size
        self.container_id = container_id
        self.properties = properties or {}
        self.mechanisms = tuple(mechanisms)
        self.sasl = sasl
        self.reader = FrameReader(max_frame_size)
        self._out: list[bytes] = []
        self.out_bytes = 0
        self._events: list = []
        self._pending_dispositions: dict[int, list] = {}  # channel -> [[first, last, state]]
        self._grants: list = []  # (session, link): credit to grant when output is next written
        self.sessions: dict[int, Session] = {}
        self.peer_open = None
        self.peer_frame_max = 512  # until the client's open says more (§2.4.1 MIN-MAX-FRAME-SIZE)
        self.heartbeat = 0  # seconds the glue's heartbeat timer uses (the HTTP API's "timeout")
        self.sent_close_ok = False  # we answered the client's close: the client closes the socket
        self.closed = False
        self._broken = False  # the frame layer is broken: nothing more can be read
        if sasl:
            self.phase = Phase.SASL_INIT
            self._write(HEADER_SASL)
            self._send(0, spec.SaslMechanisms(sasl_server_mechanisms=[Symbol(m) for m in self.mechanisms]), FRAME_SASL)
        else:
            # no SASL layer: the adapter still decides (as an ANONYMOUS login) before open is read
            self.phase = Phase.SASL_DECIDING
            self._write(HEADER_AMQP)
            self._events.append(ev.SaslInit("", b"", None))

    # --- the caller's side -------------------------------------------------------------------------

    def receive_data(self, data) -> None:
        self.reader.feed(data)

    def next_event(self):
        """The next event, or None when more octets are needed (or the adapter must answer first)."""
        while not self._events:
            if self.closed or self._broken or self.phase in (Phase.SASL_DECIDING, Phase.OPENING):
                return None
            if self.phase is Phase.AMQP_HEADER:
                header = self.reader.maybe_header()
                if header is None:
                    return None
                self._amqp_header(header)
                continue
            try:
                frame = self.reader.maybe_frame()
            except FramingError as e:
                self._broken = True
                self._fail_connection(CE.FRAMING_ERROR, str(e))
                return self._events.pop(0) if self._events else None
            if frame is None:
                return None
            self._frame(frame)
        return self._events.pop(0)

    def data_to_send(self) -> list[bytes]:
        if self._grants:
            self._flush_grants()
        if self._pending_dispositions:
            self._flush_dispositions()
        out, self._out = self._out, []
        self.out_bytes = 0
        return out

    def send_heartbeat(self) -> None:
        if self.phase in (Phase.OPEN, Phase.OPENING, Phase.CLOSE_SENT):
            self._write(EMPTY_FRAME)

    def heartbeat_frame(self) -> bytes | None:
        """An empty frame, not queued: the glue writes it itself while this connection's output
        is held (what went out so far is whole frames); None where none may go."""
        return EMPTY_FRAME if self.phase in (Phase.OPEN, Phase.OPENING, Phase.CLOSE_SENT) else None

    # --- properties the glue and the HTTP API read ------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.phase is Phase.OPEN

    @property
    def reads_input(self) -> bool:
        return not self._broken and not self.closed

    @property
    def handshake_pending(self) -> bool:
        return self.phase not in (Phase.OPEN, Phase.CLOSED, Phase.CLOSE_SENT)

    @property
    def handshake_stage(self) -> str:
        return self.phase.value + " (AMQP 1.0)"

    @property
    def frames(self):
        return self.reader

    publish_start = -1  # --worker-mode queues moves 0-9-1 connections only

    # --- output ------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self._out.append(data)
        self.out_bytes += len(data)

    def _send(self, channel: int, performative, frame_type: int = FRAME_AMQP, payload: bytes = b"") -> None:
        self._write(encode_frame(channel, performative, payload, frame_type))

    # --- SASL (part 5 §5.3) ------------------------------------------------------------------------

    def sasl_accept(self) -> None:
        """The login is good: sasl-outcome ok (then the client sends its AMQP header again)."""
        if self.phase is not Phase.SASL_DECIDING:
            return
        if self.sasl:
            self._send(0, spec.SaslOutcome(code=spec.SaslCode.OK), FRAME_SASL)
            self.phase = Phase.AMQP_HEADER
        else:
            self.phase = Phase.AWAIT_OPEN

    accept_login = sasl_accept  # the --workers supervisor's name for it (warren/server/workers.py)

    def sasl_refuse(self, code: int = spec.SaslCode.AUTH, description: str = "") -> None:
        """The login failed: sasl-outcome ``code`` and nothing more (the glue closes the socket);
        without a SASL layer: our open, then close with amqp:unauthorized-access."""
        if self.phase is not Phase.SASL_DECIDING:
            return
        if self.sasl:
            self._send(0, spec.SaslOutcome(code=code), FRAME_SASL)
            self.phase = Phase.CLOSED
            self.closed = True
        else:
            self.phase = Phase.AWAIT_OPEN
            self.close_connection(E.UNAUTHORIZED_ACCESS, description or "SASL is required")

    def refuse_login(self) -> None:
        """A refused login, as the adapter and the ``--workers`` supervisor both answer it:
        sasl-outcome auth; without a SASL layer, close with amqp:unauthorized-access "login refused"."""
        self.sasl_refuse(spec.SaslCode.AUTH, "login refused")

    def _sasl_frame(self, performative) -> None:
        if type(performative) is spec.SaslInit and self.phase is Phase.SASL_INIT:
            self.phase = Phase.SASL_DECIDING
            self._events.append(ev.SaslInit(str(performative.mechanism), performative.initial_response or b"",
                                            performative.hostname))
            return
        self._sasl_abort(f"unexpected {performative.NAME} while {self.phase.value}")

    def _sasl_abort(self, text: str) -> None:
        """A broken SASL exchange: sasl-outcome sys-perm, then close (there is no close frame yet)."""
        if self.phase in (Phase.SASL_INIT, Phase.SASL_DECIDING):
            self._send(0, spec.SaslOutcome(code=spec.SaslCode.SYS_PERM), FRAME_SASL)
        self.phase = Phase.CLOSED
        self.closed = True
        self._events.append(ev.PeerError("connection", "sasl", text))

    def _amqp_header(self, header: bytes) -> None:
        self._write(HEADER_AMQP)
        if header != HEADER_AMQP:
            self.phase = Phase.CLOSED
            self.closed = True
            self._events.append(ev.PeerError("connection", "header", f"expected AMQP 0 1 0 0 after SASL, got {header!r}"))
            return
        self.phase = Phase.AWAIT_OPEN

    # --- frames ------------------------------------------------------------------------------------

    def _frame(self, frame) -> None:
        if not frame.body:
            return  # an empty frame: a heartbeat (its arrival is what counts; the glue sees the octets)
        try:
            body = frame.body
            split = split_transfer(body) if body[:3] == _TRANSFER else None  # the usual publish: by hand
            performative, payload = split if split is not None else split_body(body)
        except DecodeError as e:
            if self.phase is Phase.CLOSE_SENT:
                return
            if frame.type == FRAME_SASL or self.phase in (Phase.SASL_INIT, Phase.SASL_DECIDING):
                self._sasl_abort(f"undecodable SASL frame: {e}")
                return
            self._fail_connection(E.DECODE_ERROR, str(e))
            return
        if self.phase in (Phase.SASL_INIT, Phase.SASL_DECIDING):
            if frame.type != FRAME_SASL:
                self._sasl_abort(f"AMQP frame ({performative.NAME}) during the SASL exchange")
                return
            self._sasl_frame(performative)
            return
        if frame.type != FRAME_AMQP:
            self._fail_connection(CE.FRAMING_ERROR, f"SASL frame {performative.NAME} after the SASL exchange")
            return
        if "frame" not in performative.PROVIDES:
            self._fail_connection(E.DECODE_ERROR, f"{performative.NAME} is not a performative")
            return
        kind = type(performative)
        if self.phase is Phase.CLOSE_SENT:
            if kind is spec.Close:
                self.phase = Phase.CLOSED
                self.closed = True
                self._events.append(ev.ConnectionClosed(False, performative.error))
            return  # after our close, everything else is dropped (§2.4.3)
        if kind is spec.Close:
            self._send(0, spec.Close())
            self.sent_close_ok = True
            self.phase = Phase.CLOSED
            self.closed = True
            self._events.append(ev.ConnectionClosed(True, performative.error))
            return
        if self.phase is Phase.AWAIT_OPEN:
            if kind is not spec.Open:
                self._fail_connection(E.ILLEGAL_STATE, f"{performative.NAME} before open")
                return
            self._open(performative)
            return
        if kind is spec.Open:
            self._fail_connection(E.ILLEGAL_STATE, "a second open")
            return
        channel = frame.channel
        if kind is spec.Begin:
            self._begin(channel, performative)
            return
        session = self.sessions.get(channel)
        if session is None:
            self._fail_connection(E.NOT_FOUND, f"{performative.NAME} on channel {channel}, where no session began")
            return
        if kind is spec.End:
            self._end(session, performative)
            return
        if session.ending:
            return  # we ended it with an error: dropped until the client's end (§2.5.5)
        handler = self._SESSION_HANDLERS.get(kind)
        handler(self, session, performative, payload)

    def _open(self, o) -> None:
        self.peer_open = o
        self.peer_frame_max = max(spec.MIN_MAX_FRAME_SIZE, min(o.max_frame_size or 0xFFFFFFFF, _TRANSFER_FRAME_MAX))
        self.channel_max = min(self.channel_max, o.channel_max if o.channel_max is not None else 0xFFFF)
        # Idle time-out (§2.4.5): the glue's one interval serves both ways: we send an empty frame
        # after half of it without output, and drop a client silent for two. Ours is the
        # client's when it asked for one (frames within it are what it expects of us), so it
        # knows how often it must send; else our default.
        theirs = o.idle_time_out or 0
        if theirs:
            self.idle_timeout_ms = max(1000, min(int(theirs), 3_600_000))
        ms = self.idle_timeout_ms
        self.heartbeat = (ms // 1000 if ms % 1000 == 0 else ms / 1000) if ms else 0  # seconds, an int when whole
        self.phase = Phase.OPENING
        self._events.append(ev.OpenRequested(o.hostname, o.container_id, dict(o.properties or {})))

    def _our_open(self):
        return spec.Open(container_id=self.container_id, max_frame_size=self.frame_max,
                         channel_max=self.channel_max, idle_time_out=self.idle_timeout_ms or None,
                         properties={Symbol(k): v for k, v in self.properties.items()} or None)

    def accept_open(self) -> None:
        if self.phase is Phase.OPENING:
            self._send(0, self._our_open())
            self.phase = Phase.OPEN

    def refuse_open(self, condition, description: str) -> None:
        """An open we refuse (its vhost missing or not the user's) is not answered: the glue
        closes the socket (after its grace second), as RabbitMQ 4 does (rabbit_amqp_reader: an
        error before the connection runs closes it silently, after 3 s). §2.4.2 would have our open then a close with the error, but
        RabbitMQ's AMQP 1.0 Python client takes a close right after the open for a lost connection
        and reconnects until it gives up; a refused open is an error it raises at once.
        ``condition`` and ``description`` are the log's (the adapter writes it)."""
        if self.phase is Phase.OPENING:
            self.phase = Phase.CLOSED
            self.closed = True

    def close_connection(self, condition=None, description: str | None = None) -> None:
        """Close with an error (or none); input is dropped until the client's close."""
        if self.phase in (Phase.CLOSE_SENT, Phase.CLOSED):
            return
        if self.sasl and self.phase in (Phase.SASL_INIT, Phase.SASL_DECIDING, Phase.AMQP_HEADER):
            if self.phase is not Phase.AMQP_HEADER:  # no close frame in the SASL layer: its outcome
                self._send(0, spec.SaslOutcome(code=spec.SaslCode.SYS), FRAME_SASL)
            self.phase = Phase.CLOSED
            self.closed = True
            return
        if self.phase in (Phase.SASL_DECIDING, Phase.AWAIT_OPEN):
            self._send(0, self._our_open())  # a close needs an open before it (§2.4.1)
        self._send(0, spec.Close(error=_error(condition, description) if condition is not None else None))
        self.phase = Phase.CLOSE_SENT

    def _fail_connection(self, condition, text: str) -> None:
        self.close_connection(condition, text)
        value = condition.value if isinstance(condition, enum.Enum) else condition
        self._events.append(ev.PeerError("connection", value, text))

    # --- sessions ----------------------------------------------------------------------------------

    def _begin(self, channel: int, b) -> None:
        if channel in self.sessions:
            self._fail_connection(E.NOT_ALLOWED, f"begin on channel {channel}, where a session is begun already")
            return
        if channel > self.channel_max:
            self._fail_connection(CE.FRAMING_ERROR, f"begin on channel {channel}, above channel-max {self.channel_max}")
            return
        if b.remote_channel is not None:
            self._fail_connection(E.NOT_ALLOWED, "begin answering a session the broker never began")
            return
        session = self.sessions[channel] = Session(channel, b)
        self._send(channel, spec.Begin(remote_channel=channel, next_outgoing_id=0, incoming_window=INCOMING_WINDOW,
                                       outgoing_window=OUTGOING_WINDOW, handle_max=session.handle_max))
        self._events.append(ev.SessionBegun(channel))

    def _end(self, session: Session, e) -> None:
        del self.sessions[session.channel]
        if session.ending:
            return  # the answer to our end: the adapter was told when we ended it
        self._send(session.channel, spec.End())
        self._events.append(ev.SessionEnded(session.channel, True, e.error))

    def end_session(self, channel: int, condition, description: str) -> None:
        """End a session with an error (the adapter is told with SessionEnded)."""
        session = self.sessions.get(channel)
        if session is None or session.ending:
            return
        session.ending = True
        self._send(channel, spec.End(error=_error(condition, description)))
        self._events.append(ev.SessionEnded(channel, False))

    def _fail_session(self, session: Session, condition, text: str) -> None:
        self.end_session(session.channel, condition, text)
        self._events.append(ev.PeerError("session", condition.value, text, session.channel))

    def _link(self, session: Session, handle, what: str) -> Link | None:
        link = session.links.get(handle) if handle is not None else None
        if link is None:
            self._fail_session(session, SE.UNATTACHED_HANDLE, f"{what} on handle {handle}, which is not attached")
        return link

    def _attach(self, session: Session, a, payload) -> None:
        if a.handle in session.links:
            self._fail_session(session, SE.HANDLE_IN_USE, f"attach on handle {a.handle}, which is in use")
            return
        if a.handle > session.handle_max:
            self._fail_session(session, SE.ERRANT_LINK, f"attach on handle {a.handle}, above handle-max {session.handle_max}")
            return
        # the client's role says who sends: a receiver (True) receives from us
        session.links[a.handle] = Link(a.handle, a.name, a.role is True or a.role == 1, a)
        self._events.append(ev.AttachRequested(session.channel, a.handle, a))

    def accept_attach(self, channel: int, handle: int, source, target, snd_settle_mode: int | None = None,
                      max_message_size: int | None = None, offered_capabilities=None) -> None:
        """Answer the client's attach; on a link the client sends on, grant it credit."""
        session = self.sessions.get(channel)
        link = session.links.get(handle) if session is not None else None
        if link is None:
            return
        a = link.attach
        self._send(channel, spec.Attach(
            name=a.name, handle=handle, role=not link.sending,
            snd_settle_mode=a.snd_settle_mode if snd_settle_mode is None else snd_settle_mode,
            rcv_settle_mode=spec.ReceiverSettleMode.FIRST, source=source, target=target,
            initial_delivery_count=0 if link.sending else None,
            max_message_size=max_message_size if not link.sending else None,
            offered_capabilities=offered_capabilities))
        if not link.sending:
            link.delivery_count = a.initial_delivery_count or 0
            self._grant(session, link)

    def refuse_attach(self, channel: int, handle: int, condition, description: str) -> None:
        """Answer with an attach without our terminus (the client's echoed, as RabbitMQ 4 does),
        then detach with the error (§2.6.3)."""
        session = self.sessions.get(channel)
        link = session.links.get(handle) if session is not None else None
        if link is None:
            return
        a = link.attach
        source, target = (None, a.target) if link.sending else (a.source, None)
        self._send(channel, spec.Attach(name=a.name, handle=handle, role=not link.sending, source=source,
                                        target=target, snd_settle_mode=a.snd_settle_mode,
                                        rcv_settle_mode=a.rcv_settle_mode,
                                        initial_delivery_count=0 if link.sending else None))
        self.detach_link(channel, handle, condition, description)

    def detach_link(self, channel: int, handle: int, condition=None, description: str | None = None) -> None:
        """Detach (closed) a link, with an error or none; the client's transfers on it are dropped
        until its own detach."""
        session = self.sessions.get(channel)
        link = session.links.get(handle) if session is not None else None
        if link is None or link.detached:
            return
        link.detached = True
        link.partial = None
        self._send(channel, spec.Detach(handle=handle, closed=True,
                                        error=_error(condition, description) if condition is not None else None))

    def _fail_link(self, session: Session, link: Link, condition, text: str) -> None:
        self.detach_link(session.channel, link.handle, condition, text)
        self._events.append(ev.PeerError("link", condition.value, text, session.channel, link.handle))

    def _detach(self, session: Session, d, payload) -> None:
        link = self._link(session, d.handle, "detach")
        if link is None:
            return
        del session.links[d.handle]
        if link.detached:
            return  # the answer to our detach
        self._send(session.channel, spec.Detach(handle=d.handle, closed=d.closed))
        self._events.append(ev.LinkDetached(session.channel, d.handle, bool(d.closed), d.error))

    # --- flow, credit, windows ---------------------------------------------------------------------

    def _flow(self, session: Session, f, payload) -> None:
        opened = session.remote_incoming_window <= 0
        session.window_from(f)
        link = None
        if f.handle is not None:
            link = self._link(session, f.handle, "flow")
            if link is None:
                return
            if link.detached:
                return
            if link.sending:
                session.link_credit(link, f)
                self._events.append(ev.CreditChanged(session.channel, link.handle, link.drain))
            elif f.delivery_count is not None:
                link.delivery_count = f.delivery_count
        if opened and session.remote_incoming_window > 0:
            self._events.append(ev.CreditChanged(session.channel, None))
        if f.echo:
            self._send_flow(session, link)

    def _send_flow(self, session: Session, link: Link | None = None, drain: bool = False) -> None:
        flow = spec.Flow(next_incoming_id=session.next_incoming_id, incoming_window=session.incoming_window,
                         next_outgoing_id=session.next_outgoing_id, outgoing_window=OUTGOING_WINDOW)
        if link is not None:
            flow.handle = link.handle
            flow.delivery_count = link.delivery_count
            flow.link_credit = link.credit
            flow.drain = drain or link.drain
            if link.sending:
                flow.available = 0
        self._send(session.channel, flow)

    def _grant(self, session: Session, link: Link) -> None:
        """Credit for a link the client sends on, granted when our output is next written (the
        flow goes out then): a client that sends beyond what it was granted before that, such as
        transfers pipelined behind its attach, is refused (transfer-limit-exceeded)."""
        self._grants.append((session, link))

    def _flush_grants(self) -> None:
        grants, self._grants = self._grants, []
        for session, link in grants:
            if link.detached or self.sessions.get(session.channel) is not session or session.ending:
                continue
            if link.credit < LINK_CREDIT // 2 or not link.granted:
                link.credit = LINK_CREDIT
                link.granted = True
                self._send_flow(session, link)

    def credit(self, channel: int, handle: int) -> int:
        """Deliveries a link we send on may take now (0 as well when the session window is shut)."""
        session = self.sessions.get(channel)
        link = session.links.get(handle) if session is not None else None
        if link is None or link.detached or session.ending or session.remote_incoming_window <= 0:
            return 0
        return link.credit

    def drained(self, channel: int, handle: int) -> None:
        """Nothing more to send on a draining link: spend its credit and say so (§2.6.7)."""
        session = self.sessions.get(channel)
        link = session.links.get(handle) if session is not None else None
        if link is None or link.detached or not link.drain:
            return
        link.delivery_count = serial_add(link.delivery_count, link.credit)
        link.credit = 0
        self._send_flow(session, link, drain=True)

    # --- transfers ---------------------------------------------------------------------------------

    def _transfer(self, session: Session, t, payload) -> None:
        link = self._link(session, t.handle, "transfer")
        if link is None:
            return
        if session.incoming_window <= 0:
            self._fail_session(session, SE.WINDOW_VIOLATION, "transfer beyond the session's incoming window")
            return
        session.next_incoming_id = serial_add(session.next_incoming_id, 1)
        session.incoming_window -= 1
        if session.incoming_window < INCOMING_WINDOW // 2:
            session.incoming_window = INCOMING_WINDOW
            self._send_flow(session)
        if link.detached:
            return  # detached by us: dropped until the client's detach
        if link.sending:
            self._fail_session(session, SE.ERRANT_LINK, f"transfer on handle {t.handle}, a link the broker sends on")
            return
        if link.partial is None:  # the first frame of a delivery
            if t.aborted:
                return
            if link.credit <= 0:
                self._fail_link(session, link, LE.TRANSFER_LIMIT_EXCEEDED,
                                f"transfer on link '{link.name}' without credit (granted {LINK_CREDIT} at a time)")
                return
            if t.delivery_id is None:
                self._fail_connection(E.INVALID_FIELD, "the first transfer of a delivery carries no delivery-id")
                return
            link.credit -= 1
            link.delivery_count = serial_add(link.delivery_count, 1)
            link.partial = bytearray()
            link.partial_id = t.delivery_id
            link.partial_tag = t.delivery_tag or b""
            link.partial_settled = False
        if t.aborted:
            link.partial = None
            return
        if t.settled:
            link.partial_settled = True
        if len(link.partial) + len(payload) > self.max_message_size:
            self._fail_link(session, link, LE.MESSAGE_SIZE_EXCEEDED,
                            f"message on link '{link.name}' larger than {self.max_message_size} octets")
            return
        link.partial += payload
        if t.more:
            return
        body, link.partial = bytes(link.partial), None
        self._events.append(ev.MessageReceived(session.channel, link.handle, link.partial_id, link.partial_settled, body))
        if link.credit < LINK_CREDIT // 2:
            self._grant(session, link)

    def send_transfer(self, channel: int, handle: int, tag: bytes, payload: bytes, settled: bool) -> int:
        """Deliver ``payload`` (an encoded message) on a link we send on; returns its delivery-id.
        The caller checked ``credit`` first. Split into frames of the client's max-frame-size."""
        session = self.sessions[channel]
        link = session.links[handle]
        delivery_id = session.next_delivery_id
        session.next_delivery_id = serial_add(delivery_id, 1)
        link.delivery_count = serial_add(link.delivery_count, 1)
        link.credit -= 1
        if len(tag) < 256:  # the usual delivery: one frame, its transfer encoded here (transfer_frame)
            frame = transfer_frame(channel, handle, delivery_id, tag, settled, payload)
            if len(frame) <= self.peer_frame_max:
                self._write(frame)
                session.next_outgoing_id = serial_add(session.next_outgoing_id, 1)
                session.remote_incoming_window -= 1
                return delivery_id
        first = spec.Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0,
                              settled=settled)
        head = len(encode_frame(channel, first)) + 16  # room for "more" and the size forms
        room = max(64, self.peer_frame_max - head)
        off, n = 0, len(payload)
        while True:
            chunk = payload[off:off + room]
            off += len(chunk)
            more = off < n
            t = first if first is not None else spec.Transfer(handle=handle)
            t.more = more
            self._send(channel, t, FRAME_AMQP, chunk)
            first = None
            session.next_outgoing_id = serial_add(session.next_outgoing_id, 1)
            session.remote_incoming_window -= 1
            if not more:
                return delivery_id

    # --- dispositions ------------------------------------------------------------------------------

    def _disposition(self, session: Session, d, payload) -> None:
        if d.role is not True and d.role != 1:
            return  # the client (as sender) settling its own transfers to us: nothing to do
        last = d.last if d.last is not None else d.first
        self._events.append(ev.DispositionReceived(session.channel, d.first, last, bool(d.settled), d.state))
        if not d.settled and d.state is not None:  # the client settles second: we settle now (§2.6.12)
            self._send(session.channel, spec.Disposition(role=False, first=d.first, last=last, settled=True,
                                                         state=d.state))

    def settle_incoming(self, channel: int, delivery_id: int, state) -> None:
        """Settle a transfer the client sent (unsettled) with ``state``; consecutive ones with the
        same outcome go out as one disposition (at ``data_to_send``)."""
        if channel not in self.sessions:
            return
        ranges = self._pending_dispositions.setdefault(channel, [])
        if ranges:
            last = ranges[-1]
            if last[2] is state and serial_add(last[1], 1) == delivery_id:
                last[1] = delivery_id
                return
        ranges.append([delivery_id, delivery_id, state])

    def _flush_dispositions(self) -> None:
        pending, self._pending_dispositions = self._pending_dispositions, {}
        for channel, ranges in pending.items():
            if channel not in self.sessions:
                continue
            for first, last, state in ranges:
                self._send(channel, spec.Disposition(role=True, first=first, last=None if last == first else last,
                                                     settled=True, state=state))

    _SESSION_HANDLERS = {spec.Attach: _attach, spec.Detach: _detach, spec.Flow: _flow, spec.Transfer: _transfer,
                         spec.Disposition: _disposition}


def outcome_name(state) -> str:
    return state.NAME if state is not None else "none"


def capabilities(value) -> list:
    return [str(v) for v in as_list(value)]


_FRAME_HEAD = struct.Struct(">IBBH")
_TRANSFER = b"\x00\x53\x14"  # the transfer performative's descriptor (smallulong 0x14)


def _uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return bytes((0x52, v))
    return b"\x70" + v.to_bytes(4, "big")


def transfer_frame(channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes) -> bytes:
    """One frame holding a whole delivery: the octets ``encode_frame`` makes of
    ``Transfer(handle, delivery_id, tag, message_format=0, settled)`` and the
    payload, without the composite encoder (one per delivery: the consumer's hot path).
    ``tag`` is shorter than 256 octets (vbin8)."""
    fields = b"".join((_uint(handle), _uint(delivery_id), b"\xa0", bytes((len(tag),)), tag, b"\x43",
                       b"\x41" if settled else b"\x42"))  # more: false, the default, left off (part 1 §1.4)
    size = len(fields) + 1
    listed = b"\xc0" + bytes((size, 5)) if size < 256 else b"\xd0" + (size + 3).to_bytes(4, "big") + b"\x00\x00\x00\x05"
    head = _TRANSFER + listed + fields
    return _FRAME_HEAD.pack(8 + len(head) + len(payload), 2, FRAME_AMQP, channel) + head + payload


# what split_transfer reads of each field of a transfer: the types a value may have
_UINT, _BIN, _BOOL, _NULL = (int,), (bytes,), (bool,), ()
_TRANSFER_FIELDS = (_UINT, _UINT, _BIN, _UINT, _BOOL, _BOOL, _NULL, _NULL, _BOOL, _BOOL, _BOOL)
_TRANSFER_DEFAULTS = tuple(f.default for f in spec.Transfer.FIELDS)
_TRANSFER_NAMES = tuple(f.name for f in spec.Transfer.FIELDS)


def split_transfer(body: bytes):
    """(Transfer, payload) of a frame body holding a transfer in the forms clients send
    (``transfer_frame``'s, Proton's, rhea's): uints, a binary tag, booleans and nulls in a list8
    or list32. None for anything else, which ``split_body`` then decodes (and refuses when
    malformed): this is a shortcut, never a second decoder's verdict."""
    try:
        return _split_transfer(body)
    except IndexError:  # cut short: split_body says how
        return None


def _split_transfer(body: bytes):
    n = len(body)
    code = body[3] if n > 3 else 0
    if code == 0xC0 and n >= 6:
        count, pos, end = body[5], 6, 5 + body[4]
    elif code == 0xD0 and n >= 12:
        count, pos, end = int.from_bytes(body[8:12], "big"), 12, 8 + int.from_bytes(body[4:8], "big")
    else:
        return None
    if not 0 < count <= 11 or end > n:
        return None
    values = []
    for i in range(count):
        if pos >= end:
            return None
        c = body[pos]
        if c == 0x40:
            v, pos = None, pos + 1
        elif c == 0x43:
            v, pos = 0, pos + 1
        elif c == 0x52:
            v, pos = body[pos + 1], pos + 2
        elif c == 0x70:
            v, pos = int.from_bytes(body[pos + 1:pos + 5], "big"), pos + 5
        elif c == 0x41 or c == 0x42:
            v, pos = c == 0x41, pos + 1
        elif c == 0xA0:
            length = body[pos + 1]
            v, pos = body[pos + 2:pos + 2 + length], pos + 2 + length
        else:
            return None
        if v is not None and type(v) not in _TRANSFER_FIELDS[i]:
            return None
        values.append(v)
    if pos != end or values[0] is None:
        return None
    t = spec.Transfer.__new__(spec.Transfer)
    for i, name in enumerate(_TRANSFER_NAMES):
        v = values[i] if i < count else None
        setattr(t, name, _TRANSFER_DEFAULTS[i] if v is None else v)
    return t, body[end:]
