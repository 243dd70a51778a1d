"""A cluster seen the way RabbitMQ's tools see one (issue 32, item 5, and forget_cluster_node of
item 4): real etcd, three real `warren serve` nodes, their HTTP API and `warren ctl`.

Any node's ``/api/nodes`` lists every node that joined and was not forgotten, with the figures
each running node wrote into its member record; ``/api/overview`` lists every running node's
listeners; the HTTP API names the node by its ``--node-name`` (``rabbit@host`` form allowed); a
node killed with kill -9 becomes a row ``running: false`` once its lease ends; ``warren ctl
forget_cluster_node`` removes a stopped node for good, refuses a running or unknown one, and the
forgotten node's data folder is refused at its next start. Waits are on what the API shows, bounded.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pika

from tests.cluster.cluster_nodes import api, api_status, wait_until

LEASE_TTL = "2"  # seconds: the killed node's row turns to running false within a few of them
GONE_TIMEOUT_S = 30.0  # TTL 2 s (etcd may round a short lease up), on two busy cores


def api_error(node, path: str, method: str) -> tuple[int, dict]:
    status, body = api_status(node, path, method)
    assert status >= 400, f"{method} /api/{path} was not refused"
    return status, body


def ctl(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "ctl", "--url", node.http_url, *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def rows(node) -> dict[str, dict]:
    return {row["name"]: row for row in api(node, "nodes")}


def test_every_node_lists_the_cluster_a_killed_node_is_down_and_forgotten_for_good(etcd1, nodes, cluster_name,
                                                                                  tmp_path):
    names = ["a@h", "b", "c"]
    a, b, c = (nodes.start(etcd1.endpoints, cluster_name, name, "--cluster-lease-ttl", LEASE_TTL) for name in names)

    # any node lists all three, running, each with the figures its own API shows
    def with_figures():
        listed = rows(b)
        return listed if all("os_pid" in listed.get(n, {}) for n in names) else None

    seen = wait_until(with_figures, GONE_TIMEOUT_S, "node b listing the three nodes with their figures")
    assert sorted(seen) == names and all(row["running"] and row["type"] == "disc" for row in seen.values())
    assert [seen[n]["os_pid"] for n in names] == [str(a.proc.pid), str(b.proc.pid), str(c.proc.pid)]
    assert seen["a@h"]["mem_used"] > 0 and "mem_alarm" in seen["c"] and "uptime" in seen["c"]
    assert api(a, "nodes/c")["os_pid"] == str(c.proc.pid)
    assert api_error(a, "nodes/nobody", "GET")[0] == 404

    # the overview: the answering node's name, every running node's listeners
    overview = api(b, "overview")
    assert overview["node"] == "b"
    listeners = {(entry["node"], entry["protocol"]): entry["port"] for entry in overview["listeners"]}
    assert listeners[("a@h", "amqp")] == a.port and listeners[("c", "amqp")] == c.port
    assert listeners[("b", "amqp")] == b.port and listeners[("c", "http")] == c.http_port

    # a queue is named with the node that holds it
    conn = pika.BlockingConnection(pika.URLParameters(a.url))
    try:
        conn.channel().queue_declare("on-a", durable=True)
    finally:
        conn.close()
    assert api(a, "queues/%2F/on-a")["node"] == "a@h"

    # rabbitmqctl's cluster_status, from any node
    status = json.loads(ctl(c, "cluster_status", "--formatter", "json").stdout)
    assert status["disk_nodes"] == names and status["running_nodes"] == names
    assert sorted(status["listeners"]) == names

    # kill -9: the node stays a disc node, no longer running, once its lease ends
    c.signal(signal.SIGKILL)
    c.proc.wait(timeout=30)
    wait_until(lambda: rows(a)["c"]["running"] is False, GONE_TIMEOUT_S, "node c shown as not running")
    assert rows(b)["c"] == {"name": "c", "type": "disc", "running": False, "cluster_links": []}  # RabbitMQ's
    status = json.loads(ctl(a, "cluster_status", "--formatter", "json").stdout)
    assert status["disk_nodes"] == names and status["running_nodes"] == ["a@h", "b"]
    assert sorted(status["versions"]) == sorted(status["maintenance_status"]) == ["a@h", "b"]  # asked of running ones
    assert ("c", "amqp") not in {(e["node"], e["protocol"]) for e in api(a, "overview")["listeners"]}

    # forget_cluster_node: a running node and an unknown one are refused; a stopped one goes
    refused = ctl(a, "forget_cluster_node", "b")
    assert refused.returncode == 69 and "node b is running: it must be stopped before it can be removed" \
        in refused.stderr
    unknown = ctl(a, "forget_cluster_node", "zz")
    assert unknown.returncode == 69 and "The node selected (zz) is not in the cluster." in unknown.stderr
    forgotten = ctl(a, "forget_cluster_node", "c")
    assert forgotten.returncode == 0, forgotten.stderr
    assert "Removing node c from the cluster" in forgotten.stderr
    assert set(rows(a)) == {"a@h", "b"}
    wait_until(lambda: "c" not in rows(b), GONE_TIMEOUT_S, "node b no longer listing the forgotten node")

    # its data folder is no longer the cluster's: refused, with the way out
    line = nodes.refused(etcd1.endpoints, cluster_name, "c", data_dir=c.data_dir)
    assert line == (f"Error: node 'c' was removed from cluster '{cluster_name}' (forget_cluster_node): its data "
                    f"folder {c.data_dir.resolve()} is no longer the cluster's; start it with a new one"), line
    # with a new folder the name joins again
    again = nodes.start(etcd1.endpoints, cluster_name, "c", data_dir=tmp_path / "data-c-new")
    wait_until(lambda: rows(a).get("c", {}).get("running") is True, GONE_TIMEOUT_S, "c back, running")
    assert again.proc.poll() is None


def test_a_single_node_has_no_node_to_forget(broker):
    status, body = api_error(broker, "nodes/rabbit@elsewhere", "DELETE")
    assert status == 400 and "is not a node of a cluster" in body["reason"]
    assert len(api(broker, "nodes")) == 1
