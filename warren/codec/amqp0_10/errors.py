"""The errors of the 0-10 codec: decoding raises ``DecodeError`` and nothing else.

``FramingError`` (a ``DecodeError``) is a fault of the frame or segment layer (a frame shorter
than its header, a segment out of order, an assembly past its limit): frame boundaries or the
assembly state can no longer be trusted, so the connection answers it with
``connection.close(framing-error)``. Any other ``DecodeError`` is a control, command or header
whose octets do not decode: the session answers it (an ``execution.exception``) or the
connection closes, depending on where it happened (``warren.protocol.amqp0_10``).
``EncodeError`` is a value that has no 0-10 form (a str8 longer than 255 octets, say).
"""

from __future__ import annotations

__all__ = ["DecodeError", "FramingError", "EncodeError"]


class DecodeError(ValueError):
    """Octets that do not decode as what they claim to be."""


class FramingError(DecodeError):
    """A frame or segment that breaks the framing rules (INVENTORY.md §11.2)."""


class EncodeError(ValueError):
    """A value that cannot be encoded as the 0-10 type asked for."""
