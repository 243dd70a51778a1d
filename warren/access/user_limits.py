"""User limits as RabbitMQ's ``set_user_limits``: ``max-connections`` and ``max-channels``.

Each an integer: a negative value (RabbitMQ writes -1) means unlimited, 0 means none allowed,
an absent limit means unlimited. ``max-connections`` counts the user's open connections on
this node (all vhosts), ``max-channels`` the channels open on all of them together; the
broker checks both (``warren/broker/limits.py``) with RabbitMQ's 530 texts. Kept with the
users in ``access.json`` (``AccessControl.set_user_limit``), served by the HTTP API at
``/api/user-limits`` (``warren/management/api/user_limits.py``).
"""

from __future__ import annotations

from warren.access.errors import Invalid

__all__ = ["USER_MAX_CONNECTIONS", "USER_MAX_CHANNELS", "USER_LIMIT_NAMES", "validate_user_limits"]

USER_MAX_CONNECTIONS = "max-connections"
USER_MAX_CHANNELS = "max-channels"
USER_LIMIT_NAMES = (USER_MAX_CONNECTIONS, USER_MAX_CHANNELS)


def validate_user_limits(limits) -> dict:
    """A copy of ``limits`` if each key is a user limit and each value an integer; else
    ``Invalid`` with RabbitMQ's wording where it has one."""
    if not isinstance(limits, dict):
        raise Invalid("user limits must be a JSON object")
    out = {}
    for k, v in limits.items():
        if k not in USER_LIMIT_NAMES:
            raise Invalid(f"Unrecognised terms [{{<<\"{k}\">>,{v}}}] in user-limits")
        if isinstance(v, bool) or not isinstance(v, int):
            raise Invalid(f"{k} should be a number, actually was {v!r}")
        out[k] = v
    return out
