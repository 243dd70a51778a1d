"""Message counts, list paging and rate history of the management API, through real HTTP and
AMQP clients against private brokers (statistics sampled every 200 ms instead of 5 s, through
``WARREN_COLLECT_STATISTICS_INTERVAL``, so rates and history show in a second).

- vhost and overview ``message_stats`` add up the channels' counts (publish, confirm,
  return_unroutable, drop_unroutable) and the queues' (deliver, get, ack, redeliver), and keep
  them when the channels close and the queues go;
- lists filter, sort and page on cheap per-object values and build JSON for the page only:
  the answers must be those of building every object's JSON (checked field by field);
- ``msg_rates_age``/``_incr``, ``lengths_age``/``_incr``, ``data_rates_age``/``_incr`` answer
  ``samples``, ``avg`` and ``avg_rate`` as RabbitMQ 3.10 does (its shape compared with that of
  the session's private RabbitMQ node, ``rabbitmq_node``).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request

import pika
import pytest

from tests.conftest import EXTERNAL_URL, vhost_beside
from tests.management.api_client import call

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

SAMPLE_MS = "200"  # the statistics interval of these brokers


@pytest.fixture
def fast_stats(start_broker, monkeypatch):
    monkeypatch.setenv("WARREN_COLLECT_STATISTICS_INTERVAL", SAMPLE_MS)
    return start_broker


def get(b, path):
    status, body, _ = call(b.http_url, "GET", path)
    assert status == 200, (path, body)
    return body


def wait_for(fn, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not met in {timeout}s (last: {value!r})")


COUNTS = ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "get", "ack", "redeliver",
          "deliver_get")


def counts(stats: dict) -> dict:
    return {k: stats.get(k, 0) for k in COUNTS}


# --- 1. vhost and overview totals ----------------------------------------------------------------


def test_vhost_and_overview_count_channels_and_keep_counts_after_close(fast_stats, uid):
    b = fast_stats()
    name = f"t-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.queue_declare(name)
    ch.confirm_delivery()
    for i in range(7):
        ch.basic_publish("", name, f"m{i}".encode())
    returned = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("", f"nowhere-{uid}", b"r", mandatory=True)  # returned
    ch.basic_publish("", f"nowhere-{uid}", b"d")  # dropped
    for _ in range(2):
        method, _, _ = ch.basic_get(name)
        ch.basic_ack(method.delivery_tag)
    ch.basic_get(name, auto_ack=True)
    got = []
    ch.basic_consume(name, lambda c, m, p, body: (got.append(body), c.basic_ack(m.delivery_tag)))
    wait_for(lambda: conn.process_data_events(0.05) or len(got) == 4, what="4 deliveries")
    ch.basic_cancel(ch.consumer_tags[0])
    expected = {"publish": 9, "confirm": 9, "return_unroutable": 1, "drop_unroutable": 1, "deliver": 4, "get": 3,
                "ack": 6, "redeliver": 0, "deliver_get": 7}
    # the channel's own view: its confirms and unroutables
    chan = wait_for(lambda: get(b, "/api/channels"), what="a channel")[0]["message_stats"]
    assert {k: chan[k] for k in ("publish", "confirm", "return_unroutable", "drop_unroutable")} == \
        {"publish": 9, "confirm": 9, "return_unroutable": 1, "drop_unroutable": 1}
    assert counts(get(b, "/api/vhosts/%2F")["message_stats"]) == expected
    assert counts(get(b, "/api/overview")["message_stats"]) == expected
    # a message through the HTTP API counts as a publish of the vhost too
    assert call(b.http_url, "POST", "/api/exchanges/%2F/amq.default/publish",
                {"routing_key": name, "payload": "h", "payload_encoding": "string", "properties": {}})[0] == 200
    expected["publish"] += 1
    assert counts(get(b, "/api/overview")["message_stats"]) == expected
    # the rates of the vhost: its channel counts moved in the last samples
    wait_for(lambda: get(b, "/api/vhosts/%2F")["message_stats"]["confirm_details"]["rate"] == 0.0, what="rates settle")
    # the channel closes, the queue goes: the totals stay
    conn.close()
    wait_for(lambda: get(b, "/api/channels") == [], what="channel gone")
    assert call(b.http_url, "DELETE", f"/api/queues/%2F/{name}")[0] == 204
    assert counts(get(b, "/api/vhosts/%2F")["message_stats"]) == expected
    assert counts(get(b, "/api/overview")["message_stats"]) == expected
    time.sleep(0.5)  # samples taken after the close keep them too
    assert counts(get(b, "/api/overview")["message_stats"]) == expected


def test_deleted_vhost_leaves_the_overview_monotonic(fast_stats, uid):
    b = fast_stats()
    vhost = vhost_beside(f"v-{uid}")  # with --workers, a vhost of the worker whose /api/overview this is
    assert call(b.http_url, "PUT", f"/api/vhosts/{vhost}")[0] == 201
    params = pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{b.port}/{vhost}")
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("q")
    for _ in range(3):
        ch.basic_publish("", "q", b"x")
    before = counts(get(b, "/api/overview")["message_stats"])
    assert before["publish"] == 3 and before["confirm"] == 3
    assert counts(get(b, f"/api/vhosts/{vhost}")["message_stats"])["publish"] == 3
    conn.close()
    assert call(b.http_url, "DELETE", f"/api/vhosts/{vhost}")[0] == 204
    assert counts(get(b, "/api/overview")["message_stats"]) == before
    # a new vhost of the same name starts at 0, as RabbitMQ's
    assert call(b.http_url, "PUT", f"/api/vhosts/{vhost}")[0] == 201
    assert counts(get(b, f"/api/vhosts/{vhost}")["message_stats"])["publish"] == 0


# --- 2. lists: cheap keys, the page's JSON only -------------------------------------------------------


def _populate(b, uid, n=60):
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    for i in range(n):
        name = f"lq-{uid}-{i:03d}"
        ch.queue_declare(name, durable=i % 2 == 0, arguments={"x-max-length": 1000 + i % 7})
        for _ in range(i % 5):
            ch.basic_publish("", name, b"x" * (i + 1))
        if i % 10 == 0:
            ch.exchange_declare(f"lx-{uid}-{i:03d}", "topic" if i % 20 else "fanout")
            ch.queue_bind(name, f"lx-{uid}-{i:03d}", f"k.{i}")
    return conn, ch


def _project(item, columns):
    out = {}
    for col in columns:
        value = item
        for part in col.split("."):
            value = value[part]
        node = out
        parts = col.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


@pytest.mark.parametrize("path,columns", [
    ("/api/queues", ["name", "vhost", "type", "durable", "consumers", "messages", "messages_ready",
                     "messages_unacknowledged", "state", "message_stats.publish",
                     "message_stats.publish_details.rate", "message_stats.deliver_get_details.rate",
                     "messages_details.rate"]),
    ("/api/exchanges", ["name", "vhost", "type", "durable", "auto_delete", "internal",
                        "message_stats.publish_in", "message_stats.publish_out_details.rate"]),
    ("/api/bindings", ["source", "vhost", "destination", "destination_type", "routing_key"]),
])
def test_cheap_columns_and_sorts_answer_as_the_full_json(fast_stats, uid, path, columns):
    b = fast_stats()
    conn, ch = _populate(b, uid)
    try:
        def settled():  # the rates no longer move (two answers a sample apart agree)
            first = get(b, path)
            time.sleep(0.3)
            return first == get(b, path) and first

        full = wait_for(settled, what="the rates to settle")
        # columns answered from cheap values are the full JSON's values
        assert get(b, path + "?columns=" + ",".join(columns)) == [_project(i, columns) for i in full]
        # each cheap sort key orders as the full JSON does (RabbitMQ's term order, stable); a
        # second key no object has makes the list sort on every object's full JSON
        for key in columns[:6]:
            by_cheap = get(b, f"{path}?sort={key}&sort_reverse=true&columns=" + ",".join(columns))
            by_full = get(b, f"{path}?sort={key},no_such_field&sort_reverse=true&columns=" + ",".join(columns))
            assert by_cheap == by_full, key
            values = [_project(i, [key]) for i in by_cheap]
            assert values != values[::-1] or len(set(json.dumps(v) for v in values)) == 1, key
    finally:
        conn.close()


def test_pages_filters_and_sorts(broker, uid):
    conn, ch = _populate(broker, uid)
    try:
        everything = [i for i in get(broker, "/api/queues/%2F") if i["name"].startswith(f"lq-{uid}")]
        assert len(everything) == 60
        page = get(broker, f"/api/queues/%2F?page=2&page_size=7&name=lq-{uid}&sort=messages&sort_reverse=true")
        ordered = sorted(everything, key=lambda i: i["messages"])[::-1]
        # RabbitMQ reverses the sorted list (ties end up in reverse name order)
        assert [i["name"] for i in page["items"]] == [i["name"] for i in ordered[7:14]]
        first = next(i for i in everything if i["name"] == page["items"][0]["name"])
        for field in ("messages", "arguments", "durable", "message_bytes", "type", "vhost", "policy"):
            assert page["items"][0][field] == first[field], field
        assert (page["filtered_count"], page["item_count"], page["page"], page["page_count"], page["page_size"]) == \
            (60, 7, 2, 9, 7)
        regex = get(broker, f"/api/queues?page=1&page_size=500&name=^LQ-{uid}-0[0-2]&use_regex=true&columns=name")
        assert [i["name"] for i in regex["items"]] == [f"lq-{uid}-{i:03d}" for i in range(30)]
        # a sort on a field without a cheap value (built from every queue's JSON)
        by_args = get(broker, f"/api/queues/%2F?page=1&page_size=500&name=lq-{uid}&sort=arguments.x-max-length"
                              "&columns=name,arguments")
        keys = [i["arguments"]["x-max-length"] for i in by_args["items"]]
        assert keys == sorted(keys) and len(keys) == 60
        status, err, _ = call(broker.http_url, "GET", "/api/queues?page=99&page_size=500")
        assert status == 400 and err["error"] == "page_out_of_range"
        status, err, _ = call(broker.http_url, "GET", "/api/queues?page=1&name=(&use_regex=true")
        assert status == 400
    finally:
        conn.close()


def test_unpaged_list_of_many_objects_is_whole_and_valid(fast_stats, uid):
    """More queues than one slice of work: the answer is encoded in pieces and joined."""
    b = fast_stats()
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    for i in range(1500):
        ch.queue_declare(f"many-{i:05d}", arguments={"x-message-ttl": 60000})
    ch.basic_publish("", "many-00007", b"x")
    req = urllib.request.Request(b.http_url + "/api/queues", headers={
        "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(req, timeout=60) as r:
        items = json.loads(r.read())
    assert [i["name"] for i in items] == [f"many-{i:05d}" for i in range(1500)]
    assert items[7]["messages"] == 1 and items[7]["arguments"] == {"x-message-ttl": 60000}
    cols = get(b, "/api/queues?columns=name,messages")
    assert len(cols) == 1500 and cols[7] == {"name": "many-00007", "messages": 1}
    conn.close()


def test_connection_and_channel_lists_page_and_sort(fast_stats):
    b = fast_stats()
    conns = [pika.BlockingConnection(pika.URLParameters(b.url)) for _ in range(3)]
    try:
        for i, c in enumerate(conns):
            for _ in range(i + 1):
                c.channel()
        listed = wait_for(lambda: len(get(b, "/api/connections")) == 3 and get(b, "/api/connections"))
        assert [c["name"] for c in listed] == sorted(c["name"] for c in listed)
        page = get(b, "/api/connections?page=1&page_size=2&sort=channels&sort_reverse=true&columns=name,channels")
        assert [c["channels"] for c in page["items"]] == [3, 2] and page["total_count"] == 3
        chans = get(b, "/api/channels")
        assert len(chans) == 6
        assert [(c["connection_details"]["name"], c["number"]) for c in chans] == \
            sorted((c["connection_details"]["name"], c["number"]) for c in chans)
        page = get(b, "/api/channels?page=1&page_size=4&sort=number&sort_reverse=true&columns=name,number")
        assert [c["number"] for c in page["items"]] == [3, 2, 2, 1]
    finally:
        for c in conns:
            c.close()


# --- 3. rate history ------------------------------------------------------------------------------


def _check_series(details: dict, points: int, incr_ms: int) -> list:
    samples = details["samples"]
    assert len(samples) == points
    stamps = [s["timestamp"] for s in samples]
    assert stamps == sorted(stamps, reverse=True) and stamps[0] % incr_ms == 0
    assert all(a - b == incr_ms for a, b in zip(stamps, stamps[1:]))
    assert stamps[0] <= time.time() * 1000 + 1000
    values = [s["sample"] for s in samples]
    if points > 1:
        assert details["avg"] == pytest.approx(sum(values) / points)
        assert details["avg_rate"] == pytest.approx((values[0] - values[-1]) * 1000 / ((points - 1) * incr_ms))
    return values


def test_overview_and_vhost_history(fast_stats, uid):
    b = fast_stats()
    name = f"h-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.queue_declare(name)
    ch.confirm_delivery()
    for _ in range(5):
        ch.basic_publish("", name, b"x")
    query = "msg_rates_age=10&msg_rates_incr=1&lengths_age=10&lengths_incr=1&data_rates_age=10&data_rates_incr=2"
    ov = wait_for(lambda: (body := get(b, "/api/overview?" + query))["message_stats"]["publish_details"]["samples"][0][
        "sample"] == 5 and body, what="the publishes in the newest sample")
    values = _check_series(ov["message_stats"]["publish_details"], 11, 1000)
    assert values[0] == 5 and values[-1] == 0  # the broker started less than 10 s ago
    assert _check_series(ov["message_stats"]["confirm_details"], 11, 1000)[0] == 5
    assert _check_series(ov["queue_totals"]["messages_details"], 11, 1000)[0] == 5
    # the octets' points are 2 s apart: the newest may be from before the connection opened
    vh = wait_for(lambda: (body := get(b, "/api/vhosts/%2F?" + query))["recv_oct_details"]["samples"][0]["sample"]
                  and body, what="the connection's octets in the newest sample")
    assert _check_series(vh["message_stats"]["publish_details"], 11, 1000)[0] == 5
    assert _check_series(vh["messages_ready_details"], 11, 1000)[0] == 5
    recv = _check_series(vh["recv_oct_details"], 6, 2000)
    assert recv[0] > 0
    assert "samples" not in get(b, "/api/overview")["message_stats"]["publish_details"]
    conn.close()


def test_queue_history_starts_when_asked_and_grows(fast_stats, uid):
    b = fast_stats()
    name = f"hq-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.queue_declare(name)
    ch.basic_publish("", name, b"x")
    # enqueued (with --worker-mode queues the connection may first move to the queue's worker);
    # a question without ranges starts no history
    wait_for(lambda: get(b, f"/api/queues/%2F/{name}")["messages"] == 1, what="the message enqueued")
    path = f"/api/queues/%2F/{name}?msg_rates_age=8&msg_rates_incr=1&lengths_age=8&lengths_incr=1"
    first = get(b, path)
    # nothing known before the first question: a flat line at the current value
    assert _check_series(first["messages_details"], 9, 1000) == [1] * 9
    assert _check_series(first["message_stats"]["publish_details"], 9, 1000) == [1] * 9
    for _ in range(4):
        ch.basic_publish("", name, b"x")

    def grown():
        body = get(b, path)
        values = [s["sample"] for s in body["message_stats"]["publish_details"]["samples"]]
        return values[0] == 5 and values[-1] == 1 and body

    body = wait_for(grown, timeout=15, what="the queue's history to show the publishes")
    assert [s["sample"] for s in body["messages_details"]["samples"]][0] == 5
    # the list of queues answers the history of the page's queues too
    page = get(b, f"/api/queues/%2F?page=1&name={name}&msg_rates_age=4&msg_rates_incr=1")
    assert page["items"][0]["message_stats"]["publish_details"]["samples"][0]["sample"] == 5
    # a whole list starts no history: a queue nobody asked about shows its current value only
    other = f"hq2-{uid}"
    ch.queue_declare(other)
    ch.basic_publish("", other, b"x")
    wait_for(lambda: get(b, f"/api/queues/%2F/{other}")["messages"] == 1, what="the message enqueued")
    everything = get(b, "/api/queues?msg_rates_age=8&msg_rates_incr=1")
    ours = next(i for i in everything if i["name"] == name)["message_stats"]["publish_details"]["samples"]
    assert ours[0]["sample"] == 5 and len(ours) == 9
    theirs = next(i for i in everything if i["name"] == other)["message_stats"]["publish_details"]["samples"]
    assert [s["sample"] for s in theirs] == [1] * 9
    ch.basic_publish("", other, b"x")
    wait_for(lambda: get(b, f"/api/queues/%2F/{other}")["messages"] == 2)
    time.sleep(1.5)  # samples were taken with 1 and with 2: a history would show both
    theirs = next(i for i in get(b, "/api/queues?msg_rates_age=8&msg_rates_incr=1") if i["name"] == other)
    assert [s["sample"] for s in theirs["message_stats"]["publish_details"]["samples"]] == [2] * 9
    conn.close()


@pytest.mark.parametrize("query,reason", [
    ("msg_rates_age=3600&msg_rates_incr=1", "Invalid range parameters: age 3600, incr 1"),
    ("lengths_age=0&lengths_incr=5", "Invalid range parameters: age 0, incr 5"),
    ("data_rates_age=60&data_rates_incr=-5", "Invalid range parameters: age 60, incr -5"),
    ("msg_rates_age=501&msg_rates_incr=1", "Invalid range parameters: age 501, incr 1"),
])
def test_invalid_ranges_are_refused_as_rabbitmq_does(broker, query, reason):
    for path in ("/api/overview", "/api/queues", "/api/vhosts/%2F"):
        status, err, _ = call(broker.http_url, "GET", f"{path}?{query}")
        assert (status, err) == (400, {"error": "bad_request", "reason": reason}), path


def test_incomplete_or_non_integer_ranges_are_ignored(broker):
    for query in ("msg_rates_age=60", "msg_rates_age=abc&msg_rates_incr=5", "msg_rates_age=1.5&msg_rates_incr=5"):
        details = get(broker, f"/api/overview?{query}")["message_stats"]["publish_details"]
        assert set(details) == {"rate"}, query
    body = get(broker, "/api/overview?msg_rates_age=500&msg_rates_incr=1")
    assert len(body["message_stats"]["publish_details"]["samples"]) == 501


def _shape(value):
    """Keys and list lengths, not values; not Warren's own ``sampled_since`` (an added key, which
    clients of RabbitMQ's API ignore: docs/compatibility.md)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items() if k != "sampled_since"}
    if isinstance(value, list):
        return [len(value)] + ([_shape(value[0])] if value else [])
    return type(value).__name__ if not isinstance(value, (int, float)) or isinstance(value, bool) else "number"


HISTORY_KEYS = ("publish", "confirm", "deliver_get", "ack", "return_unroutable", "get_empty")


def test_history_shape_matches_the_reference_rabbitmq(fast_stats, rabbitmq_node):
    b = fast_stats()
    query = "msg_rates_age=60&msg_rates_incr=5&lengths_age=30&lengths_incr=10"
    # RabbitMQ shows message_stats and queue_totals once it has sampled some traffic (every 1 s
    # on the private node): a confirmed publish, a get and its ack, a queue
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_node.amqp_url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        queue = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", queue, b"m")
        tag = ch.basic_get(queue)[0].delivery_tag
        ch.basic_ack(tag)

        def sampled():
            status, body = rabbitmq_node.api("GET", f"/api/overview?{query}")
            stats = body.get("message_stats", {}) if status == 200 else {}
            return body if all(k + "_details" in stats for k in HISTORY_KEYS) and body["queue_totals"] else None
        theirs = wait_for(sampled, timeout=30, what="RabbitMQ's overview message_stats")
    finally:
        conn.close()
    ours = get(b, f"/api/overview?{query}")
    for key in HISTORY_KEYS:
        assert _shape(ours["message_stats"][key + "_details"]) == _shape(theirs["message_stats"][key + "_details"])
    assert _shape(ours["queue_totals"]) == _shape(theirs["queue_totals"])


def test_sampled_since_says_where_the_real_samples_begin(fast_stats, uid):
    """The points before an object's first sample repeat it (RabbitMQ's count of points is kept);
    ``sampled_since`` (Warren's own) says where the samples really begin, so that a chart draws
    no history that never was (issue 34): for a queue, when it was first asked about; for the
    overview, when the broker started."""
    b = fast_stats()
    name = f"since-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        ch.queue_declare(name)
        asked = time.time() * 1000
        details = get(b, f"/api/queues/%2F/{name}?lengths_age=60&lengths_incr=1")["messages_details"]
        _check_series(details, 61, 1000)
        since = details["sampled_since"]
        assert asked - 1000 <= since <= time.time() * 1000
        before = [s for s in details["samples"] if s["timestamp"] < since]
        assert len(before) >= 55 and {s["sample"] for s in before} == {details["samples"][-1]["sample"]}
        uptime_ms = get(b, "/api/nodes")[0]["uptime"]
        overview = get(b, "/api/overview?lengths_age=60&lengths_incr=1")["queue_totals"]["messages_details"]
        assert overview["sampled_since"] >= time.time() * 1000 - uptime_ms - 2000  # not before the broker began
    finally:
        conn.close()
