"""The 0-10 connection handler: events of the sans-IO 0-10 connection in, broker operations out.

The same asyncio glue as for 0-9-1 (``warren/server/connection.py``) feeds it the events of
``warren.protocol.amqp0_10.connection.ServerConnection`` (``handle``) and calls ``fail``,
``before_flush``, ``shutdown`` and ``connection_lost``. It is the broker's ``BrokerConnection``
(``warren/broker/connection.py``: the login, shared with 0-9-1, the vhost with its limits and
permissions, end of life) plus what is 0-10's own:

* the connection: login (PLAIN, AMQPLAIN; ANONYMOUS only with ``--anonymous-user``, which names
  the user it logs in as), then the vhost of connection.open; refusals close the connection
  (320 connection-forced for a login, 402 invalid-path or 320 for a vhost, as Qpid's brokers);
* each attached session is a ``SessionChannel`` (``channel.py``, a ``BrokerChannel``); its
  commands are executed there or in ``message.py``, completed at once, after a result, or
  later (a persistent transfer once on disk: ``Confirms``, written once per write batch here);
* a refusal (a ``warren.errors`` exception, or ``ExecutionError`` with a 0-10 code) is answered
  with ``execution.exception`` and the session is detached; its channel closes at once (its
  unsettled messages go back to their queues), other sessions carry on. Our own bugs are
  internal-error (541) with a traceback in the log.
"""

from __future__ import annotations

import itertools
import logging

from warren.broker.connection import BrokerConnection
from warren.broker.later import is_later
from warren.errors import AMQPError, ConnectionAccessRefused, NotAllowed, SoftError
from warren.protocol.amqp0_10 import events as ev
from warren.protocol.amqp0_10.channel import LATER, ExecutionError, SessionChannel
from warren.protocol.amqp0_10.delivery import SessionSink
from warren.protocol.amqp0_10.message import transfer
from warren.protocol.amqp0_10.session import error_code_for
from warren.spec import amqp0_10 as spec

__all__ = ["ConnectionHandler"]

log = logging.getLogger("warren.session")

CLOSE = spec.ConnectionCloseCode
E = spec.ExecutionErrorCode
_TRANSFER = spec.MessageTransfer.INDEX
_PUBLISHER_IDS = itertools.count(1)  # one per 0-10 connection, never reused


class ConnectionHandler(BrokerConnection):
    protocol = "AMQP 0-10"

    def __init__(self, broker, conn, peer: tuple, io, anonymous_user: str | None = None) -> None:
        super().__init__(broker, peer, io)
        directory = broker.directory
        # what its messages carry (no-local queues): unique in the node, as a message keeps it
        # when it crosses to another worker
        self.publisher_id = next(_PUBLISHER_IDS) * directory.workers + (directory.index or 0)
        self.conn = conn  # the sans-IO 0-10 ServerConnection
        self.anonymous_user = anonymous_user
        self._confirming: set[SessionChannel] = set()
        # exclusive queues that are not auto-delete: they outlive this connection, which only
        # holds their lock (Qpid's rule; qpid.messaging's at-least-once topic receivers)
        self.kept_exclusive: set = set()

    def __str__(self) -> str:
        return super().__str__() + " (AMQP 0-10)"

    # --- events --------------------------------------------------------------------------

    def handle(self, event) -> None:
        kind = type(event)
        if kind is ev.Command:
            self._command(event)
        elif kind is ev.Completed:
            self._completed(event)
        elif kind is ev.LoginRequested:
            self._login(event)
        elif kind is ev.OpenRequested:
            self._open(event)
        elif kind is ev.SessionAttached:
            self._attached(event)
        elif kind is ev.SessionDetached:
            self._close_channel(event.channel)
        elif kind is ev.PeerError:
            log.warning("AMQP 0-10 protocol error on connection %s%s: %s (answered: %s %d)", self,
                        "" if event.channel is None else f" channel {event.channel}", event.text, event.answer,
                        event.code)
            if event.answer == "close":
                self.note_close(f"protocol error: {event.text} (connection.close {event.code})")
                self._release()
                self.io.close_soon()
            elif event.answer == "exception":
                self._close_channel(event.channel)
        elif kind is ev.ConnectionClosed:
            if event.by_peer:
                self.note_close(f"client closed the connection ({event.code} {event.text})" if event.text
                                else "client closed the connection")
            self._release()
            self.io.close_after_flush()
        # ExecutionResult / ExecutionException: the broker sends no command that has a result
        self.io.want_flush()

    def _command(self, event) -> None:
        channel = self.channels.get(event.channel)
        if channel is None:
            return  # its session was refused a moment ago: dropped, as the layer drops the rest
        command = event.command
        channel.current = event.command_id
        try:
            if command.INDEX == _TRANSFER:
                self.published = True
                answer = transfer(channel, event)
            else:
                answer = channel.execute(command)
        except ExecutionError as e:
            self._refuse(channel, event, e.code, e.text)
            return
        except AMQPError as e:
            self._refuse(channel, event, error_code_for(e.reply_code), e.text)
            return
        except Exception:
            log.exception("internal error on connection %s session channel %d while handling %r", self,
                          event.channel, event)
            self._refuse(channel, event, E.INTERNAL_ERROR, "internal error")
            return
        if answer is None:
            self.conn.complete(event.channel, event.command_id)
        elif is_later(answer):
            self._complete_later(channel, event, answer)
        elif answer is not LATER:
            self.conn.send_result(event.channel, event.command_id, answer)

    def _complete_later(self, channel: SessionChannel, event, answer) -> None:
        """A command the broker answers later (warren/broker/later.py): nothing more is read
        from the client meanwhile (the next command may depend on it); then it completes, with
        its result if it has one, or the session ends with the refusal's execution.exception."""
        number, command_id = event.channel, event.command_id

        def done(result, error) -> None:
            if channel.closed:
                return
            if error is None:
                if result is None:
                    self.conn.complete(number, command_id)
                else:
                    self.conn.send_result(number, command_id, result)
                self.io.want_flush()
                return
            if isinstance(error, ExecutionError):
                code, text = error.code, error.text
            elif isinstance(error, AMQPError):
                code, text = error_code_for(error.reply_code), error.text
            else:
                log.error("internal error on connection %s session channel %d while handling %s", self, number,
                          event.command.NAME, exc_info=error)
                code, text = E.INTERNAL_ERROR, "internal error"
            self.session_exception(number, command_id, code, text)
        self.io.when_done(answer, done)

    def _refuse(self, channel: SessionChannel, event, code: int, text: str) -> None:
        log.warning("session error on connection %s, channel %d: %s refused: %d %s", self, event.channel,
                    event.command.NAME, code, text)
        self.conn.send_exception(event.channel, event.command_id, code, text)
        self._close_channel(event.channel)

    def session_exception(self, number: int, command_id: int, code: int, text: str) -> None:
        """An exception about an earlier command (a subscription whose queue was deleted)."""
        log.warning("session error on connection %s, channel %d: %d %s", self, number, code, text)
        self.conn.send_exception(number, command_id, code, text)
        self._close_channel(number)
        self.io.want_flush()

    def _completed(self, event) -> None:
        """The client completed our transfers: window-mode subscriptions get their credit back."""
        channel = self.channels.get(event.channel)
        if channel is None or not channel.window:
            return
        window, queues = channel.window, set()
        for i in event.ids:
            entry = window.pop(i, None)
            if entry is not None:
                sub, cost = entry
                sub.give_back(cost)
                queues.add(sub.queue)
        for q in queues:
            q.dispatch()

    def _attached(self, event) -> None:
        self._close_channel(event.channel)  # a forced attach replaced what was there
        try:
            self.admit_channel()  # the user's max-channels: over it, the connection closes
        except AMQPError as error:
            self.fail(error)
            return
        self.channels[event.channel] = SessionChannel(self, event.channel, SessionSink(self, event.channel))

    def _close_channel(self, number) -> None:
        ch = self.channels.pop(number, None)
        if ch is not None:
            ch.close()

    # --- connection ----------------------------------------------------------------------

    def _login(self, event) -> None:
        self.client_properties = event.client_properties or {}
        self.mechanism = event.mechanism
        try:  # ANONYMOUS is offered (and accepted) only with --anonymous-user (warren/access/login.py)
            self.username = self.login(event.mechanism, event.response, self.conn.mechanisms, self.anonymous_user)
        except ConnectionAccessRefused as error:
            if error.throttle_delay:
                self.io.refuse_later(error.throttle_delay, error)
                return
            self._refuse_login(error.log_detail)
            return
        self.conn.accept_login()

    def _refuse_login(self, detail: str) -> None:
        log.warning("connection error on %s: login refused (%s)", self, detail)
        self.note_close(f"{detail} (320 connection-forced)")
        self.conn.refuse_login()  # "Authentication failed" (320), as the --workers supervisor answers
        self._release()
        self.io.close_soon()

    def _open(self, event) -> None:
        self.io.start_heartbeat(self.conn.heartbeat)
        try:
            self.open_vhost(event.virtual_host)
        except AMQPError as error:
            missing = isinstance(error, NotAllowed) and event.virtual_host not in self.broker.vhosts
            self.fail(error, close_code=CLOSE.INVALID_PATH if missing else CLOSE.CONNECTION_FORCED)
            return
        self.conn.accept_open()
        self.io.opened()
        log.info("connection %s opened (client %s)", self, self.client_name)

    def fail(self, error: AMQPError, channel: int | None = None, close_code: int | None = None) -> None:
        """Answer a refusal that no command of the moment caused: a soft error with a session's
        channel (a consumer timeout) ends that session with execution.exception; anything else
        closes the connection (a throttled failed login: 320 after its delay)."""
        if isinstance(error, SoftError) and channel is not None and channel in self.channels:
            self.session_exception(channel, self.channels[channel].current, error_code_for(error.reply_code),
                                   error.text)
            return
        if isinstance(error, ConnectionAccessRefused):
            self._refuse_login(error.log_detail or error.text)
            self.io.want_flush()
            return
        detail = error.log_detail
        text = error.text
        log.warning("connection error on %s: %d %s%s", self, error.reply_code, text, f" ({detail})" if detail else "")
        self.note_close(f"{detail or text} (connection.close)")
        self.conn.close_connection(close_code or CLOSE.CONNECTION_FORCED, text)
        self._release()
        self.io.close_soon()
        self.io.want_flush()

    # --- glue callbacks ------------------------------------------------------------------

    def want_flush(self) -> None:
        self.io.want_flush()

    def want_confirm_flush(self, channel: SessionChannel) -> None:
        self._confirming.add(channel)
        self.io.want_flush()

    def before_flush(self) -> bool:
        """Complete the transfers whose messages reached the disk (one pass per write batch;
        True when some were: warren/server/pacing.py)."""
        if self._confirming:
            for ch in self._confirming:
                ch.flush_confirms()
            self._confirming.clear()
            return True
        return False

    def _release(self) -> None:
        if not self.closed:
            for q in self.kept_exclusive:  # unlocked, kept with their messages (wherever they live)
                self.broker.directory.unlock_kept(self, q)
            self.kept_exclusive.clear()
        super()._release()

    def shutdown(self, reply_text: str = "broker shutdown") -> None:
        self.note_close(f"{reply_text} (320 connection-forced)")
        self.conn.close_connection(CLOSE.CONNECTION_FORCED, reply_text)
        self._release()
        self.io.want_flush()
