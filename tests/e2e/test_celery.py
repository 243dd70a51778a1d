"""Celery round trips against the broker (issue 12, "Also"): a real worker in a subprocess, the rpc
result backend, classic and quorum default queues (``task_default_queue_type``).

One worker per queue type serves the three tests of the module (module-scoped fixture, stopped
by its PID in every case). The worker runs the threads pool with concurrency 2 and prefetch
multiplier 2, with late acks (what Celery recommends for reliability), so it may hold at most
4 unacked messages. What each test checks:

* round trip: tasks sent, results back through the rpc backend;
* prefetch: 12 blocked tasks leave exactly 8 ready in the queue while the worker holds 4
  (kombu picks global QoS from connection.start's product and version, RabbitMQ 3.x here; on a
  quorum queue Celery turns global QoS off itself, and the bound is the consumer's prefetch);
* ETA tasks do not starve the worker (LavinMQ's Celery checklist, "prefetch starvation"): with
  4 tasks due in a few seconds held, a plain task still runs at once. On a classic queue Celery
  raises the channel's global prefetch for each ETA task it holds; on a quorum queue it sends
  them through its native delayed delivery instead (28 quorum queues with x-message-ttl,
  x-overflow reject-publish and at-least-once dead-lettering, bound by exchange-to-exchange
  bindings), which is exercised end to end.

The same tests run against RabbitMQ (WARREN_TEST_BROKER_URL). Total time: about 15-25 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pika
import pytest

from .helpers import RABBITMQ, connect, message_count, wait_until

celery = pytest.importorskip("celery", reason="celery is in the test extra (pip install -e '.[test]')")

pytestmark = pytest.mark.timeout(90)

CONCURRENCY = 2
PREFETCH_MULTIPLIER = 2
HELD = CONCURRENCY * PREFETCH_MULTIPLIER  # the most unacked messages the worker may hold
DELAYED = [f"celery_delayed_{level}" for level in range(28)] + ["celery_delayed_delivery"]

TASKS_MODULE = '''
import os, time
from celery import Celery

app = Celery("h2celery")
app.conf.update(
    broker_url=os.environ["CELERY_TEST_BROKER"],
    result_backend="rpc://",
    task_default_queue=os.environ["CELERY_TEST_QUEUE"],
    task_default_exchange=os.environ["CELERY_TEST_QUEUE"],
    task_default_exchange_type="topic",  # Celery's native delayed delivery needs a topic exchange
    task_default_routing_key=os.environ["CELERY_TEST_QUEUE"],
    task_default_queue_type=os.environ["CELERY_TEST_QUEUE_TYPE"],
    task_acks_late=True,
    worker_prefetch_multiplier={prefetch},
    worker_enable_remote_control=False,
    broker_connection_retry_on_startup=False,
)


@app.task
def add(x, y):
    return x + y


@app.task
def wait_for(path, limit=20.0):
    """Block until `path` exists (or `limit` seconds passed): keeps a message unacked."""
    deadline = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.path.exists(path)
'''.format(prefetch=PREFETCH_MULTIPLIER)


class Worker:
    def __init__(self, broker, tmp, queue_type: str) -> None:
        self.queue_type = queue_type
        self.queue = f"celery-h2-{queue_type}-{uuid.uuid4().hex[:8]}"
        self.dir = tmp
        (tmp / "h2celery_tasks.py").write_text(TASKS_MODULE)
        self.url = broker.url.replace("amqp://", "pyamqp://")
        self.env = {**os.environ, "PYTHONPATH": str(tmp), "CELERY_TEST_BROKER": self.url,
                    "CELERY_TEST_QUEUE": self.queue, "CELERY_TEST_QUEUE_TYPE": queue_type}
        self.log = tmp / "worker.log"
        self.proc: subprocess.Popen | None = None
        self.app = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "h2celery_tasks", "worker", "--pool=threads",
             f"--concurrency={CONCURRENCY}", "--without-gossip", "--without-mingle", "--without-heartbeat",
             "-n", f"{self.queue}@%h", "--loglevel=INFO", f"--logfile={self.log}"],
            cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if not wait_until(lambda: " ready." in self.text() or self.proc.poll() is not None, timeout=30, interval=0.1):
            raise AssertionError(f"the worker did not start:\n{self.text()[-3000:]}")
        assert self.proc.poll() is None, f"the worker exited:\n{self.text()[-3000:]}"
        sys.path.insert(0, str(self.dir))
        os.environ.update({k: self.env[k] for k in ("CELERY_TEST_BROKER", "CELERY_TEST_QUEUE", "CELERY_TEST_QUEUE_TYPE")})
        import h2celery_tasks
        sys.path.remove(str(self.dir))
        del sys.modules["h2celery_tasks"]
        self.tasks = h2celery_tasks
        self.app = h2celery_tasks.app

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.app is not None:
            self.app.close()
        if self.proc is not None and self.proc.poll() is None:
            # Every task has finished by now. Celery's warm shutdown (SIGTERM) begins only when
            # its consumer loop next wakes up, some 6 s later with the threads pool, against
            # RabbitMQ as here: give it a moment, then kill it
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module", params=["classic", "quorum"])
def worker(request, broker, tmp_path_factory):
    w = Worker(broker, tmp_path_factory.mktemp(f"celery-{request.param}"), request.param)
    try:
        w.start()
        yield w
    finally:
        w.stop()
        print(f"--- celery worker log ({request.param}, tail)\n{w.text()[-4000:]}")  # shown for failures
        c = connect(broker)
        ch = c.channel()
        names = [w.queue] + (DELAYED if request.param == "quorum" else [])
        for name in names:  # tidy, also on a shared RabbitMQ
            try:
                ch.queue_delete(name)
                ch.exchange_delete(name)
            except Exception:
                ch = c.channel()
        c.close()


def test_tasks_round_trip_through_the_rpc_backend(worker):
    results = [worker.tasks.add.delay(i, i) for i in range(10)]
    assert [r.get(timeout=15) for r in results] == [2 * i for i in range(10)]
    # the default queue has the type asked for: re-declaring it so is equivalent
    c = connect_to(worker)
    c.channel().queue_declare(worker.queue, durable=True, arguments={"x-queue-type": worker.queue_type})
    c.close()


def test_the_worker_holds_at_most_prefetch_times_concurrency(worker, tmp_path):
    from kombu import Connection
    with Connection(worker.url) as k:
        k.connect()
        assert k.qos_semantics_matches_spec is False  # kombu takes RabbitMQ 3.x semantics: global QoS
    release = tmp_path / "release"
    results = [worker.tasks.wait_for.delay(str(release)) for _ in range(12)]
    c = connect_to(worker)
    try:
        assert wait_until(lambda: message_count(c, worker.queue) == 12 - HELD, timeout=15), message_count(c, worker.queue)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # and it stays so: no more than HELD taken
            assert message_count(c, worker.queue) == 12 - HELD
            time.sleep(0.1)
    finally:
        release.touch()
        c.close()
    assert all(r.get(timeout=20) for r in results)
    if worker.queue_type == "quorum":
        assert "Global QoS is disabled" in worker.text()


def test_eta_tasks_do_not_starve_the_worker(worker):
    countdown = 4
    eta = [worker.tasks.add.apply_async((i, 100), countdown=countdown) for i in range(HELD)]
    time.sleep(0.5)  # the ETA tasks reached the worker (classic) or the delayed queues (quorum)
    t0 = time.monotonic()
    assert worker.tasks.add.delay(1, 1).get(timeout=countdown) == 2
    assert time.monotonic() - t0 < countdown - 0.5, "the plain task waited for the ETA tasks"
    assert [r.get(timeout=20) for r in eta] == [100 + i for i in range(HELD)]


def connect_to(worker) -> pika.BlockingConnection:
    from urllib.parse import urlparse
    u = urlparse(worker.url)
    return pika.BlockingConnection(pika.ConnectionParameters(
        u.hostname, u.port, "/", pika.PlainCredentials("guest", "guest"), socket_timeout=10))
