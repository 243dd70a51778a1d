"""etcd members as processes for the cluster tests: Debian's ``etcd-server`` (etcd 3.4).

``EtcdCluster(base, size).start()`` starts 1 or 3 members on ephemeral 127.0.0.1 ports, each
with its own data folder under ``base``, and waits (bounded) until every member says it is
healthy (``GET /health``: it has a leader and answers). ``stop()`` ends each member by its PID
(SIGTERM, then SIGKILL past a bound); ``kill(i)`` is a kill -9 of one member, ``restart(i)``
starts it again.
"""

from __future__ import annotations

import base64
import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_ports, restartable_ports

ETCD = shutil.which("etcd")
MISSING_REASON = "etcd is not installed (Debian's etcd-server: apt-get install etcd-server)"
START_TIMEOUT_S = 60.0  # every member healthy (three members on two busy cores elect in a few seconds)
STOP_TIMEOUT_S = 10.0


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                return json.loads(resp.read()).get("health") == "true"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class EtcdCluster:
    base: Path
    size: int = 1
    members: list[Member] = field(default_factory=list)
    restartable: bool = False  # ports below the ephemeral range: a member killed and started again finds them free

    @property
    def urls(self) -> list[str]:
        return [m.url for m in self.members]

    @property
    def endpoints(self) -> str:
        """The ``--cluster-etcd`` value: every member's client URL, comma-separated."""
        return ",".join(self.urls)

    def start(self) -> "EtcdCluster":
        assert ETCD is not None, MISSING_REASON
        ports = restartable_ports(2 * self.size) if self.restartable else free_ports(2 * self.size)
        self.members = [Member(f"etcd{i}", ports[2 * i], ports[2 * i + 1], self.base / f"etcd{i}",
                               self.base / f"etcd{i}.log") for i in range(self.size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        token = f"warren-test-{self.base.name}"
        self._initial, self._token = initial, token
        for m in self.members:
            self._launch(m, initial, token)
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, m: Member, initial: str, token: str) -> None:
        m.data_dir.mkdir(parents=True, exist_ok=True)
        with open(m.log_path, "ab") as log:
            m.proc = subprocess.Popen(
                [ETCD, "--name", m.name, "--data-dir", str(m.data_dir),
                 "--listen-client-urls", m.url, "--advertise-client-urls", m.url,
                 "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
                 "--initial-cluster", initial, "--initial-cluster-token", token,
                 "--initial-cluster-state", "new", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_healthy(self, members: list[Member] | None = None, timeout: float = START_TIMEOUT_S) -> None:
        """Until each member answers /health with true; RuntimeError (with the logs) past ``timeout``."""
        members = self.members if members is None else members
        deadline = time.monotonic() + timeout
        waiting = list(members)
        while waiting:
            for m in list(waiting):
                if m.proc is not None and m.proc.poll() is not None:
                    raise RuntimeError(f"etcd member {m.name} exited with {m.proc.returncode}:\n{m.log()}")
                if m.healthy():
                    waiting.remove(m)
            if not waiting:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {m.name}\n{m.log()[-3000:]}" for m in waiting)
                raise RuntimeError(f"etcd members {[m.name for m in waiting]} not healthy in {timeout:g} s:\n{logs}")
            time.sleep(0.1)

    def get_prefix(self, prefix: str, timeout: float = 5.0) -> dict[str, bytes]:
        """Every key under ``prefix`` -> its value, read through the first member that answers
        (the JSON gateway, as a Warren node reads it)."""
        end = bytearray(prefix.encode())
        end[-1] += 1
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(bytes(end)).decode()}).encode()
        errors = []
        for m in self.members:
            if m.proc is None or m.proc.poll() is not None:
                continue
            try:
                request = urllib.request.Request(m.url + "/v3/kv/range", body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=timeout) as resp:
                    answer = json.loads(resp.read())
            except (OSError, ValueError) as e:
                errors.append(f"{m.name}: {e}")
                continue
            return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
                    for kv in answer.get("kvs") or []}
        raise RuntimeError(f"no etcd member answered a range of {prefix}: {errors}")

    def kill(self, index: int) -> None:
        """kill -9 of one member, by its PID."""
        proc = self.members[index].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self, index: int) -> None:
        """Start a killed member again on its ports and data folder (it rejoins with its data)
        and wait until it is healthy."""
        m = self.members[index]
        assert m.proc is None or m.proc.poll() is not None, f"{m.name} still runs"
        self._launch(m, self._initial, self._token)
        self.wait_healthy([m])

    def stop(self) -> None:
        """Every member ended by its PID: SIGTERM, SIGKILL past the bound. Idempotent."""
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.terminate()
        for m in self.members:
            if m.proc is None:
                continue
            try:
                m.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait(timeout=STOP_TIMEOUT_S)
