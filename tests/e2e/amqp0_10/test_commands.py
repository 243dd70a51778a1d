"""The 0-10 exchange and queue classes, their results and their refusals (execution.exception
with 0-10 error codes, then the session is detached while the others carry on)."""

from __future__ import annotations

import pytest

from warren.spec import amqp0_10 as spec

from .client010 import Client010, SessionException

E = spec.ExecutionErrorCode


def _refused(session, command) -> int:
    with pytest.raises(SessionException) as e:
        session.send(command)
    return e.value.code


def test_exchange_declare_query_bind_bound_unbind_delete(client, qname):
    s = client.session(1)
    ex = qname + "-x"
    s.send(spec.ExchangeDeclare(exchange=ex, type="direct", auto_delete=False))
    s.send(spec.ExchangeDeclare(exchange=ex, passive=True))
    r = s.send(spec.ExchangeQuery(name=ex))
    assert (r.type, r.durable, r.not_found) == ("direct", False, False)
    assert s.send(spec.ExchangeQuery(name=ex + "-none")).not_found
    s.send(spec.QueueDeclare(queue=qname, auto_delete=False))
    s.send(spec.ExchangeBind(queue=qname, exchange=ex, binding_key="k"))
    bound = s.send(spec.ExchangeBound(exchange=ex, queue=qname, binding_key="k"))
    assert not (bound.exchange_not_found or bound.queue_not_found or bound.queue_not_matched
                or bound.key_not_matched)
    assert s.send(spec.ExchangeBound(exchange=ex, queue=qname, binding_key="other")).key_not_matched
    s.transfer(ex, b"routed", routing_key="k")
    assert s.send(spec.QueueQuery(queue=qname)).message_count == 1
    s.send(spec.ExchangeUnbind(queue=qname, exchange=ex, binding_key="k"))
    assert s.send(spec.ExchangeBound(exchange=ex, queue=qname)).queue_not_matched
    s.send(spec.ExchangeDelete(exchange=ex))
    assert s.send(spec.ExchangeQuery(name=ex)).not_found
    s.send(spec.QueueDelete(queue=qname))


def test_exchange_alternate_exchange_takes_unroutable_messages(session, qname):
    ae = qname + "-ae"
    session.send(spec.ExchangeDeclare(exchange=ae, type="fanout", auto_delete=True))
    session.send(spec.QueueDeclare(queue=qname, auto_delete=True))
    session.send(spec.ExchangeBind(queue=qname, exchange=ae))
    session.send(spec.ExchangeDeclare(exchange=qname + "-main", type="direct", alternate_exchange=ae))
    session.transfer(qname + "-main", b"nobody", routing_key="no-binding")
    assert session.send(spec.QueueQuery(queue=qname)).message_count == 1
    assert _refused(session, spec.ExchangeDelete(exchange=ae)) == E.NOT_ALLOWED  # in use as an alternate


def test_queue_declare_query_purge_delete_conditions(client, qname):
    s = client.session(1)
    s.send(spec.QueueDeclare(queue=qname, durable=True, arguments={"x-max-length": 5}))
    r = s.send(spec.QueueQuery(queue=qname))
    assert (r.queue, r.durable, r.exclusive, r.auto_delete, r.arguments) == (qname, True, False, False,
                                                                             {"x-max-length": 5})
    for i in range(3):
        s.transfer("", b"m", routing_key=qname, sync=False)
    s.sync()
    assert _refused(s, spec.QueueDelete(queue=qname, if_empty=True)) == E.PRECONDITION_FAILED
    s = client.session(2)
    s.send(spec.QueuePurge(queue=qname))
    assert s.send(spec.QueueQuery(queue=qname)).message_count == 0
    s.subscribe(qname, "d")
    assert _refused(s, spec.QueueDelete(queue=qname, if_unused=True)) == E.PRECONDITION_FAILED
    s = client.session(3)
    s.send(spec.QueueDelete(queue=qname))
    assert s.send(spec.QueueQuery(queue=qname)).queue == ""
    assert _refused(s, spec.QueueDelete(queue=qname)) == E.NOT_FOUND  # 0-10: the queue must exist


def test_refusals_carry_0_10_codes_and_end_only_their_session(client, qname, broker):
    cases = [
        (spec.QueueDeclare(queue=qname + "-none", passive=True), E.NOT_FOUND),
        (spec.QueuePurge(queue=""), E.ILLEGAL_ARGUMENT),
        (spec.ExchangeDeclare(exchange=qname + "-t", type="no-such-type"), E.NOT_FOUND),
        (spec.ExchangeDeclare(exchange="amq.direct", type="topic"), E.NOT_ALLOWED),
        (spec.ExchangeBind(queue=qname, exchange="", binding_key="k"), E.INVALID_ARGUMENT),
        (spec.MessageSubscribe(queue=qname + "-none", destination="d", accept_mode=0, acquire_mode=0), E.NOT_FOUND),
        (spec.MessageResume(destination="d", resume_id="r"), E.NOT_IMPLEMENTED),
        (spec.MessageCancel(destination="nobody"), E.NOT_FOUND),
    ]
    keeper = client.session(9)
    for i, (command, code) in enumerate(cases):
        s = client.session(10 + i)
        assert _refused(s, command) == code, command
        assert s.exception.command_id == 0
        client.wait(lambda e: type(e).__name__ == "SessionDetached", channel=10 + i)
    assert keeper.send(spec.ExchangeQuery(name="amq.fanout")).type == "fanout"
    # an exclusive queue of another connection is locked
    keeper.send(spec.QueueDeclare(queue=qname, exclusive=True, auto_delete=True))
    with Client010(broker) as other:
        assert _refused(other.session(1), spec.QueueDeclare(queue=qname, passive=True)) == E.RESOURCE_LOCKED


@pytest.mark.parametrize("name", ["amq.", "amq.abc123", "qpid.", "qpid.mine"])
def test_exchange_names_amq_and_qpid_are_reserved(client, name):
    s = client.session(1)
    assert _refused(s, spec.ExchangeDeclare(exchange=name, type="direct")) == E.NOT_ALLOWED
    s = client.session(2)
    s.send(spec.ExchangeDeclare(exchange="abc." + name, type="direct"))  # only as a prefix
    s.send(spec.ExchangeDeclare(exchange="amq.direct", type="direct"))  # the standard ones: redeclared as they are
    s.send(spec.ExchangeDelete(exchange="abc." + name))


def test_a_headers_binding_needs_x_match(session, qname):
    session.send(spec.QueueDeclare(queue=qname, exclusive=True, auto_delete=True))
    session.send(spec.ExchangeBind(queue=qname, exchange="amq.match", arguments={"x-match": "any", "a": "b"}))
    assert _refused(session, spec.ExchangeBind(queue=qname, exchange="amq.match",
                                               arguments={"name": "fred", "age": 3})) == E.INTERNAL_ERROR


def test_unbind_removes_a_headers_binding_made_with_arguments(session, qname):
    session.send(spec.QueueDeclare(queue=qname, exclusive=True, auto_delete=True))
    session.send(spec.ExchangeBind(queue=qname, exchange="amq.match", arguments={"x-match": "all", "a": "b"}))
    headers = spec.MessageMessageProperties(application_headers={"a": "b"})
    session.transfer("amq.match", b"one", properties=headers)
    session.send(spec.ExchangeUnbind(queue=qname, exchange="amq.match"))  # 0-10's unbind carries no arguments
    assert session.send(spec.ExchangeBound(exchange="amq.match", queue=qname)).queue_not_matched
    session.transfer("amq.match", b"two", properties=headers)
    assert session.send(spec.QueueQuery(queue=qname)).message_count == 1


def test_exclusivity_asked_for_must_be_had(client, broker, qname):
    s1 = client.session(1)
    mine, shared = qname + "-mine", qname + "-shared"
    s1.send(spec.QueueDeclare(queue=mine, exclusive=True, auto_delete=True))
    s1.send(spec.QueueDeclare(queue=shared, auto_delete=True))
    s1.send(spec.QueueDeclare(queue=mine, passive=True))
    s1.send(spec.QueueDeclare(queue=mine, passive=True, exclusive=True))  # ours: granted
    s1.send(spec.QueueDeclare(queue=shared, passive=True))
    assert _refused(client.session(2), spec.QueueDeclare(queue=shared, passive=True, exclusive=True)) \
        == E.RESOURCE_LOCKED
    s1.subscribe(shared, "d")
    assert _refused(client.session(3), spec.QueueDeclare(queue=shared, exclusive=True, auto_delete=True)) \
        == E.RESOURCE_LOCKED  # someone consumes from it
    with Client010(broker) as other:
        assert _refused(other.session(1), spec.QueueDeclare(queue=mine, exclusive=True, auto_delete=True)) \
            == E.RESOURCE_LOCKED
    s1.send(spec.QueueQuery(queue=mine))


def test_standard_exchanges_cannot_be_deleted(client):
    assert _refused(client.session(1), spec.ExchangeDelete(exchange="amq.topic")) == E.NOT_ALLOWED
    assert client.session(2).send(spec.ExchangeQuery(name="amq.topic")).type == "topic"


def test_an_exclusive_queue_that_is_not_auto_delete_outlives_its_connection_unlocked(broker, qname):
    with Client010(broker) as first:
        s = first.session(1)
        s.send(spec.QueueDeclare(queue=qname, exclusive=True))
        s.transfer("", b"kept", routing_key=qname)
        with Client010(broker) as other:  # locked while its owner lives
            assert _refused(other.session(1), spec.QueueDeclare(queue=qname, passive=True)) == E.RESOURCE_LOCKED
    with Client010(broker) as second:
        s = second.session(1)
        s.send(spec.QueueDeclare(queue=qname, exclusive=True))  # locked again, by us
        assert s.send(spec.QueueQuery(queue=qname)).exclusive
        with Client010(broker) as other:
            assert _refused(other.session(1), spec.QueueDeclare(queue=qname, passive=True)) == E.RESOURCE_LOCKED
        s.subscribe(qname, "d", accept_mode=1)
        assert s.get("d").body == b"kept"
        s.send(spec.QueueDelete(queue=qname))
