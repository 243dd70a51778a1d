"""warren/server/placement.py: the move record, and what keeps a connection where it is."""

from __future__ import annotations

from types import SimpleNamespace

from warren.server.handoff_records import Relayed, unpack_handoff, unpack_relayed
from warren.server.tls import CertificateLogin, TlsSession
from warren.server.placement import clean, is_move, pack_move, unpack_move


def test_a_move_record_carries_the_answered_and_the_pending_octets_apart():
    record = pack_move(("127.0.0.1", 5000), "v/é", b"AMQP\x00\x00\x09\x01" + b"a" * 30, b"\x01pending")
    assert is_move(record)
    answered, inner = unpack_move(record)
    peer, vhost, received = unpack_handoff(inner)
    assert (peer, vhost) == (("127.0.0.1", 5000), "v/é")
    assert received[:answered] == b"AMQP\x00\x00\x09\x01" + b"a" * 30 and received[answered:] == b"\x01pending"


def test_a_relayed_tls_connections_move_record_says_again_who_the_client_is():
    relayed = Relayed(("10.1.2.3", 40000), ("10.1.2.1", 5671), TlsSession("TLSv1.3", "TLS_AES_128_GCM_SHA256",
                                                                         CertificateLogin("carol")))
    record = pack_move(relayed.peer, "/", b"answered", b"pending", relayed)
    assert is_move(record)
    answered, inner = unpack_move(record)
    back, plain = unpack_relayed(inner)
    assert answered == len(b"answered")
    assert (back.peer, back.local, back.tls) == (relayed.peer, relayed.local, relayed.tls)
    assert unpack_handoff(plain) == (relayed.peer, "/", b"answeredpending")


def test_a_supervisors_record_is_not_a_move():
    from warren.server.handoff_records import pack_handoff
    assert not is_move(pack_handoff("127.0.0.1", 5000, b"AMQP", "/"))
    assert not is_move(pack_handoff("::1", 5000, b"AMQP", "/"))


def _channel(**kw):
    base = dict(stats_publish=0, consumers={}, remote_consumers=None, unacked={}, next_tag=1, tx_publishes=[],
                reply_consumer=None)
    base.update(kw)
    return SimpleNamespace(**base)


def _session(*channels, **kw):
    base = dict(holds_exclusive_queues=lambda: False, unmovable=False, channels=dict(enumerate(channels, 1)))
    base.update(kw)
    return SimpleNamespace(**base)


def test_only_a_connection_that_holds_nothing_may_move():
    assert clean(_session(_channel(), _channel()))
    for held in (dict(stats_publish=1), dict(consumers={"c": 1}), dict(remote_consumers={"c": 1}),
                 dict(unacked={1: ()}), dict(next_tag=2), dict(tx_publishes=[1]), dict(reply_consumer=object())):
        assert not clean(_session(_channel(), _channel(**held))), held
    assert not clean(_session(_channel(), holds_exclusive_queues=lambda: True))
    assert not clean(_session(_channel(), unmovable=True))  # a refusal closed a channel, or a server-named queue
