"""Stream filtering over AMQP 0-9-1 with pika (RabbitMQ 3.13's: ``x-stream-filter-value`` on
publish, ``x-stream-filter`` and ``x-stream-match-unfiltered`` on consume;
warren/broker/queues/stream_filter.py). RabbitMQ 3.10, the reference installed here, has no
stream filtering (it came in 3.13): it ignores the arguments and delivers everything, so these
tests run against Warren only."""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, RABBITMQ
from .test_streams import consume, declare_stream

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(RABBITMQ, reason="stream filtering came in RabbitMQ 3.13; the 3.10 here ignores it"),
]


def publish_regions(ch, queue: str, regions) -> None:
    ch.confirm_delivery()
    for i, region in enumerate(regions):
        headers = {"x-stream-filter-value": region} if region is not None else {"n": i}
        ch.basic_publish("", queue, f"{i}:{region}".encode(), pika.BasicProperties(headers=headers))


def bodies(got) -> list[str]:
    return [body.decode() for _, body, _ in got]


def test_a_filtered_consumer_gets_only_the_messages_with_its_values(conn, cleanup, uid):
    ch = conn.channel()
    q = declare_stream(ch, cleanup, f"sf-{uid}")
    regions = ["amer"] * 300 + ["emea"] * 5 + ["apac"] * 300 + ["emea"] * 3 + [None] * 10
    publish_regions(ch, q, regions)
    expected = [f"{i}:{r}" for i, r in enumerate(regions) if r == "emea"]
    got, _ = consume(conn, q, "first", count=len(regions), timeout=10)
    assert len(got) == len(regions)  # without a filter, everything
    chan = conn.channel()
    chan.basic_qos(prefetch_count=100)
    seen = []
    chan.basic_consume(q, lambda c, m, p, b: (seen.append((p.headers["x-stream-offset"], b.decode())),
                                              c.basic_ack(m.delivery_tag)),
                       arguments={"x-stream-offset": "first", "x-stream-filter": "emea"})
    conn.process_data_events(1.0)
    while len(seen) < len(expected):
        conn.process_data_events(0.1)
    conn.process_data_events(0.3)  # nothing else arrives
    assert [b for _, b in seen] == expected
    assert [o for o, _ in seen] == [i for i, r in enumerate(regions) if r == "emea"]  # offsets kept


def test_several_values_and_the_unfiltered_ones(conn, cleanup, uid):
    ch = conn.channel()
    q = declare_stream(ch, cleanup, f"sf2-{uid}", **{"x-stream-filter-size-bytes": 32})
    regions = ["amer", "emea", None, "apac", "emea", None, "amer"] * 40
    publish_regions(ch, q, regions)
    for arguments, keep in (({"x-stream-filter": ["emea", "apac"]}, {"emea", "apac"}),
                            ({"x-stream-filter": "amer", "x-stream-match-unfiltered": True}, {"amer", None})):
        expected = [f"{i}:{r}" for i, r in enumerate(regions) if r in keep]
        chan = conn.channel()
        chan.basic_qos(prefetch_count=50)
        seen = []
        chan.basic_consume(q, lambda c, m, p, b: (seen.append(b.decode()), c.basic_ack(m.delivery_tag)),
                           arguments={"x-stream-offset": "first", **arguments})
        while len(seen) < len(expected):
            conn.process_data_events(0.1)
        conn.process_data_events(0.3)
        assert seen == expected, arguments
        chan.close()


def test_a_live_filtered_consumer_sees_new_matching_messages(conn, cleanup, uid):
    ch = conn.channel()
    q = declare_stream(ch, cleanup, f"sf3-{uid}")
    chan = conn.channel()
    chan.basic_qos(prefetch_count=10)
    seen = []
    chan.basic_consume(q, lambda c, m, p, b: (seen.append(b.decode()), c.basic_ack(m.delivery_tag)),
                       arguments={"x-stream-filter": "emea"})  # from "next"
    chan.basic_qos(prefetch_count=10)  # a round trip: the consumer is in place
    publish_regions(ch, q, ["amer"] * 200 + ["emea"] + ["amer"] * 50 + ["emea"])
    while len(seen) < 2:
        conn.process_data_events(0.1)
    assert seen == ["200:emea", "251:emea"]


@pytest.mark.parametrize("arguments", [{"x-stream-filter": 5}, {"x-stream-filter": "a",
                                                                  "x-stream-match-unfiltered": "yes"}])
def test_a_wrong_filter_argument_closes_the_channel_with_406(conn, cleanup, uid, arguments):
    ch = conn.channel()
    q = declare_stream(ch, cleanup, f"sf4-{uid}")
    chan = conn.channel()
    chan.basic_qos(prefetch_count=10)
    with pytest.raises(ChannelClosedByBroker) as e:
        chan.basic_consume(q, lambda *a: None, arguments=arguments)
    assert e.value.reply_code == PRECONDITION_FAILED
    assert "x-stream-" in e.value.reply_text
    assert conn.channel().is_open  # the connection serves on


def test_filter_size_outside_rabbitmqs_range_is_406(conn, cleanup, uid):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        declare_stream(ch, cleanup, f"sf5-{uid}", **{"x-stream-filter-size-bytes": 256})
    assert e.value.reply_code == PRECONDITION_FAILED
