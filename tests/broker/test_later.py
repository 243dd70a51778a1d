"""warren/broker/later.py: answers now or later, and a coroutine of several steps run as far as it
can go now (``run``)."""

from __future__ import annotations

import asyncio

import pytest

from warren.broker.later import in_turn, is_later, run, settled, then


async def _steps(answers: list, seen: list) -> list:
    out = []
    for answer in answers:
        out.append(await settled(answer))
        seen.append(len(out))
    return out


def test_a_coroutine_whose_answers_are_all_here_finishes_at_once_without_a_loop():
    seen: list = []
    assert run(_steps([1, 2, 3], seen)) == [1, 2, 3]
    assert seen == [1, 2, 3]


def test_a_coroutine_that_meets_a_later_answer_goes_on_from_there_when_awaited():
    async def main():
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        seen: list = []
        result = run(_steps([1, first, 3, second], seen))
        assert is_later(result) and seen == [1]  # it ran up to the first answer not yet known
        task = asyncio.ensure_future(result)
        first.set_result(2)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert seen == [1, 2, 3] and not task.done()
        second.set_result(4)
        assert await task == [1, 2, 3, 4]
    asyncio.run(main())


def test_a_refusal_that_comes_later_reaches_the_awaiting_task():
    async def refuses(answer):
        try:
            return await settled(answer)
        except KeyError:
            raise ValueError("refused") from None

    async def main():
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        result = run(refuses(answer))
        loop.call_soon(answer.set_exception, KeyError("x"))
        with pytest.raises(ValueError, match="refused"):
            await asyncio.ensure_future(result)
    asyncio.run(main())


def test_cancelling_the_awaiting_task_cancels_the_coroutine_where_it_waits():
    cleaned: list = []

    async def waits(answer):
        try:
            return await settled(answer)
        finally:
            cleaned.append(True)

    async def main():
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(run(waits(loop.create_future())))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(main())
    assert cleaned == [True]


def test_then_and_in_turn_answer_now_when_nothing_waits():
    assert then(2, lambda x: x * 10) == 20
    order: list = []
    assert in_turn([lambda: order.append(1), lambda: order.append(2) or "last"]) == "last"
    assert order == [1, 2]
