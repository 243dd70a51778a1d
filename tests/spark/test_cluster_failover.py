"""Exactly-once from a replicated stream through Spark across its leader's kill (issue 33, item 2).

Three Warren nodes on three etcd members (tests/cluster/faults/harness.py). The input stream is
declared through n1, so n1 leads it; the fanout exchange, the deduplicating queue and the plain
queue are declared through n2, so they live on n2, which is never killed. The streaming job of
test_faults.py (``faults_job.py``, unchanged) reads the stream and writes through n2 only (its AMQP
and HTTP URLs are n2's): its stream requests (the info the driver plans a batch with, the tasks'
bulk reads) are forwarded by n2 to the stream's leader. Once the plain queue shows the job has
written part of the input (a random count, seeded by WARREN_SPARK_FAULT_SEED, printed), n1 is
killed (kill -9); when another node leads the stream, n1 is started again, and the job runs to its
end, started again from its checkpoint if the query failed meanwhile (while no node leads the
stream n2 answers the driver's info with an error, which fails the query; a failed bulk read fails
its task, which Spark retries).

Then the deduplicating queue must hold exactly the transformed input as a multiset of content
hashes (0 lost, 0 duplicated), the plain queue must have lost nothing (its duplicates, what the
retries published again, are counted and printed), and the stream must still end where the input
did (no offset added or lost by the failover). One kill, about a minute on a 2-core machine.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import shutil
import time
import urllib.request

import pika
import pytest

from tests.cluster.cluster_nodes import GUEST
from tests.cluster.etcd_harness import ETCD, MISSING_REASON
from tests.cluster.faults.harness import RECOVERY_TIMEOUT_S, FaultCluster, wait_for
from tests.spark.stream_helpers import api, wait_committed
from tests.spark.test_faults import PER_PARTITION, Run

INPUT = 2400  # six micro-batches of test_faults.py's 400: the kill lands before half of them are written
DISTINCT = 500  # contents repeat: the input is a multiset (deduplication is by message id)
JOB_START_TIMEOUT_S = 600.0  # the job's JVMs start in minutes on a loaded 2-core machine


def seed() -> int:
    return int(os.environ.get("WARREN_SPARK_FAULT_SEED") or random.SystemRandom().randrange(1 << 30))


def input_body(i: int) -> bytes:
    return b"c%05d" % (i % DISTINCT)


def content_hash(body: bytes) -> str:
    """As Run.contents hashes what it consumes."""
    return hashlib.sha256(body).hexdigest()


def plain_url(node) -> str:
    """The node's AMQP URL without the harness's heartbeat and timeout (Run.channel adds its own)."""
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/%2F"


def queue_row(node, queue: str) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{node.http_port}/api/queues/%2F/{queue}",
                                     headers={"Authorization": GUEST})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def failed_stream_requests(node, stream: str) -> int:
    """How many of the job's requests for ``stream`` (its info, its bulk reads) ``node`` answered
    with an error, forwarded to a leader that was gone: shows whether the kill caught the job
    asking (printed, not asserted: timing). Each fails a task (retried) or, for the info the
    driver asks when it plans a batch, the query (the job is started again from its checkpoint)."""
    marker = f"GET /api/streams/%2F/{stream}"
    return sum(1 for launch in node.launches if launch.proc.log_path is not None
               for line in launch.proc.log_path.read_text(errors="replace").splitlines()
               if marker in line and line.endswith(" failed"))


class FailoverRun(Run):
    """test_faults.py's run with its broker the cluster's node n2 (never killed): the job's URLs,
    the outputs, the counts and the drain are n2's."""

    def start_broker(self) -> None:
        raise AssertionError("n2 is never killed: nothing to start again")

    def close(self) -> None:
        self.kill_job()  # the nodes are the cluster's to stop

    def declare_stream_on(self, node) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(plain_url(node) + "?socket_timeout=30"))
        try:
            conn.channel().queue_declare(self.stream, durable=True, arguments={"x-queue-type": "stream"})
        finally:
            conn.close()

    def publish_confirmed(self, count: int) -> None:
        """``count`` messages into the stream through n2, each confirmed (on a majority's disks)."""
        conn, ch = self.channel()
        try:
            ch.confirm_delivery()
            properties = pika.BasicProperties(delivery_mode=2)
            for i in range(self.published, self.published + count):
                ch.basic_publish("", self.stream, input_body(i), properties, mandatory=True)
        finally:
            conn.close()
        self.published += count

    def wait_progress(self, written: int, timeout: float) -> int:
        """The plain queue's count once it reaches ``written`` while the job still runs (the job
        ending first leaves nothing for the kill to interrupt: the test is then wrongly tuned)."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.job.poll() is None, f"the job ended before the kill:\n{self.job_log()}"
            if (seen := self.count(self.plain)) >= written:
                return seen
            assert time.monotonic() < deadline, f"the plain queue did not reach {written}:\n{self.job_log()}"
            time.sleep(0.05)


@pytest.mark.timeout(1800)
def test_a_spark_job_reading_a_replicated_stream_keeps_exactly_once_across_its_leaders_kill(tmp_path):
    if ETCD is None:
        pytest.skip(MISSING_REASON)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (no java on PATH and no JAVA_HOME)")
    started, kill_seed = time.monotonic(), seed()
    cluster = FaultCluster(tmp_path, skewed=None).start()
    run = None
    try:
        n1, n2 = cluster.by_name("n1"), cluster.by_name("n2")
        run = FailoverRun(tmp_path, random.Random(kill_seed), broker=n2.current.proc)
        run.declare_stream_on(n1)
        held = wait_for(lambda: cluster.record(run.stream), RECOVERY_TIMEOUT_S, "the stream's record")
        assert held["leader"] == "n1" and sorted(held["members"]) == ["n1", "n2", "n3"], held
        # the cache holds every id the run can repeat (the batches retried after the kill)
        run.declare_outputs(cache_size=INPUT * 3)
        for queue in (run.deduplicating, run.plain):
            # made on the node that declared them (client-local placement): n2, never killed
            assert queue_row(n2, queue)["node"] == "n2", queue_row(n2, queue)
        run.publish_confirmed(INPUT)
        wait_committed(run.broker, run.stream, INPUT, timeout=120)  # through n2, forwarded to n1

        run.start_job()
        # past the first partition written (the job's JVMs are up, its reads go through n2 to n1) and
        # before half the input, so batches are left to read through the failover
        written_at_kill = run.wait_progress(run.rng.randint(PER_PARTITION, INPUT // 2), JOB_START_TIMEOUT_S)
        epoch = cluster.record(run.stream)["epoch"]
        cluster.kill(n1)
        taken = wait_for(lambda: (r := cluster.record(run.stream)) is not None and r["leader"] != "n1"
                         and r["epoch"] > epoch and r, RECOVERY_TIMEOUT_S, "another node leads the stream")
        cluster.launch(n1)
        run.finish()

        with api(run.broker) as client:
            stream_end = client.info(run.stream).end
        failed_requests = failed_stream_requests(n2, run.stream)
        expected = collections.Counter(content_hash(b"out:" + input_body(i)) for i in range(INPUT))
        plain = run.count(run.plain)
        deduplicated = run.contents(run.deduplicating)
        plain_contents = run.contents(run.plain)
    finally:
        if run is not None:
            run.close()
        cluster.stop()
    lost = expected - deduplicated
    duplicated = deduplicated - expected
    report = {
        "seed": kill_seed, "input": INPUT, "plain queue at the kill": written_at_kill, "new leader": taken["leader"],
        "epoch": [epoch, taken["epoch"]], "stream requests failed at n2 (no leader)": failed_requests,
        "jobs started": run.jobs_started, "stream end": stream_end,
        "deduplicated queue": sum(deduplicated.values()), "lost": sum(lost.values()),
        "duplicated": sum(duplicated.values()), "plain queue": plain,
        "plain duplicates": sum((plain_contents - expected).values()),
        "plain lost": sum((expected - plain_contents).values()), "seconds": round(time.monotonic() - started),
    }
    print("spark cluster failover:", json.dumps(report), flush=True)
    assert stream_end == INPUT, report  # the failover neither added nor dropped an offset
    assert not lost and not duplicated, report
    assert not (expected - plain_contents), report  # the plain queue may repeat, never lose
