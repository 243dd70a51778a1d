"""The batch encoder of publishes (warren/spark/write/frames.py) gives, octet for octet, what the
row-by-row path (MessageEncoder + ConfirmPublisher.publish) gives."""

from __future__ import annotations

from collections import deque

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from warren.spark.options import WriteOptions
from warren.spark.write.columns import RowLayout
from warren.spark.write.frames import batch_publishes, octets_of
from warren.spark.write.messages import MessageEncoder
from warren.spark.write.publisher import ConfirmPublisher


class _Link:
    def __init__(self) -> None:
        self.out = bytearray()


def _row_by_row(batch, options: WriteOptions, prefix: str, first: int, body_max: int) -> bytes:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    fields = [StructField(f.name, BinaryType() if f.type == pa.binary() else StringType()) for f in batch.schema]
    encoder = MessageEncoder(RowLayout.from_schema(StructType(fields), options), options, prefix)
    encoder.rows = first
    publisher = ConfirmPublisher.__new__(ConfirmPublisher)  # only its frame encoding, no socket
    publisher.link, publisher._method_frames, publisher._body_max = _Link(), {}, body_max
    publisher.failure, publisher.published, publisher.confirmed, publisher.window = None, 0, 0, 10**9
    publisher._pending = deque()
    for exchange, routing_key, properties, body in encoder.messages(batch):
        publisher.publish(exchange, routing_key, properties, body, options.mandatory)
    return bytes(publisher.link.out)


names = st.text(max_size=12).filter(lambda s: len(s.encode()) <= 255)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), names), names),
                max_size=30),
       st.sampled_from(["x-deduplication-header", "none"]), st.booleans(), st.booleans(), st.booleans(),
       st.integers(0, 10**12))
def test_batch_frames_equal_the_row_by_row_frames(rows, dedup, fixed_key, mandatory, text_body, first):
    bodies = [b for b, _, _ in rows]
    columns = {"body": pa.array([None if b is None else b.decode("latin-1") for b in bodies], pa.string())
               if text_body else pa.array(bodies, pa.binary()),
               "routing_key": pa.array([k for _, k, _ in rows], pa.string()),
               "exchange": pa.array([e for _, _, e in rows], pa.string())}
    batch = pa.RecordBatch.from_pydict(columns)
    options = WriteOptions.from_options({"routingKey": "fixed" if fixed_key else "", "dedupHeader": dedup,
                                         "mandatory": str(mandatory)})
    options = WriteOptions(**{**options.__dict__, "routing_key": "fixed" if fixed_key else None})
    prefix = "q1:0:3:"
    frames = batch_publishes(batch, options.exchange, options.routing_key, mandatory, prefix, first,
                             options.dedup_header, 131_064)
    assert frames is not None and len(frames) == len(rows)
    got = b"".join(v.as_py() for v in frames)
    assert got == _row_by_row(batch, options, prefix, first, 131_064)
    assert bytes(octets_of(frames)) == got
    if len(frames) > 2:  # a slice's octets are its rows' publishes
        assert bytes(octets_of(frames.slice(1, 2))) == b"".join(v.as_py() for v in frames[1:3])


def test_rows_the_batch_path_cannot_encode_go_row_by_row():
    batch = pa.RecordBatch.from_pydict({"body": pa.array([b"x" * 100], pa.binary())})
    assert batch_publishes(batch, "", "k", False, "p:", 0, None, 50) is None  # body past one frame
    with_headers = pa.RecordBatch.from_pydict({"body": pa.array([b"x"]), "message_id": pa.array(["m"])})
    assert batch_publishes(with_headers, "", "k", False, "p:", 0, None, 1000) is None
    long_key = pa.RecordBatch.from_pydict({"body": pa.array([b"x"]), "routing_key": pa.array(["k" * 256])})
    assert batch_publishes(long_key, "", None, False, "p:", 0, None, 1000) is None
