"""Fixtures of the AMQP 0-10 end-to-end tests: a 0-10 client connection and session on the
session broker (Warren's client mode over a real socket, ``client010.py``)."""

from __future__ import annotations

import os
import uuid

import pytest

from .client010 import Client010


@pytest.fixture(autouse=True)
def _warren_only():
    if os.environ.get("WARREN_TEST_BROKER_URL"):
        pytest.skip("AMQP 0-10 is Warren's (RabbitMQ does not speak it): needs the test session's Warren")


@pytest.fixture
def client(broker):
    with Client010(broker) as c:
        yield c


@pytest.fixture
def session(client):
    return client.session(1)


@pytest.fixture
def qname():
    return f"q010-{uuid.uuid4().hex[:10]}"
