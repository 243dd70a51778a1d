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

__all__ = ["is_later", "then", "in_turn", "settled", "run"]


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


async def settled(answer):
    """``await settled(x)`` in a coroutine run by ``run``: ``x`` itself, or what the awaitable
    ``x`` gives. It suspends only when ``x`` is an awaitable that is not done."""
    return (await answer) if is_later(answer) else answer


def run(coro):
    """Run ``coro`` (an ``async def`` that awaits answers through ``settled``) as far as it goes
    now: its result if it never had to wait (every answer was local), else an awaitable of its
    result, which goes on from where it stopped. A protocol step made of several operations (a
    1.0 link's attach: declare, bind, consume) is then written once, as one coroutine, and costs
    no task when the directory answers at once."""
    try:
        first = coro.send(None)
    except StopIteration as done:
        return done.value
    return _Resumed(coro, first)


class _Resumed:
    """The rest of a coroutine that ``run`` started and that stopped at ``first`` (the future it
    waits for): awaiting this hands ``first`` to the awaiting task and drives the coroutine on,
    as ``await coro`` would have from the start."""

    __slots__ = ("coro", "first")

    def __init__(self, coro, first) -> None:
        self.coro = coro
        self.first = first

    def __await__(self):
        coro, waiting = self.coro, self.first
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # thrown into the awaiting task (a cancel): into the coroutine
                try:
                    waiting = coro.throw(e)
                except StopIteration as done:
                    return done.value
                continue
            try:
                waiting = coro.send(sent)
            except StopIteration as done:
                return done.value
