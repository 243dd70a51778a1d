"""A small urllib client for the management API tests: one call, status and decoded JSON back."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from urllib.parse import quote

__all__ = ["call", "q", "basic"]


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def q(name: str) -> str:
    """A path segment, percent-encoded as RabbitMQ's clients send names (``/`` is ``%2F``)."""
    return quote(name, safe="")


def call(base: str, method: str, path: str, body=None, user: str = "guest", password: str = "guest",
         headers: dict | None = None, raw: bytes | None = None, timeout: float = 10.0):
    """(status, JSON body or None, response headers)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Authorization": basic(user, password)} if user is not None else {}
    if data is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, payload, rh = r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, payload, rh = e.code, e.read(), dict(e.headers)
    try:
        decoded = json.loads(payload) if payload else None
    except ValueError:
        decoded = payload
    return status, decoded, rh
