"""Fixtures of the AMQP 1.0 end-to-end tests: real 1.0 clients (Qpid Proton's Python binding,
Node's rhea, RabbitMQ's AMQP 1.0 Python client) against the broker the session starts.

Under ``--workers`` (WARREN_TEST_BROKER_WORKERS) the supervisor hands 1.0 connections to the worker
owning their vhost, as 0-9-1's, or under ``--worker-mode queues`` to the next worker in turn, whose
links then read and write queues on either worker; these tests run there too."""

from __future__ import annotations

import os
import uuid

import pytest



@pytest.fixture(autouse=True)
def _own_broker():
    if os.environ.get("WARREN_TEST_BROKER_URL"):
        pytest.skip("these tests start or inspect Warren's own broker")


@pytest.fixture(autouse=True)
def _proton_binary_copies(monkeypatch):
    """python-qpid-proton 0.40 decodes a binary (a data section's body, a user-id) as a memoryview
    of the C message it came in, and its blocking receiver reuses that message for the next
    delivery: a body read after the next message arrived is someone else's octets. The test's
    copy is taken where proton decodes (its Message._post_decode), while the octets are valid."""
    try:
        from proton import _message
    except ImportError:
        return
    original = _message.Message._post_decode

    def post_decode(self):
        original(self)
        if isinstance(self.body, memoryview):
            self.body = bytes(self.body)
        if isinstance(self.user_id, memoryview):
            self.user_id = bytes(self.user_id)

    monkeypatch.setattr(_message.Message, "_post_decode", post_decode)


@pytest.fixture
def conn(broker):
    """A blocking Qpid Proton connection to the broker, closed after the test."""
    from proton.utils import BlockingConnection
    c = BlockingConnection(amqp_url(broker), timeout=10)
    yield c
    c.close()


@pytest.fixture
def qname():
    return f"q10-{uuid.uuid4().hex[:10]}"


def amqp_url(broker, user: str = "guest", password: str = "guest") -> str:
    return f"amqp://{user}:{password}@{broker.host}:{broker.port}"
