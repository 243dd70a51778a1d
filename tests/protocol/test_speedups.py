"""The compiled fast paths (warren/codec/_speedups.c, warren/store/_records.c,
warren/broker/_messages.c) against their pure-Python twins: for
basic.publish (ServerConnection._publish) the same input gives the same events and the same
errors; for basic.deliver (ServerConnection.send_deliver) the same octets go out.

tests/protocol/test_connection.py also runs every test with each path; here Hypothesis feeds
both connections streams of publishes mixed with everything the C code must leave alone
(frames cut short, wrong frame-end octets, other channels, oversize frames, other methods,
heartbeats, headers of another class, malformed property lists) and compares what comes out.
The property-list check itself (properties_error) is compared with its Python twin on hostile
octets: both must give the same verdict (issue 16: nothing malformed may be stored)."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.codec.test_properties import REFUSED, TAKEN, hostile_lists
from tests.protocol.test_connection import Peer, body_frame, frame, header_frame, mframe
from warren.codec.properties import properties_error as py_properties_error
from warren.codec.frames import FRAME_HEARTBEAT, FRAME_METHOD
from warren.errors import AMQPError, PreconditionFailed
from warren.protocol.amqp0_9_1 import connection as connection_module
from warren.protocol.events import Content, Publishes
from warren.spec import amqp0_9_1 as spec

take_publish = connection_module._take_publish
take_publishes = connection_module._take_publishes
c_properties_error = connection_module._properties_error if take_publish is not None else None
needs_speedups = pytest.mark.skipif(take_publish is None, reason="warren.store._fsync is not built (setup.py)")
FRAME_MAX = 4096


def test_the_accelerator_is_built():
    """CI and every machine with a C compiler build it (setup.py); without one, Warren runs the
    pure-Python path, and WARREN_NO_EXTENSIONS=1 says that is intended."""
    if os.environ.get("WARREN_NO_EXTENSIONS"):
        pytest.skip("WARREN_NO_EXTENSIONS is set: the pure-Python path is intended")
    assert take_publish is not None, ("warren.codec._speedups was not compiled: install a C compiler and the "
                                      "Python headers and reinstall, or set WARREN_NO_EXTENSIONS=1")


@needs_speedups
def test_take_publish_returns_the_parts_and_reuses_equal_objects():
    args = spec.BasicPublish(exchange="ex", routing_key="rk").encode()[4:]
    props = b"\x10\x00\x02"
    data = mframe(1, spec.BasicPublish(exchange="ex", routing_key="rk")) + header_frame(1, 3, props) \
        + body_frame(1, b"abc") + b"tail"
    channel, a, p, body, after = take_publish(bytearray(data), 0, FRAME_MAX, 100, None, b"")
    assert (channel, a, p, body, after) == (1, args, props, b"abc", len(data) - 4)
    last_args, last_props = bytes(args), bytes(props)
    _, a2, p2, _, _ = take_publish(data, 0, FRAME_MAX, 100, last_args, last_props)
    assert a2 is last_args and p2 is last_props
    assert take_publish(data, 0, FRAME_MAX, 2, None, b"") is None  # body over max_body
    assert take_publish(data, 0, 20, 100, None, b"") is None  # a 21-octet method frame over frame_max
    for cut in range(len(data) - 4):
        assert take_publish(data[:cut], 0, FRAME_MAX, 100, None, b"") is None
    empty = mframe(2, spec.BasicPublish()) + header_frame(2, 0)
    assert take_publish(empty, 0, 0, 100, None, b"")[3] == b""


def bodies_of(got) -> list:
    """The bodies a take_publishes answer holds (a run of one is not a list)."""
    return got[3] if type(got[3]) is list else [got[3]]


@needs_speedups
def test_take_publishes_takes_a_run_with_the_same_method_on_one_channel():
    ex_rk = spec.BasicPublish(exchange="ex", routing_key="rk")
    args = ex_rk.encode()[4:]
    plain, persistent = b"\x00\x00", b"\x10\x00\x02"
    run = [(plain, b"a"), (plain, b"bb"), (persistent, b""), (persistent, b"dddd"), (plain, b"e")]
    data = b"".join(mframe(1, ex_rk) + header_frame(1, len(body), props) + (body_frame(1, body) if body else b"")
                    for props, body in run)
    channel, a, props, bodies, after = take_publishes(bytearray(data), 0, FRAME_MAX, 100, None, b"", 50)
    assert (channel, a, props, bodies, after) == (1, args, [p for p, _ in run], [b for _, b in run], len(data))
    assert props[0] is props[1] and props[2] is props[3] and props[0] is not props[4]  # equal neighbours shared
    last_props = bytes(plain)
    _, a2, props2, _, _ = take_publishes(data, 0, FRAME_MAX, 100, args, last_props, 50)
    assert a2 is args and props2[0] is last_props
    # the limit, and a cut anywhere: the whole publishes before the cut, or None
    for limit in range(1, 7):
        assert bodies_of(take_publishes(data, 0, FRAME_MAX, 100, None, b"", limit)) == [b for _, b in run][:limit]
    # a run of one is take_publish's own answer (no lists: the single publish pays nothing more)
    assert take_publishes(data, 0, FRAME_MAX, 100, None, b"", 1) == take_publish(data, 0, FRAME_MAX, 100, None, b"")
    ends = [0]
    for props_, body in run:
        ends.append(ends[-1] + len(mframe(1, ex_rk) + header_frame(1, len(body), props_)) + (8 + len(body) if body else 0))
    for cut in range(len(data)):
        got = take_publishes(data[:cut], 0, FRAME_MAX, 100, None, b"", 50)
        whole = sum(1 for e in ends[1:] if e <= cut)
        assert (got is None) if whole == 0 else (bodies_of(got) == [b for _, b in run][:whole] and got[4] == ends[whole])
    # it stops before another channel, other method arguments, a body over max_body, a malformed list
    tail = mframe(1, ex_rk) + header_frame(1, 1, plain) + body_frame(1, b"z")
    for stop in (mframe(2, ex_rk) + header_frame(2, 1, plain) + body_frame(2, b"z"),
                 mframe(1, spec.BasicPublish(exchange="ex", routing_key="other")) + header_frame(1, 1, plain)
                 + body_frame(1, b"z"),
                 mframe(1, ex_rk) + header_frame(1, 101, plain) + body_frame(1, b"z" * 101),
                 mframe(1, ex_rk) + header_frame(1, 1, b"\x80\x00\x05ab") + body_frame(1, b"z"),
                 mframe(1, spec.BasicQos(0, 1, False))):
        got = take_publishes(tail + stop + tail, 0, FRAME_MAX, 100, None, b"", 50)
        assert got == take_publish(tail, 0, FRAME_MAX, 100, None, b"")


@needs_speedups
def test_an_unread_run_comes_back_first_unless_its_channel_closed_meanwhile():
    """The session hands back the rest of a run that flow control stopped (adapter.py): the
    connection returns it before anything else, and drops it once its channel is gone."""
    m = spec.BasicPublish(exchange="", routing_key="q")
    one = mframe(1, m) + header_frame(1, 1) + body_frame(1, b"x")
    p = Peer(frame_max=FRAME_MAX, channel_max=16)
    p.handshake(channel_max=16, frame_max=FRAME_MAX)
    p.open_channel(1)
    p.conn.publish_run_max = 50
    p.conn.receive_data(one * 3)
    run = p.conn.next_event()
    assert isinstance(run, Publishes) and run.bodies == [b"x"] * 3
    p.conn.receive_data(one)
    rest = Publishes(1, run.method, run.properties[1:], run.bodies[1:])
    p.conn.unread(rest)
    assert p.conn.next_event() is rest
    assert isinstance(p.conn.next_event(), Content) and p.conn.next_event() is None
    p.conn.unread(rest)
    p.conn.close_channel(1, PreconditionFailed("gone"))
    assert p.conn.next_event() is None


# --- the differential test ------------------------------------------------------------------------

PUBLISHES = [spec.BasicPublish(exchange="ex", routing_key="rk"), spec.BasicPublish(exchange="", routing_key="q"),
             spec.BasicPublish(exchange="ex", routing_key="rk", mandatory=True)]
PROPERTIES = [b"\x00\x00", b"\x10\x00\x02", b"\x90\x00\x0atext/plain\x01"]
MALFORMED_PROPERTIES = list(REFUSED.values())


@st.composite
def pieces(draw) -> bytes:
    """One piece of a stream: mostly whole publishes, sometimes something the C path must refuse."""
    channel = draw(st.sampled_from([1, 1, 1, 2, 3]))  # 3 is never opened
    method = draw(st.sampled_from(PUBLISHES))
    props = draw(st.one_of(st.sampled_from(PROPERTIES), st.sampled_from(MALFORMED_PROPERTIES + list(TAKEN.values())),
                           hostile_lists))
    body = draw(st.binary(max_size=40))
    kind = draw(st.sampled_from(["publish"] * 6 + ["run"] * 3 + ["split-body", "bad-end", "cut", "other-channel-header",
                                                    "heartbeat", "qos", "header-class", "oversize", "garbage",
                                                    "long-body", "short-header"]))
    publish = mframe(channel, method)
    header = header_frame(channel, len(body), props)
    bodyf = body_frame(channel, body) if body else b""
    if kind == "publish":
        return publish + header + bodyf
    if kind == "run":  # a publisher streaming: the same method, several messages
        return b"".join(publish + header_frame(channel, len(b), props) + (body_frame(channel, b) if b else b"")
                        for b in draw(st.lists(st.binary(max_size=20), min_size=2, max_size=5)))
    if kind == "split-body" and len(body) > 1:
        return publish + header + body_frame(channel, body[:1]) + body_frame(channel, body[1:])
    if kind == "bad-end":
        whole = bytearray(publish + header + bodyf)
        whole[draw(st.integers(0, len(whole) - 1))] ^= 0xFF
        return bytes(whole)
    if kind == "cut":
        whole = publish + header + bodyf
        return whole[:draw(st.integers(0, len(whole)))]
    if kind == "other-channel-header":
        return publish + header_frame(channel % 2 + 1, len(body), props) + bodyf
    if kind == "heartbeat":
        return frame(FRAME_HEARTBEAT, 0, b"")
    if kind == "qos":
        return mframe(channel, spec.BasicQos(0, 10, False))
    if kind == "header-class":
        return publish + header_frame(channel, len(body), props, class_id=50) + bodyf
    if kind == "oversize":
        return publish + header + body_frame(channel, b"x" * FRAME_MAX)
    if kind == "long-body":
        return publish + header_frame(channel, len(body), props) + body_frame(channel, body + b"!")
    if kind == "short-header":
        return publish + frame(2, channel, struct.pack(">HHI", 60, 0, 0))
    return draw(st.binary(max_size=12))


def fed_in_chunks(data: bytes, chunks: list[int], run_max: int = 0):
    """The events of a connection (channels 1 and 2 open) fed data in chunks, one by one as
    next_event gives them; an AMQPError as ("error", name, code, channel)."""
    p = Peer(frame_max=FRAME_MAX, channel_max=16)
    p.handshake(channel_max=16, frame_max=FRAME_MAX)
    p.open_channel(1)
    p.open_channel(2)
    if run_max:
        p.conn.publish_run_max = run_max
    pos = 0
    for n in chunks + [len(data)]:
        p.conn.receive_data(data[pos:pos + n])
        pos += n
        while True:
            try:
                event = p.conn.next_event()
            except AMQPError as e:
                yield ("error", type(e).__name__, e.reply_code, e.channel)
                continue
            if event is None:
                break
            yield event
        if pos >= len(data):
            break


def other(event) -> tuple:
    return event if isinstance(event, tuple) else (type(event).__name__, getattr(event, "channel", None),
                                                   getattr(event, "method", None))


def run(data: bytes, chunks: list[int], compiled: bool, run_max: int = 0):
    """The events of a connection fed data in chunks; a Publishes run is written as the
    Contents it stands for."""
    saved = connection_module._take_publish
    saved_run = connection_module._take_publishes
    saved_check = connection_module._properties_error
    connection_module._take_publish = saved if compiled else None
    connection_module._take_publishes = saved_run if compiled else None
    connection_module._properties_error = saved_check if compiled else py_properties_error
    try:
        out = []
        for event in fed_in_chunks(data, chunks, run_max):
            if isinstance(event, Content):
                out.append(("content", event.channel, event.method, event.properties, bytes(event.body)))
            elif isinstance(event, Publishes):
                assert 1 < len(event.bodies) <= run_max
                out.extend(("content", event.channel, event.method, props, bytes(body))
                           for props, body in zip(event.properties, event.bodies))
            else:
                out.append(other(event))
        return out
    finally:
        connection_module._take_publish = saved
        connection_module._take_publishes = saved_run
        connection_module._properties_error = saved_check


@needs_speedups
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces(), max_size=12), st.lists(st.integers(1, 200), max_size=6))
def test_compiled_and_pure_python_paths_give_the_same_events(parts, chunks):
    data = b"".join(parts)
    assert run(data, chunks, compiled=True) == run(data, chunks, compiled=False)


@needs_speedups
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces(), max_size=12), st.lists(st.integers(1, 200), max_size=6), st.integers(1, 4))
def test_runs_of_publishes_are_the_same_events_as_one_by_one(parts, chunks, run_max):
    """With runs (the broker's sessions ask for them) the same publishes, errors and other
    events come out, in the same order, as from the pure-Python path one by one."""
    data = b"".join(parts)
    assert run(data, chunks, compiled=True, run_max=run_max) == run(data, chunks, compiled=False)


@needs_speedups
@settings(max_examples=500, deadline=None)
@given(hostile_lists, st.binary(max_size=6), st.binary(max_size=6))
def test_compiled_and_pure_python_property_checks_give_the_same_verdict(props, before, after):
    buf = bytearray(before + props + after)
    start, end = len(before), len(before) + len(props)
    assert (c_properties_error(buf, start, end) is None) == (py_properties_error(buf, start, end) is None)
    assert (c_properties_error(props, 0, len(props)) is None) == (py_properties_error(props) is None)


@needs_speedups
@pytest.mark.parametrize("props", list(REFUSED.values()), ids=list(REFUSED))
def test_take_publish_leaves_a_malformed_property_list_to_the_python_path(props):
    data = mframe(1, spec.BasicPublish()) + header_frame(1, 2, props) + body_frame(1, b"hi")
    assert take_publish(data, 0, FRAME_MAX, 100, None, b"") is None
    assert c_properties_error(props, 0, len(props)) is not None


@needs_speedups
def test_the_compiled_check_refuses_bounds_outside_the_buffer():
    for start, end in ((-1, 2), (0, 9), (3, 2)):
        with pytest.raises(ValueError):
            c_properties_error(b"\x00\x00", start, end)


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(channel=st.integers(1, 65535), tag=st.integers(0, 2**64 - 1), redelivered=st.booleans(),
       names=st.lists(st.binary(max_size=255), min_size=3, max_size=3),
       properties=st.sampled_from(PROPERTIES + [b"\x00\x00", b"\x20\x00" + struct.pack(">I", 3) + b"abc"]),
       body=st.one_of(st.binary(min_size=1, max_size=64), st.integers(1, 16384).map(lambda n: b"b" * n)),
       as_bytearray=st.booleans())
def test_compiled_and_pure_python_deliveries_are_the_same_octets(channel, tag, redelivered, names, properties, body,
                                                                 as_bytearray):
    tag_ss, exchange_ss, routing_key_ss = (bytes((len(n),)) + n for n in names)
    if as_bytearray:
        body = bytearray(body)
    out = []
    saved = connection_module._deliver_frames
    try:
        for compiled in (True, False):
            connection_module._deliver_frames = saved if compiled else None
            p = Peer(frame_max=32768, channel_max=0)
            p.conn.data_to_send()
            p.conn.send_deliver(channel, tag_ss, tag, redelivered, exchange_ss, routing_key_ss, properties, body)
            out.append(b"".join(bytes(x) for x in p.conn.data_to_send()))
    finally:
        connection_module._deliver_frames = saved
    assert out[0] == out[1]


# --- runs of basic.ack (take_acks, warren/codec/acks.py) ------------------------------------------

from warren.codec.acks import take_acks as c_take_acks, take_acks_py  # noqa: E402
from warren.protocol.events import Acks, Method  # noqa: E402


def ack_frame(channel: int, tag: int, multiple: bool = False) -> bytes:
    return mframe(channel, spec.BasicAck(tag, multiple))


@needs_speedups
def test_take_acks_takes_a_run_of_single_acks_on_one_channel():
    data = bytearray(ack_frame(1, 5) + ack_frame(1, 6) + ack_frame(1, 7, True) + ack_frame(2, 8) + ack_frame(2, 9))
    n = len(ack_frame(1, 5))
    assert c_take_acks(data, 0, FRAME_MAX, 50) == (1, [5, 6], False, 2 * n)  # stops before a multiple
    assert c_take_acks(data, 2 * n, FRAME_MAX, 50) == (1, 7, True, 3 * n)  # a multiple ack: alone
    assert c_take_acks(data, 3 * n, FRAME_MAX, 50) == (2, [8, 9], False, 5 * n)
    assert c_take_acks(data, 0, FRAME_MAX, 1) == (1, 5, False, n)  # a run of one: no list
    assert c_take_acks(data, 1, FRAME_MAX, 50) is None
    assert c_take_acks(data, 0, n - 1, 50) is None  # over frame_max
    for cut in range(n):
        assert c_take_acks(data[:cut], 0, FRAME_MAX, 50) is None
    assert c_take_acks(mframe(1, spec.BasicNack(5, False, True)), 0, FRAME_MAX, 50) is None


def ack_pieces():
    """Octets around acks: single and multiple acks on two channels, nacks, acks with a wrong
    frame-end or a longer payload, frames cut short, heartbeats."""
    tag = st.integers(0, 2**64 - 1)
    return st.one_of(
        st.builds(ack_frame, st.sampled_from([1, 1, 1, 2]), tag, st.booleans()),
        st.builds(lambda c, t: frame(FRAME_METHOD, c, spec.BasicAck(t, False).encode(), end=0xCD), st.just(1), tag),
        st.builds(lambda c, t: frame(FRAME_METHOD, c, spec.BasicAck(t, False).encode() + b"\x00"), st.just(1), tag),
        st.builds(lambda c, t, k: frame(FRAME_METHOD, c, spec.BasicAck(t, False).encode()[:k]), st.just(1), tag,
                  st.integers(0, 12)),
        st.builds(lambda t: mframe(1, spec.BasicNack(t, False, True)), tag),
        st.just(frame(FRAME_HEARTBEAT, 0, b"")),
        st.binary(max_size=8),
    )


@needs_speedups
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ack_pieces(), max_size=12), st.integers(0, 30), st.integers(0, 300), st.integers(1, 5))
def test_take_acks_is_its_python_twin(parts, pos, frame_max, limit):
    data = bytearray(b"".join(parts))
    assert c_take_acks(data, pos, frame_max, limit) == take_acks_py(data, pos, frame_max, limit)


def ack_events(data: bytes, chunks: list[int], compiled: bool) -> list:
    """The events of a connection fed data in chunks, an Acks run written as the basic.ack
    Methods it stands for; errors as (code, channel)."""
    saved = connection_module._take_acks
    connection_module._take_acks = saved if compiled else None
    try:
        out = []
        for event in fed_in_chunks(data, chunks):
            if isinstance(event, Acks):
                assert compiled and len(event.tags) > 1
                out.extend(("ack", event.channel, tag, False) for tag in event.tags)
            elif isinstance(event, Method) and isinstance(event.method, spec.BasicAck):
                out.append(("ack", event.channel, event.method.delivery_tag, event.method.multiple))
            else:
                out.append(other(event))
        return out
    finally:
        connection_module._take_acks = saved


@needs_speedups
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ack_pieces(), max_size=12), st.lists(st.integers(1, 60), max_size=6))
def test_runs_of_acks_are_the_same_events_as_one_by_one(parts, chunks):
    data = b"".join(parts)
    assert ack_events(data, chunks, compiled=True) == ack_events(data, chunks, compiled=False)


# --- hand-over batches between worker processes (warren/codec/handover.py) ----------------------

from warren.broker.message import Message  # noqa: E402
from warren.codec import handover  # noqa: E402

HANDOVER_DEFAULTS = (("_decoded", None), ("_record", None))


class Routed:
    """What the sending worker hands to encode_batch: a Message's attributes, any property octets."""
    __slots__ = ("exchange_ss", "routing_key_ss", "properties", "body", "persistent", "ttl")

    def __init__(self, exchange: str, routing_key: str, properties: bytes, body: bytes, persistent: bool, ttl):
        self.exchange_ss = _ss(exchange)
        self.routing_key_ss = _ss(routing_key)
        self.properties, self.body, self.persistent, self.ttl = properties, body, persistent, ttl


def _ss(name: str) -> bytes:
    b = name.encode("utf-8", "surrogateescape")
    return bytes((len(b),)) + b


# names as the codec decodes them from the wire: any octets (surrogateescape), up to 40 of them
handover_names = st.one_of(st.sampled_from(["", "amq.direct", "q", "caf\u00e9"]),
                           st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")))
routed_messages = st.builds(
    Routed, handover_names, handover_names,
    st.one_of(st.sampled_from([b"\x00\x00", b"\x10\x00\x02"]), st.binary(max_size=30)),
    st.binary(max_size=200), st.booleans(),
    st.one_of(st.none(), st.integers(0, 2**40).map(lambda ms: ms / 1000), st.floats(0, 1e16)))
handover_dests = st.tuples(handover_names, st.lists(handover_names, min_size=1, max_size=3).map(tuple))


@st.composite
def handover_batches(draw):
    msgs = draw(st.lists(routed_messages, max_size=8))
    pool = draw(st.lists(handover_dests, min_size=1, max_size=3))
    dests = [draw(st.sampled_from(pool)) for _ in msgs]
    mandatory = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=len(msgs), max_size=len(msgs))))
    return draw(st.integers(0, 2**64 - 1)), msgs, dests, mandatory


def handover_outcome(take, data, pos: int, cls):
    """What a taker makes of data, comparable across the twins: items as their slot values, or
    the exception's type and text; and the names it asked resolve_name for, in order."""
    asked = []

    def resolve_name(shortstr):
        asked.append(shortstr)
        return handover.plain_name(shortstr)
    try:
        got = take(data, pos, cls, HANDOVER_DEFAULTS, resolve_name, lambda vhost, queues: ("dest", vhost, queues))
    except (ValueError, TypeError) as e:
        return ("error", type(e).__name__, str(e)), asked
    if got is None:
        return None, asked
    items, dests, flags, ticket, after = got
    if cls is not None:
        items = [tuple(getattr(m, s) for s in Message.__slots__) for m in items]
    return (items, dests, flags, ticket, after), asked


@needs_speedups
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(handover_batches())
def test_compiled_and_python_hand_over_batches_are_the_same_octets_and_messages(batch):
    ticket, msgs, dests, mandatory = batch
    data = handover.encode_batch(ticket, msgs, dests, mandatory)
    assert data == handover.encode_batch_py(ticket, msgs, dests, mandatory)
    for cls in (None, Message):
        c = handover_outcome(handover.take_batch, data, 0, cls)
        assert c == handover_outcome(handover.take_batch_py, data, 0, cls)
    items, got_dests, flags, first, after = handover.take_batch(data, 0, Message, HANDOVER_DEFAULTS)
    assert (first, after, got_dests) == (ticket, len(data), dests)
    for msg, sent, f in zip(items, msgs, flags):
        assert (msg.exchange_ss, msg.routing_key_ss, msg.properties, msg.body, msg.persistent) == \
            (sent.exchange_ss, sent.routing_key_ss, sent.properties, sent.body, sent.persistent)
        assert msg.ttl == (None if sent.ttl is None else round(sent.ttl * 1000) / 1000)
        assert bool(f & handover.MANDATORY) == bool(mandatory and mandatory[msgs.index(sent)])


@needs_speedups
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(handover_batches(), st.binary(max_size=6), st.binary(max_size=6),
       st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4), st.integers(-1, 400),
       st.sampled_from([None, Message]))
def test_compiled_and_python_hand_over_takers_agree_on_damaged_batches(batch, before, after, flips, cut, cls):
    """Octets changed, a batch cut anywhere, junk on either side: both twins give the same items,
    None, or the same error; had the compiled one read past its batch into the junk after it,
    or anywhere it should not, it would disagree with the Python one (which cannot)."""
    data = bytearray(handover.encode_batch_py(*batch))
    for at, octet in flips:
        if at < len(data):
            data[at] = octet
    if 0 <= cut < len(data):
        del data[cut:]
    stream = bytes(before + data + after)
    assert handover_outcome(handover.take_batch, stream, len(before), cls) == \
        handover_outcome(handover.take_batch_py, stream, len(before), cls)


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60), st.integers(0, 4))
def test_compiled_and_python_hand_over_takers_agree_on_any_octets(data, pos):
    framed = len(data).to_bytes(4, "big") + b"\x01\x00" + data  # past the size and version checks
    for octets in (data, framed):
        assert handover_outcome(handover.take_batch, octets, pos, Message) == \
            handover_outcome(handover.take_batch_py, octets, pos, Message)


# --- a persistent message's store record (warren/store/message.py) ------------------------------

from warren.store import message as store_message  # noqa: E402


@pytest.mark.skipif(store_message.append_message_record is store_message.append_message_record_py,
                    reason="warren.store._records is not built (setup.py)")
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1), st.binary(max_size=256), st.binary(max_size=256), st.binary(max_size=300),
       st.binary(max_size=3000), st.binary(max_size=20))
def test_message_records_framed_from_parts_are_their_python_twins(seq, exchange_ss, routing_key_ss, properties,
                                                                  body, before):
    """A persistent message's store record from its parts (QueueStore.append): the same octets as
    the Python twin, which frames the record encode_message_ss joins."""
    compiled, python = bytearray(before), bytearray(before)
    assert store_message.append_message_record(compiled, seq, exchange_ss, routing_key_ss, properties,
                                               memoryview(body)) == \
        store_message.append_message_record_py(python, seq, exchange_ss, routing_key_ss, properties, body)
    assert compiled == python


# --- the messages of a run of publishes (warren/broker/message.py) ------------------------------

import gc  # noqa: E402

from tests.codec.test_properties import valid_lists  # noqa: E402
from warren.broker import message as message_module  # noqa: E402

run_names = st.sampled_from(["", "amq.direct", "q", "caf\u00e9"])


@st.composite
def runs_of_publishes(draw):
    """(properties, bodies) of a run: property lists drawn from a small pool, so that equal
    lists are often one object (as the compiled take_publishes hands them), whole ones with
    and without delivery-mode and cut or odd ones among them."""
    pool = draw(st.lists(st.one_of(valid_lists, hostile_lists, st.sampled_from(
        [b"\x00\x00", b"\x10\x00\x02", b"\x10\x00\x01", b"\x90\x00\x03abc\x02", b"\x30\x00\x00\x00\x00\x00\x02",
         b"\x10\x00", b"\x90\x00\x05ab", b"\x30\x00\x00\x00\x00\x09\x02"])), min_size=1, max_size=4))
    props = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=10))
    bodies = [draw(st.binary(max_size=8)) for _ in props]
    return props, bodies


def cloned(clone, exchange: str, routing_key: str, props: list, bodies: list):
    """What a clone_messages twin makes of a run: each message's slots, or None."""
    try:
        template = message_module.Message(exchange, routing_key, props[0], bodies[0])
    except AMQPError:
        return "first refused"  # the caller's Message(...) reports a cut first list
    out = clone(template, props, bodies)
    if out is None:
        return None
    assert out[0] is template and not any(gc.is_tracked(m) for m in out)
    return [tuple(getattr(m, name, "<unset>") for name in message_module.Message.__slots__) for m in out]


@needs_speedups
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs_of_publishes(), run_names, run_names)
def test_clone_messages_is_its_python_twin(run, exchange, routing_key):
    """The compiled clone_messages and clone_messages_py make the same Messages (every slot,
    persistent read from each list's own delivery-mode), all untracked, or both None for a run
    with a cut list after the first; and each equals what Message(...) makes of its publish."""
    props, bodies = run
    compiled = cloned(message_module._clone_messages, exchange, routing_key, props, bodies)
    assert compiled == cloned(message_module.clone_messages_py, exchange, routing_key, props, bodies)
    if isinstance(compiled, list):
        alone = [message_module.Message(exchange, routing_key, p, b) for p, b in zip(props, bodies)]
        assert compiled == [tuple(getattr(m, name) for name in message_module.Message.__slots__) for m in alone]


@needs_speedups
def test_clone_messages_refuses_what_it_cannot_copy():
    class Loose:  # attributes in a __dict__: nothing to copy slot by slot
        pass
    with pytest.raises(TypeError):
        message_module._clone_messages(Loose(), [b"\x00\x00"], [b""])
    template = message_module.Message("", "q", b"\x00\x00", b"")
    with pytest.raises(TypeError):
        message_module._clone_messages(template, [b"\x00\x00"], [b"", b""])  # lengths differ
    with pytest.raises(TypeError):
        message_module._clone_messages(template, [b"\x00\x00", bytearray(b"\x00\x00")], [b"", b""])
