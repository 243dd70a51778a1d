"""Definitions round trips with RabbitMQ 3.10 (the session's private node, ``rabbitmq_node``):
its export imports into Warren (users keep their password hashes and can log in), and
Warren's export imports into RabbitMQ. Everything made on RabbitMQ has a unique name and is
deleted at the end (the node serves the whole session). Skipped where rabbitmq-server is not
installed."""

from __future__ import annotations

import json

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


class Reference:
    """The session's RabbitMQ node's API: ``reference(method, path, body)`` -> (status, JSON,
    headers); the paths in ``made`` are deleted after the test."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.made: list[str] = []

    def __call__(self, method, path, body=None, **kw):
        return call(self.base, method, path, body, timeout=10, **kw)


@pytest.fixture
def reference(rabbitmq_node):
    ref = Reference(rabbitmq_node.http_url)
    yield ref
    for path in reversed(ref.made):
        ref("DELETE", path)


def only(doc: dict, vhost: str, user: str) -> dict:
    """The part of a whole-broker export that is ours: one vhost and one user."""
    keep = lambda items: [i for i in items if i.get("vhost") == vhost]  # noqa: E731
    return {
        "users": [u for u in doc["users"] if u["name"] == user],
        "vhosts": [v for v in doc["vhosts"] if v["name"] == vhost],
        "permissions": keep(doc["permissions"]),
        "topic_permissions": keep(doc.get("topic_permissions", [])),
        "parameters": keep(doc.get("parameters", [])),
        "policies": keep(doc["policies"]),
        "queues": keep(doc["queues"]),
        "exchanges": keep(doc["exchanges"]),
        "bindings": keep(doc["bindings"]),
    }


def reference_doc(rabbit: Reference, vh: str, user: str) -> dict:
    """RabbitMQ's definitions of one vhost and one user, in the whole-broker form (built from the
    per-vhost export: the whole export of a shared broker may hold anything, even JSON nested
    deeper than Python's decoder goes)."""
    per_vhost = rabbit("GET", f"/api/definitions/{q(vh)}")[1]
    for section in ("parameters", "policies", "queues", "exchanges", "bindings"):
        for item in per_vhost.get(section, []):
            item["vhost"] = vh
    return {
        "rabbit_version": per_vhost["rabbit_version"],
        "users": [rabbit("GET", f"/api/users/{q(user)}")[1]],
        "vhosts": [{"name": vh}],
        "permissions": rabbit("GET", f"/api/vhosts/{q(vh)}/permissions")[1],
        "topic_permissions": rabbit("GET", f"/api/vhosts/{q(vh)}/topic-permissions")[1],
        **{k: per_vhost.get(k, []) for k in ("parameters", "policies", "queues", "exchanges", "bindings")},
    }


def objects(doc: dict) -> dict:
    """What both brokers must agree on, order aside."""
    key = lambda d: sorted((k, json.dumps(v, sort_keys=True)) for k, v in d.items() if k != "vhost")  # noqa: E731
    return {section: sorted(key(i) for i in doc[section])
            for section in ("permissions", "topic_permissions", "policies", "queues", "exchanges", "bindings")}


def setup_reference_vhost(rabbit: Reference, vh: str, user: str) -> None:
    made = rabbit.made
    assert rabbit("PUT", f"/api/vhosts/{vh}", {})[0] == 201
    made.append(f"/api/vhosts/{vh}")
    assert rabbit("PUT", f"/api/users/{user}", {"password": "s3cret", "tags": "management"})[0] == 201
    made.insert(0, f"/api/users/{user}")
    rabbit("PUT", f"/api/permissions/{vh}/{user}", {"configure": "^q", "write": ".*", "read": ".*"})
    rabbit("PUT", f"/api/topic-permissions/{vh}/{user}", {"exchange": "tx", "write": "^a", "read": ".*"})
    rabbit("PUT", f"/api/queues/{vh}/q1", {"durable": True, "arguments": {"x-max-length": 100,
                                                                        "x-dead-letter-exchange": "dlx"}})
    rabbit("PUT", f"/api/queues/{vh}/q2", {"durable": True, "arguments": {}})
    rabbit("PUT", f"/api/exchanges/{vh}/tx", {"type": "topic", "durable": True})
    rabbit("PUT", f"/api/exchanges/{vh}/dlx", {"type": "fanout", "durable": True})
    rabbit("PUT", f"/api/exchanges/{vh}/e2e", {"type": "direct", "durable": True, "arguments": {"alternate-exchange": "dlx"}})
    rabbit("POST", f"/api/bindings/{vh}/e/tx/q/q1", {"routing_key": "a.#", "arguments": {}})
    rabbit("POST", f"/api/bindings/{vh}/e/dlx/q/q2", {"routing_key": "", "arguments": {}})
    rabbit("POST", f"/api/bindings/{vh}/e/tx/e/e2e", {"routing_key": "b.*", "arguments": {}})
    rabbit("PUT", f"/api/policies/{vh}/ttl", {"pattern": "^q2$", "definition": {"message-ttl": 60000},
                                             "apply-to": "queues", "priority": 2})
    rabbit("PUT", f"/api/vhost-limits/{vh}/max-queues", {"value": 50})
    rabbit("PUT", f"/api/user-limits/{user}/max-connections", {"value": 7})  # exported as users[].limits


def test_rabbitmq_export_imports_into_warren(reference, start_broker, uid):
    vh, user = f"h7-defs-{uid}", f"h7-user-{uid}"
    setup_reference_vhost(reference, vh, user)
    doc = reference_doc(reference, vh, user)
    b = start_broker()
    status, err, _ = call(b.http_url, "POST", "/api/definitions", doc)
    assert status == 204, err
    ours = call(b.http_url, "GET", "/api/definitions")[1]
    assert objects(only(ours, vh, user)) == objects(doc)
    assert only(ours, vh, user)["users"][0]["password_hash"] == doc["users"][0]["password_hash"]
    # RabbitMQ's password hash works for an AMQP login to Warren
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port, vh,
                                                             pika.PlainCredentials(user, "s3cret")))
    conn.close()
    # and the imported objects work: the binding routes, the policy is in force
    pub = call(b.http_url, "POST", f"/api/exchanges/{q(vh)}/tx/publish",
               {"routing_key": "a.x", "payload": "m", "payload_encoding": "string", "properties": {}})
    assert pub[1] == {"routed": True}
    assert call(b.http_url, "GET", f"/api/queues/{q(vh)}/q2")[1]["policy"] == "ttl"
    assert call(b.http_url, "GET", f"/api/vhost-limits/{q(vh)}")[1] == [{"vhost": vh, "value": {"max-queues": 50}}]
    # the user's limits came in users[].limits, and go out the same way
    assert doc["users"][0]["limits"] == {"max-connections": 7}
    assert call(b.http_url, "GET", f"/api/user-limits/{q(user)}")[1] == [{"user": user,
                                                                           "value": {"max-connections": 7}}]
    assert only(ours, vh, user)["users"][0]["limits"] == {"max-connections": 7}


def test_warren_export_imports_into_rabbitmq(reference, start_broker, uid):
    vh, user = f"h7-wexp-{uid}", f"h7-wuser-{uid}"
    b = start_broker()
    api = lambda *a: call(b.http_url, *a)  # noqa: E731
    assert api("PUT", f"/api/vhosts/{vh}", {})[0] == 201
    assert api("PUT", f"/api/users/{user}", {"password": "pw2", "tags": "monitoring"})[0] == 201
    api("PUT", f"/api/permissions/{q(vh)}/{user}", {"configure": ".*", "write": "^w", "read": ".*"})
    api("PUT", f"/api/queues/{q(vh)}/wq", {"durable": True, "arguments": {"x-message-ttl": 1000}})
    api("PUT", f"/api/exchanges/{q(vh)}/wx", {"type": "headers", "durable": True})
    api("POST", f"/api/bindings/{q(vh)}/e/wx/q/wq", {"routing_key": "", "arguments": {"x-match": "any", "k": "v"}})
    api("PUT", f"/api/policies/{q(vh)}/cap", {"pattern": "^w", "definition": {"max-length": 9}, "apply-to": "queues"})
    assert api("PUT", f"/api/user-limits/{user}/max-channels", {"value": 11})[0] == 204
    doc = only(api("GET", "/api/definitions")[1], vh, user)
    assert doc["users"][0]["limits"] == {"max-channels": 11}
    reference.made.append(f"/api/vhosts/{vh}")
    reference.made.insert(0, f"/api/users/{user}")
    status, err, _ = reference("POST", "/api/definitions", doc)
    assert status in (201, 204), err
    theirs = reference_doc(reference, vh, user)
    assert objects(theirs) == objects(doc)
    assert theirs["users"][0]["password_hash"] == doc["users"][0]["password_hash"]
    assert theirs["users"][0]["limits"] == {"max-channels": 11}  # RabbitMQ took users[].limits
    # Warren's password hash works for a login to RabbitMQ
    assert reference("GET", "/api/whoami")[0] == 200
    assert reference("GET", "/api/whoami", user=user, password="pw2")[1]["name"] == user
