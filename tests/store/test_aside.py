"""A deleted queue's store folder is put aside until its delete is durable (warren/store/aside.py),
and the start sorts out what a power cut left: the folder comes back when the delete did not
survive, and goes when it did, whatever a later declare of the same name left beside it.

The power cuts themselves, through real clients: tests/store/test_powerloss_disks.py."""

from __future__ import annotations

import os

from warren.broker.broker import Broker
from warren.broker.durability import Durability
from warren.store import aside
from warren.store.aside import ASIDE_PREFIX


def run_sync(d: Durability) -> None:
    while True:
        job = d.begin_sync()
        if job is None:
            return
        number, stores = job
        for s in stores:
            if hasattr(s, "sync_begin"):
                s.sync()
        d.sync([s for s in stores if not hasattr(s, "sync_begin")])
        d.end_sync(number)


def start(data_dir) -> tuple[Durability, Broker]:
    d = Durability(data_dir)
    return d, Broker(("/",), durability=d)


def publish(broker, queue: str, bodies: list[bytes]) -> None:
    q = broker.vhosts["/"].queues[queue]
    for body in bodies:
        q.store.append(q.store.last_seq + 1, _record(body))
        q.durability.wrote(q.store)


def _record(body: bytes) -> bytes:
    from warren.store.message import encode_message
    return encode_message("", "q", b"\x00\x00", body)


def bodies(d: Durability, name: str = "q") -> list[bytes]:
    from warren.store.message import decode_message
    store = d.open_queue_store("/", name)
    try:
        return [decode_message(r)[3] for _, r, _ in store.recover()]
    finally:
        store.close()


def asides(d: Durability) -> list[str]:
    return sorted(e for root in (d.queue_root, d.stream_root) if root.exists()
                  for e in os.listdir(root) if e.startswith(ASIDE_PREFIX))


def crash(d: Durability) -> None:
    """The process ends without closing anything (what kill -9 leaves, page cache kept)."""
    os.close(d.definitions._fd)
    d.definitions._fd = None


def declared_with_messages(tmp_path) -> tuple[Durability, Broker]:
    d, broker = start(tmp_path)
    broker.vhosts["/"].declare_queue(None, "q", False, True, False, False, {})
    publish(broker, "q", [b"m1", b"m2"])
    run_sync(d)
    return d, broker


def test_a_delete_puts_the_folder_aside_and_the_group_commit_removes_it_once_durable(tmp_path):
    d, broker = declared_with_messages(tmp_path)
    digest = d.queue_dir("/", "q").name
    with d.definitions.deferred():
        broker.vhosts["/"].delete_queue(broker.vhosts["/"].queues["q"])
    assert d.definitions.durable < d.definitions.changes  # the delete waits for the group commit
    assert not (d.queue_root / digest).exists() and len(asides(d)) == 1
    run_sync(d)
    assert asides(d) == [] and d.definitions.delete_tokens == frozenset()  # gone, and forgotten
    d.close([])


def test_a_delete_that_did_not_survive_brings_the_folder_back_with_its_messages(tmp_path):
    d, broker = declared_with_messages(tmp_path)
    size = os.path.getsize(d.definitions.path)
    with d.definitions.deferred():
        broker.vhosts["/"].delete_queue(broker.vhosts["/"].queues["q"])
    # the power cut before the group commit: the delete's record was never written (it waits in
    # memory for the group commit's pool thread, warren/store/definitions.py); the rename aside was
    assert os.path.getsize(d.definitions.path) == size and len(asides(d)) == 1
    crash(d)
    d, broker = start(tmp_path)
    assert "q" in broker.vhosts["/"].queues and asides(d) == []
    assert broker.vhosts["/"].queues["q"].message_count == 2
    d.close(broker.all_queues())


def test_a_declare_of_the_same_name_after_a_delete_that_did_not_survive_loses_to_the_old_folder(tmp_path):
    """Delete, declare again, publish, then the power cut loses both changes: the folder put
    aside comes back, and the new one (nothing in it was confirmed) goes."""
    d, broker = declared_with_messages(tmp_path)
    size = os.path.getsize(d.definitions.path)
    v = broker.vhosts["/"]
    with d.definitions.deferred():
        v.delete_queue(v.queues["q"])
        v.declare_queue(None, "q", False, True, False, False, {})
    publish(broker, "q", [b"new"])
    v.queues["q"].store.flush()
    with open(d.definitions.path, "rb+") as f:
        f.truncate(size)  # neither the delete nor the declare reached the disk
    crash(d)
    d, broker = start(tmp_path)
    assert asides(d) == []
    assert broker.vhosts["/"].queues["q"].message_count == 2
    d.close(broker.all_queues())
    d = Durability(tmp_path)
    assert bodies(d) == [b"m1", b"m2"]
    d.definitions.close()


def test_a_delete_that_survived_leaves_the_name_to_the_queue_declared_after_it(tmp_path, monkeypatch):
    """Delete (durable), declare again, publish (durable), then the crash comes before the
    folder put aside was removed: the new queue keeps its own messages."""
    d, broker = declared_with_messages(tmp_path)
    v = broker.vhosts["/"]
    monkeypatch.setattr(aside.shutil, "rmtree", lambda *a, **k: None)  # the crash comes before the removal
    v.delete_queue(v.queues["q"])  # not deferred: durable at once
    v.declare_queue(None, "q", False, True, False, False, {})
    publish(broker, "q", [b"new"])
    run_sync(d)
    assert len(asides(d)) == 1
    crash(d)
    monkeypatch.undo()
    d, broker = start(tmp_path)
    assert asides(d) == [] and broker.vhosts["/"].queues["q"].message_count == 1
    d.close(broker.all_queues())


def test_a_delete_that_survived_without_a_new_declare_leaves_nothing(tmp_path, monkeypatch):
    d, broker = declared_with_messages(tmp_path)
    monkeypatch.setattr(aside.shutil, "rmtree", lambda *a, **k: None)
    broker.vhosts["/"].delete_queue(broker.vhosts["/"].queues["q"])
    run_sync(d)
    assert len(asides(d)) == 1
    crash(d)
    monkeypatch.undo()
    d, broker = start(tmp_path)
    assert "q" not in broker.vhosts["/"].queues and asides(d) == [] and os.listdir(d.queue_root) == []
    d.close(broker.all_queues())


def test_a_queue_that_expires_on_the_tick_is_deleted_without_an_fsync_on_the_loop(tmp_path):
    """x-expires deletes on the broker's tick: the delete waits for the group commit like a
    client's (nobody waits for an answer), its folder aside until then."""
    import time

    d, broker = start(tmp_path)
    broker.vhosts["/"].declare_queue(None, "q", False, True, False, False, {"x-expires": 1})
    run_sync(d)
    broker.tick(time.monotonic() + 60)
    assert "q" not in broker.vhosts["/"].queues
    assert d.definitions.durable < d.definitions.changes and len(asides(d)) == 1
    run_sync(d)
    assert d.definitions.durable == d.definitions.changes and asides(d) == []
    d.close([])


def test_a_stream_deleted_while_a_group_commit_writes_it_keeps_what_that_commit_confirms(tmp_path):
    """A stream store is written and fsynced on the group commit's pool thread: deleted after
    that commit began (its confirms due when it ends), it stays open until the commit wrote
    it, so a power cut that undoes the delete gives back every entry confirmed."""
    import time

    d, broker = start(tmp_path)
    v = broker.vhosts["/"]
    v.declare_queue(None, "s", False, True, False, False, {"x-queue-type": "stream"})
    run_sync(d)
    size = os.path.getsize(d.definitions.path)
    store = v.queues["s"].store
    store.append(_record(b"confirmed"), int(time.time() * 1000))
    d.wrote(store)
    number, stores = d.begin_sync()  # the commit whose end confirms the entry
    assert store in stores
    with d.definitions.deferred():
        v.delete_queue(v.queues["s"])
    d.sync([s for s in stores if not hasattr(s, "sync_begin")])  # the pool thread's part
    d.end_sync(number)
    with open(d.definitions.path, "rb+") as f:
        f.truncate(size)  # the power cut: the delete never reached the disk
    crash(d)
    d, broker = start(tmp_path)
    assert broker.vhosts["/"].queues["s"].message_count == 1 and asides(d) == []
    d.close(broker.all_queues())
