"""Fixtures of the cluster tests: etcd members (etcd_harness.py) and clustered Warren nodes.

Every test skips, with the reason, where Debian's etcd-server is not installed. The nodes are
``warren serve`` processes started by tests/conftest.py's ``launch_broker`` (ephemeral ports,
their own data folders), with ``--workers 1``: a clustered node does not run worker processes
yet, and under tools/test-workers these tests would only repeat the one-process run.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.cluster_nodes import Nodes
from tests.cluster.etcd_harness import ETCD, MISSING_REASON, EtcdCluster


@pytest.fixture(scope="module")
def etcd1(tmp_path_factory) -> EtcdCluster:
    """One etcd member for a module's tests; each test uses a cluster name of its own."""
    if ETCD is None:
        pytest.skip(MISSING_REASON)
    etcd = EtcdCluster(tmp_path_factory.mktemp("etcd1"), 1).start()
    try:
        yield etcd
    finally:
        etcd.stop()


@pytest.fixture
def etcd3(tmp_path) -> EtcdCluster:
    """Three etcd members, for one test (it may kill some)."""
    if ETCD is None:
        pytest.skip(MISSING_REASON)
    etcd = EtcdCluster(tmp_path / "etcd3", 3).start()
    try:
        yield etcd
    finally:
        etcd.stop()


@pytest.fixture
def cluster_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def nodes(tmp_path) -> Nodes:
    n = Nodes(tmp_path)
    try:
        yield n
    finally:
        n.stop_all()


@pytest.fixture(scope="session")
def rabbitmq_cluster(tmp_path_factory):
    """Debian's RabbitMQ 3.10 as a private three-node cluster (tests/rabbitmq_cluster.py), the
    reference Warren's cluster is compared with; shared by the session, so a test that kills or
    forgets a node brings it back before it ends. Skipped where rabbitmq-server is not installed."""
    from tests.rabbitmq_cluster import rabbitmq_missing, start_rabbitmq_cluster
    why = rabbitmq_missing()
    if why:
        pytest.skip(why)
    cluster = start_rabbitmq_cluster(tmp_path_factory.mktemp("rabbitmq-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()
