"""The message store of one durable queue: segment files plus per-segment ack logs.

Files: ``msgs.N`` holds T_MESSAGE records (uint64 seq + the caller's record), ``acks.N`` the
T_ACK / T_DELIVERED / T_RETURNED records (uint64 seq) of the messages in ``msgs.N``. A message is written
once and stays until its whole segment is acked; then the segment and its ack log are deleted,
which is how disk space comes back (never the write segment, which still takes appends). Acks
and delivered marks are 17-octet records, so no data file is ever rewritten.

Delivered marks wait in memory until the next flush (or a reader of the flags), and a mark
whose message is acked before then is never written: most messages are acked within one
group commit of their delivery, and the ack says all the mark would (bench/pipeline.py
persist: the mark's lookup and record were ~7 % of a persistent message's CPU).

Group commit: ``append``, ``ack`` and ``mark_delivered`` only touch memory. ``flush`` hands
every file's buffered octets to the OS with one write() each; ``sync`` flushes and then fsyncs
every file written since the last sync (and the directory when files were created or
deleted), once for any number of appends. ``sync`` returns the highest seq it covers.

Ack logs may lag (``ack_sync_interval``, the broker's queues: 1 s): every ``sync`` writes them
(a killed process loses no ack), but fsyncs them only when that long has passed since they
were last fsynced, and at ``close``. Nothing waits for an ack to be durable (AMQP does not
confirm acks; RabbitMQ does not fsync them either), and with a consumer acking beside a
confirming publisher the ack log's fsync took as long as the messages' (1.6 against 1.8 ms):
half of every group commit, which the publisher's confirms waited for. The price: after a
power cut, messages acked in the last second may come back (at-least-once, as after any crash
of a broker that has not written the ack).

Threads: appends, acks and reads run on the event-loop thread. The broker splits a sync in
three (``sync_begin`` writes on the loop, an FsyncWorker's thread fsyncs without the GIL,
``sync_end`` back on the loop: warren/store/fsync_worker.py), and gives its stores a ``writer``:
a flush past ``flush_threshold`` hands its buffers to another FsyncWorker's thread, and so does
the next ``sync_begin(defer_writes=True)`` while such writes are under way (Server._start_sync).
So the loop writes only while nothing is at the disk (a write can wait behind a stalled fsync of
its file, or for a stalled disk's dirty pages), and writes go on while an fsync stalls: what
waits is the confirms, not the memory. Buffers handed over are read from memory until
``writes_done``. ``sync`` runs the three in the calling thread, possibly a worker beside the
loop, writing in ``sync_begin``. The loop never waits for the disk: ``_lock``
guards memory and is held only for memory operations; ``_io_lock`` orders writes and closes
(held while writing, never during an fsync); two syncs may overlap, their writes in order under
``_io_lock``, their fsyncs at once, and each ends in that order (``_sync_order``). A sync
fsyncs dup()ed descriptors, so a segment deleted meanwhile cannot close one under it.

What a crash leaves behind: torn or zero-filled file tails (cut back on open, segment.py;
damage elsewhere is read around, the file kept aside in the quarantine folder: damage.py);
files created but empty; fully acked segments not yet deleted, and ack logs whose segment is
gone (both deleted on open, recovery.py). Ordering rules make the rest impossible:

* an ack log is unlinked only after the directory fsync that made its segment's unlink
  durable, so acked messages cannot come back with their segment while the acks stay away;
* a fully acked segment is deleted only once a higher seq was appended after it, and (with
  fsync) only by a ``sync``, after the fsync that made that record durable. So the files
  always hold a record at least as high as any synced seq: ``last_seq`` never goes back below
  a synced seq, seqs are never reused, and a stale ack can never hit a new message (an ack
  whose message was lost still counts towards ``last_seq``).
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from contextlib import suppress
from operator import attrgetter

from warren.store.damage import quarantine_dir_for
from warren.store.fileio import write_and_dup
from warren.store.fsync_worker import run_job
from warren.store.group_commit import GroupCommitStore, StoreError
from warren.store.message import append_message_record, decode_message, encode_message
from warren.store.record import HEADER_SIZE, KIND_ACKS, T_ACK, T_DELIVERED, T_MESSAGE, T_RETURNED, append_seq_record
from warren.store.recovery import RecoveryStats, recover_directory
from warren.store.segment import (
    ACKED, DEFAULT_SEGMENT_SIZE, DELIVERED, LogFile, Segment, segment_name,
)

__all__ = ["QueueStore", "SyncWork", "DeferredWrites", "RecoveryStats", "StoreError", "encode_message", "decode_message"]

_FIRST = attrgetter("first")
DEFAULT_FLUSH_THRESHOLD = 4 * 1024 * 1024
DEFERRED_WAIT_S = 30.0  # a sync waits this long at most for writes another thread does (QueueStore.sync)


class QueueStore(GroupCommitStore):
    """The messages of one durable queue, in ``directory`` (created if missing).

    Opening recovers the directory (recovery.py); ``recovery_stats`` says what it found.
    ``segment_size`` is where segments rotate; ``fsync=False`` skips every fsync (tests, or
    data that need not survive a power cut: a killed process loses nothing flushed either
    way); ``flush_threshold`` bounds the octets buffered between flushes (None: never by
    itself). ``writer``: None, or a callable ``writer(store, DeferredWrites)`` that has another
    thread write a flush's buffers and calls ``writes_done`` after (the broker's, module doc).
    """

    def __init__(self, directory, segment_size: int = DEFAULT_SEGMENT_SIZE, fsync: bool = True,
                 flush_threshold: int = DEFAULT_FLUSH_THRESHOLD, ack_sync_interval: float = 0.0,
                 quarantine_dir=None) -> None:
        super().__init__(directory, segment_size, fsync, flush_threshold)
        # where recovery copies a damaged file before it cuts or rewrites it (damage.py)
        self.quarantine_dir = os.fspath(quarantine_dir) if quarantine_dir is not None else \
            quarantine_dir_for(self.directory)
        self.ack_sync_interval = ack_sync_interval  # seconds ack logs may go without an fsync (0: never)
        self._acks_synced_at = time.monotonic()  # when a sync last fsynced the ack logs
        self._closing = False  # the closing sync fsyncs the ack logs too
        self.last_seq = 0                       # the highest seq ever appended (or acked) here
        self._segments: list[Segment] = []      # ordered by seq; the last is the write segment
        self._dirty: dict[LogFile, None] = {}   # files with buffered octets (a dict keeps the order)
        self._unsynced: set[LogFile] = set()    # files written since the last sync
        self._doomed: list[Segment] = []        # fully acked, to be closed by the next flush
        self._marks: set[int] = set()           # delivered, mark not logged yet (_apply_marks)
        self._returns: dict[int, int] = {}      # seq -> returned marks (quorum queues' delivery counts)
        self._keep: Segment | None = None       # fully acked, but holds last_seq: goes at the next append
        self._unlink_msgs: list[str] = []       # closed; unlinked by the next sync after its fsyncs
        self._unlink_acks: list[str] = []       # unlinked after the directory fsync that follows those
        self._flushed_seq = 0
        # overlapping syncs (sync): the number of the last one begun, and of the last one done
        self._sync_tickets = 0
        self._sync_finished = 0
        self._sync_order = threading.Condition()
        self._writes_deferred = 0  # DeferredWrites handed out and not done: only their writer may write
        self.writer = None  # who writes a flush's buffers instead of the calling thread (class doc)
        self._deferred_done = threading.Condition(self._lock)  # notified by writes_done
        self._open_directory()

    # --- opening ---------------------------------------------------------------------------

    def _path(self, prefix: str, seg_id: int) -> str:
        return os.path.join(self.directory, segment_name(prefix, seg_id))

    def _open(self) -> RecoveryStats:
        r = recover_directory(self.directory, self._dir_fd, self.fsync, self.quarantine_dir)
        self._segments, self._keep, self._next_id = r.segments, r.keep, r.next_id
        self._returns = r.returns
        if not self._segments:
            self._segments.append(Segment(self._next_id, self._path("msgs", self._next_id), 1))
            self._next_id += 1
        self.last_seq = self._flushed_seq = r.last_seq
        ws = self._segments[-1]
        if not len(ws):
            ws.first = self.last_seq + 1
        self._count = r.stats.messages
        self._bytes = r.stats.bytes
        return r.stats

    # --- the loop-thread side: memory only ---------------------------------------------------

    def _find(self, seq: int) -> tuple[Segment | None, int]:
        segs = self._segments
        seg = segs[0] if segs else None
        if seg is not None and seg.dense and seg.seqs and seg.seqs[0] <= seq <= seg.seqs[-1]:
            return seg, seq - seg.seqs[0]  # the oldest segment: where acks land, in order, nearly always
        k = bisect_right(segs, seq, key=_FIRST) - 1
        if k < 0:
            return None, -1
        seg = segs[k]
        return seg, seg.index(seq)

    def append(self, seq: int, record) -> None:
        """Buffer a message record under ``seq``, which must be higher than every seq so far.

        ``record``: its octets, or the tuple (exchange_ss, routing_key_ss, properties, body)
        that ``encode_message_ss`` would join: the queues pass the parts, framed into the
        segment's buffer without a joined copy of every persistent body (message.py)."""
        parts = type(record) is tuple
        size = len(record[0]) + len(record[1]) + 4 + len(record[2]) + len(record[3]) if parts else len(record)
        with self._lock:
            if self._failed is not None or self._closed:
                self._check()
            if seq <= self.last_seq:
                raise ValueError(f"seq {seq} is not above the last seq {self.last_seq}")
            ws = self._segments[-1]
            lf = ws.file
            reclen = HEADER_SIZE + 8 + size
            if ws.seqs and lf.size + reclen > self.segment_size:
                ws = self._rotate()
                lf = ws.file
            # Segment.add and LogFile.add, inline: this runs once per persistent message
            off = lf.size
            lf.size = off + reclen
            if parts:
                append_message_record(lf.pending, seq, *record)
            else:
                append_seq_record(lf.pending, T_MESSAGE, seq, record)
            seqs = ws.seqs
            if seqs and seq != seqs[-1] + 1:
                ws.dense = False
            seqs.append(seq)
            ws.offsets.append(off)
            ws.lengths.append(reclen - HEADER_SIZE - 8)
            ws.flags.append(0)
            ws.live += 1
            ws.live_bytes += reclen - HEADER_SIZE - 8
            self._dirty[lf] = None
            self.last_seq = seq
            if self._keep is not None:
                self._doom(self._keep)  # a higher seq exists now
                self._keep = None
            self._count += 1
            self._bytes += size
            self._buffered += reclen
            flush = self.flush_threshold is not None and self._buffered >= self.flush_threshold
        if flush:  # bounds the memory held by buffers when the caller syncs rarely
            self.flush()

    def _rotate(self) -> Segment:
        old = self._segments[-1]
        seg = Segment(self._next_id, self._path("msgs", self._next_id), self.last_seq + 1)
        self._next_id += 1
        self._segments.append(seg)
        if old.live == 0:
            self._doom(old)  # the caller appends to the new segment at once, under the same lock
        return seg

    def _doom(self, seg: Segment) -> None:
        """Retire a fully acked segment; the flush and sync that follow delete its files.

        The doomed list is taken together with the buffers a flush writes, so everything
        appended before the doom, including the higher seq that allowed it, is written (and,
        with fsync, synced) before the files go.
        """
        self._segments.remove(seg)
        self._dirty.pop(seg.file, None)  # its buffered octets need never be written
        if seg.acks is not None:
            self._dirty.pop(seg.acks, None)
        self._doomed.append(seg)

    def _log_ack(self, seg: Segment, rtype: int, seq: int) -> None:
        lf = seg.acks
        if lf is None:
            lf = seg.acks = LogFile(self._path("acks", seg.id), KIND_ACKS)
        lf.add(rtype, seq)
        self._dirty[lf] = None
        self._buffered += HEADER_SIZE + 8

    def ack(self, seq: int) -> None:
        """The message is gone (acked or dropped). Unknown or already acked seqs are ignored."""
        self.ack_run((seq,))  # one body for a lone ack and a run's: the same records and effects

    def ack_run(self, seqs) -> None:
        """``ack`` for each seq in turn, under one lock (a consumer's run of acks,
        ``Queue.forget_run``): the same records and effects as one call per seq."""
        with self._lock:
            if self._failed is not None or self._closed:
                self._check()
            marks = self._marks
            returns = self._returns
            segs = self._segments
            for seq in seqs:
                if marks:
                    marks.discard(seq)
                if returns:
                    returns.pop(seq, None)
                # _find, inline: the oldest segment, in order, nearly always
                seg = segs[0]
                if seg.dense and seg.seqs and seg.seqs[0] <= seq <= seg.seqs[-1]:
                    i = seq - seg.seqs[0]
                else:
                    seg, i = self._find(seq)
                    if i < 0:
                        continue
                flags = seg.flags
                if flags[i] & ACKED:
                    continue
                flags[i] |= ACKED
                n = seg.lengths[i]
                seg.live -= 1
                seg.live_bytes -= n
                self._count -= 1
                self._bytes -= n
                if seg.live or seg is segs[-1]:
                    lf = seg.acks
                    if lf is None:
                        lf = seg.acks = LogFile(self._path("acks", seg.id), KIND_ACKS)
                    lf.size += HEADER_SIZE + 8
                    append_seq_record(lf.pending, T_ACK, seq, b"")
                    self._dirty[lf] = None
                    self._buffered += HEADER_SIZE + 8
                elif seg.last >= self.last_seq:
                    self._keep = seg
                    self._log_ack(seg, T_ACK, seq)
                else:
                    self._doom(seg)

    def mark_delivered(self, seq: int) -> None:
        """Remember that the message was delivered (for the redelivered flag after a restart).
        Logged by the next flush unless the message is acked first (module doc)."""
        with self._lock:
            self._check()
            self._marks.add(seq)

    def mark_returned(self, seq: int) -> None:
        """The message came back to its queue (a quorum queue's delivery count + 1), kept across
        restarts: logged at once, with the delivered flag cleared, so that a delivered mark after
        it means the message was out again (recovery replays the log in order). A delivered mark
        still waiting is dropped: the return says the delivery happened."""
        with self._lock:
            self._check()
            self._marks.discard(seq)
            seg, i = self._find(seq)
            if i < 0 or seg.flags[i] & ACKED:
                return
            seg.flags[i] &= ~DELIVERED
            self._returns[seq] = self._returns.get(seq, 0) + 1
            self._log_ack(seg, T_RETURNED, seq)

    def returned(self, seq: int) -> int:
        """How many returned marks the message has (0 if none, or unknown)."""
        return self._returns.get(seq, 0)

    def returned_counts(self) -> dict[int, int]:
        """seq -> returned marks, of every message that has any (a copy)."""
        with self._lock:
            return dict(self._returns)

    def _apply_marks(self) -> None:
        """Log the delivered marks still waiting and set their flags (``_lock`` held)."""
        marks, self._marks = self._marks, set()
        for seq in sorted(marks):
            seg, i = self._find(seq)
            if i < 0 or seg.flags[i] & (ACKED | DELIVERED):
                continue
            seg.flags[i] |= DELIVERED
            self._log_ack(seg, T_DELIVERED, seq)

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

    def __len__(self) -> int:  # messages not acked
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
            if self._marks:
                self._apply_marks()
            return [(seq, bool(f & DELIVERED)) for seg in self._segments
                    for seq, f in zip(seg.seqs, seg.flags) if not f & ACKED]

    def unacked_after(self, after_seq: int, limit: int) -> list[tuple[int, bool]]:
        """(seq, delivered) of up to ``limit`` messages not acked with seq > ``after_seq``, in order.

        For paging: the caller reads the records with ``read``. Costs O(limit) plus the acked
        entries skipped, not O(queue length).
        """
        out: list[tuple[int, bool]] = []
        with self._lock:
            if self._marks:
                self._apply_marks()
            segs = self._segments
            k = max(bisect_right(segs, after_seq, key=_FIRST) - 1, 0)
            for seg in segs[k:]:
                if seg.seqs and seg.seqs[-1] <= after_seq:
                    continue
                start = bisect_right(seg.seqs, after_seq)
                seqs, flags = seg.seqs, seg.flags
                for i in range(start, len(seqs)):
                    f = flags[i]
                    if not f & ACKED:
                        out.append((seqs[i], bool(f & DELIVERED)))
                        if len(out) >= limit:
                            return out
        return out

    def recover(self) -> list[tuple[int, bytes, bool]]:
        """(seq, record, delivered) of every message not acked, in seq order.

        Reads each segment's live span with one pread. The records are all in memory at once:
        a caller that pages should use ``unacked`` and ``read`` instead.
        """
        with self._lock:
            self._check()
            if self._marks:
                self._apply_marks()
            segs = list(self._segments)
        out = []
        for seg in segs:
            try:
                out += seg.live_records(self._lock)
            except ValueError as e:
                raise StoreError(f"{seg.file.path}: {e}") from None
        return out

    # --- I/O: flush, sync, close ---------------------------------------------------------------

    def _take_work(self) -> tuple[list, list]:
        """(``_lock`` held) Take every buffer to write, as (file, fd, octets), and the doomed
        segments their writes must precede."""
        self._check()
        if self._marks:
            self._apply_marks()
        for lf in self._dirty:  # opening may fail (EMFILE): then nothing has been taken yet
            _, created = lf.ensure_fd()
            self._dir_dirty |= created
        work = [(lf, lf.fd, data) for lf in self._dirty if (data := lf.take()) is not None]
        self._dirty.clear()
        self._buffered = 0
        self._flushed_seq = self.last_seq
        doomed, self._doomed = self._doomed, []
        return work, doomed

    def _written(self, work: list, doomed: list, unsynced: bool = True) -> None:
        """(``_io_lock`` held) The buffers of ``work`` are in their files (to be fsynced by the
        next sync if ``unsynced``: a sync counts its own already); the doomed segments go."""
        with self._lock:
            for lf, _, data in work:
                lf.done(len(data))
                if unsynced:
                    self._unsynced.add(lf)
            for seg in doomed:
                self._unsynced.discard(seg.file)
                self._unsynced.discard(seg.acks)
        for seg in doomed:
            self._retire(seg)

    def _flush_locked(self) -> None:
        if self.writer is not None:
            with self._lock:
                work, doomed = self._take_work()
                self._unsynced.update(lf for lf, _, _ in work)  # the next sync fsyncs them
            batch = self._defer(work)
            self._written([], doomed, unsynced=False)
            self.writer(self, batch)
            return
        if self._writes_deferred:
            # another thread still has to write earlier buffers: writing these now would put
            # them before those in the file (O_APPEND). They go with the next sync instead.
            return
        with self._lock:
            work, doomed = self._take_work()
        try:  # without the memory lock: appends carry on meanwhile
            write_and_dup([(fd, data) for _, fd, data in work], [])
        except BaseException as e:
            # a short write leaves a torn record that only recovery can cut off: stop here
            self._failed = e
            raise
        self._written(work, doomed)

    def _retire(self, seg: Segment) -> None:
        """Close a doomed segment's files (I/O lock held); delete them, or queue that for sync."""
        for lf, queue in ((seg.file, self._unlink_msgs), (seg.acks, self._unlink_acks)):
            if lf is not None:
                lf.close()
                if lf.created and self.fsync:
                    queue.append(lf.path)
                elif lf.created:  # no durability promised: delete now, msgs first
                    os.unlink(lf.path)

    def sync(self) -> int:
        """Flush, then fsync what was written since the last sync; returns the highest seq covered.

        Every append made before the call is durable when it returns, and so is every ack and
        delivered mark when the ack logs were due (``ack_sync_interval``); the others are
        written, and fsynced by a later sync. Safe to call from a worker thread while the loop
        thread appends, and from two at once. Their writes and their fsyncs may overlap, but each
        returns only after every sync that wrote before it has finished, and unlinks nothing
        before that: a sync's fsyncs cover its own writes only (module doc, "Ordering rules").

        This is the three steps the broker runs apart (Server._start_sync): ``sync_begin``
        takes the buffers on the loop, an ``FsyncWorker`` job writes and fsyncs them off it
        (warren/store/fsync_worker.py), ``sync_end`` back on the loop; here they run one after
        the other in the calling thread, which writes in ``sync_begin``, once the deferred
        writes handed out are done (these would overtake them); not on the thread that ends them
        (``writes_done``, the broker's loop): ``StoreError`` after ``DEFERRED_WAIT_S``.
        """
        with self._deferred_done:  # (a store that stopped handing writes out: ReplicatedStore)
            if not self._deferred_done.wait_for(lambda: not self._writes_deferred, DEFERRED_WAIT_S):
                raise StoreError(f"{self._label} {self.directory}: a sync while another thread's writes are "
                                 f"under way")
        work = self.sync_begin()
        err = run_job(work.fds, [], [])
        with self._sync_order:
            # the syncs that wrote before this one must be durable before it counts, and
            # before fully acked segments go: their higher seqs may be in those writes
            while self._sync_finished < work.ticket - 1:
                self._sync_order.wait()
        if not err and self._failed is not None:
            err = -1
        if err:  # nothing more is fsynced or unlinked after a failure; the directory's duplicate closes
            for fd in work.dir_fds:
                with suppress(OSError):
                    os.close(fd)
        else:
            err = run_job([], work.unlinks, work.dir_fds)
        return self.sync_end(work, err)

    def sync_begin(self, defer_writes: bool = False) -> "SyncWork":
        """A sync's first step, on the thread that appends: write what is buffered (or, with
        ``defer_writes``, take it as the ``SyncWork``'s ``deferred``) and duplicate the
        descriptors to fsync. The ``SyncWork`` it returns says what is left for the disk: the
        deferred writes (then ``writes_done``), fsync and close ``fds``, then (once every earlier
        sync ended, and only if they all succeeded) unlink ``unlinks`` and fsync and close
        ``dir_fds``; then ``sync_end``. Its descriptors are duplicates, so a segment deleted
        meanwhile cannot close one under it. Deferred writes stay readable from memory until
        ``writes_done``, and a store with some outstanding writes nothing else meanwhile."""
        with self._io_lock:
            ticket = self._sync_tickets = self._sync_tickets + 1  # writes happen in ticket order
            with self._lock:
                work, doomed = self._take_work()
                # what this sync fsyncs: every file written since the last sync, these writes too
                unsynced = self._unsynced
                for lf, _, _ in work:
                    unsynced.add(lf)
                for seg in doomed:  # deleted by this sync: never fsynced
                    unsynced.discard(seg.file)
                    unsynced.discard(seg.acks)
                now = time.monotonic()
                if self._closing or now - self._acks_synced_at >= self.ack_sync_interval:
                    files = [lf for lf in unsynced if lf.fd is not None]
                    unsynced.clear()
                    self._acks_synced_at = now
                else:  # written, not fsynced yet: the ack logs wait for a later sync
                    files = [lf for lf in unsynced if lf.fd is not None and lf.kind != KIND_ACKS]
                    self._unsynced = {lf for lf in unsynced if lf.kind == KIND_ACKS}
                covered = self._flushed_seq
            fsync = self.fsync
            # the directory's too when files came or go: a delete on the loop may close it while
            # we fsync (EBADF here stopped the broker when a queue went during the sync of its
            # new files); _retire below queues the doomed segments' unlinks for this sync
            with_dir = fsync and bool(self._dir_dirty or self._unlink_msgs
                                      or any(seg.file.created for seg in doomed))
            to_dup = [lf.fd for lf in files] if fsync else []
            if with_dir:
                to_dup.append(self._dir_fd)
            deferred = None
            try:
                if defer_writes:
                    deferred = self._defer(work)
                    fds = write_and_dup([], to_dup)
                else:
                    fds = write_and_dup([(fd, data) for _, fd, data in work], to_dup)
            except BaseException as e:
                # a short write leaves a torn record that only recovery can cut off: stop here
                self._failed = e
                if deferred is not None:  # taken, and never to be written
                    for fd, _ in deferred.writes:
                        os.close(fd)
                with self._sync_order:  # this ticket ends here: later syncs must not wait for it
                    self._sync_finished = max(self._sync_finished, ticket)
                    self._sync_order.notify_all()
                raise
            self._written([] if defer_writes else work, doomed, unsynced=False)
            self._dir_dirty = False
            unlink_msgs, self._unlink_msgs = self._unlink_msgs, []
            unlink_acks, self._unlink_acks = self._unlink_acks, []
            parents = self._take_new_parents() if fsync else []
        dir_fds = parents + ([fds.pop()] if with_dir else [])
        return SyncWork(ticket, fds, [os.fsencode(p) for p in unlink_msgs], dir_fds, unlink_acks, covered, deferred)

    def _defer(self, work: list) -> "DeferredWrites":
        """Buffers taken (``_take_work``) for another thread to write: a duplicate descriptor
        each, so that a segment closed meanwhile cannot close one under that thread."""
        try:
            dups = write_and_dup([], [fd for _, fd, _ in work])
        except BaseException as e:
            self._failed = e  # the buffers are taken: without them the files would have a hole
            raise
        self._writes_deferred += 1
        self._inflight_bytes += sum(len(data) for _, _, data in work)
        return DeferredWrites([(fd, data) for fd, (_, _, data) in zip(dups, work)],
                              [(lf, len(data)) for lf, _, data in work])

    def writes_done(self, batch: "DeferredWrites", err: int) -> None:
        """On the loop, once another thread wrote ``batch`` (``err``: its errno, 0 for success):
        its buffers are in the files now, read from there. Batches end in the order they were
        handed out. A failed write fails the store for good (the file may hold part of it)."""
        with self._lock:
            for lf, n in batch.sizes:
                lf.done(n)
                self._inflight_bytes -= n
            self._writes_deferred -= 1
            if err and self._failed is None:
                self._failed = OSError(err, os.strerror(err))
            self._deferred_done.notify_all()

    def _take_new_parents(self) -> list[int]:
        """Descriptors on the folders whose fsync makes this store's new folder durable
        (group_commit.py ``_open_directory``), for this sync's directory fsyncs."""
        fds: list[int] = []
        try:
            for path in self._new_parents:
                fds.append(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self._new_parents = []
        return fds

    def sync_end(self, work: "SyncWork", err: int) -> int:
        """A sync's last step, after its job ran with ``err`` (an errno, 0 for success, -1 for
        "skipped: the store failed earlier"): the sync counts as finished, the ack logs of
        deleted segments go (a crash before this leaves orphans, deleted on open). Returns the
        highest seq covered; an error fails the store for good and raises."""
        try:
            if err:
                # after a failed fsync the kernel may have dropped the dirty pages: nothing is safe
                if err > 0:
                    e = OSError(err, os.strerror(err))
                    if self._failed is None:
                        self._failed = e
                    raise e
                raise StoreError(f"{self._label} {self.directory} failed earlier: {self._failed!r}")
        finally:
            with self._sync_order:  # the next sync may finish now, whatever became of this one
                self._sync_finished = max(self._sync_finished, work.ticket)
                self._sync_order.notify_all()
        for path in work.unlink_acks:
            _unlink(path)
        return work.covered

    def acks_owed(self, now: float | None = None) -> bool:
        """Files written but not fsynced (after a sync: ack logs that were not due); with ``now``,
        only once they have waited ``ack_sync_interval``: the broker's tick then asks for a sync
        (``Durability.tick``) when no group commit came along to take them."""
        if self._closed or not self._unsynced:
            return False
        return now is None or now - self._acks_synced_at >= self.ack_sync_interval

    def close(self) -> None:
        self._closing = True
        super().close()

    def _release(self) -> None:
        with self._io_lock:
            self._closed = True
            for seg in self._segments + self._doomed:
                seg.file.close()
                if seg.acks is not None:
                    seg.acks.close()
            os.close(self._dir_fd)

    def __repr__(self) -> str:
        return f"<QueueStore {self.directory!r} messages={self._count} segments={len(self._segments)}>"


class SyncWork:
    """What ``QueueStore.sync_begin`` left for the disk and for ``sync_end`` (its docstrings)."""

    __slots__ = ("ticket", "fds", "unlinks", "dir_fds", "unlink_acks", "covered", "deferred")

    def __init__(self, ticket: int, fds: list, unlinks: list, dir_fds: list, unlink_acks: list, covered: int,
                 deferred: "DeferredWrites | None" = None):
        self.ticket = ticket
        self.fds = fds
        self.unlinks = unlinks
        self.dir_fds = dir_fds
        self.unlink_acks = unlink_acks
        self.covered = covered
        self.deferred = deferred  # its writes, when another thread does them (sync_begin)


class DeferredWrites:
    """Buffers another thread writes (``QueueStore.sync_begin(defer_writes=True)``, or a flush
    through the store's ``writer``): ``writes`` as (descriptor, octets), each descriptor a
    duplicate for that thread to close; ``sizes`` (file, octets) for ``writes_done``."""

    __slots__ = ("writes", "sizes")

    def __init__(self, writes: list, sizes: list):
        self.writes = writes
        self.sizes = sizes


def _unlink(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)
