"""The handshake time limit (warren/server/handshake.py) through raw sockets, in the single-process
server and with ``--workers`` (where the supervisor runs the handshake): whatever a client sends,
or does not, it has ``--handshake-timeout`` seconds from connecting to connection.open-ok.
"""

from __future__ import annotations

import re
import select
import socket
import threading
import time

import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e import rawamqp as raw
from warren.protocol.header import HEADER_0_10

pytestmark = [pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker"),
              pytest.mark.timeout(60)]

LIMIT = 2.0  # --handshake-timeout of the brokers below
MARGIN = 4.0  # a loaded machine may run the timer late; far below the 150 s the bug allowed
MODES = {"single": (), "workers": ("--workers", "2", "--vhost", "/", "--vhost", "a")}


@pytest.fixture(scope="module", params=sorted(MODES))
def limited_broker(request, tmp_path_factory):
    b = launch_broker(tmp_path_factory.mktemp(f"handshake-{request.param}"),
                      "--handshake-timeout", str(LIMIT), *MODES[request.param])
    yield b
    b.stop()


def _wait_closed(sock: socket.socket, trickle: bytes = b"", every: float = 1.0) -> float | None:
    """Read (and discard) until the server closes the socket; send ``trickle`` one octet every
    ``every`` seconds meanwhile. Returns when it closed, or None if it was still open at the
    deadline."""
    deadline = time.monotonic() + LIMIT + MARGIN
    next_send = time.monotonic() + every
    sent = 0
    while (now := time.monotonic()) < deadline:
        if trickle and sent < len(trickle) and now >= next_send:
            try:
                sock.send(trickle[sent:sent + 1])
            except OSError:
                return time.monotonic()
            sent += 1
            next_send = now + every
        readable, _, _ = select.select([sock], [], [], min(0.1, deadline - now))
        if readable:
            try:
                if not sock.recv(65536):
                    return time.monotonic()
            except OSError:  # reset: the broker aborts the socket
                return time.monotonic()
    return None


def _connect(b) -> socket.socket:
    return socket.create_connection((b.host, b.port), timeout=5)


def _silent(b):
    return _connect(b), b""


def _one_byte_a_second(b):
    return _connect(b), raw.PROTOCOL_HEADER


def _header_then_silence(b):
    s = _connect(b)
    s.sendall(raw.PROTOCOL_HEADER)
    return s, b""


def _start_ok_then_silence(b):
    c = raw.RawConnection(b.host, b.port)
    c.send(raw.PROTOCOL_HEADER)
    c.expect(raw.CONNECTION_START, 0)
    c.send(raw.start_ok())
    c.expect(raw.CONNECTION_TUNE, 0)
    return c.sock, b""


def _tune_ok_with_heartbeat_then_silence(b):
    c = raw.RawConnection(b.host, b.port)
    c.handshake(heartbeat=60, open_vhost=False)  # a heartbeat used to replace the deadline
    return c.sock, b""


# case -> (how the client behaves, what the log must say the handshake reached)
CASES = {
    "silent": (_silent, "nothing received"),
    "one byte a second": (_one_byte_a_second, "protocol header incomplete"),
    "header then silence": (_header_then_silence, "waiting for start-ok"),
    "start-ok then silence": (_start_ok_then_silence, "waiting for tune-ok"),
    "tune-ok with heartbeat then silence": (_tune_ok_with_heartbeat_then_silence, "waiting for connection.open"),
}


def test_every_unfinished_handshake_is_closed_within_the_limit(limited_broker):
    b = limited_broker
    results: dict[str, tuple] = {}

    def run(name: str, behave) -> None:
        started = time.monotonic()
        sock, trickle = behave(b)
        port = sock.getsockname()[1]
        try:
            closed = _wait_closed(sock, trickle)
        finally:
            sock.close()
        results[name] = (port, None if closed is None else closed - started)

    threads = [threading.Thread(target=run, args=(name, behave)) for name, (behave, _) in CASES.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LIMIT + MARGIN + 10)
    assert set(results) == set(CASES)
    for name, (port, elapsed) in results.items():
        assert elapsed is not None, f"{name}: still open {LIMIT + MARGIN}s after connecting"
        assert elapsed >= LIMIT * 0.9, f"{name}: closed after {elapsed:.2f}s, before the limit"

    # one log line per client, naming its address and the stage it reached
    deadline = time.monotonic() + 5
    missing = dict(CASES)
    while missing and time.monotonic() < deadline:
        log = b.log()
        for name in list(missing):
            port = results[name][0]
            line = re.search(rf"closing connection from 127\.0\.0\.1:{port}: handshake not completed in "
                             rf"{LIMIT:g}s \((.*)\)", log)
            if line and CASES[name][1] in line.group(1):
                del missing[name]
        time.sleep(0.1)
    assert not missing, f"no log line with the stage for {sorted(missing)}:\n{b.log()[-3000:]}"


def test_an_opened_connection_outlives_the_handshake_limit(limited_broker):
    """The deadline ends at open-ok: a connection with heartbeats, then a slow client, stay."""
    b = limited_broker
    with raw.RawConnection(b.host, b.port) as c:
        c.handshake(heartbeat=60)
        time.sleep(LIMIT + 1.0)
        c.open_channel(1)  # still served
        c.close_connection()


def test_an_amqp_0_10_handshake_is_held_to_the_same_limit(limited_broker):
    """AMQP 0-10's connection answers the deadline's questions itself (its own states): a 0-10
    client that sends its header and then nothing is closed at the limit, and the log line
    names the 0-10 stage (with --workers, the supervisor's deadline, which runs the 0-10 handshake)."""
    b = limited_broker
    started = time.monotonic()
    sock = _connect(b)
    port = sock.getsockname()[1]
    try:
        sock.sendall(HEADER_0_10)
        closed = _wait_closed(sock)
    finally:
        sock.close()
    assert closed is not None, f"a silent 0-10 client still open {LIMIT + MARGIN}s after connecting"
    assert closed - started >= LIMIT * 0.9
    deadline = time.monotonic() + 5
    pattern = (rf"closing connection from 127\.0\.0\.1:{port}: handshake not completed in {LIMIT:g}s "
               r"\(sent connection\.start, waiting for start-ok \(AMQP 0-10\)\)")
    while not re.search(pattern, b.log()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert re.search(pattern, b.log()), b.log()[-3000:]
