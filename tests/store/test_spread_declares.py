"""Durable declares under ``--workers 2 --worker-mode queues`` (warren/spread) while a worker's
definitions fsync stalls, then a power cut.

Every worker logs each durable change in its own definitions log: the owner of a queue its
create, every other worker a record of it (for its bindings) and its copy of each exchange and
binding. Since session 20 each does so off its loop (the group commit's fsync,
``off_the_loop`` / ``_deferred`` in warren/spread/definitions.py) and answers the sequencer once
durable, and the sequencer answers the client once every worker has. Here worker 1's
definitions fsync stalls while a connection on worker 0 declares a queue worker 1 owns (the
owner's create), a queue worker 0 owns (worker 1's record) and an exchange with a binding
(worker 1's copies):

* none is answered during the stall;
* worker 1's loop goes on meanwhile: round trips on a transient queue there, on "/" and on
  another vhost (before, worker 1 fsynced on its loop and nothing it served moved until the
  disk answered; heartbeats are that loop's timers too);
* after kill -9 of the node and the power cut, everything answered before the stall is there
  on both workers (queues with their confirmed messages, the exchange and binding routing from
  either worker), and the node starts by itself.

Through pika against a node on the power-loss layer (tests/store/powerloss_fs.py), behind
``-m storage_faults`` like tests/store/test_spread_deletes.py (a two-worker node started twice).
"""

from __future__ import annotations

import select
import threading
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e import rawamqp as raw
from tests.management.api_client import call
from tests.store.powerloss_fs import PowerLossFS, unavailable_reason
from tests.store.test_spread_deletes import count, on_worker, owned_by, power_cut, publish

SKIP = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(SKIP is not None, reason=f"no FUSE here: {SKIP}"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren node on the power-loss layer"),
]

OTHER = "sd-other"  # a second vhost, served beside "/"


@pytest.fixture
def plfs(tmp_path):
    (tmp_path / "fs").mkdir()
    yield from PowerLossFS.mounted(tmp_path / "fs")


def start(tmp_path, data):
    return launch_broker(tmp_path, "--disk-free-limit", "0", "--workers", "2", "--worker-mode", "queues",
                         "--heartbeat", "1", data_dir=data)


def round_trip(ch, queue: str, body: bytes) -> None:
    ch.basic_publish("", queue, body)
    deadline = time.monotonic() + 20
    got = None
    while got is None:
        assert time.monotonic() < deadline, f"{body!r} never came back from {queue}"
        got = ch.basic_get(queue, auto_ack=True)[2]
    assert got == body


@pytest.mark.storage_faults
@pytest.mark.timeout(300)
def test_declares_while_a_workers_fsync_stalls_then_a_power_cut(tmp_path, plfs, request):
    if "storage_faults" not in (request.config.option.markexpr or ""):
        pytest.skip("a two-worker node started twice on the power-loss layer (about 30 s here): runs with "
                    "-m storage_faults")
    data = plfs.mountpoint / "data"
    node = start(tmp_path, data)
    on1, on0 = owned_by(1, "sc-acked"), owned_by(0, "sc-acked0")
    owner_made, recorded = owned_by(1, "sc-stalled"), owned_by(0, "sc-stalled0")
    seq_made, gone = owned_by(0, "sc-sequenced"), owned_by(1, "sc-gone")
    undone = owned_by(1, "sc-undone")
    try:
        status, _, _ = call(node.http_url, "PUT", f"/api/vhosts/{OTHER}", {})
        assert status in (201, 204), status
        status, _, _ = call(node.http_url, "PUT", f"/api/permissions/{OTHER}/guest",
                            {"configure": ".*", "write": ".*", "read": ".*"})
        assert status in (201, 204), status
        conn, ch = on_worker(node, 0)
        # answered before any stall: must survive the cut on both workers
        ch.exchange_declare("sc-x", "direct", durable=True)
        for q in (on1, on0):
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, "sc-x", routing_key=q)
            publish(ch, q, 7)
        ch.queue_declare(gone, durable=True)
        publish(ch, gone, 2)
        # worker 1's loop, watched during each stall: "/", another vhost, heartbeats of 1 s
        c1, ch1 = on_worker(node, 1)
        ch1.queue_declare("sc-transient", durable=False, exclusive=True)
        beat, och1 = on_worker(node, 1, OTHER, heartbeat=1)  # closes itself if heartbeats stop
        och1.queue_declare("sc-transient-other", durable=False, exclusive=True)

        ch.queue_declare("sc-transient0", durable=False, exclusive=True)  # on worker 0
        watched = {1: [(ch1, "sc-transient"), (och1, "sc-transient-other")], 0: [(ch, "sc-transient0")]}

        redeclarer = raw.RawConnection("127.0.0.1", node.port, timeout=60)
        redeclarer.handshake(heartbeat=0)
        redeclarer.open_channel(1)

        def stalled(act, end: bool, worker: int = 1, redeclare: str | None = None) -> list:
            """``act`` on a connection of its own while ``worker``'s definitions fsync stalls:
            not answered meanwhile, every worker serving on; with ``end`` the stall then ends
            and the answer comes. ``redeclare``: the same queue declared by another client
            (raw frames, sent once the stall began) is not answered before it either. One
            change per stall: a second write to the file would wait in the kernel behind the
            stalled fsync (FUSE holds the inode lock through it)."""
            answers: list = []

            def run() -> None:
                try:
                    c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port, socket_timeout=10))
                    act(c.channel())
                    answers.append("answered")
                    c.close()
                except Exception as e:  # the node dies under it (the cut)
                    answers.append(e)
            before = plfs.stats()
            plfs.fault("fsync", path=f"/data/workers/{worker}/definitions", stall=60)
            t = threading.Thread(target=run, daemon=True)
            t.start()
            deadline = time.monotonic() + 30
            while plfs.stats()["stalls"] == before["stalls"]:
                assert time.monotonic() < deadline, f"no definitions fsync of worker {worker} stalled: {answers}"
                time.sleep(0.02)
            if redeclare is not None:
                redeclarer.send(raw.queue_declare(1, redeclare, durable=True))
            # every worker serves on (its fsync is the group commit's, off its loop); these
            # round trips on both workers take several loop turns each, by which the redeclare
            # sent before them has been read and, were it answered at once, answered
            for turn in range(3):
                for w in (0, 1):
                    for c, queue in watched[w]:
                        round_trip(c, queue, b"t%d" % turn)
                beat.process_data_events(0)
            assert plfs.stats()["stalls_ended"] == before["stalls_ended"], "the round trips came only after the stall"
            assert not answers, f"answered during the stall: {answers}"
            if redeclare is not None:
                assert not redeclarer.buf and not select.select([redeclarer.sock], [], [], 0)[0], \
                    "the redeclare was answered during the stall"
            if end:
                plfs.clear()
                plfs.end_stalls()
                t.join(60)
                assert answers == ["answered"], answers
                if redeclare is not None:
                    redeclarer.expect(raw.QUEUE_DECLARE_OK, 1)
                assert beat.is_open
            return answers

        def declare(name):
            return lambda c: c.queue_declare(name, durable=True)

        stalled(declare(owner_made), True, redeclare=owner_made)  # the owner's create (and a redeclare)
        stalled(declare(recorded), True)  # worker 1's record of worker 0's queue
        stalled(lambda c: c.exchange_declare("sc-y", "fanout", durable=True), True)  # worker 1's copy
        # the sequencer's own create (worker 0 owns it) and a redeclare of it from another client
        stalled(declare(seq_made), True, worker=0, redeclare=seq_made)
        # a delete stalled at the owner's fsync and a declare of the name meanwhile: the declare
        # waits for the delete (before, it found the record, asked the owner, and got 404)
        stalled(lambda c: c.queue_delete(gone), True, redeclare=gone)
        redeclarer.close()
        ch.queue_bind(owner_made, "sc-y")
        publish(ch, owner_made, 3)
        never = stalled(declare(undone), False)  # the cut comes first
        power_cut(plfs, node)
        plfs.clear()
        deadline = time.monotonic() + 30
        while not never and time.monotonic() < deadline:
            time.sleep(0.02)
        assert never and isinstance(never[0], Exception), never  # never declare-ok
    finally:
        plfs.clear()
        node.stop()
    node = start(tmp_path, data)  # by itself: no hand needed
    try:
        for worker in (0, 1):
            conn, ch = on_worker(node, worker)
            # every confirmed message (and each one routed from worker 0 on the turn before)
            for q, n in ((on1, 7 + worker), (on0, 7 + worker), (owner_made, 3 + worker), (recorded, 0),
                         (seq_made, 0), (gone, 0)):  # gone: declared again after its delete, empty
                assert count(ch, q) == n, (worker, q)
            ch.confirm_delivery()
            for q in (on1, on0):  # the exchange and its bindings, from this worker
                ch.basic_publish("sc-x", q, b"routed", pika.BasicProperties(delivery_mode=2), mandatory=True)
                assert count(ch, q) == 8 + worker, (worker, q)
            ch.basic_publish("sc-y", "", b"fanned", pika.BasicProperties(delivery_mode=2), mandatory=True)
            assert count(ch, owner_made) == 4 + worker, worker
            conn.close()
    finally:
        node.stop()
