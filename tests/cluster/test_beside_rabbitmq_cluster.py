"""RabbitMQ 3.10 as a three-node cluster (tests/rabbitmq_cluster.py), the reference for Warren's:
what its management API, rabbitmqctl and AMQP answer with every node up, with a node killed, after
it restarts and after forget_cluster_node; then the same questions to a three-node Warren cluster
on etcd (the ``test_warren_*`` tests), where each answer that differs is an xfail giving the
difference. docs/compatibility.md ("A cluster: RabbitMQ 3.10 beside Warren") says it in prose.

Behind the ``cluster`` marker (``pytest -m cluster tests/cluster/test_beside_rabbitmq_cluster.py``,
``-k warren`` for Warren's side alone, ~20 s): RabbitMQ's cluster starts in 25-35 s (55 s at load
9) and the whole file takes 105 s at load 3.5-3.9, 150 s at load 6-7. The tests share one cluster of each and run in file order; a test that kills or
forgets a node brings it back before it ends. Every wait is for an answer the cluster gives
(bounded), never for a time.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass

import pika
import pika.exceptions
import pytest

from tests.cluster.cluster_nodes import Nodes, members, wait_until
from tests.ports import free_ports
from tests.cluster.etcd_harness import EtcdCluster
from tests.cluster.flooding import PREFETCH, Flood, backlog

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

WAIT_S = 60.0  # a node seen down (or up) by the others, a row's figures filled in
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # rabbitmqctl 3.10 prints its section titles in bold, even into a pipe

# keys every running node's /api/nodes row has (RabbitMQ 3.10.8 has 93; the figures' *_details omitted)
RUNNING_ROW_KEYS = {
    "name", "type", "running", "partitions", "os_pid", "uptime", "mem_used", "mem_limit", "mem_alarm",
    "mem_calculation_strategy", "disk_free", "disk_free_limit", "disk_free_alarm", "fd_used", "fd_total",
    "sockets_used", "sockets_total", "proc_used", "proc_total", "run_queue", "processors", "net_ticktime",
    "rates_mode", "exchange_types", "auth_mechanisms", "applications", "contexts", "enabled_plugins",
    "cluster_links", "config_files", "log_files", "db_dir"}
# a stopped (killed) node's row: this and nothing else
STOPPED_ROW_KEYS = {"name", "type", "running", "cluster_links"}
# a queue whose node is down: its /api/queues row (no figures)
DOWN_QUEUE_KEYS = {"name", "vhost", "node", "state", "type", "durable", "auto_delete", "exclusive", "arguments"}
CLUSTER_STATUS_KEYS = {"cluster_name", "disk_nodes", "ram_nodes", "running_nodes", "versions", "maintenance_status",
                       "alarms", "partitions", "listeners", "feature_flags"}
SECTIONS = ["Basics", "Disk Nodes", "Running Nodes", "Versions", "Maintenance status", "Alarms",
            "Network Partitions", "Listeners", "Feature flags"]


@pytest.fixture(scope="session", autouse=True)  # session: before the session's cluster starts
def _only_with_the_marker(request):
    if "cluster" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m cluster (a three-node RabbitMQ cluster starts in 25-35 s)")


def wait_for(condition, what: str, timeout: float = WAIT_S):
    return wait_until(condition, timeout, what)


def rows(node, path: str) -> list[dict]:
    status, body = node.api("GET", path)
    assert status == 200, (path, status, body)
    return body


def full_rows(node) -> list[dict] | None:
    """/api/nodes once every running node's row has its figures (a node that has just started
    shows five keys until its first statistics arrive)."""
    got = rows(node, "/api/nodes")
    return got if all(not r["running"] or "uptime" in r for r in got) else None


def running(node, via) -> bool | None:
    """What ``via``'s /api/nodes says of ``node``: running, stopped, or absent (None)."""
    return next((r["running"] for r in rows(via, "/api/nodes") if r["name"] == node.name), None)


def cluster_status(node) -> tuple[dict, str]:
    """rabbitmqctl cluster_status's JSON and its text (the bold of the titles removed)."""
    value = json.loads(node.ctl("cluster_status", "--formatter", "json"))
    return value, ANSI.sub("", node.ctl("cluster_status"))


def sections(text: str) -> dict[str, list[str]]:
    """The text layout's sections: title -> its lines (blank lines dropped)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line in SECTIONS:
            current = out.setdefault(line, [])
        elif line and current is not None:
            current.append(line)
    return out


def amqp_error(url: str, action) -> tuple[int, str] | str:
    """The channel.close (code, text) ``action(channel)`` ends with, or "ok"."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        try:
            action(ch)
        except pika.exceptions.ChannelClosedByBroker as e:
            return e.reply_code, e.reply_text
        return "ok"
    finally:
        if conn.is_open:
            conn.close()


def publish(url: str, queue: str, bodies: list[bytes], mandatory: bool = False) -> tuple[list, list]:
    """Publish with confirms to the default exchange: (each body's outcome "ack" or the error's
    name, the basic.returns (code, text))."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        returned = []
        ch.add_on_return_callback(lambda _ch, method, _props, _body: returned.append((method.reply_code, method.reply_text)))
        ch.confirm_delivery()
        outcomes = []
        for body in bodies:
            try:
                ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2), mandatory=mandatory)
                outcomes.append("ack")
            except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as e:
                outcomes.append(type(e).__name__)
        conn.process_data_events(0)
        return outcomes, returned
    finally:
        conn.close()


def drain(url: str, queue: str) -> list[bytes] | tuple[int, str]:
    """Every message basic.get finds in the queue, or the channel.close (code, text) it ends with."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        got = []
        for _ in range(1000):  # bounded
            try:
                method, _props, body = ch.basic_get(queue, auto_ack=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                return e.reply_code, e.reply_text
            if method is None:
                break
            got.append(body)
        return got
    finally:
        if conn.is_open:
            conn.close()


def down_queue_answers(url: str, queue: str) -> dict:
    """What a node (``url``) answers about a durable queue whose node is down, in this order."""
    return {
        "declare passive": amqp_error(url, lambda ch: ch.queue_declare(queue, passive=True)),
        "declare": amqp_error(url, lambda ch: ch.queue_declare(queue, durable=True)),
        "basic.get": amqp_error(url, lambda ch: ch.basic_get(queue)),
        "queue.bind": amqp_error(url, lambda ch: ch.queue_bind(queue, "amq.direct", "k")),
        "publish mandatory": publish(url, queue, [b"returned"], mandatory=True),
        "publish": publish(url, queue, [b"dropped"]),
    }


def rabbitmq_down_queue_answers(home: str, queue: str) -> dict:
    """RabbitMQ 3.10.8's answers (down_queue_answers) for a durable queue of node ``home``, down."""
    down = (404, f"NOT_FOUND - home node '{home}' of durable queue '{queue}' in vhost '/' is down or inaccessible")
    return {"declare passive": down, "declare": down, "basic.get": down, "queue.bind": down,
            "publish mandatory": (["UnroutableError"], [(312, "NO_ROUTE")]), "publish": (["ack"], [])}


def definitions(node) -> dict:
    status, body = node.api("GET", "/api/definitions")
    assert status == 200, (status, body)
    return body


def exported(defs: dict, queue: str, exchange: str) -> tuple[dict | None, bool]:
    """The queue's entry in an export (None when absent) and whether its binding to ``exchange`` is there."""
    entry = next((q for q in defs["queues"] if q["name"] == queue), None)
    bound = any(b["source"] == exchange and b["destination"] == queue for b in defs["bindings"])
    return entry, bound


def import_queues(node, *queues: str) -> tuple[int, object]:
    """POST /api/definitions with durable queues alone: (status, body)."""
    body = {"queues": [{"name": q, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
                       for q in queues]}
    return node.api("POST", "/api/definitions", body)


def scrape(prometheus_url: str, path: str) -> str:
    with urllib.request.urlopen(prometheus_url + path, timeout=30) as answer:
        return answer.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample ``name`` whose labels include ``labels`` (None: no such sample)."""
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name):len(name) + 1] not in ("{", " "):
            continue
        head, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="([^"]*)"', head))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


def identity(text: str) -> dict[str, str]:
    line = next(line for line in text.splitlines() if line.startswith("rabbitmq_identity_info{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def prometheus_own_node(url1: str, url3: str, q1: str, q3: str) -> dict:
    """What two nodes' Prometheus endpoints say of a queue of node 1 (2 messages) and one of node 3
    (7 messages): per node, (its /metrics/per-object's ready count for q1, for q3; its
    /metrics's total ready)."""
    out = {}
    for which, url in (("node 1", url1), ("node 3", url3)):
        per_object, aggregated = scrape(url, "/metrics/per-object"), scrape(url, "/metrics")
        out[which] = (sample(per_object, "rabbitmq_queue_messages_ready", queue=q1),
                      sample(per_object, "rabbitmq_queue_messages_ready", queue=q3),
                      sample(aggregated, "rabbitmq_queue_messages_ready"))
    return out


def placements(url: str, api, prefix: str, count: int, arguments: dict | None = None) -> list:
    """Declare ``count`` durable classic queues ``prefix-i`` through ``url``: each one's node as
    ``api``'s /api/queues shows it, or the declare's refusal (code, text)."""
    out = []
    for i in range(count):
        q = f"{prefix}-{i}"
        answer = amqp_error(url, lambda ch, q=q: ch.queue_declare(q, durable=True, arguments=arguments or {}))
        out.append(answer if answer != "ok" else q)
    nodes = {r["name"]: r["node"] for r in rows(api, "/api/queues")}
    return [nodes.get(q, "?") if isinstance(q, str) else q for q in out]


def delete_queues(url: str, prefix: str, api) -> None:
    for r in rows(api, "/api/queues"):
        if r["name"].startswith(prefix):
            amqp_error(url, lambda ch, q=r["name"]: ch.queue_delete(q))


def exclusive_answers(holder_url: str, other_url: str, queue: str, known=lambda: True) -> dict:
    """What a client of another node gets for a queue held exclusively by a connection of the
    first node (the holder's connection stays open meanwhile), once ``known()``."""
    conn = pika.BlockingConnection(pika.URLParameters(holder_url))
    try:
        conn.channel().queue_declare(queue, exclusive=True)
        wait_for(known, "the exclusive queue known to the cluster")
        return {
            "declare exclusive": amqp_error(other_url, lambda ch: ch.queue_declare(queue, exclusive=True)),
            "declare": amqp_error(other_url, lambda ch: ch.queue_declare(queue)),
            "declare passive": amqp_error(other_url, lambda ch: ch.queue_declare(queue, passive=True)),
            "basic.get": amqp_error(other_url, lambda ch: ch.basic_get(queue)),
            "basic.consume": amqp_error(other_url, lambda ch: ch.basic_consume(queue, lambda *_: None)),
            "queue.delete": amqp_error(other_url, lambda ch: ch.queue_delete(queue)),
        }
    finally:
        conn.close()


def rabbitmq_exclusive_answers(queue: str) -> dict:
    locked = (405, f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{queue}' in vhost '/'. It could "
                   "be originally declared on another connection or the exclusive property value does not match "
                   "that of the original declaration.")
    return dict.fromkeys(("declare exclusive", "declare", "declare passive", "basic.get", "basic.consume",
                          "queue.delete"), locked)


def declare(url: str, queue: str, durable: bool = True) -> None:
    assert amqp_error(url, lambda ch: ch.queue_declare(queue, durable=durable)) == "ok"


def test_nodes_overview_and_cluster_status_with_every_node_up(rabbitmq_cluster):
    n1, n2, n3 = rabbitmq_cluster.nodes
    names = [n1.name, n2.name, n3.name]

    # /api/nodes: one row per node, by name, each with the same keys whichever node answers
    got = wait_for(lambda: full_rows(n1), "every row's figures")
    assert [r["name"] for r in got] == names
    for r in got:
        assert RUNNING_ROW_KEYS <= set(r), RUNNING_ROW_KEYS - set(r)
        assert (r["type"], r["running"], r["partitions"], r["mem_alarm"], r["disk_free_alarm"]) == \
            ("disc", True, [], False, False)
        assert isinstance(r["os_pid"], str) and r["os_pid"].isdigit()  # a string, as Erlang's os:getpid()
        assert isinstance(r["uptime"], int) and r["uptime"] > 0  # milliseconds
        assert "listeners" not in r and "being_drained" not in r  # listeners: /api/overview only
    assert {r["name"] for r in wait_for(lambda: full_rows(n2), "node 2's rows")} == set(names)
    assert n1.api("GET", f"/api/nodes/{n2.name}")[1]["name"] == n2.name
    assert n1.api("GET", "/api/nodes/nobody@localhost") == (500, None)  # 3.10.8's answer (Warren: 404)
    # a row's cluster_links: the links of that node to the others (with their traffic figures)
    assert {link["name"] for link in got[0]["cluster_links"]} == set(names[1:])

    # /api/overview: the answering node, the cluster's name, every node's listeners
    for asked in (n1, n2):
        status, overview = asked.api("GET", "/api/overview")
        assert status == 200
        assert overview["node"] == asked.name
        # no cluster name set: each node answers its own default, its name with the machine's
        # host name (node 1: "warren-test-<id>-1@vm", node 2: "warren-test-<id>-2@vm")
        assert overview["cluster_name"].startswith(asked.name.split("@")[0] + "@")  # @vm here, not @localhost
        listeners = overview["listeners"]
        assert {(x["node"], x["protocol"]) for x in listeners} == \
            {(n, p) for n in names for p in ("amqp", "clustering", "http", "http/prometheus")}
        for x in listeners:
            assert {"node", "protocol", "ip_address", "port", "socket_opts"} <= set(x)
        assert [x["protocol"] for x in listeners] == sorted(x["protocol"] for x in listeners)  # by protocol
        amqp = {x["node"]: (x["ip_address"], x["port"]) for x in listeners if x["protocol"] == "amqp"}
        assert amqp == {n.name: ("127.0.0.1", n.amqp_port) for n in (n1, n2, n3)}
        http = {x["node"]: (x["ip_address"], x["port"]) for x in listeners if x["protocol"] == "http"}
        assert http == {n.name: ("::", n.http_port) for n in (n1, n2, n3)}  # "::" though bound to 127.0.0.1

    # rabbitmqctl cluster_status: JSON and text
    value, text = cluster_status(n1)
    assert set(value) == CLUSTER_STATUS_KEYS
    assert value["cluster_name"].startswith(n1.name.split("@")[0] + "@")  # the answering node's
    assert value["disk_nodes"] == names and value["ram_nodes"] == []
    assert sorted(value["running_nodes"]) == names  # in no fixed order (seen: 3, 2, 1)
    assert value["versions"] == {n: {"rabbitmq_name": "RabbitMQ", "rabbitmq_version": "3.10.8",
                                     "erlang_version": value["versions"][n]["erlang_version"]} for n in names}
    assert value["maintenance_status"] == {n: "not under maintenance" for n in names}
    assert (value["alarms"], value["partitions"]) == ([], {})
    assert sorted(value["listeners"]) == names
    for n in names:
        assert [x["protocol"] for x in value["listeners"][n]] == ["http", "http/prometheus", "clustering", "amqp"]
        assert {x["node"] for x in value["listeners"][n]} == {n}
        assert set(value["listeners"][n][0]) == {"interface", "node", "port", "protocol", "purpose"}
    flag = next(f for f in value["feature_flags"] if f["name"] == "quorum_queue")
    assert set(flag) == {"desc", "doc_url", "name", "provided_by", "stability", "state"}
    assert text.splitlines()[0] == f"Cluster status of node {n1.name} ..."
    got_sections = sections(text)
    assert list(got_sections) == SECTIONS
    assert got_sections["Basics"] == [f"Cluster name: {value['cluster_name']}"]
    assert got_sections["Disk Nodes"] == names and got_sections["Running Nodes"] == names  # the text sorts them
    assert got_sections["Versions"] == [f"{n}: RabbitMQ 3.10.8 on Erlang {value['versions'][n]['erlang_version']}"
                                        for n in names]
    assert got_sections["Alarms"] == ["(none)"] and got_sections["Network Partitions"] == ["(none)"]
    assert got_sections["Listeners"][:4] == [
        f"Node: {n1.name}, interface: [::], port: {n1.http_port}, protocol: http, purpose: HTTP API",
        f"Node: {n1.name}, interface: [::], port: {n1.prometheus_port}, protocol: http/prometheus, "
        "purpose: Prometheus exporter API over HTTP",
        f"Node: {n1.name}, interface: [::], port: {value['listeners'][n1.name][2]['port']}, protocol: clustering, "
        "purpose: inter-node and CLI tool communication",
        f"Node: {n1.name}, interface: 127.0.0.1, port: {n1.amqp_port}, protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0"]
    assert len(got_sections["Listeners"]) == 12


def test_prometheus_answers_for_its_own_node(rabbitmq_cluster):
    """Every Prometheus endpoint of RabbitMQ 3.10 (/metrics, /metrics/per-object) answers for the
    node asked, not for the cluster: "aggregated" sums that node's objects. The node is named only
    in rabbitmq_identity_info, whose rabbitmq_cluster is that node's own default cluster name."""
    n1, _n2, n3 = rabbitmq_cluster.nodes
    q1, q3 = f"p1-{uuid.uuid4().hex[:8]}", f"p3-{uuid.uuid4().hex[:8]}"
    declare(n1.amqp_url, q1)
    declare(n3.amqp_url, q3)
    try:
        publish(n1.amqp_url, q1, [b"x"] * 2)
        publish(n3.amqp_url, q3, [b"x"] * 7)
        expected = {"node 1": (2.0, None, 2.0), "node 3": (None, 7.0, 7.0)}  # no other queue exists now
        wait_for(lambda: prometheus_own_node(n1.prometheus_url, n3.prometheus_url, q1, q3) == expected,
                 f"each node's metrics of its own queue alone: {expected}")
        ids = [identity(scrape(n.prometheus_url, "/metrics")) for n in (n1, n3)]
        assert [i["rabbitmq_node"] for i in ids] == [n1.name, n3.name]
        assert [i["rabbitmq_cluster"].split("@")[0] for i in ids] == [n1.name.split("@")[0], n3.name.split("@")[0]]
        assert ids[0]["rabbitmq_cluster_permanent_id"] == ids[1]["rabbitmq_cluster_permanent_id"]
    finally:
        for url, q in ((n1.amqp_url, q1), (n3.amqp_url, q3)):
            amqp_error(url, lambda ch, q=q: ch.queue_delete(q))


def test_classic_queue_placement(rabbitmq_cluster):
    """Where RabbitMQ 3.10.8 puts a new classic queue declared through node 1 (no other queue
    exists when this runs): on node 1 by default (client-local); x-queue-master-locator
    "min-masters" (argument or the queue-master-locator policy) on the nodes with fewest queues;
    x-queue-leader-locator is refused for a classic queue, and the queue-leader-locator policy is
    ignored by one (3.10's leader locator is for quorum queues and streams)."""
    n1, n2, n3 = rabbitmq_cluster.nodes
    prefix = f"pl-{uuid.uuid4().hex[:6]}"
    try:
        assert placements(n1.amqp_url, n1, f"{prefix}-default", 3) == [n1.name] * 3
        delete_queues(n1.amqp_url, prefix, n1)
        assert sorted(placements(n1.amqp_url, n1, f"{prefix}-minm", 3, {"x-queue-master-locator": "min-masters"})) \
            == [n1.name, n2.name, n3.name]
        assert placements(n1.amqp_url, n1, f"{prefix}-bal", 1, {"x-queue-leader-locator": "balanced"}) == [
            (406, f"PRECONDITION_FAILED - invalid arg 'x-queue-leader-locator' for queue '{prefix}-bal-0' in vhost '/' "
                  "of queue type rabbit_classic_queue")]
        policy = f"/api/policies/%2F/{prefix}"
        assert n1.api("PUT", policy, {"pattern": f"^{prefix}-pol", "apply-to": "queues",
                                      "definition": {"queue-leader-locator": "balanced"}})[0] == 201
        try:
            assert placements(n1.amqp_url, n1, f"{prefix}-pol", 3) == [n1.name] * 3
        finally:
            n1.api("DELETE", policy)
    finally:
        delete_queues(n1.amqp_url, prefix, n1)


def test_an_exclusive_queue_is_locked_cluster_wide(rabbitmq_cluster):
    n1, n2, _n3 = rabbitmq_cluster.nodes
    queue = f"ex-{uuid.uuid4().hex[:8]}"
    assert exclusive_answers(n1.amqp_url, n2.amqp_url, queue) == rabbitmq_exclusive_answers(queue)


FLOOD = 40_000  # 1 KiB messages through node 2 to a queue on node 1 whose consumer stalls


def test_flow_through_another_node(rabbitmq_cluster):
    """RabbitMQ 3.10.8: a publisher on node 2 floods a classic queue on node 1 whose consumer
    stalls at its prefetch. Credit flow paces the publisher to what node 1's queue takes in, and
    nothing holds it at a backlog: the whole flood enters the queue (ready: all but the
    prefetch). Then every message reaches the consumer, in order."""
    n1, n2, _n3 = rabbitmq_cluster.nodes
    queue = f"flood-{uuid.uuid4().hex[:8]}"
    flood = Flood(n1.amqp_url, n2.host, n2.amqp_port, queue, FLOOD).start()
    try:
        wait_for(flood.sent.is_set, "the whole flood handed over")
        wait_for(lambda: backlog(n1.amqp_url, queue) == FLOOD - PREFETCH, "the whole flood in the queue")
        assert flood.drain() == list(range(FLOOD))
    finally:
        flood.close()
        amqp_error(n1.amqp_url, lambda ch: ch.queue_delete(queue))


def test_a_killed_node_and_its_queues_then_its_restart(rabbitmq_cluster):
    n1, n2, n3 = rabbitmq_cluster.nodes
    durable, transient = f"d-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    # declared through node 3: a classic queue lives on the node its client is connected to
    declare(n3.amqp_url, durable)
    declare(n3.amqp_url, transient, durable=False)
    assert publish(n3.amqp_url, durable, [b"m0", b"m1", b"m2"]) == (["ack"] * 3, [])
    exchange, imported = f"x-{durable}", f"i-{durable}"
    assert amqp_error(n3.amqp_url, lambda ch: (ch.exchange_declare(exchange, "topic", durable=True),
                                                 ch.queue_bind(durable, exchange, "k"))) == "ok"
    queues = {r["name"]: r for r in rows(n1, "/api/queues")}
    assert queues[durable]["node"] == n3.name and queues[transient]["node"] == n3.name
    # definitions: the same export from every node; a queue's entry names no node; a running
    # node's non-durable queue is exported too
    defs = definitions(n1)
    assert defs == definitions(n2)
    assert exported(defs, durable, exchange) == (
        {"name": durable, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}, True)
    assert exported(defs, transient, exchange)[0]["durable"] is False

    n3.kill9()
    try:
        wait_for(lambda: running(n3, n1) is False, "node 1 sees node 3 stopped")
        # /api/nodes: the killed node's row is four keys
        row = next(r for r in rows(n1, "/api/nodes") if r["name"] == n3.name)
        assert row == {"name": n3.name, "type": "disc", "running": False, "cluster_links": []}
        assert n1.api("GET", f"/api/nodes/{n3.name}") == (200, row)
        # /api/queues: the durable queue is "down" with no figures; the transient one is gone
        queues = {r["name"]: r for r in rows(n1, "/api/queues")}
        assert transient not in queues
        assert set(queues[durable]) == DOWN_QUEUE_KEYS
        assert (queues[durable]["state"], queues[durable]["node"]) == ("down", n3.name)
        # ... and the queue's own route does not find it
        assert n1.api("GET", f"/api/queues/%2F/{durable}")[0] == 404

        # AMQP through node 1: declare (passive or not), get and bind are refused with 404; a
        # publish finds no route: mandatory, it returns 312 NO_ROUTE; otherwise it is confirmed
        # (basic.ack) and dropped
        assert down_queue_answers(n1.amqp_url, durable) == rabbitmq_down_queue_answers(n3.name, durable)
        # the transient queue's name is free: declared again, it lives on node 1
        declare(n1.amqp_url, transient, durable=False)
        assert {r["name"]: r["node"] for r in rows(n1, "/api/queues")}[transient] == n1.name
        # definitions: the down durable queue is still exported, its binding is not (back after
        # the restart); an import through node 2 puts a new queue on node 2, and accepts the
        # down queue (it exists) without a word
        defs = definitions(n1)
        assert exported(defs, durable, exchange) == (
            {"name": durable, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}, False)
        assert any(e["name"] == exchange for e in defs["exchanges"])
        assert import_queues(n2, imported, durable) == (204, None)
        queues = {r["name"]: r for r in rows(n1, "/api/queues")}
        assert queues[imported]["node"] == n2.name and queues[durable]["state"] == "down"

        # cluster_status: node 3 is a disk node, not running, and nothing else of it is shown
        value, text = cluster_status(n1)
        names12 = [n1.name, n2.name]
        assert value["disk_nodes"] == [n1.name, n2.name, n3.name]
        assert sorted(value["running_nodes"]) == names12
        assert sorted(value["versions"]) == names12 and sorted(value["listeners"]) == names12
        assert sorted(value["maintenance_status"]) == names12
        got_sections = sections(text)
        assert list(got_sections) == SECTIONS
        assert got_sections["Disk Nodes"] == [n1.name, n2.name, n3.name]
        assert got_sections["Running Nodes"] == names12
        assert [line.split(":")[0] for line in got_sections["Versions"]] == names12
        assert len(got_sections["Listeners"]) == 8
    finally:
        n3.restart()
    wait_for(lambda: running(n3, n1), "node 1 sees node 3 running again")
    # its durable queue is back, on node 3, with the messages confirmed before the kill (not the dropped one)
    wait_for(lambda: {r["name"]: r.get("state") for r in rows(n1, "/api/queues")}.get(durable) == "running",
             "the durable queue running again")
    assert {r["name"]: r["node"] for r in rows(n1, "/api/queues")}[durable] == n3.name
    assert drain(n1.amqp_url, durable) == [b"m0", b"m1", b"m2"]
    assert exported(definitions(n1), durable, exchange)[1]  # its binding exported again
    for q in (durable, transient, imported):
        assert amqp_error(n1.amqp_url, lambda ch, q=q: ch.queue_delete(q)) == "ok"
    assert amqp_error(n1.amqp_url, lambda ch: ch.exchange_delete(exchange)) == "ok"
    wait_for(lambda: full_rows(n1), "node 3's row with its figures again")


def test_forget_cluster_node(rabbitmq_cluster):
    n1, n2, n3 = rabbitmq_cluster.nodes
    queue = f"f-{uuid.uuid4().hex[:8]}"
    declare(n3.amqp_url, queue)
    # a running node cannot be forgotten
    refused = n1.ctl_result("forget_cluster_node", n3.name)
    assert (refused.returncode, refused.stdout.strip(), refused.stderr.strip()) == (
        69, f"Removing node {n3.name} from the cluster",
        f"Error:\nRabbitMQ on node {n3.name} must be stopped with 'rabbitmqctl -n {n3.name} stop_app' "
        "before it can be removed")
    try:
        n3.stop()
        wait_for(lambda: running(n3, n1) is False, "node 1 sees node 3 stopped")
        forgotten_text = n1.ctl("forget_cluster_node", n3.name)
        assert forgotten_text.strip() == f"Removing node {n3.name} from the cluster"
        # /api/nodes: no row for it at all (not a stopped row)
        assert [r["name"] for r in rows(n1, "/api/nodes")] == [n1.name, n2.name]
        value, _text = cluster_status(n1)
        assert value["disk_nodes"] == [n1.name, n2.name]
        assert sorted(value["running_nodes"]) == [n1.name, n2.name]
        # its durable queues are deleted with it
        assert queue not in {r["name"] for r in rows(n1, "/api/queues")}
        assert amqp_error(n1.amqp_url, lambda ch: ch.queue_declare(queue, passive=True)) == \
            (404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")
        # forgetting it again: it is not in the cluster
        again = n1.ctl_result("forget_cluster_node", n3.name)
        assert (again.returncode, again.stderr.strip()) == (
            69, "Error:\n{:not_a_cluster_node, 'The node selected is not in the cluster.'}")
        # started again with its old folder, the forgotten node does not boot (its database still
        # names the cluster); rabbitmq-server's script then exits, with status 0
        n3.launch()
        wait_for(lambda: n3.proc.poll() is not None, "the forgotten node's boot fails", timeout=120)
        assert n3.proc.returncode == 0
        assert "BOOT FAILED" in n3.log() and "inconsistent_cluster" in n3.log()
    finally:
        rabbitmq_cluster.rejoin(2)  # a fresh database, joined again: the session's cluster is whole
    assert [r["name"] for r in wait_for(lambda: full_rows(n1), "three full rows")] == [n1.name, n2.name, n3.name]


# ---- Warren's side: the same questions to a three-node Warren cluster on etcd, compared with the
# answers above. What Warren answers differently is an xfail saying so (strict: a fix shows as
# XPASS, and the mark goes); the killed-node test collects its differences and ends as an xfail
# listing them, after its hard checks of what already matches.

LEASE_TTL = "2"  # seconds: a killed node's row turns running false within a few of them
WARREN_NAMES = ["a", "b", "c"]


@dataclass
class WarrenCluster:
    nodes: Nodes
    etcd_cluster: EtcdCluster
    name: str
    members: list
    prometheus_ports: list[int]

    def prometheus_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.prometheus_ports[index]}"

    def args(self, index: int) -> list[str]:
        return ["--cluster-lease-ttl", LEASE_TTL, "--prometheus-port", str(self.prometheus_ports[index]),
                "--prometheus-host", "127.0.0.1"]

    @property
    def etcd(self) -> str:
        return self.etcd_cluster.endpoints

    def in_directory(self, queue: str, node: str) -> bool:
        """The queue is in the cluster's queue directory in etcd (warren/cluster/queues.py: each
        node writes its queues there once a second)."""
        return f"/warren/{self.name}/queues/%2F/{queue}/{node}" in self.etcd_cluster.get_prefix(
            f"/warren/{self.name}/queues/")

    def restart(self, index: int):
        """The node started again with its name and data folder, once its lease has ended (the
        others see a killed node down at once, its name is free only then)."""
        old = self.members[index]
        wait_for(lambda: WARREN_NAMES[index] not in members(self.etcd_cluster, self.name),
                 f"node {WARREN_NAMES[index]}'s lease ended")
        self.members[index] = self.nodes.start(self.etcd, self.name, WARREN_NAMES[index], *self.args(index),
                                               data_dir=old.data_dir)
        return self.members[index]


@pytest.fixture(scope="module")
def warren_cluster(etcd1, tmp_path_factory) -> WarrenCluster:
    nodes = Nodes(tmp_path_factory.mktemp("warren-cluster"))
    cluster = WarrenCluster(nodes, etcd1, f"t{uuid.uuid4().hex[:10]}", [], free_ports(len(WARREN_NAMES)))
    try:
        cluster.members = [nodes.start(etcd1.endpoints, cluster.name, n, *cluster.args(i))
                           for i, n in enumerate(WARREN_NAMES)]
        yield cluster
    finally:
        nodes.stop_all()


class WarrenApi:
    """RabbitNode's ``api`` for a Warren node (guest/guest), so that rows() and running() serve both."""

    def __init__(self, node, name: str) -> None:
        self.node, self.name = node, name

    def api(self, method: str, path: str, body=None, timeout: float = 30.0):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.node.http_url + path, data=data, method=method, headers={
            "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(), "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as e:
            status, payload = e.code, e.read()
        return status, json.loads(payload) if payload else None


def warren(cluster: WarrenCluster, index: int) -> WarrenApi:
    return WarrenApi(cluster.members[index], WARREN_NAMES[index])


def warren_ctl(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "ctl", "--url", node.http_url, *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def warren_cluster_status(node) -> tuple[dict, str]:
    return (json.loads(warren_ctl(node, "cluster_status", "--formatter", "json").stdout),
            warren_ctl(node, "cluster_status").stdout)


def warren_full_rows(api: WarrenApi) -> list[dict] | None:
    got = rows(api, "/api/nodes")
    return got if all(not r["running"] or "uptime" in r for r in got) else None


def test_warren_nodes_rows_have_rabbitmqs_keys(warren_cluster):
    a, b = warren(warren_cluster, 0), warren(warren_cluster, 1)
    for asked in (a, b):
        got = wait_for(lambda asked=asked: warren_full_rows(asked), "every row's figures")
        assert [r["name"] for r in got] == WARREN_NAMES  # sorted by name, as RabbitMQ's
        for r in got:
            assert RUNNING_ROW_KEYS <= set(r), RUNNING_ROW_KEYS - set(r)
            assert (r["type"], r["running"], r["partitions"], r["mem_alarm"], r["disk_free_alarm"]) == \
                ("disc", True, [], False, False)
            assert isinstance(r["os_pid"], str) and r["os_pid"].isdigit()
            assert isinstance(r["uptime"], int) and r["uptime"] > 0
            assert "listeners" not in r


@pytest.mark.xfail(strict=True, reason="Warren's /api/nodes rows carry being_drained (RabbitMQ 3.11+'s key); "
                                       "RabbitMQ 3.10.8's rows have none")
def test_warren_nodes_rows_have_no_key_rabbitmq_310_lacks(warren_cluster):
    got = wait_for(lambda: warren_full_rows(warren(warren_cluster, 0)), "every row's figures")
    assert all("being_drained" not in r for r in got)


def test_warren_cluster_links_list_the_other_nodes(warren_cluster):
    got = wait_for(lambda: warren_full_rows(warren(warren_cluster, 0)), "every row's figures")
    assert {link["name"] for link in got[0]["cluster_links"]} == set(WARREN_NAMES[1:])


def test_warren_overview_lists_every_nodes_listeners(warren_cluster):
    names = set()
    for i in (0, 1):
        status, overview = warren(warren_cluster, i).api("GET", "/api/overview")
        assert status == 200 and overview["node"] == WARREN_NAMES[i]
        names.add(overview["cluster_name"])  # Warren: one name for the cluster (RabbitMQ's, once set)
        listeners = overview["listeners"]
        assert {(x["node"], x["protocol"]) for x in listeners} >= \
            {(n, p) for n in WARREN_NAMES for p in ("amqp", "clustering", "http")}
        for x in listeners:
            assert {"node", "protocol", "ip_address", "port", "socket_opts"} <= set(x)
        amqp = {x["node"]: (x["ip_address"], x["port"]) for x in listeners if x["protocol"] == "amqp"}
        assert amqp == {n: ("127.0.0.1", m.port) for n, m in zip(WARREN_NAMES, warren_cluster.members)}
    assert len(names) == 1


def test_warren_prometheus_answers_for_its_own_node(warren_cluster):
    a, c = warren_cluster.members[0], warren_cluster.members[2]
    q1, q3 = f"p1-{uuid.uuid4().hex[:8]}", f"p3-{uuid.uuid4().hex[:8]}"
    declare(a.url, q1)
    declare(c.url, q3)
    try:
        publish(a.url, q1, [b"x"] * 2)
        publish(c.url, q3, [b"x"] * 7)
        expected = {"node 1": (2.0, None, 2.0), "node 3": (None, 7.0, 7.0)}  # as RabbitMQ's, node by node
        wait_for(lambda: prometheus_own_node(warren_cluster.prometheus_url(0), warren_cluster.prometheus_url(2),
                                             q1, q3) == expected,
                 f"each node's metrics of its own queue alone: {expected}")
        ids = [identity(scrape(warren_cluster.prometheus_url(i), "/metrics")) for i in (0, 2)]
        assert [i["rabbitmq_node"] for i in ids] == ["a", "c"]
    finally:
        for url, q in ((a.url, q1), (c.url, q3)):
            amqp_error(url, lambda ch, q=q: ch.queue_delete(q))


def test_warren_prometheus_permanent_id_is_the_clusters(warren_cluster):
    ids = [identity(scrape(warren_cluster.prometheus_url(i), "/metrics")) for i in (0, 1, 2)]
    assert len({i["rabbitmq_cluster_permanent_id"] for i in ids}) == 1


def test_warren_an_exclusive_queue_is_locked_cluster_wide(warren_cluster):
    queue = f"ex-{uuid.uuid4().hex[:8]}"
    a, b = warren_cluster.members[0], warren_cluster.members[1]
    got = exclusive_answers(a.url, b.url, queue, known=lambda: warren_cluster.in_directory(queue, "a"))
    expected = rabbitmq_exclusive_answers(queue)
    differences = [f"{k}: Warren {got[k]!r}" for k in expected if got[k] != expected[k]]
    if differences:
        pytest.xfail("an exclusive queue of node a asked through node b (RabbitMQ: 405 RESOURCE_LOCKED for each): "
                     + "; ".join(differences))


def test_warren_flow_through_another_node(warren_cluster):
    """test_flow_through_another_node asked of Warren: node c's publisher floods node a's queue.
    Warren holds a publisher at the queue's backlog mark, through any node as on one
    (tests/cluster/test_cluster_flow.py): the queue takes the mark and what was on its way, not
    the flood, and the publisher waits; then every message arrives, in order. The difference
    from RabbitMQ (the whole flood in the queue) ends the test as an xfail, after both
    halves are asserted."""
    a, c = warren_cluster.members[0], warren_cluster.members[2]
    queue = f"flood-{uuid.uuid4().hex[:8]}"
    flood = Flood(a.url, c.host, c.port, queue, FLOOD).start()
    try:
        wait_for(lambda: backlog(a.url, queue) >= 256, "the backlog at the mark")
        held = [backlog(a.url, queue) for _ in range(10)]
        assert max(held) < FLOOD // 10 and not flood.sent.is_set(), held
        assert flood.drain() == list(range(FLOOD))
    finally:
        flood.close()
        amqp_error(a.url, lambda ch: ch.queue_delete(queue))
    pytest.xfail(f"a flood through another node: RabbitMQ takes all {FLOOD - PREFETCH} into the queue (credit flow "
                 f"paces it), Warren holds the publisher at its flow mark ({max(held)} ready)")


def test_warren_classic_queue_placement(warren_cluster):
    """RabbitMQ 3.10.8's answers (test_classic_queue_placement) asked of Warren through node b:
    client-local by default is asserted; the rest is compared and its differences end the test
    as an xfail."""
    b = warren(warren_cluster, 1)
    url = warren_cluster.members[1].url
    prefix = f"pl-{uuid.uuid4().hex[:6]}"
    differences = []
    try:
        assert placements(url, b, f"{prefix}-default", 3) == ["b"] * 3
        delete_queues(url, prefix, b)
        got = placements(url, b, f"{prefix}-minm", 3, {"x-queue-master-locator": "min-masters"})
        if sorted(map(str, got)) != ["a", "b", "c"]:
            differences.append(f"x-queue-master-locator min-masters: RabbitMQ one queue on each node, Warren {got}")
        got = placements(url, b, f"{prefix}-bal", 1, {"x-queue-leader-locator": "balanced"})
        refusal = (406, f"PRECONDITION_FAILED - invalid arg 'x-queue-leader-locator' for queue '{prefix}-bal-0' in "
                        "vhost '/' of queue type rabbit_classic_queue")
        if got != [refusal]:
            differences.append(f"x-queue-leader-locator on a classic queue: RabbitMQ 3.10 refuses it (406), Warren "
                               f"{got} (the issue asks for the later releases' queue_leader_locator)")
    finally:
        delete_queues(url, prefix, b)
    if differences:
        pytest.xfail("; ".join(differences))


def test_warren_overview_listeners_sorted_by_protocol(warren_cluster):
    listeners = warren(warren_cluster, 0).api("GET", "/api/overview")[1]["listeners"]
    assert [x["protocol"] for x in listeners] == sorted(x["protocol"] for x in listeners)


def test_warren_cluster_status_layout(warren_cluster):
    a = warren_cluster.members[0]
    value, text = warren_cluster_status(a)
    assert CLUSTER_STATUS_KEYS <= set(value)
    assert value["disk_nodes"] == WARREN_NAMES and sorted(value["running_nodes"]) == WARREN_NAMES
    assert value["maintenance_status"] == {n: "not under maintenance" for n in WARREN_NAMES}
    assert (value["alarms"], value["partitions"]) == ([], {})
    assert sorted(value["listeners"]) == sorted(value["versions"]) == WARREN_NAMES
    for n in WARREN_NAMES:
        assert {x["node"] for x in value["listeners"][n]} == {n}
        assert all(set(x) == {"interface", "node", "port", "protocol", "purpose"} for x in value["listeners"][n])
    got_sections = sections(text)
    assert list(got_sections) == SECTIONS
    assert got_sections["Basics"] == [f"Cluster name: {value['cluster_name']}"]
    assert got_sections["Disk Nodes"] == WARREN_NAMES and got_sections["Running Nodes"] == WARREN_NAMES
    assert [line.split(":")[0] for line in got_sections["Versions"]] == WARREN_NAMES
    assert got_sections["Alarms"] == ["(none)"] and got_sections["Network Partitions"] == ["(none)"]
    assert all(re.fullmatch(r"Node: \S+, interface: \S+, port: \d+, protocol: \S+, purpose: .+", line)
               for line in got_sections["Listeners"])


def test_warren_cluster_status_has_ram_nodes(warren_cluster):
    assert warren_cluster_status(warren_cluster.members[0])[0]["ram_nodes"] == []


def test_warren_cluster_status_versions_keys(warren_cluster):
    value = warren_cluster_status(warren_cluster.members[0])[0]
    assert all(set(v) == {"rabbitmq_name", "rabbitmq_version", "erlang_version"} for v in value["versions"].values())


def test_warren_cluster_status_listeners_in_rabbitmqs_order(warren_cluster):
    order = ["http", "http/prometheus", "clustering", "amqp"]
    for entries in warren_cluster_status(warren_cluster.members[0])[0]["listeners"].values():
        protocols = [x["protocol"] for x in entries]
        assert protocols == [p for p in order if p in protocols]


@pytest.mark.xfail(strict=True, reason="warren ctl prints 'Cluster status of node N ...' on stderr; rabbitmqctl "
                                       "on stdout, as the text's first line")
def test_warren_cluster_status_text_opens_with_the_node(warren_cluster):
    text = warren_cluster_status(warren_cluster.members[0])[1]
    assert text.splitlines()[0] == "Cluster status of node a ..."


def test_warren_a_killed_node_and_its_queues_then_its_restart(warren_cluster):
    """The hard checks are what Warren answers as RabbitMQ already; the queue's answers, where
    they differ, end the test as an xfail listing them (queues are not shared across nodes yet)."""
    a, c = warren(warren_cluster, 0), warren(warren_cluster, 2)
    c_node = warren_cluster.members[2]
    durable, transient = f"d-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    declare(c_node.url, durable)
    declare(c_node.url, transient, durable=False)
    assert publish(c_node.url, durable, [b"m0", b"m1", b"m2"]) == (["ack"] * 3, [])
    exchange, imported = f"x-{durable}", f"i-{durable}"
    assert amqp_error(c_node.url, lambda ch: (ch.exchange_declare(exchange, "topic", durable=True),
                                                ch.queue_bind(durable, exchange, "k"))) == "ok"
    assert {r["name"]: r["node"] for r in rows(a, "/api/queues")}[durable] == "c"
    # Warren's directory of queues is up to a second behind a declare (RabbitMQ's Mnesia is not):
    # what is compared is the cluster once it knows the queue
    wait_for(lambda: warren_cluster.in_directory(durable, "c"), "the durable queue in the directory")
    differences = []

    def differ(what: str, rabbitmq, got) -> None:
        if rabbitmq != got:
            differences.append(f"{what}: RabbitMQ {rabbitmq!r}, Warren {got!r}")

    entry = {"name": durable, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
    defs = definitions(a)
    differ("the same export from nodes a and b", True, defs == definitions(warren(warren_cluster, 1)))
    differ("node a's export of node c's durable queue and its binding", (entry, True), exported(defs, durable, exchange))

    c_node.signal(signal.SIGKILL)
    c_node.proc.wait(timeout=30)
    try:
        wait_for(lambda: running(c, a) is False, "node a sees node c stopped")
        row = next(r for r in rows(a, "/api/nodes") if r["name"] == "c")
        assert row == {"name": "c", "type": "disc", "running": False, "cluster_links": []}
        assert a.api("GET", "/api/nodes/c") == (200, row)
        value, text = warren_cluster_status(a.node)
        assert value["disk_nodes"] == WARREN_NAMES and sorted(value["running_nodes"]) == ["a", "b"]
        assert sorted(value["versions"]) == sorted(value["listeners"]) == sorted(value["maintenance_status"]) == \
            ["a", "b"]
        got_sections = sections(text)
        assert got_sections["Disk Nodes"] == WARREN_NAMES and got_sections["Running Nodes"] == ["a", "b"]
        assert [line.split(":")[0] for line in got_sections["Versions"]] == ["a", "b"]

        queues = {r["name"]: r for r in rows(a, "/api/queues")}
        assert transient not in queues
        differ("/api/queues row of the down durable queue", ("down", "c", DOWN_QUEUE_KEYS),
               (queues[durable].get("state"), queues[durable].get("node"), set(queues[durable]))
               if durable in queues else None)
        assert a.api("GET", f"/api/queues/%2F/{durable}")[0] == 404
        defs = definitions(a)
        differ("node a's export with node c down (queue, binding)", (entry, False), exported(defs, durable, exchange))
        differ("an import through node b of a new queue and the down one", (204, None),
               import_queues(warren(warren_cluster, 1), imported, durable))
        differ("the imported queue's node", "b", {r["name"]: r["node"] for r in rows(a, "/api/queues")}.get(imported))
        got = down_queue_answers(a.node.url, durable)
        for what, expected in rabbitmq_down_queue_answers("c", durable).items():
            differ(what, expected, got[what])
    finally:
        c = WarrenApi(warren_cluster.restart(2), "c")
    wait_for(lambda: running(c, a), "node a sees node c running again")
    queues = {r["name"]: r for r in rows(a, "/api/queues")}
    differ("the durable queue after the restart (node, state)", ("c", "running"),
           (queues[durable].get("node"), queues[durable].get("state")) if durable in queues else None)
    differ("its messages, through node a", [b"m0", b"m1", b"m2"], drain(a.node.url, durable))
    differ("its binding exported again", True, exported(definitions(a), durable, exchange)[1])
    for node in (a.node, warren_cluster.members[1], c.node):  # wherever Warren put them
        for q in (durable, transient, imported):
            amqp_error(node.url, lambda ch, q=q: ch.queue_delete(q))
        amqp_error(node.url, lambda ch: ch.exchange_delete(exchange))
    if differences:
        pytest.xfail("Warren differs for a queue on a killed node: " + "; ".join(differences))


def test_warren_forget_cluster_node(warren_cluster):
    a = warren(warren_cluster, 0)
    c_node = warren_cluster.members[2]
    wait_for(lambda: running(WarrenApi(c_node, "c"), a), "node c running")
    queue = f"f-{uuid.uuid4().hex[:8]}"
    declare(c_node.url, queue)
    wait_for(lambda: warren_cluster.in_directory(queue, "c"), "the durable queue in the directory")
    refused = warren_ctl(a.node, "forget_cluster_node", "c")
    assert refused.returncode == 69 and "must be stopped before it can be removed" in refused.stderr
    c_node.stop()
    wait_for(lambda: running(WarrenApi(c_node, "c"), a) is False, "node a sees node c stopped")
    forgotten = warren_ctl(a.node, "forget_cluster_node", "c")
    assert forgotten.returncode == 0, forgotten.stderr
    assert [r["name"] for r in rows(a, "/api/nodes")] == ["a", "b"]  # no row at all, as RabbitMQ
    value = warren_cluster_status(a.node)[0]
    assert value["disk_nodes"] == ["a", "b"] and sorted(value["running_nodes"]) == ["a", "b"]
    again = warren_ctl(a.node, "forget_cluster_node", "c")
    assert again.returncode == 69 and "The node selected (c) is not in the cluster." in again.stderr
    # its durable queues are deleted with it (RabbitMQ), and the differences left
    differences = []
    if forgotten.stdout.strip() != "Removing node c from the cluster":
        differences.append("warren ctl forget_cluster_node prints 'Removing node c from the cluster' on stderr; "
                           "rabbitmqctl on stdout")
    if queue in {r["name"] for r in rows(a, "/api/queues")}:
        differences.append("the forgotten node's durable queue is still listed by node a")
    answer = amqp_error(a.node.url, lambda ch: ch.queue_declare(queue, passive=True))
    if answer != (404, f"NOT_FOUND - no queue '{queue}' in vhost '/'"):
        differences.append(f"a passive declare of the forgotten node's queue through node a answers {answer!r}")
    if differences:
        pytest.xfail("; ".join(differences))
