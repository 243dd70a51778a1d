"""Queues, exchanges, bindings and messages through the management API of a real broker, with
AMQP clients on the other side: status codes and JSON fields as RabbitMQ 3.10's."""

from __future__ import annotations

import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    from tests.conftest import launch_broker
    b = launch_broker(tmp_path_factory.mktemp("apiq"))
    yield b
    b.stop()


def api(b, method, path, body=None, **kw):
    return call(b.http_url, method, path, body, **kw)


def publish(b, name, n, body="m"):
    for i in range(n):
        status, answer, _ = api(b, "POST", "/api/exchanges/%2F/amq.default/publish",
                                {"routing_key": name, "payload": f"{body}{i}", "payload_encoding": "string",
                                 "properties": {"delivery_mode": 2, "headers": {"n": i}}})
        assert status == 200 and answer == {"routed": True}


def test_declare_statuses_and_fields(warren, uid):
    name = f"q-{uid}"
    assert api(warren, "PUT", f"/api/queues/%2F/{name}", {"durable": True, "arguments": {"x-max-length": 7}})[0] == 201
    assert api(warren, "PUT", f"/api/queues/%2F/{name}", {"durable": "true", "arguments": {"x-max-length": 7}})[0] == 204
    status, err, _ = api(warren, "PUT", f"/api/queues/%2F/{name}", {"durable": False})
    assert status == 400 and err["error"] == "bad_request" and "inequivalent arg 'durable'" in err["reason"]
    status, err, _ = api(warren, "PUT", "/api/queues/%2F/amq.x", {})
    assert (status, err) == (401, {"error": "not_authorised", "reason": "Access refused."})
    status, body, _ = api(warren, "GET", f"/api/queues/%2F/{name}")
    assert status == 200
    for field in ("name", "vhost", "type", "durable", "auto_delete", "exclusive", "arguments", "policy", "state",
                  "messages", "messages_ready", "messages_unacknowledged", "consumers", "consumer_utilisation",
                  "memory", "message_bytes", "idle_since", "message_stats", "node"):
        assert field in body, field
    assert body["arguments"] == {"x-max-length": 7} and body["type"] == "classic" and body["durable"] is True
    # the AMQP side sees the declared queue
    conn = pika.BlockingConnection(pika.URLParameters(warren.url))
    try:
        ok = conn.channel().queue_declare(name, passive=True)
        assert ok.method.message_count == 0
    finally:
        conn.close()
    assert api(warren, "DELETE", f"/api/queues/%2F/{name}")[0] == 204
    assert api(warren, "DELETE", f"/api/queues/%2F/{name}")[0] == 404


def test_get_modes_and_purge(warren, uid):
    name = f"g-{uid}"
    api(warren, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    publish(warren, name, 3, body="hello-")
    status, msgs, _ = api(warren, "POST", f"/api/queues/%2F/{name}/get",
                          {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 3})
    assert status == 200 and [m["payload"] for m in msgs] == ["hel", "hel"]
    assert msgs[0]["payload_bytes"] == 7 and msgs[0]["properties"] == {"delivery_mode": 2, "headers": {"n": 0}}
    assert msgs[1]["message_count"] == 1 and msgs[0]["redelivered"] is False
    status, msgs, _ = api(warren, "POST", f"/api/queues/%2F/{name}/get",
                          {"count": "5", "ackmode": "ack_requeue_false", "encoding": "base64"})
    assert len(msgs) == 3 and msgs[0]["redelivered"] is True and msgs[0]["payload_encoding"] == "base64"
    assert api(warren, "GET", f"/api/queues/%2F/{name}")[1]["messages"] == 0
    assert api(warren, "POST", f"/api/queues/%2F/{name}/get", {"count": 1, "ackmode": "bogus"})[0] == 400
    publish(warren, name, 4)
    assert api(warren, "DELETE", f"/api/queues/%2F/{name}/contents")[0] == 204
    assert api(warren, "GET", f"/api/queues/%2F/{name}")[1]["messages"] == 0
    status, err, _ = api(warren, "PUT", f"/api/queues/%2F/{name}", raw=b"{not json")
    assert (status, err) == (400, {"error": "bad_request", "reason": "not_json"})


def test_unacked_consumers_and_rates(warren, uid):
    name = f"r-{uid}"
    api(warren, "PUT", f"/api/queues/%2F/{name}", {})
    conn = pika.BlockingConnection(pika.URLParameters(warren.url))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=2)
        for i in range(5):
            ch.basic_publish("", name, b"x")
        ch.basic_consume(name, lambda *a: None, consumer_tag=f"tag-{uid}")
        deadline = time.monotonic() + 10
        body = {}
        while time.monotonic() < deadline:
            conn.process_data_events(0.1)
            body = api(warren, "GET", f"/api/queues/%2F/{name}")[1]
            if body["messages_unacknowledged"] == 2:
                break
        assert (body["messages"], body["messages_ready"], body["messages_unacknowledged"]) == (5, 3, 2)
        assert body["consumers"] == 1 and body["consumer_details"][0]["consumer_tag"] == f"tag-{uid}"
        assert body["message_stats"]["publish"] == 5 and body["message_stats"]["deliver_get"] == 2
        consumers = [c for c in api(warren, "GET", "/api/consumers/%2F")[1] if c["queue"]["name"] == name]
        assert consumers[0]["prefetch_count"] == 2 and consumers[0]["ack_required"] is True
        channels = api(warren, "GET", "/api/channels")[1]
        assert any(c["consumer_count"] == 1 and c["messages_unacknowledged"] == 2 for c in channels)
        # rates come from the 5-second samples: keep publishing until one shows
        deadline = time.monotonic() + 15
        rate = 0.0
        while time.monotonic() < deadline and not rate:
            for _ in range(20):
                ch.basic_publish("", name, b"y")
            conn.process_data_events(0.3)
            body = api(warren, "GET", f"/api/queues/%2F/{name}")[1]
            rate = body["message_stats"]["publish_details"]["rate"]
        assert rate > 0
        overview = api(warren, "GET", "/api/overview")[1]
        assert overview["message_stats"]["publish"] >= 25 and overview["object_totals"]["consumers"] >= 1
    finally:
        conn.close()


def test_exchanges_bindings_publish(warren, uid):
    ex, qname = f"x-{uid}", f"bq-{uid}"
    assert api(warren, "PUT", f"/api/exchanges/%2F/{ex}", {"type": "topic", "durable": True})[0] == 201
    status, err, _ = api(warren, "PUT", f"/api/exchanges/%2F/{ex}-2", {"type": "nosuch"})
    assert status == 400 and "nosuch" in err["reason"]
    api(warren, "PUT", f"/api/queues/%2F/{qname}", {})
    status, _, headers = api(warren, "POST", f"/api/bindings/%2F/e/{ex}/q/{qname}", {"routing_key": "a.#"})
    assert status == 201 and headers["Location"] == "a.%23"
    assert api(warren, "GET", f"/api/bindings/%2F/e/{ex}/q/{qname}/{q('a.%23')}")[1]["routing_key"] == "a.#"
    status, answer, _ = api(warren, "POST", f"/api/exchanges/%2F/{ex}/publish",
                            {"routing_key": "a.b", "payload": "aGk=", "payload_encoding": "base64", "properties": {}})
    assert answer == {"routed": True}
    assert api(warren, "POST", f"/api/exchanges/%2F/{ex}/publish",
               {"routing_key": "zz", "payload": "x", "payload_encoding": "string", "properties": {}})[1] == {"routed": False}
    body = api(warren, "GET", f"/api/exchanges/%2F/{ex}")[1]
    assert body["type"] == "topic" and body["message_stats"]["publish_in"] == 2
    source = api(warren, "GET", f"/api/exchanges/%2F/{ex}/bindings/source")[1]
    assert [(b["destination"], b["properties_key"]) for b in source] == [(qname, "a.%23")]
    assert api(warren, "DELETE", f"/api/bindings/%2F/e/{ex}/q/{qname}/{q('a.%23')}")[0] == 204
    assert api(warren, "GET", f"/api/exchanges/%2F/{ex}/bindings/source")[1] == []
    assert api(warren, "DELETE", f"/api/exchanges/%2F/{ex}")[0] == 204
    assert api(warren, "DELETE", "/api/exchanges/%2F/amq.direct")[0] == 401


def test_lists_take_rabbitmq_query_parameters(warren, uid):
    for i in range(5):
        api(warren, "PUT", f"/api/queues/%2F/lp-{uid}-{i}", {})
    publish(warren, f"lp-{uid}-3", 2)
    status, page, _ = api(warren, "GET", f"/api/queues/%2F?page=2&page_size=2&name=lp-{uid}&sort=name")
    assert status == 200
    assert {k: page[k] for k in ("page", "page_size", "page_count", "item_count", "filtered_count")} == {
        "page": 2, "page_size": 2, "page_count": 3, "item_count": 2, "filtered_count": 5}
    assert [i["name"] for i in page["items"]] == [f"lp-{uid}-2", f"lp-{uid}-3"]
    page = api(warren, "GET", f"/api/queues/%2F?page=1&name=^LP-{uid}-[34]$&use_regex=true")[1]
    assert [i["name"] for i in page["items"]] == [f"lp-{uid}-3", f"lp-{uid}-4"]
    cols = api(warren, "GET", "/api/queues/%2F?columns=name,messages,message_stats.publish&sort=messages"
                              "&sort_reverse=true")[1]
    assert {"name": f"lp-{uid}-3", "messages": 2, "message_stats": {"publish": 2}} in cols
    assert [c["messages"] for c in cols] == sorted((c["messages"] for c in cols), reverse=True)
    assert api(warren, "GET", "/api/queues/%2F?page=0")[1]["error"] == "invalid_pagination_parameters"
    assert api(warren, "GET", "/api/queues/%2F?page=99")[1]["error"] == "page_out_of_range"
    assert api(warren, "GET", "/api/queues/%2F?page=x")[0] == 400


def test_names_are_decoded_once(warren, uid):
    odd = f"a/b %2F c-{uid}"
    assert api(warren, "PUT", f"/api/queues/%2F/{q(odd)}", {})[0] == 201
    assert api(warren, "GET", f"/api/queues/%2F/{q(odd)}")[1]["name"] == odd
    assert api(warren, "GET", f"/api/queues/%2F/{q(odd.replace('%2F', '/'))}")[0] == 404
    assert api(warren, "GET", "/api/queues/%2F/..%2F..%2Fetc%2Fpasswd")[0] == 404
    assert api(warren, "DELETE", f"/api/queues/%2F/{q(odd)}")[0] == 204


def test_a_streams_json_gives_its_logs_octets_not_a_classic_queues_split(warren, rabbitmq_node, uid):
    """A stream's JSON has no classic byte and memory split (it said message_bytes 0 beside a log of
    hundreds of KiB, issue 34), as RabbitMQ 3.10's stream queues have none; ``bytes`` is its log's."""
    from warren.management.api.queues import CLASSIC_ONLY

    name = f"bytes-stream-{uid}"
    seen = {}
    for who, url, http in (("warren", warren.url, warren), ("rabbitmq", rabbitmq_node.amqp_url, None)):
        conn = pika.BlockingConnection(pika.URLParameters(url))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
            for _ in range(10):
                ch.basic_publish("", name, b"x" * 100)
            deadline = time.monotonic() + 30
            while True:  # RabbitMQ's management figures lag its stream by a statistics interval
                if http is not None:
                    status, body, _ = call(http.http_url, "GET", f"/api/queues/%2F/{name}")
                else:
                    status, body = rabbitmq_node.api("GET", f"/api/queues/%2F/{name}")
                if status == 200 and body.get("messages") == 10 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            seen[who] = body
            ch.queue_delete(name)
        finally:
            conn.close()
    ours, theirs = seen["warren"], seen["rabbitmq"]
    assert ours["messages"] == theirs["messages"] == 10
    assert not set(CLASSIC_ONLY) & set(theirs)  # what RabbitMQ leaves out of a stream's JSON
    assert not set(CLASSIC_ONLY) & set(ours)
    assert ours["bytes"] >= 10 * 100  # the log's octets: the ten bodies and their framing
