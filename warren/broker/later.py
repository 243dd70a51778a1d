"""Answers that another process gives: what a broker operation returns when it cannot answer now.

A ``BrokerChannel`` operation on a queue or a definition returns its result at once when the
queue, or every copy of the definitions, is in this process (``LocalDirectory``). When the
directory must ask elsewhere first (``--worker-mode queues``: the worker that orders
definitions, the worker that owns the queue), it returns an *awaitable* of the same result
instead. The protocol adapter does not ask which: it hands the result to its one "answer when
known" helper, which answers now, or holds the client's input until the awaitable is done and
answers then (``AMQPConnection.hold_input``), so the answer still goes out before anything
the client sent after the method.
"""

from __future__ import annotations

__all__ = ["is_later", "then"]


def is_later(result) -> bool:
    """Whether ``result`` is an awaitable answer (a coroutine or a future) rather than the answer."""
    return hasattr(result, "__await__")


def then(result, fn):
    """``fn(result)``, now or once an awaitable ``result`` is done (an awaitable of it then)."""
    if not is_later(result):
        return fn(result)

    async def chained():
        return fn(await result)
    return chained()
