"""The management node (``/management``) driven by hand with Qpid Proton: the link pair, the
request and response fields, and the statuses of refusals and of what is not served."""

from __future__ import annotations

import pytest
from proton import Message
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

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
