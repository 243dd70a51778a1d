"""warren pipeline archive and replay on a real Spark standalone cluster (a master and two
workers on 127.0.0.1, from pyspark's own jars), with a worker SIGKILLed mid-batch each time:
its tasks run again on the other worker, and the output holds every message exactly once.

Two scales share the one test body: ``small`` (20k messages in four micro-batches, the job's JVMs
on the quick JIT, a small confirm window so the replay's publishes last long enough to kill a
worker among them) and ``full`` (200k messages). Both are marked spark_cluster and skipped unless
asked for (tests/spark/conftest.py says how): a cluster's six JVMs made ``small`` the main run's
longest test (7 min at load 15-30, session 16). The default run's Spark fault checks are
test_archive.py's job killed mid-way and tests/spark/test_faults.py's executor, driver and broker
kills."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.conftest import JVM_OPTIONS
from tests.spark.pika_admin import NO_DEDUP, NO_DEDUP_REASON
from tests.spark.standalone import Cluster
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = [
    pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API"),
]


@dataclass(frozen=True)
class Scale:
    count: int  # messages in the stream
    per_trigger: int  # records per micro-batch of the archive
    per_partition: int  # records per task: a batch has several, so a killed executor has tasks to give back
    job_conf: tuple = ()  # extra --conf for both jobs
    confirm_window: int | None = None  # the replay's; None = the writer's default


EXECUTOR = ("spark.executor.memory=512m", "spark.task.maxFailures=8")
FULL = Scale(200_000, 50_000, 10_000, EXECUTOR)
# the quick JIT (C1 only) starts each of the jobs' six JVMs sooner and is slower only on big jobs
SMALL = Scale(20_000, 5_000, 1_000, EXECUTOR + (f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
                                                 f"spark.executor.extraJavaOptions={JVM_OPTIONS}"), 20)
SCALES = [
    pytest.param(SMALL, id="small", marks=[pytest.mark.spark_cluster, pytest.mark.timeout(420)]),
    pytest.param(FULL, id="full", marks=[pytest.mark.spark_cluster, pytest.mark.timeout(1200)]),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c.start(workers=2)
    finally:
        c.stop()


# what the driver logs when a worker dies under it
LOST = re.compile(r"[Ll]ost (executor|task)|[Ww]orker.*(lost|removed)|ExecutorLost")


def _env() -> dict:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def _count(folder, name: str) -> int:
    d = folder / name
    return len([f for f in os.listdir(d) if f.isdigit()]) if d.exists() else 0


def _wait(what: str, condition, proc, log, timeout: float = 400.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the job exited before {what}:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} in time:\n{log.read_text()[-4000:]}"
        time.sleep(0.1)


def _reruns(cluster: Cluster, before) -> list[str]:
    """Tasks of the job that ran again (an attempt after the first), from the executors' logs."""
    return [task for task, attempt in cluster.task_attempts(before) if attempt > 0]


def _confs(scale: Scale) -> list[str]:
    return [arg for conf in scale.job_conf for arg in ("--conf", conf)]


@pytest.mark.parametrize("scale", SCALES)
def test_archive_then_replay_on_a_cluster_with_a_worker_killed_mid_batch(scale, cluster, broker, spark, tmp_path,
                                                                        uid):
    count = scale.count
    cluster.ensure_workers(2)  # an earlier scale killed some
    name = f"cluster-{uid}"
    declare_stream(broker, name)
    publish_raw(broker, f"{name}.k", (b"m%06d" % i for i in range(count)), BasicProperties(delivery_mode=2).encode())
    wait_committed(broker, name, count, timeout=120)
    out, cp, log = tmp_path / "out", tmp_path / "cp", tmp_path / "archive.log"
    cmd = [sys.executable, "-m", "warren", "pipeline", "archive", "--stream", name, "--to", str(out),
           "--checkpoint", str(cp), "--url", broker.url, "--http-url", broker.http_url,
           "--max-records-per-trigger", str(scale.per_trigger), "--records-per-partition", str(scale.per_partition),
           "--master", cluster.master_url, *_confs(scale)]
    victim = cluster.live_workers()[0]
    earlier, before = cluster.executors(victim), cluster.all_executors()  # of earlier jobs
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
    try:
        # mid-batch: a batch committed, the next one planned (its offsets written) and not
        # committed, and a task running on the victim's executor when it is killed
        _wait("a task of a batch running after a committed one",
              lambda: _count(cp, "commits") >= 1 and _count(cp, "offsets") > _count(cp, "commits")
              and cluster.kill_worker_during_a_task(victim, earlier), proc, log)
        assert _count(cp, "commits") < count // scale.per_trigger, "the archive finished before the kill"
        assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert f"archived {count:,} rows of {name}" in text, text[-4000:]
    assert LOST.search(text), text[-4000:]
    assert _reruns(cluster, before), "no task ran a second time after the kill"
    stats = spark.read.parquet(str(out)).selectExpr(
        "count(*) as n", "count(distinct offset) as offsets", "min(offset) as lo", "max(offset) as hi",
        "count_if(cast(substring(cast(body as string), 2) as int) = offset) as ok",
    ).collect()[0]
    assert (stats.n, stats.offsets, stats.lo, stats.hi, stats.ok) == (count, count, 0, count - 1, count)

    if NO_DEDUP:
        pytest.skip(NO_DEDUP_REASON)
    # replay into a deduplicating queue, shipping the package, killing a worker while it publishes
    cluster.ensure_workers(2)
    queue = f"cluster-replay-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, arguments={"x-message-deduplication": True, "x-cache-size": 2 * count})
        rlog = tmp_path / "replay.log"
        window = ["--confirm-window", str(scale.confirm_window)] if scale.confirm_window else []
        rcmd = [sys.executable, "-m", "warren", "pipeline", "replay", "--from", str(out), "--exchange", "",
                "--routing-key", queue, "--url", broker.url, "--write-id", f"replay-{uid}", "--ship-package",
                *window, "--master", cluster.master_url, *_confs(scale)]
        victim = cluster.live_workers()[0]
        earlier, before = cluster.executors(victim), cluster.all_executors()
        with open(rlog, "wb") as sink:
            rproc = subprocess.Popen(rcmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=_env())
        try:
            def kill_while_publishing() -> bool:
                n = ch.queue_declare(queue, passive=True).method.message_count
                # under way, at least a task still to publish, one running on the victim
                return 0 < n < count - scale.per_partition and cluster.kill_worker_during_a_task(victim, earlier)

            _wait("publishes under way", kill_while_publishing, rproc, rlog)
            assert rproc.wait(timeout=600) == 0, rlog.read_text()[-4000:]
        finally:
            if rproc.poll() is None:
                rproc.kill()
        rtext = rlog.read_text()
        assert f"published {count} messages" in rtext, rtext[-4000:]
        assert LOST.search(rtext), rtext[-4000:]
        assert _reruns(cluster, before), "no task ran a second time after the kill"
        assert ch.queue_declare(queue, passive=True).method.message_count == count
        ch.queue_delete(queue)
    finally:
        conn.close()
