"""``df.write`` / ``df.writeStream`` ``.format("warren")``: publish rows to an exchange with confirms.

Spark creates the writer once per write (once per micro-batch for streams) in a Python
process on the driver, checks nothing else, pickles it to every task and calls ``write`` in
an executor's Python worker with that task's rows as Arrow batches. Each task opens one
connection, publishes its rows through a ``ConfirmPublisher`` (a window of unconfirmed
publishes, ``confirmWindow``) and returns only once the broker confirmed every one of them;
a nack, a returned mandatory publish, a closed channel or connection, or a publish left
unconfirmed for ``confirmTimeout`` seconds raises, which fails the task (and the write, after
Spark's task retries). The commit message of a task carries its counts; the driver-side
``commit`` logs the totals.

Message ids (``row_messages.py``) are ``<query>:<batch>:<partition>:<row>``. For ``df.write``,
query is the ``writeId`` option or a uuid drawn when the writer is created (so Spark's task
retries, which reuse the pickled writer, repeat the ids; a new ``save()`` gets a new uuid)
and batch is 0. For streams, query and batch are the streaming query id and micro-batch id,
which Spark puts in every task's local properties (``sql.streaming.queryId`` and
``streaming.sql.batchId``, checked on pyspark 4.3): a micro-batch Spark replays after a
failure (same checkpoint, same query id, same batch id, same offsets) publishes the same ids.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from warren.spark.write.frames import batch_publishes, octets_of
from warren.spark.write.publisher import ConfirmPublisher
from warren.spark.write.messages import MessageEncoder
from warren.spark.options import WriteOptions
from warren.spark.write.columns import RowLayout

__all__ = ["WarrenBatchWriter", "WarrenStreamWriter", "WriteReport", "publish_task"]

log = logging.getLogger("warren.spark.writer")


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task published; every one of ``confirmed`` was confirmed by the broker."""

    partition: int
    confirmed: int
    id_prefix: str
    seconds: float


def publish_task(batches, layout: RowLayout, options: WriteOptions, query: str, batch_id: str) -> WriteReport:
    """Publish one task's rows (Arrow batches) and wait for every confirm."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    prefix = f"{query}:{batch_id}:{partition}:"
    encoder = MessageEncoder(layout, options, prefix)
    started = time.monotonic()
    mandatory = options.mandatory
    with ConfirmPublisher(options.url, options.confirm_window, options.confirm_timeout,
                          options.connect_timeout) as publisher:
        publish = publisher.publish
        chunk = max(1, options.confirm_window // 4)  # several chunks in flight keep the pipe full
        for batch in batches:
            frames = batch_publishes(batch, options.exchange, options.routing_key, mandatory, prefix,
                                     encoder.rows, options.dedup_header, publisher.body_max)
            if frames is not None:  # the whole batch encoded at once (frames.py)
                encoder.rows += batch.num_rows
                for start in range(0, len(frames), chunk):
                    part = frames.slice(start, chunk)
                    publisher.publish_frames(octets_of(part), len(part))
                continue
            for exchange, routing_key, properties, body in encoder.messages(batch):
                publish(exchange, routing_key, properties, body, mandatory)
        confirmed = publisher.finish()
    return WriteReport(partition, confirmed, prefix, time.monotonic() - started)


def _summary(reports, what: str) -> str:
    done = [r for r in reports if r is not None]
    total = sum(r.confirmed for r in done)
    slowest = max((r.seconds for r in done), default=0.0)
    return f"{what}: {total} messages confirmed by {len(done)} of {len(reports)} tasks (slowest task {slowest:.1f}s)"


class WarrenBatchWriter(DataSourceArrowWriter):
    """``df.write.format("warren")``: one job; ids ``<writeId or uuid>:0:<partition>:<row>``."""

    def __init__(self, schema, options) -> None:
        self.options = WriteOptions.from_options(options)
        self.layout = RowLayout.from_schema(schema, self.options)
        self.write_id = self.options.write_id or uuid.uuid4().hex

    def write(self, iterator) -> WriteReport:
        return publish_task(iterator, self.layout, self.options, self.write_id, "0")

    def commit(self, messages) -> None:
        log.info("%s", _summary(messages, f"warren write {self.write_id}"))

    def abort(self, messages) -> None:
        log.warning("%s; the write failed", _summary(messages, f"warren write {self.write_id}"))


class WarrenStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("warren")``: ids ``<query id>:<batch id>:<partition>:<row>``."""

    def __init__(self, schema, options) -> None:
        self.options = WriteOptions.from_options(options)
        self.layout = RowLayout.from_schema(schema, self.options)

    def write(self, iterator) -> WriteReport:
        from pyspark import TaskContext

        context = TaskContext.get()
        query = context.getLocalProperty("sql.streaming.queryId") if context is not None else None
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        if not query or batch_id is None:
            # without them the ids would not repeat on a replay; refuse rather than publish
            # messages that deduplication cannot recognise
            raise RuntimeError("the warren stream writer found no streaming query id / batch id in the task's "
                               "local properties (sql.streaming.queryId, streaming.sql.batchId)")
        return publish_task(iterator, self.layout, self.options, query, batch_id)

    def commit(self, messages, batchId: int) -> None:
        log.info("%s", _summary(messages, f"warren stream batch {batchId}"))

    def abort(self, messages, batchId: int) -> None:
        log.warning("%s; the micro-batch failed", _summary(messages, f"warren stream batch {batchId}"))
