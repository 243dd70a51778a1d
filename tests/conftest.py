"""Shared fixtures: Warren brokers started as real processes on ephemeral ports.

`broker` is one broker for the whole test session (tests use unique names, so they do not
interfere); `start_broker` starts a private one with extra command-line options (for restart,
heartbeat or shutdown tests) and stops it at the end of the test.

Set WARREN_TEST_BROKER_URL (e.g. amqp://guest:guest@127.0.0.1:5672/) to run the client tests
against another broker, such as RabbitMQ, as a differential check; tests that need a private
broker are then skipped.

Set WARREN_TEST_BROKER_WORKERS=2 to start every Warren these fixtures start as `warren serve
--workers 2` (a supervisor handing each connection to the worker process owning its vhost,
warren/server/workers.py); tests that cannot apply to a multi-process broker skip themselves
with `skip_under_workers("why")`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

EXTERNAL_URL = os.environ.get("WARREN_TEST_BROKER_URL")

# The child processes (some hundred brokers, CLI commands, crash-test children, Spark's Python
# workers) import warren from source. Where PYTHONDONTWRITEBYTECODE is set, each of them compiled
# every module again (about 0.2 s of a broker's 0.7 s start); give them a bytecode cache outside
# the source tree instead, which keeps the point of that setting (nothing written next to the
# sources). Python checks each cached file against its source, so edits are picked up as usual.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), f"warren-tests-pycache-{os.getuid()}")

# --workers N for every broker the fixtures start (1: the ordinary single process). A test that
# passes its own --workers keeps it.
BROKER_WORKERS = int(os.environ.get("WARREN_TEST_BROKER_WORKERS") or 1)
# and with it --worker-mode: vhosts (each worker owns whole vhosts) or queues (one vhost spread
# over the workers, warren/spread)
WORKER_MODE = os.environ.get("WARREN_TEST_WORKER_MODE") or "vhosts"

# WARREN_TEST_CLUSTER=1: every broker the fixtures start is two cluster nodes, the client's node 2
# and node 1 holding its queues (tests/cluster_mode.py, tools/test-cluster)
CLUSTER_MODE = bool(os.environ.get("WARREN_TEST_CLUSTER"))

# A bound on waiting for the ready file (a broker that exits fails at once): at load 15-30 on this
# 2-core machine (session 16) a one-process broker took over 20 s to write it, and dozens of tests
# failed as "broker did not start"; three processes start under --workers 2
START_TIMEOUT_S = 60.0 if BROKER_WORKERS == 1 else 90.0
STOP_TIMEOUT_S = 10.0

# Hypothesis' 200 ms per-example deadline measures the machine, not the code: on a loaded 2-core
# machine running the suite in two workers an example now and then takes 300 ms and the test fails
# as "flaky". Each test stays bounded by pytest-timeout; a property still fails on a wrong answer.
hypothesis_settings.register_profile(
    "warren-tests", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("warren-tests")


# Parallel runs: tools/test runs pytest-xdist's `-n 3 --dist loadfile`. A file is one unit, run
# whole on one worker, so module-scoped fixtures (a broker per module, a browser, a Celery worker)
# start once. The Spark tests (tests/spark) are two units, so that two JVMs may start at once, never
# three (three at once on a loaded machine once took 90 s to start one): "spark", the tests that
# share the worker's SparkSession (the data source's), and "spark-jobs", the tests whose Spark is a
# process of their own per command: `warren pipeline`'s jobs (tests/spark/jobs) and a user's script
# (tests/spark/test_install.py). Each is the run's longest unit, so they are kept about even
# (session 16, at load 15-30: "spark" had taken 19 min of its worker, 10 of them test_install's two
# scripts, when the run was stopped; "spark-jobs" 14 min, 7 of them the standalone cluster's test,
# since marked spark_cluster). Units
# go out in collection order, which the workers sort longest first, judged by the largest
# pytest-timeout mark among a unit's tests (the slow tests carry one), then by the unit's size, so
# that no minute-long file is left to run alone at the end. (xdist's own `loadgroup` cannot serve:
# it renames node ids, which pytest 9.2 no longer lets it do: pytest-xdist issue 1386.)
SPARK_DIR = "tests/spark/"
SPARK_JOBS_DIR = "tests/spark/jobs/"
# Spark in a script of its own: with the jobs
SPARK_OWN_PROCESS = ("tests/spark/test_install.py", "tests/spark/test_faults.py")


def xdist_unit(nodeid: str) -> str:
    """The unit of work a test is sent out in under `--dist loadfile`: its file, "spark-jobs" or
    "spark"."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(SPARK_JOBS_DIR) or path in SPARK_OWN_PROCESS:
        return "spark-jobs"
    return "spark" if path.startswith(SPARK_DIR) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    config.option.loadscopereorder = False  # keep the workers' order (below), not "most tests first"
    return UnitScheduling(config, log)


# Under --workers N (tools/test-workers) a test parametrized to run against the session's RabbitMQ
# node as well as against Warren (a fixture's params=["warren", "rabbitmq"]: the differential
# checks of ctl, limits, permissions, users) runs its RabbitMQ half exactly as in the one-process
# run: that half skips, saying so.
REFERENCE_ONLY_REASON = ("against the RabbitMQ reference node only: nothing of Warren's --workers in it "
                         "(the one-process run has it)")


# The test that starts a worker's SparkSession (tests/spark/conftest.py, session-scoped) is charged
# its JVM's start, and pytest-timeout counts a test's setup: at load 15-30 (session 16) the start
# took over 120 s, the default bound, and the fixture's error then failed every Spark test after it
# in that worker. The first test of each unit that uses it gets this bound instead; the others keep
# theirs.
SPARK_SESSION_START_TIMEOUT_S = 300


def _charge_the_spark_start(units: dict[str, list]) -> None:
    for members in units.values():
        first = next((it for it in members if "spark" in getattr(it, "fixturenames", ())), None)
        if first is None:
            continue
        bound = max((m.args[0] for m in first.iter_markers("timeout") if m.args), default=0)
        if bound < SPARK_SESSION_START_TIMEOUT_S:
            first.add_marker(pytest.mark.timeout(SPARK_SESSION_START_TIMEOUT_S), append=False)


def pytest_collection_modifyitems(config, items):
    if (BROKER_WORKERS > 1 or CLUSTER_MODE) and not EXTERNAL_URL:
        reason = REFERENCE_ONLY_REASON.replace("--workers", "cluster") if CLUSTER_MODE else REFERENCE_ONLY_REASON
        for item in items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            if any(isinstance(v, str) and v == "rabbitmq" for v in params.values()):
                item.add_marker(pytest.mark.skip(reason=reason))
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(xdist_unit(item.nodeid), []).append(item)
    _charge_the_spark_start(units)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def longest_first(members) -> tuple:
        timeouts = [m.args[0] for it in members for m in it.iter_markers("timeout") if m.args]
        return (-max(timeouts, default=0), -len(members))

    items[:] = [it for _, members in sorted(units.items(), key=lambda u: longest_first(u[1])) for it in members]


@dataclass
class BrokerProc:
    host: str
    port: int
    data_dir: Path | None = None
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)
    http_port: int | None = None  # the HTTP API (None against an external broker)
    tls_port: int | None = None  # AMQP over TLS, when started with --tls-port
    # with --workers N: the ready file's list of workers ({"index", "pid", "vhosts", "http_port",
    # "prometheus_port"}); http_port is then the API of the worker that owns "/"
    workers: list[dict] = field(default_factory=list)

    def store_dir(self, vhost: str = "/", queue: str | None = None) -> Path:
        """The data folder holding ``vhost``'s stores (``queue``'s, with --worker-mode queues): with
        --workers, its owning worker's."""
        assert self.data_dir is not None
        if not self.workers:
            return self.data_dir
        if WORKER_MODE == "queues":
            from warren.spread import queue_owner
            assert queue is not None, "with --worker-mode queues each queue has its own worker: name it"
            return self.data_dir / "workers" / str(queue_owner(vhost, queue, len(self.workers)))
        from warren.server.workers import owner_of
        return self.data_dir / "workers" / str(owner_of(vhost, len(self.workers)))

    def store_dirs(self) -> list[Path]:
        """Every data folder that holds stores: the broker's, or with --workers each worker's."""
        assert self.data_dir is not None
        if not self.workers:
            return [self.data_dir]
        return [self.data_dir / "workers" / str(w["index"]) for w in self.workers]

    def http_url_for(self, vhost: str) -> str:
        """The HTTP API that sees ``vhost``'s queues: with --workers, its owning worker's."""
        if not self.workers:
            return self.http_url
        from warren.server.workers import owner_of
        return f"http://{self.host}:{self.workers[owner_of(vhost, len(self.workers))]['http_port']}"

    @property
    def http_url(self) -> str:
        """The HTTP API's base URL (http://127.0.0.1:PORT)."""
        return f"http://{self.host}:{self.http_port}"

    @property
    def url(self) -> str:
        """An amqp:// URL for pika, aio-pika and kombu (vhost "/")."""
        return f"amqp://guest:guest@{self.host}:{self.port}/%2F"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time. Idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)


class WorkersNode(subprocess.Popen):
    """A `warren serve --workers N` the switch (WARREN_TEST_BROKER_WORKERS) started, in a process
    group of its own: a SIGKILL (``kill()``) kills the supervisor and its workers together, as a
    crash of the node would. Killed alone, the supervisor's workers would notice it gone and shut
    down cleanly (flushing what a kill -9 test means to cut off), and a restart on the same data
    folder would race them for its lock. tests/server/test_workers.py kills the supervisor alone."""

    def send_signal(self, sig: int) -> None:
        if sig == signal.SIGKILL and self.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        super().send_signal(sig)


# A test that starts its own `--workers` broker runs the same whatever the session's mode: under
# tools/test-workers it would repeat, minutes of CI for nothing, what the one-process run did.
OWN_WORKERS_REASON = ("starts its own --workers broker, the same in every run: the one-process run "
                      "(tools/test) has it")


def launch_broker(tmp: Path, *extra: str, data_dir: Path | None = None,
                  start_timeout: float | None = None) -> BrokerProc:
    """Start `python -m warren serve` on an ephemeral port and wait until it listens (at most
    ``start_timeout`` seconds, START_TIMEOUT_S by default: long runs under load raise it).
    Under WARREN_TEST_CLUSTER, a two-node cluster whose node 2 is returned (tests/cluster_mode.py)."""
    if CLUSTER_MODE and not EXTERNAL_URL:
        from tests.cluster_mode import launch
        return launch(tmp, extra, data_dir, start_timeout)
    return launch_node(tmp, *extra, data_dir=data_dir, start_timeout=start_timeout)


def launch_node(tmp: Path, *extra: str, data_dir: Path | None = None, start_timeout: float | None = None,
                process_class: type[subprocess.Popen] | None = None) -> BrokerProc:
    """One `warren serve` process (``launch_broker``'s); ``process_class`` instead of Popen."""
    start_timeout = START_TIMEOUT_S if start_timeout is None else start_timeout
    if BROKER_WORKERS > 1 and "--workers" in extra:
        pytest.skip(OWN_WORKERS_REASON)
    data_dir = data_dir or tmp / "data"
    ready = tmp / f"ready-{uuid.uuid4().hex}.json"
    log_path = tmp / f"broker-{uuid.uuid4().hex[:8]}.log"
    args = [
        sys.executable, "-m", "warren", "serve",
        "--host", "127.0.0.1", "--port", "0",
        "--data-dir", str(data_dir), "--ready-file", str(ready), "--http-port", "0", *extra,
    ]
    node = process_class or subprocess.Popen
    if BROKER_WORKERS > 1 and "--workers" not in extra:
        args += ["--workers", str(BROKER_WORKERS), "--worker-mode", WORKER_MODE]
        node = WorkersNode
    log = open(log_path, "wb")
    proc = node(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=node is WorkersNode)
    log.close()
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{log_path.read_text()}")
        if ready.exists():
            info = json.loads(ready.read_text())
            workers = info.get("workers") or []
            http_port = info.get("http_port")
            if workers:  # the API that sees the fixtures' vhost "/" (each worker's sees its own vhosts)
                from warren.server.workers import owner_of
                http_port = workers[owner_of("/", len(workers))]["http_port"]
            return BrokerProc("127.0.0.1", info["port"], data_dir, proc, log_path, args,
                              http_port=http_port, tls_port=info.get("tls_port"), workers=workers)
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"broker did not start in {start_timeout}s:\n{log_path.read_text()}")


def vhost_beside(name: str, of: str = "/") -> str:
    """``name``, or under WARREN_TEST_BROKER_WORKERS ``name`` with a suffix that gives it the same
    owning worker as ``of``: a test that makes a vhost at run time and reads it through the
    fixtures' HTTP API (the API of the worker owning "/", each worker's API sees its own vhosts'
    queues and counters) then sees it there, as one process would show it."""
    if BROKER_WORKERS <= 1 or EXTERNAL_URL:
        return name
    from warren.server.workers import owner_of
    home = owner_of(of, BROKER_WORKERS)
    return next(f"{name}-{i}" for i in range(1000) if owner_of(f"{name}-{i}", BROKER_WORKERS) == home)


def skip_under_workers(why: str) -> None:
    """Skip the calling test when the fixtures start brokers with --workers N > 1
    (WARREN_TEST_BROKER_WORKERS): ``why`` says what cannot apply to a multi-process broker."""
    if BROKER_WORKERS > 1 and not EXTERNAL_URL:
        pytest.skip(f"not under --workers {BROKER_WORKERS}: {why}")


def skip_under_spread(why: str) -> None:
    """Skip the calling test when the fixtures start brokers with --workers N > 1 and
    --worker-mode queues (WARREN_TEST_WORKER_MODE): ``why`` says what that mode does not do yet."""
    if BROKER_WORKERS > 1 and WORKER_MODE == "queues" and not EXTERNAL_URL:
        pytest.skip(f"not under --workers {BROKER_WORKERS} --worker-mode queues: {why}")


def skip_under_cluster(why: str) -> None:
    """Skip the calling test under WARREN_TEST_CLUSTER (tests/cluster_mode.py): ``why`` says what
    cannot apply to a client of node 2 whose queues live on node 1, or what a cluster does not do yet."""
    if CLUSTER_MODE and not EXTERNAL_URL:
        pytest.skip(f"not with the client on cluster node 2 and the queues on node 1: {why}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if CLUSTER_MODE:  # this process's etcd member, once its brokers are stopped
        from tests.cluster_mode import stop_etcd
        stop_etcd()


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> BrokerProc:
    if EXTERNAL_URL:
        u = urlparse(EXTERNAL_URL)
        yield BrokerProc(u.hostname or "127.0.0.1", u.port or 5672)
        return
    b = launch_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def start_broker(tmp_path):
    """Factory: start_broker(*cli_args, data_dir=None) -> BrokerProc, stopped after the test."""
    if EXTERNAL_URL:
        pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
    started: list[BrokerProc] = []

    def start(*extra: str, data_dir: Path | None = None) -> BrokerProc:
        b = launch_broker(tmp_path, *extra, data_dir=data_dir)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def uid() -> str:
    """A short unique suffix for queue and exchange names."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def rabbitmq_node(tmp_path_factory):
    """A private RabbitMQ node (tests/rabbitmq_node.py) with the management, prometheus, shovel
    and federation plugins on ephemeral ports, shared by the session (tests that make users or
    vhosts there give them unique names and delete them); skipped where rabbitmq-server is not
    installed. Tests never use a RabbitMQ they did not start."""
    from tests.rabbitmq_node import rabbitmq_missing, start_rabbitmq_node
    why = rabbitmq_missing()
    if why:
        pytest.skip(why)
    node = start_rabbitmq_node(tmp_path_factory.mktemp("rabbitmq"))
    try:
        yield node
    finally:
        node.stop()
