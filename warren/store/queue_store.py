"""The message store of one durable queue: segment files plus per-segment ack logs.

Directory layout::

    msgs.0000000001   file header, then T_MESSAGE records: uint64 seq + the caller's record
    acks.0000000001   file header, then T_ACK / T_DELIVERED records: uint64 seq
    msgs.0000000002   ...

A message is written once, where it stays until its whole segment is acked; then the segment
and its ack log are deleted, which is how disk space comes back (never the write segment,
which still takes appends). Acks and delivered marks are 17-octet records appended to the ack
log of the message's segment, so no data file is ever rewritten.

Group commit: ``append``, ``ack`` and ``mark_delivered`` only touch memory. ``flush`` hands
every file's buffered octets to the OS with one write() each; ``sync`` flushes and then fsyncs
every file written since the last sync (and the directory when files were created or
deleted), once for any number of appends. ``sync`` returns the highest seq it covers.

Threads: appends, acks and reads happen on the event-loop thread; ``sync`` may run on a worker
thread at the same time. Three locks keep that safe without making the loop wait for the disk:
``_lock`` guards the in-memory state and is only held for memory operations; ``_io_lock``
orders writes, closes and unlinks (held by ``flush``, and by ``sync`` while it writes, never
while it waits for fsync); ``_sync_lock`` lets one fsync pass run at a time. ``sync`` fsyncs
duplicates of the descriptors, so a segment deleted meanwhile cannot close the descriptor
under it.

What a crash leaves behind, and how opening the store recovers:

* a torn or zero-filled tail in any file (data not synced): every file is cut back to its
  last valid record (segment.py), so nothing that was not synced can half-appear;
* ``msgs.N`` deleted but ``acks.N`` left: the ack log is an orphan and is deleted;
* ``acks.N`` must not vanish while ``msgs.N`` survives, or acked messages would come back:
  a segment's ack log is unlinked only after the directory fsync that made the unlink of
  ``msgs.N`` durable;
* a segment whose messages are all acked but which still exists (crash before the deletion):
  deleted on open, unless it is the newest, which becomes the write segment again;
* an ack whose message did not survive (the ack log reached the disk, the message did not):
  the ack is ignored, but its seq counts towards ``last_seq``, and appends must use higher
  seqs, so that ack can never hit a later message.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from operator import attrgetter

from warren.store.record import HEADER_SIZE, KIND_ACKS, T_ACK, T_DELIVERED
from warren.store.segment import ACKED, DEFAULT_SEGMENT_SIZE, DELIVERED, LogFile, Segment, segment_name

__all__ = ["QueueStore", "RecoveryStats", "StoreError", "encode_message", "decode_message"]

log = logging.getLogger("warren.store")

_SEQ = struct.Struct(">Q")
_ACK_TYPES = frozenset((T_ACK, T_DELIVERED))
_FIRST = attrgetter("first")
DEFAULT_FLUSH_THRESHOLD = 4 * 1024 * 1024


class StoreError(Exception):
    """The store is closed, has failed (a write or fsync error), or found data it cannot read."""


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


def encode_message(exchange: str, routing_key: str, properties: bytes, body: bytes) -> bytes:
    """A message record: shortstr exchange, shortstr routing key, longstr properties, then the body."""
    ex = exchange.encode("utf-8", "surrogateescape")
    rk = routing_key.encode("utf-8", "surrogateescape")
    if len(ex) > 255 or len(rk) > 255:
        raise ValueError("exchange and routing key are limited to 255 octets")
    return b"".join((bytes((len(ex),)), ex, bytes((len(rk),)), rk, struct.pack(">I", len(properties)),
                     properties, body))


def decode_message(data) -> tuple[str, str, bytes, bytes]:
    """(exchange, routing_key, properties, body) from ``encode_message``'s output."""
    n = data[0]
    ex = bytes(data[1:1 + n]).decode("utf-8", "surrogateescape")
    off = 1 + n
    n = data[off]
    rk = bytes(data[off + 1:off + 1 + n]).decode("utf-8", "surrogateescape")
    off += 1 + n
    (n,) = struct.unpack_from(">I", data, off)
    off += 4
    if off + n > len(data):
        raise ValueError("message record cut short")
    return ex, rk, bytes(data[off:off + n]), bytes(data[off + n:])


class QueueStore:
    def __init__(self, directory, segment_size: int = DEFAULT_SEGMENT_SIZE, fsync: bool = True,
                 flush_threshold: int = DEFAULT_FLUSH_THRESHOLD) -> None:
        if not 64 <= segment_size < 2**32:
            raise ValueError("segment_size must be at least 64 and below 4 GiB")
        self.directory = os.fspath(directory)
        self.segment_size = segment_size
        self.fsync = fsync
        self.flush_threshold = flush_threshold  # append flushes by itself past this many buffered octets
        self.last_seq = 0                       # the highest seq ever appended (or acked) here
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._segments: list[Segment] = []      # ordered by seq; the last is the write segment
        self._dirty: dict[LogFile, None] = {}   # files with buffered octets (a dict keeps the order)
        self._unsynced: set[LogFile] = set()    # files written since the last sync
        self._doomed: list[Segment] = []        # fully acked, to be deleted by the next flush
        self._unlink_after_dir_sync: list[str] = []
        self._dir_dirty = False
        self._buffered = 0
        self._flushed_seq = 0
        self._count = 0
        self._bytes = 0
        self._failed: BaseException | None = None
        self._closed = False
        os.makedirs(self.directory, exist_ok=True)
        self._dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.recovery_stats = self._open()

    # --- opening ---------------------------------------------------------------------------

    def _path(self, prefix: str, seg_id: int) -> str:
        return os.path.join(self.directory, segment_name(prefix, seg_id))

    def _open(self) -> RecoveryStats:
        t0 = time.perf_counter()
        stats = RecoveryStats()
        ids: dict[str, set[int]] = {"msgs": set(), "acks": set()}
        for name in os.listdir(self.directory):
            prefix, _, num = name.partition(".")
            if prefix in ids and len(num) == 10 and num.isdigit():
                ids[prefix].add(int(num))
        self._next_id = max(ids["msgs"] | ids["acks"], default=0) + 1  # ids are never reused
        for sid in sorted(ids["acks"] - ids["msgs"]):
            os.unlink(self._path("acks", sid))  # orphan: its segment is gone
        max_ack = prev_last = 0
        for sid in sorted(ids["msgs"]):
            seg, dropped = Segment.load(sid, self._path("msgs", sid))
            if dropped:
                stats.truncated_files += 1
                stats.truncated_bytes += dropped
            if seg.seqs and seg.seqs[0] <= prev_last:
                # cannot happen short of damage: appends enforce increasing seqs across segments
                log.error("%s: seqs overlap the previous segment; skipping the overlap", seg.file.path)
                for i, seq in enumerate(seg.seqs):
                    if seq <= prev_last and not seg.flags[i] & ACKED:
                        self._set_acked(seg, i)
            prev_last = max(prev_last, seg.last)
            if sid in ids["acks"]:
                max_ack = max(max_ack, self._load_acks(seg, stats))
            self._segments.append(seg)
        self.last_seq = max(prev_last, max_ack)
        doomed = [s for s in self._segments[:-1] if s.live == 0]
        for seg in doomed:
            self._segments.remove(seg)
            seg.file.close()
            if seg.file.created:
                os.unlink(seg.file.path)
        if doomed:
            stats.deleted_segments = len(doomed)
            if self.fsync:
                os.fsync(self._dir_fd)  # the msgs unlinks are durable before any acks log goes
            for seg in doomed:
                if seg.acks is not None and seg.acks.created:
                    os.unlink(seg.acks.path)
        if not self._segments:
            self._segments.append(Segment(self._next_id, self._path("msgs", self._next_id), 1))
            self._next_id += 1
        ws = self._segments[-1]
        if not len(ws):
            ws.first = self.last_seq + 1
        self._flushed_seq = self.last_seq
        self._count = sum(s.live for s in self._segments)
        self._bytes = sum(s.live_bytes for s in self._segments)
        stats.segments = sum(1 for s in self._segments if s.file.created)
        stats.messages, stats.bytes = self._count, self._bytes
        stats.seconds = time.perf_counter() - t0
        return stats

    def _load_acks(self, seg: Segment, stats: RecoveryStats) -> int:
        lf, data, scan, dropped = LogFile.open_existing(self._path("acks", seg.id), KIND_ACKS, _ACK_TYPES)
        unpack = _SEQ.unpack_from
        flags = seg.flags
        max_ack = 0
        for rtype, start, n in scan:
            if n != 8:
                scan.end, scan.error = start - HEADER_SIZE, "ack record of the wrong size"
                break
            (seq,) = unpack(data, start)
            i = seg.index(seq)
            if rtype == T_ACK:
                stats.acks += 1
                max_ack = max(max_ack, seq)
                if i >= 0 and not flags[i] & ACKED:
                    self._set_acked(seg, i)
            elif i >= 0:
                flags[i] |= DELIVERED
        dropped += lf.truncate_to(scan.end, scan.error)
        if dropped:
            stats.truncated_files += 1
            stats.truncated_bytes += dropped
        seg.acks = lf
        return max_ack

    @staticmethod
    def _set_acked(seg: Segment, i: int) -> None:
        seg.flags[i] |= ACKED
        seg.live -= 1
        seg.live_bytes -= seg.lengths[i]

    # --- the loop-thread side: memory only ---------------------------------------------------

    def _check(self) -> None:
        if self._failed is not None:
            raise StoreError(f"store {self.directory} failed earlier: {self._failed!r}")
        if self._closed:
            raise StoreError(f"store {self.directory} is closed")

    def _find(self, seq: int) -> tuple[Segment | None, int]:
        segs = self._segments
        k = bisect_right(segs, seq, key=_FIRST) - 1
        if k < 0:
            return None, -1
        seg = segs[k]
        return seg, seg.index(seq)

    def append(self, seq: int, record: bytes) -> None:
        """Buffer a message record under ``seq``, which must be higher than every seq so far."""
        with self._lock:
            self._check()
            if seq <= self.last_seq:
                raise ValueError(f"seq {seq} is not above the last seq {self.last_seq}")
            ws = self._segments[-1]
            reclen = HEADER_SIZE + 8 + len(record)
            if len(ws) and ws.file.size + reclen > self.segment_size:
                ws = self._rotate()
            ws.add(seq, record)
            self._dirty[ws.file] = None
            self.last_seq = seq
            self._count += 1
            self._bytes += len(record)
            self._buffered += reclen
            flush = self._buffered >= self.flush_threshold
        if flush:  # bounds the memory held by buffers when the caller syncs rarely
            self.flush()

    def _rotate(self) -> Segment:
        old = self._segments[-1]
        seg = Segment(self._next_id, self._path("msgs", self._next_id), self.last_seq + 1)
        self._next_id += 1
        self._segments.append(seg)
        if old.live == 0:
            self._doom(old)
        return seg

    def _doom(self, seg: Segment) -> None:
        """Retire a fully acked segment; its files go at the next flush (I/O stays off this thread)."""
        self._segments.remove(seg)
        self._dirty.pop(seg.file, None)  # its buffered octets need never be written
        if seg.acks is not None:
            self._dirty.pop(seg.acks, None)
        self._doomed.append(seg)

    def _ack_log(self, seg: Segment) -> LogFile:
        lf = seg.acks
        if lf is None:
            lf = seg.acks = LogFile(self._path("acks", seg.id), KIND_ACKS)
        self._dirty[lf] = None
        return lf

    def ack(self, seq: int) -> None:
        """The message is gone (acked or dropped). Unknown or already acked seqs are ignored."""
        with self._lock:
            self._check()
            seg, i = self._find(seq)
            if i < 0 or seg.flags[i] & ACKED:
                return
            self._set_acked(seg, i)
            self._count -= 1
            self._bytes -= seg.lengths[i]
            if seg.live == 0 and seg is not self._segments[-1]:
                self._doom(seg)  # no ack record needed: the whole segment goes
            else:
                self._ack_log(seg).add(T_ACK, _SEQ.pack(seq))
                self._buffered += HEADER_SIZE + 8

    def mark_delivered(self, seq: int) -> None:
        """Remember that the message was delivered (for the redelivered flag after a restart)."""
        with self._lock:
            self._check()
            seg, i = self._find(seq)
            if i < 0 or seg.flags[i] & (ACKED | DELIVERED):
                return
            seg.flags[i] |= DELIVERED
            self._ack_log(seg).add(T_DELIVERED, _SEQ.pack(seq))
            self._buffered += HEADER_SIZE + 8

    def read(self, seq: int) -> bytes:
        """The record appended under ``seq`` (KeyError if unknown or acked)."""
        with self._lock:
            self._check()
            seg, i = self._find(seq)
            if i < 0 or seg.flags[i] & ACKED:
                raise KeyError(seq)
            off, n = seg.span(i)
            lf = seg.file
            buf = lf.memory_part(off, n)
            if buf is None:
                fd, _ = lf.ensure_fd()
        if buf is None:  # read outside the lock: the octets are in the file and stay there
            buf = os.pread(fd, n, off)
        try:
            return seg.record_at(buf, 0)
        except ValueError as e:
            raise StoreError(f"{lf.path}: record for seq {seq} at {off}: {e}") from None

    def __contains__(self, seq: int) -> bool:
        with self._lock:
            seg, i = self._find(seq)
            return i >= 0 and not seg.flags[i] & ACKED

    def __len__(self) -> int:
        return self._count

    @property
    def message_bytes(self) -> int:
        """Total octets of the records of the messages not acked."""
        return self._bytes

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def unacked(self) -> list[tuple[int, bool]]:
        """(seq, delivered) of every message not acked, in seq order, without reading records."""
        with self._lock:
            return [(seq, bool(f & DELIVERED)) for seg in self._segments
                    for seq, f in zip(seg.seqs, seg.flags) if not f & ACKED]

    def recover(self) -> list[tuple[int, bytes, bool]]:
        """(seq, record, delivered) of every message not acked, in seq order.

        Reads each segment's live span with one pread. The records are all in memory at once:
        a caller that pages should use ``unacked`` and ``read`` instead.
        """
        out = []
        with self._lock:
            self._check()
            segs = list(self._segments)
        for seg in segs:
            with self._lock:
                live = [i for i, f in enumerate(seg.flags) if not f & ACKED]
                if not live:
                    continue
                lf, offsets = seg.file, seg.offsets
                written = lf.written
                lo = offsets[live[0]]
                mem = {i: lf.memory_part(*seg.span(i)) for i in live if offsets[i] >= written}
                fd = lf.ensure_fd()[0] if lo < written else None
            disk = os.pread(fd, written - lo, lo) if fd is not None else b""
            for i in live:
                try:
                    rec = seg.record_at(disk, offsets[i] - lo) if i not in mem else seg.record_at(mem[i], 0)
                except ValueError as e:
                    raise StoreError(f"{lf.path}: record at {offsets[i]}: {e}") from None
                out.append((seg.seqs[i], rec, bool(seg.flags[i] & DELIVERED)))
        return out

    # --- I/O: flush, sync, close ---------------------------------------------------------------

    def flush(self) -> None:
        """Hand every buffered octet to the OS (one write() per file); no fsync."""
        with self._io_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            self._check()
            work = []
            for lf in self._dirty:
                data = lf.take()
                if data is None:
                    continue
                fd, created = lf.ensure_fd()
                self._dir_dirty |= created
                work.append((lf, fd, data))
            self._dirty.clear()
            self._buffered = 0
            self._flushed_seq = self.last_seq
        try:
            for lf, fd, data in work:  # without the memory lock: appends carry on meanwhile
                lf.write_out(fd, data)
        except BaseException as e:
            # a short write leaves a torn record that only recovery can cut off: stop here
            self._failed = e
            raise
        with self._lock:
            for lf, _, data in work:
                lf.done(len(data))
                self._unsynced.add(lf)
            doomed, self._doomed = self._doomed, []
        for seg in doomed:
            self._remove_files(seg)

    def _remove_files(self, seg: Segment) -> None:
        """Delete a doomed segment (I/O lock held): msgs.N now, acks.N after the next directory fsync."""
        with self._lock:
            self._unsynced.discard(seg.file)
            self._unsynced.discard(seg.acks)
        seg.file.close()
        if seg.file.created:
            os.unlink(seg.file.path)
            self._dir_dirty = True
        if seg.acks is not None:
            seg.acks.close()
            if seg.acks.created:
                if self.fsync:
                    self._unlink_after_dir_sync.append(seg.acks.path)
                else:
                    os.unlink(seg.acks.path)

    def sync(self) -> int:
        """Flush, then fsync what was written since the last sync; returns the highest seq covered.

        Every append, ack and delivered mark made before the call is durable when it returns.
        Safe to call from a worker thread while the loop thread appends.
        """
        with self._sync_lock:
            with self._io_lock:
                self._flush_locked()
                with self._lock:
                    files = [lf for lf in self._unsynced if lf.fd is not None]
                    self._unsynced.clear()
                    covered = self._flushed_seq
                # duplicates: a segment deleted while we wait for the disk cannot close them under us
                fds = [os.dup(lf.fd) for lf in files] if self.fsync else []
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                unlinks, self._unlink_after_dir_sync = self._unlink_after_dir_sync, []
            try:
                for fd in fds:
                    os.fsync(fd)
                if dir_dirty and self.fsync:
                    os.fsync(self._dir_fd)
            except BaseException as e:
                # after a failed fsync the kernel may have dropped the dirty pages: nothing is safe
                self._failed = e
                raise
            finally:
                for fd in fds:
                    os.close(fd)
            for path in unlinks:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            return covered

    def close(self) -> None:
        """Sync (unless the store failed) and release every file descriptor."""
        if self._closed:
            return
        try:
            if self._failed is None:
                self.sync()
        finally:
            self._release()

    def _release(self) -> None:
        with self._io_lock:
            self._closed = True
            for seg in self._segments + self._doomed:
                seg.file.close()
                if seg.acks is not None:
                    seg.acks.close()
            os.close(self._dir_fd)

    def delete(self) -> None:
        """Close without syncing and remove the directory with everything in it."""
        if not self._closed:
            self._release()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.fsync:
            parent = os.open(os.path.dirname(os.path.abspath(self.directory)), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(parent)
            finally:
                os.close(parent)

    def __enter__(self) -> "QueueStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<QueueStore {self.directory!r} messages={self._count} segments={len(self._segments)}>"
