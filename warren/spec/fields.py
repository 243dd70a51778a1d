"""Wire encodings of AMQP 0-8/0-9/0-9-1 argument and field-table types.

Decoders take a bytes-like buffer (bytes, bytearray or memoryview) and an offset and return
``(value, new_offset)``; encoders return bytes. The decoders here raise nothing but
``FieldDecodeError`` (a ``ValueError``): ``FieldTruncated`` when a string, table or array runs
past the end of the buffer (the connection answers 501 FRAME_ERROR, as RabbitMQ does for
arguments cut short), the base class for anything wrong inside a table's own length (an unknown
type, a value cut short by its table, nesting deeper than ``MAX_TABLE_DEPTH``, a timestamp no
``datetime`` can hold), answered 502 SYNTAX_ERROR. Every read inside a table or array is
checked against that container's end, so a bad entry can never read its neighbours' octets.

Nesting: tables and arrays nest at most ``MAX_TABLE_DEPTH`` (100) deep, the outermost counting
as 1. RabbitMQ has no limit (it took a 5,000-deep table); real applications nest two or three
levels, and Python clients (pika decodes recursively, two frames a level) cannot read much past
a few hundred levels, so such a table is refused wherever it arrives (issue 16).

Strings: shortstr and field-table ``S`` values decode to ``str`` with UTF-8 and
``surrogateescape``, so any byte sequence round-trips exactly; ``longstr`` method arguments
stay ``bytes`` (they are binary: SASL responses, reserved fields).

Field-table value types follow RabbitMQ and Qpid, not the 0-9-1 grammar (INVENTORY.md §5.2,
all three versions): ``s`` is a signed 16-bit integer, ``l`` and ``L`` are signed 64-bit, ``x``
is a byte array, ``V`` is void, ``A`` has a byte-count length, ``D`` is a decimal whose value is
signed (ERR §3). We emit ``t I l d D S T F A x V`` only.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

__all__ = [
    "decode_shortstr", "encode_shortstr", "decode_longstr", "encode_longstr",
    "decode_table", "encode_table", "decode_array", "encode_array",
    "decode_value", "encode_value", "TableValueError", "FieldDecodeError", "FieldTruncated", "MAX_TABLE_DEPTH",
    "TIMESTAMP_MAX", "decode_content", "encode_content", "Long", "RawValue",
]

_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_u64 = struct.Struct(">Q")
_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
_decimal = struct.Struct(">Bi")

_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)


class TableValueError(ValueError):
    """A value that cannot be put in (or read from) a field table."""


class FieldDecodeError(TableValueError):
    """Octets that do not decode as what they claim to be: the only error the decoders raise."""


class FieldTruncated(FieldDecodeError):
    """A string, table or array whose length runs past the end of the buffer (the frame)."""


#: deepest nesting of tables and arrays accepted (the outermost table is depth 1)
MAX_TABLE_DEPTH = 100
#: largest ``T`` value decoded: 9999-12-31T23:59:59Z, the end of ``datetime``'s range
TIMESTAMP_MAX = 253_402_300_799


class Long(int):
    """An integer encoded as ``l`` (signed 64) whatever its size: the broker writes ``x-death``
    counts and ``x-delivery-count`` so, as RabbitMQ does (Java clients read them as ``Long``)."""

    __slots__ = ()


class RawValue:
    """A field value kept encoded (type tag included) and written back as it came.

    The broker rewrites a message's headers when dead-lettering; the entries it does not change
    go back byte for byte, so their types (``b``, ``s``, ``l``, ``f`` ...) survive."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def decode_shortstr(buf, off: int) -> tuple[str, int]:
    try:
        n = buf[off]
    except IndexError:
        raise FieldTruncated("shortstr runs past the end of the frame") from None
    off += 1
    end = off + n
    if end > len(buf):
        raise FieldTruncated("shortstr runs past the end of the frame")
    return str(buf[off:end], "utf-8", "surrogateescape"), end


def encode_shortstr(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
    if len(b) > 255:
        raise TableValueError(f"shortstr longer than 255 octets ({len(b)})")
    return _u8.pack(len(b)) + b


def decode_longstr(buf, off: int) -> tuple[bytes, int]:
    if off + 4 > len(buf):
        raise FieldTruncated("longstr length runs past the end of the frame")
    (n,) = _u32.unpack_from(buf, off)
    off += 4
    end = off + n
    if end > len(buf):
        raise FieldTruncated("longstr runs past the end of the frame")
    return bytes(buf[off:end]), end


def encode_longstr(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    return _u32.pack(len(b)) + b


def decode_content(buf, off: int) -> tuple[tuple[int, bytes], int]:
    """0-9's ``content`` argument type (message class only, INVENTORY.md §5.1): a discriminator
    octet (0 = the body inline, 1 = a reference id) and a longstr; decoded as (kind, bytes)."""
    if off >= len(buf):
        raise FieldTruncated("content runs past the end of the frame")
    kind = buf[off]
    data, off = decode_longstr(buf, off + 1)
    return (kind, data), off


def encode_content(value: tuple[int, bytes]) -> bytes:
    kind, data = value
    return _u8.pack(kind) + encode_longstr(data)


# --- field values (INVENTORY.md §5.2) -------------------------------------------------------
#
# The internal decoders take the end of the enclosing table or array (``end``) and the nesting
# depth; a value that runs past ``end`` raises ``past`` (FieldTruncated when ``end`` is the end
# of the buffer, FieldDecodeError inside a container).

def _conv_bool(v):
    return v != 0


def _conv_decimal(v):
    scale, value = v
    return decimal.Decimal(value).scaleb(-scale)


def _conv_timestamp(v):
    if v > TIMESTAMP_MAX:
        raise FieldDecodeError(f"timestamp {v} is past the year 9999")
    return _EPOCH + datetime.timedelta(seconds=v)


# tag octet -> (size, struct, converter or None): the fixed-size types
_FIXED = {
    ord("t"): (1, _u8, _conv_bool),
    ord("b"): (1, _i8, None),
    ord("B"): (1, _u8, None),
    ord("U"): (2, _i16, None),  # 0-9-1 grammar's signed 16; RabbitMQ refuses it, we accept it in arguments
    ord("u"): (2, _u16, None),
    ord("s"): (2, _i16, None),  # RabbitMQ/Qpid: signed 16, not a short string
    ord("I"): (4, _i32, None),
    ord("i"): (4, _u32, None),
    ord("L"): (8, _i64, None),
    ord("l"): (8, _i64, None),  # RabbitMQ/Qpid: signed 64
    ord("f"): (4, _f32, None),
    ord("d"): (8, _f64, None),
    ord("D"): (5, _decimal, _conv_decimal),
    ord("T"): (8, _u64, _conv_timestamp),
}
_TAG_S, _TAG_x, _TAG_F, _TAG_A, _TAG_V = b"SxFAV"


def _value(buf, off: int, end: int, depth: int, past):
    """One tagged value at ``off``, inside a container ending at ``end`` (off < end)."""
    tag = buf[off]
    off += 1
    fixed = _FIXED.get(tag)
    if fixed is not None:
        size, st, convert = fixed
        after = off + size
        if after > end:
            raise past(f"{chr(tag)!r} value runs past the end of its {_where(past)}")
        if convert is None:
            return st.unpack_from(buf, off)[0], after
        if size == 5:  # the decimal: two fields
            return convert(st.unpack_from(buf, off)), after
        return convert(st.unpack_from(buf, off)[0]), after
    if tag == _TAG_V:
        return None, off
    if tag == _TAG_S or tag == _TAG_x or tag == _TAG_F or tag == _TAG_A:
        if off + 4 > end:
            raise past(f"{chr(tag)!r} length runs past the end of its {_where(past)}")
        (size,) = _u32.unpack_from(buf, off)
        off += 4
        inner = off + size
        if inner > end:
            raise past(f"{chr(tag)!r} value runs past the end of its {_where(past)}")
        if tag == _TAG_S:
            return str(buf[off:inner], "utf-8", "surrogateescape"), inner
        if tag == _TAG_x:
            return bytes(buf[off:inner]), inner
        if tag == _TAG_F:
            return _entries(buf, off, inner, depth + 1), inner
        return _items(buf, off, inner, depth + 1), inner
    raise FieldDecodeError(f"unknown field-table type {chr(tag)!r}")


def _where(past) -> str:
    return "table" if past is FieldDecodeError else "frame"


def _entries(buf, off: int, end: int, depth: int) -> dict[str, Any]:
    """The entries of a table whose octets are buf[off:end] (end within the buffer)."""
    if depth > MAX_TABLE_DEPTH:
        raise FieldDecodeError(f"field tables nested more than {MAX_TABLE_DEPTH} deep")
    table: dict[str, Any] = {}
    while off < end:
        value_at = off + 1 + buf[off]
        if value_at >= end:  # the name, and at least a type octet, inside the table
            raise FieldDecodeError("table entry runs past the end of its table")
        name = str(buf[off + 1:value_at], "utf-8", "surrogateescape")
        value, off = _value(buf, value_at, end, depth, FieldDecodeError)
        table.setdefault(name, value)  # 0-9 §4.2.5.5: the first of duplicate names wins
    return table


def _items(buf, off: int, end: int, depth: int) -> list[Any]:
    if depth > MAX_TABLE_DEPTH:
        raise FieldDecodeError(f"field tables nested more than {MAX_TABLE_DEPTH} deep")
    items = []
    while off < end:
        value, off = _value(buf, off, end, depth, FieldDecodeError)
        items.append(value)
    return items


def decode_value(buf, off: int, end: int | None = None, depth: int = 1) -> tuple[Any, int]:
    """One tagged value; ``end`` bounds it (default: the buffer's end, FieldTruncated past it).
    ``depth`` is the nesting depth of a table or array value (1 = outermost)."""
    if end is None or end >= len(buf):
        end = len(buf)
        past = FieldTruncated
    else:
        past = FieldDecodeError
    if off >= end:
        raise past(f"field value runs past the end of its {_where(past)}")
    return _value(buf, off, end, depth - 1, past)


def _container(buf, off: int, what: str) -> tuple[int, int]:
    if off + 4 > len(buf):
        raise FieldTruncated(f"{what} length runs past the end of the frame")
    (size,) = _u32.unpack_from(buf, off)  # for an array too a byte count (ERR §4), not an element count
    off += 4
    end = off + size
    if end > len(buf):
        raise FieldTruncated(f"{what} runs past the end of the frame")
    return off, end


def decode_table(buf, off: int, depth: int = 1) -> tuple[dict[str, Any], int]:
    off, end = _container(buf, off, "table")
    return _entries(buf, off, end, depth), end


def decode_array(buf, off: int, depth: int = 1) -> tuple[list[Any], int]:
    off, end = _container(buf, off, "array")
    return _items(buf, off, end, depth), end


_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _encode_decimal(v: decimal.Decimal) -> bytes:
    sign, digits, exponent = v.as_tuple()
    if not isinstance(exponent, int):
        raise TableValueError(f"cannot encode {v} as a decimal")
    scale = -exponent if exponent < 0 else 0
    unscaled = int("".join(map(str, digits)) or "0") * (10 ** exponent if exponent > 0 else 1)
    if sign:
        unscaled = -unscaled
    if scale > 255 or not _I32_MIN <= unscaled <= _I32_MAX:
        raise TableValueError(f"decimal {v} out of range for an AMQP decimal")
    return b"D" + _decimal.pack(scale, unscaled)


def encode_value(v: Any) -> bytes:
    """One tagged field value. The tag is chosen from the Python type (see module docstring)."""
    if isinstance(v, str):
        b = v.encode("utf-8", "surrogateescape")
        return b"S" + _u32.pack(len(b)) + b
    if isinstance(v, bool):
        return b"t\x01" if v else b"t\x00"
    if isinstance(v, int):
        if _I32_MIN <= v <= _I32_MAX and type(v) is not Long:
            return b"I" + _i32.pack(v)
        if _I64_MIN <= v <= _I64_MAX:
            return b"l" + _i64.pack(v)
        raise TableValueError(f"integer {v} does not fit in 64 bits")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return b"x" + _u32.pack(len(v)) + bytes(v)
    if isinstance(v, dict):
        return b"F" + encode_table(v)
    if isinstance(v, (list, tuple)):
        return b"A" + encode_array(v)
    if isinstance(v, float):
        return b"d" + _f64.pack(v)
    if isinstance(v, decimal.Decimal):
        return _encode_decimal(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_UTC)
        return b"T" + _u64.pack(int((v - _EPOCH).total_seconds()))
    if v is None:
        return b"V"
    if type(v) is RawValue:
        return v.data
    raise TableValueError(f"cannot put a {type(v).__name__} in a field table")


def encode_table(table: dict[str, Any] | None) -> bytes:
    if not table:
        return b"\x00\x00\x00\x00"
    parts = []
    for name, value in table.items():
        parts.append(encode_shortstr(name))
        parts.append(encode_value(value))
    body = b"".join(parts)
    return _u32.pack(len(body)) + body


def encode_array(items) -> bytes:
    body = b"".join(encode_value(v) for v in items)
    return _u32.pack(len(body)) + body
