"""Fixtures shared by the end-to-end tests: a pika connection and channel on the session
broker, and a register of queues and exchanges to delete after the test."""

from __future__ import annotations

import pytest

from .helpers import connect, delete_all


@pytest.fixture
def conn(broker):
    c = connect(broker)
    yield c
    if c.is_open:
        c.close()


@pytest.fixture
def ch(conn):
    return conn.channel()


@pytest.fixture
def cleanup(broker):
    """Register queues/exchanges to delete after the test (keeps a shared RabbitMQ tidy):
    cleanup["queues"].append(name), cleanup["exchanges"].append(name)."""
    names: dict[str, list[str]] = {"queues": [], "exchanges": []}
    yield names
    delete_all(broker, names)
