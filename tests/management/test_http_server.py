"""The HTTP API inside a real broker process: started with it, announced in the ready file, off with -1."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest

from tests.conftest import EXTERNAL_URL

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

GUEST = "Basic " + base64.b64encode(b"guest:guest").decode()


def get(url: str, auth: str | None = GUEST, timeout: float = 5.0):
    req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_http_api_runs_with_the_broker(start_broker):
    b = start_broker()
    assert b.http_port and b.http_port != b.port
    status, _, body = get(b.http_url + "/api/overview")
    info = json.loads(body)
    assert status == 200 and info["product"] == "Warren"
    assert info["amqp_port"] == b.port and info["http_port"] == b.http_port and info["vhosts"] == ["/"]
    assert get(b.http_url + "/api/overview", auth=None)[0] == 401
    assert get(b.http_url + "/api/streams/%2F/missing")[0] == 404
    assert f"HTTP API listening on 127.0.0.1:{b.http_port}" in b.log()
    b.stop()
    assert b.proc.returncode == 0


def test_http_api_off(start_broker):
    b = start_broker("--http-port", "-1")
    assert b.http_port is None
    assert "HTTP API" not in b.log()
