"""What running the 1.0 clients' own test suites against Warren found (tools/amqp1_0-client-suites,
docs/versions.md "AMQP 1.0: the clients' own test suites"), each checked here through the client
whose suite found it."""

from __future__ import annotations

import json
import subprocess

import pytest

from .test_rhea import rhea  # noqa: F401 - the fixture (npm ci of node/, once per session)



@pytest.mark.timeout(60)
def test_an_unknown_vhost_fails_the_rabbitmq_clients_dial_at_once(broker):
    """rabbitmq-amqp-python-client's test_connection_vhost_not_exists: a refused open is not
    answered, the socket closes (RabbitMQ 4's way), so the client's dial raises. An open then a
    close would send its recovery (on by default) reconnecting until it gives up."""
    pytest.importorskip("rabbitmq_amqp_python_client")
    from rabbitmq_amqp_python_client import Environment
    from rabbitmq_amqp_python_client.qpid.proton import ConnectionException
    env = Environment(uri=f"amqp://guest:guest@{broker.host}:{broker.port}/no-such-vhost")
    with pytest.raises(ConnectionException):  # (the client's Environment.close then fails on the
        env.connection().dial()                # connection that never was: the suite leaves it)
    ok = Environment(uri=f"amqp://guest:guest@{broker.host}:{broker.port}/")  # others are served
    try:
        ok.connection().dial()
    finally:
        ok.close()


RHEA_ATTACH = """
const container = require('rhea');
const [host, port, address] = process.argv.slice(1);
const timer = setTimeout(() => { console.log(JSON.stringify({error: 'time-out'})); process.exit(0); }, 20000);
container.on('receiver_error', (ctx) => {
    const e = ctx.receiver.error || {};
    console.log(JSON.stringify({condition: e.condition, description: e.description}));
    clearTimeout(timer);
    ctx.connection.close();
});
container.on('receiver_open', (ctx) => { console.log(JSON.stringify({opened: true})); });
container.on('error', () => {});
container.connect({host, port: Number(port), username: 'guest', password: 'guest'}).open_receiver(address);
"""


def test_an_activemq_style_address_is_refused_as_rabbitmq_4_refuses_it(rhea, broker):
    """rhea's brokered pub-sub example subscribes to "topic://PRICE.STOCK.NYSE.RHT": RabbitMQ 4
    reads a v1 address without a leading "/" as a queue's name only when it has no "/", and
    refuses the link with amqp:invalid-field (an unknown destination), not amqp:not-found."""
    r = subprocess.run(["node", "-e", RHEA_ATTACH, broker.host, str(broker.port), "topic://PRICE.STOCK.NYSE.RHT"],
                       cwd=rhea, capture_output=True, text=True, timeout=60)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["condition"] == "amqp:invalid-field", (out, r.stderr)
    assert "topic://PRICE.STOCK.NYSE.RHT" in out["description"]
