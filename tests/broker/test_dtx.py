"""Distributed transaction branches (warren/broker/dtx.py) over a real broker, durable queues and
stores in a temporary folder, without a server: the work a channel does while associated with a
branch, the outcomes (one- and two-phase commit, rollback), the error codes, timeouts, implicit
ends, and a prepared branch that survives a broker that stops without closing anything (the
in-process stand-in for kill -9; tests/interop_0_10 kills a real one).

The channels deliver into a recording sink (what a protocol adapter would put on the wire)."""

from __future__ import annotations

import time

import pytest

from warren.broker.broker import Broker
from warren.broker.channel import BrokerChannel
from warren.broker.connection import BrokerConnection
from warren.broker.dtx import DEFAULT_TIMEOUT, IllegalState, InvalidArgument, XaStatus, Xid, manager
from warren.broker.durability import Durability
from warren.errors import CommandInvalid, NotAllowed, NotFound
from warren.spec.amqp0_9_1 import BasicProperties

PERSISTENT = BasicProperties(delivery_mode=2, correlation_id="m").encode()
OK, RBROLLBACK, RBTIMEOUT = XaStatus.XA_OK, XaStatus.XA_RBROLLBACK, XaStatus.XA_RBTIMEOUT


class RecordingSink:
    def __init__(self) -> None:
        self.deliveries: list[tuple] = []
        self.stopped = False

    def can_accept(self) -> bool:
        return not self.stopped

    def deliver(self, consumer, tag, redelivered, message) -> None:
        self.deliveries.append((consumer.tag, tag, redelivered, message))

    def returned(self, message) -> None:
        pass

    def cancelled(self, consumer_tag) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True


class World:
    """A broker on a data folder, and channels of one connection to it."""

    def __init__(self, data) -> None:
        self.durability = Durability(data, fsync=False)
        self.broker = Broker(durability=self.durability)
        self.conn = BrokerConnection(self.broker, ("127.0.0.1", 1), None)
        self.conn.username = "guest"
        self.conn.open_vhost("/")
        self.dtx = manager(self.broker)
        self.vhost = self.broker.vhosts["/"]
        self._n = 0

    def channel(self) -> BrokerChannel:
        self._n += 1
        ch = BrokerChannel(self.conn, self._n, RecordingSink())
        self.conn.channels[self._n] = ch
        return ch

    def sync(self) -> None:
        d = self.durability
        while (job := d.begin_sync()) is not None:
            number, stores = job
            d.sync(stores)
            d.end_sync(number)

    def count(self, queue: str) -> int:
        return self.vhost.queues[queue].message_count

    def bodies(self, queue: str) -> list:
        return [bytes(e[1].body) for e in self.vhost.queues[queue].ready]


def prepared(dtx, tx: Xid):
    """dtx.prepare's outcome: given at once in one process (no other worker holds a part)."""
    outcome = []
    dtx.prepare(tx, outcome.append)
    assert len(outcome) == 1
    return outcome[0]


def take_one(ch: BrokerChannel, queue: str) -> int:
    """Consume one message of ``queue`` on ``ch`` and cancel; its delivery tag."""
    c = ch.consume(queue, "", False, False, {})
    ch.start_consumer(c)
    ch.cancel(c.tag)
    assert ch.sink.deliveries, f"nothing delivered from {queue}"
    return ch.sink.deliveries.pop()[1]


def swap(ch: BrokerChannel, src: str, dest: str) -> None:
    """Consume a message from src and publish its body to dest (the work of Qpid's dtx tests)."""
    tag = take_one(ch, src)
    body = ch.unacked[tag][2].body
    ch.ack(tag, False)
    ch.publish("", dest, PERSISTENT, body, False)


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path / "data")
    ch = w.channel()
    for q in ("queue-a", "queue-b"):
        ch.declare_queue(q, False, True, False, False, {})
    ch.publish("", "queue-a", PERSISTENT, b"payload", False)
    w.sync()
    return w


def xid(name: str, branch: str = "b") -> Xid:
    return Xid(0, name.encode(), branch.encode())


def test_one_phase_commit_makes_the_work_visible_only_then(world):
    ch, tx = world.channel(), xid("one-phase")
    world.dtx.select(ch)
    assert world.dtx.start(ch, tx) == OK
    swap(ch, "queue-a", "queue-b")
    assert world.dtx.end(ch, tx) == OK
    assert (world.count("queue-a"), world.count("queue-b")) == (0, 0)
    ch.publish("", "queue-b", PERSISTENT, b"after end", False)  # not transactional any more
    assert world.bodies("queue-b") == [b"after end"]
    outcome = []
    world.dtx.commit(world.channel(), tx, True, outcome.append)
    assert outcome == []  # the persistent publish and the ack wait for the disk
    world.sync()
    assert outcome == [OK]
    assert world.bodies("queue-b") == [b"after end", b"payload"] and world.count("queue-a") == 0
    assert tx not in world.dtx.branches
    assert not ch.unacked


def test_rollback_puts_the_consumed_message_back_and_drops_the_publish(world):
    ch, tx = world.channel(), xid("rollback")
    world.dtx.select(ch)
    world.dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    world.dtx.end(ch, tx)
    assert world.dtx.rollback(tx) == OK
    assert world.bodies("queue-a") == [b"payload"] and world.count("queue-b") == 0
    assert world.vhost.queues["queue-a"].ready[0][2] is True  # redelivered
    assert not ch.unacked  # the branch held it, not the channel


def test_two_phase_commit_and_the_prepared_record(world, tmp_path):
    ch, tx = world.channel(), xid("two-phase")
    world.dtx.select(ch)
    world.dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    world.dtx.end(ch, tx)
    assert prepared(world.dtx, tx) == OK
    record = tmp_path / "data" / "dtx" / tx.file_name
    assert record.is_file()
    assert world.dtx.recover() == [tx]
    with pytest.raises(IllegalState):
        prepared(world.dtx, tx)
    with pytest.raises(IllegalState):  # prepared: one phase is refused
        world.dtx.commit(ch, tx, True, lambda s: None)
    outcome = []
    world.dtx.commit(ch, tx, False, outcome.append)
    assert record.is_file()  # deleted only once the commit's work is on disk
    world.sync()
    assert outcome == [OK] and not record.exists()
    assert world.bodies("queue-b") == [b"payload"] and world.dtx.recover() == []


def test_commit_in_two_phases_needs_a_prepare(world):
    ch, tx = world.channel(), xid("unprepared")
    world.dtx.select(ch)
    world.dtx.start(ch, tx)
    world.dtx.end(ch, tx)
    with pytest.raises(IllegalState):
        world.dtx.commit(ch, tx, False, lambda s: None)
    assert world.dtx.rollback(tx) == OK


def test_the_error_codes(world):
    dtx, ch, other = world.dtx, world.channel(), world.channel()
    tx = xid("errors")
    with pytest.raises(CommandInvalid):  # 503: not selected
        dtx.start(ch, tx)
    dtx.select(ch)
    dtx.select(other)
    with pytest.raises(CommandInvalid):  # 503: join and resume
        dtx.start(ch, tx, join=True, resume=True)
    with pytest.raises(IllegalState) as e:  # 409: end of an xid not associated
        dtx.end(ch, tx)
    assert e.value.reply_code == 409
    dtx.start(ch, tx)
    with pytest.raises(NotAllowed):  # 530: already known, neither join nor resume
        dtx.start(other, tx)
    with pytest.raises(IllegalState):  # one association at a time per channel
        dtx.start(ch, xid("second"))
    for call in (lambda: prepared(dtx, tx), lambda: dtx.rollback(tx),
                 lambda: dtx.commit(other, tx, True, lambda s: None)):
        with pytest.raises(IllegalState):  # 409: still associated
            call()
    with pytest.raises(CommandInvalid):  # 503: suspend and fail
        dtx.end(ch, tx, suspend=True, fail=True)
    with pytest.raises(InvalidArgument) as e:  # 542: above the maximum timeout
        dtx.set_timeout(tx, 3601)
    assert e.value.reply_code == 542
    assert dtx.get_timeout(tx) == DEFAULT_TIMEOUT
    dtx.end(ch, tx)
    with pytest.raises(IllegalState):  # never heuristically completed: nothing to forget
        dtx.forget(tx)
    unknown = xid("unknown")
    for call in (lambda: prepared(dtx, unknown), lambda: dtx.rollback(unknown), lambda: dtx.forget(unknown),
                 lambda: dtx.get_timeout(unknown), lambda: dtx.commit(ch, unknown, True, lambda s: None)):
        with pytest.raises(NotFound):  # 404
            call()
    with pytest.raises(NotAllowed):  # joining an unknown branch
        dtx.start(other, unknown, join=True)
    dtx.rollback(tx)
    assert dtx.start(ch, tx) == OK  # a completed xid is forgotten: it may be used again
    dtx.end(ch, tx)
    dtx.rollback(tx)


def test_join_and_suspend_resume(world):
    dtx, one, two = world.dtx, world.channel(), world.channel()
    ch = world.channel()
    ch.publish("", "queue-b", PERSISTENT, b"second", False)
    tx = xid("join")
    dtx.select(one)
    dtx.select(two)
    dtx.start(one, tx)
    dtx.start(two, tx, join=True)
    swap(one, "queue-a", "queue-b")
    swap(two, "queue-b", "queue-a")
    dtx.end(one, tx, suspend=True)
    with pytest.raises(IllegalState):  # only the channel that suspended may resume
        dtx.start(two, tx, resume=True)
    dtx.end(two, tx)
    dtx.start(one, tx, resume=True)
    one.publish("", "queue-a", PERSISTENT, b"third", False)
    dtx.end(one, tx)
    done = []
    dtx.commit(one, tx, True, done.append)
    world.sync()
    assert done == [OK]
    assert world.bodies("queue-a") == [b"second", b"third"] and world.bodies("queue-b") == [b"payload"]


def test_a_branch_past_its_timeout_is_rolled_back_while_still_associated(world):
    dtx, ch, tx = world.dtx, world.channel(), xid("timeout")
    dtx.select(ch)
    dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    dtx.set_timeout(tx, 1)
    assert dtx.get_timeout(tx) == 1
    assert dtx in world.vhost.timers
    world.broker.tick(time.monotonic() + 0.5)
    assert world.count("queue-a") == 0
    world.broker.tick(time.monotonic() + 1.5)
    assert world.bodies("queue-a") == [b"payload"] and world.count("queue-b") == 0
    assert dtx.end(ch, tx) == RBTIMEOUT
    assert dtx.rollback(tx) == RBTIMEOUT
    assert tx not in dtx.branches


def test_a_closed_channel_ends_its_association_and_marks_the_branch_rollback_only(world):
    dtx, ch, tx = world.dtx, world.channel(), xid("implicit")
    dtx.select(ch)
    dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    ch.close()  # the session ended: the channel gives back what it held
    assert world.bodies("queue-a") == [b"payload"]
    assert prepared(dtx, tx) == RBROLLBACK
    assert dtx.rollback(tx) == RBROLLBACK
    assert world.bodies("queue-a") == [b"payload"] and world.count("queue-b") == 0


def test_end_with_fail_rolls_back(world):
    dtx, ch, tx = world.dtx, world.channel(), xid("fail")
    dtx.select(ch)
    dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    assert dtx.end(ch, tx, fail=True) == RBROLLBACK
    assert world.bodies("queue-a") == [b"payload"]
    done = []
    dtx.commit(ch, tx, True, done.append)
    assert done == [RBROLLBACK] and tx not in dtx.branches


def _prepared_then_crash(world, name: str) -> Xid:
    ch, tx = world.channel(), xid(name)
    world.dtx.select(ch)
    world.dtx.start(ch, tx)
    swap(ch, "queue-a", "queue-b")
    world.dtx.end(ch, tx)
    assert prepared(world.dtx, tx) == OK
    world.sync()  # whatever else was pending; the broker then vanishes without closing anything
    return tx


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_prepared_branch_survives_a_crash_and_completes_after_it(world, tmp_path, outcome):
    tx = _prepared_then_crash(world, "crash-" + outcome)
    again = World(tmp_path / "data")
    assert again.dtx.recover() == [tx]
    assert again.count("queue-a") == 0  # still held by the branch, not redelivered to anyone
    assert again.count("queue-b") == 0
    ch = again.channel()
    c = ch.consume("queue-a", "", False, False, {})
    ch.start_consumer(c)
    assert ch.sink.deliveries == []
    if outcome == "commit":
        done = []
        again.dtx.commit(ch, tx, False, done.append)
        again.sync()
        assert done == [OK]
        expect_a, expect_b = [], [b"payload"]
    else:
        assert again.dtx.rollback(tx) == OK
        assert [bytes(d[3].body) for d in ch.sink.deliveries] == [b"payload"]  # back, to the consumer
        assert ch.sink.deliveries[0][2] is True  # redelivered
        ch.cancel(c.tag)
        ch.close()
        again.sync()
        expect_a, expect_b = [b"payload"], []
    third = World(tmp_path / "data")  # and the outcome itself is durable
    assert third.dtx.recover() == []
    assert third.bodies("queue-a") == expect_a and third.bodies("queue-b") == expect_b
