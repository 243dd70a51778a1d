"""A local Spark Connect server for tests, started from pyspark's own jars.

``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` (what
pyspark's ``sbin/start-connect-server.sh`` runs) on 127.0.0.1 and a free port, ``local[2]``,
its Python workers running this interpreter (so they import ``warren``). Its own process group:
``stop`` kills it with everything it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.spark.standalone import spark_home

__all__ = ["ConnectServer"]

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ConnectServer:
    folder: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "connect.log"

    def start(self, timeout: float = 180.0) -> ConnectServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        env = {**os.environ, "SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable}
        cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--class", SERVER_CLASS,
               "--name", "warren tests connect server", "--master", "local[2]",
               "--driver-memory", "768m",
               "--conf", f"spark.connect.grpc.binding.port={self.port}",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.pyspark.python={sys.executable}",
               "--conf", "spark.ui.enabled=false",
               "--conf", "spark.sql.shuffle.partitions=2",  # not 200 tasks for a count(distinct) of a few rows
               "--conf", "spark.sql.session.timeZone=UTC",
               "--conf", f"spark.local.dir={self.folder / 'local'}",
               "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=str(self.folder), start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Connect server exited with {self.proc.returncode}:\n"
                                   f"{self.log.read_text(errors='replace')[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Connect server did not listen within {timeout:g}s:\n"
                                   f"{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
