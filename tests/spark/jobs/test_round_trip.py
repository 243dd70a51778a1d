"""Archive then replay is a round trip: publish → ``warren pipeline archive`` → ``replay`` →
consume gives back every message as it was published, field by field, in every protocol
family; then kill -9 of the broker, and the persistent ones are still there, unchanged.

Hypothesis draws the messages: every basic property, and headers tables with every field type
Warren's codec knows (``t b B s u I i l L f d D S x T V F A``), nested. Three publishers:

* pika (0-9-1), consumed with pika and compared attribute by attribute with what was published;
* Warren's client mode in the 0-9-1 and 0-8 dialects (tests/e2e/clientmode.py), publishing
  property lists encoded here octet by octet (pika cannot send ``b``, ``s``, ``u``, ``i``,
  ``L``, ``f``); the consumed list must be those very octets;
* Warren's 0-10 client mode (tests/e2e/amqp0_10/client010.py), consumed over 0-10, each
  replayed message compared field by field with a copy of the original routed beside it.

The archive and the replay are the commands' own functions (``run_archive``, ``replay``) on the
test session's SparkSession; three examples of four to eight messages (one archive and one replay
job each) take 2.5-3 minutes on the loaded 2-core machine, most of it Spark's start. The
replayed messages are read without acknowledging (they go back to their durable
queues), then the broker is killed with SIGKILL, restarted on the same data folder, and every
persistent message must be there with the same property octets.
"""

from __future__ import annotations

import datetime
import signal
import struct
import uuid

import pika
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import EXTERNAL_URL
from tests.e2e.amqp0_10.client010 import Client010
from tests.e2e.clientmode import SocketClient
from tests.spark.stream_helpers import declare_stream, wait_committed
from warren.spec.fields import TIMESTAMP_MAX, encode_shortstr
from warren.spark.jobs.archive import run_archive
from warren.spark.jobs.replay import replay
from warren.spark.write import property_list
from warren.spec import amqp0_10 as spec010

pytestmark = [pytest.mark.skipif(EXTERNAL_URL is not None, reason="kills and restarts a broker of its own"),
              pytest.mark.timeout(600)]

EXCHANGE = "amq.topic"

# --- typed field-table values, encoded octet by octet ------------------------------------------

_FIXED = {"b": ">b", "B": ">B", "s": ">h", "u": ">H", "I": ">i", "i": ">I", "l": ">q", "L": ">q", "f": ">f",
          "d": ">d"}


def _fixed(tag: str):
    fmt = _FIXED[tag]
    if tag in "fd":
        values = st.floats(width=32 if tag == "f" else 64, allow_nan=False)
    else:
        bits = struct.calcsize(fmt) * 8
        signed = fmt[1].islower()
        values = st.integers(-(1 << (bits - 1)) if signed else 0, (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1)
    return values.map(lambda v: tag.encode() + struct.pack(fmt, v))


def _long(tag: bytes, data: bytes) -> bytes:
    return tag + struct.pack(">I", len(data)) + data


SCALARS = st.one_of(
    st.booleans().map(lambda v: b"t" + bytes((v,))),
    *[_fixed(tag) for tag in _FIXED],
    st.tuples(st.integers(0, 9), st.integers(-(1 << 31), (1 << 31) - 1)).map(lambda v: b"D" + struct.pack(">Bi", *v)),
    st.text(max_size=12).map(lambda v: _long(b"S", v.encode("utf-8", "surrogatepass"))),
    st.binary(max_size=12).map(lambda v: _long(b"x", v)),
    st.integers(0, TIMESTAMP_MAX).map(lambda v: b"T" + struct.pack(">Q", v)),
    st.just(b"V"),
)
# header names: no x- prefix and no CC/BCC (the broker gives those a meaning)
NAMES = st.text("abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=8).map(lambda s: "h" + s)


def _table_body(entries: dict) -> bytes:
    return b"".join(encode_shortstr(k) + v for k, v in entries.items())


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.dictionaries(NAMES, inner, max_size=3).map(lambda d: _long(b"F", _table_body(d))),
        st.lists(inner, max_size=3).map(lambda items: _long(b"A", b"".join(items))),
    ),
    max_leaves=6,
)
TABLES = st.dictionaries(NAMES, VALUES, min_size=1, max_size=6).map(lambda d: struct.pack(">I", len(_table_body(d)))
                                                                     + _table_body(d))
SHORT = st.text("abcdefghijklmnopqrstuvwxyz0123456789/._-", min_size=1, max_size=16)


@st.composite
def raw_property_lists(draw) -> bytes:
    """An encoded basic property list: any subset of the properties, a typed headers table."""
    fields: dict[str, bytes] = {}

    def maybe(name: str, strategy, encode):
        value = draw(st.one_of(st.none(), strategy))
        if value is not None:
            fields[name] = encode(value)

    maybe("content_type", SHORT, encode_shortstr)
    maybe("content_encoding", SHORT, encode_shortstr)
    maybe("headers", TABLES, lambda t: t)
    maybe("delivery_mode", st.sampled_from([1, 2]), lambda v: bytes((v,)))
    maybe("priority", st.integers(0, 9), lambda v: bytes((v,)))
    maybe("correlation_id", SHORT, encode_shortstr)
    maybe("reply_to", SHORT, encode_shortstr)
    maybe("expiration", st.integers(86_400_000, 10**9).map(str), encode_shortstr)  # outlives the test
    maybe("message_id", SHORT, encode_shortstr)
    maybe("timestamp", st.integers(0, 2**63 - 1), lambda v: struct.pack(">Q", v))
    maybe("type", SHORT, encode_shortstr)
    maybe("user_id", st.just("guest"), encode_shortstr)  # the broker checks it against the publisher
    maybe("app_id", SHORT, encode_shortstr)
    return property_list.join(fields)


# --- pika's values (what pika can encode) -------------------------------------------------------

# pika encodes no float (UnsupportedAMQPFieldException): floats go through the raw publishers
PIKA_SCALARS = st.one_of(
    st.text(max_size=10), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
    st.binary(max_size=10), st.none(),
    st.decimals(min_value=-10**6, max_value=10**6, places=2, allow_nan=False, allow_infinity=False),
    # aware, in UTC: pika decodes a timestamp so (a naive one sent came back aware, unequal)
    st.datetimes(min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(9999, 1, 1),
                 timezones=st.just(datetime.timezone.utc)).map(lambda d: d.replace(microsecond=0)),
)
PIKA_VALUES = st.recursive(PIKA_SCALARS, lambda inner: st.one_of(st.dictionaries(NAMES, inner, max_size=3),
                                                                st.lists(inner, max_size=3)), max_leaves=6)


@st.composite
def pika_properties(draw) -> pika.BasicProperties:
    def maybe(strategy):
        return draw(st.one_of(st.none(), strategy))

    return pika.BasicProperties(
        content_type=maybe(SHORT), content_encoding=maybe(SHORT),
        headers=maybe(st.dictionaries(NAMES, PIKA_VALUES, min_size=1, max_size=6)),
        delivery_mode=maybe(st.sampled_from([1, 2])), priority=maybe(st.integers(0, 9)),
        correlation_id=maybe(SHORT), reply_to=maybe(SHORT), expiration=maybe(st.integers(86_400_000, 10**9).map(str)),
        message_id=maybe(SHORT), timestamp=maybe(st.integers(0, 2**62)), type=maybe(SHORT),
        user_id=maybe(st.just("guest")), app_id=maybe(SHORT))


# --- 0-10's values --------------------------------------------------------------------------------

O10_VALUES = st.recursive(
    st.one_of(st.text(max_size=10), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
              st.floats(allow_nan=False), st.binary(max_size=10)),
    lambda inner: st.dictionaries(NAMES, inner, max_size=3), max_leaves=5)


@st.composite
def o10_message(draw) -> tuple:
    def maybe(strategy):
        return draw(st.one_of(st.none(), strategy))

    delivery = spec010.MessageDeliveryProperties(delivery_mode=maybe(st.sampled_from([1, 2])),
                                                 priority=maybe(st.integers(0, 9)))
    props = spec010.MessageMessageProperties(
        message_id=maybe(st.uuids()), correlation_id=maybe(SHORT.map(str.encode)), content_type=maybe(SHORT),
        content_encoding=maybe(SHORT), user_id=maybe(st.just(b"guest")), app_id=maybe(SHORT.map(str.encode)),
        application_headers=maybe(st.dictionaries(NAMES, O10_VALUES, min_size=1, max_size=5)))
    return delivery, props


FAMILIES = ("pika", "0-9-1", "0-8", "0-10")
MESSAGES = st.lists(st.one_of(
    st.tuples(st.just("pika"), pika_properties()),
    st.tuples(st.just("0-9-1"), raw_property_lists()),
    st.tuples(st.just("0-8"), raw_property_lists()),
    st.tuples(st.just("0-10"), o10_message()),
), min_size=4, max_size=8)
# one persistent message of each family, tried first: the kill -9 half then always has something to
# check (three drawn examples held no persistent message at all in session 16's CI)
PERSISTENT_EACH = [
    ("pika", pika.BasicProperties(delivery_mode=2, headers={"k": "v"})),
    ("0-9-1", property_list.join({"delivery_mode": b"\x02"})),
    ("0-8", property_list.join({"delivery_mode": b"\x02", "priority": b"\x05"})),
    ("0-10", (spec010.MessageDeliveryProperties(delivery_mode=2), spec010.MessageMessageProperties())),
]


# --- the round trip -----------------------------------------------------------------------------

def _publish(broker, stream: str, messages) -> None:
    """Each message by its family's client, to amq.topic as ``<stream>.<family>.<i>``."""
    with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for i, (family, props) in enumerate(messages):
            if family == "pika":
                ch.basic_publish(EXCHANGE, f"{stream}.pika.{i}", b"m%d" % i, props)
    for dialect in ("0-9-1", "0-8"):
        mine = [(i, props) for i, (family, props) in enumerate(messages) if family == dialect]
        if not mine:
            continue
        with SocketClient(broker, dialect) as c:
            c.channel(1)
            for i, raw in mine:
                c.publish(1, EXCHANGE, f"{stream}.{dialect}.{i}", b"m%d" % i, raw)
            c.declare_queue(1, "", exclusive=True)  # a round trip: every publish before it was routed
    mine = [(i, m) for i, (family, m) in enumerate(messages) if family == "0-10"]
    if mine:
        with Client010(broker) as c:
            session = c.session(1)
            for i, (delivery, props) in mine:
                # a copy: transfer() sets the routing key on the struct it is given
                delivery = spec010.MessageDeliveryProperties(delivery_mode=delivery.delivery_mode,
                                                             priority=delivery.priority)
                session.transfer(EXCHANGE, b"m%d" % i, routing_key=f"{stream}.0-10.{i}", delivery=delivery,
                                 properties=props)


def _declare_targets(broker, stream: str, target: str) -> None:
    """The replay's exchange with one durable queue per family; beside the stream, a queue
    that receives each 0-10 original (its copy to compare with)."""
    with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
        ch = conn.channel()
        ch.exchange_declare(target, "topic", durable=True)
        for family in FAMILIES:
            ch.queue_declare(f"{target}.{family}", durable=True)
            ch.queue_bind(f"{target}.{family}", target, f"{stream}.{family}.#")
        ch.queue_declare(f"{stream}.original-0-10", durable=True)
        ch.queue_bind(f"{stream}.original-0-10", EXCHANGE, f"{stream}.0-10.#")


def _index(routing_key: str) -> int:
    return int(routing_key.rsplit(".", 1)[1])


def _check_pika(broker, queue: str, stream: str, messages) -> None:
    wanted = {i: p for i, (family, p) in enumerate(messages) if family == "pika"}
    with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
        ch = conn.channel()
        seen = set()
        for _ in range(len(wanted)):
            method, got, body = ch.basic_get(queue, auto_ack=False)
            assert method is not None, f"{queue}: {len(seen)} of {len(wanted)} messages came back"
            i = _index(method.routing_key)
            assert body == b"m%d" % i and method.routing_key == f"{stream}.pika.{i}"
            sent = wanted[i]
            for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
                         "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id"):
                assert getattr(got, name) == getattr(sent, name), (name, getattr(got, name), getattr(sent, name))
            seen.add(i)
        assert ch.basic_get(queue, auto_ack=False)[0] is None  # nothing more
        assert seen == set(wanted)
    # closing without acknowledging gives them back to the queue


def _check_raw(broker, queue: str, dialect: str, stream: str, messages) -> None:
    wanted = {i: raw for i, (family, raw) in enumerate(messages) if family == dialect}
    with SocketClient(broker, dialect) as c:
        c.channel(1)
        seen = set()
        for _ in range(len(wanted)):
            content = c.get(1, queue, no_ack=False)
            assert content is not None, f"{queue}: {len(seen)} of {len(wanted)} came back"
            i = _index(content.method.routing_key)
            assert bytes(content.body) == b"m%d" % i
            # the property list consumed is the one published, octet for octet
            assert property_list.split(bytes(content.properties)) == property_list.split(wanted[i])
            assert bytes(content.properties) == wanted[i]
            seen.add(i)
        assert c.get(1, queue, no_ack=False) is None
        assert seen == set(wanted)


def _o10_fields(msg) -> dict:
    d, p = msg.delivery, msg.properties
    fields = {name: getattr(d, name, None) for name in ("delivery_mode", "priority", "ttl", "expiration")}
    if p is not None:
        fields.update({name: getattr(p, name, None) for name in (
            "message_id", "correlation_id", "content_type", "content_encoding", "user_id", "app_id",
            "application_headers")})
        fields["reply_to"] = None if p.reply_to is None else (p.reply_to.exchange, p.reply_to.routing_key)
    return fields


def _check_0_10(broker, queue: str, stream: str, messages) -> None:
    wanted = {i: m for i, (family, m) in enumerate(messages) if family == "0-10"}
    with Client010(broker) as c:
        session = c.session(1)
        originals, replayed = {}, {}
        for source, into in ((f"{stream}.original-0-10", originals), (queue, replayed)):
            session.subscribe(source, source, accept_mode=0)
            for _ in range(len(wanted)):
                msg = session.get(source)
                into[_index(msg.delivery.routing_key)] = msg
        assert set(originals) == set(replayed) == set(wanted)
        for i, msg in replayed.items():
            assert msg.body == b"m%d" % i
            assert _o10_fields(msg) == _o10_fields(originals[i])
            delivery, props = wanted[i]
            for name in ("delivery_mode", "priority"):
                if getattr(delivery, name) is not None:
                    assert getattr(msg.delivery, name) == getattr(delivery, name)
            for name in ("message_id", "correlation_id", "content_type", "content_encoding", "app_id", "user_id"):
                if getattr(props, name) is not None:
                    assert getattr(msg.properties, name) == getattr(props, name), name
        # not accepted: back to their queues when the connection closes


def _stored_lists(broker, target: str) -> dict[tuple[str, bytes], bytes]:
    """(queue, body) -> property octets of every message in the replay's queues (not acked)."""
    out = {}
    with SocketClient(broker, "0-9-1") as c:
        c.channel(1)
        for family in FAMILIES:
            queue = f"{target}.{family}"
            while (content := c.get(1, queue, no_ack=False)) is not None:
                out[(queue, bytes(content.body))] = bytes(content.properties)
    return out


def _persistent(raw: bytes) -> bool:
    value = property_list.split(raw).get("delivery_mode")
    return value == b"\x02"


def test_archive_then_replay_gives_every_message_back_and_kill_9_keeps_the_persistent(
        spark, start_broker, tmp_path):
    node = start_broker()
    kept: dict[tuple[str, bytes], bytes] = {}  # persistent replayed messages, over every example

    @settings(max_examples=3, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(messages=MESSAGES)
    @example(messages=PERSISTENT_EACH)
    def round_trip(messages):
        run = uuid.uuid4().hex[:8]
        stream, target = f"rt-{run}", f"rt-replayed-{run}"
        declare_stream(node, stream)
        _declare_targets(node, stream, target)
        _publish(node, stream, messages)
        wait_committed(node, stream, len(messages))
        archive = tmp_path / run
        query = run_archive(spark, stream=stream, path=str(archive), checkpoint=str(archive) + ".checkpoint",
                            url=node.url, http_url=None, trigger="availableNow", interval="1 second",
                            max_records_per_trigger=None, max_bytes_per_trigger=None, starting_offsets="earliest",
                            records_per_partition=None, fail_on_data_loss=True, transport="http",
                            report=lambda line: None)
        assert query.exception() is None
        assert replay(spark, str(archive), target, node.url) == len(messages)
        _check_pika(node, f"{target}.pika", stream, messages)
        for dialect in ("0-9-1", "0-8"):
            _check_raw(node, f"{target}.{dialect}", dialect, stream, messages)
        _check_0_10(node, f"{target}.0-10", stream, messages)
        kept.update({k: v for k, v in _stored_lists(node, target).items() if _persistent(v)})

    round_trip()
    assert kept, "no persistent message was drawn: the kill -9 part tested nothing"
    node.signal(signal.SIGKILL)
    node.wait()
    again = start_broker(data_dir=node.data_dir)
    found = {}
    with SocketClient(again, "0-9-1") as c:
        c.channel(1)
        for queue in sorted({q for q, _ in kept}):
            while (content := c.get(1, queue, no_ack=False)) is not None:
                found[(queue, bytes(content.body))] = bytes(content.properties)
    missing = set(kept) - set(found)
    assert not missing, f"{len(missing)} persistent messages lost in the kill -9: {sorted(missing)[:5]}"
    for key, raw in kept.items():
        assert found[key] == raw, key
