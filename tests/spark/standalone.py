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
                   SPARK_NO_DAEMONIZE="1", SPARK_LOG_DIR=str(self.folder / "logs"))
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
        for _ in range(workers):
            self.add_worker(timeout)
        return self

    def add_worker(self, timeout: float = 120.0) -> Daemon:
        index = len(self.workers)
        work = self.folder / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        worker = self._spawn(f"worker-{index}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            "--cores", "1", "--memory", "1g", "--work-dir", str(work), self.master_url])
        self._wait_for(worker, r"Successfully registered with master", timeout)
        self.workers.append(worker)
        return worker

    def executor_running(self, worker: Daemon) -> bool:
        """Whether ``worker`` launched an executor (its work folder has an app folder)."""
        work = self.folder / worker.name
        return any(work.glob("app-*/*/stderr"))

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
        for pid in _children(worker.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.kill(worker)

    def stop(self) -> None:
        for worker in self.workers:
            self.kill_worker(worker)
        if self.master is not None:
            self.kill(self.master)


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
