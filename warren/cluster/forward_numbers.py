"""The numbers on the records of messages one node sends another (reach.py ``send_forward``).

A confirm of a message sent to a queue on another node waits for that node's answer to a
``sync`` asked after it. A link can break with records on their way, and the next sync, asked on
a new link, is answered all the same; so every record carries (the sender's incarnation, its
number per destination, the last number whose confirms the sender settled), and a sync names
(incarnation, the last number sent, the last settled). The receiving node answers "lost" if a
record up to the last sent did not arrive (a gap, or fewer than named): every confirm then
waiting is a nack. Settled means acked by a sync's answer, or nacked when a sync failed (every
confirm then waiting is a nack); a node that started again, with no count of its own, counts on
from there, so only what was sent since must have reached it. Messages dropped unsent (their
link lost) skip a number (``skip``), which the next sync finds missing.

``Sent`` is the sending side, ``Arrived`` the receiving side; neither does I/O.
"""

from __future__ import annotations

import os

__all__ = ["Sent", "Arrived"]


class Sent:
    """What this node numbered for each other node."""

    def __init__(self) -> None:
        self.incarnation = os.urandom(8).hex()  # this process's numbering, told apart from a restart's
        self._sent: dict[str, int] = {}
        self._settled: dict[str, int] = {}

    def next(self, node: str) -> tuple[str, int, int]:
        """The tag of the next record to ``node``."""
        number = self._sent[node] = self._sent.get(node, 0) + 1
        return self.incarnation, number, self._settled.get(node, 0)

    def skip(self, node: str) -> None:
        """Records for ``node`` were dropped unsent: a number nobody will see."""
        self._sent[node] = self._sent.get(node, 0) + 1

    def sync_terms(self, node: str) -> tuple[str, int, int]:
        """What a sync asked now names: (incarnation, last sent, last settled)."""
        return self.incarnation, self._sent.get(node, 0), self._settled.get(node, 0)

    def settled(self, node: str, upto: int) -> None:
        """The confirms waiting on records up to ``upto`` are acked or nacked now."""
        self._settled[node] = max(self._settled.get(node, 0), upto)


class Arrived:
    """What this node received of each other node's records."""

    def __init__(self) -> None:
        self._seen: dict[str, list] = {}  # node -> [its incarnation, last number, a gap seen]

    def record(self, node: str, tag: tuple[str, int, int]) -> None:
        """A numbered record from ``node``: a number not the next one is a gap."""
        incarnation, number, settled = tag
        seen = self._seen.get(node)
        if seen is None or seen[0] != incarnation:  # its first since either process started
            self._seen[node] = [incarnation, number, number != settled + 1]
        elif number > seen[1]:  # (one at or below: late, from a link that broke; its sync was judged)
            seen[2] = seen[2] or number != seen[1] + 1
            seen[1] = number

    def missing(self, node: str, terms) -> bool:
        """For a sync from ``node`` naming ``terms`` (``Sent.sync_terms``): whether a record up to
        its last sent did not arrive here. Once answered, what follows is judged on its own."""
        if not terms or terms[1] <= terms[2]:  # nothing sent since the last confirms were settled
            return False
        incarnation, upto, _ = terms
        seen = self._seen.get(node)
        if seen is not None and seen[0] == incarnation and seen[1] >= upto and not seen[2]:
            return False
        last = seen[1] if seen is not None and seen[0] == incarnation else 0
        self._seen[node] = [incarnation, max(last, upto), False]
        return True
