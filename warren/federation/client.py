"""The outgoing AMQP 0-9-1 client of shovels and federation links, on the broker's event loop.

Why Warren's own client mode (``warren/protocol/client.py``, sans-IO) under a small asyncio
protocol, rather than aiormq: a shovel must forward a message as it came. aiormq gives every
published message without a ``message-id`` a random one, and re-encodes the properties it
decoded; here the property list travels as the octets received (decoded only when a header is
added), through the same frame and field codecs as the server's side. The client is also
small enough to own its back-pressure (the transport's write buffer), its confirm window and
its heartbeats, with no extra dependency and no lock or timer per published message.

What it does: connects to one ``Endpoint`` (TCP, or TLS for ``amqps``), logs in (PLAIN or
AMQPLAIN), keeps heartbeats both ways (a peer silent for two intervals is dropped), opens
channels, runs each channel's synchronous methods in order (``Channel.call``), hands deliveries
to a consumer callback, and tracks publisher confirms (``Channel.publish`` returns a future
resolved True on ``basic.ack``, False on ``basic.nack``). Anything fatal (socket lost, the
peer's ``connection.close``) fails every pending future with ``LinkError`` and resolves
``Client.closed`` with the reason; a peer's ``channel.close`` fails that channel only.
Reconnecting is the caller's business (``warren/federation/links.py``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import itertools
import time
from collections import deque

from warren.errors import AMQPError
from warren.federation.uri import Endpoint
from warren.protocol.client import ClientConnection, Closed, Heartbeat, Opened
from warren.protocol.events import Content, Method
from warren.spec import amqp0_9_1 as spec

__all__ = ["Client", "Channel", "LinkError", "ChannelClosedError", "connect"]

log = logging.getLogger("warren.federation")

WRITE_HIGH = 1 << 20  # the transport pauses us past this many buffered octets
_tags = itertools.count(1)


class LinkError(Exception):
    """The connection (or a channel) failed; ``str()`` is the reason shown in status."""


class ChannelClosedError(LinkError):
    def __init__(self, reply_code: int, reply_text: str) -> None:
        super().__init__(f"{reply_code} {reply_text}")
        self.reply_code, self.reply_text = reply_code, reply_text


# synchronous replies: request class -> reply class
_REPLIES = {
    spec.ChannelOpen: spec.ChannelOpenOk, spec.ChannelClose: spec.ChannelCloseOk,
    spec.BasicQos: spec.BasicQosOk, spec.ConfirmSelect: spec.ConfirmSelectOk,
    spec.QueueDeclare: spec.QueueDeclareOk, spec.QueueBind: spec.QueueBindOk,
    spec.QueueUnbind: spec.QueueUnbindOk, spec.QueueDelete: spec.QueueDeleteOk,
    spec.QueuePurge: spec.QueuePurgeOk,
    spec.ExchangeDeclare: spec.ExchangeDeclareOk, spec.ExchangeDelete: spec.ExchangeDeleteOk,
    spec.ExchangeBind: spec.ExchangeBindOk, spec.ExchangeUnbind: spec.ExchangeUnbindOk,
    spec.BasicConsume: spec.BasicConsumeOk, spec.BasicCancel: spec.BasicCancelOk,
}


class Channel:
    """One open channel of a ``Client``."""

    def __init__(self, client: "Client", number: int) -> None:
        self.client = client
        self.number = number
        self.open = False
        self.closed_reason: LinkError | None = None
        self._rpc: deque = deque()  # (reply class, future), in request order
        self.confirming = False
        self._next_seq = 1
        self._confirms: dict[int, asyncio.Future] = {}  # publish seq -> future, ascending
        self.consumers: dict[str, object] = {}  # consumer tag -> callback(channel, deliver, props, body)
        self.on_cancel = None  # callback(consumer_tag) when the server cancels a consumer
        self.unconfirmed_limit_waiter: asyncio.Future | None = None

    # --- synchronous methods ----------------------------------------------------------------

    async def call(self, method):
        """Send ``method`` and wait for its reply (raises ChannelClosedError/LinkError)."""
        self._check()
        fut = self.client.loop.create_future()
        self._rpc.append((_REPLIES[type(method)], fut))
        self.client.send(self.number, method)
        return await fut

    async def qos(self, prefetch_count: int) -> None:
        await self.call(spec.BasicQos(0, prefetch_count, False))

    async def confirm_select(self) -> None:
        await self.call(spec.ConfirmSelect())
        self.confirming = True

    async def declare_queue(self, name: str, passive=False, durable=True, exclusive=False, auto_delete=False,
                            arguments: dict | None = None):
        return await self.call(spec.QueueDeclare(0, name, passive, durable, exclusive, auto_delete, False,
                                                 arguments or {}))

    async def declare_exchange(self, name: str, type_: str, passive=False, durable=True, auto_delete=False,
                               internal=False, arguments: dict | None = None):
        return await self.call(spec.ExchangeDeclare(0, name, type_, passive, durable, auto_delete, internal, False,
                                                    arguments or {}))

    async def bind_queue(self, queue: str, exchange: str, routing_key: str, arguments: dict | None = None):
        return await self.call(spec.QueueBind(0, queue, exchange, routing_key, False, arguments or {}))

    async def bind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict | None = None):
        return await self.call(spec.ExchangeBind(0, destination, source, routing_key, False, arguments or {}))

    async def unbind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict | None = None):
        return await self.call(spec.ExchangeUnbind(0, destination, source, routing_key, False, arguments or {}))

    async def delete_queue(self, name: str):
        return await self.call(spec.QueueDelete(0, name, False, False, False))

    async def delete_exchange(self, name: str):
        return await self.call(spec.ExchangeDelete(0, name, False, False))

    async def consume(self, queue: str, callback, no_ack: bool = False, arguments: dict | None = None,
                      tag: str = "") -> str:
        # our own tag, registered before the request: deliveries may follow consume-ok in the
        # same read, before the awaiting caller runs again
        tag = tag or f"warren-{self.number}-{next(_tags)}"
        self.consumers[tag] = callback
        try:
            await self.call(spec.BasicConsume(0, queue, tag, False, no_ack, False, False, arguments or {}))
        except BaseException:
            self.consumers.pop(tag, None)
            raise
        return tag

    async def cancel(self, tag: str) -> None:
        await self.call(spec.BasicCancel(tag, False))
        self.consumers.pop(tag, None)

    async def close(self) -> None:
        if self.open and not self.client.is_closed:
            try:
                await self.call(spec.ChannelClose(200, "bye", 0, 0))
            except LinkError:
                pass
        self.open = False

    # --- asynchronous methods ---------------------------------------------------------------

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        if self.open and not self.client.is_closed:
            self.client.send(self.number, spec.BasicAck(delivery_tag, multiple))

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        if self.open and not self.client.is_closed:
            self.client.send(self.number, spec.BasicNack(delivery_tag, multiple, requeue))

    def publish(self, exchange: str, routing_key: str, properties: bytes, body: bytes,
                mandatory: bool = False) -> asyncio.Future | None:
        """Write one message; in confirm mode a future resolved True (ack) or False (nack)."""
        self._check()
        self.client.send_content(self.number, spec.BasicPublish(0, exchange, routing_key, mandatory, False),
                                 properties, body)
        if not self.confirming:
            return None
        fut = self.client.loop.create_future()
        self._confirms[self._next_seq] = fut
        self._next_seq += 1
        return fut

    @property
    def unconfirmed(self) -> int:
        return len(self._confirms)

    # --- from the client --------------------------------------------------------------------

    def _check(self) -> None:
        if self.closed_reason is not None:
            raise self.closed_reason
        if self.client.closed_reason is not None:
            raise self.client.closed_reason

    def _method(self, method) -> None:
        kind = type(method)
        if kind is spec.BasicAck or kind is spec.BasicNack:
            self._confirmed(method.delivery_tag, method.multiple, kind is spec.BasicAck)
            return
        if kind is spec.ChannelClose:
            self._fail(ChannelClosedError(method.reply_code, method.reply_text))
            return
        if kind is spec.BasicCancel:  # the server cancelled a consumer (queue deleted...)
            self.consumers.pop(method.consumer_tag, None)
            if self.on_cancel is not None:
                self.on_cancel(method.consumer_tag)
            return
        if kind is spec.ChannelOpenOk:
            self.open = True
        if self._rpc and kind is self._rpc[0][0]:
            _, fut = self._rpc.popleft()
            if not fut.done():
                fut.set_result(method)
            if kind is spec.ChannelCloseOk:
                self.open = False
                self._fail(LinkError("channel closed"))

    def _content(self, method, properties: bytes, body: bytes) -> None:
        if type(method) is spec.BasicDeliver:
            callback = self.consumers.get(method.consumer_tag)
            if callback is not None:
                callback(self, method, properties, body)

    def _confirmed(self, tag: int, multiple: bool, ok: bool) -> None:
        confirms = self._confirms
        if multiple:
            done = [s for s in confirms if s <= tag]  # dicts keep insertion (ascending) order
            for s in done:
                fut = confirms.pop(s)
                if not fut.done():
                    fut.set_result(ok)
        else:
            fut = confirms.pop(tag, None)
            if fut is not None and not fut.done():
                fut.set_result(ok)

    def _fail(self, error: LinkError) -> None:
        self.open = False
        if self.closed_reason is None:
            self.closed_reason = error
        while self._rpc:
            _, fut = self._rpc.popleft()
            if not fut.done():
                fut.set_exception(error)
        for fut in self._confirms.values():
            if not fut.done():
                fut.set_exception(error)
        self._confirms.clear()
        self.client._channels.pop(self.number, None)


class Client(asyncio.Protocol):
    """One outgoing AMQP connection (see the module docstring); make it with ``connect``."""

    def __init__(self, endpoint: Endpoint, username: str, password: str, name: str,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.endpoint = endpoint
        self.loop = loop
        self.conn = ClientConnection(
            "0-9-1", username, password, endpoint.vhost, mechanism=endpoint.mechanism,
            frame_max=endpoint.frame_max, channel_max=endpoint.channel_max, heartbeat=endpoint.heartbeat,
            client_properties={
                "product": "Warren", "connection_name": name, "information": "Warren shovel/federation link",
                "capabilities": {"publisher_confirms": True, "consumer_cancel_notify": True,
                                 "basic.nack": True, "exchange_exchange_bindings": True,
                                 "authentication_failure_close": True, "connection.blocked": True}})
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future = loop.create_future()
        self.closed: asyncio.Future = loop.create_future()  # resolves with the LinkError that ended it
        self.closed_reason: LinkError | None = None
        self._channels: dict[int, Channel] = {}
        self._next_channel = 1
        self._flush_scheduled = False
        self._writable = asyncio.Event()
        self._writable.set()
        self._last_received = time.monotonic()
        self._heartbeat_handle: asyncio.TimerHandle | None = None
        self.server_properties: dict = {}
        self.blocked = False

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._flush()  # the protocol header

    def data_received(self, data: bytes) -> None:
        self._last_received = time.monotonic()
        conn = self.conn
        try:
            conn.receive_data(data)
            while (event := conn.next_event()) is not None:
                self._event(event)
        except AMQPError as e:
            self._fail(LinkError(f"protocol error from the peer: {e}"))
            return
        self._flush()

    def connection_lost(self, exc) -> None:
        if self.closed_reason is None:
            if not self.opened.done():
                reason = "connection closed by the peer during the handshake (refused login or vhost?)"
            else:
                reason = f"connection lost{': ' + str(exc) if exc else ''}"
            self._fail(LinkError(reason), close_transport=False)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def can_write(self) -> bool:
        """Whether the socket takes more now (False while the peer pushes back)."""
        return self._writable.is_set()

    # --- events -----------------------------------------------------------------------------

    def _event(self, event) -> None:
        kind = type(event)
        if kind is Content:
            ch = self._channels.get(event.channel)
            if ch is not None:
                ch._content(event.method, event.properties, event.body)
        elif kind is Method:
            if event.channel == 0:
                m = event.method
                if type(m) is spec.ConnectionBlocked:
                    self.blocked = True
                elif type(m) is spec.ConnectionUnblocked:
                    self.blocked = False
                return
            ch = self._channels.get(event.channel)
            if ch is not None:
                ch._method(event.method)
        elif kind is Opened:
            self.server_properties = self.conn.server_properties or {}
            if not self.opened.done():
                self.opened.set_result(None)
            self._start_heartbeat()
        elif kind is Closed:
            reason = f"{event.reply_code} {event.reply_text}" if event.by_server else "closed"
            self._fail(LinkError(f"connection closed by the peer: {reason}" if event.by_server else reason))
        elif kind is Heartbeat:
            pass

    # --- output -----------------------------------------------------------------------------

    def send(self, channel: int, method) -> None:
        self.conn.send_method(channel, method)
        self._want_flush()

    def send_content(self, channel: int, method, properties: bytes, body: bytes) -> None:
        self.conn.send_content(channel, method, properties, body)
        self._want_flush()

    def _want_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def writable(self) -> None:
        """Wait while the socket's write buffer is full (back-pressure from the peer)."""
        if not self._writable.is_set():
            await self._writable.wait()
        if self.closed_reason is not None:
            raise self.closed_reason

    # --- channels ---------------------------------------------------------------------------

    async def channel(self) -> Channel:
        if self.closed_reason is not None:
            raise self.closed_reason
        limit = self.conn.channel_max or 2047
        for _ in range(limit):
            number = self._next_channel
            self._next_channel = number % limit + 1
            if number not in self._channels:
                break
        else:
            raise LinkError("no free channel number")
        ch = Channel(self, number)
        self._channels[number] = ch
        fut = self.loop.create_future()
        ch._rpc.append((spec.ChannelOpenOk, fut))
        self.conn.open_channel(number)
        self._want_flush()
        await fut
        return ch

    # --- heartbeats, closing ----------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        interval = self.conn.heartbeat
        if interval:
            self._heartbeat_handle = self.loop.call_later(interval / 2, self._heartbeat, interval)

    def _heartbeat(self, interval: int) -> None:
        if self.closed_reason is not None:
            return
        if time.monotonic() - self._last_received > 2 * interval:
            self._fail(LinkError(f"missed heartbeats from the peer ({interval} s interval)"))
            return
        self.conn.send_heartbeat()
        self._flush()
        self._heartbeat_handle = self.loop.call_later(interval / 2, self._heartbeat, interval)

    @property
    def is_closed(self) -> bool:
        return self.closed_reason is not None

    def _fail(self, error: LinkError, close_transport: bool = True) -> None:
        if self.closed_reason is not None:
            return
        self.closed_reason = error
        if self._heartbeat_handle is not None:
            self._heartbeat_handle.cancel()
        for ch in list(self._channels.values()):
            ch._fail(error)
        if not self.opened.done():
            self.opened.set_exception(error)
            self.opened.exception()  # retrieved: connect() re-raises it
        if not self.closed.done():
            self.closed.set_result(error)
        self._writable.set()
        if close_transport and self.transport is not None:
            self._flush()
            self.transport.close()

    async def close(self, timeout: float = 2.0) -> None:
        """connection.close, waiting a little for close-ok; then the socket is closed anyway."""
        if self.closed_reason is None and self.transport is not None:
            try:
                self.conn.close(200, "Goodbye")
                self._flush()
                await asyncio.wait_for(asyncio.shield(self.closed), timeout)
            except (asyncio.TimeoutError, AMQPError):
                pass
        self._fail(LinkError("closed"))

    def abort(self) -> None:
        self._fail(LinkError("aborted"), close_transport=False)
        if self.transport is not None:
            self.transport.abort()


async def connect(endpoint: Endpoint, username: str, password: str, name: str,
                  local_port: int | None = None) -> Client:
    """An open ``Client`` to ``endpoint`` (the local broker on ``local_port`` for an empty host)."""
    loop = asyncio.get_running_loop()
    host, port = endpoint.host, endpoint.port
    if endpoint.local:
        if local_port is None:
            raise LinkError("the local broker's AMQP port is not known (plain AMQP off?)")
        host, port = "127.0.0.1", local_port
    ssl_context = None
    if endpoint.scheme == "amqps" and not endpoint.local:
        ssl_context = _ssl_context(endpoint)
    client = Client(endpoint, username, password, name, loop)
    try:
        await asyncio.wait_for(
            loop.create_connection(lambda: client, host, port, ssl=ssl_context,
                                   server_hostname=(endpoint.tls.get("server_name_indication") or host)
                                   if ssl_context else None),
            endpoint.connect_timeout)
        await asyncio.wait_for(asyncio.shield(client.opened), endpoint.connect_timeout)
    except asyncio.TimeoutError:
        client.abort()
        raise LinkError(f"timed out connecting to {endpoint.redacted}") from None
    except OSError as e:
        client.abort()
        raise LinkError(f"cannot connect to {endpoint.redacted}: {e.strerror or e}") from None
    except LinkError:
        client.abort()
        raise
    return client


def _ssl_context(endpoint: Endpoint) -> ssl.SSLContext:
    tls = endpoint.tls
    ctx = ssl.create_default_context(cafile=tls.get("cacertfile") or None)
    if tls.get("certfile"):
        ctx.load_cert_chain(tls["certfile"], tls.get("keyfile") or None)
    if tls.get("verify") == "verify_none":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
