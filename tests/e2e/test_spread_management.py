"""The HTTP API and the Prometheus endpoint of a node whose vhost is spread over two worker
processes (`--workers 2 --worker-mode queues`, warren/spread): whichever worker's API or
scrape answers, it answers for the whole node, as one process would. The queues used here are
named to land on a chosen worker (``owned_by``), so each test crosses on purpose."""

from __future__ import annotations

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.test_spread import (  # noqa: F401 (_stop_every_node: the autouse fixture, here too)
    _stop_every_node,
    apis,
    connect,
    get,
    owned_by,
    ready,
    spread_node,
    stay,
    wait_for,
    worker_of,
)
from tests.management.api_client import call
from tests.metrics.scrape import fetch, samples

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


@pytest.fixture
def node(tmp_path):
    b = spread_node(tmp_path)
    yield b
    b.stop()


def test_a_vhost_made_through_one_workers_api_is_on_every_worker_before_the_answer(node):
    first, second = apis(node)
    assert call(second, "PUT", "/api/vhosts/spread-vh")[0] == 201
    # at once, through the other worker's API and over AMQP on either worker
    assert call(first, "PUT", "/api/queues/spread-vh/q1", {"durable": True})[0] == 201
    params = pika.ConnectionParameters(node.host, node.port, "spread-vh")
    conns = [pika.BlockingConnection(params) for _ in range(2)]  # dealt out in turn: one per worker
    for i, c in enumerate(conns):
        assert c.channel().queue_declare(f"q{i + 2}").method.queue == f"q{i + 2}"
        c.close()
    assert sorted(r["name"] for r in get(second, "/api/queues/spread-vh")) == ["q1", "q2", "q3"]
    assert call(first, "DELETE", "/api/vhosts/spread-vh")[0] == 204
    assert call(second, "GET", "/api/vhosts/spread-vh")[0] == 404
    assert call(second, "PUT", "/api/queues/spread-vh/q1", {})[0] == 404


def test_each_workers_api_lists_every_consumer_and_adds_every_workers_vhost_figures(node):
    pub = connect(node, "c-cons")
    home = worker_of(node, "c-cons")
    [here], [there] = owned_by(home, "spread-mc"), owned_by(1 - home, "spread-mc")
    ch = pub.channel()
    stay(ch)  # it stays on its worker: its consumer of ``there`` is one across workers
    ch = pub.channel()
    ch.confirm_delivery()
    for q in (here, there):
        ch.queue_declare(q)
        for _ in range(3):
            ch.basic_publish("", q, b"x")
    cch = pub.channel()
    cch.basic_qos(prefetch_count=2)
    got = []
    for q in (here, there):
        cch.basic_consume(q, lambda *a: got.append(a), consumer_tag=f"tag-{q}")
    wait_for("four deliveries", lambda: pub.process_data_events(0.05) or len(got) == 4)
    conn_name = next(r["name"] for r in get(apis(node)[0], "/api/connections")
                     if r["client_properties"].get("connection_name") == "c-cons")
    for api in apis(node):
        mine = {c["consumer_tag"]: c for c in get(api, "/api/consumers/%2F") if c["consumer_tag"].startswith("tag-")}
        assert sorted(mine) == sorted([f"tag-{here}", f"tag-{there}"])
        for q in (here, there):
            c = mine[f"tag-{q}"]
            assert c["queue"] == {"name": q, "vhost": "/"}
            assert (c["prefetch_count"], c["ack_required"], c["exclusive"]) == (2, True, False)
            assert c["channel_details"]["connection_name"] == conn_name
            assert c["channel_details"]["number"] == cch.channel_number
            # the queue's own view names the consumer too (through another worker: no channel of ours)
            assert [d["consumer_tag"] for d in get(api, f"/api/queues/%2F/{q}")["consumer_details"]] == [f"tag-{q}"]
        # the consuming channel counts both, as in one process (one of them crosses to its owner)
        chans = [c for c in get(api, "/api/channels") if c["connection_details"]["name"] == conn_name]
        assert {c["number"]: c["consumer_count"] for c in chans}[cch.channel_number] == 2
        # the vhost's figures are every worker's: both queues' messages and the channel's publishes
        vhost = get(api, "/api/vhosts/%2F")
        assert (vhost["messages"], vhost["messages_ready"], vhost["messages_unacknowledged"]) == (6, 2, 4)
        assert vhost["message_stats"]["publish"] >= 6 and vhost["message_stats"]["deliver_get"] == 4
    pub.close()


def test_definitions_export_every_workers_queues_and_import_through_worker_0(node):
    qs = owned_by(0, "spread-def") + owned_by(1, "spread-def")
    c = connect(node)
    ch = c.channel()
    ch.exchange_declare("spread-def-x", "fanout", durable=True)
    for q in qs:
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, "spread-def-x")
    docs = [get(api, "/api/definitions") for api in apis(node)]
    for doc in docs:
        assert sorted(q["name"] for q in doc["queues"] if q["name"].startswith("spread-def")) == sorted(qs)
        bindings = [(b["source"], b["destination"]) for b in doc["bindings"] if b["source"] == "spread-def-x"]
        assert sorted(bindings) == sorted(("spread-def-x", q) for q in qs)  # once each
    # imported through worker 1's API: new names on both workers, bound, routing across workers
    new = owned_by(0, "spread-imp") + owned_by(1, "spread-imp")
    doc = {"exchanges": [{"name": "spread-imp-x", "vhost": "/", "type": "fanout", "durable": True}],
           "queues": [{"name": q, "vhost": "/", "durable": True} for q in new],
           "bindings": [{"source": "spread-imp-x", "vhost": "/", "destination": q, "destination_type": "queue",
                         "routing_key": ""} for q in new]}
    assert call(apis(node)[1], "POST", "/api/definitions", doc)[0] == 204
    ch.confirm_delivery()
    ch.basic_publish("spread-imp-x", "", b"hello")
    for q in new:
        wait_for(f"the message in {q}", lambda q=q: ch.queue_declare(q, passive=True).method.message_count == 1)
    # a binding to a queue no worker has stops the import, naming it
    bad = {"bindings": [{"source": "spread-imp-x", "vhost": "/", "destination": "nowhere", "destination_type": "queue"}]}
    status, body, _ = call(apis(node)[1], "POST", "/api/definitions", bad)
    assert status == 400 and "no queue 'nowhere'" in body["reason"]
    c.close()


def test_each_workers_api_reads_every_workers_streams(node):
    c = connect(node)
    ch = c.channel()
    ch.confirm_delivery()
    streams = owned_by(0, "spread-st") + owned_by(1, "spread-st")
    for s in streams:
        ch.queue_declare(s, durable=True, arguments={"x-queue-type": "stream"})
        for i in range(5):
            ch.basic_publish("", s, b"m%d" % i)
    [classic] = owned_by(1, "spread-st-classic")
    ch.queue_declare(classic)
    for api in apis(node):
        for s in streams:
            info = get(api, f"/api/streams/%2F/{s}")
            assert (info["name"], info["first_offset"], info["last_offset"], info["messages"]) == (s, 0, 4, 5)
            status, _, headers = call(api, "GET", f"/api/streams/%2F/{s}/records?offset=1&max_records=2")
            assert status == 200 and headers["X-Warren-Record-Count"] == "2"
            assert headers["X-Warren-Next-Offset"] == "3" and headers["X-Warren-Last-Offset"] == "4"
            assert get(api, f"/api/streams/%2F/{s}/offset?timestamp=0")["offset"] == 0
        status, body, _ = call(api, "GET", f"/api/streams/%2F/{classic}")
        assert status == 400 and "is not a stream" in body["reason"]
        assert call(api, "GET", "/api/streams/%2F/nowhere")[0] == 404
    c.close()


def test_each_workers_prometheus_scrape_shows_the_whole_node(tmp_path):
    b = spread_node(tmp_path, "--prometheus-port", "0")
    try:
        qs = owned_by(0, "spread-prom") + owned_by(1, "spread-prom")
        c = connect(b)
        ch = c.channel()
        ch.confirm_delivery()
        for i, q in enumerate(qs):
            ch.queue_declare(q)
            for _ in range(i + 1):
                ch.basic_publish("", q, b"x")
        for w in ready(b)["workers"]:
            base = f"http://{b.host}:{w['prometheus_port']}"
            per_object = samples(fetch(base + "/metrics/per-object")[0])
            depth = {dict(k[1])["queue"]: v for k, v in per_object.items()
                     if k[0] == "rabbitmq_queue_messages_ready" and dict(k[1]).get("queue", "").startswith("spread-prom")}
            assert depth == {q: i + 1 for i, q in enumerate(qs)}  # each queue once, whichever worker owns it
            aggregated = samples(fetch(base + "/metrics")[0])
            assert aggregated[("rabbitmq_queues", frozenset())] >= 2
            assert aggregated[("rabbitmq_global_messages_received_total", frozenset({("protocol", "amqp091")}))] >= 3
            assert aggregated[("rabbitmq_connections", frozenset())] == 1  # on one worker, shown by both
        c.close()
    finally:
        b.stop()
