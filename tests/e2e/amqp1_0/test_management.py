"""The management node (``/management``) driven by hand with Qpid Proton: the link pair, the
request and response fields, and the statuses of refusals and of what is not served."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from proton import Message
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from tests.conftest import skip_under_cluster

from .conftest import amqp_url


class _Paired(LinkOption):
    """The link property RabbitMQ's clients set on the management link pair."""

    def apply(self, link) -> None:
        from proton import PropertyDict, symbol
        link.properties = PropertyDict({symbol("paired"): True})


@pytest.fixture
def node(broker):
    c = BlockingConnection(amqp_url(broker), timeout=10)
    sender = c.create_sender("/management", options=_Paired())
    receiver = c.create_receiver("/management", options=_Paired())
    n = [0]

    def request(method: str, path: str, body=None):
        n[0] += 1
        sender.send(Message(id=f"req-{n[0]}", reply_to="$me", address=path, subject=method, body=body))
        answer = receiver.receive(timeout=10)
        assert answer.correlation_id == f"req-{n[0]}"
        return int(answer.subject), answer.body
    yield request
    c.close()


def test_queue_declare_read_purge_delete_and_their_statuses(node, qname):
    assert node("PUT", f"/queues/{qname}", {"durable": False, "arguments": {"x-max-length": 5}})[0] == 201
    code, info = node("PUT", f"/queues/{qname}", {"durable": False, "arguments": {"x-max-length": 5}})
    assert code == 200 and info["name"] == qname and info["arguments"] == {"x-max-length": 5}
    assert node("PUT", f"/queues/{qname}", {"durable": True})[0] == 409  # inequivalent
    code, info = node("GET", f"/queues/{qname}")
    assert code == 200 and info["message_count"] == 0 and info["type"] == "classic" and info["durable"] is False
    assert node("DELETE", f"/queues/{qname}/messages") == (200, {"message_count": 0})
    assert node("DELETE", f"/queues/{qname}") == (200, {"message_count": 0})
    assert node("GET", f"/queues/{qname}")[0] == 404


def test_paths_and_methods_not_served_are_400_and_405(node, qname):
    assert node("GET", "/nowhere")[0] == 400
    assert node("PATCH", f"/queues/{qname}")[0] == 405
    assert node("POST", "/bindings", {"source": "amq.direct"})[0] == 400
    assert node("PUT", f"/exchanges/x-{qname}", {"type": "no-such-type"})[0] in (400, 503)


def _query(**fields) -> str:
    return "/bindings?" + urlencode(fields)


def test_binding_listing_answers_each_binding_with_a_location_its_delete_takes(node, qname):
    x, x2 = f"x-{qname}", f"x2-{qname}"
    assert node("PUT", f"/queues/{qname}", {"durable": False})[0] == 201
    assert node("PUT", f"/exchanges/{x}", {"type": "direct", "durable": False})[0] == 204
    assert node("PUT", f"/exchanges/{x2}", {"type": "fanout", "durable": False})[0] == 204
    for arguments in ({}, {"a": "one"}, {"a": "two", "n": 5}):
        bind = {"source": x, "destination_queue": qname, "binding_key": "k 1", "arguments": arguments}
        assert node("POST", "/bindings", bind)[0] == 204
    assert node("POST", "/bindings", {"source": x, "destination_queue": qname, "binding_key": "other",
                                      "arguments": {}})[0] == 204
    assert node("POST", "/bindings", {"source": x, "destination_exchange": x2, "binding_key": "k 1",
                                      "arguments": {}})[0] == 204

    code, listed = node("GET", _query(src=x, dstq=qname, key="k 1"))
    assert code == 200 and len(listed) == 3
    by_args = {tuple(sorted(b["arguments"].items())): b for b in listed}
    assert set(by_args) == {(), (("a", "one"),), (("a", "two"), ("n", 5))}
    plain = by_args[()]
    assert plain["source"] == x and plain["destination_queue"] == qname and plain["binding_key"] == "k 1"
    assert "destination_exchange" not in plain
    assert plain["location"] == f"/bindings/src={x};dstq={qname};key=k%201;args="
    assert all(b["location"].startswith(f"/bindings/src={x};dstq={qname};key=k%201;args=") for b in listed)
    assert len({b["location"] for b in listed}) == 3  # each names its own arguments

    # the exchange destination is listed under dste=, and only there
    code, listed_e = node("GET", _query(src=x, dste=x2, key="k 1"))
    assert code == 200 and [(b["destination_exchange"], b["binding_key"]) for b in listed_e] == [(x2, "k 1")]
    assert node("GET", _query(src=x, dstq=x2, key="k 1")) == (200, [])

    # deleting one location leaves the others; deleting it again is still 204
    one = by_args[(("a", "one"),)]["location"]
    assert node("DELETE", one) == (204, None)
    assert node("DELETE", one) == (204, None)
    code, listed = node("GET", _query(src=x, dstq=qname, key="k 1"))
    assert sorted(len(b["arguments"]) for b in listed) == [0, 2]
    assert node("DELETE", listed_e[0]["location"]) == (204, None)
    assert node("GET", _query(src=x, dste=x2, key="k 1")) == (200, [])


def test_binding_listing_refusals_and_empty_answers(node, qname):
    assert node("GET", _query(src="amq.direct", key=""))[0] == 400  # no destination
    assert node("GET", _query(dstq=qname, key=""))[0] == 400  # no source
    assert node("GET", _query(src="", dstq=qname, key=""))[0] == 403  # the default exchange
    assert node("GET", _query(src=f"no-such-{qname}", dstq=qname, key="")) == (200, [])
    assert node("GET", _query(src="amq.direct", dstq=f"no-such-{qname}", key="k")) == (200, [])


def test_the_local_random_exchange_through_the_management_node(conn, node, qname):
    skip_under_cluster("the queues live on another node than the publisher: none is local")
    x = f"lrx-{qname}"
    queues = [f"{qname}-{i}" for i in range(2)]
    assert node("PUT", f"/exchanges/{x}", {"type": "x-local-random", "durable": False,
                                           "arguments": {"x-delayed-type": "direct"}})[0] == 204
    for q in queues:
        assert node("PUT", f"/queues/{q}", {"durable": False})[0] == 201
        assert node("POST", "/bindings", {"source": x, "destination_queue": q, "binding_key": "",
                                          "arguments": {}})[0] == 204
    # a key, or a quorum queue, is refused with 400 (RabbitMQ 4's status for a refused bind)
    assert node("POST", "/bindings", {"source": x, "destination_queue": queues[0], "binding_key": "k",
                                      "arguments": {}})[0] == 400
    assert node("PUT", f"/queues/qq-{qname}", {"durable": True, "arguments": {"x-queue-type": "quorum"}})[0] == 201
    try:
        assert node("POST", "/bindings", {"source": x, "destination_queue": f"qq-{qname}", "binding_key": "",
                                          "arguments": {}})[0] == 400
    finally:
        node("DELETE", f"/queues/qq-{qname}")
    sender = conn.create_sender(f"/exchanges/{x}")
    for i in range(40):
        sender.send(Message(body=f"m{i}", subject=f"any-{i}"))
    counts = [node("GET", f"/queues/{q}")[1]["message_count"] for q in queues]
    assert sum(counts) == 40  # one copy each (a blocking send returns once settled: routed)
    try:
        for q in queues:
            assert node("DELETE", f"/queues/{q}")[0] == 200
    finally:
        assert node("DELETE", f"/exchanges/{x}")[0] == 204
