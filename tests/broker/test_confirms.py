"""A channel's publisher confirms (warren/broker/confirms.py): which publish numbers may be
settled, in which order, and when the disk holds them. The client-visible behaviour (basic.ack,
basic.nack, after a sync) is tested with real clients in tests/e2e/test_confirms_tx.py."""

from __future__ import annotations

from warren.broker.confirms import Confirms


class FakeDurability:
    """Only the two things Confirms reads: the last completed sync and the waiting set."""

    def __init__(self) -> None:
        self.synced = 0
        self.waiting: set = set()

    def complete(self, number: int) -> None:
        self.synced = number
        waiting, self.waiting = self.waiting, set()
        for w in waiting:
            w.synced(number)


def make():
    durability = FakeDurability()
    ready = []
    return Confirms(durability, ready.append), durability, ready


def test_transient_publishes_settle_in_one_multiple_ack():
    confirms, _, ready = make()
    for _ in range(3):
        confirms.published(0)
    assert ready == [confirms]  # told once for the whole burst
    assert confirms.settle() == [(3, True, True)]
    assert confirms.settle() == []
    confirms.published(0)
    assert ready == [confirms, confirms]
    assert confirms.settle() == [(4, False, True)]


def test_a_refused_publish_is_a_nack_after_the_acks_before_it():
    confirms, _, _ = make()
    confirms.published(0)
    confirms.published(0)
    confirms.published(0, refused=True)
    confirms.published(0)
    assert confirms.settle() == [(2, True, True), (3, False, False), (4, False, True)]
    assert confirms.confirmed_upto == confirms.published_upto == 4


def test_persistent_publishes_wait_for_their_sync():
    confirms, durability, ready = make()
    confirms.published(0)
    confirms.published(1)  # waits for sync 1
    confirms.published(0)
    assert confirms in durability.waiting
    assert confirms.settle() == [(1, False, True)]  # only what precedes the first unsynced one
    ready.clear()
    durability.complete(1)
    assert ready == [confirms]
    assert confirms.settle() == [(3, True, True)]
    assert confirms.unsynced == type(confirms.unsynced)()


def test_a_later_sync_keeps_the_confirms_waiting_until_settled():
    confirms, durability, _ = make()
    confirms.published(1)
    confirms.published(2)
    durability.complete(1)
    assert confirms in durability.waiting  # sync 2 is still to come
    assert confirms.settle() == [(1, False, True)]
    durability.complete(2)
    assert confirms.settle() == [(2, False, True)]


def test_a_publish_refused_after_it_was_routed_is_the_only_nack_of_its_sync():
    """A full queue on another node refused one message of a burst (warren/cluster/reach.py):
    its confirm is a nack, the others of that sync acks, each settled once and in order."""
    confirms, durability, ready = make()
    for _ in range(5):
        confirms.published(1)  # each waits for sync 1 (the other node's answer)
    assert confirms.settle() == []
    ready.clear()
    confirms.refuse(4)
    confirms.refuse(2)
    confirms.refuse(4)  # told twice: one nack
    assert ready == [confirms]
    assert confirms.settle() == []  # still waiting for the sync
    durability.complete(1)
    assert confirms.settle() == [(1, False, True), (2, False, False), (3, False, True), (4, False, False),
                                 (5, False, True)]
    confirms.refuse(3)  # settled already: nothing changes
    confirms.refuse(9)  # never published
    assert confirms.settle() == []
