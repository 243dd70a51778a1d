"""Message counts and rates for the HTTP API (RabbitMQ's ``message_stats`` and ``*_details``).

The counts are plain integers the broker keeps anyway or increments once per event (the only
cost on the publish path): a queue's enqueued messages are its ``_seq`` (a stream's offsets),
its deliveries, gets, acks and redeliveries ``Queue.stats_*`` (incremented by the channel), an
exchange's ``stats_publish_in``, a channel's ``stats_publish``/``stats_ack`` and its
deliveries ``next_tag - 1``, a connection's octets ``recv_oct``/``send_oct``.

Rates are what RabbitMQ shows in its default ``basic`` mode: every ``INTERVAL`` seconds (5, its
``collect_statistics_interval``) ``Sampler.sample`` records every object's counts; a rate is
the change between the last two samples over the time between them (messages per second).
Counts are read live at request time; rates change only at a sample.

Vhost and overview counts add up their queues and exchanges; the counts of queues and
exchanges deleted since are kept per vhost (``retired``), so the totals never go back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict

__all__ = ["Sampler", "INTERVAL", "queue_counts", "exchange_counts", "channel_counts", "connection_counts",
           "message_stats", "details", "unacked_by_queue", "QUEUE_STATS", "VHOST_STATS", "CHANNEL_STATS"]

log = logging.getLogger("warren.management")

INTERVAL = 5.0  # seconds between samples (RabbitMQ's collect_statistics_interval)

QUEUE_STATS = ("publish", "deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "deliver_get",
               "ack", "redeliver")
CHANNEL_STATS = ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
                 "get", "get_no_ack", "get_empty", "deliver_get", "ack", "redeliver")
VHOST_STATS = CHANNEL_STATS
EXCHANGE_STATS = ("publish_in", "publish_out")
QUEUE_GAUGES = ("messages", "messages_ready", "messages_unacknowledged")
CONNECTION_GAUGES = ("recv_oct", "send_oct")


def published_count(queue, base: int = 0) -> int:
    """Messages enqueued since ``base``: a classic queue numbers each one (``_seq``), a stream
    gives each an offset."""
    if getattr(queue, "is_stream", False):
        store = getattr(queue, "store", None)
        return (store.next_offset if store is not None else 0) - base
    return getattr(queue, "_seq", 0) - base


def queue_counts(queue, base: int = 0) -> dict:
    deliver = getattr(queue, "stats_deliver", 0)
    get = getattr(queue, "stats_get", 0)
    return {"publish": max(0, published_count(queue, base)), "deliver": deliver, "deliver_no_ack": 0,
            "get": get, "get_no_ack": 0, "get_empty": 0, "deliver_get": deliver + get,
            "ack": getattr(queue, "stats_ack", 0), "redeliver": getattr(queue, "stats_redeliver", 0)}


def exchange_counts(exchange) -> dict:
    n = getattr(exchange, "stats_publish_in", 0)
    return {"publish_in": n, "publish_out": n}


def channel_counts(channel) -> dict:
    delivered = channel.next_tag - 1
    return {"publish": channel.stats_publish, "confirm": channel.confirmed_upto, "return_unroutable": 0,
            "drop_unroutable": 0, "deliver": delivered, "deliver_no_ack": 0, "get": 0, "get_no_ack": 0,
            "get_empty": 0, "deliver_get": delivered, "ack": channel.stats_ack, "redeliver": 0}


def connection_counts(conn) -> dict:
    return {"recv_oct": conn.recv_oct, "send_oct": conn.send_oct}


def details(rate: float) -> dict:
    return {"rate": round(rate, 1)}


def message_stats(counts: dict, rates: dict | None, keys) -> dict:
    """RabbitMQ's ``message_stats``: every count with its ``<key>_details.rate``."""
    rates = rates or {}
    out = {}
    for k in keys:
        out[k] = counts.get(k, 0)
        out[k + "_details"] = details(rates.get(k, 0.0))
    return out


def unacked_by_queue(connections) -> dict:
    """{queue: [messages, body octets]} awaiting ack on every channel of ``connections``."""
    out: dict = {}
    for conn in connections:
        session = getattr(conn, "session", None)
        if session is None:
            continue
        for ch in list(session.channels.values()):
            for entry in ch.unacked.values():
                q = entry[0]
                slot = out.get(q)
                if slot is None:
                    slot = out[q] = [0, 0]
                slot[0] += 1
                slot[1] += len(entry[2].body)
    return out


class Sampler:
    """Samples every object's counts every ``INTERVAL`` seconds and keeps the rates."""

    def __init__(self, broker, server=None, interval: float = INTERVAL) -> None:
        self.broker = broker
        self.server = server
        self.interval = interval
        self.started_at = time.time()
        # a queue's _seq when first seen at start-up (restored queues do not start at 0)
        self.publish_base: dict = {}
        for vhost in broker.vhosts.values():
            for q in vhost.queues.values():
                self.publish_base[q] = published_count(q)
        self._last: dict = {}  # object -> (time, counts) of the last sample
        self._rates: dict = {}  # object -> {key: rate}
        self._owner: dict = {}  # queue/exchange -> vhost name, for retiring its counts
        self.retired: defaultdict = defaultdict(Counter)  # vhost name -> counts of deleted objects
        self._handle: asyncio.TimerHandle | None = None

    def connections(self) -> list:
        server = self.server
        return list(server.connections) if server is not None else []

    # --- counts ------------------------------------------------------------------------------

    def queue(self, q) -> dict:
        return queue_counts(q, self.publish_base.get(q, 0))

    def vhost(self, vhost) -> dict:
        total = Counter(self.retired.get(vhost.name, ()))
        for q in vhost.queues.values():
            c = self.queue(q)
            for k in ("deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "deliver_get", "ack",
                      "redeliver"):
                total[k] += c[k]
        for ex in vhost.exchanges.values():
            total["publish"] += getattr(ex, "stats_publish_in", 0)
        return dict(total)

    def overview(self) -> dict:
        total = Counter()
        for vhost in self.broker.vhosts.values():
            total.update(self.vhost(vhost))
        return dict(total)

    def rates(self, obj) -> dict:
        return self._rates.get(obj, {})

    # --- sampling ----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sample()
        self._handle = loop.call_later(self.interval, self._tick, loop)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self, loop) -> None:
        try:
            self.sample()
        except Exception:
            log.exception("sampling the HTTP API's statistics failed")
        self._handle = loop.call_later(self.interval, self._tick, loop)

    def _record(self, now: float, current: dict, obj, counts: dict) -> None:
        current[obj] = (now, counts)
        last = self._last.get(obj)
        if last is None:
            self._rates[obj] = {}
            return
        dt = now - last[0]
        if dt <= 0:
            return
        prev = last[1]
        # counters only grow (a negative step is a restart of the count); gauges go both ways
        self._rates[obj] = {k: (v - prev.get(k, 0)) / dt if k in QUEUE_GAUGES else max(0.0, (v - prev.get(k, 0)) / dt)
                            for k, v in counts.items()}

    def sample(self, now: float | None = None) -> None:
        """Record every object's counts now and compute the rates since the last sample."""
        now = time.monotonic() if now is None else now
        current: dict = {}
        owner: dict = {}
        connections = self.connections()
        unacked = unacked_by_queue(connections)
        for vhost in self.broker.vhosts.values():
            for q in list(vhost.queues.values()):
                counts = self.queue(q)
                ready = q.message_count
                n_unacked = unacked.get(q, (0, 0))[0]
                counts.update(messages=ready + n_unacked, messages_ready=ready, messages_unacknowledged=n_unacked)
                self._record(now, current, q, counts)
                owner[q] = vhost.name
            for ex in list(vhost.exchanges.values()):
                self._record(now, current, ex, exchange_counts(ex))
                owner[ex] = vhost.name
        # objects gone since the last sample: their counts stay in their vhost's totals
        for obj, (_, counts) in self._last.items():
            if obj not in current and obj in self._owner:
                retired = self.retired[self._owner[obj]]
                if "publish_in" in counts:
                    retired["publish"] += counts["publish_in"]
                else:
                    for k in ("deliver", "get", "deliver_get", "ack", "redeliver"):
                        retired[k] += counts.get(k, 0)
        for vhost in self.broker.vhosts.values():
            counts = self.vhost(vhost)
            ready = sum(q.message_count for q in vhost.queues.values())
            n_unacked = sum(unacked[q][0] for q in vhost.queues.values() if q in unacked)
            counts.update(messages=ready + n_unacked, messages_ready=ready, messages_unacknowledged=n_unacked)
            self._record(now, current, vhost, counts)
        for conn in connections:
            self._record(now, current, conn, connection_counts(conn))
            session = getattr(conn, "session", None)
            if session is not None:
                for ch in list(session.channels.values()):
                    self._record(now, current, ch, channel_counts(ch))
        totals = Counter()
        for vhost in self.broker.vhosts.values():
            totals.update(current[vhost][1])
        for conn in connections:
            totals.update(connection_counts(conn))
        self._record(now, current, self, dict(totals))
        self._last = current
        self._owner = owner
        self._rates = {obj: self._rates[obj] for obj in current if obj in self._rates}
