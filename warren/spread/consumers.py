"""Consumers across workers: both sides of a channel that reads a queue another worker owns.

The owner serves the channel as a ``ProxyChannel`` (``proxy.py``) per (worker, connection,
channel number), made by the first consume or get; the consuming worker's ``SpreadChannel``
(``channel.py``) numbers the deliveries that arrive and hands the room back (``credit``) as it
writes them to its client.
"""

from __future__ import annotations

from warren.spread.proxy import PeerSink, ProxyChannel, ProxySession

__all__ = ["Consumers"]


class Consumers:
    """``Spread``'s part for consumers across workers (a mixin)."""

    # --- consumers across workers: the owner's side (proxy.py) ---------------------------------

    def _proxy(self, peer: int, session_id: int, number: int, vhost: str) -> ProxyChannel:
        key = (peer, session_id)
        session = self._proxy_sessions.get(key)
        if session is None:
            session = self._proxy_sessions[key] = ProxySession(self, peer, session_id, self._vhost(vhost))
        ch = session.channels.get(number)
        if ch is None:
            sink = PeerSink(self, peer, session_id, number)
            ch = session.channels[number] = ProxyChannel(session, number, sink)
            sink.channel = ch
        return ch

    def _existing_proxy(self, peer: int, session_id: int, number: int) -> ProxyChannel | None:
        session = self._proxy_sessions.get((peer, session_id))
        return session.channels.get(number) if session is not None else None

    def _proxy_consume(self, peer: int, args: tuple) -> str:
        (vhost, name, session_id, number, tag, no_ack, exclusive, arguments,
         consumer_count, consumer_size, channel_count, channel_size) = args
        ch = self._proxy(peer, session_id, number, vhost)
        ch.consumer_prefetch_count, ch.consumer_prefetch_size = consumer_count, consumer_size
        ch.prefetch_count, ch.prefetch_size = channel_count, channel_size
        c = ch.consume(name, tag, no_ack, exclusive, arguments)
        self.loop.call_soon(ch.start_consumer, c)  # after the answer, which goes out first
        return c.tag

    def _proxy_get(self, peer: int, args: tuple):
        vhost, name, session_id, number, no_ack = args
        ch = self._proxy(peer, session_id, number, vhost)
        got = ch.get(name, no_ack)
        if got is None:
            return None
        tag, redelivered, msg, left = got
        return (tag, redelivered, msg.exchange, msg.routing_key, bytes(msg.properties), bytes(msg.body), left)

    def _proxy_message(self, peer: int, op: str, args: tuple) -> None:
        session_id, number = args[0], args[1]
        ch = self._existing_proxy(peer, session_id, number)
        if ch is None:
            return
        if op == "settle":
            tags, requeue = args[2], args[3]
            unacked = ch.unacked
            entries = [unacked.pop(t) for t in tags if t in unacked]
            if entries:
                ch._settle(entries, requeue)
        elif op == "credit":
            ch.sink.credit(args[2])
        elif op == "cancel":
            ch.cancel(args[2])
        elif op == "qos":
            (ch.consumer_prefetch_count, ch.consumer_prefetch_size, ch.prefetch_count,
             ch.prefetch_size) = args[2:6]
            ch.resume_delivery()
        elif op == "close_channel":
            session = self._proxy_sessions[(peer, session_id)]
            del session.channels[number]
            ch.close()
            if not session.channels:
                del self._proxy_sessions[(peer, session_id)]

    # --- consumers across workers: the consuming worker's side --------------------------------

    def _channel(self, session_id: int, number: int):
        from warren.spread.channel import SpreadChannel
        session = self._sessions.get(session_id)
        ch = session.channels.get(number) if session is not None else None
        return ch if isinstance(ch, SpreadChannel) and not ch.closed else None

    def _take_deliveries(self, peer: int, items: list) -> None:
        credits: dict = {}
        channel = self._channel
        for item in items:
            key = (item[0], item[1])
            credits[key] = credits.get(key, 0) + 1
            ch = channel(*key)
            if ch is not None:  # else its channel closed: close_channel gets the owner to requeue it
                ch.remote_deliver(peer, item)
        for (session_id, number), n in credits.items():
            self.tell(peer, "credit", session_id, number, n)
