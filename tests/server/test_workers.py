"""`warren serve --workers N` (warren/server/workers.py, handoff.py): vhosts owned by worker
processes, connections handed over after connection.open, through real clients."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pika
import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e import rawamqp as raw
from tests.e2e.amqp0_10.client010 import Client010
from tests.e2e.amqp1_0.raw10 import AMQP_HEADER, SASL_HEADER, Raw10
from tests.e2e.helpers import wait_until
from warren.codec.amqp1_0.types import Symbol
from warren.protocol.amqp0_10 import events as ev10
from warren.spec import amqp1_0 as spec10
from warren.server.workers import owner_of

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

# "/" and "a" belong to different workers of two (owner_of: warren/broker/ownership.py)
VHOSTS = ("/", "a")


def test_the_two_vhosts_belong_to_different_workers():
    assert {owner_of(v, 2) for v in VHOSTS} == {0, 1}


@pytest.fixture
def two_workers(tmp_path):
    b = launch_broker(tmp_path, "--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)))
    yield b
    b.stop()


def ready(b) -> dict:
    return json.loads(next(Path(b.args[b.args.index("--ready-file") + 1]).parent.glob("ready-*.json")).read_text())


def connect(b, vhost: str, password: str = "guest") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        b.host, b.port, vhost, pika.PlainCredentials("guest", password), connection_attempts=1,
        socket_timeout=5, blocked_connection_timeout=10))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def publish_confirmed(b, vhost: str, queue: str, n: int) -> None:
    with connect(b, vhost) as c:
        ch = c.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue, durable=True)
        for i in range(n):
            ch.basic_publish("", queue, b"%s:%d" % (vhost.encode(), i), pika.BasicProperties(delivery_mode=2))


def test_each_vhost_is_served_by_its_own_worker_process(two_workers):
    b = two_workers
    info = ready(b)
    workers = {tuple(w["vhosts"]): w for w in info["workers"]}
    assert set(workers) == {("/",), ("a",)}
    pids = {w["pid"] for w in info["workers"]}
    assert len(pids) == 2 and b.proc.pid not in pids
    before = {pid: cpu_seconds(pid) for pid in pids}
    threads = [threading.Thread(target=publish_confirmed, args=(b, v, "jobs", 3000)) for v in VHOSTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for v in VHOSTS:
        with connect(b, v) as c:
            ch = c.channel()
            assert ch.queue_declare("jobs", passive=True).method.message_count == 3000
            _, _, body = ch.basic_get("jobs", auto_ack=True)
            assert body == b"%s:0" % v.encode()  # each vhost has its own queue "jobs"
    # both processes did the work of their own vhost: 3000 confirmed persistent publishes each
    for pid in pids:
        assert cpu_seconds(pid) - before[pid] > 0.05
    # and each keeps its data in its own folder
    for w in info["workers"]:
        assert (b.data_dir / "workers" / str(w["index"]) / "definitions.log").exists()


def test_an_unknown_vhost_and_a_wrong_password_are_refused_by_the_supervisor(two_workers):
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError, match="530"):
        connect(two_workers, "nope")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError, match="403"):
        connect(two_workers, "a", password="wrong")
    assert "vhost nope not found" in two_workers.log()


def test_a_client_that_pipelines_after_connection_open_is_served_in_order(two_workers):
    """Everything up to connection.open and beyond in one write: the worker replays the part
    the supervisor read and reads the rest from the socket, in order, answering only once."""
    b = two_workers
    with raw.RawConnection(b.host, b.port) as rc:
        rc.send(raw.PROTOCOL_HEADER)
        raw.parse_start(rc.read_method())
        rc.send(raw.start_ok())
        tune = raw.parse_tune(rc.read_method())
        rc.send(raw.tune_ok(tune.channel_max, tune.frame_max, 0) + raw.connection_open("a") + raw.channel_open(1)
                + raw.queue_declare(1, "piped") + raw.publish_frames(1, "", "piped", b"hello")
                + raw.basic_get(1, "piped"))
        assert rc.read_method().method == (10, 41)  # connection.open-ok, once
        assert rc.read_method().method == (20, 11)  # channel.open-ok
        assert rc.read_method().method == (50, 11)  # queue.declare-ok
        get_ok = rc.read_method()
        assert get_ok.method == (60, 71)
        rc.read_frame()  # content header
        assert rc.read_frame().payload == b"hello"
        rc.close_connection()


def test_a_stop_slower_than_the_watch_ends_with_status_0(two_workers):
    """A client that never answers the broker's connection.close holds its worker's stop for the
    whole shutdown time-out (5 s), longer than the supervisor's half-second watch over its
    workers: their exits then are the stop itself, not a failure (it said "exited with 0;
    stopping" and ended with status 1, a session-13 regression the CI's alarm test found)."""
    b = two_workers
    with raw.RawConnection(b.host, b.port) as rc:
        rc.handshake(heartbeat=0)
        b.signal(signal.SIGTERM)
        assert rc.read_method().method == (10, 50)  # connection.close, left unanswered
        assert b.wait() == 0, b.log()[-2000:]
    assert "exited with" not in b.log()


def test_persistent_messages_come_back_to_their_vhost_after_a_restart(tmp_path):
    args = ("--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)))
    b = launch_broker(tmp_path, *args)
    try:
        for v in VHOSTS:
            publish_confirmed(b, v, "kept", 10)
    finally:
        b.stop()
    assert b.proc.returncode == 0
    b = launch_broker(tmp_path, *args, data_dir=b.data_dir)
    try:
        for v in VHOSTS:
            with connect(b, v) as c:
                ch = c.channel()
                assert ch.queue_declare("kept", passive=True).method.message_count == 10
                assert ch.basic_get("kept", auto_ack=True)[2] == b"%s:0" % v.encode()
    finally:
        b.stop()


def test_a_start_with_another_worker_count_or_mode_is_refused_and_the_data_stays(tmp_path):
    """Each worker's data lies in its own folder: another count or mode would look in the wrong
    one and show the vhosts empty, so the start is refused with the reason (warren/broker/ownership.py)."""
    args = ("--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)))
    b = launch_broker(tmp_path, *args)
    try:
        publish_confirmed(b, "a", "kept", 5)
    finally:
        b.stop()
    for other in (("--workers", "3"), ("--workers", "2", "--worker-mode", "queues"), ("--workers", "1")):
        with pytest.raises(RuntimeError) as e:
            launch_broker(tmp_path, *other, *args[2:], data_dir=b.data_dir)
        assert "was written by --workers 2 --worker-mode vhosts" in str(e.value), str(e.value)
    assert kept_after_start(tmp_path, args, b.data_dir, "a") == 5


def kept_after_start(tmp_path, args, data_dir, vhost: str) -> int:
    """Start a broker with ``args`` on ``data_dir``: the messages of ``vhost``'s queue "kept"."""
    b = launch_broker(tmp_path, *args, data_dir=data_dir)
    try:
        with connect(b, vhost) as c:
            return c.channel().queue_declare("kept", passive=True).method.message_count
    finally:
        b.stop()


def test_workers_refuse_the_data_folder_of_one_process(tmp_path):
    one = launch_broker(tmp_path, "--workers", "1")
    try:
        publish_confirmed(one, "/", "kept", 3)
    finally:
        one.stop()
    with pytest.raises(RuntimeError) as e:
        launch_broker(tmp_path, "--workers", "2", data_dir=one.data_dir)
    assert "run as one process" in str(e.value), str(e.value)
    assert kept_after_start(tmp_path, ("--workers", "1"), one.data_dir, "/") == 3


def test_workers_stop_when_the_supervisor_is_killed(two_workers):
    b = two_workers
    pids = [w["pid"] for w in ready(b)["workers"]]
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(timeout=10)
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if os.path.exists(f"/proc/{p}") and "zombie" not in _state(p)]
        time.sleep(0.1)
    assert not alive, f"workers {alive} outlived their supervisor"
    # its run folder (sockets, settings in /tmp) stays behind; the next start on the data folder
    # removes it, and a clean stop removes the new one and its note
    note = b.data_dir / "workers-run-dir"
    stale = Path(note.read_text())
    assert stale.is_dir() and any(stale.iterdir())
    again = launch_broker(b.data_dir.parent, "--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)),
                          data_dir=b.data_dir)
    try:
        assert not stale.exists()
        fresh = Path(note.read_text())
        assert fresh != stale and fresh.is_dir()
    finally:
        again.stop()
    assert not fresh.exists() and not note.exists()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line for line in f if line.startswith("State:")).lower()
    except (OSError, StopIteration):
        return "zombie"


# --- --definitions FILE and policies with --workers -----------------------------------------------


def definitions_doc() -> dict:
    """A definitions file touching both workers: a user with limits, vhost "a" (worker 1) with a
    limit, a policy, an exchange, queues and a binding, and a queue in "/" (worker 0)."""
    return {
        "users": [{"name": "h18-app", "password": "app-pw", "tags": ["management"],
                   "limits": {"max-connections": 2}}],
        "vhosts": [{"name": "/"}, {"name": "a"}],
        "permissions": [{"user": "h18-app", "vhost": v, "configure": ".*", "write": ".*", "read": ".*"}
                        for v in VHOSTS],
        "parameters": [{"component": "vhost-limits", "vhost": "a", "name": "limits", "value": {"max-queues": 10}}],
        "policies": [{"vhost": "a", "name": "cap", "pattern": "^capped$", "apply-to": "queues", "priority": 0,
                      "definition": {"max-length": 1}}],
        "exchanges": [{"name": "events", "vhost": "a", "type": "topic", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {}}],
        "queues": [{"name": "capped", "vhost": "a", "durable": True, "auto_delete": False, "arguments": {}},
                   {"name": "root-q", "vhost": "/", "durable": True, "auto_delete": False,
                    "arguments": {"x-max-length": 5}}],
        "bindings": [{"source": "events", "vhost": "a", "destination": "capped", "destination_type": "queue",
                      "routing_key": "e.#", "arguments": {}}],
    }


def app_connect(b, vhost: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        b.host, b.port, vhost, pika.PlainCredentials("h18-app", "app-pw"), connection_attempts=1, socket_timeout=5))


def test_a_definitions_file_is_loaded_with_workers(tmp_path):
    """The supervisor loads users, vhosts, permissions, limits and policies; each worker its own
    vhosts' exchanges, queues and bindings: everything in force as a single process loads it."""
    from tests.management.api_client import call
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(definitions_doc()))
    b = launch_broker(tmp_path, "--workers", "2", "--definitions", str(defs))
    try:
        assert "definitions loaded from" in b.log()
        with app_connect(b, "a") as c:  # the user of the file logs in through the supervisor
            ch = c.channel()
            for i in range(3):
                ch.basic_publish("events", "e.x", b"m%d" % i)
            # the binding routes, and the policy (max-length 1) is in force in worker 1
            deadline = time.monotonic() + 10
            while ch.queue_declare("capped", passive=True).method.message_count != 1:
                assert time.monotonic() < deadline, "the policy is not in force"
                time.sleep(0.05)
            assert ch.basic_get("capped", auto_ack=True)[2] == b"m2"
        with app_connect(b, "/") as c:
            assert c.channel().queue_declare("root-q", passive=True).method.message_count == 0
            # max-connections 2 from the file: a third is refused (user limits count per
            # process with --workers, so all three go to the worker of "/")
            with app_connect(b, "/"):
                with pytest.raises(pika.exceptions.ProbableAccessDeniedError, match="530"):
                    app_connect(b, "/")
        info = ready(b)
        for w in info["workers"]:  # every worker's API sees the shared part
            base = f"http://127.0.0.1:{w['http_port']}"
            assert call(base, "GET", "/api/users/h18-app")[1]["limits"] == {"max-connections": 2}
            assert call(base, "GET", "/api/vhost-limits/a")[1] == [{"vhost": "a", "value": {"max-queues": 10}}]
            assert [p["name"] for p in call(base, "GET", "/api/policies/a")[1]] == ["cap"]
    finally:
        b.stop()
    assert b.proc.returncode == 0
    # a restart with the same file changes nothing (equal objects are left alone)
    b = launch_broker(tmp_path, "--workers", "2", "--definitions", str(defs), data_dir=b.data_dir)
    try:
        with app_connect(b, "a") as c:
            ch = c.channel()
            for i in range(3):  # the queue, its binding and the policy are there as before
                ch.basic_publish("events", "e.y", b"n%d" % i)
            assert ch.queue_declare("capped", passive=True).method.message_count == 1
            assert ch.basic_get("capped", auto_ack=True)[2] == b"n2"
    finally:
        b.stop()


@pytest.mark.parametrize("broken, says", [
    ({"policies": [{"vhost": "nope", "name": "p", "pattern": ".*", "definition": {}}]},
     "policy 'p': vhost 'nope' does not exist"),  # the supervisor's part
    ({"queues": [{"name": "q", "vhost": "a", "durable": True, "arguments": {"x-max-length": "many"}}]},
     "queue 'q'"),  # a worker's part
    ({"queues": [{"name": "q", "vhost": "nowhere", "durable": True}]},
     "queue 'q': vhost 'nowhere' does not exist"),  # no worker's part: refused, not dropped
])
def test_a_definitions_file_that_cannot_load_stops_the_start_with_workers(tmp_path, broken, says):
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps({"vhosts": [{"name": "/"}, {"name": "a"}], **broken}))
    with pytest.raises(RuntimeError) as e:
        launch_broker(tmp_path, "--workers", "2", "--definitions", str(defs))
    assert "cannot load definitions" in str(e.value) and says in str(e.value)


def test_a_policy_set_through_one_workers_api_reaches_the_other_worker(two_workers):
    """One policies.json for all workers: a policy set on worker 0's API is in force in worker 1's
    vhost within the policy check interval, and concurrent changes through both APIs all stay."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.management.api_client import call
    b = two_workers
    workers = ready(b)["workers"]
    owner_of_a = next(w for w in workers if "a" in w["vhosts"])
    other = next(w for w in workers if w is not owner_of_a)
    base = f"http://127.0.0.1:{other['http_port']}"
    status = call(base, "PUT", "/api/policies/a/h18-cap", {"pattern": "^h18-capped$", "apply-to": "queues",
                                                            "definition": {"max-length": 1}})[0]
    assert status == 201
    # the owner's API lists it at once (it reads the file), which must not keep the owner's
    # queues from getting it at its next look at the file
    owner_base = f"http://127.0.0.1:{owner_of_a['http_port']}"
    assert [p["name"] for p in call(owner_base, "GET", "/api/policies/a")[1]] == ["h18-cap"]
    with connect(b, "a") as c:  # served by the other worker
        ch = c.channel()
        ch.queue_declare("h18-capped")
        deadline = time.monotonic() + 10
        while True:
            ch.queue_purge("h18-capped")
            for i in range(3):
                ch.basic_publish("", "h18-capped", b"%d" % i)
            if ch.queue_declare("h18-capped", passive=True).method.message_count == 1:
                break
            assert time.monotonic() < deadline, "the policy never reached the worker that owns vhost a"
            time.sleep(0.1)
    assert call(owner_base, "GET", "/api/queues/a/h18-capped")[1]["policy"] == "h18-cap"

    # policies set at the same moment through both workers' APIs: none lost
    def put(i: int) -> int:
        url = (base, owner_base)[i % 2]
        return call(url, "PUT", f"/api/policies/a/h18-p{i}", {"pattern": f"^p{i}$", "definition": {"max-length": i}})[0]

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(put, range(24))) == {201}
    for url in (base, owner_base):
        names = {p["name"] for p in call(url, "GET", "/api/policies/a")[1]}
        assert names == {"h18-cap"} | {f"h18-p{i}" for i in range(24)}


def test_the_cluster_name_set_through_one_worker_is_the_nodes(tmp_path):
    """RabbitMQ's set_cluster_name through worker 0's API: the supervisor announces it in
    connection.start (a federation link reads it there to cut loops), worker 1's API shows it
    within the shared file's check interval, and a restart keeps it."""
    from tests.management.api_client import call
    b = launch_broker(tmp_path, "--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)))
    try:
        first, second = (f"http://127.0.0.1:{w['http_port']}" for w in ready(b)["workers"])
        assert call(first, "PUT", "/api/global-parameters/cluster_name", {"value": "node-h19"})[0] in (201, 204)
        for vhost in VHOSTS:  # both workers' connections are opened by the supervisor
            with connect(b, vhost) as c:
                assert c._impl.server_properties["cluster_name"] in (b"node-h19", "node-h19")
        deadline = time.monotonic() + 5
        while call(second, "GET", "/api/cluster-name")[1]["name"] != "node-h19":
            assert time.monotonic() < deadline, "worker 1 never saw the node's new cluster name"
            time.sleep(0.1)
        assert call(first, "GET", "/api/overview")[1]["cluster_name"] == "node-h19"
        # concurrent changes of global parameters through both APIs: none lost
        for i, base in enumerate((first, second, first, second)):
            assert call(base, "PUT", f"/api/global-parameters/h19-g{i}", {"value": i})[0] in (201, 204)
        names = {g["name"] for g in call(second, "GET", "/api/global-parameters")[1]}
        assert {"cluster_name", "h19-g0", "h19-g1", "h19-g2", "h19-g3"} <= names
    finally:
        b.stop()
    b = launch_broker(tmp_path, "--workers", "2", *(x for v in VHOSTS for x in ("--vhost", v)))
    try:
        with connect(b, "a") as c:
            assert c._impl.server_properties["cluster_name"] in (b"node-h19", "node-h19")
        restarted = json.loads(Path(b.args[b.args.index("--ready-file") + 1]).read_text())  # not the first's
        for w in restarted["workers"]:
            assert call(f"http://127.0.0.1:{w['http_port']}", "GET", "/api/cluster-name")[1]["name"] == "node-h19"
    finally:
        b.stop()


def test_a_user_made_through_a_workers_api_logs_in_through_the_supervisor_at_once(two_workers):
    """The supervisor, the worker a connection is handed to and every worker's HTTP API check
    logins against the shared access store as it is now (each re-reads access.json when another
    process changed it), not as it was at their last periodic look."""
    from tests.management.api_client import call
    b = two_workers
    assert call(b.http_url, "PUT", "/api/users/h18-new", {"password": "pw1", "tags": "management"})[0] == 201
    for w in ready(b)["workers"]:  # every worker's HTTP API knows the user at once
        status, me, _ = call(f"http://127.0.0.1:{w['http_port']}", "GET", "/api/whoami", user="h18-new",
                             password="pw1")
        assert status == 200 and me["name"] == "h18-new"
    assert call(b.http_url, "PUT", "/api/permissions/a/h18-new", {"configure": ".*", "write": ".*",
                                                                  "read": ".*"})[0] == 201
    params = pika.ConnectionParameters(b.host, b.port, "a", pika.PlainCredentials("h18-new", "pw1"),
                                       connection_attempts=1, socket_timeout=5)
    with pika.BlockingConnection(params) as c:
        c.channel().queue_declare("h18-new-q", exclusive=True)
    assert call(b.http_url, "PUT", "/api/users/h18-new", {"password": "pw2", "tags": ""})[0] == 204
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):  # the old password at once
        pika.BlockingConnection(params)


# --- AMQP 0-10 through the supervisor ----------------------------------------------------------

def test_a_handoff_record_carries_peer_vhost_and_octets():
    from warren.server.handoff_records import pack_handoff, unpack_handoff
    record = pack_handoff("::1", 5999, b"AMQP\x00\x00\x09\x01rest", "vh/é")
    assert unpack_handoff(record) == (("::1", 5999), "vh/é", b"AMQP\x00\x00\x09\x01rest")
    with pytest.raises(ValueError):  # a vhost length past the end of a truncated record
        unpack_handoff(record[:10])


def test_amqp_0_10_clients_are_handed_to_the_worker_of_their_vhost(two_workers):
    """qpid.messaging's protocol: the supervisor runs the 0-10 handshake to connection.open and
    hands the socket over as for 0-9-1; a client naming no vhost opens the default, "/"."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.protocol.amqp0_10 import events as ev
    from warren.spec import amqp0_10 as spec010
    b = two_workers
    for vhost, named in (("a", "a"), ("/", None)):
        with Client010(b, virtual_host=named) as c:
            s = c.session(1)
            s.send(spec010.QueueDeclare(queue="q010", durable=False))
            s.transfer("", f"from 0-10 to {vhost}".encode(), routing_key="q010")
        with connect(b, vhost) as c:  # the same vhost through pika: the message is there
            assert c.channel().basic_get("q010", auto_ack=True)[2] == f"from 0-10 to {vhost}".encode()
    with Client010(b, virtual_host="nope", handshake=False) as c:
        assert c.wait(ev.ConnectionClosed).code == spec010.ConnectionCloseCode.INVALID_PATH
    with Client010(b, password="wrong", handshake=False) as c:
        assert c.wait(ev.ConnectionClosed).code == spec010.ConnectionCloseCode.CONNECTION_FORCED
    assert "vhost nope not found" in b.log()


def test_a_shovel_to_amqp_localhost_reaches_the_ephemeral_port_the_supervisor_listens_on(two_workers):
    """With --port 0 the workers are told the port the supervisor bound, so a shovel whose URI
    is "amqp://" (this broker) connects there (before, they were told 0 and the link failed)."""
    from tests.management.api_client import call
    b = two_workers
    base = f"http://127.0.0.1:{ready(b)['workers'][owner_of('a', 2)]['http_port']}"
    with connect(b, "a") as c:
        ch = c.channel()
        ch.queue_declare("shovel-src")
        ch.queue_declare("shovel-dst")
        for i in range(5):
            ch.basic_publish("", "shovel-src", b"s%d" % i)
    value = {"src-uri": "amqp:///a", "src-queue": "shovel-src", "dest-uri": "amqp:///a", "dest-queue": "shovel-dst"}
    assert call(base, "PUT", "/api/parameters/shovel/a/local", {"value": value})[0] in (201, 204)
    deadline = time.monotonic() + 30
    with connect(b, "a") as c:
        ch = c.channel()
        while ch.queue_declare("shovel-dst", passive=True).method.message_count < 5:
            assert time.monotonic() < deadline, f"nothing shovelled: {call(base, 'GET', '/api/shovels/a')[1]}"
            time.sleep(0.1)
    assert ready(b)["http_port"] == ready(b)["workers"][owner_of("/", 2)]["http_port"]


def _refused_logins(b) -> dict:
    """Refused AMQP 0-10 and 1.0 logins against broker ``b``: {case: (what the client got, its port)}."""
    got = {}
    c = Client010(b, password="wrong", handshake=False)
    try:
        got["0-10 password"] = (c.wait(ev10.ConnectionClosed).code, c.sock.getsockname()[1])
    finally:
        c.sock.close()
    with Raw10(b) as c:  # no SASL layer, no --anonymous-user
        c.send_raw(AMQP_HEADER)
        assert c.header() == AMQP_HEADER
        c.send(0, spec10.Open(container_id="anon"))
        error = c.expect(spec10.Close).error
        got["1.0 no SASL"] = ((str(error.condition), error.description), c.port)
    for case, mechanism, response in (("1.0 password", "PLAIN", b"\0guest\0wrong"), ("1.0 mechanism", "CRAM-MD5", b"")):
        with Raw10(b) as c:
            c.send_raw(SASL_HEADER)
            assert c.header() == SASL_HEADER
            c.expect(spec10.SaslMechanisms)
            c.send(0, spec10.SaslInit(mechanism=Symbol(mechanism), initial_response=response), sasl=True)
            got[case] = (c.expect(spec10.SaslOutcome).code, c.port)
    return got


def test_a_connection_refused_by_the_supervisor_is_logged_as_a_single_process_logs_it(tmp_path, two_workers):
    """One "connection error on PEER user=... vhost=-: CODE ... (why)" line and one "connection
    closed:" line naming the peer as host:port (tests/e2e/test_operator_logs.py's format). The
    login step is one (warren/access/login.py): a refused 0-10 or 1.0 login gets the same answer
    from the supervisor as from a single process, and the same reason in the log."""
    b = two_workers
    (tmp_path / "one").mkdir()
    one = launch_broker(tmp_path / "one")
    try:
        answers = {"one": _refused_logins(one), "workers": _refused_logins(b)}
        reasons = {"0-10 password": "login refused for user 'guest': wrong password",
                   "1.0 no SASL": "no SASL layer, and ANONYMOUS login is not enabled (--anonymous-user)",
                   "1.0 password": "login refused for user 'guest': wrong password",
                   "1.0 mechanism": "unsupported SASL mechanism 'CRAM-MD5' (offered: PLAIN)"}
        assert {k: v[0] for k, v in answers["one"].items()} == {k: v[0] for k, v in answers["workers"].items()}
        assert answers["one"]["1.0 no SASL"][0] == ("amqp:unauthorized-access", "login refused")
        for name, broker in (("one", one), ("workers", b)):
            for case, why in reasons.items():
                peer = f"127.0.0.1:{answers[name][case][1]} "
                assert wait_until(lambda: any(peer in ln and why in ln and "connection error on" in ln
                                              for ln in broker.log().splitlines()), timeout=10), \
                    (name, case, broker.log()[-3000:])
    finally:
        one.stop()
    ports = {}
    for case, (user, password, vhost) in {"login": ("nobody", "x", "a"), "vhost": ("guest", "guest", "nope")}.items():
        with raw.RawConnection(b.host, b.port) as rc:
            ports[case] = rc.sock.getsockname()[1]
            rc.send(raw.PROTOCOL_HEADER)
            raw.parse_start(rc.read_method())
            rc.send(raw.start_ok(user, password))
            if case == "vhost":
                tune = raw.parse_tune(rc.read_method())
                rc.send(raw.tune_ok(tune.channel_max, tune.frame_max, 0) + raw.connection_open(vhost))
            assert rc.read_method().method == (10, 50)  # connection.close
    expected = {
        "login": ("user=- vhost=-: 403 ACCESS_REFUSED", "login refused for user 'nobody': unknown user"),
        "vhost": ("user=guest vhost=-: 530 NOT_ALLOWED", "user 'guest' asked for unknown vhost 'nope'"),
    }
    deadline = time.monotonic() + 10
    for case, (error, why) in expected.items():
        peer = f"127.0.0.1:{ports[case]} "
        while True:
            lines = [ln for ln in b.log().splitlines() if peer in ln]
            errors = [ln for ln in lines if f"connection error on {peer}{error}" in ln and why in ln]
            closes = [ln for ln in lines if f"connection closed: {peer}" in ln and why in ln]
            if (errors and closes) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(errors) == 1 and len(closes) == 1, "\n".join(lines) or b.log()[-3000:]
