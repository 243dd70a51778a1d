"""Consumers across workers: both sides of a channel that reads a queue another worker owns.

The owner serves the channel as a ``ProxyChannel`` (``proxy.py``) per (worker, connection,
channel number), made by the first consume or get; on the consuming worker the channel's
``RemoteReads`` (``remote_reads.py``) numbers the deliveries that arrive and hands the room back
(``credit``) as it writes them to its client. A consumer whose protocol grants credit has its
credit keeper here on the owner, made from the terms its consume sent (``CREDIT_TERMS``).
"""

from __future__ import annotations

from warren.protocol.amqp0_10.delivery import SubscriptionTerms
from warren.protocol.amqp0_10.message import requeue_unmarked
from warren.protocol.amqp1_0.credit import LinkTerms
from warren.spread.proxy import ANNOTATE, UNMARKED, PeerSink, ProxyChannel, ProxySession
from warren.spread.remote_reads import RemoteReads

__all__ = ["Consumers", "CREDIT_TERMS"]

# the kinds of credit (warren/broker/credit.py) a consume from another worker may bring
CREDIT_TERMS = {terms.KIND: terms for terms in (SubscriptionTerms, LinkTerms)}


class Consumers:
    """``Spread``'s part for consumers across workers (a mixin)."""

    # --- consumers across workers: the owner's side (proxy.py) ---------------------------------

    def _proxy_session(self, peer: int, session_id: int, vhost) -> ProxySession:
        key = (peer, session_id)
        session = self._proxy_sessions.get(key)
        if session is None:
            session = self._proxy_sessions[key] = ProxySession(self, peer, session_id, vhost)
        return session

    def _proxy(self, peer: int, session_id: int, number: int, vhost: str) -> ProxyChannel:
        session = self._proxy_session(peer, session_id, self._vhost(vhost))
        ch = session.channels.get(number)
        if ch is None:
            sink = PeerSink(self, peer, session_id, number)
            ch = session.channels[number] = ProxyChannel(session, number, sink)
            sink.channel = ch
        return ch

    def proxy_sessions(self) -> list:
        return list(self._proxy_sessions.values())

    def proxy_channel(self, peer: int, session_id: int, number: int) -> ProxyChannel | None:
        session = self._proxy_sessions.get((peer, session_id))
        return session.channels.get(number) if session is not None else None

    def _proxy_consume(self, peer: int, args: tuple) -> str:
        (vhost, name, session_id, number, tag, no_ack, exclusive, arguments,
         consumer_count, consumer_size, channel_count, channel_size, terms) = args
        ch = self._proxy(peer, session_id, number, vhost)
        ch.set_limits(consumer_count, consumer_size, channel_count, channel_size)
        credit = None if terms is None else CREDIT_TERMS[terms[0]](*terms[1])
        c = ch.consume(name, tag, no_ack, exclusive, arguments, credit)
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

    def _keeper(self, peer: int, session_id: int, number: int, tag: str):
        ch = self.proxy_channel(peer, session_id, number)
        c = ch.consumers.get(tag) if ch is not None else None
        return c.credit if c is not None else None

    def _proxy_keeper(self, peer: int, args: tuple, ask: bool):
        """An operation on a consumer's credit keeper (warren/broker/credit.py), passed on by
        its stand-in on the consuming worker; what the credit lets through now goes out, and an
        ``ask`` is answered after those deliveries (0-10's flush and stop, 1.0's drain)."""
        session_id, number, tag, op, op_args = args
        keeper = self._keeper(peer, session_id, number, tag)
        if keeper is None:  # cancelled or closed meanwhile
            return None
        answer = keeper.apply(op, op_args)
        keeper.consumer.queue.dispatch()
        if ask:
            self._flush()  # the deliveries batched this turn go before the answer
        return answer

    def _proxy_acquire(self, peer: int, args: tuple) -> list:
        """message.acquire of browsed copies: [(queue sequence number, our delivery tag)] of
        those still there."""
        vhost, name, session_id, number, seqs = args
        q = self._vhost(vhost).queues.get(name)
        ch = self.proxy_channel(peer, session_id, number)
        if q is None or q.deleted or ch is None:
            return []
        acquired = []
        for seq in seqs:
            got = q.take_seq(seq)
            if got is None:
                continue
            tag = ch.next_tag
            ch.next_tag = tag + 1
            ch.unacked[tag] = (q, seq, got[0], None, tag)
            acquired.append((seq, tag))
        return acquired

    def _proxy_message(self, peer: int, op: str, args: tuple) -> None:
        session_id, number = args[0], args[1]
        ch = self.proxy_channel(peer, session_id, number)
        if ch is None:
            return
        if op == "settle":
            tags, requeue = args[2], args[3]
            unacked = ch.unacked
            if requeue == ANNOTATE:  # 1.0's modified outcome: its reject or requeue comes next
                for t in tags:
                    if t in unacked:
                        ch.annotate(t, args[4])
                return
            entries = [unacked.pop(t) for t in tags if t in unacked]
            if entries:
                if requeue == UNMARKED:
                    requeue_unmarked(ch, entries)
                else:
                    ch.settle_entries(entries, requeue)
        elif op == "credit":
            ch.sink.credit(args[2])
        elif op == "cancel":
            ch.cancel(args[2])
        elif op == "flow":  # channel.flow of the consuming channel's client
            ch.sink.paused = not args[2]
            if args[2]:
                ch.resume_delivery()
        elif op == "qos":
            ch.set_limits(*args[2:6])
            ch.resume_delivery()
        elif op == "grant":  # room under the consuming channel's shared prefetch (shared_prefetch.py)
            ch.grant(args[2])
        elif op == "close_channel":
            session = self._proxy_sessions[(peer, session_id)]
            del session.channels[number]
            ch.close()
            if not session.channels and not session.exclusive_queues:  # (a queue it locks knows it)
                del self._proxy_sessions[(peer, session_id)]

    # --- consumers across workers: the consuming worker's side --------------------------------

    def reads_of(self, channel):
        """The part of ``channel`` (a client's, here) that reads other workers' queues."""
        if channel.remote is None:
            channel.remote = RemoteReads(self, channel)
        return channel.remote

    def _reader(self, session_id: int, number: int):
        """What reads the deliveries other workers send to a channel of ours: its
        ``RemoteReads``; None once closed."""
        session = self._sessions.get(session_id)
        ch = session.channels.get(number) if session is not None else None
        if ch is None or ch.closed:
            return None
        return ch.remote

    def _prefetch_message(self, peer: int, op: str, args: tuple) -> None:
        """An owner's ``want`` or ``return`` of room under one of our channels' shared prefetch."""
        reads = self._reader(args[0], args[1])
        if reads is None:
            return  # closed meanwhile: its count went with it
        if op == "want":
            reads.owner_wants(peer)
        else:
            reads.owner_returns(peer, args[2])

    def _take_deliveries(self, peer: int, items: list) -> None:
        credits: dict = {}
        reader = self._reader
        for item in items:
            key = (item[0], item[1])
            credits[key] = credits.get(key, 0) + 1
            reads = reader(*key)
            if reads is not None:  # else its channel closed: close_channel gets the owner to requeue it
                reads.remote_deliver(peer, item)
        for (session_id, number), n in credits.items():
            self.tell(peer, "credit", session_id, number, n)
