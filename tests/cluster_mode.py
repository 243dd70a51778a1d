"""WARREN_TEST_CLUSTER=1: every broker the fixtures start is a two-node cluster, the client on
node 2 and the queues on node 1 (tools/test-cluster; issue 32's "any node serves any queue").

``launch`` (called by tests/conftest.py's ``launch_broker``) starts node ``n1`` and then node
``n2`` with ``--queue-leader-locator n1``, both with the test's options and one etcd member of
this pytest process (started at the first broker, stopped at the session's end: ``stop_etcd``),
and returns n2's BrokerProc. So a test's client talks to n2, and every queue it declares with a
name lives on n1 and is served through n2 over the inter-node links (server-named and exclusive
queues stay on n2, as RabbitMQ keeps them on the client's node). It returns once each node has
linked to the other, which it does on seeing the other running (the leader locator's test), so
the first declare goes to n1.

Stopping the broker stops both: n2's process is a ``PairedNode``, whose signals (SIGTERM,
SIGKILL, any) reach n1 too and whose ``wait`` waits for both; a restart on the same data folder
(``data_dir``) restarts both in the same cluster (its name derives from the folder), after the
nodes' etcd keys of a killed pair are gone (their leases end in ``--cluster-lease-ttl``; a
second node of a name whose lease lives is refused). ``store_dir`` is n1's data folder: named
queues live there. ``log()`` is n2's (the client's node: tests read it from an offset); n1's is
``queue_node.log()``.

A test that starts its own ``--workers`` broker, or cluster nodes of its own (tests/cluster),
skips: it runs the same in the ordinary run. tests/conftest.py's ``skip_under_cluster(why)`` skips a
test that cannot apply, or needs what the cluster does not do yet.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

QUEUE_NODE, CLIENT_NODE = "n1", "n2"
OWN_NODES_REASON = ("starts its own --workers broker or cluster nodes, the same in every run: the one-process "
                    "run (tools/test) has it")
# a killed node's etcd key goes when its lease ends (--cluster-lease-ttl, 10 s by default)
LEASE_GONE_TIMEOUT_S = 30.0
# the options a test may give a fixed port: node n1 (nobody's client) takes any free one instead
PORT_OPTIONS = ("--port", "--tls-port", "--http-port", "--prometheus-port", "--cluster-port")

_etcd = None  # this pytest process's etcd member (tests/cluster/etcd_harness.py EtcdCluster)


class PairedNode(subprocess.Popen):
    """Node n2's process: a signal to it reaches node n1 too, and ``wait`` waits for both, so a
    test that stops, kills or waits for "the broker" does so to the whole cluster."""

    partner: subprocess.Popen | None = None
    _after_me: int | None = None  # SIGTERM: given to node n1 once node n2 has stopped (``wait``)

    def send_signal(self, sig: int) -> None:
        super().send_signal(sig)
        if self.partner is None or self.partner.poll() is not None:
            return
        if sig == signal.SIGTERM and self.poll() is None:
            # node n2 stops first, as one node would: what its clients sent node n1's queues
            # reaches n1 before n1 stops too
            self._after_me = sig
        else:
            self.partner.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        code = super().wait(timeout)
        if self.partner is not None:
            if self._after_me is not None and self.partner.poll() is None:
                self.partner.send_signal(self._after_me)
            self._after_me = None
            self.partner.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return code


@functools.cache
def _broker_proc_class():
    from tests.conftest import BrokerProc

    @dataclass
    class ClusterBrokerProc(BrokerProc):
        """Node n2 (the client's), with node n1 (the queues') as ``queue_node``."""

        queue_node: BrokerProc | None = None

        def store_dir(self, vhost: str = "/", queue: str | None = None) -> Path:
            assert self.queue_node is not None and self.queue_node.data_dir is not None
            return self.queue_node.data_dir

        def store_dirs(self) -> list[Path]:
            return [self.queue_node.data_dir, self.data_dir]

    return ClusterBrokerProc


def etcd():
    global _etcd
    if _etcd is None:
        from tests.cluster.etcd_harness import ETCD, MISSING_REASON, EtcdCluster
        if ETCD is None:
            pytest.skip(MISSING_REASON)
        _etcd = EtcdCluster(Path(tempfile.mkdtemp(prefix="warren-test-etcd-")), 1).start()
    return _etcd


def stop_etcd() -> None:
    """The session's end: this process's etcd member stopped (by its PID) and its folder removed."""
    global _etcd
    if _etcd is not None:
        _etcd.stop()
        shutil.rmtree(_etcd.base, ignore_errors=True)
        _etcd = None


def _n1_options(extra: tuple[str, ...]) -> list[str]:
    """The test's options for node n1: the same, a fixed port made any free one."""
    out = list(extra)
    for i, opt in enumerate(out[:-1]):
        if opt in PORT_OPTIONS and out[i + 1].isdigit() and int(out[i + 1]) > 0:
            out[i + 1] = "0"
    return out


def _wait_keys_gone(cluster: str, name: str, timeout: float) -> None:
    """Until node ``name``'s key of ``cluster`` is gone from etcd (a killed node's lease ended)."""
    key = f"/warren/{cluster}/nodes/{name}"
    deadline = time.monotonic() + timeout
    while key in etcd().get_prefix(key):
        if time.monotonic() > deadline:
            raise RuntimeError(f"etcd key {key} still held {timeout:g} s later: node {name}'s lease did not end")
        time.sleep(0.1)


def _linked_from(node, other: str) -> bool:
    """Whether ``other`` dialled ``node`` (each node dials every node it sees running, at once:
    warren/cluster/links.py ``link_all``): ``other`` then counts ``node`` running. Read in the log,
    which needs no user (a test may start a broker without guest)."""
    return f"cluster: node {other} linked from" in node.log()


def _wait_each_sees_the_other(n1, n2, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for node, other in ((n1, CLIENT_NODE), (n2, QUEUE_NODE)):
        while not _linked_from(node, other):
            for proc in (n1.proc, n2.proc):
                if proc.poll() is not None:
                    raise RuntimeError(f"a node exited with {proc.returncode}:\n{n2.log()}\n{n1.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {other} did not link to the other node in {timeout:g} s:"
                                   f"\n{n2.log()}\n{n1.log()}")
            time.sleep(0.05)


def launch(tmp: Path, extra: tuple[str, ...], data_dir: Path | None, start_timeout: float | None):
    """tests/conftest.py's ``launch_broker`` under WARREN_TEST_CLUSTER: the two nodes, n2's
    BrokerProc returned (see the module's doc)."""
    from tests.conftest import BROKER_WORKERS, START_TIMEOUT_S, launch_node
    if "--workers" in extra or any(opt.startswith("--cluster-") for opt in extra):
        pytest.skip(OWN_NODES_REASON)
    if BROKER_WORKERS > 1:
        raise pytest.UsageError("WARREN_TEST_CLUSTER and WARREN_TEST_BROKER_WORKERS > 1 together: a clustered "
                                "node does not run workers yet")
    start_timeout = START_TIMEOUT_S if start_timeout is None else start_timeout
    data_dir = data_dir or tmp / "data"
    queue_dir = data_dir.parent / f"{data_dir.name}-{QUEUE_NODE}"
    # one cluster per data folder: a restart on the same folder is the same cluster
    cluster = "t" + hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:12]
    endpoints = etcd().endpoints

    def options(name: str) -> list[str]:
        return ["--cluster-etcd", endpoints, "--cluster-name", cluster, "--node-name", name]

    _wait_keys_gone(cluster, QUEUE_NODE, LEASE_GONE_TIMEOUT_S)
    n1 = launch_node(tmp, *_n1_options(extra), *options(QUEUE_NODE), data_dir=queue_dir,
                     start_timeout=start_timeout)
    try:
        _wait_keys_gone(cluster, CLIENT_NODE, LEASE_GONE_TIMEOUT_S)
        n2 = launch_node(tmp, *extra, *options(CLIENT_NODE), "--queue-leader-locator", QUEUE_NODE,
                         data_dir=data_dir, start_timeout=start_timeout, process_class=PairedNode)
    except BaseException:
        n1.stop()
        raise
    n2.proc.partner = n1.proc
    client = _broker_proc_class()(**{f: getattr(n2, f) for f in n2.__dataclass_fields__}, queue_node=n1)
    try:
        _wait_each_sees_the_other(n1, client, start_timeout)
    except BaseException:
        client.stop()
        raise
    return client
