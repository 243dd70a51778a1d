#!/usr/bin/env python3
"""Screenshots of the web management UI carrying real traffic, for docs/ui/ and the README.

Starts a private broker (ephemeral ports, a temporary data folder), gives it work through pika
(a topic exchange fanning out to queues, a publisher with confirms at a varying rate, consumers
that ack and one that holds messages unacked, a stream, a policy, another vhost and user, and
--filler queues more, 10,000 by default, declared by one definitions import), opens Debian's
chromium headless through Playwright, lets the overview and a queue page draw their live charts
for --dwell seconds, and writes PNGs:

    .venv/bin/python tools/ui_screenshots.py [--out docs/ui] [--dwell 60] [--filler 10000]

Everything it starts (broker, clients, browser) is stopped at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pika

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1366, "height": 860}


def start_broker(tmp: Path) -> tuple[subprocess.Popen, dict]:
    ready = tmp / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--http-port", "0", "--data-dir", str(tmp / "data"), "--ready-file", str(ready),
                             "--no-fsync"],
                            stdout=open(tmp / "broker.log", "wb"), stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"broker exited: {(tmp / 'broker.log').read_text()}")
        if ready.exists():
            return proc, json.loads(ready.read_text())
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not start")


def api(base: str, method: str, path: str, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status


def setup_objects(base: str, filler: int) -> None:
    api(base, "PUT", "/api/vhosts/staging", {"description": "Staging environment", "tags": "staging"})
    api(base, "PUT", "/api/users/ops", {"password": "ops-password", "tags": "monitoring"})
    api(base, "PUT", "/api/users/billing-app", {"password": "billing-password", "tags": "management"})
    for vhost in ("%2F", "staging"):
        api(base, "PUT", f"/api/permissions/{vhost}/ops", {"configure": "", "write": "", "read": ".*"})
    api(base, "PUT", "/api/permissions/%2F/billing-app", {"configure": "^billing\\.", "write": ".*", "read": "^billing\\."})
    api(base, "PUT", "/api/vhost-limits/staging/max-connections", {"value": 200})
    api(base, "PUT", "/api/policies/%2F/billing-ttl", {"pattern": "^billing\\.", "apply-to": "queues", "priority": 1,
                                                       "definition": {"message-ttl": 3600000, "max-length": 100000}})
    if filler:
        api(base, "POST", "/api/definitions", {"queues": [
            {"name": f"tenant-{i:05d}.inbox", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
            for i in range(filler)]})


class Traffic:
    """Publishers and consumers in threads, each with its own pika connection."""

    def __init__(self, amqp_port: int) -> None:
        self.params = pika.ConnectionParameters("127.0.0.1", amqp_port, client_properties={"connection_name": "screenshots"})
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        conn = pika.BlockingConnection(self.params)
        ch = conn.channel()
        ch.exchange_declare("orders", "topic", durable=True)
        ch.exchange_declare("billing", "direct", durable=True)
        ch.queue_declare("orders.eu", durable=True)
        ch.queue_declare("orders.us", durable=True)
        ch.queue_declare("orders.audit", durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_declare("billing.invoices", durable=True)
        ch.queue_bind("orders.eu", "orders", "orders.eu.*")
        ch.queue_bind("orders.us", "orders", "orders.us.*")
        ch.queue_bind("orders.audit", "orders", "#")
        ch.queue_bind("billing.invoices", "billing", "invoice")
        conn.close()

    def start(self) -> None:
        for target in (self._publisher, self._eu_consumer, self._us_consumer, self._billing):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)

    def _publisher(self) -> None:
        conn = pika.BlockingConnection(self.params)
        ch = conn.channel()
        ch.confirm_delivery()
        n = 0
        t0 = time.monotonic()
        while not self.stop.is_set():
            elapsed = time.monotonic() - t0
            per_second = 120 + 80 * math.sin(elapsed / 9)  # a rate that moves, so the chart does
            region = "eu" if n % 3 else "us"
            ch.basic_publish("orders", f"orders.{region}.created", json.dumps({"order": n, "region": region}).encode(),
                             pika.BasicProperties(content_type="application/json", delivery_mode=2 if n % 2 else 1))
            n += 1
            time.sleep(1 / per_second)
        conn.close()

    def _eu_consumer(self) -> None:
        conn = pika.BlockingConnection(self.params)
        ch = conn.channel()
        ch.basic_qos(prefetch_count=20)
        for method, _, _ in ch.consume("orders.eu", inactivity_timeout=0.2):
            if self.stop.is_set():
                break
            if method is not None:
                ch.basic_ack(method.delivery_tag)
                time.sleep(0.014)  # slower than the publisher at its peak: a backlog comes and goes
        ch.cancel()
        conn.close()

    def _us_consumer(self) -> None:
        conn = pika.BlockingConnection(self.params)
        ch = conn.channel()
        ch.basic_qos(prefetch_count=150)  # takes its prefetch and acks slowly: messages stay unacked
        for method, _, _ in ch.consume("orders.us", inactivity_timeout=0.2):
            if self.stop.is_set():
                break
            if method is not None:
                time.sleep(0.03)
                ch.basic_ack(method.delivery_tag)
        ch.cancel()
        conn.close()

    def _billing(self) -> None:
        conn = pika.BlockingConnection(self.params)
        ch = conn.channel()
        n = 0
        while not self.stop.is_set():
            ch.basic_publish("billing", "invoice", f"invoice {n}".encode(),
                             pika.BasicProperties(headers={"customer": f"c-{n % 40}"}))
            n += 1
            conn.sleep(0.1)
        conn.close()


def login(page, base: str) -> None:
    page.goto(base + "/")
    page.get_by_label("Username").fill("guest")
    page.get_by_label("Password").fill("guest")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("navigation", name="Main").wait_for()
    page.get_by_label("Refresh").select_option("2")


def shoot(page, out: Path, name: str) -> None:
    page.wait_for_timeout(700)
    path = out / f"{name}.png"
    page.screenshot(path=str(path))
    print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {path.stat().st_size // 1024} KiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "ui")
    ap.add_argument("--dwell", type=float, default=60.0, help="seconds the chart pages collect samples")
    ap.add_argument("--filler", type=int, default=10_000, help="extra queues, to show paging")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="warren-ui-shots-") as tmpdir:
        tmp = Path(tmpdir)
        broker, ports = start_broker(tmp)
        base = f"http://127.0.0.1:{ports['http_port']}"
        traffic = None
        try:
            setup_objects(base, args.filler)
            traffic = Traffic(ports["port"])
            traffic.start()
            with sync_playwright() as pw:
                context = pw.chromium.launch_persistent_context(
                    str(tmp / "profile"), executable_path=args.chromium, headless=True, args=CHROMIUM_FLAGS,
                    viewport=VIEWPORT)
                try:
                    # one tab per chart page: each draws the samples it collects while open
                    overview, queue, exchange = context.new_page(), context.new_page(), context.new_page()
                    for p in (overview, queue, exchange):
                        p.set_default_timeout(30_000)
                        login(p, base)
                    queue.goto(base + "/#/queues/%2F/orders.eu")
                    queue.get_by_role("heading", name="Queue orders.eu").wait_for()
                    exchange.goto(base + "/#/exchanges/%2F/orders")
                    exchange.get_by_role("heading", name="Exchange orders").wait_for()
                    print(f"collecting {args.dwell:.0f} s of samples…")
                    time.sleep(args.dwell)
                    overview.bring_to_front()
                    shoot(overview, args.out, "overview")
                    queue.bring_to_front()
                    shoot(queue, args.out, "queue")
                    page = overview
                    page.goto(base + "/#/queues?sort=messages&rev=true&page_size=20")
                    page.get_by_role("link", name="orders.us").wait_for()
                    shoot(page, args.out, "queues")
                    exchange.bring_to_front()
                    exchange.get_by_role("link", name="orders.audit").wait_for()
                    shoot(exchange, args.out, "exchange")
                    overview.bring_to_front()
                    page.goto(base + "/#/connections")
                    page.locator("tbody tr").nth(3).wait_for()
                    shoot(page, args.out, "connections")
                    page.goto(base + "/#/users")
                    page.get_by_role("link", name="billing-app").wait_for()
                    page.locator("#add-user > summary").click()
                    shoot(page, args.out, "admin")
                finally:
                    context.close()
        finally:
            if traffic is not None:
                traffic.close()
            broker.terminate()
            try:
                broker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()


if __name__ == "__main__":
    main()
