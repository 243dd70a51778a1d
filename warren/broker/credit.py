"""Credit: how many deliveries a client grants one consumer, kept where the queue lives.

A 0-9-1 consumer is limited by prefetch: the channel counts what it holds unacknowledged. A 0-10
subscription and a 1.0 link are limited by *credit* that the client grants as it goes: messages
(0-10: octets too) the broker may send, with each protocol's own rules (0-10: window or credit
mode, flush, stop, browsing copies; 1.0: link credit and drain). The check runs before every
delivery, so it runs where the queue is, which is this process or the worker that owns the queue
(``--worker-mode queues``). The protocol does not ask which: it hands ``BrokerChannel.consume``
its ``CreditTerms`` and talks to what comes back.

``CreditTerms`` (one class per protocol, in the protocol's package):

* ``keep(consumer)``: the credit kept beside the queue, a *keeper*. It gates the consumer
  (``consumer.has_capacity``), is charged for each delivery (``charge_for(message)``, by the
  sink that sends it) and answers ``apply(op, args)``, the operations in its ``OPS``.
* ``far(link, consumer, queue)``: what the consuming side holds when the queue is elsewhere: the same
  methods as the keeper, which it passes on through ``link`` (``tell(op, *args)``, or
  ``ask(op, *args)``, an awaitable answered after the deliveries the operation allowed).
* ``KIND`` and ``args``: plain values from which the process that owns the queue makes the
  same terms (``warren/spread/consumers.py`` lists the kinds it knows).

So a protocol calls its keeper's methods the same way wherever the queue is, and an operation
that is answered after the deliveries it allowed (0-10's flush, 1.0's drain) returns its answer
now or an awaitable of it (``later.py``).
"""

from __future__ import annotations

__all__ = ["CreditTerms"]


class CreditTerms:
    """What a protocol's credit is: see the module's docstring."""

    KIND: str = ""
    # whether a consumer of these terms can consume again from another keeper of its queue (a
    # replicated queue's new leader, warren/cluster/reach.py ``_resume``): only where what the
    # client granted and has left is known on the consuming side (a 1.0 link's credit, in the
    # protocol core); a keeper's own balance is lost with its node
    MOVABLE = False

    def moved(self, channel, consumer) -> None:
        """``consumer`` of ``channel``, made again with these terms, consumes from another
        keeper now: the client's side learns it, and the keeper learns what the client has left
        (MOVABLE)."""
        raise NotImplementedError

    @property
    def args(self) -> tuple:
        raise NotImplementedError

    def keep(self, consumer):
        """The keeper beside the queue, gating ``consumer``."""
        raise NotImplementedError

    def far(self, link, consumer, queue):
        """The consuming side's stand-in for a keeper elsewhere, for ``consumer`` (the
        consuming side's record of it) of ``queue`` (the queue's handle)."""
        raise NotImplementedError
