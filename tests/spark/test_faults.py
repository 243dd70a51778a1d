"""Exactly-once from a stream through Spark into a deduplicating queue, under faults (issue 28
point 5).

A streaming job (``faults_job.py``: a Warren stream read by the ``warren`` source, each body
transformed, written by the ``warren`` sink to a fanout exchange with a checkpoint) is killed
at random points and started again from its checkpoint each time:

* **executor**: SIGKILL of the executor JVM (and its Python workers): the job runs on
  ``local-cluster[1,1,768]``, so the executor is a process of its own; Spark's master in the
  driver starts another and retries the lost tasks;
* **driver**: SIGKILL of the job's Python driver and every process under it (its JVM, the
  executor); the job is started again on the same checkpoint;
* **broker**: SIGKILL of Warren (``kill -9``), started again on the same data folder and ports;
  the job's tasks fail and retry, or the query fails and the job is started again.

The exchange feeds a deduplicating durable queue (``x-message-deduplication``) and a plain one.
When the job has consumed the input (published in rounds, so there is work left for every kill)
and finished cleanly, the deduplicating queue must hold exactly the transformed input as a
multiset of content hashes (the input repeats contents on purpose: deduplication is by message
id, ``<query>:<batch>:<partition>:<row>``, not by content): 0 lost, 0 duplicated. The plain queue
must have lost nothing; its duplicates (what the retries published again) are counted and
printed. Kills come when the plain queue passes a random count (observable progress), so most
land while a batch publishes.

A few kills (one of each kind) run in the default suite; ``-m spark_faults`` (or
WARREN_SPARK_FAULTS=1) runs 100 (WARREN_SPARK_FAULT_KILLS changes it), seeded by
WARREN_SPARK_FAULT_SEED (printed).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pika
import pytest

from tests.conftest import EXTERNAL_URL, BrokerProc, launch_broker
from tests.spark.pika_admin import NO_DEDUP, NO_DEDUP_REASON
from tests.spark.standalone import spark_home
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = [
    pytest.mark.skipif(EXTERNAL_URL is not None, reason="starts and kills its own broker"),
    pytest.mark.skipif(NO_DEDUP, reason=NO_DEDUP_REASON),
]

JOB = Path(__file__).with_name("faults_job.py")
ROUND = 1200  # messages published per round: the job gets another round when it has done them all
PER_TRIGGER, PER_PARTITION = 400, 200  # two tasks per micro-batch, one executor core: tasks queue
DISTINCT = 500  # contents repeat: the input is a multiset
KINDS = ("executor", "driver", "broker")


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid``, from each process's parent in /proc/*/stat (a JVM starts its
    children from other threads than its main one, which /proc/PID/task/PID/children leaves out)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, frontier = [], [pid]
    while frontier:
        kids = parents.get(frontier.pop(), [])
        found.extend(kids)
        frontier.extend(kids)
    return found


def _body(i: int) -> bytes:
    return b"v%05d" % (i % DISTINCT)


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass
class Run:
    """The broker, the job and what has been done to them."""

    tmp: Path
    rng: random.Random
    broker: BrokerProc | None = None
    job: subprocess.Popen | None = None
    jobs_started: int = 0
    job_target: int = 0  # messages published when the running job started: a clean exit has done them
    published: int = 0
    kills: collections.Counter = field(default_factory=collections.Counter)
    skipped: collections.Counter = field(default_factory=collections.Counter)  # no executor to kill then
    stream: str = "faults-in"
    exchange: str = "faults-out"
    deduplicating: str = "faults-dedup"
    plain: str = "faults-plain"

    # --- the broker -------------------------------------------------------------------

    def start_broker(self) -> None:
        if self.broker is None:
            self.broker = launch_broker(self.tmp)
            return
        # the same data folder and ports: the job's URL stays valid, its retries may succeed
        old = self.broker
        self.broker = launch_broker(self.tmp, "--port", str(old.port), "--http-port", str(old.http_port),
                                    data_dir=old.data_dir)

    def kill_broker(self) -> None:
        self.broker.proc.send_signal(signal.SIGKILL)
        self.broker.proc.wait(timeout=30)

    def channel(self):
        conn = pika.BlockingConnection(pika.URLParameters(self.broker.url + "?socket_timeout=30"))
        return conn, conn.channel()

    def declare(self, cache_size: int) -> None:
        declare_stream(self.broker, self.stream)
        self.declare_outputs(cache_size)

    def declare_outputs(self, cache_size: int) -> None:
        """The exchange the job writes to, and the deduplicating and plain queues bound to it."""
        conn, ch = self.channel()
        try:
            ch.exchange_declare(self.exchange, "fanout", durable=True)
            ch.queue_declare(self.deduplicating, durable=True,
                             arguments={"x-message-deduplication": True, "x-cache-size": cache_size})
            ch.queue_declare(self.plain, durable=True)
            ch.queue_bind(self.deduplicating, self.exchange)
            ch.queue_bind(self.plain, self.exchange)
        finally:
            conn.close()

    def publish_round(self) -> None:
        first = self.published
        publish_raw(self.broker, f"{self.stream}.k", (_body(i) for i in range(first, first + ROUND)),
                    BasicProperties(delivery_mode=2).encode())
        self.published += ROUND
        wait_committed(self.broker, self.stream, self.published, timeout=120)

    def count(self, queue: str) -> int:
        conn, ch = self.channel()
        try:
            return ch.queue_declare(queue, passive=True).method.message_count
        finally:
            conn.close()

    def contents(self, queue: str) -> collections.Counter:
        """Content hashes of every message in ``queue`` (consumed with acks, so it empties)."""
        expected = self.count(queue)
        conn, ch = self.channel()
        found: collections.Counter = collections.Counter()
        try:
            ch.basic_qos(prefetch_count=1000)
            for n, (method, _props, body) in enumerate(ch.consume(queue, inactivity_timeout=30), 1):
                assert method is not None, f"{queue}: {n - 1} of {expected} messages consumed, then none for 30 s"
                found[_digest(body)] += 1
                if n % 500 == 0 or n == expected:
                    ch.basic_ack(method.delivery_tag, multiple=True)
                if n == expected:
                    break
            ch.cancel()
        finally:
            conn.close()
        return found

    # --- the job ----------------------------------------------------------------------

    def spark_home(self) -> str:
        """A SPARK_HOME of our own, pyspark's entries linked into it: local-cluster's worker
        keeps its executors' folders in SPARK_HOME/work, which must not be the installed pyspark."""
        home = self.tmp / "spark-home"
        if not home.exists():
            home.mkdir()
            for entry in os.listdir(spark_home()):
                if entry != "work":
                    (home / entry).symlink_to(os.path.join(spark_home(), entry))
        return str(home)

    def start_job(self) -> None:
        self.jobs_started += 1
        self.job_target = self.published
        log = self.tmp / f"job-{self.jobs_started}.log"
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": self.spark_home(),
               "PYSPARK_PYTHON": sys.executable}
        with open(log, "wb") as sink:
            self.job = subprocess.Popen(
                [sys.executable, str(JOB), "local-cluster[1,1,768]", self.broker.url, self.broker.http_url,
                 self.stream, self.exchange, str(self.tmp / "checkpoint"), str(PER_TRIGGER), str(PER_PARTITION)],
                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)

    def job_log(self) -> str:
        return (self.tmp / f"job-{self.jobs_started}.log").read_text(errors="replace")[-4000:]

    def kill_job(self) -> None:
        """SIGKILL the driver and every process under it (its JVM, the executor, Python workers)."""
        if self.job is None:
            return
        pids = [self.job.pid, *_descendants(self.job.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.job.wait(timeout=60)

    def executor(self) -> list[int]:
        """The executor JVM under the job and its descendants (empty when none runs)."""
        if self.job is None or self.job.poll() is not None:
            return []
        for pid in _descendants(self.job.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmdline:
                return [pid, *_descendants(pid)]
        return []

    def kill_executor(self) -> bool:
        pids = self.executor()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return bool(pids)

    def job_done(self) -> bool:
        """The job exited cleanly having done every round: with Trigger.AvailableNow a clean exit
        means every batch up to the stream's end when it started is committed (rounds are
        published only while no job runs)."""
        return (self.job is not None and self.job.poll() == 0 and self.job_target == self.published)

    # --- one kill ---------------------------------------------------------------------

    def ensure_running(self) -> None:
        """Broker up, and the job running, with input left for it."""
        if self.broker.proc.poll() is not None:
            self.start_broker()
        if self.job is None or self.job.poll() is not None:
            if self.job_done():
                self.publish_round()  # it finished everything: more work for the next kill
            self.start_job()

    def kill_at_random(self, kind: str, timeout: float = 600.0) -> None:
        self.ensure_running()
        seen = self.count(self.plain)
        # a random point of progress: the plain queue (every publish lands there) passing a count
        target = seen + self.rng.randint(1, PER_TRIGGER * 2)
        deadline = time.monotonic() + timeout
        while True:
            if self.job.poll() is not None:
                self.ensure_running()  # done (more input given) or failed (the broker's kill): again
            elif self.count(self.plain) >= target:
                if kind == "executor" and not self.executor():
                    target += PER_PARTITION // 2  # between executors: a little later
                else:
                    break
            assert time.monotonic() < deadline, f"no progress to {target} for a {kind} kill:\n{self.job_log()}"
            time.sleep(0.05)
        if kind == "executor":
            if not self.kill_executor():
                self.skipped[kind] += 1
                return
        elif kind == "driver":
            self.kill_job()
        else:
            self.kill_broker()
        self.kills[kind] += 1

    def finish(self, timeout: float = 900.0) -> None:
        """Run the job to its clean end over every round published."""
        deadline = time.monotonic() + timeout
        while True:
            if self.broker.proc.poll() is not None:
                self.start_broker()
            if self.job is None or self.job.poll() is not None:
                if self.job_done():
                    return
                self.start_job()
            assert time.monotonic() < deadline, f"the job did not finish:\n{self.job_log()}"
            self.job.wait(timeout=max(1.0, deadline - time.monotonic()))

    def close(self) -> None:
        self.kill_job()
        if self.broker is not None:
            self.broker.stop()


def run_faults(tmp: Path, kills: int, seed: int) -> dict:
    rng = random.Random(seed)
    run = Run(tmp, rng)
    run.start_broker()
    started = time.monotonic()
    try:
        # the cache holds every id the run can repeat (a retried batch, a replayed one)
        run.declare(cache_size=ROUND * (kills + 2))
        run.publish_round()
        plan = [KINDS[i % len(KINDS)] for i in range(kills)]
        rng.shuffle(plan)
        for kind in plan:
            run.kill_at_random(kind)
        run.finish()
        expected = collections.Counter(_digest(b"out:" + _body(i)) for i in range(run.published))
        plain = run.count(run.plain)
        deduplicated = run.contents(run.deduplicating)
        plain_contents = run.contents(run.plain)
    finally:
        run.close()
    lost = expected - deduplicated
    duplicated = deduplicated - expected
    report = {
        "seed": seed, "kills": dict(run.kills), "executor kills skipped (none running)": run.skipped["executor"],
        "jobs started": run.jobs_started, "input": run.published, "deduplicated queue": sum(deduplicated.values()),
        "lost": sum(lost.values()), "duplicated": sum(duplicated.values()), "plain queue": plain,
        "plain duplicates": sum((plain_contents - expected).values()),
        "plain lost": sum((expected - plain_contents).values()), "seconds": round(time.monotonic() - started),
    }
    print("spark faults:", json.dumps(report), flush=True)
    assert not lost and not duplicated, report
    assert not (expected - plain_contents), report  # the plain queue may repeat, never lose
    return report


def _seed() -> int:
    return int(os.environ.get("WARREN_SPARK_FAULT_SEED") or random.SystemRandom().randrange(1 << 30))


@pytest.fixture
def java():
    import shutil
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (no java on PATH and no JAVA_HOME)")


@pytest.mark.timeout(2400)  # JVM starts: minutes each on a loaded 2-core machine
def test_exactly_once_into_a_deduplicating_queue_through_an_executor_a_driver_and_a_broker_kill(tmp_path, java):
    report = run_faults(tmp_path, len(KINDS), _seed())
    assert report["kills"].get("driver") == 1 and report["kills"].get("broker") == 1


@pytest.mark.spark_faults
@pytest.mark.timeout(6 * 3600)
def test_exactly_once_into_a_deduplicating_queue_through_100_kills(tmp_path, java):
    kills = int(os.environ.get("WARREN_SPARK_FAULT_KILLS", "100"))
    report = run_faults(tmp_path, kills, _seed())
    assert sum(report["kills"].values()) + report["executor kills skipped (none running)"] == kills
