"""Dead-letter message rewriting (warren.broker.dead_letter): the x-death header as RabbitMQ 3.10
writes it, untouched headers kept byte for byte, the cycle rule; and dead-lettering through a
virtual host model (no server) for each reason."""

from __future__ import annotations

import datetime

from warren.broker.dead_letter import _is_cycle, make_dead_letter, with_header
from warren.broker.message import Message
from warren.broker.vhost import VirtualHost
from warren.spec.fields import Long, decode_table
from warren.spec.amqp0_9_1 import BasicProperties


def message(rk="rk", exchange="ex", **props) -> Message:
    return Message(exchange, rk, BasicProperties(**props).encode(), b"body")


def decode(properties: bytes) -> BasicProperties:
    return BasicProperties.decode(properties, 0)[0]


def test_a_first_death_adds_x_death_and_the_first_death_headers():
    props, keys, deaths = make_dead_letter(message(headers={"a": "b"}), "rejected", "q1", None)
    p = decode(props)
    [d] = p.headers["x-death"]
    assert list(d) == ["count", "reason", "queue", "time", "exchange", "routing-keys"]  # RabbitMQ's order
    assert (d["count"], d["reason"], d["queue"], d["exchange"], d["routing-keys"]) == (1, "rejected", "q1", "ex", ["rk"])
    assert isinstance(d["time"], datetime.datetime)
    assert p.headers["x-first-death-queue"] == "q1"
    assert p.headers["x-first-death-reason"] == "rejected"
    assert p.headers["x-first-death-exchange"] == "ex"
    assert list(p.headers) == sorted(p.headers)  # RabbitMQ sorts the table it rewrites
    assert keys == ["rk"] and deaths[0]["queue"] == "q1"


def test_the_count_is_written_as_a_signed_64_bit_long():
    props, _, _ = make_dead_letter(message(), "expired", "q", None)
    assert b"countl" + (1).to_bytes(8, "big") in props


def test_headers_nobody_changes_keep_their_wire_types():
    # 'b' (int8) and 'f' (float32) have no Python type of their own: a re-encode would change them
    table = b"\x01ab\xfe" + b"\x01ff\x3f\x80\x00\x00"
    props = (0x2000).to_bytes(2, "big") + len(table).to_bytes(4, "big") + table
    msg = Message("ex", "rk", props, b"")
    out, _, _ = make_dead_letter(msg, "rejected", "q", None)
    assert b"\x01ab\xfe" in out and b"\x01ff\x3f\x80\x00\x00" in out


def test_expiration_moves_into_the_death_record():
    props, _, _ = make_dead_letter(message(expiration="5000"), "expired", "q", None)
    p = decode(props)
    assert p.expiration is None
    assert p.headers["x-death"][0]["original-expiration"] == "5000"


def test_cc_keys_route_the_dead_letter_unless_a_routing_key_is_set():
    msg = message(headers={"CC": ["c1", "c2"]})
    props, keys, _ = make_dead_letter(msg, "rejected", "q", None)
    assert keys == ["rk", "c1", "c2"] and "CC" in decode(props).headers
    props, keys, deaths = make_dead_letter(msg, "rejected", "q", "dead")
    assert keys == ["dead"] and "CC" not in decode(props).headers
    assert deaths[0]["routing-keys"] == ["rk", "c1", "c2"]


def test_a_repeated_queue_and_reason_increments_and_moves_to_the_front():
    first, _, _ = make_dead_letter(message(), "expired", "q1", None)
    second, _, _ = make_dead_letter(Message("dlx", "rk", first, b""), "rejected", "q2", None)
    third, _, _ = make_dead_letter(Message("dlx", "rk", second, b""), "expired", "q1", None)
    p = decode(third)
    assert [(d["queue"], d["reason"], d["count"]) for d in p.headers["x-death"]] == [
        ("q1", "expired", 2), ("q2", "rejected", 1)]
    assert list(p.headers["x-death"][0]) == sorted(p.headers["x-death"][0])
    assert p.headers["x-death"][0]["exchange"] == "ex"  # the first death's exchange is kept
    assert p.headers["x-first-death-queue"] == "q1"


def test_cycles_are_automatic_only_without_a_rejection():
    deaths = [{"queue": "b", "reason": "expired"}, {"queue": "a", "reason": "expired"}]
    assert _is_cycle("a", deaths) and _is_cycle("b", deaths)
    assert not _is_cycle("c", deaths)
    deaths = [{"queue": "b", "reason": "rejected"}, {"queue": "a", "reason": "expired"}]
    assert not _is_cycle("a", deaths)
    assert not _is_cycle("a", ["client junk", {"queue": "a", "reason": "expired"}])


def test_with_header_adds_or_replaces_one_header_and_keeps_the_rest():
    msg = message(headers={"x": 1}, priority=4)
    out = with_header(msg, "x-delivery-count", Long(2))
    p = decode(out.properties)
    assert p.headers == {"x": 1, "x-delivery-count": 2} and p.priority == 4
    again = decode(with_header(out, "x-delivery-count", Long(3)).properties)
    assert list(again.headers) == ["x", "x-delivery-count"] and again.headers["x-delivery-count"] == 3


# --------------------------------------------------------------------------- through a vhost


def vhost_with_dlx():
    v = VirtualHost("/")
    v.declare_exchange("dlx", "fanout", False, False, False, False, {})
    catch = v.declare_queue(None, "catch", False, False, False, False, {})
    v.bind_queue(catch, "dlx", "", {})
    return v, catch


def test_reject_expire_and_overflow_dead_letter_through_the_vhost():
    v, catch = vhost_with_dlx()
    q = v.declare_queue(None, "src", False, False, False, False,
                        {"x-dead-letter-exchange": "dlx", "x-max-length": 1})
    q.publish(message(rk="src", exchange=""))
    q.publish(message(rk="src", exchange=""))  # drop-head: the first one goes, reason maxlen
    seq, msg, _, _ = q.take()
    q.reject(seq, msg)
    reasons = []
    while (entry := catch.take(no_ack=True)) is not None:
        reasons.append(entry[1].decoded.headers["x-death"][0]["reason"])
    assert reasons == ["maxlen", "rejected"]


def test_reject_publish_returns_refused_and_dlx_variant_dead_letters():
    from warren.broker.queues.length_limits import REFUSED
    v, catch = vhost_with_dlx()
    q = v.declare_queue(None, "rp", False, False, False, False,
                        {"x-dead-letter-exchange": "dlx", "x-max-length": 0, "x-overflow": "reject-publish-dlx"})
    assert q.publish(message()) == REFUSED
    assert catch.message_count == 1 and q.message_count == 0


# --------------------------------------------------------------------------- malformed property lists (issue 16)

def poisoned(**props) -> bytes:
    """An encoded property list whose headers table holds an unknown type letter (same length):
    what an older Warren stored, since it did not check lists at the edge."""
    good = BasicProperties(headers={"k": 1}, **props).encode()
    at = good.index(b"\x01kI")
    return good[:at + 2] + b"Z" + good[at + 3:]


def test_a_message_whose_headers_do_not_decode_is_dead_lettered_with_a_fresh_table(caplog):
    from warren.codec.properties import properties_error
    msg = Message("ex", "rk", poisoned(content_type="text/plain", delivery_mode=2, expiration="10"), b"body")
    with caplog.at_level("WARNING", logger="warren.dead_letter"):
        props, keys, deaths = make_dead_letter(msg, "expired", "q", None)
    assert properties_error(props) is None
    p = decode(props)
    assert (p.content_type, p.delivery_mode, p.expiration) == ("text/plain", 2, None)
    assert "k" not in p.headers and p.headers["x-death"][0]["reason"] == "expired"
    assert keys == ["rk"] and deaths[0]["queue"] == "q"
    assert "malformed property list" in caplog.text and "'q'" in caplog.text


def test_a_property_list_cut_short_is_dead_lettered_with_what_precedes_the_cut(caplog):
    msg = Message("ex", "rk", b"\x00\x00", b"body")
    msg.properties = b"\x90\x00\x03abc"  # content-type, then delivery-mode missing (Message() refuses it)
    with caplog.at_level("WARNING", logger="warren.dead_letter"):
        props, _, _ = make_dead_letter(msg, "rejected", "q", None)
    p = decode(props)
    assert p.content_type == "abc" and p.headers["x-death"][0]["count"] == 1
    assert "delivery-mode" in caplog.text


def test_no_malformed_message_vanishes_when_it_is_rejected_expired_or_dropped_through_the_vhost():
    v, catch = vhost_with_dlx()
    q = v.declare_queue(None, "src", False, False, False, False,
                        {"x-dead-letter-exchange": "dlx", "x-max-length": 1})
    q.publish(Message("", "src", poisoned(), b"one"))
    q.publish(Message("", "src", b"\x00\x00trailing", b"two"))  # drop-head: "one" goes (maxlen)
    seq, msg, _, _ = q.take()
    q.reject(seq, msg)  # "two" goes (rejected)
    got = []
    while (entry := catch.take(no_ack=True)) is not None:
        got.append((bytes(entry[1].body), entry[1].decoded.headers["x-death"][0]["reason"]))
    assert got == [(b"one", "maxlen"), (b"two", "rejected")]
