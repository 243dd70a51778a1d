"""Filters on properties and headers pushed down to the broker (``pushFilters=true``): ``=`` and
``IN`` on ``content_type``, ``message_id``, ``properties.<field>`` and, with ``headers`` read as a
struct of chosen headers, ``headers.<name>``. The broker sends only the matching records
(warren/broker/queues/stream_match.py; its own tests: tests/broker/queues/test_stream_match.py)
and Spark checks each row again, so the rows are exactly those of the unfiltered read."""

from __future__ import annotations

import uuid

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import api, declare_stream, publish, wait_committed
from warren.store.stream_format import parse_entries

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")

COUNT = 600
SCHEMA = ("body binary, offset long, content_type string, message_id string, "
          "headers struct<region: string, n: string, `x-tier`: string>, "
          "properties struct<content_type: string, content_encoding: string, delivery_mode: int, priority: int, "
          "correlation_id: string, reply_to: string, expiration: string, message_id: string, timestamp: timestamp, "
          "type: string, user_id: string, app_id: string>")


def message(i: int, stream: str):
    """Message ``i``: region eu / us / ap / none in turn, ``n`` an integer header (i % 7), every
    fifth with a ``x-tier`` header, two content types, app ids and delivery modes in turn."""
    headers = {"n": i % 7}
    if i % 4 != 3:
        headers["region"] = ("eu", "us", "ap")[i % 4]
    if i % 5 == 0:
        headers["x-tier"] = "gold"
    props = pika.BasicProperties(content_type="text/plain" if i % 2 else "application/json", headers=headers,
                                 app_id=f"app-{i % 3}", delivery_mode=1 + i % 2, message_id=f"id-{i}")
    return f"{stream}.k", b"%d" % i, props


@pytest.fixture(scope="module")
def stream(broker):
    name = f"pushed-props-{uuid.uuid4().hex[:8]}"
    declare_stream(broker, name)
    publish(broker, name, COUNT, message_fn=message)
    wait_committed(broker, name, COUNT)
    return name



def _offsets(spark, broker, stream: str, where: str, push: bool = True) -> list[int]:
    df = (spark.read.format("warren").schema(SCHEMA).option("url", broker.url).option("httpUrl", broker.http_url)
          .option("stream", stream).option("pushFilters", "true" if push else "false").load().where(where))
    return sorted(r.offset for r in df.select("offset").collect())


@pytest.mark.parametrize("where, expected", [
    ("headers.region = 'eu'", lambda i: i % 4 == 0),
    ("headers.region in ('us', 'ap')", lambda i: i % 4 in (1, 2)),
    ("headers.n = '5'", lambda i: i % 7 == 5),  # an integer header, as the column renders it
    ("headers.`x-tier` = 'gold' and content_type = 'text/plain'", lambda i: i % 5 == 0 and i % 2 == 1),
    ("properties.app_id in ('app-1', 'app-2') and headers.region = 'eu'", lambda i: i % 3 and i % 4 == 0),
    ("properties.delivery_mode = 2", lambda i: i % 2 == 1),
    ("message_id = 'id-77'", lambda i: i == 77),
    ("headers.region = 'nowhere'", lambda i: False),
])
def test_property_and_header_filters_give_the_rows_of_an_unfiltered_read(spark, broker, stream, pushdown,
                                                                         where, expected):
    want = [i for i in range(COUNT) if expected(i)]
    assert _offsets(spark, broker, stream, where) == want
    if where.startswith("headers.region ="):  # once: the same rows unpushed (Spark's own filter)
        assert _offsets(spark, broker, stream, where, push=False) == want


def test_the_broker_sends_only_the_matching_records(broker, stream):
    """What the pushed ``headers.region = 'eu'`` becomes on the wire: the answer holds the
    records of eu and no other, and says the whole range was looked at."""
    with api(broker) as client:
        answer = client.records(stream, 0, COUNT, COUNT, 16 << 20, matches=(("header.region", frozenset({"eu"})),))
        got = [offset for offset, _ts, _record in parse_entries(bytes(answer.data))]
        assert got == list(range(0, COUNT, 4)) and answer.count == len(got) and answer.next_offset == COUNT
        both = client.records(stream, 0, COUNT, COUNT, 16 << 20, routing_keys=frozenset({f"{stream}.k"}),
                              matches=(("header.region", frozenset({"eu"})), ("property.app_id", frozenset({"app-0"}))))
        assert [o for o, _t, _r in parse_entries(bytes(both.data))] == list(range(0, COUNT, 12))


def test_a_map_lookup_is_not_pushed_and_stays_right(spark, broker, stream, pushdown):
    """Spark never pushes ``headers['region']`` (a map lookup): the read is whole, the rows right."""
    df = (spark.read.format("warren").option("url", broker.url).option("httpUrl", broker.http_url)
          .option("stream", stream).option("includeHeaders", "true").option("pushFilters", "true").load()
          .where("headers['region'] = 'ap'"))
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(2, COUNT, 4))


def test_a_refused_filter_names_the_parameter(broker, stream):
    from warren.spark.read.http_api import StreamApiError

    with api(broker) as client, pytest.raises(StreamApiError, match="property.headers"):
        client.records(stream, 0, COUNT, COUNT, 1 << 20, matches=(("property.headers", frozenset({"x"})),))

