"""`status`, `ping`, `await_startup` and `cluster_status`: is the broker there, and how is it;
`forget_cluster_node`: a node of its cluster removed for good."""

from __future__ import annotations

import sys
import time
from urllib.parse import urlsplit, urlunsplit

import click

from warren.cli.ctl import api, common_options, ctl, settings
from warren.cli.ctl.client import EX_DATAERR, EX_NOPERM, EX_SOFTWARE, EX_TEMPFAIL, EX_UNAVAILABLE, ApiError, CtlError
from warren.cli.ctl.output import emit_value, info

__all__ = ["status", "ping", "await_startup", "cluster_status", "forget_cluster_node"]

AWAIT_DEFAULT_S = 300.0  # rabbitmqctl await_startup's default
POLL_INTERVAL_S = 0.2


def _size(n) -> str:
    if not isinstance(n, (int, float)):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def is_warren(overview: dict) -> bool:
    """Whether the broker that answered is a Warren (RabbitMQ 3.10+ says product_name RabbitMQ)."""
    return overview.get("product_name") == "Warren"


def status_heading(overview: dict, url: str) -> str:
    """The first line: which broker answered, in its own words, and where (rabbitmqctl's wording
    for RabbitMQ, whose node name is the only name it has; Warren's node name is RabbitMQ's form
    for monitoring checks, so the product is said beside it)."""
    node = overview.get("node", "?")
    if is_warren(overview):
        parts = urlsplit(url)  # never the password of a URL's user:pass@
        shown = urlunsplit((parts.scheme, parts.hostname + (f":{parts.port}" if parts.port else ""),
                            parts.path, "", "")) if parts.hostname else url
        return f"Status of Warren node {node} at {shown} ..."
    return f"Status of node {node} ..."


def _status_text(overview: dict, node: dict | None, url: str) -> str:
    lines = [status_heading(overview, url), "", "Runtime", ""]
    product = overview.get("product_name") or "RabbitMQ"
    version = overview.get("product_version") or overview.get("rabbitmq_version", "?")
    lines.append(f"{product} version: {version}")
    if is_warren(overview):
        # Warren runs on Python: its overview's erlang_version field says so for RabbitMQ's tools
        lines.append(f"RabbitMQ management API level: {overview.get('rabbitmq_version', '?')}")
        if overview.get("erlang_version"):
            lines.append(f"Runtime: {overview['erlang_version']}")
    elif overview.get("erlang_version"):
        lines.append(f"Erlang version: {overview['erlang_version']}")
    if overview.get("cluster_name"):
        lines.append(f"Cluster name: {overview['cluster_name']}")
    if node:
        if "uptime" in node:
            lines.append(f"Uptime (seconds): {int(node['uptime']) // 1000}")
        lines += ["", "Memory", ""]
        lines.append(f"Used: {_size(node.get('mem_used'))}, limit: {_size(node.get('mem_limit'))}, "
                     f"alarm: {str(bool(node.get('mem_alarm'))).lower()}")
        lines += ["", "Free disk space", ""]
        lines.append(f"Free: {_size(node.get('disk_free'))}, limit: {_size(node.get('disk_free_limit'))}, "
                     f"alarm: {str(bool(node.get('disk_free_alarm'))).lower()}")
    lines += ["", "Listeners", ""]
    for listener in overview.get("listeners") or []:
        lines.append(f"Interface: {listener.get('ip_address', '?')}, port: {listener.get('port', '?')}, "
                     f"protocol: {listener.get('protocol', '?')}")
    totals = overview.get("object_totals") or {}
    if totals:
        lines += ["", "Totals", ""]
        for key in ("connections", "channels", "queues", "consumers", "exchanges"):
            if key in totals:
                lines.append(f"{key.capitalize()}: {totals[key]}")
    queue_totals = overview.get("queue_totals") or {}
    if queue_totals:
        lines.append(f"Messages: {queue_totals.get('messages', 0)} (ready {queue_totals.get('messages_ready', 0)}, "
                     f"unacknowledged {queue_totals.get('messages_unacknowledged', 0)})")
    return "\n".join(lines)


@ctl.command("status")
@common_options
def status() -> None:
    """Displays the status of the broker: version, memory, disk, listeners, totals."""
    s = settings()
    client = api(s)
    overview = client.get("overview")
    info(s, status_heading(overview, s.url))
    node = None
    if overview.get("node"):
        try:
            node = client.get("nodes", overview["node"])
        except ApiError as e:
            if e.status not in (404, 405):
                raise
    emit_value(s, {"overview": overview, "node": node}, _status_text(overview, node, s.url))


@ctl.command("ping")
@common_options
def ping() -> None:
    """Checks that the broker answers on its HTTP API and accepts the credentials."""
    s = settings()
    info(s, f"Will ping the broker at {s.url} ...")
    api(s).get("overview")
    emit_value(s, {"result": "ok"}, "Ping succeeded")


@ctl.command("await_startup")
@common_options
def await_startup() -> None:
    """Waits until the broker answers on its HTTP API (bounded by -t/--timeout, default 300 s;
    exit 75 when it did not come up in time)."""
    s = settings()
    given = click.get_current_context().find_object(dict) or {}
    limit = float(given.get("timeout") or AWAIT_DEFAULT_S)
    deadline = time.monotonic() + limit
    client = api(s)
    info(s, f"Waiting for the broker at {s.url} to start (up to {limit:g} s) ...")
    show_progress = not (s.quiet or s.silent)
    tty = sys.stderr.isatty()
    started = time.monotonic()
    last_report = started
    last_problem = "no answer yet"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if show_progress and tty:
                click.echo("", err=True)
            raise CtlError(EX_TEMPFAIL, f"the broker at {s.url} did not start within {limit:g} s "
                                        f"(last: {last_problem})")
        try:
            client.request("GET", "overview", timeout=max(0.1, min(remaining, 5.0)))
            break
        except ApiError as e:
            if e.status in (401, 403):  # it is up, but will not let us in: waiting will not help
                raise CtlError(EX_NOPERM, e.describe()) from None
            last_problem = e.describe()
        except CtlError as e:
            last_problem = e.message
        now = time.monotonic()
        if show_progress and now - last_report >= (1.0 if tty else 5.0):
            last_report = now
            if tty:
                click.echo(".", err=True, nl=False)
            else:
                click.echo(f"still waiting ({now - started:.0f} s): {last_problem}", err=True)
        time.sleep(min(POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))
    if show_progress and tty and last_report != started:
        click.echo("", err=True)
    info(s, f"The broker at {s.url} is up ({time.monotonic() - started:.1f} s).")


# rabbitmqctl cluster_status's "purpose" of each listener protocol (RabbitMQ 3.10's words)
LISTENER_PURPOSES = {
    "amqp": "AMQP 0-9-1 and AMQP 1.0",
    "amqp/ssl": "AMQP 0-9-1 and AMQP 1.0 over TLS",
    "http": "HTTP API",
    "https": "HTTP API over TLS (HTTPS)",
    "http/prometheus": "Prometheus exporter API over HTTP",
    "https/prometheus": "Prometheus exporter API over TLS (HTTPS)",
    "clustering": "inter-node and CLI tool communication",
}


# the order rabbitmqctl 3.10 lists a node's listeners in (others after them)
LISTENER_ORDER = {protocol: i for i, protocol in enumerate(
    ("http", "https", "http/prometheus", "https/prometheus", "clustering", "amqp", "amqp/ssl"))}


def cluster_status_value(overview: dict, nodes: list[dict], feature_flags: list[dict] | None) -> dict:
    """rabbitmqctl cluster_status's JSON (``--formatter json``), from the HTTP API: the node that
    answers lists the others (/api/nodes); a node's version is the answering node's (the API
    gives one per cluster)."""
    names = [n.get("name", "?") for n in nodes] or [overview.get("node", "?")]
    product = overview.get("product_name") or "RabbitMQ"
    version = overview.get("product_version") or overview.get("rabbitmq_version", "?")
    runtime = overview.get("erlang_version", "?")
    alarms = []
    for n in nodes:
        if n.get("mem_alarm"):
            alarms.append({"node": n.get("name"), "resource": "memory", "type": "resource_limit"})
        if n.get("disk_free_alarm"):
            alarms.append({"node": n.get("name"), "resource": "disk", "type": "resource_limit"})
    listeners: dict[str, list] = {}
    for listener in overview.get("listeners") or []:
        protocol = listener.get("protocol", "?")
        listeners.setdefault(listener.get("node", names[0]), []).append({
            "interface": _interface(listener.get("ip_address", "?")), "node": listener.get("node", names[0]),
            "port": listener.get("port", "?"), "protocol": protocol,
            "purpose": LISTENER_PURPOSES.get(protocol, protocol)})
    for entries in listeners.values():  # rabbitmqctl's order: HTTP, Prometheus, clustering, AMQP
        entries.sort(key=lambda x: LISTENER_ORDER.get(x["protocol"], len(LISTENER_ORDER)))
    running = [n.get("name") for n in nodes if n.get("running", True)] or names
    return {
        "cluster_name": overview.get("cluster_name") or names[0],
        "disk_nodes": names,
        "ram_nodes": [],  # (RabbitMQ 3.10 lists none: RAM nodes are deprecated; Warren has none)
        "running_nodes": running,
        # what is asked of running nodes: a down node has no entry (as rabbitmqctl's). RabbitMQ's
        # keys: for Warren the product is Warren, the runtime Python, as /api/overview says
        "versions": {name: {"rabbitmq_name": product, "rabbitmq_version": version, "erlang_version": runtime}
                     for name in running},
        "maintenance_status": {n.get("name"): "being drained" if n.get("being_drained") else "not under maintenance"
                               for n in nodes if n.get("running", True)} or {names[0]: "not under maintenance"},
        "alarms": alarms,
        "partitions": {n.get("name"): n.get("partitions") for n in nodes if n.get("partitions")},
        "listeners": listeners,
        "feature_flags": [{"name": f.get("name"), "state": f.get("state")} for f in feature_flags or []],
    }


def _interface(address: str) -> str:
    """An IPv6 address in brackets, as rabbitmqctl prints ``[::]``."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def cluster_status_text(value: dict, is_rabbitmq: bool) -> str:
    """rabbitmqctl 3.10's layout: the section titles, one node or item a line, (none) when empty."""
    runtime_word = "Erlang" if is_rabbitmq else "Python"

    def section(title: str, lines: list[str]) -> list[str]:
        return ["", title, "", *(lines or ["(none)"])]

    out = ["Basics", "", f"Cluster name: {value['cluster_name']}"]
    out += section("Disk Nodes", value["disk_nodes"])
    out += section("Running Nodes", value["running_nodes"])
    out += section("Versions", [f"{node}: {v['rabbitmq_name']} {v['rabbitmq_version']} on {runtime_word} "
                                f"{v['erlang_version'].removeprefix('Python ')}" for node, v in value["versions"].items()])
    out += section("Maintenance status", [f"Node: {node}, status: {status}"
                                          for node, status in value["maintenance_status"].items()])
    out += section("Alarms", [("Memory alarm on node " if a["resource"] == "memory" else "Free disk space alarm on node ")
                              + str(a["node"]) for a in value["alarms"]])
    out += section("Network Partitions", [f"Node {node} cannot communicate with {', '.join(map(str, peers))}"
                                          for node, peers in value["partitions"].items()])
    out += section("Listeners", [f"Node: {listener['node']}, interface: {listener['interface']}, "
                                 f"port: {listener['port']}, protocol: {listener['protocol']}, "
                                 f"purpose: {listener['purpose']}"
                                 for node_listeners in value["listeners"].values() for listener in node_listeners])
    out += section("Feature flags", [f"Flag: {f['name']}, state: {f['state']}" for f in value["feature_flags"]])
    return "\n".join(out)


@ctl.command("cluster_status")
@common_options
def cluster_status() -> None:
    """Displays the cluster's nodes, running nodes, versions, alarms, partitions, listeners and
    feature flags, in rabbitmqctl's layout (a Warren cluster on etcd: every node that joined and
    was not forgotten, docs/clustering.md)."""
    s = settings()
    client = api(s)
    overview = client.get("overview")
    info(s, f"Cluster status of node {overview.get('node', '?')} ...")
    nodes = client.get("nodes")
    try:
        flags = client.get("feature-flags")
    except ApiError as e:
        if e.status not in (404, 405):
            raise
        flags = []  # Warren has none
    value = cluster_status_value(overview, nodes if isinstance(nodes, list) else [], flags)
    emit_value(s, value, cluster_status_text(value, not is_warren(overview)))


@ctl.command("forget_cluster_node")
@click.argument("node")
@common_options
def forget_cluster_node(node: str) -> None:
    """Removes a stopped NODE from the cluster for good, asked of a running node (started again
    with its data folder, NODE is refused: give it a new one)."""
    s = settings()
    info(s, f"Removing node {node} from the cluster")
    try:
        api(s).delete("nodes", node)
    except ApiError as e:
        if e.status == 404:
            raise CtlError(EX_UNAVAILABLE, f"The node selected ({node}) is not in the cluster.") from None
        if e.status == 409:  # a running node: rabbitmqctl's status for it
            raise CtlError(EX_UNAVAILABLE, " ".join((e.reason or "").split())) from None
        if e.status == 400:
            raise CtlError(EX_DATAERR, " ".join((e.reason or "").split())) from None
        if e.status == 503:
            raise CtlError(EX_SOFTWARE, " ".join((e.reason or "").split())) from None
        raise
