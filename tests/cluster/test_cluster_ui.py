"""The web UI's overview of a cluster in a real browser (Debian's chromium through Playwright, as
tests/management/test_ui_browser.py drives it): two real nodes on one etcd; node alpha's overview lists
both nodes running, then node bravo down once it was killed (kill -9) and its lease ended. Waits are
on what the page shows, bounded."""

from __future__ import annotations

import signal

import pytest

from tests.management.test_ui_browser import chromium, login  # noqa: F401  (chromium: the module's browser)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

LEASE_TTL = "2"
WAIT_MS = 30_000  # the overview reads /api/nodes again every few seconds; a lease of 2 s ends first


def node_row(page, name: str):
    return page.locator("#nodes tbody tr", has_text=name)


def test_the_overview_shows_the_cluster_and_a_node_down(chromium, etcd1, nodes, cluster_name):  # noqa: F811
    a = nodes.start(etcd1.endpoints, cluster_name, "alpha", "--cluster-lease-ttl", LEASE_TTL)
    b = nodes.start(etcd1.endpoints, cluster_name, "bravo", "--cluster-lease-ttl", LEASE_TTL)
    page = chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.set_default_timeout(WAIT_MS)
        login(page, a)
        page.get_by_role("heading", name="Overview").wait_for()
        node_row(page, "bravo").wait_for()
        assert "running" in node_row(page, "alpha").inner_text() and "running" in node_row(page, "bravo").inner_text()
        listeners = page.locator("#listeners").inner_text()
        assert str(a.port) in listeners and str(b.port) in listeners  # every node's listeners
        b.signal(signal.SIGKILL)
        b.proc.wait(timeout=30)
        page.locator("#nodes tbody tr", has_text="down").wait_for()
        assert "bravo" in page.locator("#nodes tbody tr", has_text="down").inner_text()
        assert "running" in node_row(page, "alpha").inner_text()
    finally:
        page.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
