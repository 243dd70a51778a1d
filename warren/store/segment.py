"""Append-only store files: a buffered ``LogFile`` and the message ``Segment`` built on it.

A queue's messages live in segment files named ``msgs.0000000001``, ``msgs.0000000002``, …
(zero-padded ids, never reused). The newest is the write segment; when the next record would
take it past the configured size (default 8 MiB) a new one is started. Each segment has a
companion ``acks.<same id>`` log of ack and delivered records (see queue_store.py).

Writes are buffered: ``add`` appends a record to an in-memory bytearray and returns at once;
the owner hands the buffer to the OS with one ``write()`` per file per flush (``take`` +
``write_out``). No file is created until its first flush, so an append never makes a system
call. Files are not preallocated: the file size is always the end of the last write, which
keeps recovery simple (no zero padding to tell apart from data).

What a crash leaves behind: the data of the last (unsynced) writes may be missing, cut short
or read back as zeros, always at the end of the file: a torn last record, possibly a torn file
header if the file was new. A file whose header is torn never held synced data and is treated
as empty. Otherwise recovery (``LogFile.open_existing`` + ``Segment.load``) keeps every record
up to the last valid one and truncates the file there, so later appends start at a clean
record boundary and the junk can never be mistaken for records. Damage that is not a torn
tail (a bad record with good ones after it, or a whole last record failing its CRC) is read
around, and the file is copied to the quarantine folder before it is rewritten or cut
(damage.py).

Locking: a ``LogFile`` does not lock. Its owner holds its memory lock around ``add``, ``take``,
``done``, ``memory_part`` and ``ensure_fd``, and its I/O lock around ``write_out`` and ``close``
(see queue_store.py for why there are two).
"""

from __future__ import annotations

import logging
import os
from array import array
from bisect import bisect_left

from warren.store.fileio import fsync_dir  # noqa: F401  (its importers read it from here too)
from warren.store.damage import Damage, damaged_header, quarantine_copy, rewrite_file, scan_seq_file
from warren.store.record import (
    FILE_HEADER_SIZE, HEADER_SIZE, KIND_MESSAGES, T_MESSAGE, SeqScan, append_seq_record, check_file_header, file_header,
    verify,
)

__all__ = ["LogFile", "Segment", "segment_name", "fsync_dir", "DEFAULT_SEGMENT_SIZE"]

log = logging.getLogger("warren.store")

DEFAULT_SEGMENT_SIZE = 8 * 1024 * 1024
_MESSAGE_TYPES = frozenset((T_MESSAGE,))

ACKED = 1       # flags bit: the message is acked (gone)
DELIVERED = 2   # flags bit: the message was delivered at least once


def segment_name(prefix: str, seg_id: int) -> str:
    return f"{prefix}.{seg_id:010d}"


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class LogFile:
    """One append-only file with an in-memory tail that has not been handed to the OS yet.

    ``written`` octets are in the file; ``inflight`` are the buffers taken for writing and not
    written yet, in file order from ``written`` (more than one while a group commit's writes wait
    behind an earlier one's on the FsyncWorker's thread); ``pending`` follows them. ``size`` is
    the logical size of all three.
    """

    __slots__ = ("path", "kind", "fd", "written", "inflight", "pending", "size", "created")

    def __init__(self, path: str, kind: bytes) -> None:
        self.path = path
        self.kind = kind
        self.fd: int | None = None
        self.written = 0
        self.inflight: list[bytearray] = []
        self.pending = bytearray(file_header(kind))  # the header goes out with the first flush
        self.size = FILE_HEADER_SIZE
        self.created = False  # does the file exist on disk?

    @classmethod
    def open_existing(cls, path: str, kind: bytes, types: frozenset, quarantine: str | None = None,
                      fsync: bool = True, exact_length: int | None = None) -> tuple["LogFile", SeqScan, int, list]:
        """Read and scan an existing file of seq records: (log file, the scan, octets dropped, damage).

        Damage in the middle is read around (damage.py): with ``quarantine`` set, the file is
        copied there and rewritten without the damaged octets, and the scan describes the new
        file; a damaged tail is copied there too. The caller checks the records, then calls
        ``truncate_to(scan.end)``. A torn file header makes the file start over empty (it is
        recreated at the next flush).
        """
        data = original = read_file(path)
        lf = cls(path, kind)
        what = "messages" if kind == KIND_MESSAGES else "acks"
        header_damage = damaged_header(path, data, kind, what) if quarantine is not None else None
        if header_damage is not None:  # a flipped bit in the file header of a file of ours: read on
            data = file_header(kind) + data[FILE_HEADER_SIZE:]
        if not check_file_header(data, kind):
            log.warning("%s: torn file header (%d octets), starting it over", path, len(data))
            os.unlink(path)
            return lf, SeqScan(), len(data), []
        lf.created = True
        lf.pending = bytearray()
        lf.size = lf.written = len(data)
        scan, damage, stretches = scan_seq_file(path, data, types, what, exact_length)
        if header_damage is not None:
            damage.insert(0, header_damage)
        dropped = 0
        if damage and quarantine is not None:
            copy = quarantine_copy(path, original, quarantine, fsync)
            for d in damage:
                d.quarantined = copy
                log.error("%s; the file as it was is kept in %s", d.describe(), copy)
            if len(stretches) > 1 or header_damage is not None:  # the file without the damage, scanned again
                clean = bytearray(data[:FILE_HEADER_SIZE])
                for a, b in stretches:
                    clean += data[a:b]
                rewrite_file(path, clean, fsync)
                dropped = len(data) - len(clean)
                lf.size = lf.written = len(clean)
                scan = SeqScan().run(clean, FILE_HEADER_SIZE, types)
        return lf, scan, dropped, damage

    def truncate_to(self, end: int, reason: str | None, fsync: bool = True) -> int:
        """Cut a recovered file back to its valid prefix, durably (``fsync``); returns the
        octets dropped. Without the fsync a power cut before the file's next one could undo
        the cut while keeping a later append in the old tail's place: the rest of that tail
        after it then reads as damage in the middle (the power-loss schedules found it)."""
        if not self.created or end >= self.written:
            return 0
        dropped = self.written - end
        log.warning("%s: %s; truncating %d octets at %d", self.path, reason, dropped, end)
        fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, end)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self.size = self.written = end
        return dropped

    # --- memory side (owner's memory lock held) ---------------------------------------------

    def add(self, rtype: int, seq: int, rest=b"") -> tuple[int, int]:
        """Buffer one record (uint64 seq + ``rest``); returns (offset of its header, payload length)."""
        off = self.size
        n = append_seq_record(self.pending, rtype, seq, rest)
        self.size = off + HEADER_SIZE + n
        return off, n

    def take(self) -> bytearray | None:
        """Swap the pending buffer out for writing; it joins ``inflight`` until its ``done``.

        A swap, not a copy: the buffer taken is never appended to again, so the flush can write
        it while appends go into a fresh one.
        """
        if not self.pending:
            return None
        data = self.pending
        self.inflight.append(data)
        self.pending = bytearray()
        return data

    def done(self, n: int) -> None:
        """The oldest buffer taken (``n`` octets) is in the file now."""
        self.written += n
        del self.inflight[0]

    def memory_part(self, off: int, n: int):
        """The octets [off, off+n) if they are still in memory, else None (they are in the file).
        A record is never split between two buffers: each is appended whole to one."""
        if off < self.written:
            return None
        s = off - self.written
        for buf in self.inflight:
            if s < len(buf):
                return buf[s:s + n]
            s -= len(buf)
        return bytes(self.pending[s:s + n])

    def unwritten(self, a: int, q: int) -> bytes:
        """The octets [a, q) of the part not written yet (``a`` >= ``written``), across buffers."""
        parts = []
        start = self.written
        for buf in (*self.inflight, self.pending):
            end = start + len(buf)
            if a < end and q > start:
                parts.append(buf[max(a, start) - start:min(q, end) - start])
            start = end
        return b"".join(parts)

    # --- I/O side (owner's I/O lock held) -----------------------------------------------------

    def ensure_fd(self) -> tuple[int, bool]:
        """The file descriptor, opening (and creating) the file if needed; (fd, created now).

        Called with the owner's memory lock held, so that a read on one thread and a flush on
        another cannot both open the file.
        """
        if self.fd is not None:
            return self.fd, False
        if self.created:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            return self.fd, False
        # O_EXCL: ids are never reused, so an existing file here would be a bug, not a file to clobber
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self.created = True
        return self.fd, True

    def write_out(self, fd: int, data: bytearray) -> None:
        """Write ``data`` at the end of the file: one write() unless the OS takes less."""
        mv = memoryview(data)
        while mv:
            n = os.write(fd, mv)
            mv = mv[n:]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Segment:
    """A message segment: its ``LogFile`` plus the in-memory index of the messages in it.

    The index is four parallel arrays, about 17 octets per message (8 seq, 4 offset, 4 length,
    1 flags), so a queue of a million messages costs some 17-19 MB of index and nothing of its
    bodies: a body is read back with ``read`` when needed.
    """

    __slots__ = ("id", "file", "acks", "seqs", "offsets", "lengths", "flags", "live", "live_bytes", "first",
                 "dense")

    def __init__(self, seg_id: int, path: str, first: int) -> None:
        self.id = seg_id
        self.file = LogFile(path, KIND_MESSAGES)
        self.acks: LogFile | None = None  # the acks.<id> log, created by the first ack or delivered mark
        self.seqs = array("Q")
        self.offsets = array("I")  # offset of the record header
        self.lengths = array("I")  # length of the caller's record (payload minus the seq)
        self.flags = bytearray()   # ACKED | DELIVERED
        self.live = 0              # messages not acked
        self.live_bytes = 0
        self.first = first         # the lowest seq this segment can hold (its first, once it has one)
        self.dense = True          # seqs are consecutive: a seq's position is seq - seqs[0], no search

    def __len__(self) -> int:
        return len(self.seqs)

    @classmethod
    def load(cls, seg_id: int, path: str, quarantine: str | None = None,
             fsync: bool = True) -> tuple["Segment", int, list]:
        """Recover a segment file: index its valid records, read around damage, truncate the rest;
        (segment, octets dropped, damage found: damage.py)."""
        seg = cls(seg_id, path, 0)
        lf, scan, dropped, damage = LogFile.open_existing(path, KIND_MESSAGES, _MESSAGE_TYPES, quarantine, fsync)
        seqs = scan.seqs
        n = len(seqs)
        if n > 1 and not all(a < b for a, b in zip(seqs, seqs[1:])):
            # appends enforce increasing seqs, so this is damage: keep what comes before it
            n = next(i for i in range(1, n) if seqs[i] <= seqs[i - 1])
            scan.end, scan.error = scan.offsets[n], f"seq {seqs[n]} out of order"
            d = Damage(path, scan.end, lf.written, "messages", first=seqs[n - 1] + 1, records=len(seqs) - n,
                       reason=scan.error, tail=True)
            if quarantine is not None:  # kept aside before the cut, as any damage
                d.quarantined = quarantine_copy(path, read_file(path), quarantine, fsync)
                log.error("%s; the file as it was is kept in %s", d.describe(), d.quarantined)
            damage.append(d)
            del seqs[n:], scan.offsets[n:], scan.lengths[n:]
        seg.file = lf
        seg.seqs, seg.offsets, seg.lengths = seqs, scan.offsets, scan.lengths
        dropped += lf.truncate_to(scan.end, scan.error, fsync)
        seg.flags = bytearray(n)
        seg.live = n
        seg.live_bytes = sum(seg.lengths)
        seg.first = seqs[0] if n else 0
        seg.dense = n == 0 or seqs[-1] - seqs[0] == n - 1  # increasing, so that means consecutive
        return seg, dropped, damage

    def set_acked(self, i: int) -> None:
        self.flags[i] |= ACKED
        self.live -= 1
        self.live_bytes -= self.lengths[i]

    @property
    def last(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def index(self, seq: int) -> int:
        """Position of ``seq`` in this segment, or -1."""
        seqs = self.seqs
        if self.dense:  # the usual case: every message of the queue is persistent
            i = seq - seqs[0] if seqs else -1
            return i if 0 <= i < len(seqs) else -1
        i = bisect_left(seqs, seq)
        return i if i < len(seqs) and seqs[i] == seq else -1

    def add(self, seq: int, record) -> None:
        off, n = self.file.add(T_MESSAGE, seq, record)
        if self.seqs and seq != self.seqs[-1] + 1:
            self.dense = False
        self.seqs.append(seq)
        self.offsets.append(off)
        self.lengths.append(n - 8)
        self.flags.append(0)
        self.live += 1
        self.live_bytes += n - 8

    def record_at(self, buf, off: int) -> bytes:
        """The caller's record from the octets of one full record (CRC checked)."""
        _, start, n = verify(buf, off)
        return bytes(buf[start + 8:start + n])

    def span(self, i: int) -> tuple[int, int]:
        """(offset, total length) of the i-th record, header included."""
        return self.offsets[i], HEADER_SIZE + 8 + self.lengths[i]

    def live_records(self, lock) -> list[tuple[int, bytes, bool]]:
        """(seq, record, delivered) of every message not acked (ValueError if a record is damaged).

        The part in the file is read with one pread; ``lock`` is the owner's memory lock.
        """
        with lock:
            live = [i for i, f in enumerate(self.flags) if not f & ACKED]
            if not live:
                return []
            lf, offsets = self.file, self.offsets
            written = lf.written
            lo = offsets[live[0]]
            mem = {i: lf.memory_part(*self.span(i)) for i in live if offsets[i] >= written}
            fd = lf.ensure_fd()[0] if lo < written else None
        disk = os.pread(fd, written - lo, lo) if fd is not None else b""
        seqs, flags = self.seqs, self.flags
        return [(seqs[i], self.record_at(mem[i], 0) if i in mem else self.record_at(disk, offsets[i] - lo),
                 bool(flags[i] & DELIVERED)) for i in live]
