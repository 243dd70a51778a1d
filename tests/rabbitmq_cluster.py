"""A private three-node RabbitMQ cluster on this machine, the reference for Warren's cluster.

``start_rabbitmq_cluster()`` starts Debian's ``rabbitmq-server`` three times, as
tests/rabbitmq_node.py starts one node: names ``warren-test-<uuid>-N@localhost`` (N = 1, 2, 3),
each with its own data and log folders and its own ephemeral AMQP, distribution, management and
Prometheus ports on 127.0.0.1. The three share one Erlang cookie, in a temporary ``HOME``, and
an ``epmd`` of their own on an ephemeral port (``ERL_EPMD_PORT``), started and stopped by its PID,
so the machine's epmd and its shared node are never touched. Nodes 2 and 3 then join node 1 as
rabbitmqctl users do (``stop_app``, ``join_cluster``, ``start_app``), and the start returns once
node 1's ``/api/nodes`` lists the three as running: 24-32 s at load 3-4 on two cores (the three
boots ~13 s, ``stop_app`` ~6 s, both nodes' at once). Everything started is stopped by its PID.
Tests that need it are skipped, with the reason, where rabbitmq-server is not installed.

    cluster.nodes[0].amqp_url, .http_url, .name, .ctl("cluster_status"), .api("GET", "/api/nodes")
    cluster.nodes[2].kill9(); cluster.nodes[2].restart()   # same name, same data folder
    cluster.stop()

``python -m tests.rabbitmq_cluster`` starts one by hand and prints its URLs (Ctrl-C stops it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_ports
from tests.rabbitmq_node import RABBITMQ_SERVER, RABBITMQCTL, STOP_GRACE_S, RabbitNode, prepare_node, rabbitmq_missing

__all__ = ["ClusterNode", "RabbitCluster", "start_rabbitmq_cluster", "rabbitmq_missing"]

SIZE = 3
START_TIMEOUT_S = 120.0  # one node: ~6 s idle, 15-20 s loaded; three at once on two cores take longer
JOIN_TIMEOUT_S = 120.0
PLUGINS = ("rabbitmq_management", "rabbitmq_prometheus")
EPMD = shutil.which("epmd") or "/usr/bin/epmd"


@dataclass
class ClusterNode(RabbitNode):
    """One member: RabbitNode's ctl, api, log, kill9 and stop, and a restart of the same node."""

    index: int = 0

    def ctl_result(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """rabbitmqctl's exit status, stdout and stderr, for answers that are refusals."""
        return subprocess.run([RABBITMQCTL, "-n", self.name, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def launch(self) -> None:
        with open(self.base / "server.out", "ab") as out:
            self.proc = subprocess.Popen([RABBITMQ_SERVER], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.base, start_new_session=True)

    def answers(self) -> bool:
        """Its management API answers (the node has booted, with its plugins)."""
        if self.proc.poll() is not None:
            text = (self.base / "server.out").read_text(errors="replace")
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{text[-3000:]}\n{self.log()[-3000:]}")
        try:
            status, _ = self.api("GET", "/api/overview", timeout=2)
        except OSError:
            return False
        return status == 200

    def wait_started(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start in {timeout:g} s:\n{self.log()[-5000:]}")
            time.sleep(0.3)

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start it again after kill9() or stop(): the same name, ports and data folder (a
        clustered node rejoins its cluster by itself); returns once its API answers."""
        if self.proc.poll() is None:
            raise RuntimeError(f"{self.name} is still running")
        self.launch()
        self.wait_started(timeout)


@dataclass
class RabbitCluster:
    base: Path
    epmd: subprocess.Popen
    epmd_port: int
    nodes: list[ClusterNode] = field(default_factory=list)

    def running_names(self, via: int = 0) -> set[str]:
        """The names /api/nodes of node ``via`` says are running."""
        status, rows = self.nodes[via].api("GET", "/api/nodes", timeout=5)
        return {r["name"] for r in rows if r.get("running")} if status == 200 else set()

    def wait_running(self, names: set[str], via: int = 0, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Until node ``via``'s /api/nodes shows exactly ``names`` running."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                seen = self.running_names(via)
            except OSError:
                seen = set()
            if seen == names:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"not within {timeout:g} s: running {sorted(names)} (seen {sorted(seen)})")
            time.sleep(0.3)

    def join(self, node: ClusterNode) -> None:
        """``node`` joins node 1, as rabbitmqctl's users do it."""
        node.ctl("stop_app")
        node.ctl("join_cluster", self.nodes[0].name)
        node.ctl("start_app")

    def rejoin(self, index: int) -> None:
        """Node ``index`` (0-based) back as a fresh member after forget_cluster_node: stopped,
        its database wiped (a forgotten node's own database still names the cluster), started,
        joined to node 1 again; returns once node 1 sees every node running."""
        node = self.nodes[index]
        node.stop()
        for folder in ("mnesia", "quorum"):
            shutil.rmtree(node.base / folder, ignore_errors=True)
        (node.base / "mnesia").mkdir()
        (node.base / "feature_flags").unlink(missing_ok=True)
        node.launch()
        node.wait_started()
        self.join(node)
        self.wait_running({n.name for n in self.nodes})

    def stop(self) -> None:
        """Every node (SIGTERM, then SIGKILL of its own PIDs), then the cluster's epmd."""
        for node in self.nodes:  # all at once: each VM lingers a few seconds after SIGTERM
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S  # one grace for the three, not one each
        for node in self.nodes:
            try:
                node.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for node in self.nodes:
            node.kill9()  # what is left of it, by its own PIDs (RabbitNode.stop's second half)
        if self.epmd.poll() is None:
            self.epmd.kill()
        try:
            self.epmd.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def remove_files(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def _node(base: Path, home: Path, prefix: str, index: int, epmd_port: int) -> ClusterNode:
    base.mkdir(parents=True)
    name = f"{prefix}-{index}@localhost"
    # the cluster's one Erlang cookie (HOME), never the shared node's; its own epmd (the CLI reads it too)
    amqp_port, http_port, prometheus_port, env = prepare_node(base, name, PLUGINS, home=home,
                                                              ERL_EPMD_PORT=str(epmd_port))
    return ClusterNode(name, amqp_port, http_port, prometheus_port, base, env, None, index=index)


def _start_epmd(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([EPMD, "-port", str(port), "-address", "127.0.0.1"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"epmd did not listen on {port}")
            time.sleep(0.05)


def start_rabbitmq_cluster(base: Path | None = None) -> RabbitCluster:
    """Start three nodes at once, join 2 and 3 to 1, wait until node 1 sees the three running."""
    base = Path(base or tempfile.mkdtemp(prefix="warren-rabbit-cluster-"))
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    cookie = home / ".erlang.cookie"
    cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(20)))
    cookie.chmod(0o400)
    (epmd_port,) = free_ports(1)
    cluster = RabbitCluster(base, _start_epmd(epmd_port), epmd_port)
    prefix = f"warren-test-{uuid.uuid4().hex[:12]}"
    try:
        for i in range(1, SIZE + 1):
            node = _node(base / f"node{i}", home, prefix, i, epmd_port)
            node.launch()
            cluster.nodes.append(node)
        for node in cluster.nodes:
            node.wait_started()
        others = cluster.nodes[1:]
        with ThreadPoolExecutor(len(others)) as pool:  # stop_app takes ~6 s: both nodes' at once
            list(pool.map(lambda node: node.ctl("stop_app"), others))
            for node in others:  # one join at a time
                node.ctl("join_cluster", cluster.nodes[0].name)
            list(pool.map(lambda node: node.ctl("start_app"), others))
        cluster.wait_running({n.name for n in cluster.nodes})
        return cluster
    except BaseException:
        cluster.stop()
        raise


def main() -> None:
    """Start a cluster, print each node's URLs and how long the start took; Ctrl-C stops it."""
    t0 = time.monotonic()
    cluster = start_rabbitmq_cluster()
    took = time.monotonic() - t0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for n in cluster.nodes:
            print(f"node {n.index}: {n.name}\n  amqp: {n.amqp_url}\n  http: {n.http_url} (guest/guest)\n"
                  f"  prometheus: {n.prometheus_url}\n  files: {n.base}", flush=True)
        print(f"started and joined in {took:.1f} s (load {os.getloadavg()[0]:.2f}); "
              f"rabbitmqctl: HOME={cluster.base / 'home'} ERL_EPMD_PORT={cluster.epmd_port} "
              f"{RABBITMQCTL} -n {cluster.nodes[0].name} cluster_status", flush=True)
        while True:  # a node killed by hand stays down (restart() it from a shell of your own)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        cluster.remove_files()


if __name__ == "__main__":
    main()
