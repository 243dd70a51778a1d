"""Free ports on 127.0.0.1 for the processes the tests start (RabbitMQ nodes, etcd members)."""

from __future__ import annotations

import random
import socket

__all__ = ["free_ports", "restartable_ports"]

# below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 here)
RESTARTABLE_RANGE = (20000, 32000)


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


def restartable_ports(n: int, attempts: int = 1000) -> list[int]:
    """n different free ports below the ephemeral range, for a process killed and started again
    on the same ports (the fault harness's nodes, whose clients keep their URLs): an ephemeral
    port freed by a kill is soon some outgoing connection's local port, this range never is (the
    kernel picks those from the ephemeral range), so only another test binding it explicitly could
    take it. Chosen at random, each checked free by binding it."""
    chosen: list[int] = []
    socks = []
    try:
        for _ in range(attempts):
            if len(chosen) == n:
                return chosen
            port = random.randrange(*RESTARTABLE_RANGE)
            if port in chosen:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            chosen.append(port)
        raise RuntimeError(f"no {n} free ports in {RESTARTABLE_RANGE} after {attempts} tries")
    finally:
        for s in socks:
            s.close()
