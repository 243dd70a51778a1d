"""warren pipeline archive and replay on a real Spark standalone cluster (a master and two
workers on 127.0.0.1, from pyspark's own jars), with a worker SIGKILLed mid-batch each time:
its tasks run again on the other worker, and the output holds every message exactly once.

Marked spark_cluster: skipped unless asked for (tests/spark/conftest.py says how)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.pika_admin import NO_DEDUP, NO_DEDUP_REASON
from tests.spark.standalone import Cluster
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = [
    pytest.mark.spark_cluster,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API"),
]

COUNT = 200_000
PER_TRIGGER = 50_000
PER_PARTITION = 10_000  # 5 tasks per batch on 2 one-core executors: a killed one has tasks to give back
EXECUTOR = ["--conf", "spark.executor.memory=512m", "--conf", "spark.task.maxFailures=8"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c.start(workers=2)
    finally:
        c.stop()


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


def test_archive_then_replay_on_a_cluster_with_a_worker_killed_mid_batch(cluster, broker, spark, tmp_path, uid):
    name = f"cluster-{uid}"
    declare_stream(broker, name)
    publish_raw(broker, f"{name}.k", (b"m%06d" % i for i in range(COUNT)), BasicProperties(delivery_mode=2).encode())
    wait_committed(broker, name, COUNT, timeout=120)
    out, cp, log = tmp_path / "out", tmp_path / "cp", tmp_path / "archive.log"
    cmd = [sys.executable, "-m", "warren", "pipeline", "archive", "--stream", name, "--to", str(out),
           "--checkpoint", str(cp), "--url", broker.url, "--http-url", broker.http_url,
           "--max-records-per-trigger", str(PER_TRIGGER), "--records-per-partition", str(PER_PARTITION),
           "--master", cluster.master_url, *EXECUTOR]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
    try:
        # mid-batch: a batch committed, the next one planned (its offsets written) and not committed
        victim = cluster.workers[0]
        _wait("a batch running after a committed one",
              lambda: _count(cp, "commits") >= 1 and _count(cp, "offsets") > _count(cp, "commits")
              and cluster.executor_running(victim), proc, log)
        cluster.kill_worker(victim)
        assert _count(cp, "commits") < COUNT // PER_TRIGGER, "the archive finished before the kill"
        assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert f"archived {COUNT:,} rows of {name}" in text, text[-4000:]
    assert re.search(r"[Ll]ost (executor|task)|[Ww]orker.*(lost|removed)|ExecutorLost", text), text[-4000:]
    stats = spark.read.parquet(str(out)).selectExpr(
        "count(*) as n", "count(distinct offset) as offsets", "min(offset) as lo", "max(offset) as hi",
        "count_if(cast(substring(cast(body as string), 2) as int) = offset) as ok",
    ).collect()[0]
    assert (stats.n, stats.offsets, stats.lo, stats.hi, stats.ok) == (COUNT, COUNT, 0, COUNT - 1, COUNT)

    if NO_DEDUP:
        pytest.skip(NO_DEDUP_REASON)
    # replay into a deduplicating queue, shipping the package, killing a worker while it publishes
    cluster.add_worker()
    queue = f"cluster-replay-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, arguments={"x-message-deduplication": True, "x-cache-size": 2 * COUNT})
        rlog = tmp_path / "replay.log"
        rcmd = [sys.executable, "-m", "warren", "pipeline", "replay", "--from", str(out), "--exchange", "",
                "--routing-key", queue, "--url", broker.url, "--write-id", f"replay-{uid}", "--ship-package",
                "--master", cluster.master_url, *EXECUTOR]
        with open(rlog, "wb") as sink:
            rproc = subprocess.Popen(rcmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=_env())
        try:
            victim = next(w for w in cluster.workers if w.proc.poll() is None)

            def publishing() -> bool:
                n = ch.queue_declare(queue, passive=True).method.message_count
                return 0 < n < COUNT - PER_PARTITION  # under way, at least a task still to publish

            _wait("publishes under way", publishing, rproc, rlog)
            cluster.kill_worker(victim)
            assert rproc.wait(timeout=600) == 0, rlog.read_text()[-4000:]
        finally:
            if rproc.poll() is None:
                rproc.kill()
        assert f"published {COUNT} messages" in rlog.read_text()
        assert ch.queue_declare(queue, passive=True).method.message_count == COUNT
        ch.queue_delete(queue)
    finally:
        conn.close()
