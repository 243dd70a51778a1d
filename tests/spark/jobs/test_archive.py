"""``warren pipeline archive``: run as a real process and SIGKILLed mid-way through a
100k-message stream, then restarted from its checkpoint, every message lands in Parquet exactly
once; and its error without Java."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spark.jobs.archive import run_archive
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")

COUNT = 100_000
PER_TRIGGER = 25_000


def _archive_cmd(broker, name: str, out, cp) -> list[str]:
    return [sys.executable, "-m", "warren", "pipeline", "archive", "--stream", name, "--to", str(out),
            "--checkpoint", str(cp), "--url", broker.url, "--http-url", broker.http_url,
            "--max-records-per-trigger", str(PER_TRIGGER), "--records-per-partition", str(PER_TRIGGER // 2),
            "--master", "local[2]"]


def _commits(cp) -> int:
    d = cp / "commits"
    return len([f for f in os.listdir(d) if f.isdigit()]) if d.exists() else 0


@pytest.mark.timeout(420)  # a Spark job started as a process, then resumed here: 30-60 s on a busy 2-core VM,
# over 3 min when the machine is shared with the other test worker and more
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
        deadline = time.monotonic() + 240  # its JVM alone once took 90 s to start on a loaded machine
        while _commits(cp) < 1:
            assert proc.poll() is None, f"archive exited early:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no committed batch in time:\n{log.read_text()}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    t_killed = time.monotonic()
    killed_after = _commits(cp)
    text = log.read_text(errors="replace")
    # progress from the first second: the lag is known before any batch ends
    assert f"archived: 0 rows, 0 rows/s, lag {COUNT:,}" in text, text[-3000:]
    # quiet: Spark's log at ERROR, no start-up WARN lines
    assert " WARN " not in text, text[-3000:]
    assert killed_after < COUNT // PER_TRIGGER, "the first run finished before the kill: nothing was tested"

    # second run, in this process (one Spark start less): the command's own query function,
    # same checkpoint, from there to the end of the stream
    t_restart = time.monotonic()
    query = run_archive(spark, stream=name, path=str(out), checkpoint=str(cp), url=broker.url,
                        http_url=broker.http_url, trigger="availableNow", interval="10 seconds",
                        max_records_per_trigger=PER_TRIGGER, max_bytes_per_trigger=None,
                        starting_offsets="earliest", records_per_partition=PER_TRIGGER // 2,
                        fail_on_data_loss=True, transport="http", report=lambda line: None)
    assert query.exception() is None
    assert _commits(cp) == COUNT // PER_TRIGGER
    print(f"killed after {killed_after} batches at {t_killed - t0:.1f}s, "
          f"restart took {time.monotonic() - t_restart:.1f}s")

    df = spark.read.parquet(str(out))
    stats = df.selectExpr(
        "count(*) as n", "count(distinct offset) as offsets", "min(offset) as lo", "max(offset) as hi",
        "count_if(cast(substring(cast(body as string), 2) as int) = offset) as ok",  # body m000123 at offset 123
    ).collect()[0]
    assert (stats.n, stats.offsets, stats.lo, stats.hi, stats.ok) == (COUNT, COUNT, 0, COUNT - 1, COUNT)


def test_archive_without_java_says_what_is_missing(tmp_path):
    from click.testing import CliRunner

    from warren.spark.jobs.archive import archive_command

    env = {"PATH": str(tmp_path), "JAVA_HOME": None, "PYSPARK_GATEWAY_PORT": None}
    result = CliRunner(env=env).invoke(archive_command, ["--stream", "s", "--to", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "Spark needs a Java runtime (17 or newer)" in result.output
    assert "JAVA_HOME" in result.output


def test_a_pattern_archives_every_matching_stream_and_the_cli_wants_one_of_the_two(spark, broker, tmp_path, uid):
    """``--stream-pattern``: every stream whose whole name matches is archived (run_archive's
    query, as the command runs it), the others not; the command refuses both or neither."""
    from click.testing import CliRunner

    from warren.spark.jobs.archive import archive_command

    names = {f"pat-{uid}-a": 300, f"pat-{uid}-b": 200, f"other-{uid}": 100}
    for name, count in names.items():
        declare_stream(broker, name)
        publish_raw(broker, f"{name}.k", (b"%s-%d" % (name.encode(), i) for i in range(count)),
                    BasicProperties(delivery_mode=2).encode())
        wait_committed(broker, name, count)
    out, cp = tmp_path / "out", tmp_path / "cp"
    query = run_archive(spark, stream=None, stream_pattern=f"pat-{uid}-.*", path=str(out), checkpoint=str(cp),
                        url=broker.url, http_url=broker.http_url, trigger="availableNow", interval="10 seconds",
                        max_records_per_trigger=1000, max_bytes_per_trigger=None, starting_offsets="earliest",
                        records_per_partition=None, fail_on_data_loss=True, transport="http",
                        report=lambda line: None)
    assert query.exception() is None and query.archived_rows == 500
    got = {r.stream: r.n for r in spark.read.parquet(str(out)).groupBy("stream").count()
           .withColumnRenamed("count", "n").collect()}
    assert got == {f"pat-{uid}-a": 300, f"pat-{uid}-b": 200}

    for args in ([], ["--stream", "s", "--stream-pattern", "s.*"]):
        result = CliRunner().invoke(archive_command, [*args, "--to", str(tmp_path / "x")])
        assert result.exit_code == 2 and "give --stream or --stream-pattern" in result.output
