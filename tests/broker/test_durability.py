"""The broker's group commit (warren/broker/durability.py) and the queue stores' lagging ack logs:
a sync that leaves ack logs unfsynced remembers the store, and the tick asks for the sync that
takes them once they are due. Confirms after a sync, through real clients:
tests/e2e/test_confirms_tx.py; acks and delivered marks across kill -9: tests/e2e/test_kill9.py."""

from __future__ import annotations

import time

from warren.broker.durability import ACK_SYNC_INTERVAL, Durability


def run_sync(d: Durability) -> None:
    number, stores = d.begin_sync()
    d.sync(stores)
    d.end_sync(number)


def test_a_queue_store_s_unsynced_ack_log_gets_a_sync_of_its_own_once_due(tmp_path):
    d = Durability(tmp_path)
    requests = []
    d.request_sync = lambda: requests.append(1)
    store = d.open_queue_store("/", "q")
    try:
        assert store.ack_sync_interval == ACK_SYNC_INTERVAL > 0
        store.append(1, b"m")
        d.wrote(store)
        run_sync(d)  # the message: fsynced
        store.ack(1)
        d.wrote(store)
        store._acks_synced_at = time.monotonic()  # as if a sync had just taken the ack logs
        run_sync(d)  # the ack: written, not fsynced (not due)
        assert store in d.lazy_acks and store.acks_owed()
        requests.clear()
        d.tick(time.monotonic())
        assert requests == [] and store in d.lazy_acks  # not due yet
        d.tick(time.monotonic() + ACK_SYNC_INTERVAL + 0.1)
        assert requests == [1] and store in d.dirty and store not in d.lazy_acks
        store._acks_synced_at -= ACK_SYNC_INTERVAL + 0.1  # due now: this sync fsyncs the ack log
        run_sync(d)
        assert not store.acks_owed() and store not in d.lazy_acks
    finally:
        store.close()
        d.definitions.close()


class Waiter:
    """What a channel's Confirms does for the group commit: remembers the sync numbers it saw."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def synced(self, number: int) -> None:
        self.seen.append(number)


def test_one_sync_at_a_time_even_for_someone_waiting(tmp_path):
    """The default since the fsyncs left the GIL (durability.py): a second sync would only
    split the same messages over two fsyncs, one after the other on the FsyncWorker."""
    d = Durability(tmp_path)
    d.request_sync = lambda: None
    a = d.open_queue_store("/", "a")
    try:
        a.append(1, b"m")
        d.wrote(a)
        first = d.begin_sync()
        a.append(2, b"m")
        d.wrote(a)
        d.waiting.add(Waiter())
        assert d.begin_sync() is None and d.in_flight == 1
        d.sync(first[1])
        d.end_sync(first[0])
        assert d.begin_sync() is not None  # what was left dirty
    finally:
        a.close()
        d.definitions.close()


def test_a_second_sync_starts_beside_the_first_only_for_someone_waiting(tmp_path):
    d = Durability(tmp_path)
    d.max_in_flight = 2  # the general case, which a store slower to sync might want again
    d.request_sync = lambda: None
    a, b = d.open_queue_store("/", "a"), d.open_queue_store("/", "b")
    try:
        a.append(1, b"m")
        d.wrote(a)
        first = d.begin_sync()
        assert first is not None and d.in_flight == 1
        b.append(1, b"m")
        d.wrote(b)
        assert d.begin_sync() is None  # nobody waits: one sync at the disk at a time
        waiter = Waiter()
        d.waiting.add(waiter)
        second = d.begin_sync()
        assert second is not None and second[0] == first[0] + 1 and second[1] == [b]
        a.append(2, b"m")
        d.wrote(a)
        assert d.begin_sync() is None  # max_in_flight reached
        # the second finishes first: nothing is released until the first has
        d.sync(second[1])
        d.end_sync(second[0])
        assert d.synced == 0 and waiter.seen == [] and d.in_flight == 1
        d.sync(first[1])
        d.end_sync(first[0])
        assert d.synced == second[0] and waiter.seen == [second[0]] and d.in_flight == 0
        assert d.begin_sync() is not None  # what was left dirty
    finally:
        a.close()
        b.close()
        d.definitions.close()
