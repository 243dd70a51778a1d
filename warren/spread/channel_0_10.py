"""The 0-10 session channel of a worker whose vhosts are spread (``--worker-mode queues``).

Its commands are ``warren/protocol/amqp0_10``'s, unchanged where they can be; what differs:

* **Definitions** need nothing here: the 0-10 adapter's commands ask the broker's operations,
  which the directory answers later (``definitions.py``), and the adapter completes them then.
* **Subscriptions to queues another worker owns** are the owner's: there a ``SubscriptionSink`` keeps the credit
  (``proxy.py``); here a ``RemoteSubscription`` tells it what ``message.flow``,
  ``set-flow-mode`` and window completions give, and the deliveries it sends are written as
  transfers. ``message.flush`` and ``message.stop`` wait for the owner's answer, which comes
  after the deliveries they allowed: a client that flushes and syncs has them. Accept, release
  and reject go back through a ``RemoteSettler``, as a 0-9-1 ack does; ``message.acquire`` of a
  browsed copy asks the owner to take it.

0-10 connections never move (``placement.py`` replays 0-9-1 octets only).
"""

from __future__ import annotations

import logging

from warren.broker import authz
from warren.broker.message import Message
from warren.codec.amqp0_10.sets import SequenceSet
from warren.errors import AccessRefused, AMQPError
from warren.protocol.amqp0_10 import message as message_class
from warren.protocol.amqp0_10.channel import LATER, ExecutionError, SessionChannel
from warren.protocol.amqp0_10.delivery import NO_BODY, NOT_ACQUIRED, PRE_ACQUIRED, WINDOW, header_segment
from warren.protocol.amqp0_10.properties import plain_arguments
from warren.protocol.amqp0_10.session import error_code_for
from warren.spec import amqp0_10 as spec
from warren.spread.links import PeerGone
from warren.spread.proxy import RemoteSettling, RemoteSubscription, handlers_of
from warren.spread.remote_queue import RemoteQueue

__all__ = ["SpreadSessionChannel"]

log = logging.getLogger("warren.spread")

E = spec.ExecutionErrorCode


class SpreadSessionChannel(RemoteSettling, SessionChannel):
    def execute(self, command):
        handler = SPREAD_HANDLERS.get(command.INDEX)
        if handler is not None:
            return handler(self, command)
        return super().execute(command)

    def _later(self, awaitable, then):
        """Complete the command being executed once ``awaitable`` is done, with ``then(result)``
        as its result (None: none); nothing more is read from the client meanwhile. A refusal
        ends the session with execution.exception, as the same refusal in one process would."""
        command_id, number, handler = self.current, self.number, self.session

        def done(result, error) -> None:
            if self.closed:
                return
            try:
                if error is not None:
                    raise error
                answer = then(result)
            except ExecutionError as e:
                code, text = e.code, e.text
            except AMQPError as e:
                code, text = error_code_for(e.reply_code), e.text
            except PeerGone as e:
                code, text = E.INTERNAL_ERROR, f"another worker did not answer: {e}"
            except Exception:
                log.exception("internal error on connection %s session channel %d", handler, number)
                code, text = E.INTERNAL_ERROR, "internal error"
            else:
                if answer is None:
                    handler.conn.complete(number, command_id)
                else:
                    handler.conn.send_result(number, command_id, answer)
                handler.want_flush()
                return
            handler.session_exception(number, command_id, code, text)
        handler.io.when_done(awaitable, done)
        return LATER

    def _ref(self):
        return self.session.broker.directory.session_ref(self.session)

    # --- subscriptions to another worker's queue -------------------------------------------

    def handle_message_subscribe(self, c):
        q = self.vhost.remote_queues.get(c.queue or "")
        if q is None:
            return message_class.handle_message_subscribe(self, c)
        destination = c.destination or ""
        if destination in self.subscriptions:
            raise ExecutionError(E.NOT_ALLOWED, f"subscription '{destination}' exists on this session")
        authz.queue_read(self, q.name)
        if q.exclusive_owner is not None and q.exclusive_owner != self._ref():  # another connection's
            raise self.vhost.locked_error(q.name)
        accept_mode, acquire_mode = c.accept_mode or 0, c.acquire_mode or 0
        no_ack = accept_mode == 1 or acquire_mode == NOT_ACQUIRED
        spread = self.session.broker.directory
        ref = self._ref()
        self._settler(q.owner)  # also what makes our close tell the owner to drop its channel
        tag = destination or "amq.0-10." + str(self.current)  # as message.py names the consumer
        sub = RemoteSubscription(spread, q, ref.session_id, self.number, tag, destination, accept_mode, acquire_mode,
                                 no_ack, self.current)
        keys = {tag, destination}
        for key in keys:
            self.subscriptions[key] = sub

        def forget() -> None:
            for key in keys:
                self.subscriptions.pop(key, None)

        def subscribed(_):
            pending, sub.pending = sub.pending, None
            for owner, item in pending:
                self.remote_deliver(owner, item)
            return None

        async def subscribe():
            try:
                return await spread.ask(q.owner, "subscribe", self.vhost.name, q.name, ref.session_id, self.number,
                                        tag, no_ack, bool(c.exclusive), plain_arguments(c.arguments),
                                        accept_mode, acquire_mode, self.session.publisher_id)
            except AccessRefused as e:  # in exclusive use: 0-10's resource-locked
                forget()
                raise ExecutionError(E.RESOURCE_LOCKED, e.text) from None
            except BaseException:
                forget()
                raise
        return self._later(subscribe(), subscribed)

    def handle_message_cancel(self, c):
        sub = self._remote_subscription(c)
        if sub is None:
            return message_class.handle_message_cancel(self, c)
        for key in [k for k, v in self.subscriptions.items() if v is sub]:
            del self.subscriptions[key]
        self.session.broker.directory.tell(sub.owner, "cancel", sub.session_id, self.number, sub.tag)
        return None

    def _remote_subscription(self, c) -> RemoteSubscription | None:
        sub = self.subscriptions.get(c.destination or "")
        return sub if type(sub) is RemoteSubscription else None

    def handle_message_flush(self, c):
        sub = self._remote_subscription(c)
        if sub is None:
            return message_class.handle_message_flush(self, c)
        return self._zero_remote(sub, "sub_flush")

    def handle_message_stop(self, c):
        sub = self._remote_subscription(c)
        if sub is None:
            return message_class.handle_message_stop(self, c)
        return self._zero_remote(sub, "sub_stop")

    def _zero_remote(self, sub: RemoteSubscription, op: str):
        message_class.forget_window(self, sub)
        return self._later(self.session.broker.directory.ask(sub.owner, op, sub.session_id, self.number, sub.tag),
                           lambda _: None)

    def remote_deliver(self, owner: int, item: tuple) -> None:
        """A delivery from the owner of a queue one of our subscriptions reads (Spread)."""
        _, _, tag, owner_tag, redelivered, exchange, routing_key, properties, body, seq, cost = item
        sub = self.subscriptions.get(tag)
        if type(sub) is not RemoteSubscription:  # cancelled meanwhile: back to the queue
            if owner_tag is not None:
                self._settler(owner).settle_entries([owner_tag], True)
            return
        if sub.pending is not None:
            sub.pending.append((owner, item))
            return
        msg = Message(exchange, routing_key, properties, NO_BODY if body is None else body)
        acquire_mode = PRE_ACQUIRED if seq is None else NOT_ACQUIRED
        transfer_id = self.conn.send_encoded_transfer(self.number, sub.transfer_commands[acquire_mode],
                                                      header_segment(msg, redelivered), body)
        if sub.mode == WINDOW:
            self.window[transfer_id] = (sub, cost)
        if seq is not None:
            self.browsed[transfer_id] = (sub.queue, seq)
        elif not sub.no_ack:
            tag = self.next_tag
            self.next_tag = tag + 1
            self.unacked[tag] = (self._settler(owner), owner_tag, msg, None, tag)
            self.transfers[transfer_id] = tag
        self.session.want_flush()

    def remote_cancelled(self, tag: str) -> None:
        """The owner's queue went away under one of our subscriptions."""
        if type(self.subscriptions.get(tag)) is not RemoteSubscription:
            return
        held = self.session.held_cancels
        if held is not None:  # this connection is deleting the queue: after its completion
            held.append((self, tag))
        else:
            self.notify_cancel(tag)

    def handle_message_acquire(self, c):
        remote: dict = {}  # record -> [(transfer id, seq)]
        for i in message_class.transfer_ids(c.transfers, self.browsed):
            q, seq = self.browsed[i]
            if type(q) is RemoteQueue:
                del self.browsed[i]
                remote.setdefault(q, []).append((i, seq))
        local = message_class.handle_message_acquire(self, c)
        if not remote:
            return local
        spread = self.session.broker.directory
        ref = self._ref()

        async def acquire():
            acquired = list(local.transfers) if local.transfers else []
            for q, pairs in remote.items():
                taken = dict(await spread.ask(q.owner, "acquire", q.vhost_name, q.name, ref.session_id, self.number,
                                              [seq for _, seq in pairs]))
                settler = self._settler(q.owner)
                for i, seq in pairs:
                    owner_tag = taken.get(seq)
                    if owner_tag is None:
                        continue
                    tag = self.next_tag
                    self.next_tag = tag + 1
                    self.unacked[tag] = (settler, owner_tag, None, None, tag)
                    self.transfers[i] = tag
                    acquired.append(i)
            return spec.MessageAcquired(transfers=SequenceSet.of(sorted(acquired)) if acquired else SequenceSet())
        return self._later(acquire(), lambda result: result)

    def close(self) -> None:
        if self.closed:
            return
        owners = set(self.settlers or ())
        super().close()  # releases what is unaccepted, the remote transfers through their settlers
        self._tell_owners_closed(owners)


SPREAD_HANDLERS = handlers_of(SpreadSessionChannel, spec.COMMANDS)
