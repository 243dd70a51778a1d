"""``warren pipeline archive`` as a real process: SIGKILLed mid-way through a 100k-message
stream, restarted from its checkpoint, every message lands in Parquet exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")

COUNT = 100_000
PER_TRIGGER = 25_000


def _archive_cmd(broker, name: str, out, cp) -> list[str]:
    return [sys.executable, "-m", "warren.spark.archive", "--stream", name, "--to", str(out), "--checkpoint", str(cp),
            "--url", broker.url, "--http-url", broker.http_url, "--max-records-per-trigger", str(PER_TRIGGER),
            "--records-per-partition", str(PER_TRIGGER // 2), "--master", "local[2]"]


def _commits(cp) -> int:
    d = cp / "commits"
    return len([f for f in os.listdir(d) if f.isdigit()]) if d.exists() else 0


@pytest.mark.timeout(300)  # two Spark jobs started as processes: 40-70 s on a busy 2-core machine
def test_archive_killed_mid_way_resumes_exactly_once(spark, broker, tmp_path, uid):
    name = f"archive-{uid}"
    declare_stream(broker, name)
    publish_raw(broker, f"{name}.k", (b"m%06d" % i for i in range(COUNT)), BasicProperties(delivery_mode=2).encode())
    wait_committed(broker, name, COUNT, timeout=60)
    out, cp, log = tmp_path / "out", tmp_path / "cp", tmp_path / "archive.log"
    cmd = _archive_cmd(broker, name, out, cp)
    t0 = time.monotonic()

    # first run: SIGKILL (the whole process group: python, the JVM, its workers) once a batch committed
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _commits(cp) < 1:
            assert proc.poll() is None, f"archive exited early:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no committed batch in time:\n{log.read_text()}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    t_killed = time.monotonic()
    killed_after = _commits(cp)
    assert killed_after < COUNT // PER_TRIGGER, "the first run finished before the kill: nothing was tested"

    # second run: from the checkpoint to the end of the stream
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          timeout=240, start_new_session=True)
    assert done.returncode == 0, done.stdout.decode(errors="replace")
    print(f"killed after {killed_after} batches at {t_killed - t0:.1f}s, second run {time.monotonic() - t_killed:.1f}s")
    assert _commits(cp) == COUNT // PER_TRIGGER

    df = spark.read.parquet(str(out))
    stats = df.selectExpr("count(*) as n", "count(distinct offset) as offsets", "min(offset) as lo",
                          "max(offset) as hi", "count_if(cast(substring(cast(body as string), 2) as int) = offset) as ok"
                          ).collect()[0]
    assert (stats.n, stats.offsets, stats.lo, stats.hi, stats.ok) == (COUNT, COUNT, 0, COUNT - 1, COUNT)
