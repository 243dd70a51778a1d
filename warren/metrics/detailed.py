"""``/metrics/detailed``: RabbitMQ 3.10's filtered endpoint, the families a scrape asks for.

``?family=NAME`` (repeatable) chooses the metric families and ``?vhost=NAME`` (repeatable)
keeps the samples of those virtual hosts (samples with a vhost label; a channel or a connection
has none and is never filtered, as in RabbitMQ). Without ``family`` the answer has only the
node's identity, as RabbitMQ's has. RabbitMQ's Grafana dashboards and its docs ask this
endpoint for a few families instead of scraping every object.

The names are RabbitMQ's (checked against a RabbitMQ 3.10.8 node's answers,
``tests/metrics/test_detailed.py``): ``rabbitmq_detailed_…`` for object families,
``rabbitmq_cluster_…`` for ``vhost_status``, ``exchange_names`` and ``exchange_bindings``.
Families and samples with no Warren equivalent (Erlang reductions and process memory, consumer
utilisation, per channel-and-queue counters) are left out rather than reported as zero, as on
``/metrics`` (docs/metrics.md). A family name Warren does not serve is named in a ``#`` comment
line, which Prometheus ignores; RabbitMQ answers it with nothing.
"""

from __future__ import annotations

from typing import Iterator

from warren.metrics.collect import CHANNEL_FIELDS, CONNECTION_FIELDS, QUEUE_FIELDS, Snapshot
from warren.metrics.text import escape_label, header, labels, number

__all__ = ["render_detailed", "OBJECT_FAMILIES", "CLUSTER_FAMILIES", "SERVED_FAMILIES"]

DETAILED = "rabbitmq_detailed_"
CLUSTER = "rabbitmq_cluster_"

_QI = {name: i for i, name in enumerate(QUEUE_FIELDS)}
_CHI = {name: i for i, name in enumerate(CHANNEL_FIELDS)}
_CONNI = {name: i for i, name in enumerate(CONNECTION_FIELDS)}

# family -> (kind of object, ((name after the prefix, type, field of the row, HELP), ...)), in
# RabbitMQ's order within each family
OBJECT_FAMILIES: dict[str, tuple[str, tuple]] = {
    "queue_coarse_metrics": ("queue", (
        ("queue_messages_ready", "gauge", "ready", "Messages ready to be delivered to consumers"),
        ("queue_messages_unacked", "gauge", "unacked", "Messages delivered to consumers but not yet acknowledged"),
        ("queue_messages", "gauge", "messages", "Sum of ready and unacknowledged messages - total queue depth"),
    )),
    "queue_consumer_count": ("queue", (
        ("queue_consumers", "gauge", "consumers", "Consumers on a queue"),
    )),
    "queue_metrics": ("queue", (
        ("queue_consumers", "gauge", "consumers", "Consumers on a queue"),
        ("queue_messages_ready_ram", "gauge", "ready_ram", "Ready messages stored in memory"),
        ("queue_messages_ready_bytes", "gauge", "ready_bytes", "Size in bytes of ready messages"),
        ("queue_messages_paged_out", "gauge", "paged_out", "Messages paged out to disk"),
        ("queue_messages_paged_out_bytes", "gauge", "paged_out_bytes", "Size in bytes of messages paged out to disk"),
    )),
    "channel_metrics": ("channel", (
        ("channel_consumers", "gauge", "consumers", "Consumers on a channel"),
        ("channel_messages_unacked", "gauge", "unacked", "Delivered but not yet acknowledged messages"),
        ("channel_messages_unconfirmed", "gauge", "unconfirmed", "Published but not yet confirmed messages"),
    )),
    "connection_coarse_metrics": ("connection", (
        ("connection_incoming_bytes_total", "counter", "incoming_bytes", "Total number of bytes received on a connection"),
        ("connection_outgoing_bytes_total", "counter", "outgoing_bytes", "Total number of bytes sent on a connection"),
    )),
    "connection_metrics": ("connection", (
        ("connection_channels", "gauge", "channels", "Channels on a connection"),
    )),
}
CLUSTER_FAMILIES = ("vhost_status", "exchange_names", "exchange_bindings")
SERVED_FAMILIES = (*OBJECT_FAMILIES, "connection_churn_metrics", *CLUSTER_FAMILIES)


def render_detailed(snap: Snapshot, broker, families: list[str], vhosts: list[str], identity: str) -> Iterator[str]:
    """The answer, chunk by chunk: each family asked for (in the order asked, each once), the
    samples of ``vhosts`` only when some are given, then ``identity`` (the node's build and
    identity lines, as every RabbitMQ endpoint ends)."""
    keep = set(vhosts) if vhosts else None
    seen: set[str] = set()
    for family in families:
        if family in seen:
            continue
        seen.add(family)
        if family in OBJECT_FAMILIES:
            kind, metrics = OBJECT_FAMILIES[family]
            yield _objects(snap, kind, metrics, keep)
        elif family == "connection_churn_metrics":
            yield _churn(snap)
        elif family in CLUSTER_FAMILIES:
            yield _cluster(broker, family, keep)
        else:
            yield f"# family {escape_label(family)} is not served by Warren (docs/metrics.md)\n"
    yield identity


def _objects(snap: Snapshot, kind: str, metrics: tuple, keep: set | None) -> str:
    if kind == "queue":
        rows = [r for r in snap.queue_rows if keep is None or r[0] in keep]
        index = _QI
        marks = [f'{{vhost="{escape_label(r[0])}",queue="{escape_label(r[1])}"}}' for r in rows]
    else:  # a channel or a connection: labelled by name only, so a vhost filter keeps it (RabbitMQ)
        rows = snap.channel_rows if kind == "channel" else snap.connection_rows
        index = _CHI if kind == "channel" else _CONNI
        marks = [f'{{channel="{escape_label(r[0])}"}}' for r in rows]
    out = []
    for name, kind_of_metric, field, text in metrics:
        full = DETAILED + name
        i = index[field]
        out.append(header(full, kind_of_metric, text))
        out.extend(f"{full}{mark} {number(row[i])}\n" for mark, row in zip(marks, rows))
    return "".join(out)


def _churn(snap: Snapshot) -> str:
    counts = (
        ("connections_opened_total", "Total number of connections opened", snap.connections_closed + snap.connections),
        ("connections_closed_total", "Total number of connections closed or terminated", snap.connections_closed),
        ("channels_opened_total", "Total number of channels opened", snap.channels_closed + snap.channels),
        ("channels_closed_total", "Total number of channels closed", snap.channels_closed),
        ("queues_created_total", "Total number of queues created", snap.queues_deleted + snap.queues),
        ("queues_deleted_total", "Total number of queues deleted", snap.queues_deleted),
    )
    return "".join(f"{header(DETAILED + name, 'counter', text)}{DETAILED}{name} {number(value)}\n"
                   for name, text, value in counts)


def _cluster(broker, family: str, keep: set | None) -> str:
    vhosts = [v for name, v in sorted(broker.vhosts.items()) if keep is None or name in keep]
    if family == "vhost_status":
        name = CLUSTER + "vhost_status"
        return header(name, "gauge", "Whether a given vhost is running") + "".join(
            f"{name}{labels((('vhost', v.name),))} 1\n" for v in vhosts)
    exchanges = [(v.name, x) for v in vhosts for n, x in sorted(v.exchanges.items()) if n != ""]
    if family == "exchange_names":
        name = CLUSTER + "exchange_name"
        return header(name, "gauge", "Enumerates exchanges without any additional info. This value is cluster-wide. "
                                     "A cheaper alternative to `exchange_bindings`") + "".join(
            f"{name}{labels((('vhost', v), ('exchange', x.name), ('type', x.TYPE)))} 1\n" for v, x in exchanges)
    name = CLUSTER + "exchange_bindings"
    return header(name, "gauge", "Number of bindings for an exchange. This value is cluster-wide.") + "".join(
        f"{name}{labels((('vhost', v), ('exchange', x.name), ('type', x.TYPE)))} {len(x.bindings)}\n"
        for v, x in exchanges)
