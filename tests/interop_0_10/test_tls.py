"""Qpid's qpid.messaging (AMQP 0-10, Python 2.7) over TLS, its ``ssl`` transport unmodified.

One process ends TLS itself; with ``--workers`` the supervisor ends it and relays the plaintext
to a worker (warren/server/relay.py), for 0-10 as for 0-9-1. The qpid.messaging side sends
and fetches back over TLS while it holds its connection open; the HTTP API shows that
connection as AMQP 0-10 over TLS; pika reads what was left over plain AMQP."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.helpers import wait_until
from tests.e2e.tlscerts import Pki
from tests.qpid_python import require_qpid_python

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")]

SCRIPT = r"""
import json, sys, urllib2, base64
from qpid.messaging import Connection, Message
port, ca, queue, api = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = Connection("127.0.0.1:%d" % port, username="guest", password="guest", reconnect=False,
               transport="ssl", ssl_trustfile=ca, ssl_skip_hostname_check=True)
c.open()
s = c.session()
snd = s.sender("%s; {create: always, node: {durable: True}}" % queue)
for i in range(3):
    snd.send(Message("tls %d" % i, properties={"i": i}, durable=True))
r = s.receiver(queue)
m = r.fetch(timeout=10)
s.acknowledge(m)
req = urllib2.Request(api + "/api/connections")
req.add_header("Authorization", "Basic " + base64.b64encode("guest:guest"))
rows = json.load(urllib2.urlopen(req, timeout=10))
mine = [x for x in rows if x["protocol"] == "AMQP 0-10"]
print(json.dumps({"got": m.content, "i": m.properties.get("i"), "rows": mine}))
c.close()
"""


@pytest.mark.parametrize("workers", [[], ["--workers", "2", "--worker-mode", "vhosts"],
                                     ["--workers", "2", "--worker-mode", "queues"]],
                         ids=["one-process", "workers-vhosts", "workers-queues"])
def test_qpid_messaging_over_tls(start_broker, tmp_path, workers):
    pki = Pki(tmp_path / "pki")
    b = start_broker(*workers, *pki.broker_args("none"), data_dir=tmp_path / "data")
    qp = require_qpid_python()
    queue = f"qpid-tls-{uuid.uuid4().hex[:8]}"
    result = qp.run(SCRIPT, timeout=90, args=[str(b.tls_port), str(pki.ca_file), queue,
                                              f"http://127.0.0.1:{b.http_port}"])
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert (out["got"], out["i"]) == ("tls 0", 0)
    [row] = out["rows"]
    assert row["ssl"] is True and row["ssl_protocol"] in ("tlsv1.2", "tlsv1.3") and row["user"] == "guest"
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port)) as conn:  # plain 0-9-1
        ch = conn.channel()
        rest = []
        for _ in range(2):
            method, props, body = ch.basic_get(queue, auto_ack=True)
            assert method is not None
            rest.append((body, props.headers.get("i"), props.delivery_mode))
        assert rest == [(b"tls 1", 1, 2), (b"tls 2", 2, 2)]
    # nothing of the 0-10 connection is left open (the API lists it until its socket has closed)
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request(f"http://127.0.0.1:{b.http_port}/api/connections", headers={"Authorization": auth})
    assert wait_until(lambda: not [r for r in json.load(urllib.request.urlopen(req, timeout=10))
                                   if r["protocol"] == "AMQP 0-10"], 5)
