"""The AMQP read path (``transport=amqp``): one partition's offset range consumed with pika.

For brokers or networks where only AMQP gets through (the offsets still come from the HTTP
API when the batch is planned). A consumer starts at the range's first offset
(``x-stream-offset``), with a prefetch window (streams require one) acknowledged in batches
(``multiple=true``), and stops at the range's end; a delivery that does not come within
``timeout`` fails the task rather than hanging it.

Rows must be the same as the bulk path's for the same offsets, so this path decodes the raw
property octets with the same decoder: pika decodes a content header into its own
``BasicProperties`` (and renders some values differently, floats as integers for one), so a
subclass installed in ``pika.spec.props`` keeps the raw octets as well. The broker's
``x-stream-offset`` header is cut from them (``properties.strip_offset_header``): it gives
the offset, and without it the octets are the ones published, so the decode cache works.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from warren.spark.options import ReadOptions
from warren.spark.read.planning import StreamRange, retained_start
from warren.spark.read.properties import strip_offset_header
from warren.spark.read.records import ARROW_SCHEMA, batch_from_parts

__all__ = ["read_range_amqp", "BATCH_ROWS"]

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark


def _install_raw_properties() -> None:
    """Make pika keep the encoded octets of every basic property list it decodes (idempotent;
    other pika users in the process see the same properties plus one attribute)."""
    import pika.spec

    index = pika.spec.BasicProperties.INDEX
    if getattr(pika.spec.props[index], "_warren_raw", False):
        return

    class RawBasicProperties(pika.spec.props[index]):
        _warren_raw = True

        def decode(self, encoded, offset=0):
            self.raw = bytes(encoded[offset:])
            return super().decode(encoded, offset)

    pika.spec.props[index] = RawBasicProperties


class _Rows:
    """Columns of the rows consumed since the last batch."""

    def __init__(self) -> None:
        self.bodies, self.routing_keys, self.exchanges, self.props, self.offsets = [], [], [], [], []

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self, stream: str, schema: pa.Schema) -> pa.RecordBatch:
        batch = batch_from_parts(self.bodies, self.routing_keys, self.exchanges, self.props, self.offsets, stream,
                                 schema)
        self.__init__()
        return batch


def read_range_amqp(options: ReadOptions, rng: StreamRange, schema: pa.Schema = ARROW_SCHEMA) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records [rng.start, rng.end) of ``rng.stream``, consumed over AMQP."""
    if rng.end <= rng.start:
        return
    try:
        import pika
    except ImportError:
        raise RuntimeError("transport=amqp needs the pika client on the executors (pip install pika); "
                           "the default transport=http needs nothing more") from None

    _install_raw_properties()
    params = pika.URLParameters(options.url)
    params.socket_timeout = options.timeout_s
    params.blocked_connection_timeout = options.timeout_s
    connection = pika.BlockingConnection(params)
    stream = rng.stream
    try:
        channel = connection.channel()
        window = max(1, min(options.prefetch, rng.end - rng.start))
        channel.basic_qos(prefetch_count=window)
        ack_every = max(1, window // 2)
        rows = _Rows()
        expected = rng.start
        unacked = 0
        deliveries = channel.consume(stream, auto_ack=False, arguments={"x-stream-offset": rng.start},
                                     inactivity_timeout=options.timeout_s)
        for method, props, body in deliveries:
            if method is None:
                raise TimeoutError(f"stream {stream!r}: no delivery within {options.timeout_s:g} s at offset "
                                   f"{expected} (reading up to {rng.end - 1})")
            offset, raw = strip_offset_header(props.raw)
            if offset is None:
                raise RuntimeError(f"stream {stream!r}: a delivery without the x-stream-offset header")
            if offset > expected:  # retention passed the cursor (or a lost segment): a gap
                retained_start(stream, expected, offset, options.fail_on_data_loss)
            if offset >= rng.end:
                channel.basic_ack(method.delivery_tag, multiple=True)
                break
            if offset >= expected:
                rows.bodies.append(body)
                rows.routing_keys.append(method.routing_key)  # str, or bytes when not UTF-8: see records
                rows.exchanges.append(method.exchange)
                rows.props.append(raw)
                rows.offsets.append(offset)
                expected = offset + 1
            unacked += 1
            last = expected >= rng.end
            if unacked >= ack_every or last:
                channel.basic_ack(method.delivery_tag, multiple=True)
                unacked = 0
            if len(rows) >= BATCH_ROWS or (last and len(rows)):
                yield rows.batch(stream, schema)
            if last:
                break
        if len(rows):
            yield rows.batch(stream, schema)
        channel.cancel()
    finally:
        if connection.is_open:
            connection.close()
