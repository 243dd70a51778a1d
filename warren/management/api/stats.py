"""Message counts, rates and rate history for the HTTP API (RabbitMQ's ``message_stats``,
``*_details`` and their ``samples``).

**Counts** are plain integers the broker keeps anyway or increments once per event (the only
cost on the publish path): a queue's enqueued messages are its ``_seq`` (a stream's offsets),
its deliveries, gets, acks and redeliveries ``QueueBase.stats_*`` (incremented by the channel), an
exchange's ``stats_publish_in``, a channel's ``stats_publish``, ``stats_ack``,
``stats_unroutable_*``, its confirms ``confirmed_upto`` and its deliveries ``next_tag - 1``, a
connection's octets ``recv_oct``/``send_oct``. Counts are read live at request time.

**Vhost and overview counts** are RabbitMQ's: the channel-level counts (publish, confirm,
return_unroutable, drop_unroutable) of the vhost's channels, the queue-level ones (deliver,
get, ack, redeliver) of its queues, plus what closed channels and deleted queues left in
warren/broker/totals.py (``TOTALS.by_vhost``, added once when they went), plus the messages
published through the HTTP API. So they never go back when a channel closes or a queue goes.
The overview of a user who sees every vhost adds the node-wide totals (``TOTALS``), which also
keep what deleted vhosts counted. ``deliver_no_ack``, ``get_no_ack`` and ``get_empty`` are 0:
the broker keeps no counter they could be derived from (see docs/management.md).

**Rates** are RabbitMQ's default ``basic`` mode: every ``INTERVAL`` seconds (5, its
``collect_statistics_interval``) ``Sampler`` records every object's counts as a tuple (a
"vector", one per kind of object, ``Kind``); a rate is the change between the last two
samples over the time between them, computed when an answer needs it. The sampling yields
to the loop every ``SLICE_SECONDS`` (5 ms), so 100,000 queues never hold the loop for long.

**History** (``msg_rates_age``/``msg_rates_incr``, ``lengths_age``/``lengths_incr``,
``data_rates_age``/``data_rates_incr``): the samples of the overview, of every vhost, and of
the objects someone asked about with those parameters are kept in a ``History``: one sample
every ``INTERVAL`` for ``FINE_SPAN`` (10 min), one a minute for ``COARSE_SPAN`` (1 h), as
RabbitMQ's ``basic`` retention policy, in flat arrays of 64-bit integers (8 octets per value:
a queue's 182 samples of 9 values are 13 KB). At most ``MAX_TRACKED`` objects besides the
overview and ``MAX_VHOSTS`` vhosts have one; the least recently asked goes first, and one not
asked for ``FORGET_AFTER`` seconds is dropped. Answers follow RabbitMQ 3.10: the points are
``age // incr + 1`` times ``incr`` apart ending at now rounded down to ``incr``, newest first,
each ``{"sample", "timestamp"}`` (ms), with ``avg`` and ``avg_rate``; more than 500 points or
a non-positive age or increment is 400 ``Invalid range parameters``. A point before the
history begins repeats its oldest sample (RabbitMQ has all of an object's history and pads
with 0 before its creation; Warren starts an object's history when first asked, and after a
restart), and ``sampled_since`` (Warren's own field, ms) says where the real samples begin, so
that a chart draws nothing before it (the web UI, ui/src/chart.js).
"""

from __future__ import annotations

import asyncio
import logging
import time
from array import array
from collections import Counter

from warren.broker.totals import TOTALS, VHOST_COUNTS

__all__ = ["Sampler", "Kind", "History", "INTERVAL", "QUEUE", "EXCHANGE", "CHANNEL", "CONNECTION", "VHOST",
           "QUEUE_STATS", "VHOST_STATS", "CHANNEL_STATS", "EXCHANGE_STATS", "details",
           "unacked_by_queue", "published_count", "parse_ranges", "Ranges"]

log = logging.getLogger("warren.management")

INTERVAL = 5.0  # seconds between samples (RabbitMQ's collect_statistics_interval)
SLICE_SECONDS = 0.005  # the sampling yields to the loop after this much work
FINE_SPAN = 600  # seconds of history at every sample (RabbitMQ's basic policy: 5 s samples for 10 min)
COARSE_STEP = 60  # then one sample a minute
COARSE_SPAN = 3600  # for an hour
MAX_FINE = 3000  # a short test interval must not make the fine ring unbounded
MAX_TRACKED = 200  # objects (queues, exchanges, channels, connections) with a history at once
MAX_VHOSTS = 100  # vhosts with a history from the start (beyond: when asked, as other objects)
FORGET_AFTER = 3600.0  # an object's history is dropped when nobody asked for it this long
MAX_POINTS = 500  # RabbitMQ's limit on age // incr

# the fields of message_stats, per object kind, in RabbitMQ's order
QUEUE_STATS = ("publish", "deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "deliver_get",
               "ack", "redeliver")
CHANNEL_STATS = ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
                 "get", "get_no_ack", "get_empty", "deliver_get", "ack", "redeliver")
VHOST_STATS = CHANNEL_STATS
EXCHANGE_STATS = ("publish_in", "publish_out")
LENGTHS = ("messages", "messages_ready", "messages_unacknowledged")
DATA = ("recv_oct", "send_oct")


class Kind:
    """The sampled vector of one kind of object: its fields in order, the fields derived from
    them (sums), and which fields are gauges (their rate may be negative)."""

    def __init__(self, name: str, fields: tuple, derived: dict | None = None) -> None:
        self.name = name
        self.fields = fields
        self.index = {f: i for i, f in enumerate(fields)}
        self.derived = {k: tuple(self.index[p] for p in parts) for k, parts in (derived or {}).items()}
        self.width = len(fields)
        self._plans: dict = {}

    def plan(self, keys: tuple) -> tuple:
        """Per key: (key, key + "_details", its index or None, the indexes it sums, a gauge?)."""
        plan = self._plans.get(keys)
        if plan is None:
            plan = self._plans[keys] = tuple((k, k + "_details", self.index.get(k), self.derived.get(k, ()),
                                              k in LENGTHS) for k in keys)
        return plan

    def value(self, vec, key: str) -> int:
        i = self.index.get(key)
        if i is not None:
            return vec[i]
        parts = self.derived.get(key)
        if parts is None:
            return 0
        return sum(vec[p] for p in parts)


QUEUE = Kind("queue", ("publish", "deliver", "get", "ack", "redeliver") + LENGTHS,
             {"deliver_get": ("deliver", "get")})
EXCHANGE = Kind("exchange", ("publish_in",), {"publish_out": ("publish_in",)})
# a channel knows its deliveries and gets together (next_tag - 1): shown as deliver
CHANNEL = Kind("channel", ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "ack"),
               {"deliver_get": ("deliver",)})
CONNECTION = Kind("connection", DATA)
VHOST = Kind("vhost", VHOST_COUNTS + LENGTHS + DATA, {"deliver_get": ("deliver", "get")})
GAUGES = frozenset(LENGTHS)


def published_count(queue, base: int = 0) -> int:
    """Messages enqueued since ``base``: a classic queue numbers each one (``enqueued``), a stream
    gives each an offset."""
    if queue.is_stream:
        store = queue.store  # None until the stream's log is opened
        return (store.next_offset if store is not None else 0) - base
    return queue.enqueued - base


def details(rate: float) -> dict:
    return {"rate": round(rate, 1)}


def unacked_by_queue(connections, directory=None) -> dict:
    """{queue: [messages, body octets]} awaiting ack on every channel of ``connections``, and on
    the directory's sessions that stand for connections elsewhere (--worker-mode queues:
    consumers on other workers, warren/spread/proxy.py)."""
    out: dict = {}
    sessions = [conn.session for conn in connections]  # None until a protocol header arrived
    if directory is not None:
        sessions += directory.proxy_sessions()
    for session in sessions:
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


def _live_channels(conn):
    session = conn.session
    if session is None:
        return ()
    return [ch for ch in list(session.channels.values()) if not ch.closed]


def _conn_vhost(conn):
    """The VirtualHost a connection opened, None before connection.open (or a protocol header)."""
    session = conn.session
    return session.vhost if session is not None else None


# --- history -------------------------------------------------------------------------------------


class Ring:
    """Up to ``capacity`` (timestamp ms, vector) samples in one flat array of 64-bit integers."""

    __slots__ = ("width", "capacity", "data", "start", "size")

    def __init__(self, width: int, capacity: int) -> None:
        self.width = width + 1
        self.capacity = capacity
        self.data = array("q", bytes(8 * self.width * capacity))
        self.start = 0
        self.size = 0

    def append(self, ms: int, vec) -> None:
        if self.size == self.capacity:
            slot = self.start
            self.start = (self.start + 1) % self.capacity
        else:
            slot = (self.start + self.size) % self.capacity
            self.size += 1
        at = slot * self.width
        data = self.data
        data[at] = ms
        data[at + 1:at + self.width] = array("q", vec)

    def ms(self, i: int) -> int:
        """The timestamp of the i-th oldest sample."""
        return self.data[((self.start + i) % self.capacity) * self.width]

    def vector(self, i: int):
        at = ((self.start + i) % self.capacity) * self.width
        return self.data[at + 1:at + self.width]

    def last_ms(self) -> int | None:
        return self.ms(self.size - 1) if self.size else None

    def at_or_before(self, ms: int) -> int:
        """The index of the newest sample taken at or before ``ms``, -1 if none."""
        lo, hi = 0, self.size
        while lo < hi:
            mid = (lo + hi) // 2
            if self.ms(mid) <= ms:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def nbytes(self) -> int:
        return self.data.itemsize * len(self.data)


class History:
    """An object's samples: every sample for FINE_SPAN, one a minute for COARSE_SPAN."""

    __slots__ = ("kind", "fine", "coarse", "asked", "pinned")

    def __init__(self, kind: Kind, interval: float, pinned: bool = False) -> None:
        self.kind = kind
        self.fine = Ring(kind.width, min(MAX_FINE, int(FINE_SPAN / interval) + 1))
        self.coarse = Ring(kind.width, COARSE_SPAN // COARSE_STEP + 1)
        self.asked = time.monotonic()
        self.pinned = pinned  # the overview and vhosts: kept from the start, never for lack of asking

    def add(self, ms: int, vec) -> None:
        self.fine.append(ms, vec)
        last = self.coarse.last_ms()
        if last is None or ms // (COARSE_STEP * 1000) != last // (COARSE_STEP * 1000):
            self.coarse.append(ms, vec)

    def vector_at(self, ms: int):
        """The vector as sampled at ``ms`` (the last sample at or before it); before the history
        begins, its oldest sample."""
        fine, coarse = self.fine, self.coarse
        if fine.size and fine.ms(0) <= ms:
            return fine.vector(fine.at_or_before(ms))
        i = coarse.at_or_before(ms)
        if i >= 0:
            return coarse.vector(i)
        if coarse.size and (not fine.size or coarse.ms(0) <= fine.ms(0)):
            return coarse.vector(0)
        return fine.vector(0) if fine.size else None

    def oldest_ms(self) -> int | None:
        """The timestamp of the oldest sample kept, None before any."""
        stamps = [ring.ms(0) for ring in (self.fine, self.coarse) if ring.size]
        return min(stamps) if stamps else None

    def nbytes(self) -> int:
        return self.fine.nbytes() + self.coarse.nbytes()


class Ranges:
    """The history asked for by a request: (age ms, increment ms) per group, or None."""

    __slots__ = ("msg_rates", "lengths", "data_rates", "start")

    def __init__(self, msg_rates=None, lengths=None, data_rates=None, start: bool = True) -> None:
        self.msg_rates = msg_rates
        self.lengths = lengths
        self.data_rates = data_rates
        # whether an object without a history starts one (not for a whole unpaged list: 10,000
        # queues would only push each other out of the MAX_TRACKED histories)
        self.start = start

    def __bool__(self) -> bool:
        return bool(self.msg_rates or self.lengths or self.data_rates)

    def for_key(self, key: str):
        if key in GAUGES:
            return self.lengths
        if key in DATA:
            return self.data_rates
        return self.msg_rates


NO_RANGES = Ranges()


def _int_param(raw: str | None) -> int | None:
    if raw is None:
        return None
    raw = raw.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    return None  # RabbitMQ ignores a value that is not an integer


def parse_ranges(query, bad_request, listing: bool = False) -> Ranges:
    """``{prefix}_age``/``{prefix}_incr`` (seconds) as RabbitMQ reads them: both integers or
    the pair is ignored; a non-positive value or more than MAX_POINTS points is 400. For a list
    (``listing``), objects start a history only when the list is paged."""
    out = []
    for prefix in ("msg_rates", "lengths", "data_rates"):
        age, incr = _int_param(query.get(prefix + "_age")), _int_param(query.get(prefix + "_incr"))
        if age is None or incr is None:
            out.append(None)
            continue
        if age <= 0 or incr <= 0 or age // incr > MAX_POINTS:
            raise bad_request(f"Invalid range parameters: age {age}, incr {incr}")
        out.append((age * 1000, incr * 1000))
    return Ranges(*out, start=not listing or query.get("page") is not None)


def _ranged(history: History | None, key: str, rng, now_ms: int, current: int) -> dict:
    """``samples``, ``avg`` and ``avg_rate`` of one field over ``rng`` (age, incr in ms)."""
    age, incr = rng
    last = now_ms - now_ms % incr
    points = age // incr + 1
    samples = []
    kind = history.kind if history is not None else None
    for k in range(points):
        ts = last - k * incr
        value = current
        if history is not None:
            vec = history.vector_at(ts)
            if vec is not None:
                value = kind.value(vec, key)
        samples.append({"sample": value, "timestamp": ts})
    # Warren's own field: the time of the oldest sample really taken. The points before it repeat
    # that sample (RabbitMQ's count of points is kept for the tools that read them), so a chart
    # draws only from here: the web UI leaves a gap rather than history that never was
    # (before the first question about an object, before a restart). Without a history, only now.
    oldest = history.oldest_ms() if history is not None else None
    out = {"samples": samples, "sampled_since": oldest if oldest is not None else now_ms}
    if points > 1:
        out["avg_rate"] = (samples[0]["sample"] - samples[-1]["sample"]) * 1000 / ((points - 1) * incr)
        out["avg"] = sum(s["sample"] for s in samples) / points
    return out


# --- the sampler -----------------------------------------------------------------------------------


class Sampler:
    """Samples every object's counts every ``interval`` seconds; keeps the rates' two last
    samples and the histories."""

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
        self._prev: dict = {}  # object -> vector, the sample before the last
        self._cur: dict = {}  # object -> vector, the last sample
        self._dt_round = 0.0  # seconds between the two last samples
        self._last_round: float | None = None
        self.histories: dict = {}  # object (or the sampler itself: the overview) -> History
        self.http_published: Counter = Counter()  # vhost name -> messages published through the API
        self.http_published_total = 0
        self._task: asyncio.Task | None = None
        self.longest_slice = 0.0  # seconds: the longest the sampling held the loop (bench, tests)
        self.histories[self] = History(VHOST, interval, pinned=True)

    def connections(self) -> list:
        server = self.server
        return list(server.connections) if server is not None else []

    # --- vectors (read live) -------------------------------------------------------------------

    def queue_vector(self, q, unacked: dict):
        ready = q.message_count
        n_unacked = unacked[q][0] if q in unacked else 0
        return (max(0, published_count(q, self.publish_base.get(q, 0))), q.stats_deliver, q.stats_get,
                q.stats_ack, q.stats_redeliver, ready + n_unacked, ready, n_unacked)

    @staticmethod
    def exchange_vector(ex):
        return (ex.stats_publish_in,)

    @staticmethod
    def channel_vector(ch):
        return (ch.stats_publish, ch.confirmed_upto, ch.stats_unroutable_returned, ch.stats_unroutable_dropped,
                ch.next_tag - 1, ch.stats_ack)

    @staticmethod
    def connection_vector(conn):
        return (conn.recv_oct, conn.send_oct)

    def vhost_vector(self, vhost, unacked: dict, connections: list | None = None):
        """The vhost's counts now: its live queues and channels, plus what closed channels and
        deleted queues of it left in TOTALS, plus publishes through this API."""
        retired = TOTALS.by_vhost.get(vhost.name)
        c = list(retired) if retired is not None else [0] * len(VHOST_COUNTS)
        c[0] += self.http_published.get(vhost.name, 0)
        ready = n_unacked = 0
        for q in list(vhost.queues.values()):
            if q.deleted:
                continue
            c[4] += q.stats_deliver
            c[5] += q.stats_get
            c[6] += q.stats_ack
            c[7] += q.stats_redeliver
            ready += q.message_count
            if q in unacked:
                n_unacked += unacked[q][0]
        recv = send = 0
        for conn in (self.connections() if connections is None else connections):
            if _conn_vhost(conn) is not vhost:
                continue
            recv += conn.recv_oct
            send += conn.send_oct
            for ch in _live_channels(conn):
                c[0] += ch.stats_publish
                c[1] += ch.confirmed_upto
                c[2] += ch.stats_unroutable_returned
                c[3] += ch.stats_unroutable_dropped
        return tuple(c) + (ready + n_unacked, ready, n_unacked, recv, send)

    def overview_vector(self, vhost_vectors: list, all_vhosts: bool):
        """The sum of ``vhost_vectors``; for a user who sees every vhost the retired counts are
        the node's (TOTALS), which keep those of deleted vhosts too."""
        total = [0] * VHOST.width
        for vec in vhost_vectors:
            for i, v in enumerate(vec):
                total[i] += v
        if all_vhosts:
            n = len(VHOST_COUNTS)
            retired = [0] * n
            for counts in TOTALS.by_vhost.values():
                for i in range(n):
                    retired[i] += counts[i]
            by_type = TOTALS.by_queue_type.values()
            node = [TOTALS.received, TOTALS.confirmed, TOTALS.unroutable_returned, TOTALS.unroutable_dropped,
                    sum(t[0] for t in by_type), sum(t[1] for t in by_type), sum(t[2] for t in by_type),
                    sum(t[3] for t in by_type)]
            for i in range(n):
                total[i] += node[i] - retired[i]  # retired of live vhosts is in vhost_vectors already
            total[0] += self.http_published_total - sum(self.http_published.values())
        return tuple(total)

    def published_over_http(self, vhost_name: str) -> None:
        self.http_published[vhost_name] += 1
        self.http_published_total += 1

    def forget_vhost(self, name: str) -> None:
        """A deleted vhost: its own totals go (the node's keep them)."""
        TOTALS.forget_vhost(name)
        self.http_published.pop(name, None)

    # --- rates ---------------------------------------------------------------------------------

    def rates(self, obj, kind: Kind, keys) -> dict:
        """{key: per second} between the two last samples of ``obj`` (empty before two)."""
        cur = self._cur.get(obj)
        prev = self._prev.get(obj)
        dt = self._dt_round
        if cur is None or prev is None or dt <= 0:
            return {}
        out = {}
        value = kind.value
        for k in keys:
            r = (value(cur, k) - value(prev, k)) / dt
            out[k] = r if k in GAUGES else max(0.0, r)  # counters only grow (a negative step: a restart)
        return out

    def rate(self, obj, kind: Kind, key: str) -> float:
        cur = self._cur.get(obj)
        prev = self._prev.get(obj)
        dt = self._dt_round
        if cur is None or prev is None or dt <= 0:
            return 0.0
        r = (kind.value(cur, key) - kind.value(prev, key)) / dt
        return r if key in GAUGES else max(0.0, r)

    # --- answers -------------------------------------------------------------------------------

    def track(self, obj, kind: Kind, vec) -> History:
        """The history of ``obj``, started now (with ``vec``, its current counts) if it had none."""
        h = self.histories.get(obj)
        if h is None:
            unpinned = [o for o, hist in self.histories.items() if not hist.pinned]
            if len(unpinned) >= MAX_TRACKED:
                oldest = min(unpinned, key=lambda o: self.histories[o].asked)
                del self.histories[oldest]
            h = self.histories[obj] = History(kind, self.interval)
            h.add(int(time.time() * 1000), vec)
        h.asked = time.monotonic()
        return h

    def details_of(self, obj, kind: Kind, vec, keys, ranges: Ranges = NO_RANGES, out: dict | None = None,
                   suffix_only: bool = False) -> dict:
        """``{key: count, key_details: {rate[, samples, avg, avg_rate]}}`` for ``keys`` of ``obj``
        whose counts now are ``vec``. (Runs for every object of a list answer: kept lean.)"""
        out = {} if out is None else out
        cur = self._cur.get(obj)
        prev = self._prev.get(obj)
        dt = self._dt_round
        if cur is None or prev is None or dt <= 0:
            cur = None
        history = None
        now_ms = 0
        if ranges:
            if ranges.start:
                history = self.track(obj, kind, vec)
            else:
                history = self.histories.get(obj)
                if history is not None:
                    history.asked = time.monotonic()
            now_ms = int(time.time() * 1000)
        for key, details_key, idx, parts, gauge in kind.plan(keys):
            if idx is not None:
                current = vec[idx]
                step = cur[idx] - prev[idx] if cur is not None else 0
            elif parts:
                current = sum(vec[i] for i in parts)
                step = sum(cur[i] - prev[i] for i in parts) if cur is not None else 0
            else:  # a field Warren does not count (deliver_no_ack, get_empty...)
                current = step = 0
            if not suffix_only:
                out[key] = current
            if step == 0:
                d = {"rate": 0.0}
            else:
                rate = step / dt
                d = {"rate": round(rate if gauge or rate > 0 else 0.0, 1)}  # counters only grow
            if ranges:
                rng = ranges.for_key(key)
                if rng is not None:
                    d.update(_ranged(history, key, rng, now_ms, current))
            out[details_key] = d
        return out

    def message_stats(self, obj, kind: Kind, vec, keys, ranges: Ranges = NO_RANGES) -> dict:
        return self.details_of(obj, kind, vec, keys, ranges)

    # --- sampling ------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sampling the HTTP API's statistics failed")
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def sample(self) -> None:
        """Record every object's counts now, yielding to the loop every ``SLICE_SECONDS``."""
        now_ms = int(time.time() * 1000)
        cur: dict = {}
        histories = self.histories
        clock = time.perf_counter
        since = clock()
        longest = 0.0

        def record(obj, vec) -> None:
            cur[obj] = vec
            h = histories.get(obj)
            if h is not None:
                h.add(now_ms, vec)

        connections = self.connections()
        unacked = unacked_by_queue(connections, self.broker.directory)
        vhosts = list(self.broker.vhosts.values())
        # channel counts and octets per vhost, from the live channels and connections
        by_vhost: dict = {}
        for conn in connections:
            vec = self.connection_vector(conn)
            record(conn, vec)
            vhost = _conn_vhost(conn)
            sums = by_vhost.get(vhost)
            if sums is None:
                sums = by_vhost[vhost] = [0] * 6  # publish, confirm, returned, dropped, recv, send
            sums[4] += vec[0]
            sums[5] += vec[1]
            for ch in _live_channels(conn):
                cvec = self.channel_vector(ch)
                record(ch, cvec)
                for i in range(4):
                    sums[i] += cvec[i]
            if clock() - since >= SLICE_SECONDS:
                longest = max(longest, clock() - since)
                await asyncio.sleep(0)
                since = clock()
        vhost_vectors = []
        queue_vector = self.queue_vector
        for vhost in vhosts:
            # the vhost's queue counts, summed in the same pass
            deliver = get = ack = redeliver = ready = n_unacked = 0
            for q in list(vhost.queues.values()):
                if q.deleted:
                    continue
                vec = queue_vector(q, unacked)
                record(q, vec)
                deliver += vec[1]
                get += vec[2]
                ack += vec[3]
                redeliver += vec[4]
                ready += vec[6]
                n_unacked += vec[7]
                if clock() - since >= SLICE_SECONDS:
                    longest = max(longest, clock() - since)
                    await asyncio.sleep(0)
                    since = clock()
            for ex in list(vhost.exchanges.values()):
                record(ex, self.exchange_vector(ex))
            if vhost not in histories and sum(1 for h in histories.values() if h.kind is VHOST) < MAX_VHOSTS + 1:
                histories[vhost] = History(VHOST, self.interval, pinned=True)
            retired = TOTALS.by_vhost.get(vhost.name) or (0,) * len(VHOST_COUNTS)
            sums = by_vhost.get(vhost) or (0,) * 6
            vec = (retired[0] + sums[0] + self.http_published.get(vhost.name, 0), retired[1] + sums[1],
                   retired[2] + sums[2], retired[3] + sums[3], retired[4] + deliver, retired[5] + get,
                   retired[6] + ack, retired[7] + redeliver, ready + n_unacked, ready, n_unacked, sums[4], sums[5])
            record(vhost, vec)
            vhost_vectors.append(vec)
        record(self, self.overview_vector(vhost_vectors, True))
        # the rates: between each object's last sample and this one
        now = time.monotonic()
        self._prev = self._cur
        self._cur = cur
        self._dt_round = now - self._last_round if self._last_round is not None else 0.0
        self._last_round = now
        # histories of objects gone, or nobody asked about for a long time
        live_vhosts = {v.name for v in vhosts}
        for obj in list(histories):
            h = histories[obj]
            if obj is self:
                continue
            if obj not in cur or (not h.pinned and now - h.asked > FORGET_AFTER):
                del histories[obj]
        for name in list(TOTALS.by_vhost):
            if name not in live_vhosts:
                self.forget_vhost(name)
        for name in list(self.http_published):
            if name not in live_vhosts:
                self.http_published.pop(name, None)
        self.longest_slice = max(self.longest_slice, longest, clock() - since)

    def history_bytes(self) -> int:
        return sum(h.nbytes() for h in self.histories.values())
