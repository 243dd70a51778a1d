"""What this node is called where tools look for RabbitMQ's names: the HTTP API's ``node`` fields,
``/api/nodes``, Prometheus' labels and rabbitmqctl's output."""

from __future__ import annotations

import socket

__all__ = ["node_name", "name_node"]

_given: str | None = None  # --node-name in a cluster (name_node)


def node_name() -> str:
    """The node's ``--node-name`` in a cluster; else RabbitMQ's node name form,
    ``rabbit@<short host name>`` (monitoring checks build it)."""
    if _given is not None:
        return _given
    return "rabbit@" + socket.gethostname().split(".")[0]


def name_node(name: str | None) -> None:
    """This process is node ``name`` of a cluster (None: named after its host again)."""
    global _given
    _given = name
