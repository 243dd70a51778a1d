"""Free ports on 127.0.0.1 for the processes the tests start (RabbitMQ nodes, etcd members)."""

from __future__ import annotations

import socket

__all__ = ["free_ports"]


def free_ports(n: int) -> list[int]:
    """n different free ports: each socket stays bound until all are chosen (one bound and closed
    at a time, the kernel may hand out the same port twice: the node then failed to boot with
    `incompatible_listeners`, management and prometheus on one port)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
