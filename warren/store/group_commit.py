"""What the two segment-file stores share: a directory written by group commit.

``QueueStore`` (queue_store.py) and ``StreamStore`` (stream_store.py) differ in their files and
their records, but not in how they live: a folder with a descriptor held on it (fsynced when
files come and go), recovered when opened; appends that only touch memory; ``flush`` handing
the buffered octets to the OS and ``sync`` fsyncing them, possibly on a worker thread while the
loop appends; a write or fsync error that fails the store for good; closing that syncs first.
This base keeps that life cycle in one place; each store brings its recovery (``_open``), its
writing (``_flush_locked``, ``sync``) and what it releases (``_release``).

Locks (the stores' docstrings say what each guards for them): ``_lock`` for memory, held only
for memory work; ``_io_lock`` orders writes and closes; ``_sync_lock`` runs one sync at a time
(StreamStore; QueueStore lets two overlap at the disk and orders their ends itself).
"""

from __future__ import annotations

import os
import shutil
import threading

from warren.store.fileio import make_dirs
from warren.store.segment import fsync_dir

__all__ = ["GroupCommitStore", "StoreError"]


class StoreError(Exception):
    """The store is closed, has failed (a write or fsync error), or found data it cannot read."""


class GroupCommitStore:
    """The shared state and life cycle; a subclass's ``__init__`` calls ``_open_directory`` last."""

    _label = "store"  # how errors name the store ("store …", "stream store …")

    # seconds an ack log may go without an fsync (QueueStore); 0: the store has none, or syncs them
    ack_sync_interval = 0.0

    def __init__(self, directory, segment_size: int, fsync: bool, flush_threshold: int) -> None:
        if not 64 <= segment_size < 2**32:
            raise ValueError("segment_size must be at least 64 and below 4 GiB")
        self.directory = os.fspath(directory)
        self.segment_size = segment_size
        self.fsync = fsync
        self.flush_threshold = flush_threshold  # append flushes by itself past this many buffered octets
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._dir_dirty = False                 # files created or deleted since the last sync
        self._buffered = 0
        self._inflight_bytes = 0  # taken by a sync whose writes another thread has not done yet
        self._count = 0
        self._bytes = 0
        self._failed: BaseException | None = None
        self._closed = False
        self._new_parents: list[str] = []  # folders to fsync at the next sync: the store's new folder is in them

    @property
    def unwritten(self) -> int:
        """Octets of this store still in memory, not handed to the OS: the broker's memory
        alarm counts them (warren/broker/durability.py ``unwritten``), since a stalled disk
        keeps them there for as long as it stalls."""
        return self._buffered + self._inflight_bytes

    def _open_directory(self) -> None:
        """Create the folder if missing, hold a descriptor on it and recover what it holds.

        A new folder's name must outlive a power cut like its files: its parent's fsync (and
        theirs, for folders made with it) is owed to the store's first sync, which runs off the
        event loop (``_new_parents``), not done here, where a stalled disk held the loop during a
        durable declare. Nothing is confirmed before that sync ends; a folder lost before it
        held nothing durable, and opening the store again makes it anew."""
        created = make_dirs(self.directory)
        self._new_parents = [os.path.dirname(f) for f in created] if self.fsync else []
        self._dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.recovery_stats = self._open()
        except BaseException:
            os.close(self._dir_fd)
            raise

    def _open(self):
        raise NotImplementedError

    @property
    def failed(self) -> BaseException | None:
        """The write or fsync error that failed the store for good, or None."""
        return self._failed

    @property
    def closed_cleanly(self) -> bool:
        """Closed with no failure: its queue or exchange was deleted (or the broker stopped), so a
        sync that finds it closed has nothing to keep."""
        return self._closed and self._failed is None

    def _check(self) -> None:
        if self._failed is not None or self._closed:
            raise StoreError(f"{self._label} {self.directory} " + (
                f"failed earlier: {self._failed!r}" if self._failed is not None else "is closed"))

    def flush(self) -> None:
        """Hand every buffered octet to the OS (one write() per file); no fsync."""
        with self._io_lock:
            self._flush_locked()

    def _flush_locked(self):
        raise NotImplementedError

    def sync(self) -> int:
        raise NotImplementedError

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
        raise NotImplementedError

    def delete(self) -> None:
        """Close without syncing and remove the directory with everything in it."""
        if not self._closed:
            self._release()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.fsync:
            fsync_dir(os.path.dirname(os.path.abspath(self.directory)))

    def put_aside(self, aside: str, keep_open: bool = False) -> None:
        """Close without syncing and rename the folder to ``aside``, in the same parent: its
        queue or exchange was deleted, and the folder goes for good once that delete is
        durable (warren/store/aside.py). The rename is not fsynced: either name may survive a
        power cut, and the start sorts them out by the definitions log. ``keep_open``: a sync
        under way still writes it (a stream store's, on the group commit's pool thread: what
        it covers is confirmed), so it closes later (``release``)."""
        if not keep_open:
            self.release()
        os.rename(self.directory, aside)

    def release(self) -> None:
        """Close without syncing (a store put aside, once no sync can write it)."""
        if not self._closed:
            self._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
