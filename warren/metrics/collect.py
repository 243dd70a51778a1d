"""Read the broker's counters for one scrape, on the loop, a slice at a time.

Nothing is counted for the metrics on the message path: a scrape reads what the broker keeps
anyway (queue lengths and octets, consumers, the channels' unacked maps) and the plain counters
of warren/management/api/stats.py, plus what closed channels and deleted queues left in
``TOTALS`` (totals.py). The broker's objects live on the event loop, so they are read there;
after every ``SLICE`` objects the reader yields (``await asyncio.sleep(0)``), so a scrape of
100,000 queues is many short steps between the broker's own callbacks, not one long stall.
Objects created or deleted during a scrape are seen or not, as with RabbitMQ's own tables.

The snapshot holds plain tuples; ``render.py`` turns them into text, again in slices.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter

from warren.broker.queue import Queue
from warren.broker.totals import QUEUE_TYPES, TOTALS

__all__ = ["Snapshot", "read_snapshot", "SLICE", "QUEUE_FIELDS", "CHANNEL_FIELDS", "CONNECTION_FIELDS",
           "snapshot_rows", "add_snapshot", "Probes"]

SLICE = 500  # objects read between two yields to the loop (1–3 ms)

# the fields of a queue row, a channel row, a connection row (render.py names them)
QUEUE_FIELDS = ("vhost", "queue", "type", "ready", "unacked", "messages", "ready_ram", "ready_bytes", "consumers",
                "paged_out", "paged_out_bytes", "published", "delivered", "acked", "redelivered")
CHANNEL_FIELDS = ("name", "consumers", "unacked", "unconfirmed", "published", "confirmed", "dropped", "returned",
                  "acked", "delivered")
CONNECTION_FIELDS = ("name", "incoming_bytes", "outgoing_bytes", "channels")

_Q = {name: i for i, name in enumerate(QUEUE_FIELDS)}
_CH = {name: i for i, name in enumerate(CHANNEL_FIELDS)}
_queue_of = itemgetter(0)  # a channel's unacked entry: (queue, seq, message, consumer, tag)
_plain_count = Queue.message_count  # the property of classic queues (quorum and stream count their own way)


@dataclass
class Snapshot:
    per_object: bool
    started: float = 0.0  # time.perf_counter() when the read began
    # CPU time of the loop's thread (time.thread_time: on a loaded machine the wall clock also
    # counts the time other processes had the core)
    read_seconds: float = 0.0  # spent reading, all slices
    longest_step: float = 0.0  # the longest slice
    queue_rows: list = field(default_factory=list)  # per_object only
    queue_sums: list = field(default_factory=lambda: [0] * len(QUEUE_FIELDS))
    channel_rows: list = field(default_factory=list)  # per_object only
    channel_sums: list = field(default_factory=lambda: [0] * len(CHANNEL_FIELDS))
    connection_rows: list = field(default_factory=list)  # per_object only
    connection_sums: list = field(default_factory=lambda: [0] * len(CONNECTION_FIELDS))
    queues: int = 0
    channels: int = 0
    connections: int = 0
    consumers: int = 0
    publishers: int = 0  # channels that have published
    # per queue type: [delivered, got, acknowledged, redelivered] of live queues plus deleted ones
    # (a live queue's deliveries and gets are summed in "delivered"; render adds the two)
    by_queue_type: dict = field(default_factory=dict)
    # channel counts of live channels plus closed ones
    received: int = 0
    received_confirm: int = 0
    confirmed: int = 0
    unroutable_dropped: int = 0
    unroutable_returned: int = 0
    paused_by_queue: int = 0  # connections not read now because a queue they publish to is congested
    paused_by_alarm: int = 0  # connections not read now because a resource alarm blocks publishers
    # what TOTALS keeps of closed and deleted objects and of pauses (totals.py), read with the rest
    connections_closed: int = 0
    channels_closed: int = 0
    queues_deleted: int = 0
    queue_flow_pauses: int = 0
    alarm_flow_pauses: int = 0
    node: dict = field(default_factory=dict)
    # (vhost, name, kind, records lost) of each queue or stream that lost records to damaged files at start
    store_damage: list = field(default_factory=list)
    # per_object only: (vhost, stream, kind, reader, records behind) of each reader of a stream
    stream_reader_rows: list = field(default_factory=list)
    # the MetricsServer's histograms, set by its scrape (``Probes``): loop lag, GC pauses, group commits
    probes: Probes | None = None


@dataclass
class Probes:
    """The histograms a scrape renders (probes.py's, and the server's group commits)."""

    lag: object  # probes.Histogram
    gc: list  # a Histogram per generation
    gc_collected: list  # objects collected per generation
    sync: object  # Histogram of the store's group commits

    @classmethod
    def of(cls, metrics) -> Probes:
        """The live histograms of ``metrics`` (a MetricsServer), not copied."""
        gc = metrics.gc_pauses
        return cls(metrics.loop_lag.histogram, gc.histograms, gc.collected, metrics.sync_latency)

    def merged(self, other: Probes) -> Probes:
        return Probes(self.lag.merged(other.lag), [a.merged(b) for a, b in zip(self.gc, other.gc)],
                      [a + b for a, b in zip(self.gc_collected, other.gc_collected)], self.sync.merged(other.sync))


_kinds: dict = {}  # queue class -> (RabbitMQ's queue type, counts its messages the classic way)


def _kind(cls) -> tuple[str, bool]:
    kind = _kinds.get(cls)
    if kind is None:
        kind = _kinds[cls] = (cls.queue_type, cls.message_count is _plain_count)
    return kind


def _queue_row(vhost: str, q, unacked: int) -> tuple:
    kind, plain = _kinds.get(type(q)) or _kind(type(q))
    paged = q.paged
    if plain:  # no side effect: expiry runs on the queue's own timer
        in_memory = len(q.ready)
        ready = in_memory + paged
        published = q.enqueued
    else:
        ready = q.message_count
        in_memory = ready - paged
        store = q.store
        published = (store.next_offset if store is not None else 0) if kind == "stream" else q.enqueued
    paged_bytes = q.paged_bytes
    return (vhost, q.name, kind, ready, unacked, ready + unacked, in_memory, q.ready_bytes + paged_bytes,
            len(q.consumers), paged, paged_bytes, published, q.stats_deliver + q.stats_get, q.stats_ack,
            q.stats_redeliver)


async def read_snapshot(server, per_object: bool, slice_size: int = SLICE) -> Snapshot:
    """Everything one scrape reports, read on the loop ``slice_size`` objects at a time."""
    snap = Snapshot(per_object, started=time.perf_counter())
    busy = 0.0
    step = time.thread_time()
    done = 0

    async def pause() -> None:
        nonlocal busy, step
        held = time.thread_time() - step
        busy += held
        if held > snap.longest_step:
            snap.longest_step = held
        await asyncio.sleep(0)
        step = time.thread_time()

    # --- connections and channels (and, per object, which queue each unacked message is from)
    directory = server.broker.directory  # --worker-mode queues: sessions for the others' consumers
    unacked_by_queue: Counter = Counter()
    received_confirm = 0
    ch_sums = snap.channel_sums
    conn_sums = snap.connection_sums
    for conn in list(server.connections):
        snap.connections += 1
        if conn.throttled:
            snap.paused_by_queue += 1
        if conn.blocked:
            snap.paused_by_alarm += 1
        session = conn.session
        channels = list(session.channels.values()) if session is not None else []
        row = (conn.api_name(), conn.recv_oct, conn.send_oct, len(channels))
        for i in range(1, len(row)):
            conn_sums[i] += row[i]
        if per_object:
            snap.connection_rows.append(row)
        for ch in channels:
            snap.channels += 1
            unconfirmed = ch.publish_seq - ch.confirmed_upto if ch.confirm_mode else 0
            consumers = ch.consumer_count()
            crow = (f"{row[0]} ({ch.number})", consumers, len(ch.unacked), unconfirmed, ch.stats_publish,
                    ch.confirmed_upto, ch.stats_unroutable_dropped, ch.stats_unroutable_returned, ch.stats_ack,
                    ch.next_tag - 1)
            for i in range(1, len(crow)):
                ch_sums[i] += crow[i]
            if per_object:
                snap.channel_rows.append(crow)
                if ch.unacked:
                    unacked_by_queue.update(map(_queue_of, list(ch.unacked.values())))
                    done += len(ch.unacked) // 100  # counting 100 entries costs about one object's read
            if ch.stats_publish:
                snap.publishers += 1
            if ch.confirm_mode:
                received_confirm += ch.publish_seq
            done += 1
        done += 1
        if done >= slice_size:
            done = 0
            await pause()
    if per_object:  # --worker-mode queues: consumers on other workers hold some of our queues' messages
        for session in directory.proxy_sessions():
            for ch in list(session.channels.values()):
                unacked_by_queue.update(map(_queue_of, list(ch.unacked.values())))
    received, confirmed = ch_sums[_CH["published"]], ch_sums[_CH["confirmed"]]
    dropped, returned = ch_sums[_CH["dropped"]], ch_sums[_CH["returned"]]

    # --- queues
    by_type = {t: list(counts) for t, counts in TOTALS.by_queue_type.items()}
    for t in QUEUE_TYPES:
        by_type.setdefault(t, [0, 0, 0, 0])
    q_sums = snap.queue_sums
    columns = [(i, itemgetter(i)) for i in range(3, len(QUEUE_FIELDS))]
    delivered, acked, redelivered = (itemgetter(_Q[f]) for f in ("delivered", "acked", "redelivered"))
    unacked_of = unacked_by_queue.get
    for vhost in list(server.broker.vhosts.values()):
        queues = list(vhost.queues.values())
        name = vhost.name
        for start in range(0, len(queues), slice_size):
            batch = [_queue_row(name, q, unacked_of(q, 0)) for q in queues[start:start + slice_size]]
            for i, column in columns:  # column sums in C (map/sum), not per row in Python
                q_sums[i] += sum(map(column, batch))
            kinds = {row[2] for row in batch}
            for kind in kinds:
                rows = batch if len(kinds) == 1 else [row for row in batch if row[2] == kind]
                counts = by_type.setdefault(kind, [0, 0, 0, 0])
                counts[0] += sum(map(delivered, rows))  # deliveries and gets together
                counts[2] += sum(map(acked, rows))
                counts[3] += sum(map(redelivered, rows))
            if per_object:
                snap.queue_rows.extend(batch)
                for q in queues[start:start + slice_size]:  # each reader of a stream, how far behind
                    if q.is_stream:
                        snap.stream_reader_rows.extend((name, q.name, *lag) for lag in q.reader_lags())
            snap.queues += len(batch)
            await pause()
    if not per_object:
        # the aggregated unacked count comes from the channels (exact, and cheaper than per queue)
        q_sums[_Q["unacked"]] = ch_sums[_CH["unacked"]]
        q_sums[_Q["messages"]] = q_sums[_Q["ready"]] + q_sums[_Q["unacked"]]
    snap.consumers = q_sums[_Q["consumers"]]
    snap.by_queue_type = by_type
    snap.received = TOTALS.received + received
    snap.received_confirm = TOTALS.received_confirm + received_confirm
    snap.confirmed = TOTALS.confirmed + confirmed
    snap.unroutable_dropped = TOTALS.unroutable_dropped + dropped
    snap.unroutable_returned = TOTALS.unroutable_returned + returned
    snap.connections_closed, snap.channels_closed = TOTALS.connections_closed, TOTALS.channels_closed
    snap.queues_deleted = TOTALS.queues_deleted
    snap.queue_flow_pauses, snap.alarm_flow_pauses = TOTALS.queue_flow_pauses, TOTALS.alarm_flow_pauses
    snap.node = _node(server)
    snap.store_damage = [(d.vhost, d.name, d.kind, d.records)
                         for d in getattr(getattr(server, "durability", None), "damage", ())]
    held = time.thread_time() - step
    snap.longest_step = max(snap.longest_step, held)
    snap.read_seconds = busy + held
    return snap


# --- --worker-mode queues: one scrape shows the node (warren/spread) ---------------------------------

# what the workers' snapshots add up to; the rest (the scrape's own timings, ``node``: the
# process's memory, descriptors and alarms) stays the answering worker's
_SUMMED = ("queues", "channels", "connections", "consumers", "publishers", "received", "received_confirm",
           "confirmed", "unroutable_dropped", "unroutable_returned", "paused_by_queue", "paused_by_alarm",
           "connections_closed", "channels_closed", "queues_deleted", "queue_flow_pauses", "alarm_flow_pauses")


async def snapshot_rows(server, per_object: bool) -> list:
    """What another worker's scrape asks of ours (merged.py's PeerApi): our snapshot, as a list."""
    snap = await read_snapshot(server, per_object)
    if server.metrics is not None:
        snap.probes = Probes.of(server.metrics)
    return [snap]


def add_snapshot(snap: Snapshot, other: Snapshot) -> None:
    """Add another worker's snapshot into ``snap``: its objects (each queue is on its owner only,
    each connection on one worker), counts and histograms."""
    for name in _SUMMED:
        setattr(snap, name, getattr(snap, name) + getattr(other, name))
    for mine, theirs in ((snap.queue_sums, other.queue_sums), (snap.channel_sums, other.channel_sums),
                         (snap.connection_sums, other.connection_sums)):
        for i in range(1, len(mine)):  # 0: the name column
            mine[i] += theirs[i]
    for kind, counts in other.by_queue_type.items():
        mine = snap.by_queue_type.setdefault(kind, [0] * len(counts))
        for i, n in enumerate(counts):
            mine[i] += n
    if snap.probes is not None and other.probes is not None:  # new histograms: ours stay as counted
        snap.probes = snap.probes.merged(other.probes)
    snap.queue_rows += other.queue_rows
    snap.stream_reader_rows += other.stream_reader_rows
    snap.store_damage += other.store_damage
    snap.channel_rows += other.channel_rows
    snap.connection_rows += other.connection_rows


def _node(server) -> dict:
    """The process and its alarms (a few system calls)."""
    alarms = server.alarms
    memory = server.broker.memory
    try:
        open_fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_fds = 0
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        disk_free = alarms.disk_free()
    except OSError:
        disk_free = 0
    try:
        resident = alarms.rss()
    except OSError:
        resident = 0
    return {
        "resident": resident,
        "memory_limit": alarms.memory_limit,
        "memory_alarm": int("memory" in alarms.raised),
        "disk_alarm": int("disk" in alarms.raised),
        "disk_free": disk_free,
        "disk_free_limit": alarms.disk_free_limit,
        "open_fds": open_fds,
        "max_fds": soft if soft != resource.RLIM_INFINITY else 1 << 20,
        "paging_budget": memory.limit,
        "held": memory.held,
    }
