"""Placement: a new connection moves to the worker that owns the queue it uses.

The supervisor deals connections out before it can know which queue they will use (it sees
connection.open). A publisher or consumer on a worker that does not own its queue makes every
message cross between processes, which halves what one pair can do (docs/performance.md). So a
connection that has done nothing yet but open channels, set qos, select confirms or
transactions and declare or bind things, and whose first publish or consume goes to a queue
another worker owns, *moves* there, before that publish or consume is handled:

1. The worker kept every octet the client sent since the connection began (``history``, at
   most ``MOVE_HISTORY_MAX``, warren/server/connection.py; the supervisor's handshake octets included) and knows where the
   current event starts in its input buffer.
2. It writes out what it owes the client (the answers to everything before this event); if the
   socket cannot take it all now, the connection stays (and stops trying).
3. It sends the owner one hand-over record (``pack_move``): the socket as a descriptor, the
   octets already answered, and the octets not handled yet (this event and what followed).
4. The owner replays the answered octets quietly (``HandedOverConnection``): login, tune, open,
   channel opens, qos and confirm.select rebuild the connection's state; declarations and
   bindings are not applied again (they are already in force on every worker), and nothing of
   the replay is written. Then it handles the rest as if it had read it first.

The client sees nothing: its next answers come from the other process over the same socket.
A connection that publishes to queues of several workers (a fanout), or to a local queue, or
that cannot move now, stays where it is for good (``settle``).
"""

from __future__ import annotations

import logging
import os
import socket
import struct

from warren.server.handoff_records import Relayed, pack_handoff, pack_relayed

__all__ = ["pack_move", "unpack_move", "is_move", "clean", "move", "MOVE"]

log = logging.getLogger("warren.spread")  # the worker mode it serves

MOVE = b"M"  # first octet of a move record (a supervisor's record starts with a 16-bit length < 256)
_LENGTH = struct.Struct(">I")


def pack_move(peer, vhost: str, answered: bytes, pending: bytes, relayed: Relayed | None = None) -> bytes:
    """A hand-over record of a connection moving, behind the number of octets answered; a TLS
    connection the supervisor relays (``relayed``) moves its end of the socket pair, and its
    record says again who the client is (warren/server/relay.py)."""
    received = answered + pending
    inner = (pack_handoff(str(peer[0]), int(peer[1]), received, vhost) if relayed is None
             else pack_relayed(relayed, vhost, received))
    return MOVE + _LENGTH.pack(len(answered)) + inner


def is_move(record: bytes) -> bool:
    return record[:1] == MOVE


def unpack_move(record: bytes) -> tuple[int, bytes]:
    """(octets already answered, the hand-over record inside)."""
    (n,) = _LENGTH.unpack_from(record, 1)
    return n, record[5:]


def clean(session) -> bool:
    """Whether nothing the connection did would be lost or doubled by replaying it elsewhere:
    no publish, no consumer, no delivery waiting for an ack, no exclusive queue, no transaction
    holding anything, no server-named queue (its name is not in the client's octets)."""
    if session.holds_exclusive_queues() or session.unmovable:
        return False
    for ch in session.channels.values():
        # (not session.published: the adapter sets it before the publish that asks to move)
        if (ch.stats_publish or ch.consumers or ch.remote_consumers or ch.unacked or ch.next_tag > 1
                or ch.tx_publishes):
            return False
        if ch.reply_consumer is not None:
            return False
    return True


def move(conn, worker: int) -> bool:
    """Move ``conn`` (an ``AMQPConnection``) to ``worker`` now; False if it cannot (it then stays
    for good). The event being handled and everything after it go with it unhandled."""
    session = conn.session
    if session is None or conn.transport is None or not clean(session):
        conn.settle()
        return False
    split = conn.take_history()  # one try only: from here on it stays or it is gone
    if split is None:
        return False  # 0-10, or the history was not kept whole
    answered, pending = split
    conn.flush()  # the answers to everything before this event
    if conn.transport.get_write_buffer_size():
        return False  # the client has not taken them all: moving now would lose them
    path = conn.server.config.handoff_socket
    target = os.path.join(os.path.dirname(os.fspath(path)), f"worker-{worker}.sock")
    relayed = Relayed(conn.peer, conn.local, conn.tls) if conn.local is not None else None
    record = pack_move(conn.peer, session.vhost.name, answered, pending, relayed)
    sock = conn.transport.get_extra_info("socket")
    try:
        fd = os.dup(sock.fileno())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as channel:
                channel.settimeout(5.0)
                channel.connect(target)
                socket.send_fds(channel, [record], [fd])
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("connection %s could not move to worker %d: %s; it stays", session, worker, e)
        return False
    log.info("connection %s moved to worker %d, which owns the queue it uses", session, worker)
    conn.moved(worker)
    return True
