"""What running the 1.0 clients' own test suites against Warren found (tools/amqp1_0-client-suites,
docs/versions.md "AMQP 1.0: the clients' own test suites"), each checked here through the client
whose suite found it."""

from __future__ import annotations

import pytest

rabbitmq_amqp = pytest.importorskip("rabbitmq_amqp_python_client")
from rabbitmq_amqp_python_client import Environment  # noqa: E402 - after the importorskip
from rabbitmq_amqp_python_client.qpid.proton import ConnectionException  # noqa: E402


@pytest.mark.timeout(60)
def test_an_unknown_vhost_fails_the_rabbitmq_clients_dial_at_once(broker):
    """rabbitmq-amqp-python-client's test_connection_vhost_not_exists: a refused open is not
    answered, the socket closes (RabbitMQ 4's way), so the client's dial raises. An open then a
    close would send its recovery (on by default) reconnecting until it gives up."""
    env = Environment(uri=f"amqp://guest:guest@{broker.host}:{broker.port}/no-such-vhost")
    with pytest.raises(ConnectionException):  # (the client's Environment.close then fails on the
        env.connection().dial()                # connection that never was: the suite leaves it)
    ok = Environment(uri=f"amqp://guest:guest@{broker.host}:{broker.port}/")  # others are served
    try:
        ok.connection().dial()
    finally:
        ok.close()
