"""The 0-9-1 connection handler (and the 0-8 family's, through its dialects): protocol events
in, broker operations and 0-9-1 answers out.

The asyncio glue (``warren/server/connection.py``) feeds every event of the sans-IO
``ServerConnection`` to ``handle`` and every protocol error to ``fail``; the handler calls back
into the glue through ``io`` (``want_flush``, ``close_after_flush``, ``start_heartbeat``) and
never touches a socket. It is the broker's ``BrokerConnection`` (``warren/broker/connection.py``:
user, vhost, channels, limits, end of life) plus the connection class (login, tune, open), the
channels' 0-9-1 handlers (``channel.py``) and publisher confirms written once per write batch.
basic.publish goes straight to ``BrokerChannel.publish``: that is the hot path.

Error policy (one place): a ``SoftError`` closes its channel, a ``HardError`` closes the
connection, anything else is our bug: 541 INTERNAL_ERROR and a traceback. An error raised
without class and method ids gets those of the method being handled. Each refusal is logged
with who (peer, user, vhost, channel) and what.
"""

from __future__ import annotations

import logging
import sys

from warren.broker.connection import BrokerConnection
from warren.errors import AMQPError, ConnectionAccessRefused, InternalError, NotImplemented_, SoftError
from warren.protocol.amqp0_9_1.channel import Channel
from warren.protocol.amqp0_9_1.delivery import ChannelSink
from warren.protocol.amqp0_9_1.connection import PUBLISH_RUN_MAX
from warren.protocol.events import Acks, ChannelClosed, ChannelOpened, Content, ConnectionClosed, Method, Publishes
from warren.spec import amqp0_9_1 as spec

__all__ = ["ConnectionHandler"]

log = logging.getLogger("warren.session")

_START_OK = spec.ConnectionStartOk.INDEX
_TUNE_OK = spec.ConnectionTuneOk.INDEX
_OPEN = spec.ConnectionOpen.INDEX
_UPDATE_SECRET = spec.ConnectionUpdateSecret.INDEX
# The events that carry the method being handled: an error raised without class and method ids
# gets theirs. The others (Acks, channel and connection ends) have no method; ack_run names
# basic.ack in its own errors.
_METHOD_EVENTS = frozenset((Method, Content, Publishes))


class ConnectionHandler(BrokerConnection):
    """``publish_runs`` (``Config.publish_runs``, docs/configuration.md): when consecutive
    publishes are taken as one run (one Publishes event, ``BrokerChannel.publish_run``). None,
    the default: once one of the connection's channels is in confirm mode, where runs halve the
    broker's cost per confirmed publish and the publisher waits on the broker, and for the
    publishes of a large read while the broker is behind two connections (``backlog_read``); without
    confirms a lone publisher the broker keeps up with gets slower (docs/performance.md, "Runs of
    publishes"). True: from the start; False: never."""

    def __init__(self, broker, conn, peer: tuple, io, publish_runs: bool | None = None) -> None:
        super().__init__(broker, peer, io)
        self.conn = conn  # the sans-IO ServerConnection
        # channels with confirms to write at the next flush; made by the first confirm.select
        # (confirms_selected), as only confirming channels ask: 216 B less per idle connection
        self._confirming: set[Channel] | None = None
        self._confirm_runs = publish_runs is not False
        self.sinks_flushing: list[ChannelSink] = []  # sinks that asked for the next flush (delivery.py)
        conn.channel_admit = self._admit_channel  # the user's max-channels, before open-ok
        if publish_runs:
            conn.publish_run_max = PUBLISH_RUN_MAX  # consecutive publishes as one Publishes event
        elif publish_runs is False:
            conn.backlog_read = 0  # not even the publishes of a read that found the broker behind

    # --- events --------------------------------------------------------------------------

    def handle(self, event) -> None:
        channel = event.channel  # 0 for a ConnectionClosed
        try:
            kind = type(event)
            if kind is Content:
                self.published = True
                m = event.method  # basic.publish: straight to the operation (the hot path)
                if m.immediate:  # RabbitMQ 3.x refuses it the same way
                    raise NotImplemented_("immediate=true")
                self.channels[event.channel].publish(m.exchange, m.routing_key, event.properties, event.body,
                                                     m.mandatory)
            elif kind is Method:
                if event.channel == 0:
                    self._connection_method(event.method)
                else:
                    self.channels[event.channel].handle_method(event.method)
            elif kind is Publishes:  # a run of publishes with the same method (after the two
                # above: a run is one event for many messages, the others pay no extra test)
                self.published = True
                m = event.method
                if m.immediate:
                    raise NotImplemented_("immediate=true")
                done = self.channels[event.channel].publish_run(m.exchange, m.routing_key, event.properties,
                                                                event.bodies, m.mandatory)
                if done < len(event.bodies):  # flow control paused us: the rest is read later
                    self.conn.unread(Publishes(event.channel, m, event.properties[done:], event.bodies[done:]))
            elif kind is Acks:  # basic.ack frames taken together (warren/codec/acks.py)
                self.channels[event.channel].ack_run(event.tags)
            elif kind is ChannelOpened:
                self.channels[event.channel] = Channel(self, event.channel, ChannelSink(self, event.channel))
            elif kind is ChannelClosed:
                ch = self.channels.pop(event.channel, None)
                if ch is not None:
                    ch.close()
            elif kind is ConnectionClosed:
                # when the broker started the close, note_close kept that cause already
                self.note_close(f"client closed the connection ({event.reply_code} {event.reply_text})"
                                if event.reply_text else "client closed the connection")
                self._release()
                self.io.close_after_flush()
        except AMQPError as e:
            if not (e.class_id or e.method_id) and type(event) in _METHOD_EVENTS:
                e.class_id, e.method_id = event.method.CLASS_ID, event.method.METHOD_ID
            self.fail(e, channel)
        except Exception:
            log.exception("internal error on connection %s channel %d while handling %r", self, channel, event)
            self.fail(InternalError("internal error"), channel)

    def confirms_selected(self) -> None:
        """A channel entered confirm mode: its confirms are coalesced per flush from now on,
        and runs of publishes are taken unless ``publish_runs`` is False."""
        if self._confirming is None:
            self._confirming = set()
        if self._confirm_runs:
            self.conn.publish_run_max = PUBLISH_RUN_MAX

    def fail(self, error: AMQPError, channel: int | None = None) -> None:
        """Answer a refusal: channel.close for a soft error, connection.close for a hard one."""
        if channel is None:
            channel = error.channel
        self.unmovable = True  # a replay elsewhere would not close what this closes (placement.py)
        if isinstance(error, SoftError) and channel:
            log.warning("channel error on connection %s, channel %d: %d %s", self, channel,
                        error.reply_code, error.reply_text)
            self.conn.close_channel(channel, error)
            ch = self.channels.pop(channel, None)
            if ch is not None:
                ch.close()
        else:
            detail = error.log_detail  # what the client is not told (why a login failed)
            log.warning("connection error on %s: %d %s%s", self, error.reply_code, error.reply_text,
                        f" ({detail})" if detail else "")
            self.note_close(error.close_reason)
            self.conn.close_connection(error.reply_code, error.reply_text, error.class_id, error.method_id)
            self._release()
            self.io.close_soon()
        self.io.want_flush()

    # --- connection class ----------------------------------------------------------------

    def _connection_method(self, m) -> None:
        index = m.INDEX
        if index == _START_OK:
            self.client_properties = m.client_properties
            self.mechanism = sys.intern(m.mechanism)  # one "PLAIN" for every connection, not one each
            caps = m.client_properties.get("capabilities")
            self.capabilities = caps if isinstance(caps, dict) else {}
            try:  # PLAIN, AMQPLAIN, EXTERNAL on verified TLS: every protocol's one step (warren/access/login.py)
                username = self.login(m.mechanism, m.response, start_offer=self.conn.mechanisms)
            except ConnectionAccessRefused as error:
                if error.throttle_delay:
                    self.io.refuse_later(error.throttle_delay, error)  # the answer waits; nothing else does
                    return
                raise
            self.username = username
            self.conn.accept_login()
        elif index == _TUNE_OK:
            self.io.start_heartbeat(self.conn.heartbeat)
        elif index == _OPEN:
            self.open_vhost(m.virtual_host)  # 530 when refused (warren/broker/connection.py)
            self.conn.accept_open()
            self.io.opened()  # no longer an unauthenticated connection (warren/server/limits.py)
            log.info("connection %s opened (client %s)", self, self.client_name)
        elif index == _UPDATE_SECRET:
            self.conn.send_method(0, spec.ConnectionUpdateSecretOk())
        self.io.want_flush()

    def _admit_channel(self, channel: int) -> None:
        """channel.open (the protocol core asks before open-ok): the user's max-channels."""
        self.admit_channel()


    # --- glue callbacks ------------------------------------------------------------------

    def want_flush(self) -> None:
        self.io.want_flush()

    def want_confirm_flush(self, channel: Channel) -> None:
        self._confirming.add(channel)
        self.io.want_flush()

    def before_flush(self) -> bool:
        """Coalesce publisher confirms: one basic.ack per channel per write batch (True when
        some were written: warren/server/pacing.py). The sinks that asked for this flush ask
        again for the next one."""
        if self.sinks_flushing:
            for sink in self.sinks_flushing:
                sink.flush_asked = False
            self.sinks_flushing.clear()
        if self._confirming:
            for ch in self._confirming:
                ch.flush_confirms()
            self._confirming.clear()
            return True
        return False

    def shutdown(self, reply_text: str = "broker shutdown") -> None:
        """Server-initiated close (320 CONNECTION_FORCED), e.g. on SIGTERM."""
        self.note_close(f"{reply_text} (320 CONNECTION_FORCED)")
        self.conn.close_connection(320, f"CONNECTION_FORCED - {reply_text}")
        self._release()
        self.io.want_flush()
