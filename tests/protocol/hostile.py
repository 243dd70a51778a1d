"""The parts of the stateful hostile-client fuzzer (``test_hostile_fuzz.py``, ``bench/fuzz.py
--stateful``): what it sends and how it reads what the broker answers.

Unlike ``tests/e2e/fuzzframes.py`` (one hostile sequence per fresh connection), the fuzzer keeps
its connections, channels and 0-10 sessions open across steps, so that hostile input arrives in
the states a real client reaches: after declares, bindings, publishes in flight, consumers,
confirm and tx modes. Its inputs:

* 0-9-1 methods of every class a client sends, with field values drawn from what brokers give a
  meaning to (RabbitMQ's ``x-`` arguments with values of every field type, expirations and
  priorities out of range, headers a broker reads: ``CC``, ``BCC``, ``x-delay``,
  ``x-deduplication-header``...), sent well formed or with their payload mutated (flipped,
  replaced, inserted or deleted octets) inside well-formed frames, so the broker always reads a
  whole frame and its answer is the one to check;
* content headers whose property lists are valid, mutated, or carry field tables with bad types
  and deep nesting;
* 0-10 commands (declares, binds, subscribes, transfers with delivery and message properties)
  with their command and header structs mutated the same way;
* HTTP API requests with random JSON bodies, bodies that are not JSON, and deep nesting.

After each step the fuzzer waits for a reply it knows must come (``channel.flow-ok`` on a channel
kept for it, an ``execution.sync``'s completion, the HTTP status), so everything the broker said
about the step has arrived: no sleeping. Every ``connection.close`` / ``channel.close`` /
``execution.exception`` code and HTTP status is counted; 541 and 5xx are the findings.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests.e2e import rawamqp as raw
from warren.spec import amqp0_9_1 as spec

TIMEOUT = 10.0  # the longest a reply that must come may take on a loaded machine
SYNC_CHANNEL = 99  # opened at connect, kept for the flow-ok that closes each step
CHANNELS = (1, 2, 3)
QUEUES = ("fz-q1", "fz-q2", "fz-ttl", "fz-prio", "fz-stream", "amq.rabbitmq.reply-to", "")
EXCHANGES = ("", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match", "fz-ex", "fz-hash",
             "fz-delay", "fz-headers")
EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers", "x-consistent-hash", "x-delayed-message", "bogus")
# the arguments and headers brokers give a meaning to (RabbitMQ's, Warren's, Qpid's)
ARGUMENT_NAMES = (
    "x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-overflow", "x-dead-letter-exchange",
    "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-max-priority", "x-queue-type", "x-queue-mode",
    "x-single-active-consumer", "x-delivery-limit", "x-stream-offset", "x-priority", "x-match", "alternate-exchange",
    "x-delayed-type", "hash-header", "hash-property", "x-deduplication-header", "x-message-deduplication",
    "x-cache-size", "x-max-age", "x-stream-max-segment-size-bytes", "x-consumer-timeout", "x-cancel-on-ha-failover",
    "x-credit", "no-local", "qpid.priorities", "qpid.max_count", "x-qpid-priorities", "qpid.last_value_queue_key",
    "x-group-id", "qpid.group_header_key", "x-initial-cluster-size", "x-quorum-initial-group-size", "k",
)
HEADER_NAMES = ("CC", "BCC", "x-delay", "x-death", "x-deduplication-header", "x-stream-offset", "x-match", "k",
                "x-first-death-queue", "x-received-from", "qpid.subject", "JMSXGroupID", "x-message-ttl")
TYPE_LETTERS = b"tbBsuIilLfdDSTxVFAUZ\x00\xff"
USER_NAMES = ("fz-user-1", "fz-user-2")
VHOST_NAMES = ("fz-vhost-1", "fz-vhost-2")


# --- values ------------------------------------------------------------------------------------

texts = st.one_of(st.sampled_from(["", "all", "any", "reject-publish", "drop-head", "lazy", "classic", "quorum",
                                   "stream", "first", "last", "next", "1000", "-1", "abc", "1e3", "0",
                                   "99999999999999999999", "amq.rabbitmq.reply-to", "fz-q1", "fz-ex"]),
                  st.text(max_size=20))
ints = st.one_of(st.integers(-3, 3), st.sampled_from([255, 256, 65535, 2**31 - 1, 2**31, 2**32, 2**63 - 1, -2**31,
                                                      -2**63]))
scalars = st.one_of(st.none(), st.booleans(), ints, texts, st.binary(max_size=12),
                    st.floats(allow_nan=True, allow_infinity=True, width=64))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(ARGUMENT_NAMES + HEADER_NAMES), inner, max_size=3)),
    max_leaves=8)
argument_tables = st.dictionaries(st.sampled_from(ARGUMENT_NAMES), values, max_size=4)
header_tables = st.dictionaries(st.sampled_from(HEADER_NAMES + ARGUMENT_NAMES), values, max_size=4)


@st.composite
def mutations(draw, data: bytes) -> bytes:
    """``data`` with a few octets flipped, set, inserted or deleted."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "type"]))
        i = draw(st.integers(0, max(0, len(b) - 1)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op in ("set", "type") and b:
            b[i] = draw(st.sampled_from(TYPE_LETTERS)) if op == "type" else draw(st.integers(0, 255))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif b:
            del b[i:i + draw(st.integers(1, 4))]
    return bytes(b)


def maybe_mutated(draw, data: bytes) -> bytes:
    return draw(mutations(data)) if draw(st.integers(0, 2)) == 0 else data


def nested_table_value(depth: int) -> bytes:
    """A field-table value (type F) nested ``depth`` deep, linear in depth."""
    inner = b"\x00\x00\x00\x00"
    for _ in range(depth - 1):
        inner = struct.pack(">I", 3 + len(inner)) + b"\x01aF" + inner
    return b"F" + inner


# --- 0-9-1 methods -----------------------------------------------------------------------------

# the methods a client sends on a channel, by class: (method class, how often relative to others)
CHANNEL_METHODS = [m for m in spec.METHODS.values() if m.CLASS_ID in (20, 40, 50, 60, 85, 90)
                   and m.INDEX not in (spec.ChannelOpen.INDEX, spec.ChannelOpenOk.INDEX, spec.ChannelCloseOk.INDEX,
                                       spec.BasicPublish.INDEX)]


def _field(draw, name: str, kind: str):
    if kind == "bit":
        return draw(st.booleans())
    if kind == "octet":
        return draw(st.integers(0, 255))
    if kind == "short":
        return draw(st.one_of(st.integers(0, 3), st.integers(0, 65535)))
    if kind == "long":
        return draw(st.one_of(st.integers(0, 3), st.integers(0, 2**32 - 1)))
    if kind in ("longlong", "timestamp"):
        return draw(st.one_of(st.integers(0, 5), st.integers(0, 2**64 - 1)))
    if kind == "shortstr":
        if name in ("queue",):
            return draw(st.sampled_from(QUEUES))
        if name in ("exchange", "destination", "source"):
            return draw(st.sampled_from(EXCHANGES))
        if name == "type":
            return draw(st.sampled_from(EXCHANGE_TYPES))
        return draw(st.one_of(st.sampled_from(["", "fz", "#", "*.a", "fz-ctag"]), st.text(max_size=10)))
    if kind == "longstr":
        return draw(st.binary(max_size=20))
    if kind == "table":
        return draw(argument_tables)
    raise AssertionError(f"no strategy for {kind}")


@st.composite
def channel_method_payloads(draw) -> bytes:
    """A method frame's payload: any client method of a channel, its fields drawn as above,
    encoded, then maybe mutated."""
    cls = draw(st.sampled_from(CHANNEL_METHODS))
    method = cls(**{name: _field(draw, name, kind) for name, kind in cls.FIELDS})
    try:
        payload = method.encode()
    except (ValueError, OverflowError, TypeError):
        payload = struct.pack(">HH", cls.CLASS_ID, cls.METHOD_ID)  # a value our encoder refuses: no arguments
    return maybe_mutated(draw, payload)


@st.composite
def property_lists(draw) -> bytes:
    """A basic property list: valid (values brokers read, out of range ones included), mutated,
    or with a headers table holding a bad type letter or nesting past 100."""
    kind = draw(st.sampled_from(["valid", "valid", "mutated", "bad-type", "deep"]))
    if kind in ("bad-type", "deep"):
        entry = (b"\x01k" + bytes([draw(st.sampled_from(TYPE_LETTERS))]) + draw(st.binary(max_size=8))
                 if kind == "bad-type" else b"\x01k" + nested_table_value(draw(st.integers(99, 300))))
        table = struct.pack(">I", len(entry)) + entry
        extra_flags, extra = draw(st.sampled_from([(0, b""), (0x0100, b"\x041000"), (0x0800, b"\x05")]))
        flags = 0x2000 | extra_flags
        # headers first, then priority (0x0800) or expiration (0x0100), in flag order
        return struct.pack(">H", flags) + table + extra
    props = spec.BasicProperties(
        headers=draw(st.one_of(st.none(), header_tables)),
        delivery_mode=draw(st.one_of(st.none(), st.integers(0, 255))),
        priority=draw(st.one_of(st.none(), st.integers(0, 255))),
        expiration=draw(st.one_of(st.none(), texts.filter(lambda t: len(t.encode()) < 200))),
        reply_to=draw(st.one_of(st.none(), st.sampled_from(["amq.rabbitmq.reply-to", "fz-q1", "x"]))),
        user_id=draw(st.one_of(st.none(), st.sampled_from(["guest", "other", ""]))),
        timestamp=draw(st.one_of(st.none(), st.integers(0, 2**40))),
        content_type=draw(st.one_of(st.none(), st.sampled_from(["text/plain", ""]))),
    )
    try:
        encoded = props.encode()
    except (ValueError, OverflowError, TypeError):
        encoded = b"\x00\x00"
    return draw(mutations(encoded)) if kind == "mutated" else encoded


# --- reading answers ---------------------------------------------------------------------------


# The one 541 Warren gives for a client's mistake, on purpose: Qpid's brokers answer a 0-10
# headers binding without x-match with internal-error and Qpid's suite checks that code
# (testHeadersBindNoMatchArg, a recorded pass in tests/interop_0_10/conformance.json;
# docs/compatibility.md). Counted with the other codes, not as a finding.
QPID_541 = {("0-10 execution", "a headers binding needs an x-match argument (all or any)")}


@dataclass
class Tally:
    """What the broker answered over a run."""

    codes: Counter = field(default_factory=Counter)  # ("0-9-1 connection" | ..., code) -> count
    internal: list = field(default_factory=list)  # (what was sent, the answer) for each 541 or 5xx
    silent: int = 0  # steps whose sync reply did not come in TIMEOUT (the connection is dropped)

    def note(self, scope: str, code: int, text: str, sent) -> None:
        self.codes[(scope, code)] += 1
        if (code == 541 and (scope, text) not in QPID_541) or (scope == "http" and code >= 500):
            self.internal.append((scope, code, text[:300], sent))

    def summary(self) -> str:
        rows = ", ".join(f"{scope} {code}: {n}" for (scope, code), n in sorted(self.codes.items()))
        return f"{sum(self.codes.values())} answers ({rows}); {self.silent} silent; {len(self.internal)} internal"


class Amqp091:
    """A raw 0-9-1 connection kept across steps: channels 1-3 for the fuzzing, SYNC_CHANNEL for the
    reply that ends a step. Reconnects (and reopens) after the broker closes it."""

    def __init__(self, host: str, port: int, tally: Tally) -> None:
        self.host, self.port, self.tally = host, port, tally
        self.conn: raw.RawConnection | None = None
        self.open: set[int] = set()

    def connect(self) -> raw.RawConnection:
        if self.conn is None:
            c = raw.RawConnection(self.host, self.port, timeout=TIMEOUT)
            try:
                c.handshake(heartbeat=0)
                c.open_channel(SYNC_CHANNEL)
            except BaseException:
                c.close()
                raise
            self.conn, self.open = c, set()
        return self.conn

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.open = None, set()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.try_send(raw.connection_close())
        self.drop()

    def ensure_channel(self, channel: int) -> None:
        c = self.connect()
        if channel not in self.open:
            c.send(raw.channel_open(channel))
            self.open.add(channel)  # its open-ok (or a refusal) is read by the step's sync

    def step(self, data: bytes, sent) -> None:
        """Send ``data`` then channel.flow on SYNC_CHANNEL, and read every answer until its
        flow-ok: every close on the way is counted (and answered with its close-ok)."""
        c = self.connect()
        if not c.try_send(data + raw.channel_flow(SYNC_CHANNEL, True)):
            self.drop()
            return
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            try:
                f = c.read_frame(max(0.0, left))
            except TimeoutError:
                self.tally.silent += 1
                self.drop()
                return
            except (raw.ConnectionLost, OSError, ValueError):
                self.drop()  # the broker closed the socket (after a close, or a framing error)
                return
            if not f.is_method or len(f.payload) < 4:
                continue
            method = f.method
            if method == raw.CONNECTION_CLOSE:
                close = raw.parse_close(f)
                self.tally.note("0-9-1 connection", close.reply_code, close.reply_text, sent)
                c.try_send(raw.connection_close_ok())
                self.drop()
                return
            if method == raw.CONNECTION_CLOSE_OK:  # a mutated method became connection.close
                self.drop()
                return
            if method == raw.CHANNEL_CLOSE:
                close = raw.parse_close(f)
                self.tally.note("0-9-1 channel", close.reply_code, close.reply_text, sent)
                c.try_send(raw.channel_close_ok(f.channel))
                self.open.discard(f.channel)
                if f.channel == SYNC_CHANNEL:  # (a fuzzed frame never goes there; kept safe anyway)
                    self.drop()
                    return
            elif method == raw.CHANNEL_CLOSE_OK:
                self.open.discard(f.channel)
            elif method == raw.CHANNEL_FLOW_OK and f.channel == SYNC_CHANNEL:
                return


class Http:
    """The HTTP API as guest; every answer's status counted."""

    def __init__(self, base: str, tally: Tally) -> None:
        self.base, self.tally = base, tally
        self.auth = "Basic " + base64.b64encode(b"guest:guest").decode()

    def request(self, method: str, path: str, body: bytes | None) -> int:
        req = urllib.request.Request(self.base + path, data=body, method=method, headers={
            "Authorization": self.auth, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                status, text = r.status, r.read(300).decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read(300).decode("utf-8", "replace")
        except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
            status, text = 599, f"no answer: {e}"  # counted as a 5xx: the API must answer
        self.tally.note("http", status, text, (method, path, (body or b"")[:200]))
        return status


# --- HTTP requests -----------------------------------------------------------------------------

JSON_KEYS = ["durable", "auto_delete", "arguments", "tags", "password", "password_hash", "hashing_algorithm", "pattern",
             "definition", "apply-to", "priority", "payload", "payload_encoding", "properties", "routing_key", "count",
             "ackmode", "encoding", "truncate", "value", "max-connections", "max-channels", "max-queues", "type",
             "internal", "configure", "write", "read", "exchange", "queues", "exchanges", "bindings", "users", "vhosts",
             "policies", "headers", "delivery_mode", "expiration", "name", "vhost", "description",
             "default_queue_type", *ARGUMENT_NAMES]


def _json_containers(inner):
    return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(JSON_KEYS), inner, max_size=4))


json_values = st.recursive(
    # a lone surrogate: JSON can say it ("\ud800"), Unicode text cannot hold it
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64), st.floats(allow_nan=False), texts,
              st.just("\ud800x")),
    _json_containers, max_leaves=10)


@st.composite
def http_requests(draw) -> tuple[str, str, bytes | None]:
    """(method, path, body): the API's writable resources with names the fuzzer owns (never
    guest, never the vhost "/" itself: a fuzzed password or vhost limit would lock the fuzzer
    out), and a body that is JSON, not JSON, or nested deep."""
    q, ex = draw(st.sampled_from(QUEUES[:5] + ("q" * 256,))), draw(st.sampled_from(EXCHANGES[6:] + ("e" * 300,)))
    user, vhost = draw(st.sampled_from(USER_NAMES)), draw(st.sampled_from(VHOST_NAMES))
    method, path = draw(st.sampled_from([
        ("PUT", f"/api/queues/%2F/{q}"), ("DELETE", f"/api/queues/%2F/{q}"), ("GET", f"/api/queues/%2F/{q}"),
        ("PUT", f"/api/exchanges/%2F/{ex}"), ("POST", f"/api/bindings/%2F/e/amq.direct/q/{q}"),
        ("POST", f"/api/bindings/%2F/e/amq.direct/e/{ex}"),
        ("PUT", f"/api/users/{user}"), ("PUT", f"/api/permissions/%2F/{user}"),
        ("PUT", f"/api/topic-permissions/%2F/{user}"), ("PUT", f"/api/vhosts/{vhost}"),
        ("PUT", "/api/policies/%2F/fz-policy"), ("PUT", f"/api/vhost-limits/{vhost}/max-connections"),
        ("PUT", f"/api/user-limits/{user}/max-channels"), ("PUT", f"/api/parameters/vhost-limits/{vhost}/limits"),
        ("POST", "/api/exchanges/%2F/amq.default/publish"), ("POST", f"/api/exchanges/%2F/{ex}/publish"),
        ("POST", f"/api/queues/%2F/{q}/get"), ("POST", f"/api/definitions/{vhost}"),
        ("GET", "/api/queues?page=" + draw(st.sampled_from(["1", "0", "-1", "x", "99999999999999999999"]))
         + "&page_size=" + draw(st.sampled_from(["1", "0", "x", "501"])) + "&name="
         + draw(st.sampled_from(["fz", "(", "[", "*", "%"])) + "&use_regex=true"),
        ("GET", "/api/queues/%2F?sort=" + draw(st.sampled_from(["name", "x.y.z", "messages", ""]))
         + "&columns=" + draw(st.sampled_from(["name", "a,b", "", "messages.x"]))),
        ("GET", f"/api/queues/%2F/{q}/bindings"), ("GET", "/api/overview?lengths_age=" + draw(
            st.sampled_from(["60", "-1", "x"])) + "&lengths_incr=" + draw(st.sampled_from(["5", "0", "x"]))),
    ]))
    kind = draw(st.sampled_from(["json", "json", "json", "bytes", "deep", "none"]))
    if kind == "json":
        body = json.dumps(draw(json_values)).encode()
    elif kind == "bytes":
        body = maybe_mutated(draw, json.dumps(draw(json_values)).encode())
    elif kind == "deep":
        depth = draw(st.sampled_from([105, 900, 1000, 100_000]))
        body = draw(st.sampled_from([b"[" * depth, b'{"a":' * depth, b'{"arguments": ' + b"[" * depth,
                                     b'{"arguments": {"k": ' + b"[" * depth + b"]" * depth + b"}}"]))
    else:
        body = None
    return method, path, body if method != "GET" else None


# --- 0-10 --------------------------------------------------------------------------------------


class Amqp010:
    """A 0-10 connection (Warren's sans-IO client mode, ``tests/e2e/amqp0_10/client010.py``) with
    one session kept across steps; a refused command detaches it, and the next step attaches a
    new one (a closed connection is opened again)."""

    def __init__(self, broker, tally: Tally) -> None:
        self.broker, self.tally = broker, tally
        self.client = None
        self.session = None
        self.sessions = 0

    def connect(self):
        from tests.e2e.amqp0_10.client010 import Client010
        if self.client is None or self.client.eof or self.client.conn.closed or self.client.conn.closing:
            self.drop()
            self.client = Client010(self.broker)
        if self.session is None:
            self.sessions += 1
            self.session = self.client.session(1 + self.sessions % 7, f"fz-session-{self.sessions}".encode())
        return self.client, self.session

    def drop(self) -> None:
        if self.client is not None:
            try:
                self.client.sock.close()
            finally:
                self.client, self.session = None, None

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.__exit__(None, None, None)
            finally:
                self.client, self.session = None, None

    def step(self, segments: list, sent) -> None:
        """Send one command assembly as raw frames (``segments``: its command, header and body
        payloads, maybe mutated), then execution.sync, and read until the sync completes, the
        session is refused, or the connection closes: each refusal's code counted."""
        from tests.e2e.amqp0_10.client010 import ConnectionLost, SessionException
        from warren.codec.amqp0_10.frames import assembly_frames
        from warren.protocol.amqp0_10 import events as ev
        client, session = self.connect()
        data = b"".join(bytes(p) for p in assembly_frames(session.channel, segments))
        client.conn.send_raw(data, command_on=session.channel)
        client.flush()
        try:
            session.sync(TIMEOUT)
        except SessionException as e:
            self.tally.note("0-10 execution", e.code, e.description, sent)
            self.session = None
        except ConnectionLost:
            self._closed(client, sent)
        except TimeoutError:
            if session.detached is not None:  # detached without an exception (a session-level refusal)
                self.session = None
                return
            closed = next((e for e in client.events if isinstance(e, ev.ConnectionClosed)), None)
            if closed is not None:
                self.tally.note("0-10 connection", closed.code, closed.text or "", sent)
                self.drop()
                return
            self.tally.silent += 1
            self.drop()
        except OSError:
            self.drop()

    def _closed(self, client, sent) -> None:
        from warren.protocol.amqp0_10 import events as ev
        closed = next((e for e in client.events if isinstance(e, ev.ConnectionClosed)), None)
        if closed is not None:
            self.tally.note("0-10 connection", closed.code, closed.text or "", sent)
        self.drop()


@st.composite
def amqp0_10_assemblies(draw) -> list:
    """A 0-10 command assembly as (segment type, payload) pairs: a declare, bind, subscribe,
    delete, purge or transfer with fields drawn like the 0-9-1 ones, then maybe mutated
    (command struct, header structs, or both)."""
    from warren.codec.amqp0_10.frames import SEGMENT_BODY, SEGMENT_COMMAND, SEGMENT_HEADER
    from warren.codec.amqp0_10.types import encode_command, encode_header
    from warren.spec import amqp0_10 as spec010
    q = draw(st.sampled_from(QUEUES[:5]))
    ex = draw(st.sampled_from(EXCHANGES[1:]))
    args = draw(argument_tables)
    commands = [
        spec010.QueueDeclare(queue=q, arguments=args, auto_delete=draw(st.booleans()),
                             alternate_exchange=draw(st.sampled_from(["", "amq.fanout", "nowhere"]))),
        spec010.ExchangeDeclare(exchange=draw(st.sampled_from(["fz-ex", "fz-headers", "fz-hash"])),
                                type=draw(st.sampled_from(EXCHANGE_TYPES)), arguments=args),
        spec010.ExchangeBind(queue=q, exchange=ex, binding_key=draw(texts.filter(lambda t: len(t.encode()) < 200)),
                             arguments=args),
        spec010.MessageSubscribe(queue=q, destination="fz-dest", arguments=args,
                                 accept_mode=draw(st.integers(0, 2)), acquire_mode=draw(st.integers(0, 2))),
        spec010.QueuePurge(queue=q), spec010.QueueDelete(queue=q), spec010.ExchangeDelete(exchange="fz-ex"),
        spec010.MessageFlow(destination="fz-dest", unit=draw(st.integers(0, 2)), value=draw(st.integers(0, 2**32 - 1))),
        spec010.MessageTransfer(destination=ex if ex != "amq.headers" else "", accept_mode=1, acquire_mode=0),
    ]
    command = draw(st.sampled_from(commands))
    try:
        segments = [(SEGMENT_COMMAND, encode_command(command, False))]
        if isinstance(command, spec010.MessageTransfer):
            dp = spec010.MessageDeliveryProperties(
                routing_key=q, ttl=draw(st.one_of(st.none(), st.integers(0, 2**64 - 1))),
                priority=draw(st.one_of(st.none(), st.integers(0, 255))),
                delivery_mode=draw(st.one_of(st.none(), st.integers(0, 255))))
            mp = spec010.MessageMessageProperties(application_headers=draw(header_tables) or None)
            segments.append((SEGMENT_HEADER, encode_header([dp, mp])))
            segments.append((SEGMENT_BODY, draw(st.binary(max_size=16))))
    except (ValueError, OverflowError, TypeError):  # a value the encoder refuses: a plain purge instead
        segments = [(SEGMENT_COMMAND, encode_command(spec010.QueuePurge(queue=q), False))]
    which = draw(st.sampled_from(["none", "none", "command", "header", "both"]))
    if which in ("command", "both"):
        segments[0] = (segments[0][0], draw(mutations(segments[0][1])))
    if which in ("header", "both") and len(segments) > 1:
        segments[1] = (segments[1][0], draw(mutations(segments[1][1])))
    return segments


def method_frame(channel: int, method) -> bytes:
    """A 0-9-1 method frame encoded by Warren's spec classes (they take every field-table value
    the strategies draw: lists, floats, bytes, nested tables); a value the encoder refuses
    leaves the arguments table empty, so the step still sends the method."""
    try:
        payload = method.encode()
    except (ValueError, OverflowError, TypeError):
        if hasattr(method, "arguments"):
            method.arguments = {}
        payload = method.encode()
    return raw.frame(raw.FRAME_METHOD, channel, payload)
