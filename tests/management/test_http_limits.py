"""Time and size limits of the HTTP port (warren/http/limits.py), through raw sockets against
a broker's HTTP API: slow or silent clients are closed, oversized requests refused, no traceback."""

from __future__ import annotations

import base64
import json
import select
import socket
import threading
import time

import pytest

from tests.conftest import EXTERNAL_URL, launch_broker

pytestmark = [pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker"),
              pytest.mark.timeout(60)]

HEADER_LIMIT = 1.5  # --http-header-timeout
BODY_LIMIT = 1.5  # --http-body-timeout
MAX_BODY = 65536  # --http-max-body-size
MARGIN = 4.0  # a loaded machine may run timers late
AUTH = "Authorization: Basic " + base64.b64encode(b"guest:guest").decode() + "\r\n"


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    b = launch_broker(tmp_path_factory.mktemp("http-limits"), "--http-header-timeout", str(HEADER_LIMIT),
                      "--http-body-timeout", str(BODY_LIMIT), "--http-max-body-size", str(MAX_BODY))
    yield b
    b.stop()


def _connect(b) -> socket.socket:
    return socket.create_connection((b.host, b.http_port), timeout=5)


def _until_closed(sock: socket.socket, limit: float, trickle: bytes = b"", every: float = 0.3):
    """Read until the server closes; send ``trickle`` an octet every ``every`` s meanwhile.
    Returns (seconds until closed or None if still open after limit + MARGIN, octets read)."""
    started = time.monotonic()
    deadline = started + limit + MARGIN
    got = b""
    sent = 0
    next_send = started
    while (now := time.monotonic()) < deadline:
        if sent < len(trickle) and now >= next_send:
            try:
                sock.send(trickle[sent:sent + 1])
            except OSError:
                return time.monotonic() - started, got
            sent += 1
            next_send = now + every
        if select.select([sock], [], [], min(0.05, deadline - now))[0]:
            try:
                chunk = sock.recv(65536)
            except OSError:
                return time.monotonic() - started, got
            if not chunk:
                return time.monotonic() - started, got
            got += chunk
    return None, got


def _parse(raw: bytes) -> tuple[int, dict, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _request(b, data: bytes) -> tuple[int, dict, bytes]:
    """Send a whole request and read the response until the server closes (or 5 s)."""
    with _connect(b) as s:
        s.sendall(data)
        _, got = _until_closed(s, 1.0)
    return _parse(got)


def test_slow_and_silent_clients_are_closed_at_the_header_limit(limited):
    """The slowloris cases of the issue, all at once: header octets trickling in, half a request
    and silence, and a socket that sends nothing."""
    half = f"GET /api/overview HTTP/1.1\r\nHost: x\r\n{AUTH}".encode()
    cases = {f"trickle {i}": b"GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100 for i in range(10)}
    cases.update({f"half {i}": half for i in range(5)})
    cases.update({f"silent {i}": b"" for i in range(5)})
    results = {}

    def run(name: str, data: bytes) -> None:
        with _connect(limited) as s:
            if name.startswith("half"):
                s.sendall(data)
                data = b""
            results[name] = _until_closed(s, HEADER_LIMIT, trickle=data)

    threads = [threading.Thread(target=run, args=item) for item in cases.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HEADER_LIMIT + MARGIN + 10)
    assert set(results) == set(cases)
    for name, (elapsed, got) in results.items():
        assert elapsed is not None, f"{name}: still connected {HEADER_LIMIT + MARGIN}s later"
        assert elapsed >= HEADER_LIMIT * 0.9, f"{name}: closed after {elapsed:.2f}s"
        if name.startswith("silent"):
            assert got == b"", name
        else:
            status, headers, body = _parse(got)
            assert status == 408 and json.loads(body)["error"] == "request_timeout", (name, got)
    log = limited.log()
    assert log.count("request headers not received in 1.5s") >= len(cases)
    assert "Traceback" not in log


def test_an_oversized_header_is_refused_with_431_and_no_traceback(limited):
    huge = b"GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    with _connect(limited) as s:
        try:
            s.sendall(huge)
        except OSError:
            pass  # the broker may close before it read everything
        _, got = _until_closed(s, 1.0)
    status, headers, body = _parse(got)
    assert status == 431 and headers["connection"] == "close"
    assert json.loads(body)["error"] == "request_header_fields_too_large"
    # many header lines under aiohttp's per-line limit, together over the total
    many = b"GET /api/overview HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 200)
                                                                  for i in range(100)) + b"\r\n"
    assert _request(limited, many)[0] == 431
    assert "request headers larger than 16384 octets" in limited.log()
    assert "Traceback" not in limited.log()


def test_a_malformed_request_gets_400_without_a_traceback(limited):
    status, _, _ = _request(limited, b"GET /api/overview HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
    assert status == 400
    assert "Traceback" not in limited.log()


def test_a_body_over_the_limit_is_refused_with_413(limited):
    # declared up front: refused before the body is read
    status, headers, body = _request(limited, (f"POST /api/overview HTTP/1.1\r\nHost: x\r\n{AUTH}"
                                               f"Content-Type: application/json\r\nContent-Length: {MAX_BODY + 1}"
                                               "\r\n\r\n").encode())
    assert status == 413 and json.loads(body)["error"] == "request_entity_too_large"
    assert headers["connection"] == "close"
    # chunked: refused once the body grows past the limit
    chunk = b"a" * 16384
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // len(chunk) + 2))
    status, _, body = _request(limited, (f"POST /api/overview HTTP/1.1\r\nHost: x\r\n{AUTH}"
                                         "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks + b"0\r\n\r\n")
    assert status == 413 and json.loads(body)["error"] == "request_entity_too_large"
    assert "over the limit" in limited.log()


def test_a_body_within_the_limit_reaches_the_routes(limited):
    body = b"{}" + b" " * 1000
    status, _, _ = _request(limited, (f"POST /api/no-such-route HTTP/1.1\r\nHost: x\r\n{AUTH}"
                                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    assert status in (404, 405)  # routed (not 413 nor 408)


def test_half_a_body_then_silence_is_closed_at_the_body_limit(limited):
    with _connect(limited) as s:
        s.sendall((f"POST /api/overview HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: 1000\r\n\r\n").encode()
                  + b"x" * 500)
        elapsed, got = _until_closed(s, BODY_LIMIT)
    assert elapsed is not None, "still connected"
    status, _, body = _parse(got)
    assert status == 408 and json.loads(body)["error"] == "request_timeout"
    assert "body not received in 1.5s" in limited.log()


def test_a_kept_alive_connection_may_idle_between_requests(limited):
    """The header limit runs from a request's first octet: idling between requests is the
    keep-alive timeout's business, and a normal request is served."""
    request = f"GET /api/overview HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode()
    with _connect(limited) as s:
        for _ in range(2):
            s.sendall(request)
            got = b""
            deadline = time.monotonic() + 5
            while b"\r\n\r\n" not in got or len(_parse(got)[2]) < int(_parse(got)[1].get("content-length", 0)):
                assert time.monotonic() < deadline, got
                chunk = s.recv(65536)
                assert chunk, "closed"
                got += chunk
            status, _, body = _parse(got)
            assert status == 200 and json.loads(body)["product"] == "Warren"
            time.sleep(HEADER_LIMIT + 0.5)
