"""The web management UI in a real browser: Debian's chromium, headless, driven by Playwright
(launched with ``executable_path``; Playwright's own browser downloads are never used).

Against the session's broker (unique names), with pika on the AMQP side: log in (a wrong password first: the page's
own message, no browser dialog), watch a queue declared over AMQP appear with its depth, publish
and get a message through the UI, declare an exchange and bind it, create a user and a virtual
host, close a connection. Each step is checked through the API or the AMQP client too, not only
on the page. Bounded: one chromium for the module, a 10 s limit on every wait; the users made here are deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

CHROMIUM = os.environ.get("WARREN_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
WAIT_MS = 10_000


@pytest.fixture(scope="module")
def chromium():
    """(playwright, browser context) with a new empty profile; closed (browser process ended) after the module."""
    if EXTERNAL_URL:
        pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
    if not Path(CHROMIUM).is_file():
        pytest.skip("no chromium installed (Debian: apt-get install chromium; tools/install-test-deps does it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; it is in the test extra)")
    profile = tempfile.mkdtemp(prefix="warren-ui-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1366, "height": 900}, timeout=30_000)
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def ui_broker(broker):
    """The session's broker (every name here is unique): no start-up of its own to pay."""
    if broker.http_port is None:
        pytest.skip("needs a Warren broker with its HTTP port")
    return broker


@pytest.fixture
def page(chromium, ui_broker):
    p = chromium.new_page()
    p.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.on("dialog", lambda d: d.accept())  # the confirm() before a close or delete
    yield p
    p.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def wait_until(page, expression: str) -> None:
    """Poll a JavaScript expression until it is true, at most WAIT_MS. Not ``page.wait_for_function``:
    Playwright evaluates that predicate with ``eval`` inside the page, which the UI's CSP
    (``script-src 'self'``) refuses in some Chromium builds; ``page.evaluate`` is not subject to it."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {WAIT_MS} ms: {expression}")
        page.wait_for_timeout(50)


def login(page, broker, user="guest", password="guest"):
    page.goto(f"{broker.http_url}/")
    page.get_by_label("Username", exact=True).fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("navigation", name="Main").wait_for()


def open_section(page, section_id):
    """Open a closed section (a <details>) by its summary, as a user would."""
    page.locator(f"#{section_id} > summary").click()


def flash(page, text):
    page.locator(".flash-item", has_text=text).first.wait_for()


def wait_for(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_login_refusals_then_overview(page, ui_broker, uid):
    page.goto(f"{ui_broker.http_url}/")
    page.get_by_label("Username", exact=True).fill("guest")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    # the page's own message: the API's 401 reached the page (no browser login dialog in between)
    assert "Login failed" in page.get_by_role("alert").inner_text()
    page.get_by_label("Password").fill("guest")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    assert page.get_by_role("link", name="Admin").is_visible()  # administrator sees the admin pages
    page.locator(".chart-plot canvas").first.wait_for()  # uPlot drew the charts
    listeners = page.locator("#listeners").inner_text()
    assert str(ui_broker.port) in listeners and str(ui_broker.http_port) in listeners
    # a user without a management tag is refused by the page, a management user sees no Admin tab
    nobody, manager = f"ui-none-{uid}", f"ui-mgmt-{uid}"
    for name, tags in ((nobody, ""), (manager, "management")):
        assert call(ui_broker.http_url, "PUT", f"/api/users/{name}", {"password": "pw", "tags": tags})[0] in (201, 204)
        assert call(ui_broker.http_url, "PUT", f"/api/permissions/%2F/{name}",
                    {"configure": ".*", "write": ".*", "read": ".*"})[0] in (201, 204)
    page.get_by_role("button", name="Log out").click()
    page.get_by_label("Username", exact=True).fill(nobody)
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    assert "Not management user" in page.get_by_role("alert").inner_text()
    page.get_by_label("Password").fill("pw")
    page.get_by_label("Username", exact=True).fill(manager)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    assert page.get_by_role("link", name="Admin").count() == 0
    page.goto(f"{ui_broker.http_url}/#/users")
    page.get_by_role("heading", name="Not found").wait_for()
    for name in (nobody, manager):
        assert call(ui_broker.http_url, "DELETE", f"/api/users/{name}")[0] == 204


def test_queue_appears_publish_and_get(page, ui_broker, uid):
    name = f"ui-q-{uid}"
    login(page, ui_broker)
    page.goto(f"{ui_broker.http_url}/#/queues?name={name}")
    page.get_by_label("Refresh").select_option("2")  # the refresh interval is the user's choice
    page.get_by_text("No queues match.").wait_for()
    conn = pika.BlockingConnection(pika.URLParameters(ui_broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(name, durable=True)
        for i in range(3):
            ch.basic_publish("", name, f"amqp {i}".encode())
        # the list refreshes by itself: the queue shows up with its depth
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=name))
        row.wait_for()
        wait_for(lambda: [c.strip() for c in row.locator("td").all_inner_texts()][6:9] == ["3", "0", "3"])

        row.get_by_role("link", name=name).click()
        page.get_by_role("heading", name=f"Queue {name}").wait_for()
        open_section(page, "publish")
        form = page.get_by_role("form", name="Publish message")
        form.get_by_label("Payload", exact=True).fill("hello from the browser")
        form.get_by_role("button", name="Publish message").click()
        flash(page, "Message published.")
        assert wait_for(lambda: call(ui_broker.http_url, "GET", f"/api/queues/%2F/{name}")[1]["messages"] == 4)

        open_section(page, "get")
        form = page.get_by_role("form", name="Get messages")
        form.get_by_label("Messages", exact=True).fill("4")
        form.get_by_role("button", name="Get message(s)").click()
        got = page.get_by_role("region", name="Messages got")
        got.get_by_text("hello from the browser").wait_for()
        assert got.get_by_text("amqp 0").is_visible()
        # the default ack mode requeues: the messages are still there for the AMQP consumer
        bodies = []
        for _ in range(4):
            method, _, body = ch.basic_get(name, auto_ack=True)
            assert method is not None
            bodies.append(body)
        assert sorted(bodies) == [b"amqp 0", b"amqp 1", b"amqp 2", b"hello from the browser"]
    finally:
        conn.close()


def test_exchange_declare_bind_and_publish(page, ui_broker, uid):
    ex, queue = f"ui-x-{uid}", f"ui-bq-{uid}"
    assert call(ui_broker.http_url, "PUT", f"/api/queues/%2F/{queue}", {"durable": False})[0] in (201, 204)
    login(page, ui_broker)
    page.goto(f"{ui_broker.http_url}/#/exchanges")
    open_section(page, "add-exchange")
    section = page.locator("#add-exchange")
    section.get_by_label("Name", exact=True).fill(ex)
    section.get_by_label("Type", exact=True).select_option("topic")
    section.get_by_role("button", name="Add exchange").click()
    flash(page, f"Exchange {ex} declared")
    assert call(ui_broker.http_url, "GET", f"/api/exchanges/%2F/{ex}")[1]["type"] == "topic"

    page.get_by_role("link", name=ex, exact=True).click()
    page.get_by_role("heading", name=f"Exchange {ex}").wait_for()
    page.get_by_label("Queue name", exact=True).fill(queue)
    page.get_by_label("Routing key", exact=True).first.fill("orders.#")
    page.get_by_role("button", name="Bind").click()
    flash(page, "Binding added")
    page.get_by_role("link", name=queue).wait_for()

    open_section(page, "publish")
    form = page.get_by_role("form", name="Publish message")
    form.get_by_label("Routing key", exact=True).fill("orders.new")
    form.get_by_label("Payload", exact=True).fill("routed through the topic exchange")
    form.get_by_role("button", name="Publish message").click()
    flash(page, "Message published.")
    assert wait_for(lambda: call(ui_broker.http_url, "GET", f"/api/queues/%2F/{queue}")[1]["messages"] == 1)


def test_create_user_and_vhost(page, ui_broker, uid):
    user, vhost = f"ui-user-{uid}", f"ui-vh-{uid}"
    login(page, ui_broker)
    page.get_by_role("link", name="Admin").click()
    page.get_by_role("heading", name="Users").wait_for()
    open_section(page, "add-user")
    section = page.locator("#add-user")
    section.get_by_label("Username", exact=True).fill(user)
    section.get_by_label("Password", exact=True).fill("s3cret")
    section.get_by_label("Password (again)").fill("s3cret")
    section.get_by_role("button", name="monitoring").click()
    section.get_by_role("button", name="Add user").click()
    flash(page, f"User {user} added")
    status, body, _ = call(ui_broker.http_url, "GET", f"/api/users/{user}")
    assert status == 200 and body["tags"] == ["monitoring"]

    page.get_by_role("navigation", name="Admin").get_by_role("link", name="Virtual hosts").click()
    page.get_by_role("heading", name="Virtual hosts").wait_for()
    open_section(page, "add-vhost")
    section = page.locator("#add-vhost")
    section.get_by_label("Name", exact=True).fill(vhost)
    section.get_by_label("Description", exact=True).fill("made in the browser")
    section.get_by_role("button", name="Add virtual host").click()
    flash(page, f"Virtual host {vhost} added")
    assert call(ui_broker.http_url, "GET", f"/api/vhosts/{q(vhost)}")[1]["description"] == "made in the browser"

    # give the new user access to the new vhost from the vhost's page, then log in with it over AMQP
    page.get_by_role("link", name=vhost).click()
    page.get_by_role("heading", name=f"Virtual host {vhost}").wait_for()
    form = page.get_by_role("form", name="Set permission")
    form.get_by_label("User", exact=True).select_option(user)
    form.get_by_role("button", name="Set permission").click()
    flash(page, f"Permissions of {user} in {vhost} set")
    params = pika.ConnectionParameters(ui_broker.host, ui_broker.port, vhost, pika.PlainCredentials(user, "s3cret"))
    conn = pika.BlockingConnection(params)
    conn.close()
    assert call(ui_broker.http_url, "DELETE", f"/api/vhosts/{q(vhost)}")[0] == 204
    assert call(ui_broker.http_url, "DELETE", f"/api/users/{q(user)}")[0] == 204


def test_close_connection(page, ui_broker):
    conn = pika.BlockingConnection(pika.URLParameters(ui_broker.url))
    try:
        local_port = conn._impl._transport._sock.getsockname()[1]
        name = wait_for(lambda: next((c["name"] for c in call(ui_broker.http_url, "GET", "/api/connections")[1]
                                      if c["peer_port"] == local_port), None))
        login(page, ui_broker)
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Connections").click()
        page.get_by_role("link", name=name).click()
        page.get_by_role("heading", name=f"Connection {name}").wait_for()
        open_section(page, "close-connection")
        page.get_by_label("Reason", exact=True).fill("closed by the UI test")
        page.get_by_role("button", name="Force close").click()
        flash(page, f"Connection {name} closed")
        page.get_by_role("heading", name="Connections").wait_for()  # back to the list
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                conn.process_data_events(0.2)
        assert closed.value.reply_code == 320 and "closed by the UI test" in closed.value.reply_text
    finally:
        if conn.is_open:
            conn.close()


# the focused element, short: tag, id or text
FOCUSED = ("(() => { const e = document.activeElement; "
           "return e.tagName + (e.id ? '#' + e.id : '') + ':' + (e.textContent || '').trim().slice(0, 20); })()")


def test_keyboard_only(page, ui_broker):
    """Log in and reach a page with the keyboard alone; focus is visible on the way."""
    page.goto(f"{ui_broker.http_url}/")
    page.get_by_label("Username").wait_for()
    assert page.evaluate("document.activeElement.id") == "username"  # the form starts focused
    page.keyboard.type("guest")
    page.keyboard.press("Tab")
    page.keyboard.type("guest")
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Overview").wait_for()
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    assert skip.bounding_box()["x"] >= 0  # shown on screen once focused
    trail = []  # where each Tab went: if it never gets there, the message says where it went instead
    for _ in range(30):
        page.keyboard.press("Tab")
        trail.append(page.evaluate(FOCUSED))
        if page.evaluate("document.activeElement.textContent") == "Queues and Streams":
            break
    else:
        raise AssertionError(f"Tab never reached the Queues and Streams link; focus went {trail}; "
                             f"login form shown: {page.get_by_label('Username').count() > 0}")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none"), "keyboard focus has no visible outline"
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Queues and Streams").wait_for()
    # the new page's heading takes the focus, as a page load would put the reader at its top
    wait_until(page, "document.activeElement.tagName === 'H1'")
    # sorting is a real button in the column header
    page.get_by_role("columnheader", name="Total").get_by_role("button").focus()
    page.keyboard.press("Enter")
    wait_until(page, "location.hash.includes('sort=messages')")
    assert page.get_by_role("columnheader", name="Total").get_attribute("aria-sort") == "ascending"


def test_move_messages(page, ui_broker, uid):
    """Move by a dynamic shovel (as RabbitMQ's UI: "Move from <queue>", deleted when done) and by
    the page itself (get with automatic ack, publish, in batches): the moved messages keep their
    order, properties, headers and binary payloads, the rest stay."""
    src, dst = f"ui-src-{uid}", f"ui-dst-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(ui_broker.url))
    try:
        ch = conn.channel()
        ch.queue_declare(src)
        ch.queue_declare(dst)
        for i in range(30):
            ch.basic_publish("", src, bytes([0xFF, i]) + b"payload",
                             pika.BasicProperties(headers={"n": i}, content_type="application/octet-stream",
                                                  correlation_id=f"c{i}", delivery_mode=2))
        login(page, ui_broker)
        page.goto(f"{ui_broker.http_url}/#/queues/%2F/{src}")
        page.get_by_role("heading", name=f"Queue {src}").wait_for()
        open_section(page, "move")
        form = page.get_by_role("form", name="Move messages")
        form.get_by_label("Destination queue").fill(f"no-such-{uid}")
        form.get_by_role("button", name="Move messages").click()
        flash(page, f"No queue no-such-{uid}")

        form.get_by_label("Destination queue").fill(dst)
        form.get_by_label("How many (empty: all)").fill("10")
        form.get_by_role("button", name="Move messages").click()  # by a shovel, the default
        flash(page, f'Shovel "Move from {src}" finished')
        assert call(ui_broker.http_url, "GET", f"/api/queues/%2F/{src}")[1]["messages"] == 20
        assert call(ui_broker.http_url, "GET", f"/api/parameters/shovel/%2F/{q('Move from ' + src)}")[0] == 404

        form.get_by_label("How many (empty: all)").fill("15")  # more than one batch of the page's
        form.get_by_label("Moved by").select_option("page")
        form.get_by_role("button", name="Move messages").click()
        flash(page, f"Moved 15 message(s) to {dst}.")
        assert call(ui_broker.http_url, "GET", f"/api/queues/%2F/{src}")[1]["messages"] == 5
        moved = []
        for _ in range(25):
            _, props, body = ch.basic_get(dst, auto_ack=True)
            moved.append((props, body))
        assert [p.headers["n"] for p, _ in moved] == list(range(25))  # in order
        for i in (3, 17):  # one moved by the shovel, one by the page
            props, body = moved[i]
            assert body == bytes([0xFF, i]) + b"payload"
            assert (props.content_type, props.correlation_id, props.delivery_mode) == ("application/octet-stream",
                                                                                       f"c{i}", 2)
    finally:
        conn.close()


def test_definitions_export_and_import(page, ui_broker, uid, tmp_path):
    login(page, ui_broker)
    page.goto(f"{ui_broker.http_url}/#/definitions")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download definitions").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert {"users", "vhosts", "permissions", "queues", "exchanges", "bindings"} <= set(exported)
    assert any(u["name"] == "guest" for u in exported["users"])

    queue = f"ui-imported-{uid}"
    file = tmp_path / "defs.json"
    file.write_text(json.dumps({"queues": [{"name": queue, "vhost": "/", "durable": True, "auto_delete": False,
                                            "arguments": {"x-max-length": 10}}]}))
    page.get_by_label("Definitions file").set_input_files(str(file))
    page.get_by_role("button", name="Upload definitions").click()
    flash(page, "Definitions imported from defs.json.")
    status, body, _ = call(ui_broker.http_url, "GET", f"/api/queues/%2F/{queue}")
    assert status == 200 and body["arguments"] == {"x-max-length": 10}
    # a file that is not JSON is refused by the page with the reason
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    page.get_by_label("Definitions file").set_input_files(str(bad))
    page.get_by_role("button", name="Upload definitions").click()
    flash(page, "bad.json is not JSON")


def test_policy_and_limit(page, ui_broker, uid):
    name = f"ui-policy-{uid}"
    login(page, ui_broker)
    page.goto(f"{ui_broker.http_url}/#/policies")
    open_section(page, "add-policy")
    section = page.locator("#add-policy")
    section.get_by_label("Name", exact=True).fill(name)
    section.get_by_label("Pattern").fill(f"^ui-pol-{uid}")
    section.get_by_label("Apply to").select_option("queues")
    section.get_by_role("button", name="max-length", exact=True).click()
    section.get_by_label("Definition 1 value").fill("42")
    section.get_by_role("button", name="Add / update policy").click()
    flash(page, f"Policy {name} set")
    status, body, _ = call(ui_broker.http_url, "GET", f"/api/policies/%2F/{name}")
    assert status == 200 and body["definition"] == {"max-length": 42} and body["apply-to"] == "queues"

    page.get_by_role("navigation", name="Admin").get_by_role("link", name="Limits").click()
    form = page.get_by_role("form", name="Set limit")
    form.get_by_label("Limit", exact=True).select_option("max-queues")
    form.get_by_label("Value").fill("5000")
    form.get_by_role("button", name="Set limit").click()
    flash(page, "Limit max-queues set")
    assert call(ui_broker.http_url, "GET", "/api/vhost-limits/%2F")[1][0]["value"]["max-queues"] == 5000
    assert call(ui_broker.http_url, "DELETE", "/api/vhost-limits/%2F/max-queues")[0] == 204
    assert call(ui_broker.http_url, "DELETE", f"/api/policies/%2F/{name}")[0] == 204


def test_purge_and_delete(page, ui_broker, uid):
    queue, ex = f"ui-del-q-{uid}", f"ui-del-x-{uid}"
    base = ui_broker.http_url
    assert call(base, "PUT", f"/api/queues/%2F/{queue}", {"durable": False})[0] in (201, 204)
    assert call(base, "PUT", f"/api/exchanges/%2F/{ex}", {"type": "fanout"})[0] in (201, 204)
    for i in range(4):
        call(base, "POST", "/api/exchanges/%2F/amq.default/publish",
             {"routing_key": queue, "payload": str(i), "payload_encoding": "string", "properties": {}})
    login(page, ui_broker)
    page.goto(f"{base}/#/queues/%2F/{queue}")
    open_section(page, "purge")
    page.get_by_role("button", name="Purge messages").click()
    flash(page, f"Queue {queue} purged")
    assert call(base, "GET", f"/api/queues/%2F/{queue}")[1]["messages"] == 0
    open_section(page, "delete")
    page.get_by_role("button", name="Delete").click()
    flash(page, f"Queue {queue} deleted")
    page.get_by_role("heading", name="Queues and Streams").wait_for()
    assert call(base, "GET", f"/api/queues/%2F/{queue}")[0] == 404
    page.goto(f"{base}/#/exchanges/%2F/{ex}")
    open_section(page, "delete")
    page.get_by_role("button", name="Delete").click()
    flash(page, f"Exchange {ex} deleted")
    assert call(base, "GET", f"/api/exchanges/%2F/{ex}")[0] == 404


def test_charts_open_with_the_brokers_history_and_draw_only_what_was_sampled(page, ui_broker, uid):
    """The overview and a queue's page ask the API once for its samples of the last ten minutes
    (msg_rates_age/lengths_age), so their charts start with the history the broker has; the
    points before its first real sample (``sampled_since``: before it started, before anyone
    asked about the queue) repeat that sample and are not drawn (issue 34: history that never was)."""
    asked = []
    page.on("response", lambda r: asked.append((r.url, r.status)) if "msg_rates_age=600" in r.url else None)
    login(page, ui_broker)
    status, nodes, _ = call(ui_broker.http_url, "GET", "/api/nodes")
    started = time.time() - nodes[0]["uptime"] / 1000
    page.goto(f"{ui_broker.http_url}/#/")
    chart = page.locator("figure.chart", has_text="Message rates").first
    wait_for(lambda: (chart.get_attribute("data-points"),
                      any("/api/overview?" in url and status == 200 for url, status in asked))[1])
    wait_for(lambda: chart.get_attribute("data-seeded") == "yes" and int(chart.get_attribute("data-points") or 0) >= 2)
    assert float(chart.get_attribute("data-first")) >= started - 6  # nothing before the broker's first sample
    name = f"chart-{uid}"
    created = time.time()
    status, _, _ = call(ui_broker.http_url, "PUT", f"/api/queues/%2F/{name}", {"durable": False})
    assert status == 201
    page.goto(f"{ui_broker.http_url}/#/queues/%2F/{name}")
    queued = page.locator("figure.chart", has_text="Queued messages").first
    # (each get_attribute lets Playwright deliver the response events to `asked`)
    wait_for(lambda: (queued.get_attribute("data-points"),
                      any(f"/api/queues/%2F/{name}?" in url and status == 200 for url, status in asked))[1])
    wait_for(lambda: queued.get_attribute("data-seeded") == "yes")  # the broker's history is in
    # the queue's history begins when the page first asked: no ten minutes of a flat line before it
    assert float(queued.get_attribute("data-first")) >= created - 1
    assert call(ui_broker.http_url, "DELETE", f"/api/queues/%2F/{name}")[0] == 204
