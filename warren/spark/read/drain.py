"""``spark.read.format("warren").option("mode", "drain").option("queue", Q)``: empty a classic queue.

DESTRUCTIVE: the messages read are acknowledged and leave the queue. The mode has to be named
explicitly, so nobody drains a queue by leaving out an option.

Partitioning: ``numPartitions`` (default 1) consumers on the queue, one per Spark task, each on
its own connection; the broker hands ready messages to them round-robin, so which partition
gets which message, and the order across partitions, are not defined (within a partition rows
keep the queue's delivery order). ``maxRecords`` (default: no limit) is split evenly between
the partitions up front; a partition stops at its share, so the total never exceeds it.

A partition stops when the queue is empty: whenever no delivery has arrived for a moment
(``EMPTY_CHECK_S``) it asks the broker (passive queue.declare) how many messages are ready; the
broker answers on the same channel after every delivery it already sent us, so a count of 0
means every message the queue held has gone to one of the consumers. The partition then
cancels its consumer, keeps what arrived before basic.cancel-ok, and ends. Messages published
meanwhile may or may not be read. A partition that sees no delivery for ``idleTimeout``
seconds while the count stays above 0 (other consumers with free capacity take them) ends too.

Acknowledgements and what they guarantee: rows go to Spark as Arrow batches of ``batchSize``
rows; a batch is acknowledged (basic.ack, multiple) when Spark comes back for the next one,
that is once Spark's Python worker has passed it on towards the JVM, which has NOT yet written
it to the sink. So:
* a task that fails before handing a batch over leaves those messages unacknowledged; the
  broker requeues them when the task's connection closes and a retry (or the next drain)
  reads them again: duplicates, never loss, up to that point (at-least-once);
* a failure after a batch was acknowledged, while Spark is still writing it, loses those
  messages: they are gone from the queue and Spark's retry reads other ones. This mode is
  at-least-once into the Spark task, not end to end into the sink. For end-to-end
  guarantees use a stream queue and the offset reader, which re-reads by position;
* a query that stops reading early (``LIMIT``) leaves its last batch unacknowledged: it
  returns to the queue (marked redelivered);
* at most 2 x ``batchSize`` messages per partition are unacknowledged at a time (basic.qos).
"""

from __future__ import annotations

import time
import uuid

from pyspark.sql.datasource import DataSourceReader, InputPartition

from warren.protocol.events import Content, Method
from warren.spark.amqp_link import AmqpLink, LinkTimeout
from warren.spark.options import DrainOptions
from warren.spark.read.batch import ReadLayout
from warren.spark.read.records import batch_from_parts
from warren.spec import amqp0_9_1 as spec

__all__ = ["DrainReader", "DrainPartition", "drain_queue"]

EMPTY_CHECK_S = 0.1  # no delivery for this long: ask whether the queue is empty


class DrainPartition(InputPartition):
    def __init__(self, index: int, limit: int | None) -> None:
        super().__init__(index)
        self.index = index
        self.limit = limit  # this partition's share of maxRecords; None: no limit


class DrainReader(DataSourceReader):
    """Reads (and removes) every message of a classic queue; see the module docstring."""

    def __init__(self, schema, options) -> None:
        self.options = DrainOptions.from_options(options)
        self.layout = ReadLayout(schema)  # the same columns as a stream read (offset, stream, timestamp null)

    def partitions(self):
        n, total = self.options.partitions, self.options.max_records
        if total is None:
            return [DrainPartition(i, None) for i in range(n)]
        base, extra = divmod(total, n)
        return [DrainPartition(i, base + (1 if i < extra else 0)) for i in range(n)]

    def read(self, partition: DrainPartition):
        o = self.options
        if partition.limit == 0:
            return
        schema = self.layout.arrow()
        for deliveries in drain_queue(o.url, o.queue, partition.limit, o.batch_size, o.idle_timeout,
                                      o.connect_timeout):
            # the same rows as the stream readers give (offset and stream null)
            yield batch_from_parts([bytes(d.body) for d in deliveries],
                                   [d.method.routing_key for d in deliveries],
                                   [d.method.exchange for d in deliveries],
                                   [bytes(d.properties) for d in deliveries], None, None, schema)


def drain_queue(url: str, queue: str, limit: int | None, batch_size: int, idle_timeout: float,
                connect_timeout: float = 10.0):
    """Consume ``queue`` until empty (or ``limit``), yielding lists of deliveries (Content events).

    Each list is acknowledged when the caller asks for the next one (module docstring); lists
    the caller never comes back for stay unacknowledged and return to the queue on close.
    """
    link = AmqpLink(url, connect_timeout).open()
    try:
        link.call(spec.QueueDeclare(0, queue, passive=True), spec.QueueDeclareOk)
        link.call(spec.BasicQos(0, 2 * batch_size, False), spec.BasicQosOk)
        tag = f"warren-spark-drain-{uuid.uuid4().hex[:12]}"
        link.call(spec.BasicConsume(0, queue, tag, False, False, False, False, {}), spec.BasicConsumeOk)
        yield from _consume(link, queue, tag, limit, batch_size, idle_timeout)
    finally:
        link.close()


def _consume(link: AmqpLink, queue: str, tag: str, limit: int | None, batch_size: int, idle_timeout: float):
    pending: list = []  # deliveries received, not yet handed over
    handed = 0
    checking = False  # a passive queue.declare is on its way
    cancelling = 0.0  # when basic.cancel was sent (0: not yet)
    finished = False  # basic.cancel-ok (or the broker's basic.cancel) came: nothing more will
    last_delivery = time.monotonic()
    while True:
        events = link.events
        while events:
            event = events.popleft()
            method = event.method if isinstance(event, (Method, Content)) else None
            if isinstance(event, Content) and isinstance(method, spec.BasicDeliver):
                pending.append(event)
                last_delivery = time.monotonic()
            elif isinstance(method, spec.QueueDeclareOk):
                checking = False
                if method.message_count == 0 and not cancelling:
                    cancelling = _cancel(link, tag)
            elif isinstance(method, (spec.BasicCancelOk, spec.BasicCancel)):
                finished = True  # BasicCancel: the broker cancelled us (queue deleted)
        if limit is not None and handed + len(pending) >= limit and not cancelling:
            cancelling = _cancel(link, tag)
        while pending and (len(pending) >= batch_size or finished or
                           (limit is not None and handed + len(pending) >= limit)):
            take = batch_size if limit is None else min(batch_size, limit - handed)
            if take <= 0:
                break
            batch, pending = pending[:take], pending[take:]
            yield batch
            # Spark took the batch: acknowledge it and everything delivered before it
            link.send(spec.BasicAck(batch[-1].method.delivery_tag, True))
            handed += len(batch)
        if finished or (limit is not None and handed >= limit):
            return  # deliveries past the limit stay unacknowledged: requeued on close
        if not link.pump(EMPTY_CHECK_S) and not link.events:
            idle = time.monotonic() - last_delivery
            if cancelling and time.monotonic() - cancelling > link.timeout:
                raise LinkTimeout(f"no basic.cancel-ok from {link.address} within {link.timeout:g}s")
            if not cancelling and idle > idle_timeout:
                cancelling = _cancel(link, tag)
            elif not checking and not cancelling and idle >= EMPTY_CHECK_S:
                link.send(spec.QueueDeclare(0, queue, passive=True))
                checking = True


def _cancel(link: AmqpLink, tag: str) -> float:
    link.send(spec.BasicCancel(tag, False))
    return time.monotonic()
