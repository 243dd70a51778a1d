"""Where a broker's HTTP API is, found from its AMQP URL rather than assumed.

Warren announces the port of its HTTP API in ``connection.start`` (the server property
``http_port``, ``warren/broker/broker.py``), which a client receives before it logs in. So
given only the AMQP URL, the data source and ``warren pipeline`` open a TCP connection to it,
send the 0-9-1 protocol header, read ``connection.start``, and close: no login, nothing
opened on the broker, one round trip. The API is then ``http://<the URL's host>:<that port>``.

A broker that announces no port (RabbitMQ, or a Warren started with ``--http-port -1``) gets
RabbitMQ's management default, 15672, on the URL's host; a broker that cannot be reached gets
the same default, and the first request then fails naming that URL. Answers are remembered per
(host, port) for the life of the process: the driver plans many batches.
"""

from __future__ import annotations

import socket
import struct

from warren.spec.fields import decode_table

__all__ = ["DEFAULT_HTTP_PORT", "announced_http_port", "http_url_for", "clear_cache"]

DEFAULT_HTTP_PORT = 15672  # RabbitMQ's management plugin
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
START_MAX = 64 * 1024  # octets of connection.start read at most (Warren's is about 700)
_HEAD = struct.Struct(">BHI")
_cache: dict[tuple[str, int], int | None] = {}


def clear_cache() -> None:
    _cache.clear()


def _read_start(sock: socket.socket) -> dict:
    """The server properties of the connection.start frame the broker sends first."""
    data = bytearray()
    while True:
        if len(data) >= 7:
            kind, channel, size = _HEAD.unpack_from(data, 0)
            if kind != 1 or channel != 0 or size > START_MAX:
                raise ValueError("not an AMQP 0-9-1 connection.start")
            if len(data) >= 7 + size + 1:
                break
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("the broker closed the connection before connection.start")
        data += chunk
        if len(data) > START_MAX + 8:
            raise ValueError("connection.start too large")
    class_id, method_id = struct.unpack_from(">HH", data, 7)
    if (class_id, method_id) != (10, 10):
        raise ValueError("not an AMQP 0-9-1 connection.start")
    properties, _ = decode_table(data, 7 + 4 + 2)  # after the method ids and version-major/minor
    return properties


def announced_http_port(host: str, port: int, timeout: float = 5.0) -> int | None:
    """The HTTP port the broker at host:port announces, or None (none announced, or no answer)."""
    key = (host, port)
    if key in _cache:
        return _cache[key]
    found = None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(PROTOCOL_HEADER)
            value = _read_start(sock).get("http_port")
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
                found = value
    except (OSError, ValueError):
        return None  # not remembered: the broker may be starting
    _cache[key] = found
    return found


def http_url_for(host: str | None, port: int | None, timeout: float = 5.0) -> str:
    """The HTTP API of the broker at the AMQP host:port: its announced port, else 15672."""
    host = host or "127.0.0.1"
    announced = announced_http_port(host, port or 5672, timeout)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{announced or DEFAULT_HTTP_PORT}"
