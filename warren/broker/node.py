"""What this node is called where tools look for RabbitMQ's names: the HTTP API's ``node`` fields,
``/api/nodes``, Prometheus' labels and rabbitmqctl's output."""

from __future__ import annotations

import socket

__all__ = ["node_name"]


def node_name() -> str:
    """RabbitMQ's node name form, ``rabbit@<short host name>`` (monitoring checks build it)."""
    return "rabbit@" + socket.gethostname().split(".")[0]
