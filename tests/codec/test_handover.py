"""The hand-over batch (warren/codec/handover.py): what the worker that owns a queue gets from
the worker that routed the message. Every test runs with the Python twins and, where
``_speedups`` is built, the compiled ones (tests/protocol/test_speedups.py compares the two on
generated input); the items are the broker's own ``Message`` objects."""

from __future__ import annotations

import struct

import pytest

from warren.broker.message import Message, shared_name
from warren.codec import handover
from warren.codec.handover import MANDATORY, PERSISTENT, TTL

COMPILED = handover.take_batch is not handover.take_batch_py
TAKERS = [pytest.param(handover.take_batch_py, id="python")]
ENCODERS = [pytest.param(handover.encode_batch_py, id="python")]
if COMPILED:
    TAKERS.append(pytest.param(handover.take_batch, id="compiled"))
    ENCODERS.append(pytest.param(handover.encode_batch, id="compiled"))

# the Message slots a batch does not carry: what Message.__init__ starts them as
DEFAULTS = (("_decoded", None), ("_record", None))
PERSISTENT_PROPS = b"\x10\x00\x02"  # delivery-mode 2
PLAIN_PROPS = b"\x00\x00"


def resolve_name(shortstr: bytes) -> tuple[str, bytes]:
    return shared_name(str(shortstr[1:], "utf-8", "surrogateescape"))


def message(exchange: str, routing_key: str, props: bytes, body: bytes, ttl: float | None = None) -> Message:
    msg = Message(exchange, routing_key, props, body)
    msg.ttl = ttl
    return msg


def slots(msg) -> dict:
    return {name: getattr(msg, name) for name in Message.__slots__}


def sample():
    """Three messages, two destinations, one with a TTL, one mandatory."""
    msgs = [message("ex", "rk", PERSISTENT_PROPS, b"hello"), message("", "q", PLAIN_PROPS, b"", ttl=1.5),
            message("ex", "rk", PERSISTENT_PROPS, b"x" * 3000)]
    dests = [("/", ("q1",)), ("/", ("q", "q2")), ("/", ("q1",))]
    return msgs, dests, [False, True, False]


def test_message_slots_are_what_the_batch_sets_or_defaults():
    """A new Message slot must be carried (MESSAGE_SLOTS) or given a default by the owner."""
    assert set(Message.__slots__) == set(handover.MESSAGE_SLOTS) | {name for name, _ in DEFAULTS}


@pytest.mark.parametrize("encode", ENCODERS)
@pytest.mark.parametrize("take", TAKERS)
def test_the_owner_gets_the_messages_the_sender_routed(encode, take):
    msgs, dests, mandatory = sample()
    data = encode(41, msgs, dests, mandatory)
    resolved = []

    def resolve_destination(vhost, queues):
        resolved.append((vhost, queues))
        return [f"queue object {q}" for q in queues]

    items, where, flags, first_ticket, after = take(data + b"next", 0, Message, DEFAULTS, resolve_name,
                                                    resolve_destination, True)
    assert after == len(data) and first_ticket == 41
    assert [slots(m) for m in items] == [slots(m) for m in msgs]
    assert all(type(m) is Message for m in items)
    assert items[0].exchange is shared_name("ex")[0] and items[0].routing_key_ss is shared_name("rk")[1]
    assert items[0].properties is items[2].properties  # one object per distinct property list
    assert resolved == [("/", ("q1",)), ("/", ("q", "q2"))]  # once per destination of the batch
    assert where == [["queue object q1"], ["queue object q", "queue object q2"], ["queue object q1"]]
    assert where[0] is where[2]
    assert flags == bytes((PERSISTENT, MANDATORY | TTL, PERSISTENT))
    # what a queue does with them works as with a Message made by the publishing worker
    assert items[0].record == msgs[0].record and items[0].decoded.delivery_mode == 2 and items[1].headers == {}


@pytest.mark.parametrize("take", TAKERS)
def test_without_a_class_the_items_are_parts(take):
    msgs, dests, mandatory = sample()
    data = handover.encode_batch_py(1, msgs, dests, None)
    items, where, flags, first_ticket, after = take(data, 0)
    assert items == [(m.exchange, m.routing_key, m.properties, m.body, m.ttl) for m in msgs]
    assert where == dests and flags == bytes((PERSISTENT, TTL, PERSISTENT)) and after == len(data)


@pytest.mark.parametrize("take", TAKERS)
def test_batches_follow_each_other_and_an_incomplete_one_waits(take):
    msgs, dests, mandatory = sample()
    one = handover.encode_batch_py(1, msgs[:2], dests[:2], mandatory[:2])
    two = handover.encode_batch_py(3, msgs[2:], dests[2:], mandatory[2:])
    stream = b"junk" + one + two
    got = take(stream, 4)
    assert got[3] == 1 and got[4] == 4 + len(one)
    got = take(stream, got[4])
    assert got[3] == 3 and got[4] == len(stream) and got[0][0][3] == b"x" * 3000
    for cut in range(len(one)):  # every prefix of a batch: wait for more
        assert take(one[:cut], 0) is None
    assert take(one, len(one) + 5) is None and take(one, -1) is None


@pytest.mark.parametrize("take", TAKERS)
def test_an_empty_batch_and_unicode_names(take):
    assert take(handover.encode_batch_py(9, [], []), 0)[:4] == ([], [], b"", 9)
    odd = "caf\u00e9-\udcff"  # non-UTF-8 octets from the wire survive (surrogateescape)
    data = handover.encode_batch_py(1, [message(odd, odd, PLAIN_PROPS, b"b")], [(odd, (odd,))])
    items, where, *_ = take(data, 0, Message, DEFAULTS)
    assert items[0].exchange == odd and items[0].exchange_ss == b"\x07caf\xc3\xa9-\xff" and where == [(odd, (odd,))]


def batch(*, names=(b"\x01a",), props=(PLAIN_PROPS,), dests=(b"\x00\x00\x00\x01\x00\x00",), messages=None,
          count=None, version=1, reserved=0, tail=b"") -> bytes:
    """A batch put together by hand, to break it on purpose."""
    if messages is None:
        messages = [struct.pack(">BHHHHI", 0, 0, 0, 0, 0, 2) + b"ok"]
    head = struct.pack(">BBHHHIQ", version, reserved, len(names), len(props), len(dests),
                       len(messages) if count is None else count, 1)
    payload = head + b"".join(names) + b"".join(struct.pack(">I", len(p)) + p for p in props) + b"".join(dests) \
        + b"".join(messages) + tail
    return struct.pack(">I", len(payload)) + payload


def patched(data: bytes, at: int, octets: bytes) -> bytes:
    return data[:at] + octets + data[at + len(octets):]


MALFORMED = {
    "version": (batch(version=2), "version 2"),
    "reserved": (batch(reserved=1), "reserved 1"),
    "octets after the last message": (batch(tail=b"!!"), "2 octets after the last message"),
    "more messages than octets": (batch(count=1000), "runs past the end"),
    "a body past the batch": (batch(messages=[struct.pack(">BHHHHI", 0, 0, 0, 0, 0, 50) + b"ok"]), "runs past"),
    "a TTL cut short": (batch(messages=[struct.pack(">BHHHH", TTL, 0, 0, 0, 0) + b"\x00" * 6]), "runs past"),
    "unknown flags": (batch(messages=[struct.pack(">BHHHHI", 0x80, 0, 0, 0, 0, 0)]), "unknown message flags 0x80"),
    "exchange past the names": (batch(messages=[struct.pack(">BHHHHI", 0, 1, 0, 0, 0, 0)]), "past its batch's"),
    "properties past the table": (batch(messages=[struct.pack(">BHHHHI", 0, 0, 0, 1, 0, 0)]), "past its batch's"),
    "destination past the table": (batch(messages=[struct.pack(">BHHHHI", 0, 0, 0, 0, 1, 0)]), "past its batch's"),
    "a destination without queues": (batch(dests=(b"\x00\x00\x00\x00",)), "names no queue"),
    "a queue past the names": (batch(dests=(b"\x00\x00\x00\x01\x00\x07",)), "refers past the name table"),
    "a name past the batch": (batch(names=(b"\xffabc",), messages=[]), "runs past the end"),
    "a property list past the batch": (patched(batch(props=(), dests=(), messages=[], tail=b"\x00\x00\x01\x00ab"),
                                               8, b"\x00\x01"), "runs past the end"),
    "shorter than its header": (b"\x00\x00\x00\x03abc", "runs past the end"),
}


@pytest.mark.parametrize("take", TAKERS)
@pytest.mark.parametrize("data, why", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_batch_is_a_clear_error(take, data, why):
    with pytest.raises(ValueError, match="^handover batch: .*" + why.replace("(", r"\(")):
        take(data, 0, Message, DEFAULTS)


@pytest.mark.parametrize("take", TAKERS)
def test_a_table_count_past_the_batch_is_an_error(take):
    data = patched(batch(), 8, b"\x00\x09")  # nine property lists claimed, one there
    with pytest.raises(ValueError, match="runs past the end"):
        take(data, 0)


@pytest.mark.parametrize("take", TAKERS)
def test_resolve_name_must_answer_a_pair(take):
    with pytest.raises(TypeError, match="resolve_name"):
        take(batch(), 0, Message, DEFAULTS, lambda ss: "not a pair")


@pytest.mark.parametrize("encode", ENCODERS)
def test_the_encoder_refuses_what_the_format_cannot_hold(encode):
    msgs, dests, mandatory = sample()
    with pytest.raises(ValueError, match="same length"):
        encode(1, msgs, dests[:2])
    with pytest.raises(ValueError, match="same length"):
        encode(1, msgs, dests, [True])
    with pytest.raises(ValueError, match="255 octets"):
        encode(1, msgs[:1], [("/", ("q" * 256,))])
    with pytest.raises(ValueError, match="1 to 65535 queues"):
        encode(1, msgs[:1], [("/", ())])
    with pytest.raises(ValueError, match="ttl out of range"):
        encode(1, [message("", "q", PLAIN_PROPS, b"", ttl=float("nan"))], [("/", ("q",))])
    bad = message("", "q", PLAIN_PROPS, b"")
    bad.exchange_ss = b"\x05ab"  # not a shortstr
    with pytest.raises(ValueError, match="shortstr"):
        encode(1, [bad], [("/", ("q",))])


@pytest.mark.parametrize("encode", ENCODERS)
def test_more_distinct_names_than_a_batch_can_index_is_an_error(encode):
    """65,535 entries per table: the sender sends such a run as two batches."""
    one = message("", "q", PLAIN_PROPS, b"")
    dests = [("/", (f"q{i}",)) for i in range(65_535)]  # with "/": 65,536 names
    with pytest.raises(ValueError, match="65535"):
        encode(1, [one] * len(dests), dests)
    assert len(encode(1, [one] * 1000, dests[:1000])) > 1000


class Plain:
    """Attributes in a __dict__, one a property: the compiled encoder reads them with getattr."""

    def __init__(self, msg: Message):
        self.exchange_ss, self.routing_key_ss, self.body = msg.exchange_ss, msg.routing_key_ss, msg.body
        self.persistent, self.ttl, self._props = msg.persistent, msg.ttl, msg.properties

    @property
    def properties(self):
        return self._props


@pytest.mark.parametrize("encode", ENCODERS)
def test_the_encoder_reads_any_object_with_the_attributes(encode):
    msgs, dests, mandatory = sample()
    mixed = [Plain(msgs[0]), msgs[1], Plain(msgs[2])]  # the class changes from message to message
    assert encode(1, mixed, dests, mandatory) == handover.encode_batch_py(1, msgs, dests, mandatory)
    empty = Message.__new__(Message)  # a slot never set
    with pytest.raises(AttributeError):
        encode(1, [msgs[0], empty], dests[:2])
