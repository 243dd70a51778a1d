"""workload.py against one real Warren broker: publishers and consumers reconnect after the broker
closes every connection (the HTTP API's DELETE /api/connections/<name>), and the history they
leave checks out: nothing confirmed lost, nothing unexpected. Every wait is on the workload's own
counters or on the API."""

from __future__ import annotations

import pika

from tests.cluster.cluster_nodes import wait_until
from tests.cluster.faults.checker import check
from tests.cluster.faults.workload import Workload
from tests.management.api_client import call, q

TIMEOUT_S = 60.0


def test_the_workload_reconnects_after_its_connections_are_closed_and_loses_nothing(start_broker, uid):
    broker = start_broker()
    queue = f"faults-{uid}"
    setup = pika.BlockingConnection(pika.URLParameters(broker.url))
    setup.channel().queue_declare(queue, durable=True)
    setup.close()

    workload = Workload([broker.url], queue, publishers=2, consumers=2, queue_arguments={})
    with workload:
        wait_until(lambda: workload.counts()["confirmed"] >= 200, TIMEOUT_S, "200 confirmed ids")
        mine = wait_until(lambda: (cs := call(broker.http_url, "GET", "/api/connections")[1]) and len(cs) == 4 and cs,
                          TIMEOUT_S, "the workload's 4 connections listed")
        confirmed_before = workload.counts()["confirmed"]
        for connection in mine:
            status = call(broker.http_url, "DELETE", f"/api/connections/{q(connection['name'])}",
                          headers={"X-Reason": "fault harness test"})[0]
            assert status == 204, (status, connection["name"])
        wait_until(lambda: workload.counts()["reconnects"] >= 4, TIMEOUT_S, "each of the 4 threads reconnected")
        wait_until(lambda: workload.counts()["confirmed"] >= confirmed_before + 100, TIMEOUT_S, "100 more confirmed ids")
        workload.stop_publishing()
        assert workload.drain(TIMEOUT_S), workload.counts()

    stats = workload.stats()
    assert stats["stuck_threads"] == [] and stats["crashed_threads"] == [], stats
    assert set(stats["reconnects"]) == {"p0", "p1", "c0", "c1"}, stats
    result = check(workload.history())
    assert result.lost == 0 and result.unexpected == 0, (result.summary(), result.lost_ids[:5],
                                                         result.unexpected_ids[:5])
    assert result.ok and result.confirmed >= 300 and result.delivered >= result.confirmed, result.summary()
    # the closes answer the publishes they cut off with "unknown", never with a confirm
    assert result.published == result.confirmed + result.nacked + result.unknown, result.summary()
    print(result.summary(), stats)
