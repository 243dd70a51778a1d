"""AMQP errors as exception classes that carry their reply code.

The tree::

    AMQPError                      reply_code, text, class_id, method_id
    ├── SoftError                  closes the channel (channel.close)
    │   ├── ContentTooLarge  311   ├── AccessRefused 403   ├── NotFound 404
    │   ├── ResourceLocked   405   └── PreconditionFailed 406
    └── HardError                  closes the connection (connection.close)
        ├── ConnectionForced 320   ├── InvalidPath 402     ├── FrameError 501
        ├── SyntaxError_ 502       ├── CommandInvalid 503  ├── ChannelError 504
        ├── UnexpectedFrame 505    ├── ResourceError 506   ├── NotAllowed 530
        ├── NotImplemented_ 540    ├── InternalError 541
        └── ConnectionAccessRefused 403 (a refused login or vhost: 403 sent on the connection)

The broker's operations raise these; one place per protocol catches them (the 0-9-1 connection
handler, ``warren/protocol/amqp0_9_1/adapter.py``, turns SoftError into channel.close and
HardError into connection.close). Anything that is not an AMQPError is our
own bug and becomes 541 INTERNAL_ERROR with a traceback in the log. Reply codes: INVENTORY.md §4.
"""

from __future__ import annotations

__all__ = [
    "AMQPError", "SoftError", "HardError",
    "ContentTooLarge", "NoRoute", "AccessRefused", "NotFound", "ResourceLocked", "PreconditionFailed",
    "ConnectionForced", "InvalidPath", "FrameError", "SyntaxError_", "CommandInvalid", "ChannelError",
    "UnexpectedFrame", "ResourceError", "NotAllowed", "NotImplemented_", "InternalError",
    "ConnectionAccessRefused", "error_for_code", "error_record", "error_from_record",
]

REPLY_SUCCESS = 200
_BY_CODE: dict[tuple[bool, int], type["AMQPError"]] = {}


class AMQPError(Exception):
    """A protocol-level refusal: reply code, text, and the method that caused it."""

    reply_code: int = 0
    hard: bool = False
    # seconds the answer waits before it is sent: a failed login the login throttle slows down
    # (warren/access/login_throttle.py) sets it on its 403; every other refusal goes at once
    throttle_delay: float = 0.0
    # what the log is told and the client is not (why a login failed); set where it is known
    log_detail: str | None = None
    # the channel an error raised inside a sans-IO connection belongs to, where that
    # connection knows it (an oversized content header); 0 otherwise
    channel: int = 0

    def __init__(self, text: str = "", class_id: int = 0, method_id: int = 0) -> None:
        super().__init__(text)
        self.text = text
        self.class_id = class_id
        self.method_id = method_id

    def __init_subclass__(cls, register: bool = True, **kw) -> None:
        super().__init_subclass__(**kw)
        if register and cls.reply_code:
            key = (cls.hard, cls.reply_code)
            if key in _BY_CODE:
                raise TypeError(f"duplicate reply code {key} for {cls.__name__} and {_BY_CODE[key].__name__}")
            _BY_CODE[key] = cls

    @property
    def reply_text(self) -> str:
        """The text sent to the peer: the code's name, then the detail, as RabbitMQ writes it."""
        name = type(self).__name__.rstrip("_")
        snake = "".join("_" + c if c.isupper() else c for c in name).lstrip("_").upper()
        snake = snake.replace("CONNECTION_ACCESS_REFUSED", "ACCESS_REFUSED")
        return f"{snake} - {self.text}" if self.text else snake

    @property
    def close_reason(self) -> str:
        """Why a connection this error closes ends, for its close line (0-9-1's adapter and the
        --workers supervisor): the logged reason and the code, else the code and the text."""
        if self.log_detail:
            return f"{self.log_detail} ({self.reply_code} {self.reply_text.split(' - ')[0]})"
        return f"connection error {self.reply_code} {self.reply_text}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reply_code}, {self.text!r}, {self.class_id}, {self.method_id})"


class SoftError(AMQPError):
    """A channel exception: the channel is closed, the connection lives on."""


class HardError(AMQPError):
    """A connection exception: the whole connection is closed."""

    hard = True


class ContentTooLarge(SoftError):
    reply_code = 311


class NoRoute(SoftError):
    reply_code = 312


class AccessRefused(SoftError):
    reply_code = 403


class NotFound(SoftError):
    reply_code = 404


class ResourceLocked(SoftError):
    reply_code = 405


class PreconditionFailed(SoftError):
    reply_code = 406


class ConnectionForced(HardError):
    reply_code = 320


class InvalidPath(HardError):
    reply_code = 402


class ConnectionAccessRefused(HardError):
    """403 sent as connection.close: a refused login, or a vhost the user may not use."""

    reply_code = 403


class FrameError(HardError):
    reply_code = 501


class SyntaxError_(HardError):  # trailing underscore: do not shadow the builtin
    reply_code = 502


class CommandInvalid(HardError):
    reply_code = 503


class ChannelError(HardError):
    reply_code = 504


class UnexpectedFrame(HardError):
    reply_code = 505


class ResourceError(HardError):
    reply_code = 506


class NotAllowed(HardError):
    reply_code = 530


class NotImplemented_(HardError):
    reply_code = 540


class InternalError(HardError):
    reply_code = 541


def error_for_code(code: int, hard: bool) -> type[AMQPError]:
    """The exception class for a reply code (used by the client-mode codec and tests)."""
    return _BY_CODE[(hard, code)]


def error_record(error: BaseException, where: str) -> tuple:
    """An error as it travels to another process or node: its class name and text for an
    AMQPError (raised again there as the same class), else an InternalError naming ``where``."""
    if isinstance(error, AMQPError):
        return (type(error).__name__, error.text)
    return ("InternalError", f"{type(error).__name__} on {where}")


def error_from_record(record) -> AMQPError:
    """``error_record``'s tuple raised again: the ``warren.errors`` class it names (InternalError
    for a name that is not one)."""
    name, text = record
    cls = globals().get(str(name))
    if not (isinstance(cls, type) and issubclass(cls, AMQPError)):
        cls = InternalError
    return cls(str(text))
