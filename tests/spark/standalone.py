"""A Spark standalone cluster on 127.0.0.1 for tests, started from pyspark's own jars.

``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` of the
installed pyspark: a master and N workers, every one on ephemeral ports (``--port 0``; the
ports are read back from their logs), each worker with its own work folder and one core. Each
daemon runs in its own process group, so killing a worker (``kill_worker``) also kills the
executor it launched and that executor's Python workers; ``stop`` kills everything left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cluster", "spark_home"]

DAEMON_MEMORY = "256m"  # the master's and workers' own JVMs (executors get spark.executor.memory)
# the master and workers only schedule: the quick JIT and one GC thread start them for less CPU
DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_STARTED = re.compile(r"Running task \S+ in stage \S+ \(TID (\d+)\)")
_FINISHED = re.compile(r"Finished task \S+ in stage \S+ \(TID (\d+)\)")
_ATTEMPT = re.compile(r"Running task (\d+)\.(\d+) in stage (\S+) \(TID")


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path


@dataclass
class Cluster:
    folder: Path
    master_url: str = ""
    master: Daemon | None = None
    workers: list[Daemon] = field(default_factory=list)

    def _env(self) -> dict:
        env = dict(os.environ)
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
                   SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTIONS, SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(self.folder / "logs"))
        return env

    def _spawn(self, name: str, args: list[str]) -> Daemon:
        log = self.folder / f"{name}.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), *args], stdout=sink,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(),
                                    cwd=str(self.folder), start_new_session=True)
        return Daemon(name, proc, log)

    @staticmethod
    def _wait_for(daemon: Daemon, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            text = daemon.log.read_text(errors="replace") if daemon.log.exists() else ""
            found = re.search(pattern, text)
            if found:
                return found
            if daemon.proc.poll() is not None:
                raise RuntimeError(f"{daemon.name} exited with {daemon.proc.returncode}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{daemon.name}: no {pattern!r} within {timeout:g}s:\n{text[-3000:]}")
            time.sleep(0.2)

    def start(self, workers: int = 2, timeout: float = 120.0) -> Cluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", "0", "--webui-port", "0"])
        found = self._wait_for(self.master, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", timeout)
        self.master_url = found.group(1)
        self.ensure_workers(workers, timeout)
        return self

    def _spawn_worker(self) -> Daemon:
        index = len(self.workers)
        work = self.folder / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        worker = self._spawn(f"worker-{index}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            "--cores", "1", "--memory", "1g", "--work-dir", str(work), self.master_url])
        self.workers.append(worker)
        return worker

    def add_worker(self, timeout: float = 120.0) -> Daemon:
        worker = self._spawn_worker()
        self._wait_for(worker, r"Successfully registered with master", timeout)
        return worker

    def live_workers(self) -> list[Daemon]:
        return [w for w in self.workers if w.proc.poll() is None]

    def ensure_workers(self, count: int, timeout: float = 120.0) -> list[Daemon]:
        """Start workers until ``count`` are alive (started side by side, then each waited for:
        a JVM's start-up is mostly single-threaded, so two overlap well even on two cores)."""
        started = [self._spawn_worker() for _ in range(count - len(self.live_workers()))]
        for worker in started:
            self._wait_for(worker, r"Successfully registered with master", timeout)
        return self.live_workers()

    def executors(self, worker: Daemon) -> set[tuple[str, str]]:
        """(application id, executor id) of every executor ``worker`` launched: its work folder
        holds ``<app id>/<executor id>/stderr`` for each."""
        work = self.folder / worker.name
        return {(p.parent.parent.name, p.parent.name) for p in work.glob("app-*/*/stderr")}

    def running_tasks(self, worker: Daemon, ignore: set[tuple[str, str]] = frozenset()) -> int:
        """Tasks an executor of ``worker`` (other than those in ``ignore``) has started and not
        finished, from its log: executors log at INFO, "Running task 1.0 in stage 3.0 (TID 7)"
        when a task starts and "Finished task ... (TID 7)" when it ends."""
        running = 0
        for app, executor in self.executors(worker) - set(ignore):
            try:
                text = (self.folder / worker.name / app / executor / "stderr").read_text(errors="replace")
            except OSError:
                continue
            running += len(set(_STARTED.findall(text)) - set(_FINISHED.findall(text)))
        return running

    def all_executors(self) -> set[tuple[str, str, str]]:
        """(worker name, application id, executor id) of every executor launched so far."""
        return {(w.name, app, executor) for w in self.workers for app, executor in self.executors(w)}

    def task_attempts(self, ignore: set[tuple[str, str, str]] = frozenset()) -> list[tuple[str, int]]:
        """("<task index> in stage <stage>", attempt) of every task the executors (other than
        those in ``ignore``, from ``all_executors``) started: attempt 1 or more is a re-run."""
        found = []
        for name, app, executor in self.all_executors() - set(ignore):
            try:
                text = (self.folder / name / app / executor / "stderr").read_text(errors="replace")
            except OSError:
                continue
            found.extend((f"{index} in stage {stage}", int(attempt))
                         for index, attempt, stage in _ATTEMPT.findall(text))
        return found

    def kill_worker_during_a_task(self, worker: Daemon, ignore: set[tuple[str, str]] = frozenset()) -> bool:
        """SIGKILL ``worker`` (and its executor) if its executor is running a task now; False,
        and nothing killed, if not. The executor and its Python workers are stopped (SIGSTOP)
        while its log is read, so the task cannot finish between the look and the kill."""
        if not self.running_tasks(worker, ignore):
            return False
        descendants = _children(worker.proc.pid)
        _signal_all(descendants, signal.SIGSTOP)
        if self.running_tasks(worker, ignore):
            self.kill_worker(worker)
            return True
        _signal_all(descendants, signal.SIGCONT)
        return False

    def executor_running(self, worker: Daemon) -> bool:
        """Whether ``worker`` launched an executor (its work folder has an app folder)."""
        return bool(self.executors(worker))

    @staticmethod
    def kill(daemon: Daemon) -> None:
        """SIGKILL the daemon's whole process group (its executor and Python workers too)."""
        if daemon.proc.poll() is None:
            try:
                os.killpg(daemon.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            daemon.proc.wait(timeout=30)

    def kill_worker(self, worker: Daemon) -> None:
        # the executor is a child of the worker but may have its own group: kill it by its pid too
        _signal_all(_children(worker.proc.pid), signal.SIGKILL)
        self.kill(worker)

    def stop(self) -> None:
        for worker in self.workers:
            self.kill_worker(worker)
        if self.master is not None:
            self.kill(self.master)


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), deepest last."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        path = Path(f"/proc/{parent}/task/{parent}/children")
        try:
            kids = [int(k) for k in path.read_text().split()]
        except (OSError, ValueError):
            kids = []
        found.extend(kids)
        frontier.extend(kids)
    return found
