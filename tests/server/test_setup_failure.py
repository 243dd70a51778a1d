"""A connection whose set-up raises (``connection_made``, warren/server/connection.py, and the
--workers supervisor's, warren/server/workers.py) is closed at once, with one ERROR line naming
the peer and the error; the broker serves the next connection as usual.

Nothing in ``connection_made`` refuses a client today, so only a bug of ours raises there (session
19 saw one: an AttributeError from a half-edited tree, the socket then left open until the
handshake deadline aborted it). The bug is provoked here by a ``sitecustomize`` on the broker's
PYTHONPATH that makes the TLS-session lookup raise for the first connection only; the client is
a raw socket, then pika. The handshake limit is set far above the test's wait, so a socket left
to it fails the test. Before: with asyncio's own loop the socket stayed open (no handshake
deadline had been set) and was read into the half-made connection; uvloop (``--loop auto``)
closed it, and the only trace was asyncio's "Exception in callback" naming nobody.
"""

from __future__ import annotations

import os
import select
import socket
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL, launch_broker

pytestmark = [pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker"),
              pytest.mark.timeout(120)]

PATCH = '''
import os
import warren.server.connection as _c, warren.server.workers as _w
_real = _c.session_of

def _failing_once(transport, config):
    try:  # once in the node, whichever process accepts first (the --workers supervisor)
        os.close(os.open(MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return _real(transport, config)
    raise RuntimeError("provoked by the test: set-up fails once")

_c.session_of = _w.session_of = _failing_once
'''


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the broker closed ``sock`` (EOF or reset) before ``seconds`` passed: a bound on
    the wait for that condition, far below the broker's handshake limit."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], min(0.5, left))
        if readable:
            try:
                if not sock.recv(4096):
                    return True
            except OSError:
                return True
    return False


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
def test_a_connection_whose_set_up_raises_is_closed_at_once(tmp_path, monkeypatch, loop):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"MARK = {str(tmp_path / 'failed-once')!r}\n" + PATCH)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    b = launch_broker(tmp_path, "--handshake-timeout", "600", "--loop", loop)
    try:
        s = socket.create_connection((b.host, b.port), timeout=10)
        try:
            local = s.getsockname()
            # nothing sent: a client that waits (TLS-less clients send their header first, but
            # a half-made connection must not wait for it either)
            assert _closed_within(s, 30), "the socket was left open after its set-up failed"
        finally:
            s.close()
        deadline = time.monotonic() + 30
        line = None
        while line is None and time.monotonic() < deadline:
            line = next((ln for ln in b.log_path.read_text().splitlines()
                         if "setting it up failed" in ln and f"{local[0]}:{local[1]}" in ln), None)
            if line is None:
                time.sleep(0.05)
        assert line is not None, b.log_path.read_text()[-3000:]
        assert "ERROR" in line and "RuntimeError: provoked by the test" in line, line
        # the next connection is served as usual
        conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port, socket_timeout=10))
        ch = conn.channel()
        ch.queue_declare("after-a-failed-set-up", exclusive=True)
        conn.close()
    finally:
        b.stop()
