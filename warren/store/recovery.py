"""Opening a queue store directory: rebuild the index from the files and repair what a crash left.

Steps, in this order:

1. list ``msgs.N`` and ``acks.N``; an ``acks.N`` without its ``msgs.N`` is an orphan (the
   segment was deleted and the crash came before its ack log went) and is deleted;
2. load every segment in id order (segment.py): index its valid records, truncate a torn tail;
   damage in the middle is read around: the file is copied to the quarantine folder and
   rewritten without the damaged records (damage.py), which ``RecoveryStats.damage`` lists;
3. replay each segment's ack log over it, in order: acks clear messages, delivered marks set
   the flag, returned marks (quorum queues) add one to the message's return count and clear the
   flag (it is back in the queue); a torn tail is truncated, damage read around as in step 2
   (a lost ack brings its message back: at least once, never lost). An ack for a seq the
   segment does not hold (its record was lost, the ack was not) is ignored, but counts towards
   ``last_seq``, and a lost message that was acked anyway is not counted as lost;
4. delete segments whose messages are all acked (a crash came before their deletion), except
   the newest, which stays the write segment, and except the one holding ``last_seq`` when
   the newest is empty (the seq must not go back); ``msgs.N`` first, then a directory fsync,
   then ``acks.N``, so an ack log never disappears while its segment might come back.

Recovery only reads, truncates and deletes, except that a file with damage in the middle is
replaced whole (a copy kept aside first, then a temporary file, fsync, rename): a crash during
recovery is recovered from by running it again.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from warren.store.record import KIND_ACKS, T_ACK, T_DELIVERED, T_RETURNED
from warren.store.segment import ACKED, DELIVERED, LogFile, Segment, segment_name

__all__ = ["RecoveryStats", "Recovered", "recover_directory"]

log = logging.getLogger("warren.store")

_ACK_TYPES = frozenset((T_ACK, T_DELIVERED, T_RETURNED))


@dataclass
class RecoveryStats:
    segments: int = 0          # segment files kept
    messages: int = 0          # messages not acked
    bytes: int = 0             # octets of their records
    acks: int = 0              # ack records read
    truncated_files: int = 0   # files cut back to their last valid record
    truncated_bytes: int = 0
    deleted_segments: int = 0  # fully acked segments found and deleted
    seconds: float = 0.0
    damage: list = field(default_factory=list, repr=False)  # damage.Damage of every damaged stretch read around or cut

    @property
    def lost_messages(self) -> int:
        """Messages lost to damage (not acked before it): at most this many, at least one per stretch."""
        return sum(d.records if d.records is not None else 1 for d in self.damage if d.kind == "messages")

    @property
    def lost_acks(self) -> int:
        """Ack and delivered records lost to damage (their messages come back: at least once)."""
        return sum(d.records or 0 for d in self.damage if d.kind == "acks")


@dataclass
class Recovered:
    segments: list[Segment] = field(default_factory=list)  # in seq order; may be empty
    keep: Segment | None = None  # fully acked, kept only because it holds last_seq
    last_seq: int = 0
    next_id: int = 1
    returns: dict = field(default_factory=dict)  # seq -> returned marks, for messages not acked
    stats: RecoveryStats = field(default_factory=RecoveryStats)


def recover_directory(directory: str, dir_fd: int, fsync: bool, quarantine: str | None = None) -> Recovered:
    t0 = time.perf_counter()
    r = Recovered()
    stats = r.stats

    def path(prefix: str, sid: int) -> str:
        return os.path.join(directory, segment_name(prefix, sid))

    ids: dict[str, set[int]] = {"msgs": set(), "acks": set()}
    for name in os.listdir(directory):
        if name.endswith(".repair"):  # a rewrite that never reached its rename: the original is whole
            os.unlink(os.path.join(directory, name))
            continue
        prefix, _, num = name.partition(".")
        if prefix in ids and len(num) == 10 and num.isdigit():
            ids[prefix].add(int(num))
    r.next_id = max(ids["msgs"] | ids["acks"], default=0) + 1  # ids are never reused
    for sid in sorted(ids["acks"] - ids["msgs"]):
        os.unlink(path("acks", sid))
    max_ack = prev_last = 0
    for sid in sorted(ids["msgs"]):
        seg, dropped, damage = Segment.load(sid, path("msgs", sid), quarantine, fsync)
        _count_truncation(stats, dropped)
        for d in damage:
            if d.first is None and d.last is not None and prev_last:  # the segment's first records: the
                d.first = prev_last + 1                               # previous segment says where they began
                d.records = max(1, d.last - d.first + 1)
        stats.damage += damage
        if seg.seqs and seg.seqs[0] <= prev_last:
            # cannot happen short of damage: appends enforce increasing seqs across segments
            log.error("%s: seqs overlap the previous segment; skipping the overlap", seg.file.path)
            for i, seq in enumerate(seg.seqs):
                if seq <= prev_last and not seg.flags[i] & ACKED:
                    seg.set_acked(i)
            seg.first = prev_last + 1  # keeps the segments sorted for lookups
        prev_last = max(prev_last, seg.last)
        if sid in ids["acks"]:
            max_ack = max(max_ack, _load_acks(seg, path("acks", sid), stats, r.returns, quarantine, fsync, damage))
        r.segments.append(seg)
    r.last_seq = max(prev_last, max_ack)

    doomed = [s for s in r.segments[:-1] if s.live == 0]
    if doomed and doomed[-1].last and doomed[-1].last == r.last_seq:
        r.keep = doomed.pop()  # the newest segment is empty: this one remembers last_seq
    for seg in doomed:
        r.segments.remove(seg)
        seg.file.close()
        if seg.file.created:
            os.unlink(seg.file.path)
    if doomed:
        stats.deleted_segments = len(doomed)
        if fsync:
            os.fsync(dir_fd)  # the msgs unlinks are durable before any ack log goes
        for seg in doomed:
            if seg.acks is not None and seg.acks.created:
                os.unlink(seg.acks.path)

    stats.segments = sum(1 for s in r.segments if s.file.created)
    stats.messages = sum(s.live for s in r.segments)
    stats.bytes = sum(s.live_bytes for s in r.segments)
    stats.seconds = time.perf_counter() - t0
    return r


def _count_truncation(stats: RecoveryStats, dropped: int) -> None:
    if dropped:
        stats.truncated_files += 1
        stats.truncated_bytes += dropped


def _load_acks(seg: Segment, path: str, stats: RecoveryStats, returns: dict, quarantine: str | None,
               fsync: bool, lost: list) -> int:
    """Replay ``acks.N`` over its segment; returns the highest acked seq. Return counts of
    messages still live go into ``returns``. ``lost``: the damage of the segment's file, whose
    counts leave out the messages acked anyway."""
    lf, scan, dropped, damage = LogFile.open_existing(path, KIND_ACKS, _ACK_TYPES, quarantine, fsync, exact_length=8)
    stats.damage += damage
    ranges = [d for d in lost if d.first is not None and d.last is not None]
    counted: set[int] = set()
    flags, lengths, index = seg.flags, seg.lengths, seg.index
    max_ack = acks = acked = acked_bytes = 0
    counts: dict[int, int] = {}
    for k, (rtype, seq, extra) in enumerate(zip(scan.types, scan.seqs, scan.lengths)):
        if extra:
            scan.end, scan.error = scan.offsets[k], "ack record of the wrong size"
            break
        i = index(seq)
        if rtype == T_ACK:
            acks += 1
            if seq > max_ack:
                max_ack = seq
            if i < 0 and ranges and seq not in counted:  # an acked message in a damaged stretch was not lost to it
                counted.add(seq)
                for d in ranges:
                    if d.first <= seq <= d.last and d.records:
                        d.records -= 1
            if i >= 0 and not flags[i] & ACKED:
                flags[i] |= ACKED
                acked += 1
                acked_bytes += lengths[i]
        elif i < 0:
            continue
        elif rtype == T_RETURNED:
            flags[i] &= ~DELIVERED
            counts[seq] = counts.get(seq, 0) + 1
        else:
            flags[i] |= DELIVERED
    for seq, n in counts.items():
        i = index(seq)
        if not flags[i] & ACKED:
            returns[seq] = n
    seg.live -= acked
    seg.live_bytes -= acked_bytes
    stats.acks += acks
    _count_truncation(stats, dropped + lf.truncate_to(scan.end, scan.error, fsync))
    seg.acks = lf
    return max_ack
