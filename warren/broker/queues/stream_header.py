"""The ``x-stream-offset`` header of every stream delivery, as RabbitMQ sets it: a signed 64-bit
``l`` spliced into the publisher's encoded property list (``set_header``,
warren/codec/property_edits.py), which keeps every other octet, and the type tags of the
publisher's other headers, as they came. Decoding and encoding the list again for every
delivery would cost more than the rest of the delivery. A message that already has the header
(re-published from a stream, say) gets its value replaced, as RabbitMQ does.
"""

from __future__ import annotations

import struct

from warren.codec.properties import STREAM_OFFSET_HEADER
from warren.codec.property_edits import set_header

__all__ = ["with_stream_offset", "OFFSET_HEADER"]

OFFSET_HEADER = STREAM_OFFSET_HEADER
_I64 = struct.Struct(">q")


def with_stream_offset(props: bytes, offset: int) -> bytes:
    """``props`` (an encoded basic property list, maybe empty) with header x-stream-offset = offset."""
    return set_header(props, OFFSET_HEADER, b"l" + _I64.pack(offset))
