"""Hostile input side by side with RabbitMQ 3.10 (issue 29): the same octets to Warren and to a
private RabbitMQ node (``rabbitmq_node``, Debian's rabbitmq-server), and the answers compared.

Where RabbitMQ refuses input as the client's fault (501, 502, 505, 406, 540...), Warren gives the
same code. Where RabbitMQ answers 541 INTERNAL_ERROR (its channel process crashes decoding a
property list) or takes what no client can decode (headers nested past 100), Warren answers
as ``warren/codec/refusals.py``'s table says, 501 or 502: 541 says the broker broke, and these
are the client's mistakes (``docs/compatibility.md``, "Hostile input"). Each such row checks
RabbitMQ's answer too, so a RabbitMQ that changes is noticed. The HTTP API rows do the same
with request bodies (RabbitMQ's 400 ``not_json``)."""

from __future__ import annotations

import base64
import struct
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass

import pytest

from tests.spec.test_fields import nested_table
from tests.conftest import EXTERNAL_URL
from tests.e2e import rawamqp as raw

pytestmark = [pytest.mark.skipif(bool(EXTERNAL_URL), reason="compares a private Warren with a private RabbitMQ"),
              pytest.mark.timeout(300)]

# the channel whose channel.flow-ok says every answer to the attack has been sent: the attack's own
# (RabbitMQ runs a process per channel: another channel's flow-ok may overtake a crash of this one)
SYNC = 1
TAKEN = ("taken",)


@dataclass
class Case:
    name: str
    setup: list  # frames on channel 1, each answered (a declare-ok, bind-ok) before the attack
    attack: bytes
    warren: tuple  # Warren's answer: (scope, code, class, method) or TAKEN
    rabbitmq: tuple | None = None  # RabbitMQ's, where it differs from Warren's (None: the same)
    # False where both brokers close the connection and no flow-ok marks the end of the answer
    # (RabbitMQ answers a method on a channel that is not open after channel 1's flow-ok)
    sync: bool = True


def answer(host: str, port: int, setup: list, attack: bytes, sync: bool = True) -> tuple:
    """("connection" | "channel", code, class id, method id) of the close the attack draws, or
    TAKEN when channel SYNC's flow-ok comes back without one."""
    with raw.RawConnection(host, port, timeout=10) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        for frame in setup:
            c.send(frame)
            f = c.read_method()
            assert f.method not in (raw.CONNECTION_CLOSE, raw.CHANNEL_CLOSE), raw.parse_close(f)
        c.send(attack + (raw.channel_flow(SYNC, True) if sync else b""))
        while True:
            try:
                f = c.read_method()
            except raw.ConnectionLost:
                return ("dropped",)
            if f.method in (raw.CONNECTION_CLOSE, raw.CHANNEL_CLOSE):
                close = raw.parse_close(f)
                scope = "connection" if f.method == raw.CONNECTION_CLOSE else "channel"
                c.try_send(raw.connection_close_ok() if scope == "connection" else raw.channel_close_ok(f.channel))
                return scope, close.reply_code, close.class_id, close.method_id
            if f.method == raw.CHANNEL_FLOW_OK and f.channel == SYNC:
                return TAKEN


def header(props: bytes, body_size: int, channel: int = 1) -> bytes:
    return raw.frame(raw.FRAME_HEADER, channel, struct.pack(">HHQ", 60, 0, body_size) + props)


def headers_props(entries: bytes, flags: int = 0x2000, after: bytes = b"") -> bytes:
    """A property list with a headers table of ``entries`` (and, per ``flags``, the properties
    after it in wire order: ``after``)."""
    return struct.pack(">HI", flags, len(entries)) + entries + after


def publish(exchange: str, key: str, props: bytes, body: bytes = b"poison") -> bytes:
    return raw.basic_publish(1, exchange, key) + header(props, len(body)) + raw.body_frame(1, body)


def cases(uid: str) -> list[Case]:
    q, ttl, prio = f"hostile-{uid}", f"hostile-ttl-{uid}", f"hostile-prio-{uid}"
    declare = raw.queue_declare(1, q, arguments={"x-expires": 60_000})
    declare_ttl = raw.queue_declare(1, ttl, arguments={"x-expires": 60_000, "x-message-ttl": 10,
                                                       "x-dead-letter-exchange": "amq.fanout"})
    declare_prio = raw.queue_declare(1, prio, arguments={"x-expires": 60_000, "x-max-priority": 5})
    bind_headers = raw.queue_bind(1, q, "amq.headers", arguments={"x-match": "any", "k": "v"})
    unknown_z, unknown_u, cut = b"\x01kZ\x00", b"\x01kU\x00\x01", b"\x01kI\x00\x00"
    deep = b"\x01kF" + nested_table(101)
    malformed = ("connection", 502, 60, 40)  # warren/codec/refusals.py: MALFORMED
    crash = ("connection", 541, 0, 0)  # RabbitMQ's channel process fails decoding the list
    out = []
    for letter, entries in (("unknown type Z", unknown_z), ("U, not a RabbitMQ type", unknown_u),
                            ("an integer cut by its table", cut), ("nested 101 deep", deep)):
        rabbit = TAKEN if entries is deep else crash  # RabbitMQ takes any depth
        out += [
            Case(f"headers with {letter}, to a queue", [declare], publish("", q, headers_props(entries)),
                 malformed, rabbit),
            Case(f"headers with {letter}, to amq.headers", [declare, bind_headers],
                 publish("amq.headers", "", headers_props(entries)), malformed, rabbit),
            Case(f"headers with {letter}, to a TTL and dead-letter queue", [declare_ttl],
                 publish("", ttl, headers_props(entries)), malformed, rabbit),
            Case(f"headers with {letter}, to a priority queue", [declare_prio],
                 publish("", prio, headers_props(entries, 0x2800, b"\x03")), malformed, rabbit),
            Case(f"headers with {letter}, with an expiration", [declare],
                 publish("", q, headers_props(entries, 0x2100, raw.shortstr("60000"))), malformed, rabbit),
        ]
    out += [
        Case("a header without its property flags", [declare], raw.basic_publish(1, "", q) + header(b"", 0),
             ("connection", 501, 60, 40), crash),
        Case("a headers table longer than the property list", [declare],
             publish("", q, b"\x20\x00" + struct.pack(">I", 50) + b"\x01kI\x00\x00\x00\x01"),
             ("connection", 501, 60, 40), crash),
        Case("octets after the last property", [declare], publish("", q, b"\x80\x00\x03abcXYZ"), malformed, crash),
        # the same malformations in a method's arguments: RabbitMQ's own 501 and 502 where it has them
        Case("queue.declare arguments past the frame", [], raw.method_frame(
            1, *raw.QUEUE_DECLARE, struct.pack(">H", 0) + raw.shortstr(q) + b"\x00" + struct.pack(">I", 50) + b"\x01k"),
            ("connection", 501, 50, 10)),
        Case("queue.declare arguments nested 101 deep", [], raw.method_frame(
            1, *raw.QUEUE_DECLARE, struct.pack(">H", 0) + raw.shortstr(q + "-deep") + b"\x00"
            + struct.pack(">I", len(deep)) + deep), ("connection", 502, 50, 10), TAKEN),
        Case("a queue name past its frame", [], raw.method_frame(1, *raw.QUEUE_DECLARE, struct.pack(">H", 0) + b"\x40abc"),
             ("connection", 501, 50, 10)),
        # refusals RabbitMQ answers as the client's fault: the same answer
        Case("an unknown method", [], raw.method_frame(1, 60, 999), ("connection", 540, 60, 999), ("dropped",)),
        Case("a content header of another class", [declare],
             raw.basic_publish(1, "", q) + raw.frame(raw.FRAME_HEADER, 1, struct.pack(">HHQH", 50, 0, 1, 0)),
             ("connection", 505, 60, 40)),
        Case("a body frame without a publish", [], raw.body_frame(1, b"x"), ("connection", 505, 0, 0)),
        Case("a method on a channel not open", [], raw.queue_declare(7, q), ("connection", 504, 50, 10), sync=False),
        Case("an invalid expiration", [declare], publish("", q, b"\x01\x00" + raw.shortstr("abc")),
             ("channel", 406, 60, 40)),
        Case("CC that is not an array", [declare], publish("", q, headers_props(b"\x02CCI\x00\x00\x00\x05")),
             ("channel", 406, 60, 40)),
        Case("x-match that is neither all nor any", [declare],
             raw.queue_bind(1, q, "amq.headers", arguments={"x-match": "foo"}), ("channel", 406, 50, 20)),
        Case("x-max-priority past 255", [], raw.queue_declare(1, q + "-p", arguments={"x-max-priority": 300}),
             ("channel", 406, 50, 10)),
    ]
    return out


CASE_NAMES = [c.name for c in cases("x")]


@pytest.fixture(scope="module")
def compared(broker, rabbitmq_node):
    return broker, rabbitmq_node


@pytest.mark.parametrize("name", CASE_NAMES)
def test_the_same_octets_get_rabbitmqs_answer_or_a_clients_fault_code(compared, name):
    broker, rabbit = compared
    uid = uuid.uuid4().hex[:8]
    [case] = [c for c in cases(uid) if c.name == name]
    got_warren = answer(broker.host, broker.port, case.setup, case.attack, case.sync)
    got_rabbit = answer(rabbit.host, rabbit.amqp_port, case.setup, case.attack, case.sync)
    expected_rabbit = case.rabbitmq or case.warren
    assert got_rabbit == expected_rabbit, f"RabbitMQ answered {got_rabbit}, expected {expected_rabbit}"
    assert got_warren == case.warren, f"Warren answered {got_warren}, expected {case.warren} (RabbitMQ: {got_rabbit})"
    assert got_warren[:2] != ("connection", 541) and got_warren[:2] != ("channel", 541)


# --- the HTTP API ------------------------------------------------------------------------------


def http(base: str, method: str, path: str, body: bytes) -> int:
    req = urllib.request.Request(base + path, data=body, method=method, headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(), "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError):  # the server dropped the request
        return 0


BODIES = {
    "1,000 [": b"[" * 1000,
    "100,000 [": b"[" * 100_000,
    "an object cut short": b'{"password": "x", "tags": ',
    "not JSON at all": b"{",
    "nested objects 10,000 deep": b'{"a":' * 10_000,
}


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_a_request_body_that_is_not_json_is_400_not_5xx(compared, body):
    broker, rabbit = compared
    path = f"/api/users/hostile-{uuid.uuid4().hex[:8]}"
    warren = http(broker.http_url, "PUT", path, body)
    rabbitmq = http(rabbit.http_url, "PUT", path, body)
    assert 400 <= rabbitmq < 500, rabbitmq  # RabbitMQ: 400 not_json (405 for the 100,000-deep array)
    assert warren == 400


@pytest.mark.parametrize("kind, rabbitmq_status", [("exchanges", 201), ("queues", 400)])
def test_a_name_longer_than_a_shortstr_is_400_not_a_500_later(compared, kind, rabbitmq_status):
    """Over AMQP no name can pass 255 octets; over HTTP one could, and publishing through such
    an exchange was a 500 (the delivery's exchange field did not encode). RabbitMQ's API refuses
    such a queue (400) and takes such an exchange (a name no AMQP client can use); Warren refuses
    both (400, the INVALID row of warren/codec/refusals.py; docs/compatibility.md)."""
    broker, rabbit = compared
    path = f"/api/{kind}/%2F/" + uuid.uuid4().hex + "n" * 300
    body = b'{"type": "fanout"}' if kind == "exchanges" else b"{}"
    assert http(rabbit.http_url, "PUT", path, body) == rabbitmq_status
    http(rabbit.http_url, "DELETE", path, None)
    assert http(broker.http_url, "PUT", path, body) == 400
    assert http(broker.http_url, "GET", path, None) == 404


@pytest.mark.parametrize("kind", ["queues", "exchanges"])
def test_arguments_nested_past_any_amqp_table_are_400_not_a_500(compared, kind):
    """JSON that parses but nests 900 deep reached the store's recursive encoder (a 500); a body
    nested past JSON_DEPTH_MAX (110: an AMQP table's 100 and a definitions document's levels) is
    refused. RabbitMQ's answer varies (it takes some, crashes on others): only Warren's is checked."""
    broker, _ = compared
    deep = b"[" * 900 + b"]" * 900
    body = b'{"durable": true, "type": "headers", "arguments": {"k": ' + deep + b"}}"
    path = f"/api/{kind}/%2F/hostile-deep-{uuid.uuid4().hex[:8]}"
    assert http(broker.http_url, "PUT", path, body) == 400
    assert http(broker.http_url, "GET", path, None) == 404
    shallow = b'{"durable": false, "arguments": {"k": ' + b"[" * 90 + b"]" * 90 + b"}}"  # an AMQP table's depth
    assert http(broker.http_url, "PUT", path, shallow) == 201
    assert http(broker.http_url, "DELETE", path, None) == 204


def test_a_lone_surrogate_in_a_json_string_is_400_not_a_500(compared):
    """``\\ud800`` parses (Python's json takes lone surrogates) but is no Unicode text: a binding's
    routing key with one was a 500 when encoded. Refused with the rest of a malformed body."""
    broker, rabbit = compared
    queue = f"hostile-sur-{uuid.uuid4().hex[:8]}"
    for base in (broker.http_url, rabbit.http_url):
        assert http(base, "PUT", f"/api/queues/%2F/{queue}", b'{"auto_delete": false}') in (201, 204)
    body = b'{"routing_key": "\\ud800"}'
    path = f"/api/bindings/%2F/e/amq.direct/q/{queue}"
    rabbitmq = http(rabbit.http_url, "POST", path, body)
    warren = http(broker.http_url, "POST", path, body)
    for base in (broker.http_url, rabbit.http_url):
        http(base, "DELETE", f"/api/queues/%2F/{queue}", None)
    assert rabbitmq < 500 or rabbitmq == 0, rabbitmq  # (recorded: what RabbitMQ answers is not checked further)
    assert warren == 400
