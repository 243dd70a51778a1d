"""The 0-10 session layer shared by the server and the client side (INVENTORY.md §11.9, §12.2).

``Endpoint`` reads frames into assemblies, decodes controls and commands, and runs the session
controls the same way for both roles; ``ServerConnection`` (``connection.py``) and
``ClientConnection`` (``client.py``) add the connection controls of their role.

Command ids (P010 §3.4): each direction numbers its commands; the sender's ``command-point``
says which id its next command has (we send ``command-point(0, 0)`` right after ``attached``,
before any command: qpid.messaging counts the broker's ids from it and fails on a command that
comes first). Ids are 32-bit serial numbers; ``Session`` counts them as unbounded integers
internally and converts at the edge, so wrapping past 2**32 changes nothing.

Completion: the user completes each command it got (``complete``; ``send_result`` sends
``execution.result`` first for a command with a result). ``execution.sync`` is handled here: it
completes once every earlier command has. The completed set is reported with
``session.completed`` at the next ``data_to_send`` (so one control per session and batch of
input), always as everything completed that the peer has not acknowledged with
``known-completed``: cumulative, as qpid.messaging expects (it never sends known-completed).
Never sent by this layer on its own, because qpid.messaging has no handler for them (§12.2):
``known-completed`` (only as the answer to a ``completed`` with ``timely-reply``, which that
client never sets), ``expected``/``confirmed`` (only when a ``flush`` asks), ``gap``,
``timeout`` (only as the answer to ``request-timeout``) and ``execution.sync``.

Faults of the peer are answered here: a command that does not decode gets
``execution.exception`` (illegal-argument 531, or not-implemented 540 for an unknown code), then
the session is detached (``session.detach``) and the peer's later commands on it are dropped
until its ``detached``; a command on a channel without a session gets
``session.detached(not-attached)``; a frame, segment or control that does not decode closes the
connection (``connection.close(framing-error)``). Each also yields a ``PeerError`` event for the
log.
"""

from __future__ import annotations

from collections import deque

from warren.codec.amqp0_10.errors import FramingError
from warren.codec.refusals import DECODE_FAILURES, amqp0_10_execution_code, amqp0_10_framing_code, failure_kind
from warren.codec.amqp0_10.frames import (
    SEGMENT_BODY, SEGMENT_COMMAND, SEGMENT_CONTROL, SEGMENT_HEADER, Assembler, AssemblyTooLarge, FrameReader,
    assembly_frames, transfer_frames,
)
from warren.codec.amqp0_10.sets import SEQ_MOD, SequenceSet, serial_diff
from warren.codec.amqp0_10.types import (
    UnknownOp, decode_command, decode_control, decode_header, encode_command, encode_control, encode_header,
)
from warren.protocol.amqp0_10.events import (
    Command, Completed, ConnectionClosed, ExecutionException, ExecutionResult, PeerError, SessionAttached,
    SessionDetached,
)
from warren.spec import amqp0_10 as spec

__all__ = ["Endpoint", "Session", "ATTACHED", "DETACHING", "HEADER", "error_code_for"]

HEADER = b"AMQP\x01\x01\x00\x0a"  # both peers send it (P010 §4.3)
ATTACHED, DETACHING = "attached", "detaching"
E = spec.ExecutionErrorCode
CLOSE = spec.ConnectionCloseCode
DETACH = spec.SessionDetachCode
_SYNC_INDEX = spec.ExecutionSync.INDEX
_RESULT_INDEX = spec.ExecutionResult.INDEX
_EXCEPTION_INDEX = spec.ExecutionException.INDEX
_CONNECTION_CLASS = spec.ConnectionStart.CLASS_CODE
_SESSION_CLASS = spec.SessionAttach.CLASS_CODE
_GAP_MAX = 65536  # ids skipped per session.gap: a hostile range of 2**32 is not walked


def error_code_for(reply_code: int) -> int:
    """The 0-10 ``execution.error-code`` for a 0-9-1 reply code (``warren.errors``): the same
    number where 0-10 has it (403, 404, 405, 406, 530, 540, 541), else the nearest meaning."""
    if reply_code in E._value2member_map_:
        return reply_code
    return {
        311: E.RESOURCE_LIMIT_EXCEEDED,  # content-too-large
        312: E.NOT_FOUND,  # no-route
        320: E.INTERNAL_ERROR,  # connection-forced
        402: E.INVALID_ARGUMENT,  # invalid-path
        501: E.ILLEGAL_ARGUMENT,  # frame-error
        502: E.ILLEGAL_ARGUMENT,  # syntax-error
        504: E.ILLEGAL_STATE,  # channel-error
        505: E.COMMAND_INVALID,  # unexpected-frame
        506: E.RESOURCE_LIMIT_EXCEEDED,  # resource-error
    }.get(reply_code, E.INTERNAL_ERROR)


class Session:
    """State of one attached session: incoming command ids and their completion, outgoing ids
    and what the peer completed (absolute counters; see module docstring)."""

    __slots__ = ("channel", "name", "state", "in_next", "in_low", "in_known", "in_done", "syncs", "inflight",
                 "out_next", "out_low", "out_done", "dirty", "refused")

    def __init__(self, channel: int, name: bytes) -> None:
        self.channel, self.name = channel, name
        self.state = ATTACHED
        self.in_next = 0  # id of the peer's next command (its command-point sets it)
        self.in_low = 0  # every incoming id below is complete
        self.in_known = 0  # ids below are known-completed by the peer: no longer reported
        self.in_done: set[int] = set()  # complete ids at or above in_low (completed out of order)
        self.syncs: list[int] = []  # execution.sync ids waiting for their predecessors
        self.inflight: dict[int, int] = {}  # id -> class/command INDEX of commands not complete yet
        self.out_next = 0  # id of our next command (we announce 0 with command-point)
        self.out_low = 0
        self.out_done: set[int] = set()
        self.dirty = False  # completions not reported yet
        self.refused = False  # the peer's commands are dropped (an exception was sent)

    def incoming(self, wire_id: int) -> int:
        """The absolute id of an incoming wire id (nearest to the next expected one)."""
        return self.in_next + serial_diff(wire_id % SEQ_MOD, self.in_next % SEQ_MOD)

    def outgoing(self, wire_id: int) -> int:
        return self.out_low + serial_diff(wire_id % SEQ_MOD, self.out_low % SEQ_MOD)

    def command_point(self, wire_id: int) -> None:
        """The peer's next command has this id (a new session: nothing earlier is kept)."""
        start = self.in_next if self.in_next % SEQ_MOD == wire_id % SEQ_MOD else wire_id
        if start != self.in_next:
            self.in_next = self.in_low = self.in_known = start
            self.in_done.clear()

    def complete(self, command_id: int) -> bool:
        """Mark an incoming command complete (absolute id); False if it was not pending."""
        self.inflight.pop(command_id, None)
        if command_id < self.in_low or command_id >= self.in_next or command_id in self.in_done:
            return False
        if command_id == self.in_low:
            self.in_low += 1
            done = self.in_done
            while self.in_low in done:
                done.discard(self.in_low)
                self.in_low += 1
        else:
            self.in_done.add(command_id)
        self.dirty = True
        while self.syncs and self.syncs[0] <= self.in_low:
            sync = self.syncs.pop(0)  # every command before it is complete: so is it
            self.complete(sync)
        return True

    def completed_set(self) -> SequenceSet:
        """Everything completed and not known-completed, as wire ranges."""
        ranges = []
        if self.in_low > self.in_known:
            ranges.append((self.in_known % SEQ_MOD, (self.in_low - 1) % SEQ_MOD))
        if self.in_done:
            ranges.extend(SequenceSet.of(self.in_done).ranges)
        return SequenceSet(ranges)

    def known_completed(self, commands: SequenceSet) -> None:
        for lo, hi in commands.ranges:
            a = self.incoming(lo)
            b = a + (hi - lo) % SEQ_MOD
            if a <= self.in_known <= b + 1:
                self.in_known = max(self.in_known, min(b + 1, self.in_low))
            for i in [i for i in self.in_done if a <= i <= b]:
                self.in_done.discard(i)

    def peer_completed(self, commands: SequenceSet) -> list[int]:
        """Record the peer's completion of our commands; the newly completed wire ids."""
        new = []
        for lo, hi in commands.ranges:
            start = self.outgoing(lo)  # a range runs forward from lo to hi (it may wrap)
            a, b = max(start, self.out_low), min(start + (hi - lo) % SEQ_MOD, self.out_next - 1)
            for i in range(a, b + 1):
                if i not in self.out_done:
                    self.out_done.add(i)
                    new.append(i % SEQ_MOD)
        while self.out_low in self.out_done:
            self.out_done.discard(self.out_low)
            self.out_low += 1
        return new


class Endpoint:
    """Frames, assemblies, the session controls and the command flow of one 0-10 connection, for
    either role (module docstring). Subclasses handle the connection controls
    (``_connection_control``) and decide when sessions may exist (``_sessions_allowed``)."""

    role = ""  # "server" or "client"
    channel_max = 0  # the highest channel a session may attach on; 0: none negotiated (65535)

    def __init__(self, max_frame_size: int = 0xFFFF, max_message_size: int = 128 << 20) -> None:
        self.reader = FrameReader()
        self.assembler = Assembler(max_body=max_message_size)
        self.frame_max = max_frame_size  # for what we send; the peer may send up to 65535 (§12.3)
        self.sessions: dict[int, Session] = {}
        self._names: dict[bytes, int] = {}  # session name -> channel
        self._out: list = []
        self._events: deque = deque()
        self._broken = False  # after a framing error nothing more is parsed
        self._not_attached_told: set[int] = set()
        self.closing = False  # we sent connection.close and wait for close-ok
        self.closed = False
        self.sent_close_ok = False  # the peer closed and we answered (the glue then waits for its EOF)
        self.out_bytes = 0  # octets queued since the last data_to_send (a sink's batch limit)

    # --- input -----------------------------------------------------------------------------

    def receive_data(self, data) -> None:
        self.reader.compact()
        if not self._broken and not self.closed:
            self.reader.feed(data)

    def next_event(self):
        """The next event, or None when more octets are needed. Never raises for the peer's
        mistakes: they are answered and reported as ``PeerError``."""
        events = self._events
        while not events:
            if self._broken or self.closed:
                return None
            try:
                frame = self.reader.next_frame()
                if frame is None:
                    return None
                flags, seg_type, track, channel, start, end = frame
                if self.closing and seg_type != SEGMENT_CONTROL:
                    continue  # we are closing: only close-ok (or close) matters
                try:
                    assembly = self.assembler.add(flags, seg_type, track, channel, bytes(self.reader.buf[start:end]))
                except AssemblyTooLarge as e:
                    self._too_large(e)
                    continue
            except FramingError as e:
                self._framing_error(str(e))
                continue
            if assembly is None:
                continue
            if assembly.track == 0:
                self._control(assembly.channel, assembly.segments[0][1])
            else:
                self._command(assembly)
        return events.popleft()

    def _framing_error(self, text: str) -> None:
        """A frame or segment that breaks the framing: close, and parse nothing more (frame
        boundaries can no longer be trusted; the caller closes the socket after a grace time)."""
        self._protocol_error(text)
        self._broken = True

    def _protocol_error(self, text: str) -> None:
        """A control out of place or undecodable inside sound frames: connection.close with
        framing-error (0-10's close codes have nothing closer), input read until close-ok."""
        code = amqp0_10_framing_code()  # warren/codec/refusals.py: framing-error, 0-10's only close code for it
        self.close_connection(code, text)
        self._events.append(PeerError(None, text, "close", code))

    def _too_large(self, e: AssemblyTooLarge) -> None:
        session = self.sessions.get(e.channel)
        if session is None or session.state != ATTACHED or session.refused:
            return
        command_id = session.in_next  # the id the oversized assembly takes
        session.in_next += 1
        self._refuse(session, command_id, E.RESOURCE_LIMIT_EXCEEDED, str(e))

    def _control(self, channel: int, payload: bytes) -> None:
        try:
            ctl = decode_control(payload)
        except UnknownOp as e:
            self._protocol_error(f"{e} on channel {channel}")
            return
        except DECODE_FAILURES as e:
            self._protocol_error(f"malformed control on channel {channel}: {e}")
            return
        if self.closing:
            if ctl.INDEX in (spec.ConnectionClose.INDEX, spec.ConnectionCloseOk.INDEX):
                self._connection_control(channel, ctl)
            return
        if ctl.CLASS_CODE == _CONNECTION_CLASS:
            if channel != 0:
                self._protocol_error(f"{ctl.NAME} on channel {channel} (connection controls use channel 0)")
                return
            self._connection_control(channel, ctl)
        elif not self._sessions_allowed():
            self._protocol_error(f"{ctl.NAME} before the connection is open")
        else:
            self._session_control(channel, ctl)

    def _connection_control(self, channel: int, ctl) -> None:  # pragma: no cover - subclasses
        raise NotImplementedError

    def _sessions_allowed(self) -> bool:  # pragma: no cover - subclasses
        raise NotImplementedError

    # --- session controls --------------------------------------------------------------------

    def _session_control(self, channel: int, ctl) -> None:
        kind = type(ctl)
        session = self.sessions.get(channel)
        if kind is spec.SessionAttach:
            self._on_attach(channel, ctl)
            return
        if kind is spec.SessionAttached:
            self._on_attached(channel, ctl)
            return
        if kind is spec.SessionDetach:
            name = ctl.name or b""
            self._send_control(channel, spec.SessionDetached(name=name, code=DETACH.NORMAL if session and
                                                             session.name == name else DETACH.NOT_ATTACHED))
            if session is not None and session.name == name:
                self._drop_session(session)
                self._events.append(SessionDetached(channel, session.name, DETACH.NORMAL, True))
            return
        if kind is spec.SessionDetached:
            # about our session on the channel: its name, or none when the peer says the channel
            # has no session (not-attached); a refusal of another attach leaves ours alone
            if session is not None and (ctl.name == session.name or not ctl.name):
                self._drop_session(session)
                self._events.append(SessionDetached(channel, session.name,
                                                    DETACH.NORMAL if ctl.code is None else ctl.code,
                                                    session.state == ATTACHED))
            return
        if session is None:
            self._not_attached(channel, f"{ctl.NAME} on channel {channel}, where no session is attached")
            return
        if session.state != ATTACHED:
            return  # detaching: only detach/detached matter
        if kind is spec.SessionCommandPoint:
            session.command_point(ctl.command_id or 0)
        elif kind is spec.SessionCompleted:
            if ctl.commands:
                new = session.peer_completed(ctl.commands)
                if new:
                    self._events.append(Completed(channel, new))
            if ctl.timely_reply:
                self._send_control(channel, spec.SessionKnownCompleted(commands=ctl.commands or SequenceSet()))
        elif kind is spec.SessionKnownCompleted:
            if ctl.commands:
                session.known_completed(ctl.commands)
        elif kind is spec.SessionFlush:
            if ctl.expected:
                n = session.in_next % SEQ_MOD
                self._send_control(channel, spec.SessionExpected(commands=SequenceSet([(n, n)])))
            if ctl.confirmed:
                self._send_control(channel, spec.SessionConfirmed(commands=session.completed_set()))
            if ctl.completed:
                self._send_completed(session)
        elif kind is spec.SessionGap:
            for lo, hi in (ctl.commands.ranges if ctl.commands else ()):
                a = session.incoming(lo)
                b = a + min((hi - lo) % SEQ_MOD, _GAP_MAX)
                while a <= session.in_next <= b:  # ids that will never come: complete, move on
                    session.in_next += 1
                    session.complete(session.in_next - 1)
        elif kind is spec.SessionRequestTimeout:
            # detached sessions are not kept: the timeout we grant is 0 (P010 allows it)
            self._send_control(channel, spec.SessionTimeout(timeout=0))
        # session.timeout, expected, confirmed: nothing to do (we keep no detached state and
        # treat confirmed as completed)

    def _on_attach(self, channel: int, ctl) -> None:
        name = ctl.name or b""
        channel_max = self.channel_max or 0xFFFF
        if channel > channel_max:
            self._protocol_error(f"session.attach on channel {channel}, above channel-max {channel_max}")
            return
        current = self.sessions.get(channel)
        if current is not None:
            if current.name == name and current.state == ATTACHED:
                self._send_control(channel, spec.SessionAttached(name=name))  # attached already
                return
            self._send_control(channel, spec.SessionDetached(name=name, code=DETACH.TRANSPORT_BUSY))
            self._events.append(PeerError(channel, f"session.attach on channel {channel}, which holds another "
                                          "session", "detached", DETACH.TRANSPORT_BUSY))
            return
        other = self._names.get(name)
        if other is not None:
            if not ctl.force:
                self._send_control(channel, spec.SessionDetached(name=name, code=DETACH.SESSION_BUSY))
                self._events.append(PeerError(channel, f"session {name!r} is attached on channel {other}",
                                              "detached", DETACH.SESSION_BUSY))
                return
            old = self.sessions[other]  # force: it moves here (no state is kept across attachments)
            self._drop_session(old)
            self._events.append(SessionDetached(other, name, DETACH.SESSION_BUSY, True))
        session = self._new_session(channel, name)
        self._send_control(channel, spec.SessionAttached(name=name))
        # before any command of ours: qpid.messaging numbers our commands from it (§12.1 step 6)
        self._send_control(channel, spec.SessionCommandPoint(command_id=0, command_offset=0))
        self._events.append(SessionAttached(channel, session.name))

    def _on_attached(self, channel: int, ctl) -> None:  # the client side overrides it
        self._not_attached(channel, f"session.attached on channel {channel}, which did not attach")

    def _new_session(self, channel: int, name: bytes) -> Session:
        session = self.sessions[channel] = Session(channel, name)
        self._names[name] = channel
        self._not_attached_told.discard(channel)
        return session

    def _drop_session(self, session: Session) -> None:
        self.sessions.pop(session.channel, None)
        if self._names.get(session.name) == session.channel:
            del self._names[session.name]
        self.assembler.drop_channel(session.channel)

    def _not_attached(self, channel: int, text: str) -> None:
        if channel in self._not_attached_told:
            return  # once per channel until an attach: a pipelining peer gets one answer
        self._not_attached_told.add(channel)
        self._send_control(channel, spec.SessionDetached(name=b"", code=DETACH.NOT_ATTACHED))
        self._events.append(PeerError(channel, text, "detached", DETACH.NOT_ATTACHED))

    # --- commands --------------------------------------------------------------------------------

    def _command(self, assembly) -> None:
        channel = assembly.channel
        if not self._sessions_allowed():
            self._protocol_error(f"command on channel {channel} before the connection is open")
            return
        session = self.sessions.get(channel)
        if session is None:
            self._not_attached(channel, f"command on channel {channel}, where no session is attached")
            return
        if session.state != ATTACHED or session.refused:
            return  # after our exception or detach: dropped until the peer's detached
        command_id = session.in_next
        session.in_next += 1
        segments = assembly.segments
        try:
            cmd, sync = decode_command(segments[0][1])
        except UnknownOp as e:
            self._refuse(session, command_id, E.NOT_IMPLEMENTED, str(e), e.class_code, e.code)
            return
        except DECODE_FAILURES as e:  # the refusal of warren/codec/refusals.py's table
            self._refuse(session, command_id, amqp0_10_execution_code(failure_kind(e)), f"malformed command: {e}",
                         segments[0][1][0] if segments[0][1] else 0,
                         segments[0][1][1] if len(segments[0][1]) > 1 else 0)
            return
        header = body = None
        for seg_type, payload in segments[1:]:
            if seg_type == SEGMENT_HEADER:
                if not cmd.HEADER:
                    self._refuse(session, command_id, E.COMMAND_INVALID, f"{cmd.NAME} takes no header segment",
                                 cmd.CLASS_CODE, cmd.CODE)
                    return
                try:
                    header = decode_header(payload)
                except DECODE_FAILURES as e:
                    self._refuse(session, command_id, amqp0_10_execution_code(failure_kind(e)),
                                 f"malformed header of {cmd.NAME}: {e}",
                                 cmd.CLASS_CODE, cmd.CODE)
                    return
            elif seg_type == SEGMENT_BODY:
                if not cmd.BODY:
                    self._refuse(session, command_id, E.COMMAND_INVALID, f"{cmd.NAME} takes no body segment",
                                 cmd.CLASS_CODE, cmd.CODE)
                    return
                body = payload
        index = cmd.INDEX
        if index == _SYNC_INDEX:
            session.syncs.append(command_id)
            if command_id <= session.in_low:
                session.syncs.remove(command_id)
                session.complete(command_id)
            return
        wire_id = command_id % SEQ_MOD
        if index == _RESULT_INDEX:
            session.complete(command_id)
            self._events.append(ExecutionResult(channel, cmd.command_id, cmd.value))
            return
        if index == _EXCEPTION_INDEX:
            session.complete(command_id)
            self._events.append(ExecutionException(channel, cmd))
            return
        session.inflight[command_id] = index
        self._events.append(Command(channel, session.name, wire_id, cmd, sync, header, body))

    def _refuse(self, session: Session, command_id: int, code: int, text: str, class_code: int | None = None,
                command_code: int | None = None) -> None:
        self._events.append(PeerError(session.channel, text, "exception", code))
        self._exception(session, command_id, code, text, class_code, command_code)

    def _exception(self, session: Session, command_id: int, code: int, text: str, class_code=None,
                   command_code=None, field_index=None, error_info=None) -> None:
        """execution.exception, then detach: the session's state is dropped (P010 §3.4.1.3)."""
        if class_code is None:
            index = session.inflight.get(command_id)
            if index is not None:
                class_code, command_code = index >> 8, index & 0xFF
        description = text.encode("utf-8", "surrogateescape")[:0xFFFF].decode("utf-8", "ignore")
        self._send_command(session, spec.ExecutionException(
            error_code=code, command_id=command_id % SEQ_MOD, class_code=class_code, command_code=command_code,
            field_index=field_index, description=description, error_info=error_info))
        session.refused = True
        self._detach(session)

    def _detach(self, session: Session) -> None:
        if session.state == ATTACHED:
            session.state = DETACHING
            self._send_control(session.channel, spec.SessionDetach(name=session.name))

    # --- what the user calls -------------------------------------------------------------------

    def complete(self, channel: int, command_id: int) -> None:
        """The command (wire id, as in its ``Command`` event) is executed; reported with the
        next ``data_to_send``. Ignored for a session that is gone."""
        session = self.sessions.get(channel)
        if session is not None and session.state == ATTACHED:
            session.complete(session.incoming(command_id))

    def send_result(self, channel: int, command_id: int, value) -> None:
        """``execution.result`` for a command with a result (a coded struct), then complete it."""
        session = self.sessions.get(channel)
        if session is None or session.state != ATTACHED:
            return
        self._send_command(session, spec.ExecutionResult(command_id=command_id % SEQ_MOD, value=value))
        session.complete(session.incoming(command_id))

    def send_exception(self, channel: int, command_id: int, error_code: int, description: str,
                       field_index: int | None = None, error_info: dict | None = None) -> None:
        """Refuse a command: ``execution.exception`` with a 0-10 error code (``error_code_for``
        maps a 0-9-1 reply code), then the session is detached. ``SessionDetached`` follows
        when the peer answers."""
        session = self.sessions.get(channel)
        if session is None or session.state != ATTACHED or session.refused:
            return
        self._exception(session, session.incoming(command_id), error_code, description,
                        field_index=field_index, error_info=error_info)

    def send_command(self, channel: int, command, sync: bool = False, header=None, body=None) -> int:
        """Send a command (with header structs and body for a transfer); its wire id."""
        session = self.sessions.get(channel)
        if session is None or session.state != ATTACHED:
            raise KeyError(f"no session attached on channel {channel}")
        return self._send_command(session, command, sync, header, body)

    def send_transfer(self, channel: int, destination: str, body, delivery_properties=None,
                      message_properties=None, accept_mode: int = 0, acquire_mode: int = 0,
                      sync: bool = False) -> int:
        """``message.transfer`` with its header (the properties given) and body; its wire id."""
        header = [s for s in (delivery_properties, message_properties) if s is not None]
        return self.send_command(channel, spec.MessageTransfer(destination=destination, accept_mode=accept_mode,
                                                               acquire_mode=acquire_mode),
                                 sync, header, body if body is not None else b"")

    def send_encoded_transfer(self, channel: int, command: bytes, header: bytes, body) -> int:
        """``send_transfer`` with its command and header segments already encoded (the broker's
        delivery path: a subscription's transfer command is the same octets every time, and
        headers are cached); a body of None sends no body segment. Its wire id."""
        session = self.sessions.get(channel)
        if session is None or session.state != ATTACHED:
            raise KeyError(f"no session attached on channel {channel}")
        frames = transfer_frames(channel, command, header, body, self.frame_max)
        self._out.extend(frames)
        self.out_bytes += sum(map(len, frames)) if len(frames) > 1 else len(frames[0])
        command_id = session.out_next
        session.out_next += 1
        return command_id % SEQ_MOD

    def detach(self, channel: int) -> None:
        """Detach a session (``SessionDetached`` follows the peer's answer)."""
        session = self.sessions.get(channel)
        if session is not None:
            self._detach(session)

    def close_connection(self, code: int, text: str = "") -> None:
        """connection.close; input is then discarded until the peer's close-ok."""
        if self.closing or self.closed:
            return
        self.closing = True
        self._send_control(0, spec.ConnectionClose(reply_code=code, reply_text=_str8(text)))
        self.sessions.clear()
        self._names.clear()

    def send_heartbeat(self) -> None:
        self._send_control(0, spec.ConnectionHeartbeat())

    def heartbeat_frame(self) -> bytes | None:
        """One connection.heartbeat, not queued: the glue writes it itself while this
        connection's output is held (what went out so far is whole assemblies, and a
        channel-0 control may go between them); None before the connection is open."""
        if not self.is_open:
            return None
        frames = assembly_frames(0, [(SEGMENT_CONTROL, encode_control(spec.ConnectionHeartbeat()))], self.frame_max)
        return b"".join(bytes(f) for f in frames)

    def data_to_send(self) -> list:
        """Everything queued for the peer (session.completed of each session with new
        completions first), for one ``writelines``."""
        for session in self.sessions.values():
            if session.dirty and session.state == ATTACHED:
                self._send_completed(session)
        out = self._out
        self._out = []
        self.out_bytes = 0
        return out

    @property
    def has_output(self) -> bool:
        return bool(self._out) or any(s.dirty for s in self.sessions.values())

    @property
    def reads_input(self) -> bool:
        return not self._broken

    # --- output ----------------------------------------------------------------------------------

    def _send_completed(self, session: Session) -> None:
        session.dirty = False
        self._send_control(session.channel, spec.SessionCompleted(commands=session.completed_set()))

    def _send_control(self, channel: int, ctl) -> None:
        frames = assembly_frames(channel, [(SEGMENT_CONTROL, encode_control(ctl))], self.frame_max)
        self._out.extend(frames)
        self.out_bytes += sum(map(len, frames))
        if type(ctl) is spec.ConnectionCloseOk:
            self.sent_close_ok = True

    def _send_command(self, session: Session, command, sync: bool = False, header=None, body=None) -> int:
        segments = [(SEGMENT_COMMAND, encode_command(command, sync))]
        if header is not None:
            segments.append((SEGMENT_HEADER, encode_header(header)))
        if body is not None:
            segments.append((SEGMENT_BODY, body))
        frames = assembly_frames(session.channel, segments, self.frame_max)
        self._out.extend(frames)
        self.out_bytes += sum(map(len, frames))
        command_id = session.out_next
        session.out_next += 1
        return command_id % SEQ_MOD

    def _closed(self, code: int, text: str, by_peer: bool) -> None:
        self.closing = False
        self.closed = True
        self.sessions.clear()
        self._names.clear()
        self._events.append(ConnectionClosed(code, text, by_peer))


def _str8(text: str) -> str:
    b = text.encode("utf-8", "surrogateescape")
    return text if len(b) <= 255 else b[:255].decode("utf-8", "ignore")

