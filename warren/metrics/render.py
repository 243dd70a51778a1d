"""A snapshot (collect.py) as Prometheus text, in chunks the server writes between loop turns.

Names, types, labels and HELP texts follow RabbitMQ 3.10's ``rabbitmq_prometheus`` where
Warren has the same quantity (checked against a real RabbitMQ's ``/metrics`` and
``/metrics/per-object``); Warren's own are ``warren_…``. docs/metrics.md is the table.

RabbitMQ's split: ``/metrics`` reports the queue, channel and connection families once each,
summed over the node (no labels); ``/metrics/per-object`` reports them per object, a queue
labelled ``vhost`` and ``queue``, a channel or connection labelled ``channel`` (RabbitMQ puts
an Erlang process id there, Warren the HTTP API's channel or connection name).
"""

from __future__ import annotations

import time
from typing import Iterator

from warren.metrics.collect import CHANNEL_FIELDS, CONNECTION_FIELDS, QUEUE_FIELDS, Snapshot
from warren.metrics.text import escape_label, header, histogram_lines, labels, number

__all__ = ["render", "CHUNK", "QUEUE_FAMILIES", "CHANNEL_FAMILIES", "CONNECTION_FAMILIES"]

CHUNK = 2000  # sample lines per chunk (about a millisecond of formatting)

PROTOCOL = (("protocol", "amqp091"),)
RABBIT_QUEUE_TYPES = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue",
                      "stream": "rabbit_stream_queue"}

# (name, type, field of the row, HELP); per_object_only: not summed at /metrics
QUEUE_FAMILIES = (
    ("rabbitmq_queue_messages_ready", "gauge", "ready", "Messages ready to be delivered to consumers"),
    ("rabbitmq_queue_messages_unacked", "gauge", "unacked", "Messages delivered to consumers but not yet acknowledged"),
    ("rabbitmq_queue_messages", "gauge", "messages", "Sum of ready and unacknowledged messages - total queue depth"),
    ("rabbitmq_queue_consumers", "gauge", "consumers", "Consumers on a queue"),
    ("rabbitmq_queue_messages_ready_ram", "gauge", "ready_ram", "Ready messages stored in memory"),
    ("rabbitmq_queue_messages_ready_bytes", "gauge", "ready_bytes", "Size in bytes of ready messages"),
    ("rabbitmq_queue_messages_paged_out", "gauge", "paged_out", "Messages paged out to disk"),
    ("rabbitmq_queue_messages_paged_out_bytes", "gauge", "paged_out_bytes",
     "Size in bytes of messages paged out to disk"),
)
QUEUE_COUNTER_FAMILIES = (  # per object only: /metrics has the rabbitmq_global_* totals instead
    ("warren_queue_messages_published_total", "counter", "published",
     "Messages enqueued on the queue (its sequence number; a stream's next offset)"),
    ("warren_queue_messages_delivered_total", "counter", "delivered",
     "Messages delivered to consumers or fetched with basic.get from the queue"),
    ("warren_queue_messages_acknowledged_total", "counter", "acked", "Deliveries from the queue acknowledged"),
    ("warren_queue_messages_redelivered_total", "counter", "redelivered",
     "Deliveries from the queue flagged redelivered"),
)
CHANNEL_FAMILIES = (
    ("rabbitmq_channel_consumers", "gauge", "consumers", "Consumers on a channel"),
    ("rabbitmq_channel_messages_unacked", "gauge", "unacked", "Delivered but not yet acknowledged messages"),
    ("rabbitmq_channel_messages_unconfirmed", "gauge", "unconfirmed", "Published but not yet confirmed messages"),
    ("rabbitmq_channel_messages_published_total", "counter", "published",
     "Total number of messages published into an exchange on a channel"),
    ("rabbitmq_channel_messages_confirmed_total", "counter", "confirmed",
     "Total number of messages published into an exchange and confirmed on the channel"),
    ("rabbitmq_channel_messages_unroutable_returned_total", "counter", "returned",
     "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable"),
    ("rabbitmq_channel_messages_unroutable_dropped_total", "counter", "dropped",
     "Total number of messages published as non-mandatory into an exchange and dropped as unroutable"),
    ("rabbitmq_channel_messages_acked_total", "counter", "acked",
     "Total number of messages acknowledged by consumers"),
    ("warren_channel_messages_delivered_total", "counter", "delivered",
     "Messages delivered on the channel by basic.deliver or basic.get-ok"),
)
CONNECTION_FAMILIES = (
    ("rabbitmq_connection_incoming_bytes_total", "counter", "incoming_bytes",
     "Total number of bytes received on a connection"),
    ("rabbitmq_connection_outgoing_bytes_total", "counter", "outgoing_bytes",
     "Total number of bytes sent on a connection"),
    ("rabbitmq_connection_channels", "gauge", "channels", "Channels on a connection"),
)


def _field_index(fields: tuple) -> dict:
    return {name: i for i, name in enumerate(fields)}


_QI, _CHI, _CONNI = _field_index(QUEUE_FIELDS), _field_index(CHANNEL_FIELDS), _field_index(CONNECTION_FIELDS)


def _simple(name: str, kind: str, text: str, value, label_pairs=()) -> str:
    return f"{header(name, kind, text)}{name}{labels(label_pairs)} {number(value)}\n"


def _labelled(name: str, kind: str, text: str, samples) -> str:
    """One family with several label sets: samples are (label pairs, value)."""
    return header(name, kind, text) + "".join(f"{name}{labels(pairs)} {number(v)}\n" for pairs, v in samples)


def render(snap: Snapshot, ctx) -> Iterator[str]:
    """The whole exposition, chunk by chunk. ``ctx`` is the MetricsServer (identity, probes)."""
    yield _node_families(snap, ctx)
    yield from _object_families(snap, QUEUE_FAMILIES, _QI, snap.queue_rows, snap.queue_sums, _queue_labels)
    if snap.per_object:
        yield from _object_families(snap, QUEUE_COUNTER_FAMILIES, _QI, snap.queue_rows, snap.queue_sums,
                                    _queue_labels)
    yield from _object_families(snap, CHANNEL_FAMILIES, _CHI, snap.channel_rows, snap.channel_sums, _name_labels)
    yield from _object_families(snap, CONNECTION_FAMILIES, _CONNI, snap.connection_rows, snap.connection_sums,
                                _name_labels)
    if snap.per_object:
        yield _stream_reader_family(snap)
    yield _warren_families(snap, ctx)


def _stream_reader_family(snap: Snapshot) -> str:
    """Per object: how many committed records each reader of a stream has not read yet (AMQP
    consumers by consumer tag, HTTP readers by the name their records requests give)."""
    return _labelled(
        "warren_stream_reader_offset_lag", "gauge",
        "Records committed in the stream that the reader has not read yet (consumer or named HTTP reader)",
        [((("vhost", vhost), ("queue", queue), ("kind", kind), ("reader", reader)), lag)
         for vhost, queue, kind, reader, lag in snap.stream_reader_rows])


def _queue_labels(rows, start: int, stop: int) -> list[str]:
    return [f'{{vhost="{escape_label(r[0])}",queue="{escape_label(r[1])}"}}' for r in rows[start:stop]]


def _name_labels(rows, start: int, stop: int) -> list[str]:
    return [f'{{channel="{escape_label(r[0])}"}}' for r in rows[start:stop]]


def _object_families(snap: Snapshot, families, index: dict, rows: list, sums: list, make_labels) -> Iterator[str]:
    if not snap.per_object:
        yield "".join(f"{header(name, kind, text)}{name} {sums[index[field]]}\n" for name, kind, field, text in families)
        return
    label_cache: list[list[str]] = []  # the label strings of each chunk, made once for all families
    for name, kind, field, text in families:
        i = index[field]
        yield header(name, kind, text)
        for n, start in enumerate(range(0, len(rows), CHUNK)):
            if n == len(label_cache):
                label_cache.append(make_labels(rows, start, start + CHUNK))
                yield ""  # a turn for the loop: making labels is a chunk's worth of work
            yield "".join([f"{name}{lab} {row[i]}\n" for lab, row in zip(label_cache[n], rows[start:start + CHUNK])])


def _node_families(snap: Snapshot, ctx) -> str:
    node = snap.node
    by_type = [(RABBIT_QUEUE_TYPES.get(t, t), counts) for t, counts in sorted(snap.by_queue_type.items())]
    routed = snap.received - snap.unroutable_dropped - snap.unroutable_returned
    out = [
        _simple("rabbitmq_alarms_file_descriptor_limit", "untyped",
                "is 1 if file descriptor limit alarm is in effect", 0),
        _simple("rabbitmq_alarms_free_disk_space_watermark", "untyped",
                "is 1 if free disk space watermark alarm is in effect", node["disk_alarm"]),
        _simple("rabbitmq_alarms_memory_used_watermark", "untyped",
                "is 1 if VM memory watermark alarm is in effect", node["memory_alarm"]),
        _simple("rabbitmq_connections_opened_total", "counter", "Total number of connections opened",
                snap.connections_closed + snap.connections),
        _simple("rabbitmq_connections_closed_total", "counter", "Total number of connections closed or terminated",
                snap.connections_closed),
        _simple("rabbitmq_channels_opened_total", "counter", "Total number of channels opened",
                snap.channels_closed + snap.channels),
        _simple("rabbitmq_channels_closed_total", "counter", "Total number of channels closed", snap.channels_closed),
        _simple("rabbitmq_queues_created_total", "counter", "Total number of queues created",
                snap.queues_deleted + snap.queues),
        _simple("rabbitmq_queues_deleted_total", "counter", "Total number of queues deleted", snap.queues_deleted),
        _simple("rabbitmq_process_open_fds", "gauge", "Open file descriptors", node["open_fds"]),
        _simple("rabbitmq_process_open_tcp_sockets", "gauge", "Open TCP sockets", snap.connections),
        _simple("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used in bytes", node["resident"]),
        _simple("rabbitmq_disk_space_available_bytes", "gauge", "Disk space available in bytes", node["disk_free"]),
        _simple("rabbitmq_process_max_fds", "gauge", "Open file descriptors limit", node["max_fds"]),
        _simple("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory high watermark in bytes",
                node["memory_limit"]),
        _simple("rabbitmq_disk_space_available_limit_bytes", "gauge", "Free disk space low watermark in bytes",
                node["disk_free_limit"]),
        _simple("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                int(ctx.started_at)),
        _simple("rabbitmq_connections", "gauge", "Connections currently open", snap.connections),
        _simple("rabbitmq_channels", "gauge", "Channels currently open", snap.channels),
        _simple("rabbitmq_consumers", "gauge", "Consumers currently connected", snap.consumers),
        _simple("rabbitmq_queues", "gauge", "Queues available", snap.queues),
        _simple("rabbitmq_build_info", "untyped", "RabbitMQ & Erlang/OTP version info", 1, ctx.build_labels),
        _simple("rabbitmq_identity_info", "untyped", "RabbitMQ node & cluster identity info", 1, ctx.identity_labels),
        _simple("rabbitmq_global_consumers", "gauge", "Current number of consumers", snap.consumers, PROTOCOL),
        _labelled("rabbitmq_global_messages_acknowledged_total", "counter",
                  "Total number of messages acknowledged by consumers",
                  [(PROTOCOL + (("queue_type", t),), c[2]) for t, c in by_type]),
        _simple("rabbitmq_global_messages_confirmed_total", "counter",
                "Total number of messages confirmed to publishers", snap.confirmed, PROTOCOL),
        _labelled("rabbitmq_global_messages_delivered_total", "counter",
                  "Total number of messages delivered to consumers",
                  [(PROTOCOL + (("queue_type", t),), c[0] + c[1]) for t, c in by_type]),
        _simple("rabbitmq_global_messages_received_confirm_total", "counter",
                "Total number of messages received from publishers expecting confirmations",
                snap.received_confirm, PROTOCOL),
        _simple("rabbitmq_global_messages_received_total", "counter",
                "Total number of messages received from publishers", snap.received, PROTOCOL),
        _labelled("rabbitmq_global_messages_redelivered_total", "counter",
                  "Total number of messages redelivered to consumers",
                  [(PROTOCOL + (("queue_type", t),), c[3]) for t, c in by_type]),
        _simple("rabbitmq_global_messages_routed_total", "counter",
                "Total number of messages routed to queues or streams", max(0, routed), PROTOCOL),
        _simple("rabbitmq_global_messages_unroutable_dropped_total", "counter",
                "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
                snap.unroutable_dropped, PROTOCOL),
        _simple("rabbitmq_global_messages_unroutable_returned_total", "counter",
                "Total number of messages published as mandatory into an exchange and returned to the publisher "
                "as unroutable", snap.unroutable_returned, PROTOCOL),
        _simple("rabbitmq_global_publishers", "gauge", "Current number of publishers", snap.publishers, PROTOCOL),
    ]
    return "".join(out)


def _warren_families(snap: Snapshot, ctx) -> str:
    node = snap.node
    sums = snap.queue_sums
    probes = snap.probes
    out = [
        header("warren_event_loop_lag_seconds", "histogram",
               f"How late the event loop ran a timer due every {ctx.loop_lag.interval:g} s: the time other work "
               "held the loop"),
        histogram_lines("warren_event_loop_lag_seconds", probes.lag),
        header("warren_gc_pause_seconds", "histogram",
               "Duration of CPython garbage collections, by generation (2: full passes, warren/server/collector.py)"),
        "".join(histogram_lines("warren_gc_pause_seconds", h, (("generation", str(g)),))
                for g, h in enumerate(probes.gc)),
        _labelled("warren_gc_collected_objects_total", "counter",
                  "Unreachable objects the garbage collector freed, by generation",
                  [((("generation", str(g)),), n) for g, n in enumerate(probes.gc_collected)]),
        header("warren_store_sync_seconds", "histogram",
               "Duration of the message store's group commits (write and fsync of every store written since "
               "the previous one); publisher confirms of persistent messages wait for them"),
        histogram_lines("warren_store_sync_seconds", probes.sync),
        _simple("warren_paged_out_messages", "gauge", "Ready messages paged out to disk (all queues)",
                sums[_QI["paged_out"]]),
        _simple("warren_paged_out_bytes", "gauge", "Body octets of the ready messages paged out to disk (all queues)",
                sums[_QI["paged_out_bytes"]]),
        _simple("warren_memory_queued_bytes", "gauge",
                "Octets of queued messages held in memory at the memory budget's last check", node["held"]),
        _simple("warren_memory_paging_budget_bytes", "gauge",
                "Octets of queued messages kept in memory before queues page to disk (0: never page)",
                node["paging_budget"]),
        _labelled("warren_store_damaged_records_total", "counter",
                  "Messages (kind queue or delayed) or stream entries (kind stream) lost to damaged files "
                  "when their store was opened at start-up (the files are kept in the quarantine folder)",
                  [((("vhost", v), ("queue", q), ("kind", k)), n) for v, q, k, n in snap.store_damage]),
        _labelled("warren_flow_control_pauses_total", "counter",
                  "Times the broker stopped reading from a publishing connection: reason queue, a queue it "
                  "published to passed its flow mark; alarm, a resource alarm blocks publishers",
                  [((("reason", "queue"),), snap.queue_flow_pauses),
                   ((("reason", "alarm"),), snap.alarm_flow_pauses)]),
        _labelled("warren_flow_control_paused_connections", "gauge",
                  "Connections not being read now, by reason (queue: flow control; alarm: resource alarm)",
                  [((("reason", "queue"),), snap.paused_by_queue), ((("reason", "alarm"),), snap.paused_by_alarm)]),
        _labelled("warren_scrape_duration_seconds", "gauge",
                  "Wall-clock time of the previous scrape of each endpoint, from request to the last octet",
                  [((("endpoint", e),), v) for e, v in sorted(ctx.last_duration.items())]),
        _labelled("warren_scrape_loop_busy_seconds", "gauge",
                  "CPU time of the event loop's thread the previous scrape of each endpoint used, reading and "
                  "formatting (between its slices the loop served clients)",
                  [((("endpoint", e),), v) for e, v in sorted(ctx.last_busy.items())]),
        _labelled("warren_scrape_longest_step_seconds", "gauge",
                  "CPU time of the longest slice of the previous scrape of each endpoint: the longest it held "
                  "the event loop at once",
                  [((("endpoint", e),), v) for e, v in sorted(ctx.last_longest_step.items())]),
        _simple("warren_uptime_seconds", "gauge", "Seconds since the broker started", time.time() - ctx.started_at),
    ]
    return "".join(out)
