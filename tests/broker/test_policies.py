"""Policies (warren/broker/policies.py): matching, precedence, validation, the file, and
re-applying them to live queues and exchanges of a VirtualHost."""

from __future__ import annotations

import json

import pytest

from warren.broker.broker import Broker
from warren.broker.message import Message
from warren.broker.policies import (Policy, PolicyError, PolicyFile, effective_arguments, load_policies, pick,
                                    save_policies, validate_definition, validate_policy)
from warren.broker.vhost import VirtualHost
from warren.spec.amqp0_9_1 import BasicProperties


def message(body: bytes = b"body") -> Message:
    return Message("", "rk", BasicProperties().encode(), body)


def pol(name, pattern, definition, apply_to="all", priority=0, vhost="/") -> Policy:
    return validate_policy(vhost, name, pattern, apply_to, priority, definition)


# --------------------------------------------------------------------------- matching


def test_the_pattern_is_searched_unanchored_as_rabbitmq():
    p = pol("p", "ord", {"max-length": 1})
    assert p.matches("/", "queue", "orders") and p.matches("/", "queue", "my-orders")
    assert not p.matches("/", "queue", "invoices")
    assert not pol("p", "^ord", {"max-length": 1}).matches("/", "queue", "my-orders")


def test_apply_to_and_vhost_restrict_the_match():
    q = pol("q", ".*", {"max-length": 1}, apply_to="queues")
    e = pol("e", ".*", {"alternate-exchange": "ae"}, apply_to="exchanges")
    assert q.matches("/", "queue", "a") and not q.matches("/", "exchange", "a")
    assert e.matches("/", "exchange", "a") and not e.matches("/", "queue", "a")
    assert not q.matches("other", "queue", "a")


def test_the_highest_priority_wins_and_only_one_policy_applies():
    low = pol("low", ".*", {"max-length": 1, "message-ttl": 5}, priority=1)
    high = pol("high", "^a", {"max-length": 9}, priority=7)
    assert pick([low, high], "/", "queue", "abc") is high
    assert pick([low, high], "/", "queue", "xyz") is low
    eff = effective_arguments("queue", {}, pick([low, high], "/", "queue", "abc"))
    assert eff == {"x-max-length": 9}  # nothing of "low", not even message-ttl
    # a tie: the first name
    a, b = pol("a", ".*", {"max-length": 1}), pol("b", ".*", {"max-length": 2})
    assert pick([b, a], "/", "queue", "x") is a
    assert pick([], "/", "queue", "x") is None


# --------------------------------------------------------------------------- precedence


def test_a_declared_argument_beats_the_policy():
    p = pol("p", ".*", {"dead-letter-exchange": "from-policy", "overflow": "reject-publish"})
    eff = effective_arguments("queue", {"x-dead-letter-exchange": "mine"}, p)
    assert eff == {"x-dead-letter-exchange": "mine", "x-overflow": "reject-publish"}


def test_numeric_limits_take_the_lower_value():
    p = pol("p", ".*", {"max-length": 10, "message-ttl": 500, "expires": 9000, "max-length-bytes": 5,
                         "delivery-limit": 3})
    declared = {"x-max-length": 4, "x-message-ttl": 1000, "x-expires": 1000, "x-max-length-bytes": 50,
                "x-delivery-limit": 1}
    eff = effective_arguments("queue", declared, p)
    assert eff == {"x-max-length": 4, "x-message-ttl": 500, "x-expires": 1000, "x-max-length-bytes": 5,
                   "x-delivery-limit": 1}
    assert declared["x-message-ttl"] == 1000  # the declared arguments are left alone


def test_keys_only_reach_the_kind_they_are_for():
    p = pol("p", ".*", {"alternate-exchange": "ae", "max-length": 3, "message-deduplication": True})
    assert effective_arguments("queue", {}, p) == {"x-max-length": 3, "x-message-deduplication": True}
    assert effective_arguments("exchange", {}, p) == {"alternate-exchange": "ae", "x-message-deduplication": True}


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("definition", [
    {}, [], "x", {"bogus": 1}, {"max-length": -1}, {"max-length": "3"}, {"max-length": True},
    {"expires": 0}, {"overflow": "drop-tail"}, {"dead-letter-exchange": 3}, {"max-priority": 10},
    {"queue-type": "quorum"}, {"single-active-consumer": True}, {"message-deduplication": "yes"},
])
def test_bad_definitions_are_refused(definition):
    with pytest.raises(PolicyError):
        validate_definition(definition)


def test_bad_policies_are_refused():
    for args in (("/", "", ".*", "all", 0), ("/", "p", "(", "all", 0), ("/", "p", ".*", "queue", 0),
                 ("/", "p", ".*", "all", "1"), ("", "p", ".*", "all", 0)):
        with pytest.raises(PolicyError):
            validate_policy(*args, {"max-length": 1})


def test_the_file_round_trips_and_skips_bad_entries(tmp_path):
    path = tmp_path / "policies.json"
    assert load_policies(path) == []
    save_policies(path, [pol("b", "x", {"max-length": 1}, priority=3), pol("a", "y", {"expires": 5})])
    assert [(p.name, p.priority, p.definition) for p in load_policies(path)] == [
        ("a", 0, {"expires": 5}), ("b", 3, {"max-length": 1})]
    data = json.loads(path.read_text())
    data.append({"vhost": "/", "name": "bad", "pattern": ".*", "definition": {"nope": 1}})
    path.write_text(json.dumps(data))
    assert [p.name for p in load_policies(path)] == ["a", "b"]
    path.write_text("{not json")
    with pytest.raises(PolicyError):
        load_policies(path)


def test_policy_file_notices_changes(tmp_path):
    path = tmp_path / "policies.json"
    f = PolicyFile(path)
    assert f.load() == [] and not f.changed()
    save_policies(path, [pol("a", "y", {"expires": 5})])
    assert f.changed()
    assert [p.name for p in f.load()] == ["a"] and not f.changed()
    path.write_text("garbage")
    assert f.changed() and f.load() is None  # unreadable: the broker keeps what it has


# --------------------------------------------------------------------------- live entities


def test_a_policy_reconfigures_an_existing_queue_and_clearing_restores_it():
    v = VirtualHost("/")
    q = v.declare_queue(None, "jobs", False, False, False, False, {"x-max-length": 5})
    assert q.max_length == 5 and q.message_ttl is None and q.dead_letter_exchange is None
    v.set_policies([pol("p", "^jobs$", {"max-length": 10, "message-ttl": 2000, "dead-letter-exchange": "dlx",
                                        "delivery-limit": 2, "expires": 60000})])
    assert q.max_length == 5  # the lower one
    assert q.message_ttl == 2.0 and q.dead_letter_exchange == "dlx" and q.delivery_limit == 2
    assert q.expires == 60.0
    assert q.arguments == {"x-max-length": 5}  # what a redeclare is compared with
    v.declare_queue(None, "jobs", False, False, False, False, {"x-max-length": 5})  # still equivalent
    v.set_policies([])
    assert q.max_length == 5 and q.message_ttl is None and q.dead_letter_exchange is None
    assert q.delivery_limit is None and q.expires is None


def test_a_lower_max_length_drops_the_head_into_the_dlx():
    v = VirtualHost("/")
    v.declare_exchange("dlx", "fanout", False, False, False, False, {})
    catch = v.declare_queue(None, "catch", False, False, False, False, {})
    v.bind_queue(catch, "dlx", "", {})
    q = v.declare_queue(None, "long", False, False, False, False, {})
    for i in range(5):
        q.publish(Message("", "long", BasicProperties().encode(), str(i).encode()))
    v.set_policies([pol("p", "^long$", {"max-length": 2, "dead-letter-exchange": "dlx"}, apply_to="queues")])
    assert q.message_count == 2 and catch.message_count == 3
    assert [q.take(no_ack=True)[1].body for _ in range(2)] == [b"3", b"4"]


def test_a_new_queue_gets_the_policy_at_declare():
    v = VirtualHost("/")
    v.set_policies([pol("p", "^capped", {"max-length": 1})])
    q = v.declare_queue(None, "capped-1", False, False, False, False, {})
    other = v.declare_queue(None, "free", False, False, False, False, {})
    assert q.max_length == 1 and other.max_length is None


def test_policies_of_another_vhost_do_not_apply():
    v = VirtualHost("/")
    q = v.declare_queue(None, "q", False, False, False, False, {})
    v.set_policies([pol("p", ".*", {"max-length": 1}, vhost="other")])
    assert q.max_length is None


def test_an_exchange_gets_its_alternate_exchange_from_a_policy():
    v = VirtualHost("/")
    v.declare_exchange("ae", "fanout", False, False, False, False, {})
    caught = v.declare_queue(None, "caught", False, False, False, False, {})
    v.bind_queue(caught, "ae", "", {})
    ex = v.declare_exchange("src", "direct", False, False, False, False, {})
    assert ex.route(message(), ("nowhere",)) == set()
    v.set_policies([pol("p", "^src$", {"alternate-exchange": "ae"}, apply_to="exchanges")])
    assert ex.route(message(), ("nowhere",)) == {caught}
    mine = v.declare_exchange("src2", "direct", False, False, False, False, {"alternate-exchange": "none"})
    v.set_policies([pol("p", "^src", {"alternate-exchange": "ae"}, apply_to="exchanges")])
    assert mine.alternate == "none"  # the declared argument wins
    v.set_policies([])
    assert ex.route(message(), ("nowhere",)) == set()


def test_a_deduplication_policy_on_a_queue():
    v = VirtualHost("/")
    q = v.declare_queue(None, "d", False, False, False, False, {})
    v.set_policies([pol("p", "^d$", {"message-deduplication": True})])

    def dup():
        return Message("", "d", BasicProperties(headers={"x-deduplication-header": "k"}).encode(), b"x")
    q.publish(dup())
    q.publish(dup())
    assert q.message_count == 1


def test_the_broker_reads_policies_json_and_notices_changes(tmp_path):
    from warren.broker.durability import Durability
    d = Durability(tmp_path, fsync=False)
    path = tmp_path / "policies.json"
    save_policies(path, [pol("p", ".*", {"max-length": 1})])
    b = Broker(durability=d)
    q = b.vhosts["/"].declare_queue(None, "q", False, False, False, False, {})
    assert q.max_length == 1
    save_policies(path, [pol("p", ".*", {"max-length": 7})])
    b.tick(10_000.0)
    assert q.max_length == 7
    d.close([])
