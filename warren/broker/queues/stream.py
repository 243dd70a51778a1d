"""A stream queue (``x-queue-type=stream``): an append-only log that every consumer reads from
its own offset, as RabbitMQ's streams over AMQP 0-9-1 (``docs/streams.md``).

Publishing appends the message to the queue's ``StreamStore`` (``warren/store/stream_store.py``),
persistent or not, and returns the number of the sync that makes it durable, so confirms and
tx.commit-ok wait for the disk as for persistent messages on a durable queue. Consumers see a
message only once a sync covered it (``committed``): ``Durability`` calls ``_synced`` after each
completed sync, which dispatches. No ready list is kept in memory; the store is the queue.

Each consumer has a cursor, the next offset to deliver to it, set from its ``x-stream-offset``
argument (``_start_offset``). Delivering never removes anything; acks (and nacks, rejects,
requeues, recovers) only give the consumer its prefetch credit back, which is why a prefetch
count is required. A consumer behind the tail reads from the store in batches of at most
``READ_BATCH`` records and its free credit, so a consumer far behind never loads the stream
into memory, and one turn of ``dispatch`` is bounded by the prefetch and by the connection's
output batch (the 0-9-1 sink's ``OUTPUT_BATCH``), as for classic queues. Every delivery carries the
header ``x-stream-offset`` (``stream_header.py``).

Retention (``x-max-length-bytes``, ``x-max-age``, or a policy's ``max-length-bytes``/``max-age``)
deletes whole old segments: every second from the broker tick, and after a sync that follows a
segment rotation. A cursor left below the first retained offset continues from there.

``StreamQueue`` derives from ``QueueBase`` (``base.py``: identity, consumers, bindings, store,
counters, what callers read of any queue) and from nothing of the classic queue
(``warren/broker/queue.py`` and the features it holds): no TTL, dead-lettering, length limits, delivery
limit, consumer priorities, paging or flow marks, whose arguments its declare refuses. Here:
the log (``attach``, ``delete_store``), retention, publish and the sync that commits, cursors
and dispatch, and a stream's answers to the operations every queue has: basic.get and
queue.purge are refused (540), an ack, a reject or a requeue only gives the consumer its credit
back.
"""

from __future__ import annotations

import datetime
import struct
import time

from warren.broker.message import Message
from warren.broker.queues.base import QueueBase
from warren.broker.queues.stream_args import (
    MAX_SEGMENT_SIZE, STREAM_TYPE, check_stream_consumer, invalid_offset, parse_duration, stream_settings,
)
from warren.broker.queues.stream_filter import (
    FilteredRecords, FilterIndex, consumer_filter, filter_size, message_filter_value, records_filter,
)
from warren.broker.queues.stream_header import with_stream_offset
from warren.broker.queues.stream_match import MatchedRecords, record_match
from warren.broker.queues.stream_readers import HttpReaders, NamedReader
from warren.errors import NotImplemented_
from warren.store.stream_store import DEFAULT_STREAM_SEGMENT

__all__ = ["StreamQueue", "READ_BATCH", "RETENTION_EVERY", "delivery_message"]

READ_BATCH = 256  # records one store.read gives a consumer at most
READ_BYTES = 1 << 20  # octets one store.read gives at most (at least one record, however large)
RETENTION_EVERY = 1.0  # seconds between two retention checks (from the broker tick)
MIN_SEGMENT = 64  # the store's smallest segment size (RabbitMQ accepts 0: one record per file)

_U32 = struct.Struct(">I")


def delivery_message(record: bytes, offset: int) -> Message:
    """The ``Message`` to deliver for a stored record (``encode_message``'s layout), its
    properties carrying ``x-stream-offset``. The record's exchange and routing key are already
    shortstr-encoded: they are sliced, not encoded again, and nothing is decoded."""
    p = 1 + record[0]
    q = p + 1 + record[p]
    (size,) = _U32.unpack_from(record, q)
    start = q + 4
    m = Message.__new__(Message)
    m.exchange_ss = exchange_ss = record[:p]
    m.routing_key_ss = routing_key_ss = record[p:q]
    m.exchange = exchange_ss[1:].decode("utf-8", "surrogateescape")
    m.routing_key = routing_key_ss[1:].decode("utf-8", "surrogateescape")
    m.properties = with_stream_offset(record[start:start + size], offset)
    m.body = record[start + size:]
    m._decoded = None
    m.ttl = None
    m.persistent = False  # what it was does not matter any more: the stream keeps every message
    m._record = None
    return m


def _now_ms() -> int:
    return int(time.time() * 1000)


def _segment_size(effective: dict) -> int | None:
    """x-stream-max-segment-size-bytes (declared or a policy's) within what the store takes."""
    v = effective.get("x-stream-max-segment-size-bytes")
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return min(max(v, MIN_SEGMENT), MAX_SEGMENT_SIZE)


class StreamQueue(QueueBase):
    is_stream = True
    queue_type = STREAM_TYPE

    def __init__(self, vhost, name: str, durable: bool = True, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.cursors: dict = {}  # Consumer -> the next offset to deliver to it
        self.filters: dict = {}  # Consumer -> its ConsumerFilter (x-stream-filter; stream_filter.py)
        self.filter_index: FilterIndex | None = None  # per block of offsets, the values published
        self.http_readers = HttpReaders()  # records requests that name their reader (stream_readers.py)
        self.committed = -1  # the highest offset consumers may see (covered by a completed sync)
        self.last_batch = 0  # first offset of the last batch a sync committed ("last")
        self.max_bytes: int | None = None
        self.max_age_s: float | None = None
        self._next_retention = 0.0
        self._retained_segments = 0  # segment count when retention last ran
        self._dispatching = False
        self.apply_arguments(vhost.effective_arguments("queue", name, self.arguments))

    # --- arguments and the store -----------------------------------------------------------

    def apply_arguments(self, effective: dict) -> None:
        """Retention and the segment size from the effective arguments (declared + policy), at
        creation and whenever the policies change: all a stream reads there (its declare refuses
        the classic queue's arguments; a policy's TTL, dead-lettering or length limits do not
        apply to it)."""
        self.effective = effective
        self.max_bytes, self.max_age_s = stream_settings(effective)
        store = self.store
        if store is not None:
            store.set_retention(self.max_bytes, self.max_age_s)
            store.segment_size = _segment_size(effective) or DEFAULT_STREAM_SEGMENT  # from the next rotation on
            if self.filter_index is not None and self.filter_index.bits != filter_size(effective) * 8:
                # another Bloom size: the blocks written so far become unknown (read, never skipped)
                self.filter_index = FilterIndex(filter_size(effective), store.next_offset)
            self._retention_changed()

    def attach(self, durability) -> int:
        """Open (or recover) the queue's store; returns the messages it holds."""
        size = _segment_size(self.effective) or DEFAULT_STREAM_SEGMENT
        self.durability = durability
        self.store = store = durability.open_stream_store(self.vhost.name, self.name, size, self.max_bytes,
                                                          self.max_age_s, on_synced=self._synced)
        self.committed = store.committed_offset  # everything recovered is committed
        self.filter_index = FilterIndex(filter_size(self.effective), store.next_offset)
        self.last_batch = max(self.committed, 0)  # batches are not remembered: the last message
        self._retained_segments = store.segment_count
        self._retention_changed()
        return self.message_count

    def delete_store(self) -> int:
        """The queue is being deleted: remove its files. Returns the messages it held."""
        n = self.message_count
        if self.store is not None:
            self.durability.delete_stream_store(self.store)
        self.cursors.clear()
        return n

    # --- retention -------------------------------------------------------------------------

    def _retention_changed(self) -> None:
        if self.max_bytes is not None or self.max_age_s is not None:
            self._next_retention = 0.0
            self.enforce_retention()
            self.ask_for_ticks()  # Broker.tick calls tick() from now on

    def enforce_retention(self) -> int:
        store = self.store
        if store is None or self.deleted:
            return 0
        dropped = store.enforce_retention(_now_ms())
        self._retained_segments = store.segment_count
        if dropped and self.filter_index is not None:
            self.filter_index.forget_before(store.first_offset)
        return dropped

    def tick(self, now: float) -> bool:
        if self.deleted or self.vhost.queues.get(self.name) is not self:
            self._ticking = False
            return False
        if now >= self._next_retention:
            self._next_retention = now + RETENTION_EVERY
            self.enforce_retention()
        self._ticking = self.max_bytes is not None or self.max_age_s is not None
        return self._ticking

    # --- publishing ------------------------------------------------------------------------

    def publish(self, message: Message) -> int:
        """Append (every message, persistent or not); returns the sync number that commits it."""
        offset = self.store.append(message.record, _now_ms())
        self.filter_index.add(offset, message_filter_value(message), message.routing_key)  # stream_filter.py
        return self.durability.wrote(self.store)

    def _synced(self) -> None:
        """A sync that covered the store completed (Durability, on the loop): deliver."""
        store = self.store
        if store is None or self.deleted:
            return
        committed = store.committed_offset
        if committed > self.committed:
            self.last_batch = self.committed + 1
            self.committed = committed
            if store.segment_count != self._retained_segments and (
                    self.max_bytes is not None or self.max_age_s is not None):
                self.enforce_retention()  # a rotation: the oldest segment may have to go now
            if self.consumers:
                self.dispatch()

    @property
    def message_count(self) -> int:
        """Retained committed messages (what a consumer from "first" would get now)."""
        store = self.store
        if store is None:
            return 0
        return max(0, self.committed - store.first_offset + 1)

    # --- consumers -------------------------------------------------------------------------

    def add_consumer(self, consumer) -> None:
        where = f"queue '{self.name}' in vhost '{self.vhost.name}'"
        check_stream_consumer(where, consumer)
        spec = consumer.arguments.get("x-stream-offset", "next") if consumer.arguments else "next"
        wanted = consumer_filter(where, consumer.arguments, self.filter_index.bits)
        self.cursors[consumer] = self._start_offset(spec, where)
        if wanted is not None:
            self.filters[consumer] = wanted
        self.consumers.append(consumer)
        self.had_consumer = True

    def remove_consumer(self, consumer) -> None:
        self.cursors.pop(consumer, None)
        self.filters.pop(consumer, None)
        try:
            self.consumers.remove(consumer)
        except ValueError:
            pass

    def _start_offset(self, spec, where: str) -> int:
        """The first offset for a consumer's ``x-stream-offset``: "first", "last" (the start of
        the last committed batch), "next" (the default: only what is published from now on), an
        offset, a timestamp (seconds) or an interval ("1h": what was published in the last hour)."""
        store = self.store
        if spec == "next":
            return store.next_offset
        if spec == "first":
            return store.first_offset
        if spec == "last":
            return max(self.last_batch, store.first_offset) if self.committed >= 0 else store.next_offset
        if isinstance(spec, bool):
            raise invalid_offset(where, spec)
        if isinstance(spec, int):
            return max(spec, store.first_offset)  # before the first retained one: from the first
        if isinstance(spec, datetime.datetime):
            return store.offset_for_timestamp(int(spec.timestamp()) * 1000)
        if isinstance(spec, str):
            seconds = parse_duration(spec)
            if seconds is not None:
                return store.offset_for_timestamp(_now_ms() - seconds * 1000)
        raise invalid_offset(where, spec)

    def dispatch(self) -> None:
        """Give every consumer with credit what it has not had yet, up to the committed offset."""
        if self._dispatching or self.store is None or self.deleted:
            return
        self._dispatching = True
        try:
            committed = self.committed
            cursors = self.cursors
            for c in list(self.consumers):
                cursor = cursors.get(c)
                if cursor is not None and cursor <= committed and c.has_capacity():
                    cursors[c] = self._feed(c, cursor, committed)
        finally:
            self._dispatching = False

    def _feed(self, c, cursor: int, committed: int) -> int:
        """Deliver to consumer ``c`` from ``cursor`` while it has credit; returns the new cursor.
        A filtered consumer (x-stream-filter) reads only the blocks that may hold what it wants
        (``FilterIndex.candidates``) and is given only the messages that match."""
        read = self.store.read
        deliver = c.channel.deliver
        wanted = self.filters.get(c)
        while cursor <= committed:
            room = min(max(c.prefetch_count - c.unacked, 1), READ_BATCH)
            if wanted is not None:
                cursor, end = self.filter_index.candidates(cursor, committed, wanted)
                if cursor > committed:
                    break
                room = min(room, end - cursor)
            batch = read(cursor, room, READ_BYTES, committed_only=True)
            if not batch:
                break
            for offset, _ts, record in batch:
                if not c.has_capacity():
                    return cursor
                message = delivery_message(record, offset)
                if wanted is None or wanted.matches(message_filter_value(message)):
                    deliver(c, self, offset, message, False)
                cursor = offset + 1
            if not c.has_capacity():
                break
        return cursor

    def bulk_view(self, query):
        """What the HTTP API's stream routes read: the store, or for a records request naming
        filter values (``filter``, ``match_unfiltered``) or routing keys (``routing_key``) the
        store seen through the filter (``stream_filter.FilteredRecords``: blocks that cannot
        match are skipped), and for one naming properties or headers (``property.<name>``,
        ``header.<name>``) only the records that match (``stream_match.MatchedRecords``); a
        request naming its ``reader`` is remembered (``reader_lags``). ValueError for a
        malformed filter."""
        store = view = self.store
        if store is None or self.filter_index is None:
            return store
        if "filter" in query or "routing_key" in query:
            wanted = records_filter(query, self.filter_index.bits)
            if wanted is not None:
                view = FilteredRecords(store, self.filter_index, wanted)
        match = record_match(query)  # property.<name> / header.<name>: record by record (stream_match.py)
        if match is not None:
            view = MatchedRecords(view, match)
        reader = query.get("reader")
        if reader:  # it names itself: remember how far it got (its lag, in the metrics)
            view = NamedReader(view, self.http_readers, str(reader))
        return view

    def reader_lags(self) -> list[tuple[str, str, int]]:
        """(kind, reader, records behind the committed end) of every reader: ``amqp`` consumers
        by consumer tag, ``http`` readers by the name their records requests give."""
        end = self.committed + 1
        lags = [("amqp", str(c.tag), max(0, end - cursor)) for c, cursor in list(self.cursors.items())]
        lags.extend(("http", name, max(0, end - following)) for name, following in self.http_readers.positions())
        return lags

    # --- basic.get, queue.purge and settlements: a stream's answers --------------------------

    def take(self, no_ack: bool = False):
        raise NotImplemented_(f"basic.get not supported by stream queues queue '{self.name}' "
                              f"in vhost '{self.vhost.name}'")

    def purge(self) -> int:
        raise NotImplemented_(f"queue.purge not supported by stream queues queue '{self.name}' "
                              f"in vhost '{self.vhost.name}'")

    def forget(self, seq: int, message) -> None:
        pass  # an ack: the channel gave the consumer its credit back; the stream keeps the message

    def reject(self, seq: int, message) -> None:
        pass  # nack/reject without requeue: credit only, nothing is dead-lettered

    def requeue(self, entries, redelivered: bool = True) -> None:
        """nack/reject with requeue, recover, a channel closing: credit only, nothing goes back."""
        self.dispatch()

    def __repr__(self) -> str:
        store = self.store
        span = f"{store.first_offset}..{self.committed}" if store is not None else "closed"
        return f"<StreamQueue {self.name!r} offsets={span} consumers={len(self.consumers)}>"
