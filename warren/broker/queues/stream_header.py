"""The ``x-stream-offset`` header of every stream delivery, spliced into the encoded property list.

A stream queue delivers each message with its offset in the header ``x-stream-offset`` (a
signed 64-bit ``l``, as RabbitMQ). Decoding the property list and encoding it again for every
delivery would cost more than the rest of the delivery, and would change the type tags of the
publisher's other headers; so this cuts and splices octets (as ``warren/codec/property_edits.py``):

* no headers table: set the headers flag and insert a table holding only the entry, after
  content-type and content-encoding (the only properties before it);
* a headers table without the key: append the entry and add its size to the table length;
* a table that already has the key (a message re-published from a stream, say): replace the
  value, as RabbitMQ does; only this rare case walks the table's entries.

Everything else is copied unchanged.
"""

from __future__ import annotations

import struct

from warren.codec.properties import CONTENT_ENCODING_FLAG, CONTENT_TYPE_FLAG, HEADERS_FLAG, STREAM_OFFSET_HEADER
from warren.codec.property_edits import replace_header

__all__ = ["with_stream_offset", "OFFSET_HEADER"]

OFFSET_HEADER = STREAM_OFFSET_HEADER
_KEY = b"\x0f" + OFFSET_HEADER.encode()  # the key as a shortstr
_ENTRY_SIZE = len(_KEY) + 1 + 8  # key, the 'l' tag, the int64
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
# the flags tested here, in the high octet of the first flag word
_HEADERS_HI = HEADERS_FLAG >> 8
_CONTENT_TYPE_HI, _CONTENT_ENCODING_HI = CONTENT_TYPE_FLAG >> 8, CONTENT_ENCODING_FLAG >> 8


def with_stream_offset(props: bytes, offset: int) -> bytes:
    """``props`` (an encoded basic property list, maybe empty) with header x-stream-offset = offset."""
    value = b"l" + _I64.pack(offset)
    if len(props) < 2:
        return b"\x20\x00" + _U32.pack(_ENTRY_SIZE) + _KEY + value
    hi = props[0]
    off = 2
    while props[off - 1] & 1:  # continuation flag words: no basic property needs them; skip
        off += 2
    if hi & _CONTENT_TYPE_HI:
        off += 1 + props[off]
    if hi & _CONTENT_ENCODING_HI:
        off += 1 + props[off]
    if not hi & _HEADERS_HI:
        return b"".join((bytes((hi | _HEADERS_HI,)), props[1:off], _U32.pack(_ENTRY_SIZE), _KEY, value,
                         props[off:]))
    (size,) = _U32.unpack_from(props, off)
    end = off + 4 + size
    if props.find(_KEY, off + 4, end) >= 0:  # maybe present (or these octets inside a value)
        try:
            return replace_header(props, OFFSET_HEADER, value)
        except KeyError:
            pass  # the octets were part of some other value: the key is absent after all
    return b"".join((props[:off], _U32.pack(size + _ENTRY_SIZE), props[off + 4:end], _KEY, value, props[end:]))
