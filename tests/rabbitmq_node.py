"""A private RabbitMQ node for interoperability tests (shovels, federation; reusable by others).

``rabbitmq_node`` (session-scoped, in tests/conftest.py) starts Debian's ``rabbitmq-server`` as
a node of its own: name ``warren-test-<uuid>@localhost``, ephemeral AMQP, distribution and
management and Prometheus ports, its database, logs, Erlang cookie (``HOME``) and
enabled-plugins file in a temporary folder, with rabbitmq_management, rabbitmq_prometheus,
rabbitmq_shovel(_management) and rabbitmq_federation(_management) enabled. It never touches
the machine's shared node: it is stopped with SIGTERM to its own rabbitmq-server process and,
if it has not gone 2 s later, its own PIDs are killed. Its management API samples statistics
every second (RabbitMQ's default: 5 s), so tests that wait for counts wait less. Starting it
costs about 6 s on an idle machine (15-20 s on a loaded one), so one node serves the whole
session. Tests that need it are skipped, with the reason, where rabbitmq-server is not installed
(``RABBITMQ_SERVER`` overrides where it is looked for).

    def test_x(rabbitmq_node):
        rabbitmq_node.amqp_url      # amqp://guest:guest@127.0.0.1:PORT/%2F
        rabbitmq_node.http_url      # http://127.0.0.1:PORT (guest/guest)
        rabbitmq_node.prometheus_url  # http://127.0.0.1:PORT (/metrics, /metrics/per-object)
        rabbitmq_node.host, rabbitmq_node.amqp_port
        rabbitmq_node.add_vhost(name); rabbitmq_node.ctl("list_queues", "-p", name)

``python -m tests.rabbitmq_node`` starts one by hand (its URLs printed; Ctrl-C stops it), e.g.
for ``WARREN_TEST_BROKER_URL``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tests.ports import free_ports

__all__ = ["RabbitNode", "start_rabbitmq_node", "rabbitmq_missing", "RABBITMQ_SERVER", "node_env", "prepare_node"]

RABBITMQ_SERVER = os.environ.get("RABBITMQ_SERVER", "/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQCTL = os.path.join(os.path.dirname(RABBITMQ_SERVER), "rabbitmqctl")
START_TIMEOUT_S = 90.0  # ~10 s on an idle machine; the shared machine is often loaded
STOP_TIMEOUT_S = 30.0
STOP_GRACE_S = 2.0  # RabbitMQ itself has stopped by then (see RabbitNode.stop)
PLUGINS = ("rabbitmq_management", "rabbitmq_prometheus", "rabbitmq_shovel", "rabbitmq_shovel_management", "rabbitmq_federation",
           "rabbitmq_federation_management")


def rabbitmq_missing() -> str | None:
    """Why a private node cannot start here, or None."""
    if not os.path.exists(RABBITMQ_SERVER) or not os.path.exists(RABBITMQCTL):
        return f"rabbitmq-server is not installed ({RABBITMQ_SERVER} not found; Debian: apt install rabbitmq-server)"
    return None


@dataclass
class RabbitNode:
    name: str
    amqp_port: int
    http_port: int
    prometheus_port: int
    base: Path
    env: dict
    proc: subprocess.Popen
    host = "127.0.0.1"  # a class attribute (not a field): every listener is on loopback

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    def url(self, vhost: str = "/", user: str = "guest", password: str = "guest") -> str:
        return f"amqp://{user}:{password}@127.0.0.1:{self.amqp_port}/{quote(vhost, safe='')}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def ctl(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        r = subprocess.run([RABBITMQCTL, "-n", self.name, *args], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed ({r.returncode}): {r.stderr or r.stdout}")
        return r.stdout

    def api(self, method: str, path: str, body=None, timeout: float = 30.0):
        """(status, decoded JSON or None) from the node's management API as guest."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.http_url + path, data=data, method=method, headers={
            "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
            "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, payload = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, payload = e.code, e.read()
        try:
            return status, json.loads(payload) if payload else None
        except ValueError:
            return status, payload

    def add_vhost(self, vhost: str) -> None:
        status, body = self.api("PUT", f"/api/vhosts/{quote(vhost, safe='')}", {})
        assert status in (201, 204), body
        status, body = self.api("PUT", f"/api/permissions/{quote(vhost, safe='')}/guest",
                                {"configure": ".*", "write": ".*", "read": ".*"})
        assert status in (201, 204), body

    def delete_vhost(self, vhost: str) -> None:
        self.api("DELETE", f"/api/vhosts/{quote(vhost, safe='')}")

    def log(self) -> str:
        out = []
        for p in sorted((self.base / "log").glob("*.log")):
            out.append(p.read_text(errors="replace")[-20000:])
        return "\n".join(out)

    def _pids(self) -> list[int]:
        """The script's PID (not reaped yet, so never reused) and the VM's, while it is still
        this node's VM (its environment names the node: a PID of an exited VM may be reused)."""
        pids = [self.proc.pid]
        try:
            vm = int((self.base / "node.pid").read_text().strip())
            if f"RABBITMQ_NODENAME={self.name}\0".encode() in Path(f"/proc/{vm}/environ").read_bytes():
                pids.append(vm)
        except (OSError, ValueError):
            pass
        return pids

    def kill9(self) -> None:
        """kill -9 of this node's VM (for crash tests); the fixture starts no other."""
        for pid in self._pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """SIGTERM to rabbitmq-server, whose script passes it to its VM: RabbitMQ closes its
        listeners, connections and stores within a few ms, but the VM then lingers ~6 s before it
        exits; the node's files are thrown away, so after STOP_GRACE_S what is left is killed."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        for pid in self._pids():  # only what this node started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def start_rabbitmq_node(base: Path | None = None) -> RabbitNode:
    """Start a private node (see the module docstring) and wait until its API answers."""
    base = Path(base or tempfile.mkdtemp(prefix="warren-rabbit-"))
    name = f"warren-test-{uuid.uuid4().hex[:12]}@localhost"
    amqp_port, http_port, prometheus_port, env = prepare_node(base, name, PLUGINS, home=base)
    with open(base / "server.out", "wb") as out:
        proc = subprocess.Popen([RABBITMQ_SERVER], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=base, start_new_session=True)
    node = RabbitNode(name, amqp_port, http_port, prometheus_port, base, env, proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (base / "server.out").read_text(errors="replace")
            raise RuntimeError(f"rabbitmq-server exited with {proc.returncode}:\n{text[-5000:]}\n{node.log()[-5000:]}")
        try:
            status, _ = node.api("GET", "/api/overview", timeout=2)
            if status == 200:
                with urllib.request.urlopen(node.prometheus_url + "/metrics", timeout=5):
                    return node  # both plugins' listeners answer
        except OSError:
            pass
        time.sleep(0.3)
    node.stop()
    raise RuntimeError(f"rabbitmq node {name} did not start in {START_TIMEOUT_S}s:\n{node.log()[-5000:]}")


def remove_node_files(node: RabbitNode) -> None:
    shutil.rmtree(node.base, ignore_errors=True)


def main() -> None:
    """``python -m tests.rabbitmq_node``: start a private node, print its URLs, stop it on
    Ctrl-C or SIGTERM. For the client tests' other mode, on a machine with no RabbitMQ running:
    ``WARREN_TEST_BROKER_URL=<its amqp URL> pytest tests/e2e/test_x.py``."""
    import sys
    node = start_rabbitmq_node()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        print(f"amqp:       {node.amqp_url}\nhttp:       {node.http_url} (guest/guest)\n"
              f"prometheus: {node.prometheus_url}\nnode:       {node.name} (files in {node.base})", flush=True)
        while node.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()
        remove_node_files(node)


if __name__ == "__main__":
    main()


def prepare_node(base: Path, name: str, plugins, home: Path, **more: str) -> tuple[int, int, int, dict]:
    """A private node's folder ``base`` (its config, plugins, database and log folders) on free
    ports: (AMQP port, management port, Prometheus port, rabbitmq-server's environment)."""
    (base / "mnesia").mkdir(parents=True, exist_ok=True)
    (base / "log").mkdir(exist_ok=True)
    amqp_port, dist_port, http_port, prometheus_port = free_ports(4)
    (base / "enabled_plugins").write_text("[" + ",".join(plugins) + "].\n")
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{amqp_port}\n"
        f"management.tcp.port = {http_port}\nmanagement.tcp.ip = 127.0.0.1\n"
        f"prometheus.tcp.port = {prometheus_port}\nprometheus.tcp.ip = 127.0.0.1\n"
        "collect_statistics_interval = 1000\n"  # management statistics every 1 s (default 5 s)
        "log.console = false\nlog.file.level = info\n")
    (base / "rabbitmq-env.conf").write_text("")
    return amqp_port, http_port, prometheus_port, node_env(base, name, amqp_port, dist_port, home, **more)


def node_env(base: Path, name: str, amqp_port: int, dist_port: int, home: Path, **more: str) -> dict:
    """rabbitmq-server's environment for a private node in folder ``base``: nothing of the
    caller's ``RABBITMQ_``/``ERL_`` settings, its own cookie (``home``) and files; ``more`` adds
    variables (a cluster's own ``ERL_EPMD_PORT``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
    env.update({
        "HOME": str(home),
        "RABBITMQ_NODENAME": name, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(amqp_port), "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
        "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
        "RABBITMQ_PID_FILE": str(base / "node.pid"),
        "RABBITMQ_PLUGINS_EXPAND_DIR": str(base / "plugins-expand"),
        "RABBITMQ_FEATURE_FLAGS_FILE": str(base / "feature_flags"),
        "RABBITMQ_QUORUM_DIR": str(base / "quorum"),
        **more,
    })
    return env
