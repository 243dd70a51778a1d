"""Dead-lettering (x-dead-letter-exchange, x-dead-letter-routing-key) with pika; RabbitMQ is the
reference: the x-death header, x-first-death-*, routing of dead letters, cycles.

Reasons covered here: rejected (reject/nack without requeue) and expired; maxlen is in
test_max_length.py, delivery_limit in test_delivery_limit.py.
"""

from __future__ import annotations

import datetime
import time

import pika
import pytest

from .helpers import get, make_exchange, make_queue, message_count, wait_until

pytestmark = pytest.mark.timeout(60)


def dlx_with_catch(ch, cleanup, uid: str, kind: str = "fanout", key: str = "") -> tuple[str, str]:
    """A dead-letter exchange of type `kind` and a queue bound to it with `key`: (exchange, queue)."""
    dlx = make_exchange(ch, cleanup, f"dlx-{uid}", kind)
    catch = make_queue(ch, cleanup, f"dl-catch-{uid}")
    ch.queue_bind(catch, dlx, key)
    return dlx, catch


def reject_one(ch, queue: str, requeue: bool = False) -> None:
    method, _, _ = get(ch, queue)
    assert method is not None, f"nothing to reject in {queue}"
    ch.basic_reject(method.delivery_tag, requeue=requeue)


# --------------------------------------------------------------------------- rejected


def test_a_rejected_message_is_republished_to_the_dlx_with_an_x_death_header(ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-src-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"body", pika.BasicProperties(content_type="text/plain", headers={"h": "v"},
                                                            delivery_mode=2, priority=3))
    reject_one(ch, src)
    method, props, body = get(ch, catch, auto_ack=True)
    assert body == b"body"
    assert method.exchange == dlx and method.routing_key == src and not method.redelivered
    assert props.content_type == "text/plain" and props.delivery_mode == 2 and props.priority == 3
    h = props.headers
    assert h["h"] == "v"
    [death] = h["x-death"]
    assert death["count"] == 1
    assert death["reason"] == "rejected"
    assert death["queue"] == src
    assert death["exchange"] == ""
    assert death["routing-keys"] == [src]
    assert isinstance(death["time"], datetime.datetime)
    assert abs(death["time"].timestamp() - time.time()) < 60
    assert "original-expiration" not in death
    assert h["x-first-death-reason"] == "rejected"
    assert h["x-first-death-queue"] == src
    assert h["x-first-death-exchange"] == ""
    assert message_count(ch.connection, src) == 0


def test_nack_without_requeue_dead_letters_every_message_it_covers(ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-nack-{uid}", arguments={"x-dead-letter-exchange": dlx})
    for i in range(3):
        ch.basic_publish("", src, f"m{i}".encode())
    tags = [get(ch, src)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[-1], multiple=True, requeue=False)
    bodies = [get(ch, catch, auto_ack=True)[2] for _ in range(3)]
    assert bodies == [b"m0", b"m1", b"m2"]


def test_ack_and_requeue_do_not_dead_letter(ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-ack-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"a")
    ch.basic_publish("", src, b"b")
    method, _, _ = get(ch, src)
    ch.basic_ack(method.delivery_tag)
    reject_one(ch, src, requeue=True)
    time.sleep(0.2)
    assert message_count(ch.connection, catch) == 0
    assert message_count(ch.connection, src) == 1


def test_the_expiration_property_is_removed_and_kept_as_original_expiration(ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-exp-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"x", pika.BasicProperties(expiration="60000"))
    reject_one(ch, src)
    _, props, _ = get(ch, catch, auto_ack=True)
    assert props.expiration is None
    assert props.headers["x-death"][0]["original-expiration"] == "60000"


def test_the_dead_letter_routing_key_replaces_the_keys_and_drops_the_cc_header(ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid, kind="direct", key="dead")
    other = make_queue(ch, cleanup, f"dl-other-{uid}")
    ch.queue_bind(other, dlx, "cc-key")
    src = make_queue(ch, cleanup, f"dl-rk-{uid}", arguments={
        "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead"})
    ch.basic_publish("", src, b"x", pika.BasicProperties(headers={"CC": ["cc-key"]}))
    reject_one(ch, src)
    method, props, _ = get(ch, catch, auto_ack=True)
    assert method.routing_key == "dead"
    assert "CC" not in props.headers
    assert props.headers["x-death"][0]["routing-keys"] == [src, "cc-key"]
    time.sleep(0.2)
    assert message_count(ch.connection, other) == 0


def test_without_a_dead_letter_routing_key_the_original_keys_route_the_dead_letter(ch, cleanup, uid):
    dlx = make_exchange(ch, cleanup, f"dlx-keys-{uid}", "direct")
    by_key = make_queue(ch, cleanup, f"dl-by-key-{uid}")
    ch.queue_bind(by_key, dlx, "orig")
    ex = make_exchange(ch, cleanup, f"dl-pub-{uid}", "direct")
    src = make_queue(ch, cleanup, f"dl-keys-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.queue_bind(src, ex, "orig")
    ch.basic_publish(ex, "orig", b"x")
    reject_one(ch, src)
    method, props, _ = get(ch, by_key, auto_ack=True)
    assert method.routing_key == "orig"
    assert props.headers["x-death"][0]["exchange"] == ex
    assert props.headers["x-first-death-exchange"] == ex


def test_a_dead_letter_exchange_that_does_not_exist_drops_the_message_silently(conn, ch, cleanup, uid):
    src = make_queue(ch, cleanup, f"dl-missing-{uid}", arguments={"x-dead-letter-exchange": f"nope-{uid}"})
    ch.basic_publish("", src, b"x")
    reject_one(ch, src)
    time.sleep(0.2)
    assert ch.is_open
    assert message_count(conn, src) == 0


def test_a_second_death_in_the_same_queue_for_the_same_reason_increments_the_count(ch, cleanup, uid):
    src = make_queue(ch, cleanup, f"dl-self-{uid}", arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"dl-self-{uid}"})
    ch.basic_publish("", src, b"x", pika.BasicProperties(expiration="60000"))
    for expected in (1, 2, 3):  # rejection cycles are allowed: a client decided each time
        reject_one(ch, src)
        method, props, _ = get(ch, src)
        assert method is not None, "a rejected message in a cycle with a rejection must not be dropped"
        [death] = props.headers["x-death"]
        assert death["count"] == expected
        assert death["reason"] == "rejected" and death["queue"] == src
        assert death["original-expiration"] == "60000"
        assert props.expiration is None
        ch.basic_reject(method.delivery_tag, requeue=True)
    assert props.headers["x-first-death-queue"] == src


def test_deaths_in_different_queues_are_listed_newest_first_and_the_first_death_stays(ch, cleanup, uid):
    q2 = f"dl-second-{uid}"
    final = make_queue(ch, cleanup, f"dl-final-{uid}")
    make_queue(ch, cleanup, q2, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": final})
    q1 = make_queue(ch, cleanup, f"dl-first-{uid}", arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q2})
    ch.basic_publish("", q1, b"x")
    reject_one(ch, q1)
    reject_one(ch, q2)
    method, props, _ = get(ch, final, auto_ack=True)
    deaths = props.headers["x-death"]
    assert [(d["queue"], d["reason"], d["count"]) for d in deaths] == [(q2, "rejected", 1), (q1, "rejected", 1)]
    assert deaths[0]["routing-keys"] == [q2] and deaths[1]["routing-keys"] == [q1]
    assert props.headers["x-first-death-queue"] == q1
    assert method.routing_key == final


# --------------------------------------------------------------------------- expired


def test_an_expired_message_is_dead_lettered_with_reason_expired_without_anyone_reading(conn, ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-ttl-{uid}", arguments={
        "x-dead-letter-exchange": dlx, "x-message-ttl": 100})
    ch.basic_publish("", src, b"x")
    # nobody touches src: the broker's own timer expires it
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    _, props, _ = get(ch, catch, auto_ack=True)
    [death] = props.headers["x-death"]
    assert death["reason"] == "expired" and death["queue"] == src
    assert "original-expiration" not in death


def test_a_message_expired_by_its_own_expiration_carries_original_expiration(conn, ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-pmttl-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"x", pika.BasicProperties(expiration="100"))
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    _, props, _ = get(ch, catch, auto_ack=True)
    assert props.expiration is None
    [death] = props.headers["x-death"]
    assert death["reason"] == "expired" and death["original-expiration"] == "100"


def test_a_queue_that_dead_letters_expired_messages_to_itself_drops_them(conn, ch, cleanup, uid):
    name = f"dl-loop-{uid}"
    make_queue(ch, cleanup, name, arguments={
        "x-message-ttl": 100, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": name})
    ch.basic_publish("", name, b"x")
    time.sleep(0.6)
    assert message_count(conn, name) == 0


def test_an_automatic_cycle_of_two_ttl_queues_ends_at_the_queue_it_started_from(conn, ch, cleanup, uid):
    to_b = make_exchange(ch, cleanup, f"dl-to-b-{uid}", "fanout")
    to_a = make_exchange(ch, cleanup, f"dl-to-a-{uid}", "fanout")
    a = make_queue(ch, cleanup, f"dl-cyc-a-{uid}", arguments={"x-message-ttl": 100, "x-dead-letter-exchange": to_b})
    b = make_queue(ch, cleanup, f"dl-cyc-b-{uid}", arguments={"x-message-ttl": 100, "x-dead-letter-exchange": to_a})
    witness = make_queue(ch, cleanup, f"dl-cyc-w-{uid}")
    ch.queue_bind(b, to_b)
    ch.queue_bind(a, to_a)
    ch.queue_bind(witness, to_a)
    ch.basic_publish("", a, b"x")
    assert wait_until(lambda: message_count(conn, witness) == 1, timeout=5)
    time.sleep(0.4)
    assert message_count(conn, a) == 0 and message_count(conn, b) == 0
    _, props, _ = get(ch, witness, auto_ack=True)
    assert [(d["queue"], d["reason"], d["count"]) for d in props.headers["x-death"]] == [
        (b, "expired", 1), (a, "expired", 1)]


def test_a_cycle_with_a_rejection_in_it_goes_on(conn, ch, cleanup, uid):
    b = f"dl-rj-b-{uid}"
    a = make_queue(ch, cleanup, f"dl-rj-a-{uid}", arguments={
        "x-message-ttl": 100, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": b})
    make_queue(ch, cleanup, b, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": a})
    ch.basic_publish("", a, b"x")
    for round_ in (1, 2):
        method, props, _ = get(ch, b, timeout=5)  # expired out of a
        assert method is not None, f"round {round_}: the message did not come back"
        deaths = {(d["queue"], d["reason"]): d["count"] for d in props.headers["x-death"]}
        assert deaths[(a, "expired")] == round_
        ch.basic_reject(method.delivery_tag, requeue=False)  # back to a, which expires it again
    assert props.headers["x-death"][0]["queue"] == a


# --------------------------------------------------------------------------- not dead-lettered


def test_purged_and_deleted_queues_do_not_dead_letter_their_messages(conn, ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    purged = make_queue(ch, cleanup, f"dl-purge-{uid}", arguments={"x-dead-letter-exchange": dlx})
    deleted = make_queue(ch, cleanup, f"dl-del-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", purged, b"p")
    ch.basic_publish("", deleted, b"d")
    ch.queue_purge(purged)
    ch.queue_delete(deleted)
    time.sleep(0.2)
    assert message_count(conn, catch) == 0


def test_a_message_rejected_after_its_queue_was_deleted_is_not_dead_lettered(conn, ch, cleanup, uid):
    dlx, catch = dlx_with_catch(ch, cleanup, uid)
    src = make_queue(ch, cleanup, f"dl-gone-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"x")
    method, _, _ = get(ch, src)
    conn.channel().queue_delete(src)
    ch.basic_reject(method.delivery_tag, requeue=False)
    time.sleep(0.2)
    assert message_count(conn, catch) == 0


# --------------------------------------------------------------------------- declare


def test_a_dead_letter_routing_key_without_an_exchange_is_refused(ch, uid):
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare(f"dl-bad-{uid}", arguments={"x-dead-letter-routing-key": "k"})
    assert ei.value.reply_code == 406


def test_a_dead_letter_exchange_that_is_not_a_string_is_refused(ch, uid):
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
        ch.queue_declare(f"dl-bad2-{uid}", arguments={"x-dead-letter-exchange": 5})
    assert ei.value.reply_code == 406


def test_a_dead_letter_the_dlx_cannot_route_goes_to_its_alternate_exchange(ch, cleanup, uid):
    ae = make_exchange(ch, cleanup, f"dl-ae-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"dl-ae-catch-{uid}")
    ch.queue_bind(catch, ae)
    dlx = make_exchange(ch, cleanup, f"dl-ae-dlx-{uid}", "direct", arguments={"alternate-exchange": ae})
    src = make_queue(ch, cleanup, f"dl-ae-src-{uid}", arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", src, b"x")
    reject_one(ch, src)
    method, props, body = get(ch, catch, auto_ack=True)
    assert body == b"x" and props.headers["x-death"][0]["reason"] == "rejected"


def test_a_persistent_dead_letter_in_a_durable_queue_survives_a_restart(start_broker, tmp_path):
    from .helpers import connect
    data = tmp_path / "dl-data"
    b = start_broker(data_dir=data)
    c = connect(b)
    chan = c.channel()
    chan.queue_declare("dl-durable-catch", durable=True)
    chan.queue_declare("dl-durable-src", durable=True, arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dl-durable-catch"})
    chan.confirm_delivery()
    chan.basic_publish("", "dl-durable-src", b"keep", pika.BasicProperties(delivery_mode=2))
    reject_one(chan, "dl-durable-src")
    assert wait_until(lambda: message_count(c, "dl-durable-catch") == 1)
    c.close()
    b.stop()
    b = start_broker(data_dir=data)
    c = connect(b)
    try:
        chan = c.channel()
        assert message_count(c, "dl-durable-src") == 0
        _, props, body = get(chan, "dl-durable-catch", auto_ack=True)
        assert body == b"keep" and props.delivery_mode == 2
        assert props.headers["x-death"][0]["queue"] == "dl-durable-src"
    finally:
        c.close()
