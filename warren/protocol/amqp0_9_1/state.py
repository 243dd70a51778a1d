"""Connection states and the legal connection-level method sequences (server role, 0-9-1).

Rules of this file:
  * Everything that decides which connection method is legal in which state lives here, as the
    table ``CONNECTION_TRANSITIONS[(state, method index)] -> next state``.
  * A missing key is the protocol error: 503 COMMAND_INVALID ("unexpected method in state").
  * Only ``ConnectionState.receive`` and ``ConnectionState.advance`` assign ``.state``.

Life cycle (INVENTORY.md §3.5)::

    AWAIT_START_OK --start-ok--> LOGIN --(broker accepts; tune sent)--> AWAIT_TUNE_OK
    AWAIT_TUNE_OK --tune-ok--> AWAIT_OPEN --open--> OPENING --(broker accepts; open-ok)--> OPEN
    any --close (peer)--> CLOSED             any --(we send close)--> CLOSING --close-ok--> CLOSED

Channels have two states, OPEN and CLOSING (we sent channel.close and wait for close-ok); a
channel that is absent from the table is closed. Those rules are in ``connection.py`` because
they depend on the channel number, not only on the method.
"""

from __future__ import annotations

import enum

from warren.errors import CommandInvalid
from warren.spec import amqp0_9_1 as spec

__all__ = ["State", "ConnectionState", "CONNECTION_TRANSITIONS", "HANDSHAKE_WAITING"]


class State(enum.Enum):
    AWAIT_START_OK = "await-start-ok"
    LOGIN = "login"  # the broker is checking the credentials
    AWAIT_TUNE_OK = "await-tune-ok"
    AWAIT_OPEN = "await-open"
    OPENING = "opening"  # the broker is checking the virtual host
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close and discard input until close-ok
    CLOSED = "closed"


S = State
_close = spec.ConnectionClose.INDEX
_close_ok = spec.ConnectionCloseOk.INDEX

CONNECTION_TRANSITIONS: dict[tuple[State, int], State] = {
    (S.AWAIT_START_OK, spec.ConnectionStartOk.INDEX): S.LOGIN,
    (S.AWAIT_TUNE_OK, spec.ConnectionTuneOk.INDEX): S.AWAIT_OPEN,
    (S.AWAIT_OPEN, spec.ConnectionOpen.INDEX): S.OPENING,
    (S.OPEN, spec.ConnectionUpdateSecret.INDEX): S.OPEN,
    # RabbitMQ's clients never send blocked/unblocked, but both chassis say MUST: accept, ignore
    (S.OPEN, spec.ConnectionBlocked.INDEX): S.OPEN,
    (S.OPEN, spec.ConnectionUnblocked.INDEX): S.OPEN,
    # close from the peer is legal in every state before CLOSED; we answer close-ok
    **{(s, _close): S.CLOSED for s in State if s is not S.CLOSED},
    (S.CLOSING, _close_ok): S.CLOSED,
}

# the broker's decisions, driven by calls, not by received methods
_ADVANCES = {
    (S.LOGIN, "login-accepted"): S.AWAIT_TUNE_OK,
    (S.OPENING, "vhost-accepted"): S.OPEN,
}

# the handshake's states (before open-ok) and what the broker waits for in each: the
# handshake deadline's log line names it (warren/server/handshake.py)
HANDSHAKE_WAITING = {
    S.AWAIT_START_OK: "sent connection.start, waiting for start-ok",
    S.LOGIN: "checking the login",
    S.AWAIT_TUNE_OK: "sent connection.tune, waiting for tune-ok",
    S.AWAIT_OPEN: "got tune-ok, waiting for connection.open",
    S.OPENING: "opening the virtual host",
}


class ConnectionState:
    """The connection-level state of one server-side connection."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = S.AWAIT_START_OK

    def receive(self, method) -> State:
        """Apply a method received on channel 0; raise 503 if it is not legal now."""
        try:
            self.state = CONNECTION_TRANSITIONS[(self.state, method.INDEX)]
        except KeyError:
            raise CommandInvalid(f"unexpected method {method.NAME} in connection state {self.state.value}",
                                 method.CLASS_ID, method.METHOD_ID) from None
        return self.state

    def advance(self, decision: str) -> None:
        """Apply the broker's decision (login or vhost accepted)."""
        self.state = _ADVANCES[(self.state, decision)]

    def closing(self) -> None:
        """We sent connection.close."""
        if self.state is not S.CLOSED:
            self.state = S.CLOSING

    def closed(self) -> None:
        self.state = S.CLOSED
