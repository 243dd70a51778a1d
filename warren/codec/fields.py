"""Wire encodings of AMQP 0-8/0-9/0-9-1 argument and field-table types.

Decoders take a bytes-like buffer (bytes, bytearray or memoryview) and an offset and return
``(value, new_offset)``; encoders return bytes. Decoders never check bounds themselves: a short
buffer surfaces as IndexError / struct.error or as an offset past the end, which the method
decoder (``warren.codec.methods``) turns into 502 SYNTAX_ERROR in one place.

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
    "decode_value", "encode_value", "TableValueError", "decode_content", "encode_content", "Long", "RawValue",
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
    n = buf[off]
    off += 1
    end = off + n
    if end > len(buf):
        raise IndexError("shortstr runs past the end of the frame")
    return str(buf[off:end], "utf-8", "surrogateescape"), end


def encode_shortstr(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
    if len(b) > 255:
        raise TableValueError(f"shortstr longer than 255 octets ({len(b)})")
    return _u8.pack(len(b)) + b


def decode_longstr(buf, off: int) -> tuple[bytes, int]:
    (n,) = _u32.unpack_from(buf, off)
    off += 4
    end = off + n
    if end > len(buf):
        raise IndexError("longstr runs past the end of the frame")
    return bytes(buf[off:end]), end


def encode_longstr(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    return _u32.pack(len(b)) + b


def decode_content(buf, off: int) -> tuple[tuple[int, bytes], int]:
    """0-9's ``content`` argument type (message class only, INVENTORY.md §5.1): a discriminator
    octet (0 = the body inline, 1 = a reference id) and a longstr; decoded as (kind, bytes)."""
    kind = buf[off]
    data, off = decode_longstr(buf, off + 1)
    return (kind, data), off


def encode_content(value: tuple[int, bytes]) -> bytes:
    kind, data = value
    return _u8.pack(kind) + encode_longstr(data)


# --- field values (INVENTORY.md §5.2) -------------------------------------------------------

def _dec_decimal(buf, off):
    scale, value = _decimal.unpack_from(buf, off)
    return decimal.Decimal(value).scaleb(-scale), off + 5


def _dec_timestamp(buf, off):
    (secs,) = _u64.unpack_from(buf, off)
    return _EPOCH + datetime.timedelta(seconds=secs), off + 8


def _dec_longstr_text(buf, off):
    (n,) = _u32.unpack_from(buf, off)
    off += 4
    end = off + n
    if end > len(buf):
        raise IndexError("string runs past the end of the table")
    return str(buf[off:end], "utf-8", "surrogateescape"), end


def _dec_bytes(buf, off):
    return decode_longstr(buf, off)


def _fixed(st: struct.Struct, convert=None):
    size = st.size
    unpack = st.unpack_from
    if convert is None:
        def dec(buf, off):
            return unpack(buf, off)[0], off + size
    else:
        def dec(buf, off):
            return convert(unpack(buf, off)[0]), off + size
    return dec


_DECODERS = {
    "t": _fixed(_u8, bool),
    "b": _fixed(_i8),
    "B": _fixed(_u8),
    "U": _fixed(_i16),  # 0-9-1 grammar's signed 16; RabbitMQ refuses it, we accept it
    "u": _fixed(_u16),
    "s": _fixed(_i16),  # RabbitMQ/Qpid: signed 16, not a short string
    "I": _fixed(_i32),
    "i": _fixed(_u32),
    "L": _fixed(_i64),
    "l": _fixed(_i64),  # RabbitMQ/Qpid: signed 64
    "f": _fixed(_f32),
    "d": _fixed(_f64),
    "D": _dec_decimal,
    "S": _dec_longstr_text,
    "T": _dec_timestamp,
    "x": _dec_bytes,
    "V": lambda buf, off: (None, off),
}


def decode_value(buf, off: int) -> tuple[Any, int]:
    tag = chr(buf[off])
    off += 1
    if tag == "F":
        return decode_table(buf, off)
    if tag == "A":
        return decode_array(buf, off)
    dec = _DECODERS.get(tag)
    if dec is None:
        raise TableValueError(f"unknown field-table type {tag!r}")
    return dec(buf, off)


def decode_table(buf, off: int) -> tuple[dict[str, Any], int]:
    (size,) = _u32.unpack_from(buf, off)
    off += 4
    end = off + size
    if end > len(buf):
        raise IndexError("table runs past the end of the frame")
    table: dict[str, Any] = {}
    while off < end:
        name, off = decode_shortstr(buf, off)
        value, off = decode_value(buf, off)
        table.setdefault(name, value)  # 0-9 §4.2.5.5: the first of duplicate names wins
    if off != end:
        raise TableValueError("table entries overrun the table length")
    return table, end


def decode_array(buf, off: int) -> tuple[list[Any], int]:
    (size,) = _u32.unpack_from(buf, off)  # a byte count (ERR §4), not an element count
    off += 4
    end = off + size
    if end > len(buf):
        raise IndexError("array runs past the end of the frame")
    items = []
    while off < end:
        value, off = decode_value(buf, off)
        items.append(value)
    if off != end:
        raise TableValueError("array entries overrun the array length")
    return items, end


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
