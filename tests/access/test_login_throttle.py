"""The login throttle on its own (a fake clock): free failures, delays, the block, other
addresses untouched, loopback exempt by default, a bounded table."""

from __future__ import annotations

import pytest

from warren.access.login_throttle import FREE_FAILURES, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_first_failures_free_then_delayed_then_blocked(clock):
    t = LoginThrottle(delay=1.0, limit=10, block_time=60.0, clock=clock)
    verdicts = [t.failed("192.0.2.7") for _ in range(9)]
    assert [v.delay for v in verdicts[:FREE_FAILURES]] == [0.0] * FREE_FAILURES
    assert all(v.delay == 1.0 for v in verdicts[FREE_FAILURES:])
    assert not any(v.blocked for v in verdicts)
    assert t.blocked_for("192.0.2.7") == 0.0
    tenth = t.failed("192.0.2.7")
    assert tenth.blocked and tenth.failures == 10
    assert t.blocked_for("192.0.2.7") == pytest.approx(60.0)
    clock.now += 59.0
    assert t.blocked_for("192.0.2.7") == pytest.approx(1.0)
    clock.now += 1.5
    assert t.blocked_for("192.0.2.7") == 0.0
    assert t.failed("192.0.2.7").delay == 0.0  # a new window after the block


def test_other_addresses_are_not_touched(clock):
    t = LoginThrottle(delay=1.0, limit=5, block_time=60.0, clock=clock)
    for _ in range(5):
        t.failed("192.0.2.7")
    assert t.blocked_for("192.0.2.7") > 0
    assert t.blocked_for("192.0.2.8") == 0.0
    assert t.failed("192.0.2.8").delay == 0.0


def test_failures_age_out_of_the_window(clock):
    t = LoginThrottle(delay=1.0, limit=10, block_time=60.0, clock=clock)
    for _ in range(8):
        t.failed("192.0.2.7")
    clock.now += 61
    assert t.failed("192.0.2.7").failures == 1


def test_loopback_is_exempt_unless_asked(clock):
    t = LoginThrottle(delay=1.0, limit=2, block_time=60.0, clock=clock)
    for host in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        for _ in range(5):
            assert t.failed(host).delay == 0.0
        assert t.blocked_for(host) == 0.0
    strict = LoginThrottle(delay=1.0, limit=2, block_time=60.0, include_loopback=True, clock=clock)
    strict.failed("127.0.0.1")
    assert strict.failed("127.0.0.1").blocked


def test_off_switches(clock):
    no_delay = LoginThrottle(delay=0.0, limit=3, block_time=60.0, clock=clock)
    assert all(no_delay.failed("192.0.2.1").delay == 0.0 for _ in range(2))
    assert no_delay.failed("192.0.2.1").blocked
    no_block = LoginThrottle(delay=0.5, limit=0, block_time=60.0, clock=clock)
    for _ in range(50):
        no_block.failed("192.0.2.1")
    assert no_block.blocked_for("192.0.2.1") == 0.0
    off = LoginThrottle(delay=0.0, limit=0, block_time=0.0, clock=clock)
    assert not off.enabled and off.failed("192.0.2.1").failures == 0 and len(off) == 0


def test_the_table_is_bounded(clock):
    t = LoginThrottle(delay=1.0, limit=10, block_time=60.0, max_addresses=100, clock=clock)
    for i in range(1000):
        t.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(t) <= 100
    t.failed("192.0.2.9")
    assert len(t) <= 100


def test_two_processes_count_each_others_failures(clock):
    """--workers: each process's table, told of the others' failures (on_failure -> count_elsewhere),
    blocks an address after the node's failures, wherever they happened."""
    a = LoginThrottle(delay=1.0, limit=6, block_time=60.0, clock=clock)
    b = LoginThrottle(delay=1.0, limit=6, block_time=60.0, clock=clock)
    told_by_a, told_by_b = [], []
    a.on_failure, b.on_failure = told_by_a.append, told_by_b.append
    for _ in range(3):
        a.failed("192.0.2.7")
    for host in told_by_a:
        b.count_elsewhere(host)
    assert told_by_a == ["192.0.2.7"] * 3 and told_by_b == []  # what came from elsewhere is not told on
    assert b.failed("192.0.2.7").delay == 1.0  # b's first, the node's fourth: slowed
    b.failed("192.0.2.7")
    assert b.failed("192.0.2.7").blocked  # the node's sixth: blocked, though b saw three itself
    assert told_by_b == ["192.0.2.7"] * 3
    a.count_elsewhere("127.0.0.1")  # loopback stays exempt, whoever counts
    assert a.blocked_for("127.0.0.1") == 0.0 and len(a) == 1
