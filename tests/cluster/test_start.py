"""Starting a cluster (issue 32, item 1): real etcd members and real `warren serve` processes.

What is checked, through etcd's own keys and the processes' exit status and stderr: the first
node of a cluster name creates it and the next joins (a members key each, held by a lease); a
second node of a running name, a data folder of another cluster, a secret file open to others or
not the cluster's, and an etcd out of reach are refused with one line and exit status 1; a node
killed with kill -9 leaves the member list when its lease ends, one stopped cleanly at once;
each node serves AMQP as a single node does. Waits are on the observable key, bounded.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

from tests.cluster.cluster_nodes import members, publish_and_get, wait_until
from warren.cluster.node import ClusterError, join
from warren.config import Config

LEASE_TTL = "2"  # seconds: the killed node's key must go within a few of them
GONE_TIMEOUT_S = 20.0  # TTL 2 s (etcd may round a short lease up), on two busy cores


def test_the_first_node_creates_the_cluster_the_second_joins_and_each_serves_amqp(etcd1, nodes, cluster_name):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    listed = members(etcd1, cluster_name)
    assert sorted(listed) == ["a", "b"]
    assert (listed["a"]["amqp_port"], listed["a"]["http_port"]) == (a.port, a.http_port)
    assert (listed["b"]["amqp_port"], listed["b"]["pid"]) == (b.port, b.proc.pid)
    identity = json.loads(etcd1.get_prefix(f"/warren/{cluster_name}/id")[f"/warren/{cluster_name}/id"])
    assert identity["by"] == "a"
    for node, name in ((a, "a"), (b, "b")):
        record = json.loads((node.data_dir / "cluster.json").read_text())
        assert record == {"cluster_name": cluster_name, "cluster_id": identity["id"], "node_name": name}
        assert publish_and_get(node, f"local-{name}") == f"to local-{name}".encode()
    assert "created by node a" in a.log() and "joined as node b" in b.log()
    check_ctl_cluster_status(a)
    # a clean stop revokes the lease: the key is gone once the process has exited
    b.stop()
    assert sorted(members(etcd1, cluster_name)) == ["a"]


def test_a_running_name_and_a_wrong_secret_are_refused(etcd1, nodes, cluster_name, tmp_path):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    line = nodes.refused(etcd1.endpoints, cluster_name, "a")
    assert line.startswith(f"Error: node name 'a' is already running in cluster '{cluster_name}' "
                           f"(pid {a.proc.pid} on "), line
    assert "its lease is alive" in line
    assert members(etcd1, cluster_name)["a"]["pid"] == a.proc.pid  # the running one is untouched
    # the secret: made by the creating node and kept in etcd when no file is given
    kept = etcd1.get_prefix(f"/warren/{cluster_name}/")
    assert len(kept[f"/warren/{cluster_name}/secret"]) == 64
    secret = tmp_path / "secret"
    secret.write_text("not this cluster's\n")
    secret.chmod(0o600)
    line = nodes.refused(etcd1.endpoints, cluster_name, "b", "--cluster-secret-file", str(secret))
    assert line == (f"Error: the cluster secret of --cluster-secret-file is not cluster '{cluster_name}''s "
                    f"(its secret-check in etcd differs)")
    assert sorted(members(etcd1, cluster_name)) == ["a"]


def test_a_data_folder_of_another_cluster_is_refused(etcd1, nodes, cluster_name, tmp_path):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    a.stop()
    line = nodes.refused(etcd1.endpoints, cluster_name + "x", "a", data_dir=a.data_dir)
    assert line.startswith(f"Error: data folder {a.data_dir.resolve()} belongs to cluster '{cluster_name}' (id "), line
    line = nodes.refused(etcd1.endpoints, cluster_name, "b", data_dir=a.data_dir)
    assert line == f"Error: data folder {a.data_dir.resolve()} is node 'a''s, not 'b''s", line
    # the same cluster name, another cluster (this etcd's cluster was made afresh, say)
    other = tmp_path / "other"
    other.mkdir()
    (other / "cluster.json").write_text(json.dumps({"cluster_name": cluster_name, "node_name": "c",
                                                    "cluster_id": "00000000-0000-0000-0000-000000000000"}))
    with pytest.raises(ClusterError) as refused:  # in this process: the line is the same (the others show it)
        asyncio.run(join(Config(data_dir=other, cluster_etcd=tuple(etcd1.urls), node_name="c",
                                cluster_name=cluster_name).validate()))
    assert str(refused.value).startswith(f"data folder {other.resolve()} belongs to another cluster "
                                         f"(id 00000000-0000-0000-0000-000000000000) than '{cluster_name}' in etcd")
    assert not members(etcd1, cluster_name)
    # its own folder still starts
    nodes.start(etcd1.endpoints, cluster_name, "a", data_dir=a.data_dir)
    assert sorted(members(etcd1, cluster_name)) == ["a"]


def test_a_node_killed_leaves_the_list_when_its_lease_ends_and_may_start_again(etcd1, nodes, cluster_name):
    a = nodes.start(etcd1.endpoints, cluster_name, "a", "--cluster-lease-ttl", LEASE_TTL)
    b = nodes.start(etcd1.endpoints, cluster_name, "b", "--cluster-lease-ttl", LEASE_TTL)
    a.proc.kill()  # kill -9: no lease revoked
    a.proc.wait(timeout=10)
    wait_until(lambda: sorted(members(etcd1, cluster_name)) == ["b"], GONE_TIMEOUT_S, "node a's key gone")
    # b keeps its own lease alive meanwhile (several TTLs have passed), and serves
    assert publish_and_get(b, "still-b") == b"to still-b"
    again = nodes.start(etcd1.endpoints, cluster_name, "a", data_dir=a.data_dir)
    assert members(etcd1, cluster_name)["a"]["pid"] == again.proc.pid


def test_a_secret_file_open_to_others_is_refused(tmp_path):
    from warren.cluster.node import read_secret_file
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    for mode in (0o644, 0o640, 0o604, 0o620):
        secret.chmod(mode)
        with pytest.raises(ClusterError) as refused:
            read_secret_file(secret)
        assert str(refused.value) == f"cluster secret file {secret} is open to others (mode {mode:04o}): chmod 600 {secret}"
    secret.chmod(0o400)
    assert read_secret_file(secret) == "s3cret"


@pytest.mark.cluster
def test_a_cluster_made_with_a_secret_file(etcd1, nodes, cluster_name, tmp_path, request):
    """-m cluster: the right secret file joins; a cluster created with a file keeps no secret in
    etcd, and a node without the file is refused (six starts, about 15 s here)."""
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (six node starts): the default run refuses a wrong secret")
    nodes.start(etcd1.endpoints, cluster_name, "a")
    kept = etcd1.get_prefix(f"/warren/{cluster_name}/")[f"/warren/{cluster_name}/secret"].decode()
    secret = tmp_path / "secret"
    secret.write_text(kept + "\n")
    secret.chmod(0o600)
    nodes.start(etcd1.endpoints, cluster_name, "b", "--cluster-secret-file", str(secret))
    with_file = cluster_name + "f"
    secret.write_text("s3cret\n")
    nodes.start(etcd1.endpoints, with_file, "c", "--cluster-secret-file", str(secret))
    assert f"/warren/{with_file}/secret" not in etcd1.get_prefix(f"/warren/{with_file}/")
    line = nodes.refused(etcd1.endpoints, with_file, "d")
    assert line == f"Error: cluster '{with_file}' was created with a secret file: give --cluster-secret-file"
    nodes.start(etcd1.endpoints, with_file, "d", "--cluster-secret-file", str(secret))
    assert sorted(members(etcd1, with_file)) == ["c", "d"]


def test_etcd_out_of_reach_is_refused_with_one_line(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = Config(data_dir=tmp_path, cluster_etcd=(f"http://127.0.0.1:{port}",), node_name="a",
                    cluster_name="c").validate()
    with pytest.raises(ClusterError) as refused:
        asyncio.run(join(config, timeout=2))
    assert str(refused.value).startswith(f"cannot join cluster 'c': etcd is unreachable (http://127.0.0.1:{port}: ")
    assert not (tmp_path / "cluster.json").exists()


@pytest.mark.parametrize("given, line", [
    ({"cluster_etcd": "http://127.0.0.1:2379"}, "cluster-etcd needs node-name (this node's name in the cluster)"),
    ({"node_name": "a"}, "node-name and cluster-secret-file need cluster-etcd (the etcd members' URLs)"),
    ({"cluster_etcd": "127.0.0.1:2379", "node_name": "a"},
     "cluster-etcd takes http://HOST:PORT URLs of etcd members, not 127.0.0.1:2379"),
    ({"cluster_etcd": "http://127.0.0.1:2379", "node_name": "a b"},
     "node-name 'a b' must be NAME or NAME@HOST, each 1 to 64 letters, digits, '.', '_' or '-'"),
    ({"cluster_etcd": "http://127.0.0.1:2379", "node_name": "a", "cluster_lease_ttl": 1},
     "cluster-lease-ttl must be 2..300 seconds"),
    ({"cluster_etcd": "http://127.0.0.1:2379", "node_name": "a", "workers": 2},
     "cluster-etcd does not run with workers > 1 yet (docs/clustering.md)"),
])
def test_cluster_settings_are_checked_before_anything_starts(given, line):
    from warren.config_sources import SettingsError, resolve
    with pytest.raises(SettingsError) as refused:
        resolve(given, environ={})
    assert str(refused.value) == line


def test_the_settings_come_from_the_file_and_the_environment_too(tmp_path):
    from warren.config_sources import resolve, to_toml
    toml = tmp_path / "warren.toml"
    toml.write_text('cluster-etcd = ["http://127.0.0.1:2379", "http://127.0.0.1:22379"]\ncluster-name = "prod"\n')
    config, sources = resolve({}, config_file=toml, environ={"WARREN_NODE_NAME": "n1"})
    assert (config.cluster_etcd, config.node_name, config.cluster_name) == (
        ("http://127.0.0.1:2379", "http://127.0.0.1:22379"), "n1", "prod")
    assert 'node_name = "n1"  # environment (WARREN_NODE_NAME)' in to_toml(config, sources)
    config, _ = resolve({"cluster_etcd": "http://a:1,http://b:2", "node_name": "x"}, environ={})
    assert config.cluster_etcd == ("http://a:1", "http://b:2")


def test_a_single_node_never_imports_the_cluster_package():
    import subprocess
    import sys
    code = ("import sys; import warren.cli, warren.cli.serve, warren.server.server, warren.config_sources; "
            "print('warren.cluster' in sys.modules or any(m.startswith('warren.cluster.') for m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


def check_ctl_cluster_status(node):
    """`warren ctl cluster_status` against a running node: rabbitmqctl's sections and JSON keys
    (the layout itself: tests/cluster/test_ctl_cluster_status.py)."""
    run = subprocess.run([sys.executable, "-m", "warren", "ctl", "--url", node.http_url, "cluster_status"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("Cluster status of node ")
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Basics", ""] and lines[2].startswith("Cluster name: ")
    assert lines[3:16] == ["", "Disk Nodes", "", "a", "b", "", "Running Nodes", "", "a", "b", "", "Versions", ""]
    assert lines[16].startswith("a: Warren ") and lines[16].endswith(" on Python " + sys.version.split()[0])
    assert f"port: {node.port}, protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0" in run.stdout
    run = subprocess.run([sys.executable, "-m", "warren", "ctl", "--url", node.http_url, "cluster_status",
                          "--formatter", "json"], capture_output=True, text=True, timeout=60)
    value = json.loads(run.stdout)
    assert sorted(value) == ["alarms", "cluster_name", "disk_nodes", "feature_flags", "listeners",
                             "maintenance_status", "partitions", "ram_nodes", "running_nodes", "versions"]
    assert value["ram_nodes"] == [] and all(set(v) == {"rabbitmq_name", "rabbitmq_version", "erlang_version"}
                                            for v in value["versions"].values())
    # both nodes, as the HTTP API lists them (tests/cluster/test_seen_as_cluster.py)
    assert value["running_nodes"] == value["disk_nodes"] == ["a", "b"]


@pytest.mark.cluster
def test_a_node_paused_past_its_lease(etcd1, nodes, cluster_name, request, tmp_path):
    """-m cluster: a node stopped (SIGSTOP) past its lease leaves the list and, continued, registers
    again; if another node took its name meanwhile, it logs that once and leaves the name alone."""
    import signal
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (waits on two lease expiries)")
    a = nodes.start(etcd1.endpoints, cluster_name, "a", "--cluster-lease-ttl", LEASE_TTL)
    a.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: not members(etcd1, cluster_name), GONE_TIMEOUT_S, "the paused node's key gone")
    finally:
        a.signal(signal.SIGCONT)
    wait_until(lambda: members(etcd1, cluster_name).get("a", {}).get("pid") == a.proc.pid, GONE_TIMEOUT_S,
               "the node registered again")
    assert "registering a again" in a.log()
    # paused again; meanwhile another process takes the name
    a.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: not members(etcd1, cluster_name), GONE_TIMEOUT_S, "the paused node's key gone")
        other = nodes.start(etcd1.endpoints, cluster_name, "a", data_dir=tmp_path / "other-a")
    finally:
        a.signal(signal.SIGCONT)
    wait_until(lambda: "was taken by another node" in a.log(), GONE_TIMEOUT_S, "the first node saw its name taken")
    assert members(etcd1, cluster_name)["a"]["pid"] == other.proc.pid
    assert a.log().count("was taken by another node") == 1


async def test_each_node_follows_the_member_list(etcd1, cluster_name, tmp_path):
    """ClusterNode.members, kept by a watch on nodes/: a join and a leave show at the other node
    (in this process: two joins on one loop, bounded waits on the view)."""
    def config(name):
        return Config(data_dir=tmp_path / name, cluster_etcd=tuple(etcd1.urls), node_name=name,
                      cluster_name=cluster_name).validate()

    async def until(condition, what):
        for _ in range(200):  # 10 s
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within 10 s: {what}")

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = await join(config("a"))
    try:
        b = await join(config("b"))
        try:
            await until(lambda: sorted(a.members) == ["a", "b"] and sorted(b.members) == ["a", "b"], "both see both")
            await b.announce(amqp_port=1234)
            await until(lambda: a.members["b"].get("amqp_port") == 1234, "a sees b's listeners")
            assert await a.read_members() == a.members
        finally:
            await b.leave()
        await until(lambda: sorted(a.members) == ["a"], "a sees b leave")
    finally:
        await a.leave()


@pytest.mark.cluster
def test_a_member_folder_started_alone_says_so(etcd1, nodes, cluster_name, request, start_broker):
    """-m cluster: a cluster member's data folder started without --cluster-etcd serves as a single
    node (recovery, say) and the log says it belongs to a cluster."""
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (two node starts)")
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    a.stop()
    alone = start_broker("--workers", "1", data_dir=a.data_dir)
    assert "belongs to a cluster (cluster.json) but --cluster-etcd is not given: serving it as a single node" \
        in alone.log()
    assert publish_and_get(alone, "alone") == b"to alone"
    assert not members(etcd1, cluster_name)

