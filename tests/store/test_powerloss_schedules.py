"""Crash schedules: a broker whose data folder is on the power-loss layer, cut at a random moment.

A schedule runs a workload against the broker, crashes it (kill -9, then the layer drops every
write that was not durable, sometimes tearing the last one at a random octet), restarts it and
checks what came back:

* publishers with confirms (pika) into two durable queues and a stream; a consumer acking from
  one of them; a stream reader; a client declaring, binding, publishing into and deleting durable
  queues and exchanges; users, their permissions, policies and runtime parameters (federation
  upstreams) put and deleted through the HTTP API;
* every confirmed message is there (``lost``); no message comes back that was never published,
  nor one a consumer acked more than ``ACK_WINDOW`` seconds before the crash (``unexpected``:
  Warren fsyncs ack logs at most every ACK_SYNC_INTERVAL = 1 s, as RabbitMQ syncs acks lazily
  too, so an ack younger than that may come back after a power cut: ``duplicated``, at least
  once, as is a message found twice); every acknowledged declare, delete, binding, user,
  permission or policy change is there and every acknowledged delete stays deleted; a deleted
  queue declared again comes back empty (an operation under way at the crash may go either way);
* the broker starts on the folder as the crash left it, with no hand to help (``needed_a_hand``).

A quarter of the cuts come while an fsync is stalled at the disk (a group commit under way, its
confirms not sent), the rest wherever the workload is.

Schedules run in chains of ``CHAIN`` on one data folder (each restart is the next schedule's
start, so crashes pile up on the same files); a chain's seed fixes every choice (the workload
mix, the crash point, the tear), and a failure prints the seed and the line that replays it.
The default run takes one chain of ``DEFAULT_SCHEDULES``; ``-m storage_faults`` runs
``MARKED_CHAINS`` chains (1,000 schedules; WARREN_POWERLOSS_CHAINS=N runs the first N).
WARREN_POWERLOSS_SEED=S WARREN_POWERLOSS_SCHEDULES=N replays chain S up to its N-th schedule.
WARREN_POWERLOSS_START_TIMEOUT=SECONDS bounds each start's wait for the broker (default: the
fixtures' 60 s); a long run beside other work raises it (session 19: recovery under load 12-16
took longer, and those chains failed on the wait, not on what they checked).

A failed chain keeps its evidence (``Evidence``): the broker's log of every start in the chain,
the seed, each schedule's choices and crash report, what the workload's clients and the checker
raised (with the wall-clock time, to read beside the logs' times) and the problems, in a folder
the failure message names: ``$WARREN_POWERLOSS_EVIDENCE/chain-<seed>-<time>`` when that variable
names a folder, else ``evidence`` in the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field
from urllib.parse import quote

import pika
import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.management.api_client import call
from tests.store.powerloss_fs import PowerLossFS, unavailable_reason

SKIP = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(SKIP is not None, reason=f"no FUSE here: {SKIP}"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker on the power-loss layer"),
]

CHAIN = 5                  # schedules on one data folder
DEFAULT_SCHEDULES = 3      # the default run: one chain of three (about a minute here)
MARKED_CHAINS = int(os.environ.get("WARREN_POWERLOSS_CHAINS") or 200)  # -m storage_faults: 200 chains of 5
STALLED_CUTS = 0.25        # the share of schedules whose cut comes during a stalled fsync
ACK_WINDOW = 3.0           # an ack older than this at the crash was fsynced (1 s interval + the tick)
QUEUES = ("pl-consumed", "pl-kept")
STREAM = "pl-stream"
WORK_TIMEOUT = 30.0
START_TIMEOUT = float(os.environ.get("WARREN_POWERLOSS_START_TIMEOUT") or 0) or None  # None: the fixtures'


@dataclass
class Totals:
    schedules: int = 0
    confirmed: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    needed_a_hand: int = 0
    start_timeouts: int = 0  # restarts still under way when launch_broker stopped waiting
    definition_changes: int = 0
    dropped_writes: int = 0
    torn: int = 0
    stalled_cuts: int = 0
    false_alarms: int = 0
    seconds: float = 0.0
    problems: list = field(default_factory=list)
    evidence: list = field(default_factory=list)  # (folder, broker log errors) of each failed chain


class Model:
    """What the clients were told, which the broker must keep (module doc)."""

    def __init__(self) -> None:
        self.confirmed = {q: set() for q in (*QUEUES, STREAM)}
        self.published = {q: set() for q in (*QUEUES, STREAM)}  # sent, confirmed or not
        self.acked: dict[bytes, float] = {}  # body -> when its ack was sent
        self.queues: dict[str, bool] = {}    # name -> exists (acknowledged)
        self.exchanges: dict[str, bool] = {}
        self.users: dict[str, bool] = {}
        self.policies: dict[str, bool] = {}
        self.parameters: dict[str, bool] = {}   # federation upstreams (runtime parameters)
        self.bindings: dict[tuple, bool] = {}     # (exchange, queue) -> bound (acknowledged)
        self.permissions: dict[str, bool] = {}    # user -> has permissions on "/" (acknowledged)
        self.in_doubt: set[tuple] = set()   # (kind, name) under way at the crash
        self.problems: list[str] = []       # what the workload itself saw go wrong
        self.lock = threading.Lock()


# --- the workload -----------------------------------------------------------------------------


def _connect(broker, heartbeat: int = 0) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", broker.port, heartbeat=heartbeat, socket_timeout=10, blocked_connection_timeout=10))


def publisher(broker, model: Model, rng: random.Random, tag: str, stop: threading.Event, crash_at: int,
              crash_now: threading.Event) -> None:
    ch = _connect(broker).channel()
    ch.confirm_delivery()
    n = 0
    while not stop.is_set():
        queue = rng.choice((*QUEUES, STREAM))
        body = f"{tag}:{n}".encode()
        n += 1
        with model.lock:
            model.published[queue].add(body)
        ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))  # returns once confirmed
        with model.lock:
            model.confirmed[queue].add(body)
        if n >= crash_at:
            crash_now.set()


def consumer(broker, model: Model, stop: threading.Event) -> None:
    conn = _connect(broker)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=20)

    def on_message(c, method, props, body):
        c.basic_ack(method.delivery_tag)
        with model.lock:
            model.acked[body] = time.monotonic()

    ch.basic_consume(QUEUES[0], on_message)
    while not stop.is_set():
        conn.process_data_events(0.05)


def stream_reader(broker, stop: threading.Event) -> None:
    conn = _connect(broker)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=50)
    ch.basic_consume(STREAM, lambda c, m, p, b: c.basic_ack(m.delivery_tag), arguments={"x-stream-offset": "first"})
    while not stop.is_set():
        conn.process_data_events(0.05)


def declarer(broker, model: Model, rng: random.Random, tag: str, stop: threading.Event) -> None:
    ch = _connect(broker).channel()
    ch.confirm_delivery()
    n = 0
    while not stop.is_set():
        n += 1
        live_queues = [q for q, there in model.queues.items() if there]
        gone = [q for q, there in model.queues.items() if not there and ("queue", q) not in model.in_doubt]
        if gone and rng.random() < 0.2:
            # a deleted name declared again: a new, empty queue, whatever the crashes left behind
            name = rng.choice(gone)
            model.in_doubt.add(("queue", name))
            held = ch.queue_declare(name, durable=True).method.message_count
            if held:
                model.problems.append(f"queue {name}, declared again after its acknowledged delete, "
                                      f"holds {held} messages of the deleted one")
            model.queues[name] = True
            model.in_doubt.discard(("queue", name))
            continue
        if live_queues and rng.random() < 0.4:
            name = rng.choice(live_queues)
            model.in_doubt.add(("queue", name))
            ch.queue_delete(name)
            model.queues[name] = False
            for key in [k for k in model.bindings if k[1] == name]:
                model.bindings[key] = False
            model.in_doubt.discard(("queue", name))
            continue
        q, x = f"plq-{tag}-{n}", f"plx-{tag}-{n}"
        model.in_doubt.update({("queue", q), ("exchange", x)})
        ch.exchange_declare(x, "direct", durable=True)
        model.exchanges[x] = True
        model.in_doubt.discard(("exchange", x))
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, x, routing_key="k")
        model.queues[q] = True
        model.bindings[(x, q)] = True
        model.in_doubt.discard(("queue", q))
        for i in range(rng.randrange(3)):  # so that a deleted queue's folder holds something
            ch.basic_publish(x, "k", b"%s:%d" % (q.encode(), i), pika.BasicProperties(delivery_mode=2))
        if rng.random() < 0.3:
            model.in_doubt.add(("exchange", x))
            ch.exchange_delete(x)
            model.exchanges[x] = False
            model.bindings[(x, q)] = False
            model.in_doubt.discard(("exchange", x))


def admin(broker, model: Model, rng: random.Random, tag: str, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        kind = rng.choice(("user", "policy", "parameter"))
        table = {"user": model.users, "policy": model.policies, "parameter": model.parameters}[kind]
        live = [k for k, there in table.items() if there]
        delete = bool(live) and rng.random() < 0.4
        name = rng.choice(live) if delete else f"pl{kind[0:2]}-{tag}-{n}"
        path = {"user": f"/api/users/{name}", "policy": f"/api/policies/%2F/{name}",
                "parameter": f"/api/parameters/federation-upstream/%2F/{name}"}[kind]
        body = None if delete else {
            "user": {"password": "pw", "tags": ""},
            "policy": {"pattern": "^matches-nothing-", "definition": {"max-length": 100}, "apply-to": "queues"},
            "parameter": {"value": {"uri": "amqp://127.0.0.1:1"}}}[kind]
        model.in_doubt.add((kind, name))
        status = call(broker.http_url, "DELETE" if delete else "PUT", path, body, timeout=10)[0]
        if status not in (201, 204):
            raise AssertionError(f"{'DELETE' if delete else 'PUT'} {path}: {status}")
        table[name] = not delete
        if kind == "user" and delete:
            model.permissions[name] = False  # a user's permissions go with it
        model.in_doubt.discard((kind, name))
        if kind == "user" and not delete and rng.random() < 0.5:
            model.in_doubt.add(("permission", name))
            status = call(broker.http_url, "PUT", f"/api/permissions/%2F/{name}",
                          {"configure": ".*", "write": ".*", "read": ".*"}, timeout=10)[0]
            if status not in (201, 204):
                raise AssertionError(f"PUT /api/permissions/%2F/{name}: {status}")
            model.permissions[name] = True
            model.in_doubt.discard(("permission", name))


def _quietly(fn, *args) -> None:
    """A workload thread: the crash ends it with whatever error its client raises."""
    try:
        fn(*args)
    except Exception:
        pass


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception)\b.*:")  # a traceback's last line


class Evidence:
    """What a failed chain leaves for after the fact (module doc): every broker start's log,
    each schedule's choices, what the clients raised and when."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.logs: list = []       # every broker start's log file, in order
        self.schedules: list = []  # one dict per schedule: its choices, the crash report, problems
        self.events: list = []     # (wall-clock time, what): the clients' errors, the checker's steps
        self.lock = threading.Lock()

    def started(self, broker) -> None:
        self.logs.append(broker.log_path)

    def note(self, what: str) -> None:
        with self.lock:
            self.events.append((time.time(), what))

    def run(self, name: str, fn, *args) -> None:
        """A workload thread: the crash ends it with whatever error its client raises, noted."""
        try:
            fn(*args)
        except Exception as e:
            self.note(f"{name} ended: {e!r}")

    def broker_errors(self, limit: int = 5) -> list[str]:
        """The first ERROR and CRITICAL lines of the broker's logs, and tracebacks' last lines
        (a start that failed before its logging): a half-edited source tree
        (an exception in a connection's callback) reads as a broker fault to the checker."""
        found = []
        for n, log_path in enumerate(self.logs):
            if log_path is None or not os.path.exists(log_path):
                continue
            with open(log_path, errors="replace") as f:
                found += [f"start {n}: {line.rstrip()[:300]}" for line in f
                          if " ERROR " in line or " CRITICAL " in line or _EXCEPTION_LINE.match(line)]
        return found[:limit]

    def keep(self, tmp_path, problems: list) -> str:
        """Copy it all into a folder of its own; returns the folder's path."""
        root = os.environ.get("WARREN_POWERLOSS_EVIDENCE")
        folder = (os.path.join(root, f"chain-{self.seed}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}") if root
                  else os.path.join(str(tmp_path), "evidence"))
        os.makedirs(folder, exist_ok=True)
        for n, log_path in enumerate(self.logs):
            if log_path is not None and os.path.exists(log_path):
                shutil.copyfile(log_path, os.path.join(folder, f"broker-start-{n}.log"))
        with open(os.path.join(folder, "chain.json"), "w") as f:
            json.dump({"seed": self.seed, "replay": f"WARREN_POWERLOSS_SEED={self.seed} "
                       f"WARREN_POWERLOSS_SCHEDULES={len(self.schedules)} pytest -n 0 {__file__}::test_crash_schedules",
                       "schedules": self.schedules,
                       "events": [{"time": f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))},{int(t % 1 * 1000):03d}",
                                   "what": what} for t, what in self.events],
                       "problems": problems}, f, indent=1, default=repr)
        return folder


# --- one schedule -----------------------------------------------------------------------------


def run_schedule(fs: PowerLossFS, broker, model: Model, seed: int, index: int, workdir, broker_args=(),
                 evidence: Evidence | None = None) -> tuple:
    """Workload, crash, restart, check: (the restarted broker, this schedule's counts)."""
    evidence = evidence or Evidence(seed)
    rng = random.Random(seed * 1000 + index)
    tag = f"{seed}-{index}"
    stop, crash_now = threading.Event(), threading.Event()
    crash_at = rng.randrange(1, 150)  # confirmed publishes before the cut
    chosen = {"index": index, "crash_at": crash_at, "workload": ["publisher"]}
    evidence.schedules.append(chosen)
    threads = [threading.Thread(target=evidence.run, args=("publisher", publisher, broker, model,
                                                           random.Random(rng.random()), tag, stop, crash_at, crash_now))]
    if rng.random() < 0.8:
        chosen["workload"].append("consumer")
        threads.append(threading.Thread(target=evidence.run, args=("consumer", consumer, broker, model, stop)))
    if rng.random() < 0.5:
        chosen["workload"].append("stream_reader")
        threads.append(threading.Thread(target=evidence.run, args=("stream_reader", stream_reader, broker, stop)))
    if rng.random() < 0.7:
        chosen["workload"].append("declarer")
        threads.append(threading.Thread(target=evidence.run, args=("declarer", declarer, broker, model,
                                                                   random.Random(rng.random()), tag, stop)))
    if rng.random() < 0.7:
        chosen["workload"].append("admin")
        threads.append(threading.Thread(target=evidence.run, args=("admin", admin, broker, model,
                                                                   random.Random(rng.random()), tag, stop)))
    evidence.note(f"schedule {index}: workload starts ({', '.join(chosen['workload'])})")
    for t in threads:
        t.start()
    crash_now.wait(WORK_TIMEOUT)
    tear, tear_seed = rng.random() < 0.5, rng.randrange(2**32)
    stalled = rng.random() < STALLED_CUTS
    chosen.update(tear=tear, tear_seed=tear_seed, stalled=stalled)
    if stalled:
        # the cut comes while a group commit's fsync is at the disk: its confirms were never sent
        fs.fault("fsync", path="/data/", stall=60)
        deadline = time.monotonic() + 10
        while fs.stats()["stalls"] == 0 and time.monotonic() < deadline and broker.proc.poll() is None:
            time.sleep(0.01)
    crashed_at = time.monotonic()
    evidence.note(f"schedule {index}: the power cut (pid {broker.proc.pid})")
    # the power cut: the process first, then what the disk did not have
    report = fs.crash(broker.proc, tear=tear, seed=tear_seed)
    chosen["crash"] = {"dropped_writes": report["dropped_writes"], "torn": report["torn"],
                       "names": sorted(report.get("names") or [])[:200]}
    fs.clear()
    stop.set()
    for t in threads:
        t.join(WORK_TIMEOUT)
        assert not t.is_alive(), "a workload thread did not end after the crash"
    evidence.note(f"schedule {index}: restarting")
    try:
        restarted = launch_broker(workdir, "--disk-free-limit", "0", *broker_args, data_dir=broker.data_dir,
                                  start_timeout=START_TIMEOUT)
    except RuntimeError as e:
        known = {str(p) for p in evidence.logs}  # the failed start's log too, whole
        evidence.logs += sorted((p for p in workdir.glob("broker-*.log") if str(p) not in known),
                                key=lambda p: p.stat().st_mtime)
        if "did not start in" in str(e):  # still starting when launch_broker gave up: slow, or stuck
            return None, {"start_timeouts": 1, "problems": [
                f"the broker was still starting when the wait ended (a loaded machine, or a start stuck: its "
                f"log, kept, tells): {e}"[:3000]]}
        return None, {"needed_a_hand": 1, "problems": [f"the broker did not start: {e}"[:3000]]}
    evidence.started(restarted)
    evidence.note(f"schedule {index}: restarted (pid {restarted.proc.pid}), checking")
    try:
        counts = check(restarted, model, crashed_at, evidence)
    except Exception as e:  # the checker's client failed: a problem of this schedule, with its evidence
        evidence.note(f"schedule {index}: the checker failed: {traceback.format_exc()}")
        return restarted, {"problems": [f"the checker failed: {e!r}"]}
    evidence.note(f"schedule {index}: checked")
    counts["dropped_writes"] = report["dropped_writes"]
    counts["torn"] = 1 if report["torn"] else 0
    counts["stalled_cuts"] = 1 if stalled else 0
    # a power cut tears and drops unsynced writes, it never damages synced data: a damage report
    # at this start is a false alarm (an ack log's lost writes were one: warren/store/damage.py)
    alarms = [line for line in restarted.log().splitlines() if "to damaged files" in line]
    counts["false_alarms"] = len(alarms)
    if alarms:
        counts.setdefault("problems", []).extend(f"damage reported after a power cut: {line[-300:]}" for line in alarms)
    return restarted, counts


def drain(broker, queue: str, expect: int) -> list[bytes]:
    """Every message of ``queue``, read without removing any (unacked, then the channel closes)."""
    conn = _connect(broker)
    try:
        ch = conn.channel()
        got: list[bytes] = []
        if queue == STREAM:  # from its start; acks only give credit back, nothing goes
            ch.basic_qos(prefetch_count=1000)
            ch.basic_consume(queue, lambda c, m, p, b: (got.append(b), c.basic_ack(m.delivery_tag)),
                             arguments={"x-stream-offset": "first"})
        else:  # unacked, so nothing goes (the channel's close puts them back); no prefetch limit
            ch.basic_consume(queue, lambda c, m, p, b: got.append(b))
        deadline = time.monotonic() + WORK_TIMEOUT
        while len(got) < expect and time.monotonic() < deadline:
            conn.process_data_events(0.05)
        return got
    finally:
        conn.close()


def count_in(broker, queue: str) -> int | None:
    """The queue's message count, or None when the queue itself did not survive."""
    status, body, _ = call(broker.http_url, "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
    return int(body.get("messages") or 0) if status == 200 else None


def check(broker, model: Model, crashed_at: float, evidence: Evidence | None = None) -> dict:
    counts = {"confirmed": 0, "lost": 0, "duplicated": 0, "unexpected": 0, "definition_changes": 0,
              "problems": []}
    problems = counts["problems"]
    for queue in (*QUEUES, STREAM):
        count = count_in(broker, queue)
        if count is None:
            problems.append(f"queue {queue}, declared durable before the first schedule, is gone")
        if evidence is not None:
            evidence.note(f"checker: {queue} holds {count}, draining it")
        present = drain(broker, queue, count) if count else []
        seen = set(present)
        confirmed = model.confirmed[queue]
        must = confirmed - set(model.acked) if queue == QUEUES[0] else confirmed
        lost = must - seen
        strangers = seen - model.published[queue]
        old_acks = {b for b in seen & set(model.acked) if model.acked[b] < crashed_at - ACK_WINDOW}
        young_acks = (seen & set(model.acked)) - old_acks
        twice = len(present) - len(seen)
        counts["confirmed"] += len(confirmed)
        counts["lost"] += len(lost)
        counts["unexpected"] += len(strangers) + len(old_acks)
        counts["duplicated"] += twice + len(young_acks)
        if lost:
            problems.append(f"{queue}: {len(lost)} confirmed messages lost, e.g. {sorted(lost)[:5]}")
        if strangers:
            problems.append(f"{queue}: {len(strangers)} messages never published, e.g. {sorted(strangers)[:5]}")
        if old_acks:
            problems.append(f"{queue}: {len(old_acks)} messages acked over {ACK_WINDOW} s before the crash came back")
        # what is there now is what the next schedule starts from
        model.confirmed[queue] = seen - (set(model.acked) if queue == QUEUES[0] else set())
        model.published[queue] = set(seen)
    model.acked.clear()
    api = broker.http_url
    by_name = lambda item: item["name"]  # noqa: E731
    for kind, table, path, key in (
            ("queue", model.queues, "/api/queues/%2F", by_name),
            ("exchange", model.exchanges, "/api/exchanges/%2F", by_name),
            ("user", model.users, "/api/users", by_name),
            ("policy", model.policies, "/api/policies/%2F", by_name),
            ("parameter", model.parameters, "/api/parameters/federation-upstream/%2F", by_name),
            ("binding", model.bindings, "/api/bindings/%2F",
             lambda b: (b["source"], b["destination"]) if b["destination_type"] == "queue" else None),
            ("permission", model.permissions, "/api/permissions", lambda p: p["user"] if p["vhost"] == "/" else None)):
        status, listed, _ = call(api, "GET", path, timeout=30)
        assert status == 200, f"GET {path}: {status}"
        names = {key(item) for item in listed}
        for name, there in list(table.items()):
            found = name in names
            doubt = {(kind, name)}
            if kind == "binding":  # its exchange's or queue's declare or delete under way
                doubt |= {("exchange", name[0]), ("queue", name[1])}
            elif kind == "permission":
                doubt.add(("user", name))
            if doubt & model.in_doubt:
                table[name] = found  # under way at the crash: either is right; the broker's answer rules
                continue
            counts["definition_changes"] += 1
            if found != there:
                counts["unexpected" if found else "lost"] += 1
                problems.append(f"{kind} {name}: {'there' if found else 'missing'} after the restart, "
                                f"but its {'delete' if found else 'declare'} was acknowledged")
                table[name] = found
    model.in_doubt.clear()
    counts["unexpected"] += len(model.problems)
    problems += model.problems
    model.problems = []
    return counts


def run_chain(tmp_path, seed: int, schedules: int, totals: Totals, *broker_args: str) -> None:
    """``schedules`` schedules of chain ``seed`` on one data folder; a failed chain keeps its
    evidence (``Evidence.keep``), named in ``totals.evidence``."""
    fs = PowerLossFS.start_or_skip(tmp_path / "mnt", tmp_path)
    broker = None
    evidence = Evidence(seed)
    failed: list = []
    try:
        data = fs.mountpoint / "data"
        broker = launch_broker(tmp_path, "--disk-free-limit", "0", *broker_args, data_dir=data,
                               start_timeout=START_TIMEOUT)
        evidence.started(broker)
        conn = _connect(broker)
        ch = conn.channel()
        for q in QUEUES:
            ch.queue_declare(q, durable=True)
        ch.queue_declare(STREAM, durable=True, arguments={"x-queue-type": "stream"})
        conn.close()
        model = Model()
        for index in range(schedules):
            started = time.monotonic()
            restarted, counts = run_schedule(fs, broker, model, seed, index, tmp_path, broker_args, evidence)
            totals.schedules += 1
            totals.seconds += time.monotonic() - started
            for key in ("confirmed", "lost", "duplicated", "unexpected", "needed_a_hand", "start_timeouts",
                        "definition_changes",
                        "dropped_writes", "torn", "stalled_cuts", "false_alarms"):
                setattr(totals, key, getattr(totals, key) + counts.get(key, 0))
            evidence.schedules[-1]["problems"] = counts.get("problems") or []
            if counts.get("problems"):
                totals.problems.append((seed, index, counts["problems"]))
                failed += counts["problems"]
            if restarted is None:
                broker = None
                break
            broker = restarted
    except Exception:
        failed.append(f"the chain failed: {traceback.format_exc()}")
        raise
    finally:
        if broker is not None:
            broker.stop()
        fs.stop()
        if failed:
            totals.evidence.append((evidence.keep(tmp_path, failed), evidence.broker_errors()))


def report(totals: Totals, seeds: list[int]) -> str:
    lines = [f"power-loss schedules: {totals.schedules} run, {totals.confirmed} confirmed publishes checked, "
             f"{totals.lost} lost, {totals.duplicated} duplicated, {totals.unexpected} unexpected, "
             f"{totals.needed_a_hand} start-ups needing a hand, {totals.start_timeouts} still starting when the "
             f"wait ended, {totals.definition_changes} definition and access "
             f"checks, {totals.dropped_writes} unsynced writes dropped, {totals.torn} torn, "
             f"{totals.stalled_cuts} cut during a stalled fsync, {totals.false_alarms} damage reports; "
             f"{totals.seconds / max(totals.schedules, 1):.2f} s per schedule"]
    for seed, index, problems in totals.problems:
        lines.append(f"FAILED chain seed {seed}, schedule {index}: replay with WARREN_POWERLOSS_SEED={seed} "
                     f"WARREN_POWERLOSS_SCHEDULES={index + 1} pytest -n 0 {__file__}::test_crash_schedules")
        lines += [f"    {p}" for p in problems[:15]]
        if len(problems) > 15:
            lines.append(f"    ... and {len(problems) - 15} more")
    for folder, errors in totals.evidence:
        lines.append(f"evidence kept in {folder} (every broker start's log, the schedules, the clients' errors)")
        lines += [f"    broker log: {e}" for e in errors]
    return "\n".join(lines)


def _assert_clean(totals: Totals, seeds: list[int]) -> None:
    text = report(totals, seeds)
    print(text)
    assert totals.schedules > 0
    assert not totals.problems and totals.lost == 0 and totals.unexpected == 0 and totals.needed_a_hand == 0, text


@pytest.mark.timeout(300)
def test_crash_schedules(tmp_path):
    """A few schedules in every run (one chain), or the one WARREN_POWERLOSS_SEED replays."""
    seed = int(os.environ.get("WARREN_POWERLOSS_SEED") or random.randrange(10**6))
    schedules = int(os.environ.get("WARREN_POWERLOSS_SCHEDULES") or DEFAULT_SCHEDULES)
    totals = Totals()
    run_chain(tmp_path, seed, schedules, totals)
    _assert_clean(totals, [seed])
    assert totals.confirmed > 0, "the schedules confirmed nothing: they checked nothing"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["classic", "stream"])
def test_a_queue_deleted_in_a_crash_leaves_nothing_to_a_new_one_of_its_name(tmp_path, kind):
    """The delete is logged (fsynced) first, then the folder goes: a power cut between the two
    left the folder, and a new queue of the same name opened it with the old messages in it.
    The start now removes folders no definition owns (Durability._remove_leftover_stores)."""
    arguments = {"x-queue-type": "stream"} if kind == "stream" else None
    root = "streams" if kind == "stream" else "queues"
    fs = PowerLossFS.start_or_skip(tmp_path / "mnt", tmp_path)
    broker = None
    try:
        data = fs.mountpoint / "data"
        broker = launch_broker(tmp_path, "--disk-free-limit", "0", data_dir=data, start_timeout=START_TIMEOUT)
        conn = _connect(broker)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("doomed", durable=True, arguments=arguments)
        for i in range(10):
            ch.basic_publish("", "doomed", b"old-%d" % i, pika.BasicProperties(delivery_mode=2))
        # the folder's removal is the last step of the delete: the cut comes while it is made durable
        fs.fault("fsyncdir", path=f"/data/{root}", stall=60, times=1, exact=True)
        deleter = threading.Thread(target=_quietly, args=(ch.queue_delete, "doomed"))
        deleter.start()
        deadline = time.monotonic() + 30
        while fs.stats()["stalls"] == 0:
            assert time.monotonic() < deadline, "the delete never reached its folder's fsync"
            time.sleep(0.02)
        report = fs.crash(broker.proc)
        deleter.join(30)
        fs.clear()
        assert any(name.startswith(f"/data/{root}/") for name in report["names"]), report  # the folder came back
        broker = launch_broker(tmp_path, "--disk-free-limit", "0", data_dir=data, start_timeout=START_TIMEOUT)
        ch = _connect(broker).channel()
        ch.queue_declare("doomed", durable=True, arguments=arguments)
        assert count_in(broker, "doomed") == 0  # not the 10 of the deleted queue
        assert "no durable queue or exchange owns it" in broker.log()
    finally:
        if broker is not None:
            broker.stop()
        fs.stop()


@pytest.mark.timeout(120)
def test_the_checker_catches_confirms_sent_before_the_fsync(tmp_path):
    """The harness can fail: with --no-fsync Warren confirms what only reached the page cache,
    which survives kill -9 but not the layer's power cut, so confirmed messages are lost."""
    totals = Totals()
    run_chain(tmp_path, 4242, 1, totals, "--no-fsync")
    print(report(totals, [4242]))
    assert totals.lost > 0 and totals.problems, report(totals, [4242])
    assert totals.needed_a_hand == 0  # it still starts: it lost data, it did not break
    # the failed chain kept its evidence where the report says
    ((folder, _),) = totals.evidence
    assert folder in report(totals, [4242])
    kept = json.loads(open(os.path.join(folder, "chain.json")).read())
    assert kept["seed"] == 4242 and "WARREN_POWERLOSS_SEED=4242" in kept["replay"]
    assert kept["schedules"][0]["crash_at"] > 0 and kept["schedules"][0]["problems"]
    assert any("the power cut" in e["what"] for e in kept["events"])
    logs = sorted(n for n in os.listdir(folder) if n.startswith("broker-start-"))
    assert logs == ["broker-start-0.log", "broker-start-1.log"]  # the first start and the restart
    assert os.path.getsize(os.path.join(folder, logs[1])) > 0


@pytest.mark.storage_faults
@pytest.mark.timeout(900)
@pytest.mark.parametrize("chain", range(MARKED_CHAINS))
def test_crash_schedules_marked(tmp_path, chain, request):
    """The 1,000 schedules (-m storage_faults): chain seeds 1..200, five schedules each."""
    if "storage_faults" not in (request.config.option.markexpr or ""):
        pytest.skip("the 1,000 power-loss schedules run with -m storage_faults (about 4 s each here); "
                    "test_crash_schedules runs a few in every run")
    totals = Totals()
    run_chain(tmp_path, chain + 1, CHAIN, totals)
    _assert_clean(totals, [chain + 1])
