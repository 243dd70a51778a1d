"""Batch reads (warren/spark/read/batch.py): the flat default schema, a user-given schema, and
the offset, timestamp and stream filters Spark pushes down."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import declare_stream, publish, publish_raw, wait_committed
from warren.spark.schema import DEFAULT_COLUMNS
from warren.spec.amqp0_9_1 import BasicProperties

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")



def _reader(spark, broker, stream: str, **options):
    r = (spark.read.format("warren").option("url", broker.url).option("httpUrl", broker.http_url)
         .option("stream", stream))
    for key, value in options.items():
        r = r.option(key, value)
    return r


@pytest.fixture(scope="module")
def two_streams(broker):
    """``a``: 2000 messages published in four bursts (so they span several milliseconds);
    ``b``: 300 messages."""
    suffix = uuid.uuid4().hex[:8]
    a, b = f"batch-a-{suffix}", f"batch-b-{suffix}"
    declare_stream(broker, a)
    declare_stream(broker, b)
    props = BasicProperties(content_type="text/plain", message_id="same").encode()
    for burst in range(4):
        publish_raw(broker, f"{a}.k", [b"a%d" % (burst * 500 + i) for i in range(500)], props)
        wait_committed(broker, a, (burst + 1) * 500)
    publish(broker, b, 300)
    wait_committed(broker, b, 300)
    return {"a": a, "b": b}



def test_the_default_schema_is_flat(spark, broker, two_streams):
    df = _reader(spark, broker, two_streams["b"]).load()
    assert tuple(df.columns) == DEFAULT_COLUMNS
    row = df.where("offset = 7").collect()[0]  # pushdown is off in this session: Spark filters
    assert (row.body, row.message_id, row.content_type, row.stream) == (b'{"i": 7}', "id-7", "application/json",
                                                                         two_streams["b"])
    assert row.timestamp is not None and row.timestamp.year >= 2024


def test_a_given_schema_builds_only_its_columns(spark, broker, two_streams):
    df = (spark.read.schema("offset bigint, message_id string, headers map<string,string>").format("warren")
          .option("url", broker.url).option("httpUrl", broker.http_url).option("stream", two_streams["b"]).load())
    assert df.columns == ["offset", "message_id", "headers"]
    rows = sorted(df.collect())
    assert [r.offset for r in rows] == list(range(300))
    assert rows[1].message_id == "id-1" and rows[1].headers == {"n": "1", "kind": "odd", "ok": "true"}
    assert rows[3].headers is None  # every third message has no headers table


def test_a_schema_with_a_column_the_source_lacks_fails_clearly(spark, broker, two_streams):
    df = (spark.read.schema("offset bigint, price double").format("warren")
          .option("url", broker.url).option("httpUrl", broker.http_url).option("stream", two_streams["b"]).load())
    with pytest.raises(Exception, match="has no column 'price'"):
        df.collect()


def test_offset_ranges_are_pushed_down(spark, broker, two_streams, pushdown):
    a = two_streams["a"]
    df = (_reader(spark, broker, a, recordsPerPartition="100", pushFilters="true").load()
          .where("offset >= 1250 and offset < 1400"))
    assert df.rdd.getNumPartitions() == 2  # 150 records: only that range is planned (not 20 tasks)
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(1250, 1400))
    assert _reader(spark, broker, a, pushFilters="true").load().where("offset > 5000").count() == 0


def test_without_the_option_a_dataframe_reused_after_a_filter_reads_everything(spark, broker, two_streams,
                                                                                 pushdown):
    # Spark reuses a read planned with pushed filters for the DataFrame's later queries:
    # pushdown is therefore opt-in, and by default a filter never narrows another query
    df = _reader(spark, broker, two_streams["b"]).load()
    assert df.where("offset = 7").count() == 1
    assert df.count() == 300 and df.rdd.getNumPartitions() == 1


def test_timestamp_windows_are_pushed_down(spark, broker, two_streams, pushdown):
    a = two_streams["a"]
    everything = _reader(spark, broker, a).load().select("offset", "timestamp").collect()
    stamps = sorted({r.timestamp for r in everything})
    assert len(stamps) >= 2, "the bursts were stored in the same millisecond"
    low, high = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    want = sorted(r.offset for r in everything if low <= r.timestamp < high)
    df = (_reader(spark, broker, a, recordsPerPartition="100", pushFilters="true").load()
          .where(f"timestamp >= '{low.isoformat()}' and timestamp < '{high.isoformat()}'"))
    assert sorted(r.offset for r in df.select("offset").collect()) == want
    assert df.rdd.getNumPartitions() < 20  # not the whole stream


def test_stream_names_are_pushed_down(spark, broker, two_streams, pushdown):
    a, b = two_streams["a"], two_streams["b"]
    df = _reader(spark, broker, f"{a},{b}", recordsPerPartition="100", pushFilters="true").load() \
        .where(f"stream = '{b}'")
    assert df.rdd.getNumPartitions() == 3
    assert df.count() == 300


def test_routing_keys_are_pushed_down_and_the_broker_skips_blocks_without_them(spark, broker, pushdown):
    """``routing_key = …`` / ``IN (…)`` go to the broker, which sends only the blocks of 128
    offsets its Bloom filters say may hold those keys (warren/broker/queues/stream_filter.py);
    Spark checks each row again, so the rows are exactly the matching ones."""
    from tests.spark.stream_helpers import api
    from warren.store.stream_format import parse_entries

    name = f"batch-rk-{uuid.uuid4().hex[:8]}"
    declare_stream(broker, name)
    props = BasicProperties(content_type="text/plain").encode()
    runs = ["cold"] * 9 + ["hot"] + ["cold"] * 5 + ["warm"] + ["cold"] * 4  # runs of 200 records per key
    for run, key in enumerate(runs):
        publish_raw(broker, f"{name}.{key}", [b"%d" % (run * 200 + i) for i in range(200)], props)
    total = len(runs) * 200
    wait_committed(broker, name, total)
    hot = [run * 200 + i for run, key in enumerate(runs) if key == "hot" for i in range(200)]
    warm = [run * 200 + i for run, key in enumerate(runs) if key == "warm" for i in range(200)]

    df = _reader(spark, broker, name, pushFilters="true").load().where(f"routing_key = '{name}.hot'")
    assert sorted(r.offset for r in df.select("offset").collect()) == hot
    df = (_reader(spark, broker, name, pushFilters="true").load()
          .where(f"routing_key in ('{name}.hot', '{name}.warm')"))
    assert sorted(r.offset for r in df.select("offset").collect()) == sorted(hot + warm)

    # what the broker sends for the pushed filter: a few blocks, not the stream
    with api(broker) as client:
        answer = client.records(name, 0, total, total, 16 << 20, routing_keys=frozenset({f"{name}.hot"}))
    got = [offset for offset, _ts, _record in parse_entries(bytes(answer.data))]
    assert answer.next_offset == total and len(got) == answer.count
    assert set(hot) <= set(got)  # never a false negative
    # the two blocks the run of "hot" lies in (a Bloom false positive may add one, rarely)
    assert {o // 128 for o in hot} <= {o // 128 for o in got} and len(got) <= 3 * 128
