"""Publisher confirms of one channel: every publish numbered, and which may be settled now.

Protocol-neutral: 0-9-1 answers with basic.ack/basic.nack (``multiple`` where it covers more
than one), 0-10 would complete the transfers; the broker only says which publish numbers are
safe. All confirm state of a channel is here: the number of the last publish, how far the
client was told, the publishes a queue refused (x-overflow reject-publish: a nack) and the
persistent ones waiting for the disk.

Durability: a persistent message written to a durable queue is safe only once the group
commit that covers it completed (``durability.py``). ``published`` records the sync number
it waits for; ``Durability.end_sync`` calls ``synced`` on every object in its ``waiting`` set.

Batching: ``on_ready(confirms)`` is called once when something became ready to settle, and
not again until ``settle`` ran, so a burst of publishes costs one call (the 0-9-1 adapter
then writes one basic.ack per channel per write batch).
"""

from __future__ import annotations

from bisect import insort
from collections import deque

__all__ = ["Confirms"]


class Confirms:
    __slots__ = ("durability", "on_ready", "published_upto", "confirmed_upto", "nacks", "unsynced", "_flagged")

    def __init__(self, durability, on_ready) -> None:
        self.durability = durability
        self.on_ready = on_ready  # called with this object when something can be settled
        self.published_upto = 0  # the number of the last publish (1, 2, ...)
        self.confirmed_upto = 0  # every publish up to this one was settled
        self.nacks: deque[int] = deque()  # publish numbers a queue refused (x-overflow reject-publish)
        # (publish number, sync number) of persistent publishes whose confirm waits for the disk,
        # one entry per run: sync numbers never go down from one publish to the next, and a
        # publish is settled only with every one before it, so the first publish waiting for each
        # sync number says all that the others would (``settle``)
        self.unsynced: deque[tuple[int, int]] = deque()
        self._flagged = False  # on_ready was called and settle has not run since

    def published(self, sync: int, refused: bool = False) -> None:
        """One more publish: ``refused`` by a queue (nack), waiting for sync number ``sync``
        (0: nothing to wait for)."""
        self.published_upto = n = self.published_upto + 1
        if refused:
            self.nacks.append(n)
        elif sync:
            unsynced = self.unsynced
            if not unsynced or unsynced[-1][1] < sync:  # the first publish waiting for this sync
                unsynced.append((n, sync))
                self.durability.waiting.add(self)
        if not self._flagged:
            self._flagged = True
            self.on_ready(self)

    def synced(self, number: int) -> None:
        """A sync completed (``Durability.end_sync``): the publishes it covered may be settled."""
        if self.unsynced:
            if not self._flagged:
                self._flagged = True
                self.on_ready(self)
            self.durability.waiting.add(self)  # until settle finds them all synced

    def nack_unsynced(self) -> int:
        """Every publish still waiting for a sync becomes a nack (a cluster's node that held
        some of them did not answer: warren/cluster/reach.py). Some may have been kept: a nack
        says a message may be lost, never the reverse. Returns how many."""
        if not self.unsynced:
            return 0
        first = self.unsynced[0][0]
        self.unsynced.clear()
        waited = range(max(first, self.confirmed_upto + 1), self.published_upto + 1)
        self.nacks = deque(sorted(set(self.nacks).union(waited)))
        if not self._flagged:
            self._flagged = True
            self.on_ready(self)
        return len(waited)

    def refuse(self, number: int) -> None:
        """Publish ``number``, which waits for a sync, was refused after all: a full queue on
        another node turned it away (warren/cluster/reach.py). Its confirm is a nack."""
        if number <= self.confirmed_upto or number > self.published_upto or number in self.nacks:
            return
        insort(self.nacks, number)
        if not self._flagged:
            self._flagged = True
            self.on_ready(self)

    def settle(self) -> list[tuple[int, bool, bool]]:
        """What may be told now, in order: ``(publish number, multiple, ack)`` with ack False
        for a nack (never multiple). Everything before the first publish still waiting for the
        disk is covered; the acks before a nack go first, then the nack."""
        self._flagged = False
        upto = self.published_upto
        unsynced = self.unsynced
        if unsynced:
            synced = self.durability.synced
            while unsynced and unsynced[0][1] <= synced:
                unsynced.popleft()
            if unsynced:
                upto = unsynced[0][0] - 1
        done = self.confirmed_upto
        if upto <= done:
            return []
        out = []
        nacks = self.nacks
        while nacks and nacks[0] <= upto:
            n = nacks.popleft()
            if n - 1 > done:
                out.append((n - 1, n - 1 - done > 1, True))
            out.append((n, False, False))
            done = n
        if upto > done:
            out.append((upto, upto - done > 1, True))
        self.confirmed_upto = upto
        return out
