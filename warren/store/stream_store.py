"""The log of one stream queue: append-only segment files of offset-numbered entries.

A stream keeps every message it is given, numbered by offset (0, 1, 2, …, never reused), until
retention removes the oldest. Readers (consumers, the HTTP bulk API) each read from their own
offset; nothing a reader does changes the log.

Files: ``stream.<first offset, 20 digits>`` segments, each a file header (record.py, kind
``b"S"``) followed by entries in the format of stream_format.py, which is also the BULK FORMAT
of the HTTP API: a range of committed entries is served exactly as it lies in the file. A
segment's offsets are consecutive, so the file name says which offsets it holds. The newest
segment takes the appends; when the next entry would take it past ``segment_size`` a new one
is started. Retention deletes whole segments, oldest first, never the newest.

Index (in memory): per segment an ``array("I")`` of the file position of every entry (4 octets
per record; segments stay below 4 GiB), so a read finds the octets of any range with two array
lookups and a bisect for ``max_bytes``, and serves it with one ``pread`` and no per-record work.
Timestamps are not kept per record: a segment keeps its first, last and highest timestamp and
the running maximum at every ``TS_BLOCK``-th record, enough for retention by age and for
``offset_for_timestamp`` (bisect to a block, then read that block's headers).

Group commit, as QueueStore: ``append`` only touches memory (``flush`` writes each dirty file
with one write(), ``sync`` flushes then fsyncs) and ``sync`` may run on a worker thread while the
loop keeps appending. ``committed_offset`` is the highest offset a completed sync covers;
``read_raw`` and ``read(committed_only=True)`` never return anything above it. Locks: ``_lock``
guards memory and is only held for memory work; ``_io_lock`` orders writes; ``_sync_lock``
runs one sync at a time. Readers on other threads pin the segment whose file they ``pread``,
so neither retention nor the bound on open files closes a descriptor under them (a segment
deleted meanwhile is unlinked at once, its descriptor closed by the last reader).

Recent octets: the newest segment keeps up to ``tail_cache`` octets of what it last wrote in
memory, so consumers tailing the stream (who only read committed, hence already written,
entries) are served without a system call.

What a crash leaves behind, and what opening does about it (``_open``):

* a torn or zero-filled tail (the last write did not reach the disk completely): every segment
  is scanned once, CRCs checked, and cut back to its last valid entry;
* a segment whose file header is torn never held synced data: it is deleted, as are segments
  left without entries;
* damage inside a segment (a bad entry with good ones after it, or a whole last entry failing
  its CRC): the file is copied to the quarantine folder first (damage.py); then each run of
  good entries after a damaged stretch is written to a segment file of its own, named by its
  first offset, and the segment is cut at its first damage. The lost offsets become a hole
  (below), ``recovery_stats.damage`` lists them. The new files are written and fsynced under a
  temporary name and renamed before the cut, so a crash in between is repaired again;
* a segment missing between two others (lost by hand or by the disk): a hole, logged; reads
  skip from one side to the other. A segment repeating offsets of the one before it (damage
  only) is renamed ``*.damaged`` and left out;
* offsets stay monotonic: the next offset is the last valid one + 1. Retention deletes a
  segment only once a later segment holds a synced entry, so the highest committed offset is
  always on disk and an offset once committed is never handed out again. Opening fsyncs what
  it keeps (with ``fsync``) because everything recovered counts as committed.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass, field
from operator import attrgetter

from warren.store.damage import damaged_header, quarantine_copy, quarantine_dir_for, rewrite_file, scan_stream_file
from warren.store.fileio import fsync_dir
from warren.store.group_commit import GroupCommitStore, StoreError
from warren.store.record import FILE_HEADER_SIZE, FormatError, check_file_header, file_header
from warren.store.segment import LogFile, read_file
from warren.codec.bulk_records import ENTRY_HEADER_SIZE
from warren.store.stream_format import KIND_STREAM, append_entry, parse_entries

__all__ = ["StreamStore", "StreamRecoveryStats", "DEFAULT_STREAM_SEGMENT", "TS_BLOCK", "segment_file_name"]

log = logging.getLogger("warren.store")

DEFAULT_STREAM_SEGMENT = 16 * 1024 * 1024
DEFAULT_TAIL_CACHE = 1024 * 1024
DEFAULT_FLUSH_THRESHOLD = 4 * 1024 * 1024
TS_BLOCK = 64            # records per entry of a segment's running-maximum timestamp index
MAX_OPEN_SEALED = 16     # descriptors kept open for segments no longer written (readers reopen the rest)
_PREFIX = "stream."
_DAMAGED = ".damaged"   # a segment set aside by recovery (overlapping offsets), kept for inspection
_REPAIR = ".repair"     # a segment being written by the split of a damaged one (damage.rewrite_file)
_TS = struct.Struct(">q")
_TS_AT = 12              # where the timestamp sits in an entry header (after crc and offset)
_BASE = attrgetter("base")
_NO_TS = -(2**63)


def segment_file_name(base: int) -> str:
    return f"{_PREFIX}{base:020d}"


@dataclass
class StreamRecoveryStats:
    segments: int = 0          # segment files kept
    records: int = 0
    bytes: int = 0             # octets of the files kept
    truncated_files: int = 0   # files cut back to their last valid entry
    truncated_bytes: int = 0
    removed_files: int = 0     # empty segments, or with a torn file header, deleted
    holes: int = 0             # gaps in the offsets between two segments
    seconds: float = 0.0
    damage: list = field(default_factory=list, repr=False)  # damage.Damage of every damaged stretch read around or cut

    @property
    def lost_records(self) -> int:
        """Entries lost to damage (exact for stretches in the middle, at least one for a damaged tail)."""
        return sum(d.records if d.records is not None else 1 for d in self.damage)


class _Segment:
    """One segment file (a ``LogFile``) and its index."""

    __slots__ = ("base", "file", "positions", "first_ts", "last_ts", "max_ts", "block_max", "cache", "cache_start",
                 "pins", "gone")

    def __init__(self, base: int, path: str) -> None:
        self.base = base                   # offset of its first entry
        self.file = LogFile(path, KIND_STREAM)
        self.positions = array("I")        # file position of each entry's header
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.max_ts = _NO_TS
        self.block_max = array("q")        # [b]: highest timestamp of the entries [0, (b+1) * TS_BLOCK)
        self.cache: bytearray | None = None  # file octets [cache_start, file.written), newest segment only
        self.cache_start = 0
        self.pins = 0                      # readers, flushes and syncs using the descriptor right now
        self.gone = False                  # deleted or store closed: the last unpin closes the descriptor

    @property
    def end(self) -> int:
        """The offset after its last entry."""
        return self.base + len(self.positions)

    def add(self, offset: int, timestamp_ms: int, record) -> int:
        lf = self.file
        pos = lf.size
        n = append_entry(lf.pending, offset, timestamp_ms, record)
        lf.size = pos + n
        positions = self.positions
        positions.append(pos)
        # timestamps: only the segment's first, last and running maxima are kept
        if timestamp_ms > self.max_ts:
            self.max_ts = timestamp_ms
        if len(positions) % TS_BLOCK == 1:  # the first entry of a block (TS_BLOCK > 1)
            self.block_max.append(self.max_ts)
            if self.first_ts is None:
                self.first_ts = timestamp_ms
        else:
            self.block_max[-1] = self.max_ts
        self.last_ts = timestamp_ms
        return n

    def entry_end(self, i: int) -> int:
        """File position after entry i."""
        positions = self.positions
        return positions[i + 1] if i + 1 < len(positions) else self.file.size


class StreamStore(GroupCommitStore):
    """The entries of one stream, in ``directory`` (created if missing).

    ``fsync=False`` skips every fsync (a killed process loses nothing flushed either way);
    ``max_bytes``/``max_age_s`` are the retention limits ``enforce_retention`` applies;
    ``tail_cache`` bounds the recently written octets kept in memory for tailing readers;
    ``flush_threshold`` bounds the octets buffered between flushes (None: append never writes,
    the broker's group commit takes every buffer on its pool thread).
    """

    _label = "stream store"

    def __init__(self, directory, fsync: bool = True, segment_size: int = DEFAULT_STREAM_SEGMENT,
                 max_bytes: int | None = None, max_age_s: float | None = None,
                 tail_cache: int = DEFAULT_TAIL_CACHE, flush_threshold: int = DEFAULT_FLUSH_THRESHOLD,
                 quarantine_dir=None) -> None:
        super().__init__(directory, segment_size, fsync, flush_threshold)
        # where recovery copies a damaged segment before it cuts or splits it (damage.py)
        self.quarantine_dir = os.fspath(quarantine_dir) if quarantine_dir is not None else \
            quarantine_dir_for(self.directory)
        self.tail_cache = tail_cache
        self.max_bytes: int | None = None
        self.max_age_s: float | None = None
        self.set_retention(max_bytes, max_age_s)
        self.first_offset = 0
        self.next_offset = 0
        self.committed_offset = -1
        self.last_timestamp_ms: int | None = None
        self._segments: list[_Segment] = []        # by base; the last takes appends
        self._dirty: dict[_Segment, None] = {}      # segments with buffered octets
        self._unsynced: dict[_Segment, None] = {}   # written since the last sync
        self._sealed_open: OrderedDict[_Segment, None] = OrderedDict()  # older segments with a descriptor, LRU
        self._open_directory()

    # --- opening ---------------------------------------------------------------------------

    def _path(self, base: int) -> str:
        return os.path.join(self.directory, segment_file_name(base))

    def _open(self) -> StreamRecoveryStats:
        t0 = time.perf_counter()
        stats = StreamRecoveryStats()
        bases = []
        for name in os.listdir(self.directory):
            if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit():
                bases.append(int(name[len(_PREFIX):]))
            elif name.endswith(_REPAIR):  # a split that never reached its rename: the damaged file is whole
                os.unlink(os.path.join(self.directory, name))
            elif not name.endswith(_DAMAGED):
                log.warning("%s: ignoring unexpected file %s", self.directory, name)
        bases.sort()
        segments: list[_Segment] = []
        highest_empty = -1
        loaded: set[int] = set()
        for base in bases:
            if base in loaded:  # written by the split of a damaged segment before it (damage.py)
                continue
            for seg in self._load(base, stats):
                loaded.add(seg.base)
                if seg.positions:
                    segments.append(seg)
                    continue
                # an empty segment, or one whose header was torn: it never held a synced entry
                highest_empty = max(highest_empty, seg.base)
                if seg.file.created:
                    os.unlink(seg.file.path)
                stats.removed_files += 1
        segments.sort(key=_BASE)
        kept: list[_Segment] = []
        for seg in segments:
            prev = kept[-1] if kept else None
            if prev is not None and seg.base < prev.end:
                # damage only (appends never do this): keep the first copy, set the other aside
                log.error("%s: offsets from %d overlap the segment before it (which ends at %d); "
                          "renamed to %s%s", seg.file.path, seg.base, prev.end, seg.file.path, _DAMAGED)
                os.rename(seg.file.path, seg.file.path + _DAMAGED)
                stats.removed_files += 1
                continue
            if prev is not None and seg.base > prev.end:
                stats.holes += 1
                log.error("%s: offsets %d to %d are missing (no segment holds them)",
                          self.directory, prev.end, seg.base - 1)
            kept.append(seg)
        segments = kept
        if segments:
            self.next_offset = segments[-1].end
            if self.fsync:  # everything recovered counts as committed: make it so
                for seg in segments:
                    fd, _ = seg.file.ensure_fd()
                    os.fsync(fd)
                    if seg is not segments[-1]:
                        seg.file.close()
        else:
            # nothing valid left: at least never go back below a segment that was started
            self.next_offset = highest_empty if highest_empty >= 0 else 0
            segments.append(_Segment(self.next_offset, self._path(self.next_offset)))
        if self.fsync and (stats.removed_files or stats.truncated_files):
            os.fsync(self._dir_fd)
        self._segments = segments
        self.first_offset = segments[0].base
        self.committed_offset = self.next_offset - 1
        self.last_timestamp_ms = segments[-1].last_ts
        self._count = sum(len(s.positions) for s in segments)
        self._bytes = sum(s.file.size for s in segments if s.positions)
        stats.segments = sum(1 for s in segments if s.positions)
        stats.records = self._count
        stats.bytes = self._bytes
        stats.seconds = time.perf_counter() - t0
        if stats.truncated_files or stats.removed_files or stats.holes:
            log.warning("%s: recovered %s", self.directory, stats)
        if stats.damage:
            log.error("%s: %d entries lost to damage (%s); the damaged files are kept in %s", self.directory,
                      stats.lost_records, ", ".join(f"offsets {d.first}..{d.last}" if d.last is not None
                                                    else f"offsets from {d.first}" for d in stats.damage),
                      self.quarantine_dir)
        return stats

    def _load(self, base: int, stats: StreamRecoveryStats) -> list[_Segment]:
        """Read one segment file, index its valid entries and cut off the rest: the segment, and
        one more per run of good entries after a damaged stretch (split off into files of their own)."""
        seg = _Segment(base, self._path(base))
        lf = seg.file
        data = original = read_file(lf.path)
        header_damage = damaged_header(lf.path, data, KIND_STREAM, "stream")
        if header_damage is not None:  # a flipped bit in the file header of a file of ours: read on
            data = file_header(KIND_STREAM) + data[FILE_HEADER_SIZE:]
        try:
            whole_header = check_file_header(data, KIND_STREAM)
        except FormatError as e:
            raise StoreError(f"{lf.path}: {e}") from None
        if not whole_header:
            log.warning("%s: torn file header (%d octets)", lf.path, len(data))
            lf.created = True
            return [seg]
        lf.created = True
        lf.pending = bytearray()
        lf.size = lf.written = len(data)
        runs, damage = scan_stream_file(lf.path, data, base)
        if header_damage is not None:
            damage.insert(0, header_damage)
        out = [seg]
        if damage:
            copy = quarantine_copy(lf.path, original, self.quarantine_dir, self.fsync)
            for d in damage:
                d.quarantined = copy
                log.error("%s; the file as it was is kept in %s", d.describe(), copy)
            stats.damage += damage
            # each later run into a file of its own, durable before the cut that drops it here
            for run in runs[1:]:
                part = _Segment(run.base, self._path(run.base))
                rewrite_file(part.file.path, data[:FILE_HEADER_SIZE] + data[run.start:run.end], self.fsync)
                out += self._load(run.base, stats)
        scan = runs[0].scan
        if header_damage is not None:  # the first run under a mended header, in place of the file
            rewrite_file(lf.path, data[:scan.end], self.fsync)
            lf.size = lf.written = scan.end
        dropped = lf.truncate_to(scan.end, scan.error, self.fsync)
        if dropped:
            stats.truncated_files += 1
            stats.truncated_bytes += dropped
        seg.positions = scan.positions
        stamps = scan.timestamps
        if stamps:
            seg.first_ts, seg.last_ts = stamps[0], stamps[-1]
            running = _NO_TS
            for b in range(0, len(stamps), TS_BLOCK):
                running = max(running, max(stamps[b:b + TS_BLOCK]))
                seg.block_max.append(running)
            seg.max_ts = running
        return out

    # --- appending (the loop thread): memory only --------------------------------------------

    def append(self, record, timestamp_ms: int) -> int:
        """Buffer one record; returns its offset. No system call (unless ``flush_threshold`` is reached)."""
        size = ENTRY_HEADER_SIZE + len(record)
        if size >= 2**32:
            raise ValueError("a stream record is limited to 4 GiB")
        with self._lock:
            self._check()
            seg = self._segments[-1]
            if seg.positions and seg.file.size + size > self.segment_size:
                seg = self._rotate()
            offset = self.next_offset
            seg.add(offset, timestamp_ms, record)
            self._dirty[seg] = None
            self.next_offset = offset + 1
            self.last_timestamp_ms = timestamp_ms
            self._count += 1
            self._bytes += size + (FILE_HEADER_SIZE if len(seg.positions) == 1 else 0)
            self._buffered += size
            flush = self.flush_threshold is not None and self._buffered >= self.flush_threshold
        if flush:  # bounds the memory held by buffers when the caller syncs rarely
            self.flush()
        return offset

    def start_at(self, offset: int) -> None:
        """An empty store takes its first entry at ``offset``: a replica of a stream whose leader's
        retained log starts there (warren/cluster/replicas.py), so offsets are the same on every
        member. ValueError for a store that holds entries."""
        with self._lock:
            self._check()
            if self._count or self.next_offset != self.first_offset or len(self._segments) != 1:
                raise ValueError("only an empty stream store can start at another offset")
            self._segments = [_Segment(offset, self._path(offset))]
            self.first_offset = self.next_offset = offset
            self.committed_offset = offset - 1

    def _rotate(self) -> _Segment:
        old = self._segments[-1]
        old.cache = None  # only the newest segment is tailed
        self._sealed_open[old] = None
        seg = _Segment(self.next_offset, self._path(self.next_offset))
        self._segments.append(seg)
        return seg

    # --- I/O: flush, sync ----------------------------------------------------------------------

    def _flush_locked(self) -> int:
        """Write what is buffered (I/O lock held); returns the offset after the last entry written."""
        with self._lock:
            self._check()
            for seg in self._dirty:  # opening may fail (EMFILE): then nothing has been taken yet
                _, created = seg.file.ensure_fd()
                self._dir_dirty |= created
            work = [(seg, seg.file.fd, data) for seg in self._dirty if (data := seg.file.take()) is not None]
            for seg, _, _ in work:
                seg.pins += 1
            self._dirty.clear()
            self._buffered = 0
            flushed_to = self.next_offset
        try:
            for seg, fd, data in work:  # without the memory lock: appends carry on meanwhile
                seg.file.write_out(fd, data)
        except BaseException as e:
            # a short write leaves a torn entry that only recovery can cut off: stop here
            self._failed = e
            raise
        with self._lock:
            newest = self._segments[-1]
            for seg, _, data in work:
                start = seg.file.written
                seg.file.done(len(data))
                self._unsynced[seg] = None
                if seg is newest and self.tail_cache > 0:
                    self._cache_written(seg, start, data)
                self._unpin(seg)
        return flushed_to

    def _cache_written(self, seg: _Segment, start: int, data: bytearray) -> None:
        cache = seg.cache
        if cache is None:
            cache = seg.cache = bytearray()
            seg.cache_start = start
        cache += data
        if len(cache) > self.tail_cache:
            # trim to half the bound: deleting from the front of a bytearray is cheap, doing it
            # at every flush would not be
            cut = len(cache) - self.tail_cache // 2
            del cache[:cut]
            seg.cache_start += cut

    def sync(self) -> int:
        """Flush, then fsync what was written since the last sync; returns ``committed_offset``.

        Every append made before the call is committed when it returns. Safe to call from a
        worker thread while the loop thread appends and other threads read.
        """
        with self._sync_lock:
            with self._io_lock:
                flushed_to = self._flush_locked()
                with self._lock:
                    segs = list(self._unsynced)
                    self._unsynced.clear()
                    for seg in segs:
                        seg.pins += 1
                    dir_dirty, self._dir_dirty = self._dir_dirty, False
                    parents, self._new_parents = self._new_parents, []
            try:
                if self.fsync:
                    for seg in segs:
                        os.fsync(seg.file.fd)
                    if dir_dirty:  # new segment files: their names must survive too
                        os.fsync(self._dir_fd)
                    for path in parents:  # and the store's own new folder's (group_commit.py)
                        fsync_dir(path)
            except BaseException as e:
                # after a failed fsync the kernel may have dropped the dirty pages: nothing is safe
                self._failed = e
                raise
            finally:
                with self._lock:
                    for seg in segs:
                        self._unpin(seg)
            with self._lock:
                if flushed_to - 1 > self.committed_offset:
                    self.committed_offset = flushed_to - 1
                return self.committed_offset

    # --- reading (any thread) -------------------------------------------------------------------

    def _pin(self, seg: _Segment) -> int:
        """The segment's descriptor, kept open until ``_unpin`` (memory lock held)."""
        fd, _ = seg.file.ensure_fd()
        seg.pins += 1
        if seg is not self._segments[-1]:
            sealed = self._sealed_open
            sealed[seg] = None
            sealed.move_to_end(seg)
            if len(sealed) > MAX_OPEN_SEALED:
                for old in list(sealed):
                    if len(sealed) <= MAX_OPEN_SEALED:
                        break
                    if old.pins == 0 and old not in self._dirty and old not in self._unsynced:
                        old.file.close()
                        del sealed[old]
        return fd

    def _unpin(self, seg: _Segment) -> None:
        """Memory lock held."""
        seg.pins -= 1
        if seg.pins == 0 and seg.gone:
            seg.file.close()

    def _locate(self, offset: int, limit: int, max_records: int, max_bytes: int, at_least_one: bool = True):
        """The entries to read from ``offset`` (memory lock held): (segment, first index, stop index) or None.

        One segment at most; offsets at or above ``limit`` excluded; at most ``max_records`` and
        ``max_bytes`` octets of entries, but at least one entry if ``at_least_one``. An offset
        below the first retained one, or in a hole, moves up to the next entry there is.
        """
        segs = self._segments
        offset = max(offset, self.first_offset)
        k = bisect_right(segs, offset, key=_BASE) - 1
        seg = segs[k]
        i0 = offset - seg.base
        if i0 >= len(seg.positions):  # past its end: the next segment (after a hole), if any
            if k + 1 >= len(segs):
                return None
            seg, i0 = segs[k + 1], 0
        positions = seg.positions
        stop = min(len(positions), limit - seg.base, i0 + max_records)
        if stop <= i0:
            return None
        cap = positions[i0] + max_bytes
        if seg.entry_end(stop - 1) > cap:
            # entries i0 .. m-1 fit when positions[m] <= cap: the last such m is the new stop
            stop = bisect_right(positions, cap, i0 + 1, stop) - 1
            if stop <= i0:
                if not at_least_one:
                    return None
                stop = i0 + 1
        return seg, i0, stop

    def _take_octets(self, seg: _Segment, p: int, q: int):
        """Octets [p, q) of a segment (memory lock held): (bytes from memory, pinned file part).

        The part already in the file is served from the tail cache when it holds it, else left
        to the caller to ``pread`` outside the lock: then the second item is (fd, p, end of the
        file part) and the segment is pinned. The part not yet written comes from the buffers.
        """
        lf = seg.file
        w = lf.written
        unwritten = b""
        if q > w:
            unwritten = lf.unwritten(max(p, w), q)
            q = w
        if p >= q:
            return unwritten, None
        cache = seg.cache
        if cache is not None and p >= seg.cache_start:
            cs = seg.cache_start
            cached = bytes(cache[p - cs:q - cs])
            return (cached + unwritten if unwritten else cached), None
        return unwritten, (self._pin(seg), p, q)

    def _pread(self, seg: _Segment, file_part) -> bytes:
        fd, p, q = file_part
        try:
            data = os.pread(fd, q - p, p)
        finally:
            with self._lock:
                self._unpin(seg)
        if len(data) != q - p:
            raise StoreError(f"{seg.file.path}: {len(data)} octets at {p}, the index says {q - p}")
        return data

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None) -> tuple[int, int, bytes]:
        """Committed entries from ``offset`` in BULK FORMAT: (offset of the first, count, octets).

        One contiguous range of one segment, read with one ``pread`` (or sliced from the tail
        cache), not parsed nor checked: the reader checks the CRCs. Entries at or above ``end``
        are left out. At least one entry if any is available, however large. Nothing available:
        (the offset to ask for next, 0, b"").
        """
        first, count, data, seg, file_part = self._raw_range(offset, max_records, max_bytes, end)
        if file_part is not None:  # committed entries are all written: the whole range is in the file
            data = self._pread(seg, file_part)
        return first, count, data

    def read_raw_file(self, offset: int, max_records: int, max_bytes: int,
                      end: int | None = None) -> tuple[int, int, bytes | tuple[int, int, int]]:
        """``read_raw``, except that a range wholly in a segment file comes as (a descriptor of
        that file, its position, its length) instead of its octets: for ``sendfile``, which
        copies them from the page cache to a socket without reading them into this process (the
        HTTP records endpoint; a Spark read of a large stream spent 0.11 s of broker CPU a job
        on the two copies: docs/spark.md). The descriptor is a duplicate the caller closes, so a
        segment deleted meanwhile (retention) is still read whole. Only this class has it: a
        view of the store (filters, a replica's commit limit) answers ``read_raw`` alone."""
        first, count, data, seg, file_part = self._raw_range(offset, max_records, max_bytes, end)
        if file_part is not None:
            fd, p, q = file_part
            try:
                data = (os.dup(fd), p, q - p)
            finally:
                with self._lock:
                    self._unpin(seg)
        return first, count, data

    def _raw_range(self, offset: int, max_records: int, max_bytes: int, end: int | None):
        """(first offset, count, octets from memory, segment, pinned file part or None) of
        ``read_raw``'s range; the caller reads or duplicates the file part, then unpins."""
        with self._lock:
            self._check()
            limit = self.committed_offset + 1
            if end is not None and end < limit:
                limit = end
            found = self._locate(offset, limit, max(max_records, 1), max_bytes)
            if found is None:
                return max(offset, self.first_offset), 0, b"", None, None
            seg, i0, stop = found
            data, file_part = self._take_octets(seg, seg.positions[i0], seg.entry_end(stop - 1))
            return seg.base + i0, stop - i0, data, seg, file_part

    def read(self, offset: int, max_records: int, max_bytes: int,
             committed_only: bool = False) -> list[tuple[int, int, bytes]]:
        """Up to ``max_records`` entries from ``offset``: (offset, timestamp_ms, record) each.

        Crosses segments (and holes); stops after ``max_bytes`` octets of entries, but returns
        at least one entry if any is available. Entries not yet written come from memory,
        recently written ones from the tail cache, the rest from the file (CRC checked) with
        one pread per segment.
        """
        out: list[tuple[int, int, bytes]] = []
        budget = max_bytes
        while len(out) < max_records:
            with self._lock:
                self._check()
                limit = self.committed_offset + 1 if committed_only else self.next_offset
                found = self._locate(offset, limit, max_records - len(out), budget, at_least_one=not out)
                if found is None:
                    break
                seg, i0, stop = found
                p, q = seg.positions[i0], seg.entry_end(stop - 1)
                unwritten, file_part = self._take_octets(seg, p, q)
            if file_part is None:
                entries = parse_entries(unwritten, verify=False)
            else:
                try:
                    entries = parse_entries(self._pread(seg, file_part), verify=True)
                except ValueError as e:
                    raise StoreError(f"{seg.file.path}: {e}") from None
                if unwritten:
                    entries += parse_entries(unwritten, verify=False)
            out += entries
            offset = seg.base + stop
            budget -= q - p
            if budget <= 0:
                break
        return out

    def offset_for_timestamp(self, ts_ms: int) -> int:
        """The first retained offset whose timestamp is ``ts_ms`` or later (``next_offset`` if none)."""
        with self._lock:
            self._check()
            for seg in self._segments:
                if seg.positions and seg.max_ts >= ts_ms:
                    break
            else:
                return self.next_offset
            # running maxima only grow: the first entry at or after ts_ms is in the first block reaching it
            i0 = bisect_left(seg.block_max, ts_ms) * TS_BLOCK
            stop = min(len(seg.positions), i0 + TS_BLOCK)
            p = seg.positions[i0]
            rel = [seg.positions[i] - p for i in range(i0, stop)]
            data, file_part = self._take_octets(seg, p, seg.entry_end(stop - 1))
        if file_part is not None:
            data = self._pread(seg, file_part) + data
        for i, pos in enumerate(rel):
            if _TS.unpack_from(data, pos + _TS_AT)[0] >= ts_ms:
                return seg.base + i0 + i
        return seg.base + stop  # not reached: the block's maximum is at least ts_ms

    # --- retention ------------------------------------------------------------------------------

    def set_retention(self, max_bytes: int | None, max_age_s: float | None) -> None:
        if max_bytes is not None and max_bytes < 0 or max_age_s is not None and max_age_s < 0:
            raise ValueError("retention limits cannot be negative")
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest segments beyond the limits; returns the records dropped.

        Whole segments only, never the newest, and only one that a later segment with a
        committed entry follows (so the highest committed offset stays on disk). A segment
        goes while the total size exceeds ``max_bytes`` or when its newest entry is older
        than ``now_ms - max_age_s``.
        """
        max_bytes, max_age_s = self.max_bytes, self.max_age_s
        if max_bytes is None and max_age_s is None:
            return 0
        oldest_kept = now_ms - max_age_s * 1000 if max_age_s is not None else None
        doomed: list[_Segment] = []
        with self._lock:
            self._check()
            segs = self._segments
            while len(segs) > 1 and self.committed_offset >= segs[1].base:
                seg = segs[0]
                if not ((max_bytes is not None and self._bytes > max_bytes)
                        or (oldest_kept is not None and seg.max_ts < oldest_kept)):
                    break
                del segs[0]
                doomed.append(seg)
                self._count -= len(seg.positions)
                self._bytes -= seg.file.size
                self._sealed_open.pop(seg, None)
                seg.gone = True
                if seg.pins == 0:
                    seg.file.close()
            self.first_offset = segs[0].base
        for seg in doomed:  # readers holding it keep reading from the unlinked file
            with suppress(FileNotFoundError):
                os.unlink(seg.file.path)
        return sum(len(seg.positions) for seg in doomed)

    # --- figures --------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Records retained (appended ones included, committed or not)."""
        return self._count

    @property
    def byte_size(self) -> int:
        """Octets of the retained segments (headers included, buffered octets too)."""
        return self._bytes

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def first_timestamp_ms(self) -> int | None:
        return self._segments[0].first_ts if self._segments else None

    @property
    def last_offset(self) -> int:
        """The last committed offset, -1 if none (``committed_offset``)."""
        return self.committed_offset

    # --- closing --------------------------------------------------------------------------------

    def _release(self) -> None:
        with self._sync_lock, self._io_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in self._segments:
                seg.gone = True
                if seg.pins == 0:  # a reader still at work closes it when done
                    seg.file.close()
            self._sealed_open.clear()
            os.close(self._dir_fd)

    def __repr__(self) -> str:
        return (f"<StreamStore {self.directory!r} offsets={self.first_offset}..{self.next_offset - 1} "
                f"committed={self.committed_offset} segments={len(self._segments)}>")
