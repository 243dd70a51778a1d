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

``Sent`` is the sending side, ``Arrived`` the receiving side; neither does I/O. So are
``Confirming`` and ``Refusals``, which let a sync's answer name the messages a full queue
refused, by record number and position, so that only their confirms are nacks.
"""

from __future__ import annotations

import os

__all__ = ["Sent", "Arrived", "Confirming", "Refusals"]


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


class Confirming:
    """Which publisher confirm each message of a numbered record is, on the sending side, so
    that a full queue there that refused some of them costs those confirms only (a nack each),
    as on one node, not every confirm waiting for the sync (``Refusals`` is the other side).

    ``routed`` as a message is forwarded while its channel publishes it (the publish number is
    its channel's next); ``sent`` when the record goes, with the message at each position;
    ``unsent`` after a turn's records went (what was routed and never sent has no record);
    ``refused`` maps a sync's answer to confirms; ``settled`` forgets records answered."""

    def __init__(self) -> None:
        self._routed: dict[int, tuple] = {}  # id(message) -> (confirms, publish number), until sent
        self._records: dict[str, dict[int, list]] = {}  # node -> record number -> entry per position

    def routed(self, message, confirms, number: int) -> None:
        self._routed[id(message)] = (confirms, number)

    def sent(self, node: str, number: int, messages: list) -> None:
        if self._routed:
            get = self._routed.get
            entries = [get(id(m)) for m in messages]
            if any(entries):
                self._records.setdefault(node, {})[number] = entries

    def unsent(self) -> None:
        self._routed.clear()

    def refused(self, node: str, positions) -> list[tuple] | None:
        """(confirms, publish number) of each message of ``positions`` ((record number, position
        or None for the whole record), as ``Refusals.answer`` gives them); None if one of them
        was not noted (sent by no channel's publish, as messages held for a replicated queue
        between leaders and sent on later, or by a publisher without confirms): whose confirm
        it was is not known, so every confirm waiting must be a nack."""
        records = self._records.get(node, {})
        out = []
        for number, position in positions:
            entries = records.get(number)
            if entries is None:
                return None
            for entry in (entries if position is None else entries[position:position + 1]):
                if entry is None:
                    return None
                out.append(entry)
        return out

    def settled(self, node: str, upto: int) -> None:
        records = self._records.get(node)
        if records:
            for number in [n for n in records if n <= upto]:
                del records[number]


class Refusals:
    """The receiving side of ``Confirming``: which messages of which records from each node a
    queue here refused, for the next sync's answer."""

    def __init__(self) -> None:
        self._taking: tuple[str, int] | None = None  # the record being taken in: (node, number)
        self._refused: dict[str, list] = {}

    def taking(self, node: str, tag: tuple | None) -> None:
        """The record of ``node`` tagged ``tag`` (``Sent.next``) is taken in now; None: done."""
        self._taking = (node, tag[1]) if tag is not None else None

    def refused(self, node: str, position: int | None) -> None:
        """A queue refused the message at ``position`` (None: which one is not known) of the
        record being taken in; outside one, the whole of the next answer is a refusal."""
        number = self._taking[1] if self._taking is not None and self._taking[0] == node else None
        self._refused.setdefault(node, []).append((number, position))

    def answer(self, node: str) -> list | None:
        """What a sync answers now, then forgotten: None if nothing was refused, else the list of
        (record number, position or None); a record number None means not known."""
        return self._refused.pop(node, None)
