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

__all__ = ["is_later", "then", "in_turn"]


def is_later(result) -> bool:
    """Whether ``result`` is an awaitable answer (a coroutine or a future) rather than the answer."""
    return hasattr(result, "__await__")


def then(result, fn):
    """``fn(result)``, now or once an awaitable ``result`` is done (an awaitable of it then;
    ``fn`` may itself answer later)."""
    if not is_later(result):
        return fn(result)

    async def chained():
        answer = fn(await result)
        return (await answer) if is_later(answer) else answer
    return chained()


def in_turn(steps):
    """Call each of ``steps`` (functions of no argument) in turn, each once the one before has
    answered: the last one's answer, now or later. A command that makes several changes (0-10
    unbinding every binding of a key) makes them in order, as in one process."""
    steps = iter(steps)
    answer = None
    for step in steps:
        answer = step()
        if is_later(answer):
            async def rest(first=answer):
                last = await first
                for more in steps:
                    last = more()
                    if is_later(last):
                        last = await last
                return last
            return rest()
    return answer
