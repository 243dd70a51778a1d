"""The ``property_list`` column on the way out (warren/spark/write/property_list.py): a list is
published octet for octet, the row's readable columns win field by field where they were
changed, header types left alone are kept; and through Spark: a DataFrame read from Warren
with every column, written back unchanged, publishes the very same property lists."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.clientmode import SocketClient
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spec.fields import encode_shortstr
from warren.spark.options import WriteOptions
from warren.spark.read import properties as rendering
from warren.spark.schema import FULL_SCHEMA_DDL, PROPERTY_FIELDS
from warren.spark.write import property_list as pl
from warren.spark.write.columns import RowLayout
from warren.spark.write.messages import MessageEncoder
from warren.spec.amqp0_9_1 import BasicProperties

# a table Python values cannot re-encode as it was: an unsigned octet, a signed short, a float
TYPED = b"".join((encode_shortstr("u8") + b"B\x07", encode_shortstr("s16") + b"s\xff\xfe",
                  encode_shortstr("f32") + b"f" + struct.pack(">f", 1.5),
                  encode_shortstr("text") + b"S\x00\x00\x00\x02hi"))


def _listed(**props) -> bytes:
    fields = pl.split(BasicProperties(**props).encode())
    fields["headers"] = struct.pack(">I", len(TYPED)) + TYPED
    return pl.join(fields)


RAW = _listed(content_type="text/plain", delivery_mode=2, priority=4, user_id="alice", timestamp=1_700_000_000,
              app_id="a")


def _shown(raw: bytes) -> tuple[list, dict]:
    headers, values = rendering.decode(raw)
    props = dict(zip([name for name, _ in PROPERTY_FIELDS], values))
    props["timestamp"] = None if props["timestamp"] is None else props["timestamp"] // 1_000_000
    return headers, props


def test_split_and_join_give_back_the_same_octets():
    assert pl.join(pl.split(RAW)) == RAW
    assert pl.split(b"") == {} and pl.join({}) == pl.NO_PROPERTIES


def test_an_unchanged_row_publishes_the_list_itself():
    headers, props = _shown(RAW)
    assert pl.merge_row(RAW, headers, True, props) is RAW


def test_changes_win_field_by_field_and_untouched_header_types_stay():
    headers, props = _shown(RAW)
    headers = [(k, "changed" if k == "text" else v) for k, v in headers if k != "f32"] + [("new", "1")]
    merged = pl.merge_row(RAW, headers, True, {**props, "priority": 9, "app_id": None})
    decoded, _ = BasicProperties.decode(merged, 0)
    assert (decoded.priority, decoded.app_id, decoded.delivery_mode, decoded.user_id) == (9, None, 2, "alice")
    assert decoded.headers == {"u8": 7, "s16": -2, "text": "changed", "new": "1"}
    table = pl.split(merged)["headers"]
    assert b"B\x07" in table and b"s\xff\xfe" in table  # their field types kept


def test_a_null_headers_map_drops_the_table():
    _, props = _shown(RAW)
    assert "headers" not in pl.split(pl.merge_row(RAW, None, True, props))


def test_user_id_and_the_deduplication_header():
    assert pl.user_id_of(RAW) == "alice"
    assert pl.user_id_of(pl.without_user_id(RAW)) is None
    assert pl.split(pl.without_user_id(RAW))["app_id"] == pl.split(RAW)["app_id"]
    with_id = pl.set_header(RAW, "x-deduplication-header", "q:0:0:1")
    assert BasicProperties.decode(with_id, 0)[0].headers["x-deduplication-header"] == "q:0:0:1"
    assert TYPED in with_id  # the other entries octet for octet


class _Field:
    def __init__(self, name: str, kind: str) -> None:
        from pyspark.sql import types as t

        self.name = name
        self.dataType = {"binary": t.BinaryType(), "string": t.StringType()}[kind]


class _Schema:
    def __init__(self, *fields) -> None:
        self.fields = [_Field(n, k) for n, k in fields]


@pytest.mark.parametrize("drop", [False, True])
def test_the_encoder_publishes_the_list_and_drops_a_foreign_user_id_when_asked(drop):
    options = WriteOptions(url="amqp://bob:pw@127.0.0.1:5672/%2F", exchange="", dedup_header=None,
                           drop_foreign_user_id=drop)
    layout = RowLayout.from_schema(_Schema(("body", "binary"), ("property_list", "binary")), options)
    batch = pa.record_batch({"body": pa.array([b"a", b"b"]), "property_list": pa.array([RAW, None], pa.binary())})
    (_, _, first, _), (_, _, second, _) = MessageEncoder(layout, options, "w:0:0:").messages(batch)
    assert first == (pl.without_user_id(RAW) if drop else RAW)
    assert BasicProperties.decode(second, 0)[0].message_id == "w:0:0:1"  # no list: the writer's own


@pytest.mark.timeout(300)
@pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")
def test_a_dataframe_read_from_warren_is_written_back_unchanged(spark, broker, uid):
    stream, queue = f"wb-{uid}", f"wb-out-{uid}"
    declare_stream(broker, stream)
    lists = [_listed(delivery_mode=2, priority=i % 10, message_id=f"m{i}", user_id="guest") for i in range(20)]
    for i, raw in enumerate(lists):
        publish_raw(broker, f"{stream}.k", [b"b%d" % i], raw)
    wait_committed(broker, stream, 20)
    df = (spark.read.format("warren").schema(FULL_SCHEMA_DDL).option("url", broker.url).option("stream", stream)
          .load())
    with SocketClient(broker) as c:
        c.channel(1)
        c.declare_queue(1, queue)
        df.write.format("warren").option("url", broker.url).option("exchange", "").option("routingKey", queue) \
            .option("dedupHeader", "none").mode("append").save()
        got = {}
        while (content := c.get(1, queue)) is not None:
            got[bytes(content.body)] = bytes(content.properties)
    assert got == {b"b%d" % i: raw for i, raw in enumerate(lists)}
