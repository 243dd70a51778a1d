"""Broker-side limits: connections on the node and per user, channels per user, consumers per
channel. Each refusal with RabbitMQ's reply code and text.

* ``connection_max`` (RabbitMQ's, default infinity; 0 here): connections open on this node
  (with ``--workers`` each worker counts its own; with ``--worker-mode queues`` the workers tell
  each other their counts, ``counted_elsewhere``, so the node's and a user's limits are the
  node's). Checked at connection.open
  (530 ``connection refused: node connection limit (N) is reached``, as RabbitMQ 3.12+ says
  it; 3.10 stops accepting instead).
* user limits (``warren/access/user_limits.py``): ``max-connections`` at connection.open (530
  ``connection refused for user 'U': user connection limit (N) is reached``) and
  ``max-channels`` at channel.open, before channel.open-ok goes out (530 ``number of channels
  opened for user 'U' has reached the maximum allowed user limit of (N)``).
* ``consumer_max_per_channel`` (RabbitMQ's, default infinity; 0 here): at basic.consume
  (530 ``reached maximum (N) of consumers per channel``; a connection error, as RabbitMQ).
* names that are not UTF-8 are the 0-9-1 family's business: ``warren/protocol/amqp0_9_1/names.py``.

The session and channel call these; the log line of each refusal is the session's usual one
(who and what). Nothing here runs on the publish or delivery path.
"""

from __future__ import annotations

from warren.access.user_limits import USER_MAX_CHANNELS, USER_MAX_CONNECTIONS
from warren.errors import NotAllowed

__all__ = ["BrokerLimits", "NO_LIMITS"]


def _nothing_elsewhere(key) -> int:
    return 0


class BrokerLimits:
    def __init__(self, connection_max: int = 0, consumer_max_per_channel: int = 0) -> None:
        self.connection_max = connection_max
        self.consumer_max_per_channel = consumer_max_per_channel
        self.open = 0  # connections past connection.open on this node
        self.by_user: dict[str, set] = {}  # user -> its open sessions
        # --worker-mode queues (warren/spread): the other workers' counts, by ("node",),
        # ("user", name) or ("channels", user), and where ours go when they change; one process: none
        self.counted_elsewhere = _nothing_elsewhere
        self.count_changed = None
        self._channels_told: dict[str, int] = {}  # user -> its channels here, as last told to the others

    @classmethod
    def for_config(cls, config) -> "BrokerLimits":
        return cls(config.connection_max, config.consumer_max_per_channel)

    # --- connections -------------------------------------------------------------------------

    def admit(self, session, access) -> None:
        """connection.open: the node's and the user's connection limits (530), then counted;
        ``release`` undoes it."""
        user = session.username
        moved = session.replaying  # moved here from another worker, which admitted it (warren/spread)
        if (self.connection_max and self.open + self.counted_elsewhere(("node",)) >= self.connection_max
                and not moved):
            raise NotAllowed(f"connection refused: node connection limit ({self.connection_max}) is reached", 10, 40)
        limit = access.user_limit(user, USER_MAX_CONNECTIONS) if access is not None else None
        sessions = self.by_user.get(user)
        if (limit is not None and len(sessions or ()) + self.counted_elsewhere(("user", user)) >= limit
                and not moved):
            raise NotAllowed(f"connection refused for user '{user}': user connection limit ({limit}) is reached",
                             10, 40)
        self.open += 1
        if sessions is None:
            sessions = self.by_user[user] = set()
        sessions.add(session)
        if self.count_changed is not None:
            self.count_changed(("node",), self.open)
            self.count_changed(("user", user), len(sessions))

    def release(self, session) -> None:
        sessions = self.by_user.get(session.username)
        if sessions is None or session not in sessions:
            return
        sessions.discard(session)
        if not sessions:
            del self.by_user[session.username]
        self.open -= 1
        if self.count_changed is not None:
            self.count_changed(("node",), self.open)
            self.count_changed(("user", session.username), len(sessions))

    # --- channels ------------------------------------------------------------------------------

    def admit_channel(self, session, access) -> None:
        """channel.open of ``session``: the user's ``max-channels`` over all its connections."""
        user = session.username
        limit = access.user_limit(user, USER_MAX_CHANNELS) if access is not None else None
        if limit is None:
            return
        opened = sum(len(s.conn.channels) for s in self.by_user.get(user, ()))
        if opened + self.counted_elsewhere(("channels", user)) >= limit:
            raise NotAllowed(f"number of channels opened for user '{user}' has reached the maximum allowed "
                             f"user limit of ({limit})")
        if self.count_changed is not None:  # --worker-mode queues: the others count ours at once
            self.count_changed(("channels", user), opened + 1)
            self._channels_told[user] = opened + 1

    def recount_channels(self, access) -> None:
        """--worker-mode queues, every tick: the channels of users with a max-channels, as the
        other workers count them, after channels closed (an open tells at once, above)."""
        told = self._channels_told
        for user in list(told.keys() | self.by_user.keys()):
            if user not in told and (access is None or access.user_limit(user, USER_MAX_CHANNELS) is None):
                continue
            opened = sum(len(s.conn.channels) for s in self.by_user.get(user, ()))
            if told.get(user) != opened:
                self.count_changed(("channels", user), opened)
                if opened:
                    told[user] = opened
                else:
                    told.pop(user, None)

    # --- consumers -----------------------------------------------------------------------------

    def check_consumer(self, channel, tag: str) -> None:
        """A new consumer on ``channel``: RabbitMQ's consumer_max_per_channel (a new tag only)."""
        limit = self.consumer_max_per_channel
        if limit and len(channel.consumers) >= limit and tag not in channel.consumers:
            raise NotAllowed(f"reached maximum ({limit}) of consumers per channel")


NO_LIMITS = BrokerLimits()  # a Broker built without a server (unit tests, tools)


# --- names -------------------------------------------------------------------------------------
