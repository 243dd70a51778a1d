"""Under --workers the supervisor does not hand AMQP 1.0 connections to a worker yet: it answers
the client's open with a close amqp:not-implemented that says so, and logs a line."""

from __future__ import annotations

import pytest
from proton.utils import BlockingConnection, ConnectionClosed

from tests.e2e.helpers import wait_until

from .conftest import amqp_url


def test_under_workers_1_0_is_refused_with_not_implemented_and_a_log_line(start_broker):
    b = start_broker("--workers", "2")
    with pytest.raises(ConnectionClosed, match="amqp:not-implemented.*--workers"):
        BlockingConnection(amqp_url(b), timeout=10)
    assert wait_until(lambda: "refused AMQP 1.0 connection from 127.0.0.1:" in b.log(), timeout=5)
