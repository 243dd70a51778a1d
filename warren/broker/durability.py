"""What the broker keeps on disk, and when a publisher may be told it is safe.

``Durability`` owns the definitions log (durable exchanges, queues, bindings) and one
``QueueStore`` per durable queue (``warren/store``). It knows nothing of asyncio: between
``begin_sync`` and ``end_sync`` the server writes the queue stores on the loop while nothing is
at the disk (``sync_begin``; else a disk writer's thread does) and fsyncs them on an
FsyncWorker's thread (``warren/store/fsync_worker.py``), and runs ``sync`` for the other stores
on a worker thread. A queue store's flush past its threshold goes to the disk writer
(``hand_writes``), and a stream store never flushes by itself (``flush_threshold=None``): the
loop makes no system call that waits for a stalled fsync, and a stall holds back confirms only.

Group commit. Every persistent message written to a durable queue needs the *next* sync: a
channel's ``Confirms`` (``confirms.py``) records ``(publish number, next_sync)`` and holds the
confirm (the channel its tx.commit-ok) until ``synced`` reaches that number. One sync covers
every append made before it started, however many, so confirms for many publishes share one
fsync. A sync starts as soon as something is dirty and no sync is running (no timer).
``max_in_flight`` above 1 lets a second start while one is at the disk when a publisher or a
transaction waits for it; syncs are then released in the order they began (``synced`` is the
highest number with every earlier one done), as QueueStore.sync returns. It was 2 while a
Python thread ran each sync, whose waits for the GIL a second sync overlapped; since the
fsyncs run on the FsyncWorker's GIL-free thread one after the other, a second sync in flight
only splits the same messages over two fsyncs: persist-confirm ran 76k msg/s with 1, 64k with
2 (docs/performance.md, session 8).

Definitions: a change made while a client's methods are handled is applied at once, and
written and fsynced by the next group commit on a pool thread beside the message stores
(``DefinitionsStore.defer_fsync``, warren/store/definitions.py: the record waits in memory, and
the pool thread writes it right before its fsync, in the order of the changes); the connection
holds its answer (the -ok and anything after it) and its input until that group commit ended
(``after_definitions``), so an fsync that stalls holds that client only, never the loop, nor
does a second client's change during it (its write would wait behind the stalled fsync of the
same file). A message published into a queue just declared is confirmed by a group commit
that began after the declare was made, so its confirm waits for the declare's fsync too. The HTTP API
defers the same way (warren/broker/directory.py ``durable_change``), and so do the broker's own
deletes (the tick's x-expires, a dropped connection's auto-delete queues, a vhost's deletion),
which nobody waits for; other changes (start-up) are fsynced inside the call, before it returns.

Deletes: a queue's or exchange's delete is logged with a token (``log_delete``) and deferred
like a declare; its store folder is renamed aside at once (``remove_store``) and removed by the
group commit after the one that made the delete durable (``DeletedFolders``, warren/store/
aside.py); the start brings back a folder whose delete did not survive (``_settle_aside``).

Stream queues keep a ``StreamStore`` each (``streams/<digest>``), written and synced by the same
group commit; ``sync_listeners`` tell a stream queue when a sync committed its appends, which
is when its consumers may see them. ``close`` syncs and closes them with the queue stores.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
import logging
import time
from pathlib import Path

from warren.store.aside import DeletedFolders, new_token, settle
from warren.store.damage import store_damage
from warren.store.definitions import DefinitionsStore
from warren.store.group_commit import GroupCommitStore
from warren.store.queue_store import QueueStore, StoreError
from warren.store.segment import fsync_dir
from warren.store.stream_store import DEFAULT_STREAM_SEGMENT, StreamStore

__all__ = ["Durability", "ACK_SYNC_INTERVAL", "MAX_SYNCS_IN_FLIGHT"]

ACK_SYNC_INTERVAL = 1.0  # seconds a queue's ack log may go without an fsync (QueueStore)
# group commits begun and not ended, at most, when something waits for them (module doc); the
# server runs as many pool threads for the stores that do not go through its FsyncWorker
MAX_SYNCS_IN_FLIGHT = 1

log = logging.getLogger("warren.durability")


class Durability:
    max_in_flight = MAX_SYNCS_IN_FLIGHT  # group commits begun and not ended, at most (module doc)

    def __init__(self, data_dir: Path, fsync: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.fsync = fsync
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.definitions = DefinitionsStore(self.data_dir / "definitions.log", fsync=fsync)
        # the sync number that makes the newest deferred definitions change durable (module doc)
        self.definitions_sync = 0
        if fsync:
            self.definitions.on_change = self._definitions_changed
        # store folders of deleted queues and exchanges, until the delete is durable (aside.py)
        self.aside = DeletedFolders(self.definitions, fsync)
        # the newest delete logged: (store roots, digest, token), for the store put aside right after it
        self._last_delete: tuple[tuple, str, str] | None = None
        self.queue_root = self.data_dir / "queues"
        # paged-out transient messages: never recovered, so cleared at every start
        self.spill_root = self.data_dir / "spill"
        shutil.rmtree(self.spill_root, ignore_errors=True)
        self.delayed_root = self.data_dir / "delayed"  # one store per durable delayed-message exchange
        self.stream_root = self.data_dir / "streams"  # one StreamStore per stream queue
        # store -> callback run on the loop after a sync that covered it completed (stream
        # queues deliver what the sync committed); the stores of the sync in progress
        self.sync_listeners: dict = {}
        self._syncing_stores: dict[int, list] = {}  # sync number -> its stores, while it runs
        # the server's: who writes a queue store's flush off the loop (QueueStore.writer), None
        # without one (the store's own thread writes)
        self.hand_writes = None
        # open stores that no queue owns -> a callback run before the store closes at shutdown,
        # once every queue store is synced (a delayed exchange acks what it routed)
        self.side_stores: dict[QueueStore, object] = {}
        self.dirty: set[QueueStore] = set()
        # stores whose ack logs a sync wrote but did not fsync yet (QueueStore.ack_sync_interval):
        # ``tick`` asks for the sync that takes them when no group commit came along
        self.lazy_acks: set[QueueStore] = set()
        # what waits for the next sync: each one's synced(number) runs after it (a channel's
        # Confirms, a channel holding tx.commit-ok, a quorum queue)
        self.waiting: set = set()
        self.next_sync = 1  # the number of the sync that will cover an append made now
        self.synced = 0  # the highest sync number that completed with every one before it
        self.in_flight = 0  # syncs begun and not ended
        self._ended: set[int] = set()  # ended before an earlier one: released with it
        self.request_sync = lambda: None  # set by the server: schedule begin_sync on a worker
        # queues and streams that lost records to damaged files when opened (warren/store/damage.py)
        self.damage: list = []

    # --- queue stores --------------------------------------------------------------------

    def queue_dir(self, vhost: str, name: str) -> Path:
        digest = hashlib.sha256(f"{vhost}\0{name}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return self.queue_root / digest

    def open_queue_store(self, vhost: str, name: str) -> QueueStore:
        # ack logs fsynced at most once a second (queue_store.py): the confirms do not wait for them
        store = QueueStore(self.queue_dir(vhost, name), fsync=self.fsync, ack_sync_interval=ACK_SYNC_INTERVAL)
        store.writer = self.hand_writes
        return self._note_damage("queue", vhost, name, store)

    def _note_damage(self, kind: str, vhost: str, name: str, store):
        lost = store_damage(kind, vhost, name, store.recovery_stats)
        if lost is not None:
            self.damage.append(lost)
            log.error("%s", lost.describe())
        return store

    def open_delayed_store(self, vhost: str, exchange: str, before_close=None) -> QueueStore:
        """The store of a durable x-delayed-message exchange's persistent delayed messages."""
        digest = hashlib.sha256(f"{vhost}\0{exchange}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
        store = self._note_damage("delayed", vhost, exchange, QueueStore(self.delayed_root / digest, fsync=self.fsync))
        store.writer = self.hand_writes
        self.side_stores[store] = before_close
        return store

    def delete_side_store(self, store: QueueStore) -> None:
        self.side_stores.pop(store, None)
        self.remove_store(store)

    # --- deletes (warren/store/aside.py) --------------------------------------------------

    def log_delete(self, kind: str, vhost: str, name: str) -> None:
        """A durable queue's (``kind`` "queue") or exchange's ("exchange") delete, logged with
        the token its store folder will be put aside under (``remove_store``): deferred, and
        answered after the group commit's fsync, when the caller set ``defer_fsync``."""
        digest = self.queue_dir(vhost, name).name
        token = new_token()
        if kind == "queue":
            self.definitions.delete_queue(vhost, name, token=token)
            self._last_delete = (("queues", "streams"), digest, token)
        else:
            self.definitions.delete_exchange(vhost, name, token=token)
            self._last_delete = (("delayed",), digest, token)

    def remove_store(self, store) -> None:
        """A deleted queue's or exchange's store: closed and its folder put aside, removed by
        the group commit after the one that makes its delete (``log_delete``) durable."""
        self.dirty.discard(store)
        self.lazy_acks.discard(store)
        self.sync_listeners.pop(store, None)
        folder = os.path.abspath(store.directory)
        root, digest = os.path.basename(os.path.dirname(folder)), os.path.basename(folder)
        last, self._last_delete = self._last_delete, None
        # the token of the delete just logged (a token the log lacks: the start removes the folder
        # unless the log has its queue, which only a delete that was not logged leaves)
        token = last[2] if last is not None and root in last[0] and digest == last[1] else new_token()
        # a store a group commit under way took stays open until then: a stream store's is
        # written and fsynced on the pool thread, and its confirms go out when that commit ends.
        # Its buffers are written now, under the folder's name (the files it opens by name), the
        # fsyncs going to the descriptors (QueueStore wrote its own at the commit's begin)
        syncing = any(store in stores for stores in self._syncing_stores.values())
        if syncing and type(store) is not QueueStore:
            try:
                store.flush()
            except (OSError, StoreError):
                pass  # the store failed: so does the group commit under way, which stops the broker
        self.aside.put_aside(store, token, syncing)
        self.dirty.add(self.aside)
        self.request_sync()

    def stream_dir(self, vhost: str, name: str) -> Path:
        return self.stream_root / self.queue_dir(vhost, name).name

    def open_stream_store(self, vhost: str, name: str, segment_size: int = DEFAULT_STREAM_SEGMENT,
                          max_bytes: int | None = None, max_age_s: float | None = None,
                          on_synced=None) -> StreamStore:
        """The log of a stream queue; ``on_synced()`` runs after every sync that covered it."""
        store = StreamStore(self.stream_dir(vhost, name), fsync=self.fsync, flush_threshold=None,
                            segment_size=segment_size, max_bytes=max_bytes, max_age_s=max_age_s)
        self._note_damage("stream", vhost, name, store)
        if on_synced is not None:
            self.sync_listeners[store] = on_synced
        return store

    def delete_stream_store(self, store: StreamStore) -> None:
        self.remove_store(store)

    def open_spill(self) -> QueueStore:
        return QueueStore(self.spill_root / uuid.uuid4().hex, fsync=False)

    def wrote(self, store: QueueStore) -> int:
        """A store took an append: returns the sync number that will make it durable."""
        self.dirty.add(store)
        if not self.in_flight or (self.waiting and self.in_flight < self.max_in_flight):
            self.request_sync()
        return self.next_sync

    def _definitions_changed(self) -> None:
        self.definitions_sync = self.wrote(self.definitions)

    def after_definitions(self, callback) -> None:
        """Call ``callback()`` on the loop once every definitions change made so far is durable:
        after the group commit that fsyncs them ended (``end_sync``). Never called if it failed
        (the broker stops)."""
        if self.definitions.durable >= self.definitions.changes or self.synced >= self.definitions_sync:
            callback()
        else:
            self.waiting.add(SyncWaiter(self, self.definitions_sync, callback))

    @property
    def syncing(self) -> bool:
        return self.in_flight > 0

    # --- group commit (begin on the loop, sync on a worker, end on the loop) -------------------

    def unwritten(self) -> int:
        """Octets the message stores hold in memory, not yet handed to the OS (the memory
        alarm counts them: warren/server/flow_control.py). Only stores written since the last
        group commit, or by one under way, hold any."""
        stores = set(self.dirty)
        for syncing in self._syncing_stores.values():
            stores.update(syncing)
        return sum(s.unwritten for s in stores if isinstance(s, GroupCommitStore))

    def begin_sync(self) -> tuple[int, list[QueueStore]] | None:
        """The next group commit to run, or None: nothing dirty, or enough running already (a
        second only for someone waiting: without confirms or transactions nobody is)."""
        if not self.dirty or (self.in_flight and (not self.waiting or self.in_flight >= self.max_in_flight)):
            return None
        self.in_flight += 1
        number = self.next_sync
        self.next_sync += 1
        stores = list(self.dirty)
        self.dirty.clear()
        self._syncing_stores[number] = stores
        return number, stores

    @staticmethod
    def sync(stores: list) -> None:
        """Runs on a worker thread: flush and fsync every store written since the last sync (the
        server's stream stores; its queue stores go through ``sync_begin`` and an FsyncWorker).
        The definitions log first, the folders put aside last (they wait for its fsync)."""
        if len(stores) > 1:
            stores = sorted(stores, key=lambda s: 0 if type(s) is DefinitionsStore else
                            2 if type(s) is DeletedFolders else 1)
        for s in stores:
            try:
                s.sync()
            except StoreError:
                if s.closed_cleanly:
                    continue  # deleted since it was written (queue or delayed exchange): nothing to keep
                raise

    @staticmethod
    def sync_begin(stores: list[QueueStore], defer_writes: bool = False) -> tuple[list, BaseException | None]:
        """On the loop: the first step of each queue store's sync (``QueueStore.sync_begin``: its
        buffers written, or with ``defer_writes`` taken for the server's disk writer). Returns ``[(store, SyncWork), ...]`` and the first error: a store whose write
        failed is left out (it has failed for good), and so is one deleted since it was written.
        The server hands the works to its FsyncWorker and ends each with ``sync_end``, the begun
        ones after a failure too, so that none is left half done."""
        works, error = [], None
        for s in stores:
            try:
                works.append((s, s.sync_begin(defer_writes)))
            except (StoreError, OSError) as e:  # OSError: the write failed, which failed the store
                if not s.closed_cleanly:  # else deleted since it was written
                    error = error or e
        return works, error

    def end_sync(self, number: int) -> None:
        """Sync ``number`` finished; it and the ones it waited for are released in order."""
        self.in_flight -= 1
        if number != self.synced + 1:  # an earlier one is still at the disk (another store's)
            self._ended.add(number)
            if self.dirty:
                self.request_sync()
            return
        stores = self._syncing_stores.pop(number)
        while number + 1 in self._ended:
            number += 1
            self._ended.discard(number)
            stores += self._syncing_stores.pop(number)
        self.synced = number
        if len(stores) > 1:
            stores = list(dict.fromkeys(stores))  # a store in two of the syncs released
        for s in stores:
            if s.ack_sync_interval and s.acks_owed() and not self.aside.holds(s):  # ack logs left unsynced
                self.lazy_acks.add(s)
        if self.sync_listeners:
            for s in stores:
                listener = self.sync_listeners.get(s)
                if listener is not None:
                    try:
                        listener()
                    except Exception:  # one queue's failure must not hold every confirm back
                        log.exception("after the sync of %s", s.directory)
        waiting, self.waiting = self.waiting, set()
        for ch in waiting:
            ch.synced(number)
        # folders put aside whose delete was not durable when this group commit began: the next
        # one removes them (the definitions log is dirty then, or they are due already)
        if self.aside.pending and (self.definitions in self.dirty or self.aside.due()):
            self.dirty.add(self.aside)
        if self.dirty:
            self.request_sync()

    def tick(self, now: float) -> None:
        """From the server's tick: ack logs left unsynced for ``ACK_SYNC_INTERVAL`` get a sync
        of their own (a consumer's last acks, with no publisher to bring a group commit)."""
        if self.lazy_acks and not self.in_flight:
            due = [s for s in self.lazy_acks if s.acks_owed(now)]
            if due:
                self.lazy_acks.difference_update(due)
                self.dirty.update(due)
                self.request_sync()

    # --- start-up and shutdown -----------------------------------------------------------

    def restore(self, broker) -> None:
        """Recreate durable definitions and queue contents; log what was recovered."""
        t0 = time.monotonic()
        defs = self.definitions.load()
        self._settle_aside(defs)
        messages = 0
        for e in defs.exchanges:
            vhost = broker.vhosts.get(e.vhost)
            if vhost is not None:
                vhost.restore_exchange(e)
        for q in defs.queues:
            vhost = broker.vhosts.get(q.vhost)
            if vhost is not None:
                messages += vhost.restore_queue(q)
        for b in defs.bindings:
            vhost = broker.vhosts.get(b.vhost)
            if vhost is not None:
                vhost.restore_binding(b)
        log.info("recovered %d exchanges, %d queues, %d bindings, %d messages in %.2fs",
                 len(defs.exchanges), len(defs.queues), len(defs.bindings), messages, time.monotonic() - t0)
        self._remove_leftover_stores(defs)
        # what belongs to a vhost this broker does not serve stays on disk, untouched: say so
        unserved = {d.vhost for d in (*defs.exchanges, *defs.queues, *defs.bindings)} - set(broker.vhosts)
        for name in sorted(unserved):
            queues = sum(1 for q in defs.queues if q.vhost == name)
            log.warning("vhost '%s' has %d durable queues and %d exchanges in %s but is not served "
                        "(start with --vhost '%s' to serve them)", name, queues,
                        sum(1 for e in defs.exchanges if e.vhost == name), self.data_dir, name)

    def _settle_aside(self, defs) -> None:
        """Before any store opens: the folders put aside by deletes (warren/store/aside.py) are
        removed, or renamed back where the delete did not survive a crash."""
        owned = {self.queue_dir(q.vhost, q.name).name for q in defs.queues}
        owned_delayed = {self.queue_dir(e.vhost, e.name).name for e in defs.exchanges}
        tokens = self.definitions.delete_tokens
        for root, keep in ((self.queue_root, owned), (self.stream_root, owned), (self.delayed_root, owned_delayed)):
            settle(str(root), keep, tokens, self.fsync)
        self.definitions.forget_deletes(tokens)  # every folder they named is settled

    def _remove_leftover_stores(self, defs) -> None:
        """Remove the store folders no durable queue or exchange owns: a crash came between a
        delete, logged (and fsynced) first, and the removal of the folder. Left there, a new
        queue or delayed exchange of the same name would open it and get the deleted one's
        messages back (the power-loss harness found it, tests/store/test_powerloss_schedules.py);
        RabbitMQ removes the folders of queues it does not know at start too."""
        owned = {self.queue_dir(q.vhost, q.name).name for q in defs.queues}
        owned_delayed = {self.queue_dir(e.vhost, e.name).name for e in defs.exchanges}  # the same digest
        for root, keep in ((self.queue_root, owned), (self.stream_root, owned), (self.delayed_root, owned_delayed)):
            try:
                leftovers = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False) and e.name not in keep
                             and len(e.name) == 32 and all(c in "0123456789abcdef" for c in e.name)]
            except FileNotFoundError:
                continue
            for entry in leftovers:
                log.warning("removing %s: no durable queue or exchange owns it (a crash came during its delete)",
                            entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
            if leftovers and self.fsync:
                fsync_dir(str(root))

    def close(self, queues) -> None:
        for q in queues:
            if q.store is not None:
                if q.store.failed is not None:  # the disk refused it earlier: nothing more to sync
                    log.warning("closing the store of queue %r in vhost %r without a sync: it failed earlier (%r)",
                                q.name, q.vhost.name, q.store.failed)
                try:
                    if q.store.failed is None:
                        q.store.sync()
                    q.store.close()
                except Exception:
                    log.exception("closing the store of queue %r", q.name)
        for store, before_close in list(self.side_stores.items()):
            try:
                if before_close is not None:
                    before_close()
                store.close()
            except Exception:
                log.exception("closing store %s", store.directory)
        self.definitions.close()
        self.aside.close()


class SyncWaiter:
    """In ``Durability.waiting``: runs ``callback`` once sync ``number`` has ended."""

    __slots__ = ("durability", "number", "callback")

    def __init__(self, durability: Durability, number: int, callback) -> None:
        self.durability, self.number, self.callback = durability, number, callback

    def synced(self, number: int) -> None:
        if number >= self.number:
            self.callback()
        else:
            self.durability.waiting.add(self)
