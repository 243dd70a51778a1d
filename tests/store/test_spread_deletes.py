"""A durable queue's delete under ``--workers 2 --worker-mode queues`` (warren/spread), across a
power cut: the queue lives in one worker's data folder (its *owner*), the other worker logs only
a record of it (for its bindings), and the delete comes from a connection on that other worker.

* The delete answered (delete-ok), then kill -9 of the whole node and the power cut: the queue is
  gone on both workers, no store folder is left on either (nor one put aside), and a queue
  declared again under the name is empty. The owner logged the delete with the token of its
  folder put aside (warren/store/aside.py); the other worker's record went without a token (it
  has no folder for it), which is all it needs.
* The delete never answered (the owner's definitions fsync stalls at the disk) and the power
  cut: the owner's connections go on meanwhile; the owner's folder is kept, the queue comes back
  with every confirmed message, and both workers know it again (a publish through the other
  worker reaches it).

Through pika against a node on the power-loss layer (tests/store/powerloss_fs.py), both cases in
one test behind ``-m storage_faults`` (a two-worker node started twice: about 25 s here). The owner
logs a delete asked through the sequencer with its folder's token and answers once it is
durable; since session 19 its fsync is the group commit's (``off_the_loop`` in
warren/spread/definitions.py), so round trips on the owner go on while it stalls (before, the
owner fsynced on its loop and they stopped). The record's delete on the other worker needs no
token (it has no folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pika
import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.store.powerloss_fs import PowerLossFS, unavailable_reason
from warren.spread import queue_owner

SKIP = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(SKIP is not None, reason=f"no FUSE here: {SKIP}"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren node on the power-loss layer"),
]


@pytest.fixture
def plfs(tmp_path):
    (tmp_path / "fs").mkdir()
    yield from PowerLossFS.mounted(tmp_path / "fs")


def start(tmp_path, data: Path):
    return launch_broker(tmp_path, "--disk-free-limit", "0", "--workers", "2", "--worker-mode", "queues",
                         data_dir=data)


def pids_of(node) -> list[int]:
    info = json.loads(Path(node.args[node.args.index("--ready-file") + 1]).read_text())
    return [info["pid"]] + [w["pid"] for w in info["workers"]]


def power_cut(plfs, node) -> dict:
    """kill -9 of every process of the node (the PIDs this test started), then the layer drops
    what was not durable. A worker killed inside a stalled fsync lives on until the layer
    answers it: ``wake`` answers every stalled call with EIO, making nothing durable."""
    pids = pids_of(node)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    plfs.call("wake")
    node.proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in pids):
        assert time.monotonic() < deadline, "a worker outlived its kill -9"
        time.sleep(0.02)
    return plfs.drop()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def on_worker(node, worker: int, vhost: str = "/", heartbeat: int | None = None) -> tuple:
    """(connection, channel) of a connection to ``vhost`` served by ``worker``: connections are
    dealt out in turn, and one refusal makes a connection stay where it landed
    (warren/server/placement.py)."""
    from tests.management.api_client import call
    for i in range(8):
        name = f"w{worker}-{vhost}-{i}-{time.monotonic_ns()}"
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", node.port, virtual_host=vhost, heartbeat=heartbeat,
            client_properties={"connection_name": name}, socket_timeout=10))
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare("no-such-queue-anywhere", passive=True)  # stays where it landed
        deadline = time.monotonic() + 10
        serving = None
        while serving is None and time.monotonic() < deadline:
            status, rows, _ = call(node.http_url, "GET", "/api/connections", timeout=10)
            serving = next((r["worker"] for r in rows or []
                            if r.get("client_properties", {}).get("connection_name") == name), None)
        if serving == worker:
            return conn, conn.channel()
        conn.close()
    raise AssertionError(f"no connection to {vhost} landed on worker {worker}")


def owned_by(worker: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(10_000) if queue_owner("/", f"{prefix}-{i}", 2) == worker)


def folders(data: Path, name: str) -> list[str]:
    """Every store folder of queue ``name`` on any worker, put aside or not."""
    digest = hashlib.sha256(f"/\0{name}".encode()).hexdigest()[:32]
    found = []
    for worker in (data / "workers").iterdir():
        root = worker / "queues"
        if root.is_dir():
            found += [f"{worker.name}/{e}" for e in os.listdir(root) if digest in e]
    return found


def _while_stalled(plfs, before: dict) -> None:
    assert plfs.stats()["stalls_ended"] == before["stalls_ended"], "the round trips came only after the stall"


def count(ch, name: str) -> int | None:
    try:
        return ch.queue_declare(name, passive=True).method.message_count
    except pika.exceptions.ChannelClosedByBroker:
        return None


def publish(ch, name: str, n: int) -> None:
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", name, b"%s-%d" % (name.encode(), i), pika.BasicProperties(delivery_mode=2))


@pytest.mark.storage_faults
@pytest.mark.timeout(240)
def test_a_remote_queues_delete_across_a_power_cut(tmp_path, plfs, request):
    """Both cases of the module doc on one node (two starts of a two-worker node, the cost):
    ``doomed``'s delete answered, ``undone``'s stalled at the owner's fsync, then the cut."""
    if "storage_faults" not in (request.config.option.markexpr or ""):
        pytest.skip("a two-worker node started twice on the power-loss layer (about 25 s here): runs with "
                    "-m storage_faults")
    data = plfs.mountpoint / "data"
    node = start(tmp_path, data)
    answered = []
    try:
        conn, ch = on_worker(node, 0)
        doomed, kept, undone = owned_by(1, "sd-doomed"), owned_by(1, "sd-kept"), owned_by(1, "sd-undone")
        for q in (doomed, kept, undone):
            ch.queue_declare(q, durable=True)
        publish(ch, doomed, 20)
        publish(ch, kept, 5)
        publish(ch, undone, 20)
        assert folders(data, doomed) and folders(data, doomed)[0].startswith("1/")  # the owner's folder
        ch.queue_delete(doomed)  # from worker 0: the owner, worker 1, deletes it; worker 0 forgets its record
        owner_conn, owner_ch = on_worker(node, 1)  # round trips on the owner while its fsync stalls, below
        owner_ch.queue_declare("sd-transient", durable=False, exclusive=True)
        # the next delete stalls at the owner's definitions fsync, and is never answered
        before = plfs.stats()
        plfs.fault("fsync", path="/data/workers/1/definitions", stall=60)  # ended by the cut

        def delete():
            try:
                answered.append(ch.queue_delete(undone))
            except Exception as e:  # the node dies under it
                answered.append(e)

        t = threading.Thread(target=delete)
        t.start()
        deadline = time.monotonic() + 30
        while plfs.stats()["stalls"] == before["stalls"]:
            assert time.monotonic() < deadline, "the owner's delete never reached its fsync"
            time.sleep(0.02)
        # the owner's loop goes on meanwhile: its delete's fsync is the group commit's, off the loop
        for turn in range(5):
            owner_ch.basic_publish("", "sd-transient", b"t%d" % turn)
            got = None
            while got is None:
                got = owner_ch.basic_get("sd-transient", auto_ack=True)[2]
            assert got == b"t%d" % turn
        _while_stalled(plfs, before)
        assert not answered, answered  # not answered while the owner's fsync stalls
        power_cut(plfs, node)
        plfs.clear()
        t.join(30)
        assert not [a for a in answered if not isinstance(a, Exception)], answered  # never delete-ok
    finally:
        plfs.clear()
        node.stop()
    node = start(tmp_path, data)
    try:
        for worker in (0, 1):  # both workers' view
            conn, ch = on_worker(node, worker)
            assert count(ch, doomed) is None, f"worker {worker} still has {doomed}"
            ch = conn.channel()
            assert count(ch, kept) == 5, worker
            assert count(ch, undone) == 20, worker  # every confirmed message, its delete undone
            conn.close()
        # the answered delete left nothing, put aside or restored; the undone one's folder is its owner's
        assert folders(data, doomed) == []
        assert [f for f in folders(data, undone) if "deleted-" in f or not f.startswith("1/")] == []
        conn, ch = on_worker(node, 0)
        ch.confirm_delivery()  # worker 0 knows the undone queue again: its publish reaches it
        ch.basic_publish("", undone, b"after", pika.BasicProperties(delivery_mode=2), mandatory=True)
        assert count(ch, undone) == 21
        ch.queue_declare(doomed, durable=True)
        assert count(ch, doomed) == 0  # a new queue: not the deleted one's messages
    finally:
        node.stop()
