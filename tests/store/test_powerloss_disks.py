"""Failing disks, injected through the power-loss layer (powerloss_fs.py) under a real broker.

* EIO on a queue's fsync or write, ENOSPC (the disk-free limit off), EIO on a stream's fsync:
  Warren confirms nothing it failed to make durable; it stops (exit status 1) with one CRITICAL
  line saying which store failed and why, rather than carry on as if the data were safe; after
  the power cut that follows, it starts again on its own and every confirmed message is there.
* EIO on the definitions log's fsync (the group commit's, off the loop): never retried; the log
  is rewritten from memory into a new file, and once that is durable the declare is answered and
  the broker carries on; if the rewrite fails too, the declare is never answered and the broker
  stops as for a message store. Either way what was acknowledged comes back after a power cut.
* The fsync worker after a failed fsync: the layer behaves as Linux does (the retry "succeeds"
  with the data gone), and the worker must not take the retry for success (fsyncgate).
* An fsync that stalls for seconds holds back confirms only: heartbeats, a transient queue and
  another vhost keep flowing meanwhile; a durable declare during the stall waits for its own
  fsync without holding anyone else, and is there after kill -9 and a power cut; so does a
  declare or a bind through the HTTP API (201 only once it is durable).
"""

from __future__ import annotations

import os
import select
import threading
import time

import pika
import pytest
from pika.exceptions import AMQPError

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.store.powerloss_fs import PowerLossFS, unavailable_reason
from warren.store import fsync_worker
from warren.store.fsync_worker import FsyncWorkerPy

SKIP = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(SKIP is not None, reason=f"no FUSE here: {SKIP}"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker on the power-loss layer"),
]

TWINS = [pytest.param(FsyncWorkerPy, id="python")]
if fsync_worker.FsyncWorker is not FsyncWorkerPy:
    TWINS.insert(0, pytest.param(fsync_worker.FsyncWorker, id="compiled"))


@pytest.fixture(scope="module")
def plfs(tmp_path_factory):
    yield from PowerLossFS.mounted(tmp_path_factory.mktemp("powerloss-disks"))


@pytest.fixture
def data_dir(plfs):
    plfs.reset()
    yield plfs.mountpoint / "data"
    plfs.clear()


@pytest.fixture
def brokers(tmp_path):
    started = []

    def start(data_dir, *extra):
        b = launch_broker(tmp_path, "--disk-free-limit", "0", *extra, data_dir=data_dir)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


def connect(broker, vhost: str = "/", heartbeat: int = 0) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", broker.port, virtual_host=vhost, heartbeat=heartbeat, socket_timeout=10))


def publish_until_refused(ch, queue: str, start: int, limit: int = 20000, body_size: int = 100) -> list[bytes]:
    """Confirmed publishes until the broker refuses or goes; returns the confirmed bodies."""
    confirmed = []
    with pytest.raises(AMQPError):
        for i in range(start, start + limit):
            body = b"%08d" % i + b"." * body_size
            ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
            confirmed.append(body)
    return confirmed


def bodies_in(broker, queue: str, arguments=None) -> list[bytes]:
    conn = connect(broker)
    try:
        ch = conn.channel()
        count = ch.queue_declare(queue, durable=True, arguments=arguments, passive=arguments is None).method.message_count
        got: list[bytes] = []
        if arguments:  # a stream: read from its start; acks only give credit back, nothing goes
            ch.basic_qos(prefetch_count=1000)
            ch.basic_consume(queue, lambda c, m, p, b: (got.append(b), c.basic_ack(m.delivery_tag)),
                             arguments={"x-stream-offset": "first"})
        else:  # unacked, so nothing goes; no prefetch limit, so every message comes
            ch.basic_consume(queue, lambda c, m, p, b: got.append(b))
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            conn.process_data_events(0.05)
        return got
    finally:
        conn.close()


def stops_saying_so(broker, what: str) -> None:
    """The broker exits by itself, status 1, with one CRITICAL line naming ``what``."""
    assert broker.wait(30) == 1
    critical = [line for line in broker.log().splitlines() if " CRITICAL " in line]
    assert len(critical) == 1 and what in critical[0], broker.log()[-3000:]


@pytest.mark.parametrize("fault", ["fsync-EIO", "write-EIO", "ENOSPC"])
def test_a_failing_queue_disk_stops_the_broker_and_loses_nothing_confirmed(plfs, data_dir, brokers, fault):
    broker = brokers(data_dir)
    ch = connect(broker).channel()
    ch.confirm_delivery()
    ch.queue_declare("dq", durable=True)
    before = [b"before-%d" % i for i in range(50)]
    for body in before:
        ch.basic_publish("", "dq", body, pika.BasicProperties(delivery_mode=2))
    if fault == "ENOSPC":
        plfs.capacity(plfs.stats()["used"] + 200_000)
    else:
        op, err = fault.split("-")
        plfs.fault(op, path="/data/queues/", errno_name=err, times=1)
    confirmed = publish_until_refused(ch, "dq", 0)
    stops_saying_so(broker, "message store sync failed")
    assert plfs.stats()["fault_hits"] == ([] if fault == "ENOSPC" else [1])
    plfs.clear()
    plfs.drop(tear=True, seed=len(confirmed))  # the power cut after the failure
    again = brokers(data_dir)
    present = set(bodies_in(again, "dq"))
    lost = [b for b in before + confirmed if b not in present]
    assert not lost, f"{len(lost)} of {len(before) + len(confirmed)} confirmed messages lost after {fault}: {again.log()[-3000:]}"


def test_a_failing_stream_fsync_stops_the_broker_and_loses_nothing_confirmed(plfs, data_dir, brokers):
    stream = {"x-queue-type": "stream"}
    broker = brokers(data_dir)
    ch = connect(broker).channel()
    ch.confirm_delivery()
    ch.queue_declare("st", durable=True, arguments=stream)
    for i in range(20):
        ch.basic_publish("", "st", b"before-%d" % i, pika.BasicProperties(delivery_mode=2))
    plfs.fault("fsync", path="/data/streams/", errno_name="EIO", times=1)
    confirmed = publish_until_refused(ch, "st", 0)
    stops_saying_so(broker, "message store sync failed")
    plfs.clear()
    plfs.drop()
    again = brokers(data_dir)
    present = set(bodies_in(again, "st", stream))
    assert {b"before-%d" % i for i in range(20)} | set(confirmed) <= present


def _started_with_a_kept_message(brokers, data_dir):
    """A broker on the layer, a confirming channel, and one persistent message confirmed into the
    durable queue "kept" before any fault."""
    broker = brokers(data_dir)
    conn = connect(broker)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("kept", durable=True)
    ch.basic_publish("", "kept", b"before", pika.BasicProperties(delivery_mode=2))
    return broker, conn, ch


def test_a_failed_definitions_fsync_is_not_retried_but_the_log_rewritten_and_nothing_is_lost(plfs, data_dir, brokers):
    """The definitions log's fsync fails once (EIO; the layer then drops what it covered, as
    Linux may): the store does not retry it but writes every live definition to a new file,
    fsyncs it and renames it over the log. The declare is answered once that is durable, the
    broker carries on (a message confirmed into the new queue), and after a power cut the queue
    and the message are there."""
    broker, conn, ch = _started_with_a_kept_message(brokers, data_dir)
    plfs.fault("fsync", path="/data/definitions", errno_name="EIO", times=1)
    ch.queue_declare("declared-at-the-failure", durable=True)
    ch.basic_publish("", "declared-at-the-failure", b"after", pika.BasicProperties(delivery_mode=2))
    assert plfs.stats()["fault_hits"] == [1]
    assert broker.proc.poll() is None and "rewritten after a failed fsync; nothing was lost" in broker.log()
    assert " CRITICAL " not in broker.log()
    conn.close()
    plfs.clear()
    plfs.crash(broker.proc)  # kill -9, then the power cut
    broker.wait()
    again = brokers(data_dir)
    assert bodies_in(again, "kept") == [b"before"]
    assert bodies_in(again, "declared-at-the-failure") == [b"after"]


def test_a_definitions_disk_that_keeps_failing_stops_the_broker_and_loses_nothing_acknowledged(plfs, data_dir,
                                                                                              brokers):
    """Every fsync of the log fails, the rewrite's too: the store fails for good, its group
    commit with it, and the broker stops as for a message store, since a message confirmed into
    a queue whose declare the failed fsync lost would be a lie. The declare is never answered."""
    broker, conn, ch = _started_with_a_kept_message(brokers, data_dir)
    plfs.fault("fsync", path="/data/definitions", errno_name="EIO")
    with pytest.raises(AMQPError):
        ch.queue_declare("refused", durable=True)
    stops_saying_so(broker, "definitions log")
    assert len(plfs.stats()["fault_hits"]) == 1 and plfs.stats()["fault_hits"][0] >= 2  # the log, then the rewrite
    plfs.clear()
    plfs.drop()
    again = brokers(data_dir)
    assert bodies_in(again, "kept") == [b"before"]
    ch = connect(again).channel()
    with pytest.raises(AMQPError):  # its declare failed: after the power cut it is not there
        ch.queue_declare("refused", passive=True)


def test_durable_declares_during_an_fsync_stall_hold_back_only_their_own_answers(plfs, data_dir, brokers):
    """Every fsync on the data folder's disk stalls while two clients declare a durable queue
    each, the second once the first's fsync is stuck: each declare-ok waits for the definitions
    log's fsync (and nothing else on its connection overtakes it), while a third client's round
    trips on a transient queue, a transient queue in another vhost, the HTTP API and heartbeats
    are answered within a bound. The second declare's record must not be written on the loop:
    the layer, like the kernel's FUSE, holds the log's inode lock through the stalled fsync, and
    a write there held the loop (every client) until the stall ended. Once the stall ends both
    declares are answered, and both queues survive kill -9 and the power cut after it."""
    from tests.management.api_client import call

    bound = 5.0  # seconds a round trip may take during the stall (the loop is free; it was held to its end)
    broker = brokers(data_dir, "--vhost", "/", "--vhost", "other", "--heartbeat", "1")
    declarers = [connect(broker, heartbeat=1) for _ in range(2)]  # their heartbeats must get through meanwhile
    channels = [c.channel() for c in declarers]
    channels[0].queue_declare("declared-before", durable=True)
    beat, tch, other, och = _traffic_elsewhere(broker)
    before = plfs.stats()
    _stall_the_disk(plfs, 60.0)  # ended by the test (end_stalls) once it saw what it looks for
    names = ["declared-during-1", "declared-during-2"]
    declared = [threading.Event(), threading.Event()]
    errors: list[BaseException] = []

    def declare(i: int) -> None:
        try:
            channels[i].queue_declare(names[i], durable=True)
            declared[i].set()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=declare, args=(i,)) for i in range(2)]
    try:
        threads[0].start()
        _until_stalled(plfs, before, f"the first declare's: {errors}")  # its fsync is at the disk, stuck there
        threads[1].start()
        # the second declare is applied (its queue listed) while the first's fsync still stalls
        deadline = time.monotonic() + 20
        while True:
            t0 = time.monotonic()
            try:
                status = call(broker.http_url, "GET", "/api/queues/%2F/declared-during-2", timeout=bound)[0]
            except OSError as e:  # urllib's time-out
                pytest.fail(f"the HTTP API did not answer within {bound} s during the stall ({e!r}): the "
                            "second declare's write held the loop")
            assert time.monotonic() - t0 < bound
            if status == 200:
                break
            assert time.monotonic() < deadline and not errors, f"the second declare never came: {errors}"
            time.sleep(0.02)
        for i in range(3):  # while it stalls: round trips on a transient queue here and in another vhost
            for ch, queue in ((tch, "transient"), (och, "transient-other")):
                t0 = time.monotonic()
                ch.basic_publish("", queue, b"t%d" % i)
                got = None
                while got is None and time.monotonic() - t0 < bound:
                    got = ch.basic_get(queue, auto_ack=True)[2]
                took = time.monotonic() - t0
                assert got == b"t%d" % i and took < bound, f"a transient round trip took {took:.1f} s: {got!r}"
            beat.process_data_events(0)
        _while_stalled(plfs, before, "the round trips came")
        assert not any(e.is_set() for e in declared), "a declare was answered before its fsync ended"
        assert beat.is_open
    finally:
        plfs.clear()
        plfs.end_stalls()  # the stall under way ends; the next fsyncs go at the disk's pace
        for t in threads:
            t.join(60)
    assert all(e.is_set() for e in declared), f"a declare was never answered: {errors}"
    assert all(c.is_open for c in declarers) and beat.is_open  # heartbeats went both ways on every connection
    for name in names:
        channels[0].queue_declare(name, passive=True)
    plfs.crash(broker.proc)  # kill -9, then the power cut
    broker.wait()
    again = brokers(data_dir)
    ch = connect(again).channel()
    for name in ("declared-before", *names):
        ch.queue_declare(name, passive=True)


POLICY = {"pattern": "^http-", "definition": {"max-length": 100}, "apply-to": "queues"}
# what each HTTP API test changes during the stall (the first one is held by it), what must be there
# after the power cut, and which calls stall: the access model's whole-file change stalls at the
# folder's fsync, after its rename, when the loop's look for other processes' changes (every HTTP
# request's, every tick's) sees the file changed and used to wait for its lock
HTTP_CHANGES = {
    "definitions": (("fsync", "fsyncdir"), [("PUT", "/api/queues/%2F/http-q", {"durable": True}),
                     ("PUT", "/api/exchanges/%2F/http-x", {"type": "direct", "durable": True}),
                     ("POST", "/api/bindings/%2F/e/http-x/q/http-q", {"routing_key": "k"})],
                    [("/api/queues/%2F/http-q", lambda b: b["durable"] is True),
                     ("/api/exchanges/%2F/http-x", lambda b: b["type"] == "direct"),
                     ("/api/bindings/%2F/e/http-x/q/http-q", lambda b: [x["routing_key"] for x in b] == ["k"])]),
    "access": (("fsyncdir",), [("PUT", "/api/users/http-u", {"password": "pw", "tags": ""}),
                ("PUT", "/api/permissions/%2F/http-u", {"configure": ".*", "write": ".*", "read": "^x"}),
                ("PUT", "/api/policies/%2F/http-p", POLICY)],
               [("/api/users/http-u", lambda b: b["name"] == "http-u"),
                ("/api/permissions/%2F/http-u", lambda b: b["read"] == "^x"),
                ("/api/policies/%2F/http-p", lambda b: b["definition"] == POLICY["definition"])]),
}


@pytest.mark.parametrize("kind", sorted(HTTP_CHANGES))
def test_an_http_api_change_during_an_fsync_stall_holds_back_only_its_own_answer(plfs, data_dir, brokers, kind):
    """The HTTP API's durable declares and binds go through the same group commit as a client's,
    and its changes of users, permissions and policies are written on a thread of their own:
    while the fsync stalls, the PUT is not answered (never 201 before it is durable) and AMQP
    traffic in another vhost and on a transient queue goes on; once the stall ends the answers
    come, and what they acknowledged survives kill -9 and the power cut."""
    from tests.management.api_client import call

    ops, requests, checks = HTTP_CHANGES[kind]
    stall = 60.0  # ended by the test (end_stalls) once it saw what it looks for
    broker = brokers(data_dir, "--vhost", "/", "--vhost", "other", "--heartbeat", "1")
    api = broker.http_url
    beat = connect(broker, heartbeat=1)  # closes itself if the broker's heartbeats stop for long
    tch = beat.channel()
    tch.queue_declare("transient", durable=False)
    other = connect(broker, "other")
    och = other.channel()
    och.queue_declare("transient-other", durable=False)
    before = plfs.stats()
    for op in ops:
        plfs.fault(op, path="/data", stall=stall)
    answers: list = []

    def changes():
        try:
            for method, path, body in requests:
                answers.append(call(api, method, path, body, timeout=60)[0])
        except BaseException as e:  # reported by the main thread
            answers.append(e)

    t = threading.Thread(target=changes)
    t.start()
    try:
        _until_stalled(plfs, before, f"{answers}")  # the PUT's fsync is at the disk, and stuck there
        for i in range(3):  # while it stalls: round trips here and in another vhost
            for ch, queue in ((tch, "transient"), (och, "transient-other")):
                ch.basic_publish("", queue, b"t%d" % i)
                got = None
                while got is None and not answers:
                    got = ch.basic_get(queue, auto_ack=True)[2]
                assert got == b"t%d" % i or answers
            beat.process_data_events(0)
        assert call(api, "GET", "/api/vhosts", timeout=30)[0] == 200  # the HTTP API answers meanwhile
        _while_stalled(plfs, before, "the round trips came")
        assert not answers, "the PUT was answered before its fsync ended"
        plfs.clear()
        plfs.end_stalls()  # the stall under way ends; the next changes go at the disk's pace
        t.join(60)
        assert answers == [201, 201, 201], answers
        assert beat.is_open
    finally:
        plfs.clear()
        t.join(30)
    plfs.crash(broker.proc)  # kill -9, then the power cut
    broker.wait()
    again = brokers(data_dir)
    for path, check in checks:
        status, body, _ = call(again.http_url, "GET", path)
        assert status == 200 and check(body), (path, status, body)


def _stall_the_disk(plfs, stall: float) -> None:
    for op in ("fsync", "fsyncdir"):  # the whole disk: the log's fsync, and a new folder's
        plfs.fault(op, path="/data", stall=stall)


def _until_stalled(plfs, before: dict, what: str) -> None:
    """Until an fsync is stuck in a stall (the layer's counts go on over a module's tests)."""
    deadline = time.monotonic() + 30
    while plfs.stats()["stalls"] == before["stalls"]:
        assert time.monotonic() < deadline, f"no fsync stalled: {what}"
        time.sleep(0.02)


def _while_stalled(plfs, before: dict, what: str) -> None:
    assert plfs.stats()["stalls_ended"] == before["stalls_ended"], f"{what} only after the stalled fsync ended"


def test_a_0_10_connection_gets_heartbeats_while_its_declare_waits_for_a_stalled_fsync(plfs, data_dir, brokers):
    """0-10: while a durable queue.declare's completion waits for the definitions fsync, the
    broker's connection.heartbeat controls keep coming on that connection (nothing else does),
    then the completion."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.codec.amqp0_10.frames import SEGMENT_CONTROL, assembly_frames
    from warren.codec.amqp0_10.types import encode_control
    from warren.spec import amqp0_10 as spec010

    broker = brokers(data_dir, "--heartbeat", "1")
    with Client010(broker, heartbeat=1) as c:
        s = c.session(1)
        s.send(spec010.QueueDeclare(queue="before-0-10", durable=True))
        heartbeat = b"".join(bytes(f) for f in assembly_frames(
            0, [(SEGMENT_CONTROL, encode_control(spec010.ConnectionHeartbeat()))], c.conn.frame_max))
        before = plfs.stats()
        _stall_the_disk(plfs, 60.0)  # ended by the test (end_stalls) once two heartbeats came
        cid = c.conn.send_command(1, spec010.QueueDeclare(queue="during-0-10", durable=True), True)
        c.flush()
        _until_stalled(plfs, before, "the declare's")  # its fsync is at the disk, and stuck there
        received = b""
        c.sock.settimeout(0.1)
        while len(received) < 2 * len(heartbeat):  # two of the broker's heartbeats
            _while_stalled(plfs, before, "the broker's heartbeats came")
            try:
                data = c.sock.recv(1 << 16)
            except OSError:  # the timeout: look at the layer again
                continue
            assert data, "the broker closed the connection while the declare waited"
            received += data
        _while_stalled(plfs, before, "the broker's heartbeats came")
        assert received == heartbeat * (len(received) // len(heartbeat)), f"not only heartbeats: {received!r}"
        c.conn.receive_data(received)
        plfs.clear()
        plfs.end_stalls()
        s._wait_for(lambda: cid in s.completed, 30)  # the declare's completion, once the stall ended
        assert s.send(spec010.QueueQuery(queue="during-0-10")).durable


def test_an_amqp_1_0_connection_gets_empty_frames_while_its_declare_waits_for_a_stalled_fsync(plfs, data_dir,
                                                                                               brokers):
    """AMQP 1.0 (Qpid Proton, heartbeat 2 s: it closes the connection when nothing came for 2 s,
    and asks the broker for a frame every second): a durable queue declared through the
    management node waits for the definitions fsync (8 s); the broker's empty frames keep the
    connection open meanwhile, and the answer comes once the stall ended."""
    proton = pytest.importorskip("proton")
    from proton.utils import BlockingConnection
    from tests.e2e.amqp1_0.test_management import _Paired

    broker = brokers(data_dir)
    c = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{broker.port}", timeout=60, heartbeat=2)
    try:
        sender = c.create_sender("/management", options=_Paired())
        receiver = c.create_receiver("/management", options=_Paired())
        before = plfs.stats()
        _stall_the_disk(plfs, 8.0)
        sender.send(proton.Message(id="r1", reply_to="$me", address="/queues/during-1-0", subject="PUT",
                                   body={"durable": True}))
        answer = receiver.receive(timeout=60)  # raises if Proton closed the connection on its idle time-out
        assert plfs.stats()["stalls_ended"] > before["stalls_ended"], "answered before the fsync ended"
        assert int(answer.subject) == 201 and answer.correlation_id == "r1"
    finally:
        plfs.clear()
        c.close()


@pytest.mark.parametrize("twin", TWINS)
def test_the_fsync_worker_does_not_take_a_retried_fsync_for_success(plfs, data_dir, twin):
    """fsyncgate: the layer, like Linux, lets the second fsync succeed with the data gone."""
    data_dir.mkdir()
    path = data_dir / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    worker = twin()
    try:
        plfs.fault("fsync", path="/data/f", errno_name="EIO", times=1)
        os.write(fd, b"lost at the power cut")
        worker.submit(1, [os.dup(fd)], [], [])
        worker.submit(2, [os.dup(fd)], [], [])  # the retry
        done = []
        while len(done) < 2:
            assert select.select([worker.fileno()], [], [], 10)[0], "the worker did not report"
            done += worker.completed()
        assert done == [(1, 5), (2, 5)]  # EIO, and EIO again: nothing is safe after a failed fsync
        os.fsync(fd)  # the layer's own answer to a retry: success, with nothing written
    finally:
        worker.close()
        os.close(fd)


def _traffic_elsewhere(broker):
    """(a connection with 1 s heartbeats, its channel with the transient queue "transient", a
    connection to vhost "other", its channel with "transient-other"): what must go on during a
    stall. The first closes itself if the broker's heartbeats stop for long."""
    beat = connect(broker, heartbeat=1)
    tch = beat.channel()
    tch.queue_declare("transient", durable=False)
    other = connect(broker, "other")
    och = other.channel()
    och.queue_declare("transient-other", durable=False)
    return beat, tch, other, och


def _round_trip(ch, queue: str, body: bytes, timeout: float) -> None:
    """A transient message published and got back within ``timeout`` seconds."""
    ch.basic_publish("", queue, body)
    got = None
    deadline = time.monotonic() + timeout
    while got is None and time.monotonic() < deadline:
        got = ch.basic_get(queue, auto_ack=True)[2]
    assert got == body, "transient traffic stopped during the fsync stall"


def test_an_fsync_stall_holds_back_confirms_only(plfs, data_dir, brokers):
    stall = 4.0
    broker = brokers(data_dir, "--vhost", "/", "--vhost", "other", "--heartbeat", "1")
    publisher = connect(broker)
    pch = publisher.channel()
    pch.confirm_delivery()
    pch.queue_declare("slow", durable=True)
    pch.basic_publish("", "slow", b"warm-up", pika.BasicProperties(delivery_mode=2))
    beat = connect(broker, heartbeat=1)  # closes itself if the broker's heartbeats stop for long
    other = connect(broker, "other")
    och = other.channel()
    och.queue_declare("transient-other", durable=False)
    tch = beat.channel()
    tch.queue_declare("transient", durable=False)
    plfs.fault("fsync", path="/data/queues/", stall=stall, times=1)
    confirmed_at: list[float] = []

    def publish_persistent():
        pch.basic_publish("", "slow", b"held", pika.BasicProperties(delivery_mode=2))
        confirmed_at.append(time.monotonic())

    started = time.monotonic()
    t = threading.Thread(target=publish_persistent)
    t.start()
    try:
        # while the fsync stalls: round trips on a transient queue here and in another vhost
        round_trips = 0
        while not confirmed_at and time.monotonic() - started < stall - 1.0:
            for ch, queue in ((tch, "transient"), (och, "transient-other")):
                _round_trip(ch, queue, b"t%d" % round_trips, 1.0)
            round_trips += 1
            beat.process_data_events(0.05)
        assert round_trips >= 5
        assert not confirmed_at, "a persistent message was confirmed before its fsync ended"
        t.join(stall + 20)
        assert confirmed_at and confirmed_at[0] - started >= stall - 0.5
        assert plfs.stats()["stalls"] >= 1
        beat.process_data_events(0)
        assert beat.is_open, "the heartbeat connection closed during the stall"
    finally:
        t.join(30)
        for c in (beat, other, publisher):
            if c.is_open:
                c.close()


def test_a_failed_fsync_of_users_or_policies_is_refused_and_the_next_change_is_whole(plfs, data_dir, brokers):
    """Users and policies are whole files replaced durably (write, fsync, rename, fsync the
    folder): a failed fsync answers 500 and changes nothing, and the next change writes a new
    file, so no retry stands on the pages the failure lost."""
    from tests.management.api_client import call

    broker = brokers(data_dir)
    api = broker.http_url
    user = {"password": "pw", "tags": ""}
    policy = {"pattern": "^matches-nothing-", "definition": {"max-length": 1}, "apply-to": "queues"}
    assert call(api, "PUT", "/api/users/u1", user)[0] == 201
    assert call(api, "PUT", "/api/policies/%2F/p1", policy)[0] == 201
    for path, body in (("/api/users/u2", user), ("/api/policies/%2F/p2", policy)):
        plfs.fault("fsync", path="/data/", errno_name="EIO", times=1)
        assert call(api, "PUT", path, body)[0] == 500
    assert call(api, "PUT", "/api/users/u3", user)[0] == 201
    assert call(api, "PUT", "/api/policies/%2F/p3", policy)[0] == 201
    broker.proc.kill()
    broker.wait()
    plfs.clear()
    plfs.drop()
    again = brokers(data_dir)
    assert sorted(u["name"] for u in call(again.http_url, "GET", "/api/users")[1]) == ["guest", "u1", "u3"]
    assert sorted(p["name"] for p in call(again.http_url, "GET", "/api/policies")[1]) == ["p1", "p3"]


def _held_during_a_stall(plfs, change, flowing, path: str, ops=("fsync",)):
    """``change()`` (on a thread) while every ``ops`` call on paths holding ``path`` stalls: it
    is not answered while ``flowing()`` (round trips elsewhere) completes, and is once the stall
    ended. Returns its answer."""
    before = plfs.stats()
    for op in ops:
        plfs.fault(op, path=path, stall=60.0)  # ended by the test (end_stalls)
    answers: list = []

    def run():
        try:
            answers.append(change())
        except BaseException as e:  # reported by the main thread
            answers.append(e)

    t = threading.Thread(target=run)
    t.start()
    try:
        _until_stalled(plfs, before, f"{answers}")  # its fsync is at the disk, and stuck there
        flowing(lambda: bool(answers))
        _while_stalled(plfs, before, "the round trips came")
        assert not answers, f"answered before its fsync ended: {answers}"
    finally:
        plfs.clear()
        plfs.end_stalls()
        t.join(60)
    assert answers and not isinstance(answers[0], BaseException), answers
    return answers[0]


def test_deletes_and_parameter_changes_during_an_fsync_stall_hold_back_only_their_own_answer(plfs, data_dir,
                                                                                             brokers):
    """A queue.delete and an exchange.delete from pika, a vhost's DELETE and a runtime
    parameter's PUT through the HTTP API, each while the fsyncs it needs stall: it is not
    answered until the stall ends, while another connection's transient queue, a transient
    queue in another vhost, heartbeats and the HTTP API go on. After kill -9 and the power cut,
    what was answered is so: the queue, the exchange and the vhost gone (no store folder left),
    the parameter there, and an untouched queue with its messages."""
    from tests.management.api_client import call

    broker = brokers(data_dir, "--vhost", "/", "--vhost", "other", "--vhost", "gone", "--heartbeat", "1")
    api = broker.http_url
    deleter = connect(broker, heartbeat=1)  # its own heartbeats must get through while it waits
    dch = deleter.channel()
    dch.confirm_delivery()
    for q in ("doomed", "kept"):
        dch.queue_declare(q, durable=True)
        for i in range(3):
            dch.basic_publish("", q, b"%s-%d" % (q.encode(), i), pika.BasicProperties(delivery_mode=2))
    dch.exchange_declare("doomed-x", "direct", durable=True)
    gone = connect(broker, "gone").channel()
    gone.queue_declare("in-gone", durable=True)
    gone.basic_publish("", "in-gone", b"g", pika.BasicProperties(delivery_mode=2))
    gone.connection.close()
    beat = connect(broker, heartbeat=1)  # closes itself if the broker's heartbeats stop for long
    tch = beat.channel()
    tch.queue_declare("transient", durable=False)
    och = connect(broker, "other").channel()
    och.queue_declare("transient-other", durable=False)
    turns = [0]

    def flowing(answered):
        for ch, queue in ((tch, "transient"), (och, "transient-other")):
            body = b"t%d" % turns[0]
            turns[0] += 1
            ch.basic_publish("", queue, body)
            got = None
            while got is None and not answered():
                got = ch.basic_get(queue, auto_ack=True)[2]
            assert got == body or answered()
        beat.process_data_events(0)
        assert call(api, "GET", "/api/vhosts", timeout=30)[0] == 200

    upstream = {"value": {"uri": "amqp://127.0.0.1:1"}}
    _held_during_a_stall(plfs, lambda: dch.queue_delete("doomed"), flowing, "definitions.log")
    _held_during_a_stall(plfs, lambda: dch.exchange_delete("doomed-x"), flowing, "definitions.log")
    assert _held_during_a_stall(plfs, lambda: call(api, "DELETE", "/api/vhosts/gone", timeout=60)[0], flowing,
                                "definitions.log") == 204
    assert _held_during_a_stall(plfs, lambda: call(api, "PUT", "/api/parameters/federation-upstream/%2F/up",
                                                   upstream, timeout=60)[0],
                                flowing, "/data", ops=("fsync", "fsyncdir")) == 201
    assert deleter.is_open and beat.is_open  # heartbeats went both ways meanwhile
    plfs.crash(broker.proc)  # kill -9, then the power cut
    broker.wait()
    again = brokers(data_dir)
    ch = connect(again).channel()
    for name in ("doomed",):
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare(name, passive=True)
        ch = ch.connection.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker):
        ch.exchange_declare("doomed-x", passive=True)
    assert call(again.http_url, "GET", "/api/vhosts/gone")[0] == 404
    status, body, _ = call(again.http_url, "GET", "/api/parameters/federation-upstream/%2F/up")
    assert status == 200 and body["value"] == upstream["value"]
    assert sorted(bodies_in(again, "kept")) == [b"kept-0", b"kept-1", b"kept-2"]
    folders = os.listdir(data_dir / "queues")
    assert len(folders) == 1 and not folders[0].startswith("deleted-"), folders  # "kept"'s alone


def test_a_power_cut_during_a_delete_keeps_the_queue_with_every_confirmed_message(plfs, data_dir, brokers):
    """The delete's fsync stalls, and the power goes: the delete was never answered, so the queue
    is there after the restart with every message confirmed before it, though its folder's rename
    aside reached the disk (the queues folder fsynced meanwhile, as a file system may do at any
    moment), and the start needs no hand. (Without that fsync the rename is lost with the
    delete, and the start finds the folder where it was: the crash schedules cut there too.)"""
    aside_durable = True
    broker = brokers(data_dir)
    conn = connect(broker)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("cut", durable=True)
    sent = [b"cut-%d" % i for i in range(50)]
    for body in sent:
        ch.basic_publish("", "cut", body, pika.BasicProperties(delivery_mode=2))
    before = plfs.stats()
    plfs.fault("fsync", path="definitions.log", stall=60.0)
    answered = []
    t = threading.Thread(target=lambda: _try(lambda: answered.append(ch.queue_delete("cut"))))
    t.start()
    try:
        _until_stalled(plfs, before, "the delete's")
        folders = os.listdir(data_dir / "queues")
        assert len(folders) == 1 and folders[0].startswith("deleted-"), folders  # put aside at once
        if aside_durable:
            fd = os.open(data_dir / "queues", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        plfs.crash(broker.proc)  # kill -9 inside the stalled fsync, then the power cut
        broker.wait()
    finally:
        plfs.clear()
        t.join(30)
    assert not answered
    assert os.listdir(data_dir / "queues")[0].startswith("deleted-") == aside_durable
    again = brokers(data_dir)
    assert sorted(bodies_in(again, "cut")) == sorted(sent)
    assert [f for f in os.listdir(data_dir / "queues") if f.startswith("deleted-")] == []
    assert "restoring" in again.log() if aside_durable else True


def _try(fn) -> None:
    try:
        fn()
    except Exception:  # the broker died under the call: expected here
        pass


def test_a_shovels_own_delete_after_waits_for_a_stalled_fsync_off_the_loop(plfs, data_dir, brokers):
    """A shovel that reaches its ``src-delete-after`` deletes its own runtime parameter, as
    RabbitMQ's does; that delete's fsync stalls at the disk: the broker's loop goes on (another
    connection's transient queue, heartbeats, the HTTP API), the parameter stays listed until
    the delete is durable (the writer thread the HTTP API's changes use), and then it is gone,
    and stays gone after kill -9 and the power cut."""
    from tests.management.api_client import call

    broker = brokers(data_dir, "--heartbeat", "1")
    api = broker.http_url
    ch = connect(broker).channel()
    ch.confirm_delivery()
    ch.queue_declare("shovel-src", durable=True)
    ch.queue_declare("shovel-dst", durable=True)
    status = call(api, "PUT", "/api/parameters/shovel/%2F/once", {"value": {
        "src-uri": "amqp://", "src-queue": "shovel-src", "dest-uri": "amqp://", "dest-queue": "shovel-dst",
        "src-delete-after": 5}}, timeout=30)[0]
    assert status == 201
    deadline = time.monotonic() + 30
    while not any(s.get("name") == "once" and s.get("state") == "running"
                  for s in call(api, "GET", "/api/shovels/%2F", timeout=30)[1] or []):
        assert time.monotonic() < deadline, "the shovel never ran"
        time.sleep(0.05)
    beat = connect(broker, heartbeat=1)  # closes itself if the broker's heartbeats stop for long
    tch = beat.channel()
    tch.queue_declare("transient", durable=False)
    before = plfs.stats()
    plfs.fault("fsync", path="parameters.json", stall=60.0)  # the parameter's delete (ended below)
    try:
        for i in range(5):
            ch.basic_publish("", "shovel-src", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
        _until_stalled(plfs, before, "the shovel's own delete")
        for turn in range(20):  # round trips through the loop while the delete's fsync is stuck
            tch.basic_publish("", "transient", b"t%d" % turn)
            got = None
            while got is None:
                got = tch.basic_get("transient", auto_ack=True)[2]
            assert got == b"t%d" % turn
            beat.process_data_events(0)
            assert call(api, "GET", "/api/vhosts", timeout=10)[0] == 200
        status, body, _ = call(api, "GET", "/api/parameters/shovel/%2F/once", timeout=10)
        assert status == 200, "the parameter went before its delete was durable"
        _while_stalled(plfs, before, "the round trips came")
    finally:
        plfs.clear()
        plfs.end_stalls()
    deadline = time.monotonic() + 30
    while call(api, "GET", "/api/parameters/shovel/%2F/once", timeout=10)[0] != 404:
        assert time.monotonic() < deadline, "the shovel's parameter was never deleted"
        time.sleep(0.05)
    assert beat.is_open  # heartbeats went both ways meanwhile
    assert "src-delete-after reached" in broker.log() or "deleting it" in broker.log()
    plfs.crash(broker.proc)  # kill -9, then the power cut
    broker.wait()
    again = brokers(data_dir)
    assert call(again.http_url, "GET", "/api/parameters/shovel/%2F/once")[0] == 404
    assert sorted(bodies_in(again, "shovel-dst")) == [b"m%d" % i for i in range(5)]


@pytest.mark.parametrize("kind", ["queue", "stream"])
def test_publishing_megabytes_into_a_queue_whose_fsync_stalls_holds_up_nothing_else(plfs, data_dir, brokers, kind):
    """More persistent octets than a store buffers between writes (4 MiB) go into a queue (or a
    stream) while its fsync stalls. The event loop writes no store file then (a write waits for
    the file's inode lock behind the stalled fsync here, and for dirty-page throttling on a
    stalled disk): a queue store's go to the disk writer's thread, a stream store's wait for the
    group commit's pool thread; so transient traffic, other vhosts and heartbeats go on."""
    broker = brokers(data_dir, "--vhost", "/", "--vhost", "other", "--heartbeat", "1")
    publisher = connect(broker)
    pch = publisher.channel()
    arguments = {"x-queue-type": "stream"} if kind == "stream" else None
    pch.queue_declare("big", durable=True, arguments=arguments)
    pch.basic_publish("", "big", b"warm-up", pika.BasicProperties(delivery_mode=2))
    beat, tch, other, och = _traffic_elsewhere(broker)
    before = plfs.stats()
    plfs.fault("fsync", path=f"/data/{kind}s/", stall=60.0)  # ended below (end_stalls)
    body = b"x" * (256 * 1024)
    try:
        pch.basic_publish("", "big", b"first", pika.BasicProperties(delivery_mode=2))
        _until_stalled(plfs, before, "a persistent publish")
        for _ in range(24):  # 6 MiB: past the 4 MiB a store once wrote on the loop
            pch.basic_publish("", "big", body, pika.BasicProperties(delivery_mode=2))
        publisher.process_data_events(0)
        for n in range(10):
            for ch, queue in ((tch, "transient"), (och, "transient-other")):
                _round_trip(ch, queue, b"t%d" % n, 3.0)
            beat.process_data_events(0.1)
        _while_stalled(plfs, before, "the round trips came")
        assert beat.is_open, "the heartbeat connection closed during the stall"
    finally:
        plfs.clear()
        plfs.end_stalls()
    ch = publisher.channel()
    deadline = time.monotonic() + 30  # the stall's commit, then the next one, take what came meanwhile
    while ch.queue_declare("big", durable=True, arguments=arguments).method.message_count < 26:
        assert time.monotonic() < deadline, "the messages published during the stall were never committed"
        publisher.process_data_events(0.05)
    assert len(bodies_in(broker, "big", arguments)) == 26
    for c in (beat, other, publisher):
        c.close()


def test_a_write_that_fails_on_the_disk_writers_thread_stops_the_broker_and_loses_nothing_confirmed(plfs, data_dir,
                                                                                                   brokers):
    """During a stalled fsync, a queue's flush past its threshold goes to the disk writer's
    thread (Server._hand_writes). Its write fails (EIO): the store fails, the next group commit
    with it, and the broker stops as for any failed write; what was confirmed before is there
    after a power cut."""
    broker, conn, ch = _started_with_a_kept_message(brokers, data_dir)
    before = [b"before-%d" % i for i in range(50)]
    for body in before:
        ch.basic_publish("", "kept", body, pika.BasicProperties(delivery_mode=2))
    bulk = connect(broker).channel()  # no confirms: its publishes do not wait for the stall
    stalled = plfs.stats()  # (the layer's counts go on over a module's tests)
    plfs.fault("fsync", path="/data/queues/", stall=60.0)
    try:
        bulk.basic_publish("", "kept", b"first", pika.BasicProperties(delivery_mode=2))
        _until_stalled(plfs, stalled, "a persistent publish")
        plfs.fault("write", path="/data/queues/", errno_name="EIO", times=1)
        for _ in range(24):  # 6 MiB: a flush past the 4 MiB threshold while the fsync stalls
            bulk.basic_publish("", "kept", b"x" * (256 * 1024), pika.BasicProperties(delivery_mode=2))
        deadline = time.monotonic() + 30
        while bulk.queue_declare("kept", passive=True).method.message_count < 1 + 50 + 1 + 24:
            assert time.monotonic() < deadline, "the broker did not take the publishes during the stall"
        # the loop wrote nothing: the write waits on the disk writer's thread, behind the stall
        assert plfs.stats()["failed_writes"] == stalled["failed_writes"] and broker.proc.poll() is None
        while plfs.stats()["failed_writes"] == stalled["failed_writes"]:
            assert time.monotonic() < deadline, "the handed-over write never reached the disk"
            plfs.end_stalls()
            time.sleep(0.05)
    finally:  # (a broker in a stalled fsync cannot even be killed until the layer answers it)
        plfs.clear()
        plfs.end_stalls()
    stops_saying_so(broker, "message store sync failed")
    plfs.clear()
    plfs.drop()
    again = brokers(data_dir)
    present = set(bodies_in(again, "kept"))
    assert {b"before"} | set(before) <= present
