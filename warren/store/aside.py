"""The store folders of deleted queues and exchanges, put aside until their delete is durable.

A durable queue's delete is a record in the definitions log (definitions.py) and the removal of
its store folder (``queues/<digest>``, ``streams/<digest>``, ``delayed/<digest>``). Both used to
be fsynced on the event loop, one after the other, so that a power cut could never keep the
removal and undo the delete (the queue would come back empty). Now neither waits on the loop:

* the delete record carries a token and is fsynced by the next group commit, like a declare
  (its answer held until then, warren/server/connection.py);
* the folder is renamed at once, in its parent, to ``deleted-<digest>.<token>`` (``put_aside``:
  no fsync; a new queue of the same name makes a new folder under the old name);
* the group commit that made the delete durable then removes the folder and fsyncs its parent
  (``sync``, on the group commit's pool thread, after the definitions log's fsync).

What a power cut leaves, and what the next start does (``settle``, before any queue opens its
store): a folder put aside whose token the log holds was deleted durably, and is removed. One
whose token the log does not hold was deleted by a change that never became durable: if the
log still has its queue (or exchange), the oldest such folder of that name is renamed back,
replacing a folder under the name itself (made by a later declare of the same name, which was
not durable either: nothing in it was confirmed, since its confirms waited for a group commit
that covered the delete); the others are removed. Tokens sort by the time they were made.

The definitions log keeps the records with tokens through its compactions until
``forget_deletes`` (definitions.py), so a token is never lost while its folder may still exist.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
import time

from warren.store.segment import fsync_dir

__all__ = ["DeletedFolders", "ASIDE_PREFIX", "new_token"]

log = logging.getLogger("warren.store")
ASIDE_PREFIX = "deleted-"
_counter = itertools.count()


def new_token() -> str:
    """A token that sorts after every earlier one of this process (and of earlier runs, clocks
    willing: the start settles every folder before any new one is put aside)."""
    return f"{time.time_ns():020d}{next(_counter) % 10000:04d}"


class DeletedFolders:
    """Folders put aside, removed by the group commit once their delete is durable (module doc).
    The broker's ``Durability`` runs ``sync`` with the group commit's other stores, after the
    definitions log's."""

    ack_sync_interval = 0.0  # in the group commit like a store: no ack logs
    closed_cleanly = False

    def __init__(self, definitions, fsync: bool = True) -> None:
        self.definitions = definitions
        self.fsync = fsync
        self._lock = threading.Lock()
        # (definitions.changes after the delete, folder, token, its store until removed)
        self._pending: list[tuple[int, str, str, object]] = []

    def put_aside(self, store, token: str, syncing: bool = False) -> str:
        """On the loop: close ``store`` and rename its folder aside; returns the new path.
        ``syncing``: a group commit under way took it, so it stays open until its removal
        (``GroupCommitStore.put_aside``)."""
        parent, name = os.path.split(os.path.abspath(store.directory))
        aside = os.path.join(parent, f"{ASIDE_PREFIX}{name}.{token}")
        try:
            store.put_aside(aside, keep_open=syncing)
        except OSError as e:  # never made, or gone: nothing to keep aside
            log.warning("putting %s aside failed (%r); removing it", store.directory, e)
            store.release()
            shutil.rmtree(store.directory, ignore_errors=True)
            return aside
        with self._lock:
            self._pending.append((self.definitions.changes, aside, token, store))
        return aside

    def holds(self, store) -> bool:
        """Whether ``store`` was put aside (its queue deleted) and waits for its removal."""
        with self._lock:
            return any(p[3] is store for p in self._pending)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def due(self) -> bool:
        """Whether a folder waits whose delete is durable now."""
        durable = self.definitions.durable
        with self._lock:
            return any(p[0] <= durable for p in self._pending)

    def sync(self) -> None:
        """Off the loop, after the definitions log's fsync: remove each folder whose delete is
        durable, then fsync their parents. A failure here loses nothing (the start removes what
        is left) and is logged, not raised."""
        durable = self.definitions.durable
        with self._lock:
            done = [p for p in self._pending if p[0] <= durable]
            self._pending = [p for p in self._pending if p[0] > durable]
        if not done:
            return
        parents = set()
        for _, folder, _, store in done:
            store.release()  # the sync that still wrote it ended before this one began
            shutil.rmtree(folder, ignore_errors=True)
            parents.add(os.path.dirname(folder))
        if self.fsync:
            for parent in sorted(parents):
                try:
                    fsync_dir(parent)
                except OSError as e:
                    log.warning("fsync of %s after removing deleted store folders failed (%r); the next start "
                                "removes them again if need be", parent, e)
                    return  # their tokens stay in the log: the start needs them
        # a folder still there (rmtree failed) keeps its token in the log, for the start
        self.definitions.forget_deletes([t for _, folder, t, _ in done if not os.path.lexists(folder)])

    def close(self) -> None:
        """At shutdown, after the definitions log's close (everything durable): remove the rest."""
        try:
            self.sync()
        except Exception:
            log.exception("removing deleted store folders at shutdown")


def settle(root: str, owned: set, durable_tokens, fsync: bool = True) -> list[str]:
    """At start, before any store of ``root`` opens: the folders put aside there (module doc)
    are removed, or one per name renamed back when its delete never became durable and
    ``owned`` (the digests the definitions log still has) holds its name. Returns the tokens
    of the folders seen (settled: the log may forget them)."""
    try:
        entries = [e.name for e in os.scandir(root) if e.name.startswith(ASIDE_PREFIX)
                   and e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
    if not entries:
        return []
    by_name: dict[str, list[tuple[str, str]]] = {}
    for entry in entries:
        digest, _, token = entry[len(ASIDE_PREFIX):].rpartition(".")
        by_name.setdefault(digest, []).append((token, entry))
    for digest, folders in sorted(by_name.items()):
        folders.sort()
        undone = [(t, e) for t, e in folders if t not in durable_tokens]
        back = undone[0] if undone and digest in owned else None
        for token, entry in folders:
            path = os.path.join(root, entry)
            if (token, entry) == back:
                target = os.path.join(root, digest)
                if os.path.exists(target):
                    log.warning("removing %s: made after the delete of its name, which did not survive", target)
                    shutil.rmtree(target, ignore_errors=True)
                log.warning("restoring %s: its delete did not survive the crash", target)
                os.rename(path, target)
            else:
                log.info("removing %s: its queue or exchange was deleted", path)
                shutil.rmtree(path, ignore_errors=True)
    if fsync:
        fsync_dir(root)
    return [t for folders in by_name.values() for t, _ in folders]
