"""End-to-end queue tests over TCP with pika (RabbitMQ is the reference).

Server-named queues, passive declares, exclusive and auto-delete queues, argument
equivalence, declare-ok counts, bind/unbind, purge and conditional deletes.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import (
    ACCESS_REFUSED, NOT_FOUND, PRECONDITION_FAILED, RESOURCE_LOCKED, connect, exists, get,
    make_exchange, make_queue, passive_counts, probe, publish_n, wait_for_count, wait_until,
)

pytestmark = pytest.mark.timeout(60)


def queue_exists(conn, name: str) -> bool:
    return exists(conn, "queue", name)


def probe_queue(conn, name: str) -> int:
    """200 if a passive declare of `name` succeeds on `conn`, else the channel-close reply code."""
    return probe(conn, "queue", name)


# --------------------------------------------------------------------------- naming


def test_server_named_queue_gets_a_name_starting_with_amq_gen(conn, ch):
    ok = ch.queue_declare("", exclusive=True)
    name = ok.method.queue
    assert name.startswith("amq.gen-")
    assert len(name) > len("amq.gen-")
    assert queue_exists(conn, name)


def test_server_named_queues_get_distinct_names(ch):
    names = {ch.queue_declare("", exclusive=True).method.queue for _ in range(5)}
    assert len(names) == 5


def test_server_named_queue_is_usable_with_the_default_exchange(ch):
    name = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", name, b"to-generated")
    method, _, body = get(ch, name, auto_ack=True, interval=0.05)
    if method is None:
        pytest.fail("message not delivered to the server-named queue")
    assert body == b"to-generated"


def test_declaring_a_queue_with_the_reserved_amq_prefix_is_refused_with_403(ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"amq.custom-{uid}")
    assert ei.value.reply_code == ACCESS_REFUSED


# --------------------------------------------------------------------------- passive


def test_passive_declare_of_a_missing_queue_fails_with_404_and_the_connection_stays_usable(conn, ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"missing-{uid}", passive=True)
    assert ei.value.reply_code == NOT_FOUND
    assert ch.is_closed
    assert conn.is_open
    ch2 = conn.channel()
    ok = ch2.queue_declare("", exclusive=True)
    assert ok.method.queue.startswith("amq.gen-")


def test_passive_declare_ignores_the_attributes_given(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-passive-{uid}", durable=False)
    ok = ch.queue_declare(q, passive=True, durable=True, arguments={"x-message-ttl": 5})
    assert ok.method.queue == q


# --------------------------------------------------------------------------- exclusive


def test_exclusive_queue_declared_from_a_second_connection_fails_with_405(broker, conn, ch, uid):
    q = f"q-excl-{uid}"
    ch.queue_declare(q, exclusive=True)
    other = connect(broker)
    try:
        with pytest.raises(ChannelClosedByBroker) as ei:
            other.channel().queue_declare(q, exclusive=True)
        assert ei.value.reply_code == RESOURCE_LOCKED
        with pytest.raises(ChannelClosedByBroker) as ei:
            other.channel().queue_declare(q)
        assert ei.value.reply_code == RESOURCE_LOCKED
        with pytest.raises(ChannelClosedByBroker) as ei:
            other.channel().queue_declare(q, passive=True)
        assert ei.value.reply_code == RESOURCE_LOCKED
        assert other.is_open
    finally:
        other.close()


def test_consuming_from_another_connections_exclusive_queue_fails_with_405(broker, ch, uid):
    q = f"q-exclc-{uid}"
    ch.queue_declare(q, exclusive=True)
    other = connect(broker)
    try:
        och = other.channel()
        with pytest.raises(ChannelClosedByBroker) as ei:
            och.basic_consume(q, lambda *a: None)
            other.process_data_events(time_limit=0.5)
            och.basic_qos(prefetch_count=1)
        assert ei.value.reply_code == RESOURCE_LOCKED
    finally:
        other.close()


def test_exclusive_queue_is_usable_from_another_channel_of_the_same_connection(conn, ch, uid):
    q = f"q-exclsame-{uid}"
    ch.queue_declare(q, exclusive=True)
    ch2 = conn.channel()
    ch2.queue_declare(q, passive=True)
    ch2.basic_publish("", q, b"same-conn")
    method, _, body = get(ch2, q, auto_ack=True, interval=0.05)
    if method is None:
        pytest.fail("message not delivered")
    assert body == b"same-conn"


def test_exclusive_queue_is_deleted_when_its_connection_closes(broker, conn, uid):
    q = f"q-excldel-{uid}"
    owner = connect(broker)
    owner.channel().queue_declare(q, exclusive=True)
    assert probe_queue(conn, q) == RESOURCE_LOCKED  # exists, but owned by another connection
    owner.close()
    assert wait_until(lambda: probe_queue(conn, q) == NOT_FOUND)


def test_exclusive_queue_survives_its_declaring_channel_closing(broker, conn, uid):
    q = f"q-exclch-{uid}"
    chan = conn.channel()
    chan.queue_declare(q, exclusive=True)
    chan.close()
    assert queue_exists(conn, q)


# --------------------------------------------------------------------------- auto-delete


def test_auto_delete_queue_is_deleted_after_its_last_consumer_cancels(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-ad-{uid}", auto_delete=True)
    t1 = ch.basic_consume(q, lambda *a: None)
    t2 = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(t1)
    assert queue_exists(conn, q), "auto-delete queue deleted while a consumer remained"
    ch.basic_cancel(t2)
    assert wait_until(lambda: not queue_exists(conn, q))


def test_auto_delete_queue_without_consumers_is_not_deleted(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-ad0-{uid}", auto_delete=True)
    time.sleep(0.3)
    assert queue_exists(conn, q)


def test_auto_delete_queue_is_deleted_when_its_consumer_channel_closes(conn, cleanup, uid):
    q = f"q-adch-{uid}"
    cleanup["queues"].append(q)
    chan = conn.channel()
    chan.queue_declare(q, auto_delete=True)
    chan.basic_consume(q, lambda *a: None)
    chan.close()
    assert wait_until(lambda: not queue_exists(conn, q))


# --------------------------------------------------------------------------- equivalence


def test_redeclaring_a_queue_with_identical_arguments_succeeds(ch, cleanup, uid):
    q = f"q-args-{uid}"
    cleanup["queues"].append(q)
    args = {"x-message-ttl": 60000, "x-max-length": 100}
    ch.queue_declare(q, arguments=args)
    ok = ch.queue_declare(q, arguments=dict(args))
    assert ok.method.queue == q


def test_redeclaring_a_queue_with_a_different_durable_flag_fails_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-eqd-{uid}", durable=False)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, durable=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert conn.is_open
    conn.channel().queue_declare(q, durable=False)


def test_redeclaring_a_queue_with_a_different_message_ttl_fails_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-eqt-{uid}", arguments={"x-message-ttl": 60000})
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, arguments={"x-message-ttl": 1000})
    assert ei.value.reply_code == PRECONDITION_FAILED
    # The arguments were kept: the original declaration is still equivalent.
    conn.channel().queue_declare(q, arguments={"x-message-ttl": 60000})


def test_redeclaring_a_queue_without_its_message_ttl_argument_fails_with_406(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-eqt2-{uid}", arguments={"x-message-ttl": 60000})
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_redeclaring_a_queue_with_a_different_auto_delete_flag_fails_with_406(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-eqa-{uid}", auto_delete=False)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, auto_delete=True)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_a_message_ttl_argument_is_enforced(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-ttl-{uid}", arguments={"x-message-ttl": 100})
    ch.basic_publish("", q, b"short-lived")
    time.sleep(0.6)
    method, _, _ = ch.basic_get(q, auto_ack=True)
    assert method is None


# --------------------------------------------------------------------------- declare-ok counts


def test_declare_ok_reports_the_message_count(conn, ch, cleanup, uid):
    q = f"q-cnt-{uid}"
    cleanup["queues"].append(q)
    ok = ch.queue_declare(q)
    assert ok.method.message_count == 0
    assert ok.method.consumer_count == 0
    publish_n(ch, q, 7)
    assert wait_for_count(conn, q, 7) == 7
    ok = ch.queue_declare(q)  # a non-passive redeclare reports the counts too
    assert (ok.method.message_count, ok.method.consumer_count) == (7, 0)


def test_declare_ok_reports_the_consumer_count(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-ccnt-{uid}")
    ch.basic_consume(q, lambda *a: None)
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()
    other.basic_consume(q, lambda *a: None)
    assert passive_counts(conn, q) == (0, 3)


def test_declare_ok_message_count_excludes_unacknowledged_messages(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-unack-{uid}")
    publish_n(ch, q, 3)
    assert wait_for_count(conn, q, 3) == 3
    method, _, _ = ch.basic_get(q, auto_ack=False)
    assert method is not None
    assert passive_counts(conn, q) == (2, 0)
    ch.close()  # the unacked message goes back to the queue
    assert wait_until(lambda: passive_counts(conn, q)[0] == 3)


# --------------------------------------------------------------------------- bind / unbind


def test_queue_bind_routes_and_queue_unbind_stops_routing(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-bind-{uid}")
    ex = make_exchange(ch, cleanup, f"ex-bind-{uid}", "direct")
    ok = ch.queue_bind(q, ex, routing_key="key-a")
    assert isinstance(ok.method, pika.spec.Queue.BindOk)
    ch.basic_publish(ex, "key-a", b"1")
    ch.basic_publish(ex, "key-b", b"not-bound")
    assert wait_for_count(conn, q, 1) == 1
    ok = ch.queue_unbind(q, ex, routing_key="key-a")
    assert isinstance(ok.method, pika.spec.Queue.UnbindOk)
    ch.basic_publish(ex, "key-a", b"2")
    time.sleep(0.2)
    assert passive_counts(conn, q)[0] == 1


def test_binding_twice_is_idempotent(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-bind2-{uid}")
    ex = make_exchange(ch, cleanup, f"ex-bind2-{uid}", "direct")
    ch.queue_bind(q, ex, routing_key="k")
    ch.queue_bind(q, ex, routing_key="k")
    ch.basic_publish(ex, "k", b"once")
    assert wait_for_count(conn, q, 1) == 1
    time.sleep(0.2)
    assert passive_counts(conn, q)[0] == 1
    ch.queue_unbind(q, ex, routing_key="k")
    ch.basic_publish(ex, "k", b"none")
    time.sleep(0.2)
    assert passive_counts(conn, q)[0] == 1


def test_unbinding_a_binding_that_does_not_exist_succeeds(ch, cleanup, uid):
    # AMQP 0-9-1 / RabbitMQ (>= 3.2): unbinding a missing binding is a no-op.
    q = make_queue(ch, cleanup, f"q-unb-{uid}")
    ex = make_exchange(ch, cleanup, f"ex-unb-{uid}", "direct")
    ok = ch.queue_unbind(q, ex, routing_key="never-bound")
    assert isinstance(ok.method, pika.spec.Queue.UnbindOk)


def test_binding_a_missing_queue_fails_with_404(ch, cleanup, uid):
    ex = make_exchange(ch, cleanup, f"ex-bmq-{uid}", "direct")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(f"missing-{uid}", ex, routing_key="k")
    assert ei.value.reply_code == NOT_FOUND


def test_binding_to_a_missing_exchange_fails_with_404(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-bme-{uid}")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(q, f"missing-{uid}", routing_key="k")
    assert ei.value.reply_code == NOT_FOUND


# --------------------------------------------------------------------------- purge / delete


def test_purge_returns_the_number_of_messages_removed(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-purge-{uid}")
    publish_n(ch, q, 12)
    assert wait_for_count(conn, q, 12) == 12
    ok = ch.queue_purge(q)
    assert ok.method.message_count == 12
    assert passive_counts(conn, q)[0] == 0
    ok = ch.queue_purge(q)
    assert ok.method.message_count == 0


def test_purge_leaves_unacknowledged_messages_alone(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-purgeu-{uid}")
    publish_n(ch, q, 4)
    assert wait_for_count(conn, q, 4) == 4
    method, _, _ = ch.basic_get(q, auto_ack=False)
    ok = conn.channel().queue_purge(q)
    assert ok.method.message_count == 3
    ch.basic_ack(method.delivery_tag)  # still a valid delivery after the purge
    ch.close()
    time.sleep(0.2)
    assert passive_counts(conn, q)[0] == 0


def test_purging_a_missing_queue_fails_with_404(ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_purge(f"missing-{uid}")
    assert ei.value.reply_code == NOT_FOUND


def test_delete_if_unused_with_a_consumer_fails_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-diu-{uid}")
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        other.queue_delete(q, if_unused=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert queue_exists(conn, q)


def test_delete_if_unused_without_consumers_succeeds(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-diu2-{uid}")
    publish_n(ch, q, 2)
    assert wait_for_count(conn, q, 2) == 2
    ok = ch.queue_delete(q, if_unused=True)
    assert ok.method.message_count == 2
    assert not queue_exists(conn, q)


def test_delete_if_empty_with_messages_fails_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-die-{uid}")
    publish_n(ch, q, 1)
    assert wait_for_count(conn, q, 1) == 1
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_delete(q, if_empty=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert queue_exists(conn, q)


def test_delete_if_empty_on_an_empty_queue_succeeds(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-die2-{uid}")
    ok = ch.queue_delete(q, if_empty=True)
    assert ok.method.message_count == 0
    assert not queue_exists(conn, q)


def test_delete_returns_the_message_count(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-del-{uid}")
    publish_n(ch, q, 9)
    assert wait_for_count(conn, q, 9) == 9
    ok = ch.queue_delete(q)
    assert isinstance(ok.method, pika.spec.Queue.DeleteOk)
    assert ok.method.message_count == 9
    assert not queue_exists(conn, q)


def test_deleting_a_missing_queue_succeeds_with_zero_messages(ch, uid):
    # RabbitMQ (>= 3.2) treats queue.delete of a missing queue as a no-op.
    ok = ch.queue_delete(f"never-declared-{uid}")
    assert ok.method.message_count == 0


def test_deleting_a_queue_removes_its_bindings(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-delbind-{uid}")
    ex = make_exchange(ch, cleanup, f"ex-delbind-{uid}", "fanout")
    ch.queue_bind(q, ex)
    ch.queue_delete(q)
    ch.queue_declare(q)
    ch.basic_publish(ex, "", b"old-binding")
    time.sleep(0.2)
    assert passive_counts(conn, q)[0] == 0
