"""A last-value queue (Qpid's ``qpid.last_value_queue_key``): one ready message per key.

Each message's key is the value of the queue's key header (compared as a string; a message
without the header has the empty key, as in Qpid). A message enqueued with the same key as a
*ready* message replaces it: the old one leaves the queue (acked in the store, not
dead-lettered) and the new one goes to the tail, as Qpid's brokers do, so a browser that has
seen the old value sees the new one as a new message. A message already taken by a consumer
(unacked) is never replaced: the new value is simply enqueued. When a taken message comes back
(release, requeue, channel close) and a ready message has its key, the newer of the two stays.

``_latest`` maps a key to the seq of its newest message, ready or taken; the entry is checked
against the ready messages (by seq, the deque is in seq order) before a replacement, so a stale
entry costs nothing but the check, and it goes when its message is settled.

Everything else is the classic queue's (TTL, limits with the replacement done first, so a ring
queue never drops another key's value to make room for an update, dead-lettering, consumers,
browsing by seq). A last-value queue keeps its ready messages in memory (there is at most one
per key): it does not page, and a durable one reads all its messages back at start-up, keeping
the newest of a key if a crash left two.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

from warren.broker.queue import Queue
from warren.broker.queues.qpid_args import header_key, lvq_header

__all__ = ["LastValueQueue"]


def _seq_of(entry) -> int:
    return entry[0]


class LastValueQueue(Queue):
    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.key_header: str = lvq_header(self.arguments)
        self._latest: dict[str, int] = {}  # key -> seq of its newest message (ready or taken)
        self.replaced = 0  # messages that left because a newer one had their key

    def key_of(self, msg) -> str:
        try:
            value = msg.headers.get(self.key_header)
        except Exception:  # a property list we cannot read has no key
            return ""
        key = header_key(value)
        return "" if key is None else key

    def _ready_index(self, seq: int) -> int | None:
        ready = self.ready
        i = bisect_left(ready, seq, key=_seq_of)
        return i if i < len(ready) and ready[i][0] == seq else None

    def _take_ready(self, i: int):
        entry = self.ready[i]
        del self.ready[i]
        self.ready_bytes -= len(entry[1].body)
        return entry

    def publish(self, message) -> int:
        key = self.key_of(message)
        old_seq = self._latest.get(key)
        i = self._ready_index(old_seq) if old_seq is not None and self.ready else None
        before = self._seq
        if i is None:
            need = super().publish(message)
            if self._seq != before:
                self._latest[key] = self._seq
            return need
        # out of the queue before the new one comes in: a limit counts one message per key
        old = self._take_ready(i)
        need = super().publish(message)
        if self._seq == before:  # refused by a limit, or a duplicate: the old value stays
            self.ready.insert(bisect_left(self.ready, old[0], key=_seq_of), old)
            self.ready_bytes += len(old[1].body)
            return need
        self._latest[key] = self._seq
        self.replaced += 1
        self.forget(old[0], old[1])
        return need

    def forget(self, seq: int, message) -> None:
        super().forget(seq, message)
        latest = self._latest
        if latest:
            key = self.key_of(message)
            if latest.get(key) == seq:
                del latest[key]

    def requeue(self, entries, redelivered: bool = True) -> None:
        """Taken messages come back, unless a newer message with their key is ready (or comes
        back with them): then the older one is replaced."""
        newest: dict[str, tuple] = {}
        stale = []
        for seq, msg in entries:
            key = self.key_of(msg)
            other = newest.get(key)
            if other is not None and other[0] > seq:
                stale.append((seq, msg))
                continue
            if other is not None:
                stale.append(other)
            newest[key] = (seq, msg)
        back = []
        for key, (seq, msg) in newest.items():
            current = self._latest.get(key)
            i = self._ready_index(current) if current is not None and current != seq else None
            if i is not None and current > seq:
                stale.append((seq, msg))  # a newer value is ready
                continue
            self._latest[key] = seq
            if i is not None:  # the ready one is older: the returning value replaces it
                old = self._take_ready(i)
                self.replaced += 1
                self.forget(old[0], old[1])
            back.append((seq, msg))
        for seq, msg in stale:
            self.replaced += 1
            self.forget(seq, msg)
        super().requeue(sorted(back, key=_seq_of), redelivered)

    def purge(self) -> int:
        n = super().purge()
        self._latest.clear()  # taken messages that come back are indexed again then
        return n

    def page_out(self) -> None:
        pass  # every ready message stays in memory (module docstring)

    def resume_numbering(self, last_seq: int) -> None:
        """The end of a start-up recovery: read every message back (a replacement must see them
        all), and index them, keeping the newest of a key."""
        super().resume_numbering(last_seq)
        while self.paged:
            self.page_in()
        newest: dict[str, tuple] = {}
        stale = []
        for entry in self.ready:
            key = self.key_of(entry[1])
            if key in newest:
                stale.append(newest[key])
            newest[key] = entry
        if stale:
            gone = {e[0] for e in stale}
            self.ready = deque(e for e in self.ready if e[0] not in gone)
            for seq, msg, _, _ in stale:
                self.ready_bytes -= len(msg.body)
                self.forget(seq, msg)
        self._latest = {key: entry[0] for key, entry in newest.items()}

    def __repr__(self) -> str:
        return f"<LastValueQueue {self.name!r} key={self.key_header!r} ready={len(self.ready)}>"
