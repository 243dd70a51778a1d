"""The fault harness's cluster and its faults (issue 33): three etcd members and N Warren nodes as
processes on this machine, every link between them through the fault proxy (proxy.py), and the
faults a run injects one cycle at a time.

Wiring: each node reaches each etcd member through a proxy listener of its own (source = the
node, target = ``etcd<i>``), and the other nodes reach its cluster port through one proxy
listener (``--cluster-advertise``: the proxy learns who dials from the link's first line). So a
partition is a state of the proxy's links, for one node or a group, from the other nodes, from
etcd, or both. Clients (workload.py) connect to the nodes' AMQP ports directly: a client of a
partitioned node stays on it, as a client of a real partitioned machine would.

Each node keeps its ports and data folder across restarts, so clients reconnect to the same URLs.
One node may run with its wall clock skewed (libfaketime, monotonic clock untouched: leases count
on that) and every node runs with the slow-disk shim (slow_fsync.c, built here with the system's
C compiler) ready, its delay 0 until a slow-disk fault writes one.

Faults (``FAULTS``), each ``inject`` returning once the cluster should be whole again:

* ``kill-leader``: kill -9 of the queue's leader; back once another node took the queue.
* ``kill-follower``: kill -9 of a follower (a member of the queue); back once the queue confirmed
  more without it.
* ``kill-etcd``: kill -9 of one etcd member of three; back once more was confirmed.
* ``pause-leader``: SIGSTOP of the leader until another node took the queue (past its lease),
  then SIGCONT: it must stop serving as it resumes.
* ``partition-leader``: the leader cut from the other nodes and from etcd until another took it.
* ``leader-from-etcd``: the leader cut from etcd alone (its links to the followers stay).
* ``leader-from-nodes``: the leader cut from the other nodes alone (etcd still renews its
  lease: nobody takes the queue; its confirms fail meanwhile), for two lease TTLs.
* ``slow-disk``: every fsync of the leader 300 ms late, for two lease TTLs.
* ``links-slow``: every link between nodes 200 ms late each way, for two lease TTLs.
* ``links-cut``: every link of the leader to and from the other nodes reset once (they dial again).
* ``links-drop``: the leader's links to and from the other nodes refused (reset) for two lease
  TTLs: as ``leader-from-nodes``, the peers hearing a refusal rather than silence.
* ``kill-followers``: kill -9 of its followers (a majority gone: nothing may be confirmed) for two
  lease TTLs, then both started again.

Every node start and kill is recorded (``launches``) and each node's log is read for its serving
intervals (warren/cluster/replicas.py, "Serving"), the ones a kill -9 left open ended at the kill.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.etcd_harness import EtcdCluster
from tests.cluster.faults.proxy import FaultProxy
from tests.conftest import BrokerProc, launch_node
from tests.ports import restartable_ports

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SHIM_SOURCE = Path(__file__).with_name("slow_fsync.c")
RECOVERY_TIMEOUT_S = 90.0  # a fault's effect (a new leader, more confirms) and the cluster whole again
RESTART_TIMEOUT_S = 60.0  # a killed node started again: refused while its old lease lives, so retried
SLOW_FSYNC_MS = 300
LINK_DELAY_S = 0.2
FAULTS = ("kill-leader", "kill-follower", "kill-etcd", "pause-leader", "partition-leader", "leader-from-etcd",
          "leader-from-nodes", "slow-disk", "links-slow", "links-cut", "links-drop", "kill-followers")

INTERVAL = re.compile(r"lease interval of (?:quorum queue|stream) '(?P<queue>.*)' in vhost '(?P<vhost>.*)', epoch (?P<epoch>\d+), "
                      r"node (?P<node>\S+): (?:serving from (?P<start>[\d.]+)|served until (?P<end>[\d.]+))")


def build_shim(out_dir: Path) -> Path | None:
    """slow_fsync.c built as a shared library, or None without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    target = out_dir / "slow_fsync.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(target), str(SHIM_SOURCE), "-ldl"],
                   check=True, capture_output=True, timeout=60)
    return target


@dataclass
class Launch:
    """One start of a node: its log, and when it was killed (time.monotonic()), if it was."""
    proc: BrokerProc
    killed_at: float | None = None


@dataclass
class Node:
    name: str
    amqp_port: int
    http_port: int
    cluster_port: int
    data_dir: Path
    delay_file: Path  # the slow-disk shim's delay, in milliseconds
    advertised_port: int = 0  # the proxy's listener in front of the cluster port
    etcd_urls: list[str] = field(default_factory=list)  # the proxy's listeners in front of each etcd member
    skew: str | None = None  # libfaketime's FAKETIME for this node's wall clock
    launches: list[Launch] = field(default_factory=list)
    paused: bool = False

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F?heartbeat=5&socket_timeout=5"

    @property
    def current(self) -> Launch | None:
        return self.launches[-1] if self.launches else None

    def running(self) -> bool:
        launch = self.current
        return launch is not None and launch.proc.proc is not None and launch.proc.proc.poll() is None


class FaultCluster:
    """etcd (3 members), the proxy and ``size`` Warren nodes; ``stop`` ends every process."""

    def __init__(self, tmp: Path, size: int = 3, lease_ttl: int = 2, skewed: str | None = "n3",
                 skew: str = "+3600s") -> None:
        self.tmp = tmp
        self.lease_ttl = lease_ttl
        self.cluster_name = f"faults{os.getpid()}{int(time.monotonic() * 1000) % 100000}"
        self.etcd = EtcdCluster(tmp / "etcd", 3, restartable=True)
        self.proxy = FaultProxy()
        self.shim: Path | None = None
        ports = restartable_ports(3 * size)  # kept across restarts: below the ephemeral range
        self.nodes = [Node(f"n{i + 1}", ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], tmp / f"data-n{i + 1}",
                           tmp / f"slow-n{i + 1}", skew=skew if f"n{i + 1}" == skewed else None)
                      for i in range(size)]
        self.events: list[tuple[float, str]] = []  # (time.monotonic(), what): the run's own log

    # --- start and stop ----------------------------------------------------------------------

    def start(self) -> "FaultCluster":
        self.etcd.start()
        self.proxy.start()
        self.shim = build_shim(self.tmp)
        for node in self.nodes:
            node.advertised_port = self.proxy.front(node.name, "127.0.0.1", node.cluster_port)
            node.etcd_urls = [f"http://127.0.0.1:{self.proxy.front(f'etcd{i}', '127.0.0.1', m.client_port, source=node.name)}"
                              for i, m in enumerate(self.etcd.members)]
            node.delay_file.write_text("0")
        for node in self.nodes:
            self.launch(node)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            launch = node.current
            if launch is not None and launch.proc.proc is not None and launch.proc.proc.poll() is None:
                if node.paused:
                    launch.proc.proc.send_signal(signal.SIGCONT)
                launch.proc.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.current is not None:
                node.current.proc.stop()
        self.proxy.stop()
        self.etcd.stop()

    def launch(self, node: Node) -> None:
        """Start ``node`` (again): refused while its previous lease lives, so tried until it starts."""
        env = dict(os.environ)
        preload = [str(self.shim)] if self.shim is not None else []
        if node.skew is not None and os.path.exists(FAKETIME_LIB):
            preload.append(FAKETIME_LIB)
            env.update(FAKETIME=node.skew, FAKETIME_DONT_FAKE_MONOTONIC="1", FAKETIME_NO_CACHE="1")
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)
        env["WARREN_SLOW_FSYNC_FILE"] = str(node.delay_file)
        args = ["--workers", "1", "--cluster-etcd", ",".join(node.etcd_urls), "--cluster-name", self.cluster_name,
                "--node-name", node.name, "--cluster-lease-ttl", str(self.lease_ttl), "--port", str(node.amqp_port),
                "--http-port", str(node.http_port), "--cluster-port", str(node.cluster_port),
                "--cluster-advertise", f"127.0.0.1:{node.advertised_port}"]
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            try:
                proc = launch_node(self.tmp, *args, data_dir=node.data_dir,
                                   process_class=functools.partial(subprocess.Popen, env=env))
                break
            except RuntimeError as e:  # refused: its old lease lives a moment longer
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {node.name} did not start again in {RESTART_TIMEOUT_S:g} s: {e}") from None
                time.sleep(0.5)
        node.launches.append(Launch(proc))
        self.note(f"started {node.name} (pid {proc.proc.pid})")

    def kill(self, node: Node) -> None:
        launch = node.current
        launch.killed_at = time.monotonic()
        launch.proc.proc.send_signal(signal.SIGKILL)
        launch.proc.proc.wait(timeout=30)
        node.paused = False
        self.note(f"killed {node.name}")

    def note(self, what: str) -> None:
        self.events.append((time.monotonic(), what))

    # --- what the cluster shows ---------------------------------------------------------------

    def by_name(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def record(self, queue: str, vhost: str = "/") -> dict | None:
        key = (f"/warren/{self.cluster_name}/replicas/{urllib.parse.quote(vhost, safe='')}/"
               f"{urllib.parse.quote(queue, safe='')}")
        value = self.etcd.get_prefix(key).get(key)
        return json.loads(value) if value is not None else None

    def running_members(self) -> set[str]:
        prefix = f"/warren/{self.cluster_name}/nodes/"
        return {k[len(prefix):] for k, v in self.etcd.get_prefix(prefix).items()
                if json.loads(v).get("state") == "running"}

    def whole(self, queue: str) -> bool:
        """Every node running in etcd's view, and the queue's leader among them with every member."""
        record = self.record(queue)
        running = self.running_members()
        return (record is not None and running == {n.name for n in self.nodes}
                and set(record.get("members") or []) <= running)

    def intervals(self) -> list[tuple]:
        """Every serving interval in the nodes' logs: (queue, node, epoch, start, end), end None
        while open; one a kill -9 left open ends at the kill."""
        out = []
        for node in self.nodes:
            for launch in node.launches:
                if launch.proc.log_path is None or not launch.proc.log_path.exists():
                    continue
                open_ = {}
                for line in launch.proc.log_path.read_text(errors="replace").splitlines():
                    m = INTERVAL.search(line)
                    if m is None:
                        continue
                    key = (f"{m['vhost']}/{m['queue']}", int(m["epoch"]))
                    if m["start"] is not None:
                        open_[key] = float(m["start"])
                    elif key in open_:
                        out.append((key[0], node.name, key[1], open_.pop(key), float(m["end"])))
                for (queue, epoch), start in open_.items():
                    out.append((queue, node.name, epoch, start, launch.killed_at))
        return out


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (RuntimeError, OSError, ValueError):  # etcd or a node between two states
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.1)


class Nemesis:
    """Injects one fault at a time into a FaultCluster whose workload (workload.py) runs on
    ``queue``; ``inject(kind)`` returns once the cluster is whole again and the queue confirmed
    more since, and gives the fault's record: kind, node, start, and ``taken`` (time.monotonic()
    when another node took the queue, for the faults that move it)."""

    def __init__(self, cluster: FaultCluster, workload, queue: str) -> None:
        self.cluster = cluster
        self.workload = workload
        self.queue = queue
        self.cycle = 0

    def leader(self) -> Node:
        record = wait_for(lambda: self.cluster.record(self.queue), RECOVERY_TIMEOUT_S, "the queue's record")
        return self.cluster.by_name(record["leader"])

    def _taken_from(self, old: Node, epoch: int) -> float:
        wait_for(lambda: (r := self.cluster.record(self.queue)) is not None and r["leader"] != old.name
                 and r["epoch"] > epoch, RECOVERY_TIMEOUT_S, f"another node than {old.name} takes {self.queue}")
        return time.monotonic()

    def _more_confirmed(self, than: int | None = None, by: int = 20) -> None:
        base = self.workload.counts()["confirmed"] if than is None else than
        wait_for(lambda: self.workload.counts()["confirmed"] >= base + by, RECOVERY_TIMEOUT_S,
                 f"{by} more confirms (from {base}): {self.workload.counts()}")

    def _more_delivered(self, by: int = 20) -> None:
        base = self.workload.counts()["delivered"]
        wait_for(lambda: self.workload.counts()["delivered"] >= base + by, RECOVERY_TIMEOUT_S,
                 f"{by} more deliveries (from {base}): {self.workload.counts()}")

    def inject(self, kind: str) -> dict:
        self.cycle += 1
        c, proxy = self.cluster, self.cluster.proxy
        leader = self.leader()
        epoch = c.record(self.queue)["epoch"]
        others = [n for n in c.nodes if n is not leader]
        # the queue's other members (with more nodes than members, the rest hold no copy)
        members = (c.record(self.queue) or {}).get("members") or []
        followers = [n for n in others if n.name in members] or others
        etcds = [f"etcd{i}" for i in range(len(c.etcd.members))]
        fault = {"cycle": self.cycle, "kind": kind, "node": leader.name, "taken": None}
        hold = 2.0 * c.lease_ttl
        c.note(f"cycle {self.cycle}: {kind} ({leader.name} leads, epoch {epoch})")
        fault["start"] = time.monotonic()
        if kind == "kill-leader":
            c.kill(leader)
            fault["taken"] = self._taken_from(leader, epoch)
            c.launch(leader)
        elif kind == "kill-follower":
            victim = followers[self.cycle % len(followers)]
            fault["node"] = victim.name
            confirmed = self.workload.counts()["confirmed"]
            c.kill(victim)
            self._more_confirmed(confirmed)
            c.launch(victim)
        elif kind == "kill-etcd":
            index = self.cycle % len(c.etcd.members)
            fault["node"] = f"etcd{index}"
            confirmed = self.workload.counts()["confirmed"]
            c.etcd.kill(index)
            c.note(f"killed etcd{index}")
            self._more_confirmed(confirmed)
            c.etcd.restart(index)
            c.note(f"started etcd{index}")
        elif kind == "pause-leader":
            leader.current.proc.proc.send_signal(signal.SIGSTOP)
            leader.paused = True
            c.note(f"paused {leader.name}")
            fault["taken"] = self._taken_from(leader, epoch)
            leader.current.proc.proc.send_signal(signal.SIGCONT)
            leader.paused = False
            c.note(f"resumed {leader.name}")
        elif kind in ("partition-leader", "leader-from-etcd", "leader-from-nodes"):
            cut_nodes = kind in ("partition-leader", "leader-from-nodes")
            cut_etcd = kind in ("partition-leader", "leader-from-etcd")
            if cut_nodes:
                proxy.partition([leader.name], [n.name for n in others])
            if cut_etcd:
                for target in etcds:
                    proxy.set_link(leader.name, target, "blackhole")
            c.note(f"cut {leader.name} from {'the nodes' if cut_nodes else ''}{' and ' if cut_nodes and cut_etcd else ''}"
                   f"{'etcd' if cut_etcd else ''}")
            if cut_etcd:
                fault["taken"] = self._taken_from(leader, epoch)
            else:
                time.sleep(hold)  # the fault's length: nothing to wait for (nobody takes the queue)
            proxy.heal()
            c.note("healed")
        elif kind == "links-slow":
            names = [n.name for n in c.nodes]
            for a in names:
                for b in names:
                    if a != b:
                        proxy.set_link(a, b, "delay", LINK_DELAY_S)
            c.note(f"every node link {LINK_DELAY_S:g} s late")
            time.sleep(hold)  # the fault's length
            proxy.heal()
            c.note("healed")
        elif kind == "links-cut":
            for other in others:
                proxy.set_link(leader.name, other.name, "cut")
                proxy.set_link(other.name, leader.name, "cut")
            c.note(f"cut {leader.name}'s links once")
        elif kind == "links-drop":
            proxy.partition([leader.name], [n.name for n in others], state="drop")
            c.note(f"{leader.name}'s links refused")
            time.sleep(hold)  # the fault's length
            proxy.heal()
            c.note("healed")
        elif kind == "kill-followers":
            fault["node"] = "+".join(n.name for n in followers)
            for victim in followers:
                c.kill(victim)
            time.sleep(hold)  # the fault's length: a majority gone, nothing may be confirmed meanwhile
            for victim in followers:
                c.launch(victim)
        elif kind == "slow-disk":
            leader.delay_file.write_text(str(SLOW_FSYNC_MS))
            c.note(f"slowed {leader.name}'s disk")
            time.sleep(hold)  # the fault's length
            leader.delay_file.write_text("0")
            c.note("disk healed")
        else:
            raise ValueError(f"no fault {kind!r}")
        wait_for(lambda: c.whole(self.queue), RECOVERY_TIMEOUT_S, "every node running and the queue whole")
        self._more_confirmed()
        self._more_delivered()  # the consumers too (a client of a paused node notices by heartbeats)
        fault["end"] = time.monotonic()
        return fault


def recovery_times(faults: list[dict], publishes: list[dict]) -> dict[str, list[float]]:
    """Per fault kind, seconds from the fault's start to the first confirm of a publish sent
    after it (how long publishers were kept waiting; the issue's "time from the kill to the
    first confirm by a new leader" for kill-leader)."""
    confirmed = sorted((p["sent"], p["answered"]) for p in publishes if p["outcome"] == "confirmed")
    out: dict[str, list[float]] = {}
    for fault in faults:
        firsts = [answered for sent, answered in confirmed if sent >= fault["start"]]
        if firsts:
            out.setdefault(fault["kind"], []).append(min(firsts) - fault["start"])
    return out
