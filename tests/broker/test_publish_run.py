"""BrokerChannel.publish_run (a run of publishes with one method, the 0-9-1 Publishes event)
against publish one message at a time: the same queues end with the same messages in the same
order, the same counts and confirms; and the run's plain messages are out of the garbage
collector's sight (message.py). End-to-end behaviour through real sockets:
tests/e2e/test_publish_runs.py."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings, strategies as st

from warren.broker import message as message_module
from warren.broker.broker import Broker
from warren.broker.connection import BrokerConnection
from warren.broker.durability import Durability

from .helpers import QuietChannel, RecordingSink

PLAIN, PERSISTENT = b"\x00\x00", b"\x10\x00\x02"
CC_SIDE = b"\x20\x00" + (lambda e: len(e).to_bytes(4, "big") + e)(
    b"\x02CC" + b"A" + (9).to_bytes(4, "big") + b"S" + (4).to_bytes(4, "big") + b"side")


def world(tmp_path, name: str, consumer: bool = False):
    broker = Broker(durability=Durability(tmp_path / name, fsync=False))
    conn = BrokerConnection(broker, ("127.0.0.1", 1), None)
    conn.username = "guest"
    conn.open_vhost("/")
    ch = QuietChannel(conn, 1, RecordingSink())
    conn.channels[1] = ch
    ch.declare_exchange("ex", "direct", False, False, False, False, {})
    for q, key in (("a", "main"), ("b", "main"), ("c", "side")):
        ch.declare_queue(q, False, False, False, False, {})
        ch.bind_queue(q, "ex", key, {})
    ch.select_confirms()
    if consumer:  # queue a then takes each message of a run on its own (dispatch, flow control)
        ch.consume("a", "ctag", True, False, {})
    return broker, ch


def contents(broker) -> dict:
    """Per queue: its ready entries (seq, properties, body, persistent, redelivered, deadline),
    its ready octets and its next seq: a run taken at once (Queue.enqueue_run) or message by
    message must leave the same."""
    queues = broker.vhosts["/"].queues
    return {name: ([(e[0], bytes(e[1].properties), bytes(e[1].body), e[1].persistent, e[2], e[3])
                    for e in queues[name].ready], queues[name].ready_bytes, queues[name]._seq)
            for name in "abc"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([PLAIN, PERSISTENT, CC_SIDE]), st.binary(max_size=8)), min_size=1,
                max_size=12),
       st.sampled_from([("ex", "main"), ("ex", "side"), ("ex", "nowhere"), ("", "a")]), st.booleans(),
       st.booleans())
def test_a_run_ends_as_its_publishes_one_by_one(tmp_path_factory, messages, destination, mandatory, consumer):
    tmp = tmp_path_factory.mktemp("run")
    props, bodies = [p for p, _ in messages], [b for _, b in messages]
    one_broker, one = world(tmp, "one", consumer)
    for p, b in messages:
        one.publish(*destination, p, b, mandatory)
    run_broker, run = world(tmp, "run", consumer)
    assert run.publish_run(*destination, props, bodies, mandatory) == len(messages)
    assert contents(run_broker) == contents(one_broker)
    assert run.sink.returns == one.sink.returns
    assert run.sink.delivered == one.sink.delivered
    assert (run.stats_publish, run.confirms.published_upto) == (one.stats_publish, one.confirms.published_upto)
    ex = destination[0]
    assert run.vhost.exchanges[ex].stats_publish_in == one.vhost.exchanges[ex].stats_publish_in


def test_the_messages_of_a_run_are_out_of_the_collectors_sight(tmp_path):
    if message_module.untrack is None:
        pytest.skip("warren.broker._messages is not built: messages stay tracked")
    broker, ch = world(tmp_path, "gc")
    # the first publish on a channel checks the permission one by one; the rest runs
    ch.publish_run("ex", "main", [PLAIN, PLAIN, PERSISTENT], [b"0", b"1", b"2"], False)
    queued = [e[1] for e in broker.vhosts["/"].queues["a"].ready][1:]
    assert len(queued) == 2 and not any(gc.is_tracked(m) for m in queued)
    assert queued[1].persistent and queued[0].decoded.delivery_mode is None  # untracked, still whole
