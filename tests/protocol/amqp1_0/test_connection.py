"""The sans-IO AMQP 1.0 connection driven with octets only: SASL, open, sessions, links, transfers
and each protocol error's answer."""

import pytest

from warren.codec.amqp1_0.frames import FrameReader, encode_frame, split_body
from warren.codec.amqp1_0.types import Symbol
from warren.protocol.amqp1_0 import events as ev
from warren.protocol.amqp1_0.connection import HEADER_AMQP, HEADER_SASL, Phase, ServerConnection
from warren.protocol.amqp1_0.session import INCOMING_WINDOW, LINK_CREDIT
from warren.spec import amqp1_0 as spec


class Peer:
    """A client's side: sends performatives, reads what the server wrote."""

    def __init__(self, conn: ServerConnection, chunk: int | None = None) -> None:
        self.conn = conn
        self.chunk = chunk
        self.reader = FrameReader(1 << 20)
        self.events: list = []
        self.headers: list = []

    def send(self, data: bytes) -> list:
        pieces = [data] if self.chunk is None or not data else [data[i:i + self.chunk] for i in range(0, len(data), self.chunk)]
        out = []
        for piece in pieces:
            self.conn.receive_data(piece)
            while (e := self.conn.next_event()) is not None:
                out.append(e)
        self.events += out
        return out

    def frame(self, channel, performative, payload=b"", sasl=False) -> list:
        return self.send(encode_frame(channel, performative, payload, 1 if sasl else 0))

    def received(self) -> list:
        """The performatives (with payloads) the server wrote since last asked."""
        data = b"".join(self.conn.data_to_send())
        while data[:4] == b"AMQP":
            self.headers.append(data[:8])
            data = data[8:]
        self.reader.feed(data)
        out = []
        while (f := self.reader.maybe_frame()) is not None:
            if f.body:
                out.append(split_body(f.body))
            if self.reader.buffered >= 8 and bytes(self.reader.buf[self.reader.pos:self.reader.pos + 4]) == b"AMQP":
                self.headers.append(self.reader.maybe_header())
        return out


def opened(chunk=None, **kw) -> Peer:
    peer = Peer(ServerConnection(sasl=True, mechanisms=("PLAIN",), **kw), chunk)
    (mechanisms, _), = peer.received()
    assert peer.headers == [HEADER_SASL] and list(mechanisms.sasl_server_mechanisms) == ["PLAIN"]
    # a pipelining client: sasl-init, then the AMQP header and open before any answer
    (init,) = peer.frame(0, spec.SaslInit(mechanism=Symbol("PLAIN"), initial_response=b"\0guest\0guest"), sasl=True)
    assert init == ev.SaslInit("PLAIN", b"\0guest\0guest", None)
    assert peer.send(HEADER_AMQP + encode_frame(0, spec.Open(container_id="c", hostname="vhost:/", idle_time_out=4000))) == []
    peer.conn.sasl_accept()
    (o,) = [e for e in peer.send(b"") if type(e) is ev.OpenRequested]
    assert o.hostname == "vhost:/" and o.container_id == "c"
    peer.conn.accept_open()
    (outcome, _), (our_open, _) = peer.received()
    assert outcome.code == 0 and type(our_open) is spec.Open and peer.headers[-1] == HEADER_AMQP
    assert peer.conn.is_open and our_open.idle_time_out == 4000 and peer.conn.heartbeat == 4.0
    return peer


def with_link(role_receiver: bool, chunk=None, **kw) -> Peer:
    peer = opened(chunk, **kw)
    assert peer.frame(3, spec.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)) == [ev.SessionBegun(3)]
    (begin, _), = peer.received()
    assert begin.remote_channel == 3 and begin.incoming_window == INCOMING_WINDOW
    (attach,) = peer.frame(3, spec.Attach(name="l", handle=0, role=role_receiver, source=spec.Source(address="/queues/q"),
                                          target=spec.Target(address="/queues/q")))
    assert type(attach) is ev.AttachRequested and attach.handle == 0
    peer.conn.accept_attach(3, 0, attach.attach.source, attach.attach.target)
    return peer


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_sasl_then_open_whatever_the_reads(chunk):
    opened(chunk)


def test_a_refused_login_answers_sasl_outcome_auth_and_reads_nothing_more():
    peer = Peer(ServerConnection())
    peer.received()
    peer.frame(0, spec.SaslInit(mechanism=Symbol("PLAIN"), initial_response=b"\0a\0b"), sasl=True)
    peer.conn.sasl_refuse()
    (outcome, _), = peer.received()
    assert outcome.code == spec.SaslCode.AUTH and peer.conn.closed and not peer.conn.reads_input


def test_without_sasl_the_adapter_still_decides_and_a_refusal_is_open_then_close():
    peer = Peer(ServerConnection(sasl=False))
    assert peer.events == [] and peer.conn.next_event() == ev.SaslInit("", b"", None)
    peer.conn.sasl_refuse(description="SASL is required")
    (o, _), (close, _) = peer.received()
    assert type(o) is spec.Open and close.error.condition == "amqp:unauthorized-access"


def test_a_client_sender_gets_credit_and_multi_frame_transfers_are_joined():
    peer = with_link(role_receiver=False)
    (attach, _), (flow, _) = peer.received()
    assert attach.role is True and flow.handle == 0 and flow.link_credit == LINK_CREDIT
    t1 = spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True)
    assert peer.frame(3, t1, b"ab") == []
    (m,) = peer.frame(3, spec.Transfer(handle=0, more=False), b"cd")
    assert m == ev.MessageReceived(3, 0, 0, False, b"abcd")
    peer.conn.settle_incoming(3, 0, spec.Accepted())
    peer.frame(3, spec.Transfer(handle=0, delivery_id=1, delivery_tag=b"u", settled=True), b"x")
    peer.conn.settle_incoming(3, 1, spec.Accepted())  # merged into one disposition? no: another state object
    dispositions = [p for p, _ in peer.received() if type(p) is spec.Disposition]
    assert dispositions[0].first == 0 and dispositions[0].settled and type(dispositions[0].state) is spec.Accepted


def test_consecutive_settlements_with_one_outcome_go_out_as_one_disposition():
    peer = with_link(role_receiver=False)
    peer.received()
    accepted = spec.Accepted()
    for i in range(5):
        peer.frame(3, spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"t"), b"x")
        peer.conn.settle_incoming(3, i, accepted)
    (d, _), = [x for x in peer.received() if type(x[0]) is spec.Disposition]
    assert (d.first, d.last) == (0, 4)


def test_a_transfer_beyond_the_credit_detaches_the_link_with_transfer_limit_exceeded():
    peer = with_link(role_receiver=False)
    peer.received()
    for i in range(LINK_CREDIT // 2 + 1):  # the credit is topped up once half is used
        peer.frame(3, spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"t", settled=True), b"x")
    flows = [p for p, _ in peer.received() if type(p) is spec.Flow and p.handle == 0]
    assert flows and flows[-1].link_credit == LINK_CREDIT
    peer.conn.sessions[3].links[0].credit = 0  # as if the client spent it all
    (err,) = [e for e in peer.frame(3, spec.Transfer(handle=0, delivery_id=999, delivery_tag=b"t"), b"x")
              if type(e) is ev.PeerError]
    assert err.scope == "link" and err.condition == "amqp:link:transfer-limit-exceeded"
    (detach, _), = peer.received()
    assert type(detach) is spec.Detach and detach.error.condition == "amqp:link:transfer-limit-exceeded"
    # its later transfers are dropped until the client's detach, which we do not answer again
    assert peer.frame(3, spec.Transfer(handle=0, delivery_id=1000, delivery_tag=b"t"), b"x") == []
    assert peer.frame(3, spec.Detach(handle=0, closed=True)) == [] and peer.received() == []


def test_a_message_past_the_size_limit_detaches_with_message_size_exceeded():
    peer = with_link(role_receiver=False, max_message_size=10)
    peer.received()
    peer.frame(3, spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True), b"123456")
    (err,) = peer.frame(3, spec.Transfer(handle=0, more=False), b"123456")
    assert err.condition == "amqp:link:message-size-exceeded"


def test_a_transfer_on_an_unattached_handle_ends_the_session():
    peer = with_link(role_receiver=False)
    peer.received()
    out = peer.frame(3, spec.Transfer(handle=7, delivery_id=0, delivery_tag=b"t"), b"x")
    assert ev.SessionEnded(3, False) in out
    (err,) = [e for e in out if type(e) is ev.PeerError]
    assert err.scope == "session" and err.condition == "amqp:session:unattached-handle"
    (end, _), = peer.received()
    assert end.error.condition == "amqp:session:unattached-handle"
    assert peer.frame(3, spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1)) == []
    peer.frame(3, spec.End())
    assert 3 not in peer.conn.sessions and peer.conn.is_open


def test_an_attach_on_a_handle_in_use_ends_the_session_with_handle_in_use():
    peer = with_link(role_receiver=False)
    out = peer.frame(3, spec.Attach(name="m", handle=0, role=False))
    assert [e.condition for e in out if type(e) is ev.PeerError] == ["amqp:session:handle-in-use"]


def test_the_broker_sends_within_the_credit_and_drains():
    peer = with_link(role_receiver=True)
    peer.received()
    conn = peer.conn
    assert conn.credit(3, 0) == 0
    (credit,) = peer.frame(3, spec.Flow(next_incoming_id=0, incoming_window=10, next_outgoing_id=0,
                                        outgoing_window=10, handle=0, delivery_count=0, link_credit=2, drain=True))
    assert credit == ev.CreditChanged(3, 0, True) and conn.credit(3, 0) == 2
    assert conn.send_transfer(3, 0, b"a", b"payload", False) == 0 and conn.credit(3, 0) == 1
    conn.drained(3, 0)
    (t, payload), (flow, _) = peer.received()
    assert payload == b"payload" and t.delivery_id == 0
    assert (flow.delivery_count, flow.link_credit, flow.drain) == (2, 0, True) and conn.credit(3, 0) == 0


def test_a_delivery_larger_than_the_clients_frame_size_goes_in_several_frames():
    peer = with_link(role_receiver=True)
    peer.conn.peer_frame_max = 512
    peer.frame(3, spec.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=10,
                            handle=0, delivery_count=0, link_credit=5))
    peer.received()
    peer.conn.send_transfer(3, 0, b"a", b"x" * 2000, True)
    frames = peer.received()
    assert len(frames) >= 4 and all(t.more for t, _ in frames[:-1]) and not frames[-1][0].more
    assert b"".join(p for _, p in frames) == b"x" * 2000


@pytest.mark.parametrize("octets, condition", [
    (b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x99\x45", "amqp:decode-error"),  # no such performative
    (b"\x00\x00\x00\x0a\x02\x00\x00\x00\x00\x53", "amqp:decode-error"),  # a descriptor and nothing
    (b"\x00\x00\x00\x08\x01\x00\x00\x00", "amqp:connection:framing-error"),  # data offset 1
    (b"\xff\xff\xff\xff\x02\x00\x00\x00", "amqp:connection:framing-error"),  # larger than max-frame-size
    (encode_frame(9, spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1)), "amqp:not-found"),
    (encode_frame(0, spec.Open(container_id="again")), "amqp:illegal-state"),
])
def test_broken_input_closes_with_its_condition(octets, condition):
    peer = opened()
    out = peer.send(octets)
    (err,) = [e for e in out if type(e) is ev.PeerError]
    assert err.scope == "connection" and err.condition == condition
    (close, _), = peer.received()
    assert type(close) is spec.Close and close.error.condition == condition
    assert peer.conn.phase is Phase.CLOSE_SENT
    # the client's close ends it; anything before is dropped
    assert peer.frame(0, spec.Close()) == [ev.ConnectionClosed(False, None)] or not peer.conn.reads_input


def test_a_clients_close_is_answered():
    peer = opened()
    assert peer.frame(0, spec.Close()) == [ev.ConnectionClosed(True, None)]
    (close, _), = peer.received()
    assert type(close) is spec.Close and peer.conn.sent_close_ok


def test_a_wrong_header_after_sasl_is_answered_with_ours_and_closed():
    peer = Peer(ServerConnection())
    peer.received()
    peer.frame(0, spec.SaslInit(mechanism=Symbol("PLAIN"), initial_response=b"\0a\0b"), sasl=True)
    peer.conn.sasl_accept()
    (err,) = peer.send(b"AMQP\x00\x00\x09\x01")
    assert err.condition == "header" and peer.conn.closed


from hypothesis import given, settings  # noqa: E402 - the fuzzer's imports, beside it
from hypothesis import strategies as st  # noqa: E402

from warren.codec.amqp1_0.types import Described, ULong, encode  # noqa: E402

_performatives = st.sampled_from([0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x99])
_fields = st.lists(st.one_of(st.none(), st.booleans(), st.integers(0, 300).map(ULong), st.integers(0, 3),
                             st.binary(max_size=8), st.text(max_size=8)), max_size=12)


@st.composite
def _frames(draw):
    """Frames that decode as a performative with random fields, or random octets in a frame."""
    channel = draw(st.integers(0, 3))
    if draw(st.booleans()):
        body = encode(Described(ULong(draw(_performatives)), draw(_fields))) + draw(st.binary(max_size=8))
    else:
        body = draw(st.binary(max_size=40))
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00" + channel.to_bytes(2, "big") + body


@settings(max_examples=400, deadline=None)
@given(st.lists(_frames(), max_size=12))
def test_any_frames_after_open_are_answered_never_raised(frames):
    """The fuzz invariant: whatever frames follow an open, next_event returns events or None; the
    connection ends closed (answered with a condition) or stays usable, and never raises."""
    peer = opened()
    for f in frames:
        peer.conn.receive_data(f)
        for _ in range(100):
            e = peer.conn.next_event()
            if e is None:
                break
            if type(e) is ev.AttachRequested:  # as the adapter: accept whatever it asked for
                peer.conn.accept_attach(e.channel, e.handle, None, None)
            elif type(e) is ev.MessageReceived:
                peer.conn.settle_incoming(e.channel, e.delivery_id, spec.Accepted())
        peer.received()


@pytest.mark.parametrize("handle, delivery_id, tag, settled", [
    (0, 0, b"", True), (1, 255, b"\x00" * 8, False), (256, 70000, b"t" * 255, True), (2**32 - 1, 2**32 - 1, b"x", False),
])
def test_a_one_frame_delivery_is_the_octets_the_composite_encoder_makes(handle, delivery_id, tag, settled):
    from warren.protocol.amqp1_0.connection import transfer_frame
    want = encode_frame(7, spec.Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0,
                                         settled=settled), b"payload")
    assert transfer_frame(7, handle, delivery_id, tag, settled, b"payload") == want


def _both_ways(body: bytes):
    from warren.protocol.amqp1_0.connection import split_transfer
    from warren.codec.amqp1_0.types import DecodeError
    fast = split_transfer(body)
    try:
        slow = split_body(body)
    except DecodeError:
        slow = None
    if fast is not None:  # the shortcut reads only what the decoder reads the same way
        assert slow is not None and fast[0] == slow[0] and fast[1] == slow[1], (body, fast, slow)
    return fast, slow


@settings(max_examples=300, deadline=None)
@given(handle=st.integers(0, 2**32 - 1), delivery_id=st.none() | st.integers(0, 2**32 - 1),
       tag=st.none() | st.binary(max_size=40), settled=st.none() | st.booleans(), more=st.booleans(),
       aborted=st.booleans(), payload=st.binary(max_size=30))
def test_the_transfer_shortcut_reads_what_the_decoder_reads(handle, delivery_id, tag, settled, more, aborted, payload):
    t = spec.Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled,
                      more=more, aborted=aborted)
    body = encode(t) + payload
    fast, slow = _both_ways(body)
    assert fast is not None  # the forms clients send are read by the shortcut


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60))
def test_the_transfer_shortcut_on_any_octets(tail):
    _both_ways(b"\x00\x53\x14" + tail)
    _both_ways(b"\x00\x53\x14\xc0" + tail)


_ELEMENT = st.sampled_from([b"\x40", b"\x43", b"\x41", b"\x42", b"\x52\x07", b"\x70\x00\x01\x00\x00", b"\xa0\x02ab",
                            b"\xa0\x00", b"\x50\x01", b"\x56\x01", b"\xa1\x01x"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_ELEMENT, max_size=13), st.integers(-2, 2), st.binary(max_size=5))
def test_the_transfer_shortcut_on_lists_of_field_encodings(elements, size_error, payload):
    fields = b"".join(elements)
    size = max(0, len(fields) + 1 + size_error)
    if size < 256:
        _both_ways(b"\x00\x53\x14\xc0" + bytes((size, len(elements))) + fields + payload)
    _both_ways(b"\x00\x53\x14\xd0" + (size + 3).to_bytes(4, "big") + len(elements).to_bytes(4, "big") + fields + payload)
