"""Damage inside a store file: telling it from a torn tail, reading around it, keeping it aside.

A crash can only leave damage at the end of a file (segment.py): the last write cut short or
read back as zeros. Anything else is damage to data that was already on the disk (a flipped
bit, a lost sector), and the records after it are good and were acknowledged. So recovery
keeps reading past a bad record: ``record.find_seq_record`` and ``stream_format.find_entry``
find the next offset where a record's framing, bounds and CRC check out, and the scan goes on
from there. A damaged record costs that record, plus whatever lies between it and the next
record that can be framed again, never the rest of the file.

What is what, at the first bad record of a file:

* **torn tail**: no good record after it, and it runs past the end of the file or everything
  from it on is zeros. What a crash leaves; cut off as before, nothing kept aside.
* **lost writes** (ack logs only): stretches of zeros and whole records to the end, as a power
  cut leaves a file written several times between fsyncs (``is_lost_writes_tail``). A torn tail
  too: cut at the first zero, nothing kept aside or reported (the acks lost bring their
  messages back, at least once). In a message file the same octets are read around and
  reported: there the zeros may be confirmed messages that the disk lost.
* **damaged tail**: no good record after it, but it is whole (its length fits) and not zeros:
  a flipped bit in the last record. The file is copied aside, then cut there.
* **damage in the middle**: good records follow. The file is copied aside, then rewritten
  (a temporary file, fsync, rename, fsync of the folder) without the damaged octets, so the next
  start finds a clean file and the damage is reported once.

The copy goes to the quarantine folder (``quarantine_dir_for``: ``<data dir>/quarantine``) as
``<store folder name>/<file name>.<UTC time>``, fsynced before anything is cut or rewritten, so
what recovery drops can still be looked at, or put back by hand. ``Damage`` says what was lost:
the file, the octets, and the seqs or offsets of the records that were in them. A random
match of the framing is not taken for a record: it would need the CRC-32 over the header and
the payload to agree (about one chance in 2^32 for a candidate that passes the cheap checks).
"""

from __future__ import annotations

import datetime
import logging
import os
import re
from dataclasses import dataclass

from warren.store.fileio import fsync_dir
from warren.store.record import (
    FILE_HEADER_SIZE, HEADER, HEADER_SIZE, FormatError, SeqScan, file_header, find_seq_record,
)
from warren.codec.bulk_records import ENTRY_HEADER, ENTRY_HEADER_SIZE
from warren.store.stream_format import EntryScan, find_entry

__all__ = [
    "DamagedFile", "damaged_header", "Damage", "StoreDamage", "store_damage", "quarantine_dir_for",
    "quarantine_copy", "rewrite_file", "scan_seq_file", "scan_stream_file", "is_torn_tail", "is_lost_writes_tail",
    "QUARANTINE",
]

log = logging.getLogger("warren.store")

QUARANTINE = "quarantine"  # the folder in the data directory that keeps damaged files aside
# store folders whose parent is one of these live in a data directory: <data>/queues/<digest>
_STORE_ROOTS = ("queues", "streams", "delayed")


class DamagedFile(FormatError):
    """A file the broker will not start on: reading around its damage could lose definitions,
    users or policies without anyone deciding to (the definitions log, access.json, policies.json).
    The message is one line naming the file and the way out."""


@dataclass
class Damage:
    """One damaged stretch of one file, and what it cost.

    ``first``/``last``: the seqs (queue files) or offsets (streams) the lost records may have
    had, inclusive (None where the file does not say: a damaged tail of a message file).
    ``records``: how many records were lost: exact for streams and ack logs, at most that
    many for message files (seqs may have gaps), None if unknown (a damaged tail).
    """

    path: str
    start: int          # the first damaged octet (where the bad record begins)
    end: int            # where the next good record begins (the file's size for a damaged tail)
    kind: str           # "messages", "acks", "stream"
    first: int | None = None
    last: int | None = None
    records: int | None = None
    reason: str = ""
    tail: bool = False  # nothing good after it: the file was cut here
    quarantined: str | None = None  # where the copy of the file went

    def describe(self) -> str:
        what = {"messages": "messages with seqs", "acks": "ack records", "stream": "entries with offsets",
                "definitions": "definition records"}[self.kind]
        count = f"{self.records}" if self.records is not None else "at least 1"
        span = f" {self.first}..{self.last}" if self.first is not None and self.last is not None else (
            f" from {self.first}" if self.first is not None else f" up to {self.last}" if self.last is not None
            else "")
        where = "to the end of the file" if self.tail else f"to {self.end}"
        return (f"{self.path}: {self.reason} at octet {self.start}; {count} {what}{span} lost "
                f"(octets {self.start} {where}, {self.end - self.start} octets)")

    def to_json(self) -> dict:
        return {"file": self.path, "kind": self.kind, "start": self.start, "end": self.end,
                "first": self.first, "last": self.last, "records": self.records, "tail": self.tail,
                "reason": self.reason, "quarantined": self.quarantined}


def quarantine_dir_for(store_directory: str) -> str:
    """Where a store keeps damaged files aside: ``<data dir>/quarantine`` for the data directory's
    stores (``<data>/queues/<digest>`` and the like), else ``quarantine`` beside the store folder."""
    parent = os.path.dirname(os.path.abspath(store_directory))
    if os.path.basename(parent) in _STORE_ROOTS:
        parent = os.path.dirname(parent)
    return os.path.join(parent, QUARANTINE)


def quarantine_copy(path: str, data, quarantine_dir: str, fsync: bool = True, folder: str | None = None) -> str:
    """Copy ``data`` (the file's octets as read) to the quarantine folder; returns the copy's path.

    It goes into ``folder`` there (default: the name of the store folder holding ``path``). The
    copy is fsynced, and so are the folders it was created in, before the caller cuts or
    rewrites anything: what recovery is about to drop must survive a crash of recovery itself.
    """
    if folder is None:
        folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    folder = os.path.join(quarantine_dir, folder) if folder else quarantine_dir
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = os.path.join(folder, f"{os.path.basename(path)}.{stamp}")
    _write_new(target, data, fsync)
    if fsync:
        fsync_dir(folder)
        fsync_dir(quarantine_dir)
        fsync_dir(os.path.dirname(os.path.abspath(quarantine_dir)))
    return target


def rewrite_file(path: str, data, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` whole (temporary file, fsync, rename, fsync of the folder)."""
    tmp = path + ".repair"
    _write_new(tmp, data, fsync)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _write_new(path: str, data, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(fd, mv):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


# file header octets that may differ from ours, at most, for a header to count as ours but damaged
MAX_HEADER_BITS_DAMAGED = 1  # one flipped bit; kinds differ from each other in two or more


def damaged_header(path: str, data, kind: bytes, what: str) -> Damage | None:
    """A Damage if the file header of ``data`` is ours with one bit flipped, else None.

    A header that differs in more bits, or is a prefix followed by zeros (torn), is left to
    ``check_file_header``, which treats it as torn or refuses a file that is not ours."""
    want = file_header(kind)
    head = bytes(data[:FILE_HEADER_SIZE])
    if len(head) < FILE_HEADER_SIZE or head == want:
        return None
    bits = sum(bin(a ^ b).count("1") for a, b in zip(head, want))
    if bits > MAX_HEADER_BITS_DAMAGED:
        return None
    return Damage(path, 0, FILE_HEADER_SIZE, what, records=0, reason="damaged file header")


def is_torn_tail(buf, bad: int, header_size: int, length_at) -> bool:
    """True if what starts at ``bad`` (with no good record after it) is what a crash leaves:
    a record that runs past the end of the file, or zeros to the end."""
    size = len(buf)
    if bad + header_size > size:
        return True
    if bad + header_size + length_at(buf, bad) > size:
        return True
    return not any(memoryview(buf)[bad:])


def _seq_length(buf, off: int) -> int:
    return HEADER.unpack_from(buf, off)[1]


_NONZERO = re.compile(rb"[^\x00]")


def is_lost_writes_tail(buf, bad: int, types: frozenset, exact_length: int | None = None) -> bool:
    """True if what starts at ``bad`` is what a power cut leaves in a file written several times
    between two fsyncs: stretches of zeros (writes that never reached the disk, the file's size
    did) and whole records (a later write that did), ending at the end of the file or in a torn
    tail (``is_torn_tail``). A crash never writes anything but the octets it was given, so a
    stretch holding anything else (a flipped bit) is damage, and so is a record that is whole and
    not zeros where a stretch of zeros should begin.

    An ack log is written at every group commit and fsynced at most once a second
    (queue_store.py, ``ack_sync_interval``), so a power cut routinely leaves this: the first
    writes since the last fsync read back as zeros, the newest one whole. Read around, the zeros
    looked like damage in the middle of the file.
    """
    size = len(buf)
    off = bad
    if off >= size or buf[off] != 0:
        return False  # no stretch of zeros: the caller's own rules (is_torn_tail) say what it is
    while off < size:
        if buf[off] != 0:  # no zeros here: only a torn record with nothing good after it is a crash's
            return (find_seq_record(buf, off, types, exact_length=exact_length) is None
                    and is_torn_tail(buf, off, HEADER_SIZE, _seq_length))
        m = _NONZERO.search(buf, off)
        if m is None:
            return True  # zeros to the end
        start = m.start()
        scan = SeqScan().run(buf, start, types)
        if exact_length is not None and any(n != exact_length - 8 for n in scan.lengths):
            return False
        if scan.end == start:  # no record where the zeros end
            return (find_seq_record(buf, start, types, exact_length=exact_length) is None
                    and is_torn_tail(buf, start, HEADER_SIZE, _seq_length))
        if scan.error is None:
            return True
        off = scan.end
    return True


def _entry_length(buf, off: int) -> int:
    return ENTRY_HEADER.unpack_from(buf, off)[3]


def scan_seq_file(path: str, data, types: frozenset, kind: str,
                  exact_length: int | None = None) -> tuple[SeqScan, list[Damage], list[tuple[int, int]]]:
    """Scan a message or ack file, reading around damage: (scan, damage found, good stretches).

    The scan's arrays hold every good record; ``end`` is where the last good stretch ends. The
    good stretches are the (start, end) octet ranges of whole records, in order; a caller that
    found damage keeps only those (``rewrite_file``). Message files must have increasing seqs,
    so a record found after damage must carry a seq above the last good one.
    """
    scan = SeqScan().run(data, FILE_HEADER_SIZE, types)
    damage: list[Damage] = []
    stretches = [(FILE_HEADER_SIZE, scan.end)]
    increasing = kind == "messages"
    while scan.error is not None:
        bad, reason = scan.end, scan.error.split(" at ")[0]
        if kind == "acks" and is_lost_writes_tail(data, bad, types, exact_length):
            # a power cut's tail, not damage: cut there like any torn tail, nothing kept aside.
            # Only for ack logs: losing an ack only brings its message back (at least once),
            # while a stretch of zeros in a message file may be a zeroed stretch of confirmed
            # messages, which is read around and reported (docs/storage.md, "Damage")
            scan.error = f"{reason}: the unsynced tail a power cut left (zeros, then records) at {bad}"
            break
        prev = scan.seqs[-1] if scan.seqs else None
        nxt = find_seq_record(data, bad, types, after_seq=prev if increasing and prev is not None else -1,
                              exact_length=exact_length)
        if nxt is None:
            if not is_torn_tail(data, bad, HEADER_SIZE, _seq_length):
                d = Damage(path, bad, len(data), kind, reason=reason, tail=True)
                if increasing and prev is not None:
                    d.first = prev + 1
                elif kind == "acks":
                    d.records = max(1, (len(data) - bad) // (HEADER_SIZE + 8))
                damage.append(d)
            break
        d = Damage(path, bad, nxt, kind, reason=reason)
        if kind == "acks":
            d.records = max(1, (nxt - bad) // (HEADER_SIZE + 8))
        scan.error = None
        count = len(scan.seqs)
        scan.run(data, nxt, types)
        if increasing and len(scan.seqs) > count:
            d.first = prev + 1 if prev is not None else None
            d.last = scan.seqs[count] - 1
            if d.first is not None:
                d.records = max(1, d.last - d.first + 1)
        damage.append(d)
        stretches.append((nxt, scan.end))
    return scan, damage, [(a, b) for a, b in stretches if b > a]


@dataclass
class StreamRun:
    """Consecutive good entries of one stream segment file: the first's offset, the octets."""

    base: int
    start: int
    end: int
    scan: EntryScan


def scan_stream_file(path: str, data, base: int) -> tuple[list[StreamRun], list[Damage]]:
    """Scan a stream segment, reading around damage: (runs of consecutive entries, damage found).

    The first run starts at the file header (it may be empty); each later one starts at the
    first good entry after a damaged stretch and carries its own first offset, which is why a
    damaged segment is split at each stretch (stream_store.py): a segment's offsets are dense.
    """
    scan = EntryScan().run(data, FILE_HEADER_SIZE, base)
    runs = [StreamRun(base, FILE_HEADER_SIZE, scan.end, scan)]
    damage: list[Damage] = []
    while scan.error is not None:
        bad, reason = scan.end, scan.error.split(" at ")[0]
        expect = runs[-1].base + len(scan.positions)
        found = find_entry(data, bad, expect)
        if found is None:
            if not is_torn_tail(data, bad, ENTRY_HEADER_SIZE, _entry_length):
                damage.append(Damage(path, bad, len(data), "stream", first=expect, reason=reason, tail=True))
            break
        pos, offset = found
        damage.append(Damage(path, bad, pos, "stream", first=expect, last=offset - 1, records=offset - expect,
                             reason=reason))
        scan = EntryScan().run(data, pos, offset)
        runs.append(StreamRun(offset, pos, scan.end, scan))
    return runs, damage


@dataclass
class StoreDamage:
    """What one queue or stream lost to damaged files when it was opened (the broker's report:
    the log, ``/api/health/checks/store-damage`` and ``warren_store_damaged_records_total``)."""

    kind: str          # "queue", "stream" or "delayed" (a delayed-message exchange's store)
    vhost: str
    name: str
    records: int       # messages or stream entries lost (at most: see Damage.records)
    acks: int          # ack and delivered records lost (their messages come back)
    damage: list

    def describe(self) -> str:
        what = "entries" if self.kind == "stream" else "messages"
        where = sorted({d.quarantined for d in self.damage if d.quarantined})
        spans = "; ".join(_span(d) for d in self.damage)
        return (f"{self.kind} '{self.name}' in vhost '{self.vhost}' lost {self.records} {what}"
                f"{f' and {self.acks} ack records' if self.acks else ''} to damaged files ({spans}); "
                f"the damaged files are kept in {', '.join(where) or 'no copy'}")

    def to_json(self) -> dict:
        return {"kind": self.kind, "vhost": self.vhost, "name": self.name, "records": self.records,
                "acks": self.acks, "damage": [d.to_json() for d in self.damage]}


def _span(d: Damage) -> str:
    label = {"messages": "seqs", "acks": "ack records at octets", "stream": "offsets", "definitions": "records"}[d.kind]
    if d.kind == "acks":
        return f"{label} {d.start}..{d.end - 1} of {os.path.basename(d.path)}"
    if d.first is not None and d.last is not None:
        return f"{label} {d.first}..{d.last}"
    if d.first is not None:
        return f"{label} from {d.first} (the rest of {os.path.basename(d.path)})"
    if d.last is not None:
        return f"{label} up to {d.last}"
    return f"octets {d.start}..{d.end - 1} of {os.path.basename(d.path)}"


def store_damage(kind: str, vhost: str, name: str, stats) -> StoreDamage | None:
    """The report for a store just opened (its ``recovery_stats``), None if nothing was damaged."""
    damage = getattr(stats, "damage", None)
    if not damage:
        return None
    if kind == "stream":
        return StoreDamage(kind, vhost, name, stats.lost_records, 0, list(damage))
    return StoreDamage(kind, vhost, name, stats.lost_messages, stats.lost_acks, list(damage))
