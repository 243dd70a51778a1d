"""The AMQP 1.0 type system (OASIS AMQP 1.0 part 1): values to octets and back.

Every value on the wire starts with a constructor: a format code (part 1 §1.6, the table
``ENCODINGS`` of ``warren/spec/amqp1_0.py``), or 0x00 followed by a descriptor value and another
constructor (a described type, §1.2). Python values map onto the primitives as follows; where a
Python type stands for several AMQP types, a subclass names the one meant, and decoding returns
that subclass, so ``decode(encode(v)) == v`` keeps the type:

==================  ======================================================================
AMQP                Python
==================  ======================================================================
null                None
boolean             bool (encoded as ``true``/``false``, 0x41/0x42; 0x56 is decoded)
ubyte .. ulong      ``UByte``, ``UShort``, ``UInt``, ``ULong`` (int subclasses)
byte .. long        ``Byte``, ``Short``, ``Int``, ``Long``; a plain int encodes as long (or
                    ulong past long's range)
float, double       ``Float``; a plain float is a double
decimal32/64/128    ``Decimal32``/``Decimal64``/``Decimal128``: the raw octets (bytes subclasses)
char                ``Char`` (a one-character str)
timestamp           ``Timestamp`` (int, milliseconds since the Unix epoch)
uuid                ``uuid.UUID``
binary, string      bytes, str
symbol              ``Symbol`` (a str subclass, ASCII)
list, map           list, dict (a key that Python cannot hash is a decode error)
array               ``Array`` (a list with ``.type``, the primitive of its elements)
described           a composite of ``warren.spec.amqp1_0`` when its descriptor is one (an
                    ``Open``, a ``Source``...), else ``Described(descriptor, value)``
==================  ======================================================================

Encoding picks the smallest form (uint0, smalluint, list0, str8...; an array uses the full-width
form of its element type). Decoding is total: any octets decode or raise ``DecodeError`` (the
connection answers ``amqp:decode-error``): a length running past its container, an unknown format
code, a map with an odd count or a duplicate key, nesting deeper than ``MAX_DEPTH``, a string that
is not UTF-8, a symbol that is not ASCII, a composite missing a mandatory field, a count larger
than its octets could hold. Nothing is allocated from a count before the octets are known to be
there.

One module past 600 lines on purpose: the value classes, the encoders and the decoders of each
format code are read side by side (a format code's both directions in one file).
"""

from __future__ import annotations

import struct
import uuid

from warren.spec import amqp1_0 as spec
from warren.spec.base1_0 import Composite

__all__ = ["DecodeError", "EncodeError", "Symbol", "Char", "UByte", "UShort", "UInt", "ULong", "Byte", "Short",
           "Int", "Long", "Float", "Timestamp", "Decimal32", "Decimal64", "Decimal128", "Array", "Described",
           "encode", "decode", "decode_value", "encode_composite", "as_list", "MAX_DEPTH"]

MAX_DEPTH = 32  # nesting of lists, maps, arrays and described values: deeper is a decode error
# an array of null, true, false, uint0, ulong0 or list0 takes no octets per element: its count
# alone would make a list of any length, so it is bounded here (no client sends such arrays)
MAX_ZERO_WIDTH_ELEMENTS = 65536


class DecodeError(ValueError):
    """Octets that are not a well-formed AMQP 1.0 value (``amqp:decode-error``)."""


class EncodeError(ValueError):
    """A value that has no AMQP 1.0 encoding (ours, not the peer's: a bug or a bad argument)."""


class Symbol(str):
    __slots__ = ()


class Char(str):
    __slots__ = ()


class _Typed(int):
    __slots__ = ()
    TYPE = ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_Typed):
    __slots__ = ()
    TYPE = "ubyte"


class UShort(_Typed):
    __slots__ = ()
    TYPE = "ushort"


class UInt(_Typed):
    __slots__ = ()
    TYPE = "uint"


class ULong(_Typed):
    __slots__ = ()
    TYPE = "ulong"


class Byte(_Typed):
    __slots__ = ()
    TYPE = "byte"


class Short(_Typed):
    __slots__ = ()
    TYPE = "short"


class Int(_Typed):
    __slots__ = ()
    TYPE = "int"


class Long(_Typed):
    __slots__ = ()
    TYPE = "long"


class Timestamp(_Typed):
    __slots__ = ()
    TYPE = "timestamp"


class Float(float):
    __slots__ = ()


class Decimal32(bytes):
    __slots__ = ()


class Decimal64(bytes):
    __slots__ = ()


class Decimal128(bytes):
    __slots__ = ()


class Array(list):
    """An AMQP array: every element of one primitive type (``type``, a name of ``ENCODINGS``)."""

    def __init__(self, items=(), type: str = "null") -> None:  # noqa: A002 - the spec's word
        super().__init__(items)
        self.type = type

    def __eq__(self, other) -> bool:
        return isinstance(other, Array) and other.type == self.type and list.__eq__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Array({list.__repr__(self)}, type={self.type!r})"


class Described:
    """A described value whose descriptor names no composite of the spec."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor, value) -> None:
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other) -> bool:
        return type(other) is Described and other.descriptor == self.descriptor and other.value == self.value

    __hash__ = None

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


def as_list(value) -> list:
    """A ``multiple="true"`` field (part 1 §1.4: one value or an array of them) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


# --- encoding -------------------------------------------------------------------------------------

_B, _H, _I, _Q = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")
_b, _h, _i, _q = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_f, _d = struct.Struct(">f"), struct.Struct(">d")
_RANGES = {"ubyte": (0, 0xFF), "ushort": (0, 0xFFFF), "uint": (0, 0xFFFFFFFF), "ulong": (0, (1 << 64) - 1),
           "byte": (-0x80, 0x7F), "short": (-0x8000, 0x7FFF), "int": (-(1 << 31), (1 << 31) - 1),
           "long": (-(1 << 63), (1 << 63) - 1), "timestamp": (-(1 << 63), (1 << 63) - 1)}


def _check_range(kind: str, v: int) -> None:
    lo, hi = _RANGES[kind]
    if not lo <= v <= hi:
        raise EncodeError(f"{v} is out of range for {kind}")


def _encode_int(kind: str, v: int, out: list) -> None:
    _check_range(kind, v)
    if kind == "uint":
        out.append(b"\x43" if v == 0 else b"\x52" + _B.pack(v) if v < 256 else b"\x70" + _I.pack(v))
    elif kind == "ulong":
        out.append(b"\x44" if v == 0 else b"\x53" + _B.pack(v) if v < 256 else b"\x80" + _Q.pack(v))
    elif kind == "int":
        out.append(b"\x54" + _b.pack(v) if -128 <= v <= 127 else b"\x71" + _i.pack(v))
    elif kind == "long":
        out.append(b"\x55" + _b.pack(v) if -128 <= v <= 127 else b"\x81" + _q.pack(v))
    elif kind == "ubyte":
        out.append(b"\x50" + _B.pack(v))
    elif kind == "ushort":
        out.append(b"\x60" + _H.pack(v))
    elif kind == "byte":
        out.append(b"\x51" + _b.pack(v))
    elif kind == "short":
        out.append(b"\x61" + _h.pack(v))
    else:  # timestamp
        out.append(b"\x83" + _q.pack(v))


def _encode_variable(small: int, large: int, data: bytes, out: list) -> None:
    n = len(data)
    if n < 256:
        out.append(bytes((small, n)))
    else:
        out.append(bytes((large,)) + _I.pack(n))
    out.append(data)


def _encode_compound(small: int, large: int, count: int, body: bytes, out: list) -> None:
    size = len(body)
    if size + 1 < 256 and count < 256:
        out.append(bytes((small, size + 1, count)))
    else:
        out.append(bytes((large,)) + _I.pack(size + 4) + _I.pack(count))
    out.append(body)


def _encode_list(items, out: list) -> None:
    if not items:
        out.append(b"\x45")
        return
    parts: list = []
    for item in items:
        _encode(item, parts)
    _encode_compound(0xC0, 0xD0, len(items), b"".join(parts), out)


def _encode_map(mapping: dict, out: list, symbol_keys: bool = False) -> None:
    parts: list = []
    for k, v in mapping.items():
        _encode(Symbol(k) if symbol_keys and type(k) is str else k, parts)
        _encode(v, parts)
    _encode_compound(0xC1, 0xD1, 2 * len(mapping), b"".join(parts), out)


# array elements: the full-width constructor of each fixed type
_ARRAY_CODES = {"null": 0x40, "boolean": 0x56, "ubyte": 0x50, "ushort": 0x60, "uint": 0x70, "ulong": 0x80,
                "byte": 0x51, "short": 0x61, "int": 0x71, "long": 0x81, "float": 0x72, "double": 0x82,
                "decimal32": 0x74, "decimal64": 0x84, "decimal128": 0x94, "char": 0x73, "timestamp": 0x83,
                "uuid": 0x98, "list": 0xD0, "map": 0xD1, "array": 0xF0}
_FIXED_PACK = {0x50: _B, 0x60: _H, 0x70: _I, 0x80: _Q, 0x51: _b, 0x61: _h, 0x71: _i, 0x81: _q, 0x83: _q,
               0x72: _f, 0x82: _d}


def _array_element(kind: str, code: int, v, out: list) -> None:
    """One array element without its constructor."""
    if kind == "boolean":
        out.append(b"\x01" if v else b"\x00")
    elif kind == "null":
        pass
    elif code in _FIXED_PACK:
        if kind in _RANGES:
            _check_range(kind, v)
        out.append(_FIXED_PACK[code].pack(v))
    elif kind in ("decimal32", "decimal64", "decimal128"):
        out.append(bytes(v))
    elif kind == "char":
        out.append(_I.pack(ord(v)))
    elif kind == "uuid":
        out.append(v.bytes)
    elif kind in ("binary", "string", "symbol"):
        data = v.encode("utf-8") if kind == "string" else v.encode("ascii") if kind == "symbol" else bytes(v)
        out.append(_I.pack(len(data)) + data if code >= 0xB0 else bytes((len(data),)) + data)
    else:  # list, map, array: their 32-bit form without the constructor octet
        parts: list = []
        if kind == "list":
            for item in v:
                _encode(item, parts)
            count = len(v)
        elif kind == "map":
            for k, x in v.items():
                _encode(k, parts)
                _encode(x, parts)
            count = 2 * len(v)
        else:
            _encode_array(v, parts)
            inner = b"".join(parts)
            out.append(inner[1:])  # an array32 (0xF0) without its constructor
            return
        body = b"".join(parts)
        out.append(_I.pack(len(body) + 4) + _I.pack(count) + body)


def _encode_array(arr: Array, out: list) -> None:
    kind = arr.type
    if kind in ("binary", "string", "symbol"):
        small = all(len(x.encode("utf-8") if isinstance(x, str) else x) < 256 for x in arr)
        code = {"binary": 0xA0, "string": 0xA1, "symbol": 0xA3}[kind] | (0 if small else 0x10)
    elif kind in _ARRAY_CODES:
        code = _ARRAY_CODES[kind]
        if kind == "array":
            code = 0xF0
    else:
        raise EncodeError(f"no array of {kind!r}")
    parts: list = [bytes((code,))]
    for v in arr:
        _array_element(kind, code, v, parts)
    body = b"".join(parts)
    count = len(arr)
    if len(body) + 1 < 256 and count < 256:
        out.append(bytes((0xE0, len(body) + 1, count)))
    else:
        out.append(b"\xf0" + _I.pack(len(body) + 4) + _I.pack(count))
    out.append(body)


class _Raw(bytes):
    """Octets already encoded (a map of symbol keys inside a composite)."""

    __slots__ = ()


def _encode(v, out: list) -> None:
    t = type(v)
    if t is _Raw:
        out.append(bytes(v))
    elif v is None:
        out.append(b"\x40")
    elif t is bool:
        out.append(b"\x41" if v else b"\x42")
    elif isinstance(v, _Typed):
        _encode_int(v.TYPE, int(v), out)
    elif t is int:
        if -(1 << 63) <= v < (1 << 63):
            _encode_int("long", v, out)
        else:
            _encode_int("ulong", v, out)
    elif t is Float:
        out.append(b"\x72" + _f.pack(v))
    elif t is float:
        out.append(b"\x82" + _d.pack(v))
    elif t is Symbol:
        try:
            _encode_variable(0xA3, 0xB3, v.encode("ascii"), out)
        except UnicodeEncodeError:
            raise EncodeError(f"symbol {v!r} is not ASCII") from None
    elif t is Char:
        if len(v) != 1:
            raise EncodeError(f"char {v!r} is not one character")
        out.append(b"\x73" + _I.pack(ord(v)))
    elif isinstance(v, str):
        try:
            data = v.encode("utf-8")
        except UnicodeEncodeError:
            raise EncodeError(f"string {v!r} is not UTF-8 (a lone surrogate)") from None
        _encode_variable(0xA1, 0xB1, data, out)
    elif t is Decimal32 or t is Decimal64 or t is Decimal128:
        code, width = {Decimal32: (0x74, 4), Decimal64: (0x84, 8), Decimal128: (0x94, 16)}[t]
        if len(v) != width:
            raise EncodeError(f"{t.__name__} needs {width} octets")
        out.append(bytes((code,)) + bytes(v))
    elif isinstance(v, (bytes, bytearray, memoryview)):
        _encode_variable(0xA0, 0xB0, bytes(v), out)
    elif t is uuid.UUID:
        out.append(b"\x98" + v.bytes)
    elif t is Array:
        _encode_array(v, out)
    elif isinstance(v, list):
        _encode_list(v, out)
    elif isinstance(v, dict):
        _encode_map(v, out)
    elif isinstance(v, Composite):
        out.append(b"\x00")
        _encode_int("ulong", v.CODE, out)
        _encode_fields(v, out)
    elif t is Described:
        out.append(b"\x00")
        _encode(v.descriptor, out)
        _encode(v.value, out)
    else:
        raise EncodeError(f"no AMQP 1.0 encoding for {t.__name__}")


_SYMBOL_KEYED = {"fields", "annotations", "message-annotations", "delivery-annotations", "footer",
                 "node-properties", "filter-set"}
_WRAP = {"ubyte": UByte, "ushort": UShort, "uint": UInt, "ulong": ULong, "byte": Byte, "short": Short,
         "int": Int, "long": Long, "timestamp": Timestamp, "symbol": Symbol, "float": Float, "char": Char}


def _field_value(f, v):
    """A composite field's value in its declared primitive (a plain int for a uint field...)."""
    wrap = _WRAP.get(f.primitive)
    if wrap is not None and type(v) is not wrap and not isinstance(v, (list, Composite, Described)):
        if wrap is Symbol or wrap is Char:
            return wrap(v.value if hasattr(v, "value") else v)
        return wrap(v)
    return v


def _encode_fields(c: Composite, out: list) -> None:
    values = []
    for f in c.FIELDS:
        v = getattr(c, f.name)
        if v is None or (f.default is not None and not f.mandatory and type(v) is not Array and v == f.default):
            values.append(None)  # null stands for the default (part 1 §1.4)
            continue
        if f.multiple and isinstance(v, list) and type(v) is not Array:
            wrap = _WRAP.get(f.primitive)
            v = Array([wrap(x) if wrap is not None else x for x in v], f.primitive)
        elif f.primitive == "map" and isinstance(v, dict) and f.type in _SYMBOL_KEYED:
            parts: list = []
            _encode_map(v, parts, symbol_keys=True)
            values.append(_Raw(b"".join(parts)))
            continue
        elif f.primitive == "boolean":
            v = bool(v)
        elif f.primitive != "*":
            v = _field_value(f, v)
        values.append(v)
    while values and values[-1] is None:  # trailing nulls may be left off (part 1 §1.4)
        values.pop()
    _encode_list(values, out)


def encode(value) -> bytes:
    """The AMQP 1.0 encoding of a Python value (see the module docstring for the types)."""
    out: list = []
    _encode(value, out)
    return b"".join(out)


def encode_composite(c: Composite) -> bytes:
    return encode(c)


# --- decoding -------------------------------------------------------------------------------------

def _need(end: int, off: int, n: int, what: str) -> None:
    if off + n > end:
        raise DecodeError(f"{what} runs past the end of its container ({off + n - end} octets short)")


def _fixed(code: int, buf, off: int, end: int):
    """A fixed-width value (constructor ``code`` already read): (value, new offset)."""
    if code == 0x40:
        return None, off
    if code == 0x41:
        return True, off
    if code == 0x42:
        return False, off
    if code == 0x43:
        return UInt(0), off
    if code == 0x44:
        return ULong(0), off
    if code == 0x45:
        return [], off
    width, make = _FIXED.get(code, (None, None))
    if width is None:
        raise DecodeError(f"unknown format code 0x{code:02x}")
    _need(end, off, width, f"a value of format code 0x{code:02x}")
    return make(buf, off), off + width


def _bool_octet(buf, off):
    v = buf[off]
    if v > 1:
        raise DecodeError(f"boolean octet {v} is neither 0 nor 1")
    return v == 1


def _char(buf, off):
    cp = _I.unpack_from(buf, off)[0]
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise DecodeError(f"char U+{cp:X} is not a Unicode scalar value")
    return Char(chr(cp))


_FIXED = {
    0x56: (1, _bool_octet),
    0x50: (1, lambda b, o: UByte(b[o])),
    0x60: (2, lambda b, o: UShort(_H.unpack_from(b, o)[0])),
    0x70: (4, lambda b, o: UInt(_I.unpack_from(b, o)[0])),
    0x52: (1, lambda b, o: UInt(b[o])),
    0x80: (8, lambda b, o: ULong(_Q.unpack_from(b, o)[0])),
    0x53: (1, lambda b, o: ULong(b[o])),
    0x51: (1, lambda b, o: Byte(_b.unpack_from(b, o)[0])),
    0x61: (2, lambda b, o: Short(_h.unpack_from(b, o)[0])),
    0x71: (4, lambda b, o: Int(_i.unpack_from(b, o)[0])),
    0x54: (1, lambda b, o: Int(_b.unpack_from(b, o)[0])),
    0x81: (8, lambda b, o: Long(_q.unpack_from(b, o)[0])),
    0x55: (1, lambda b, o: Long(_b.unpack_from(b, o)[0])),
    0x72: (4, lambda b, o: Float(_f.unpack_from(b, o)[0])),
    0x82: (8, lambda b, o: _d.unpack_from(b, o)[0]),
    0x74: (4, lambda b, o: Decimal32(bytes(b[o:o + 4]))),
    0x84: (8, lambda b, o: Decimal64(bytes(b[o:o + 8]))),
    0x94: (16, lambda b, o: Decimal128(bytes(b[o:o + 16]))),
    0x73: (4, _char),
    0x83: (8, lambda b, o: Timestamp(_q.unpack_from(b, o)[0])),
    0x98: (16, lambda b, o: uuid.UUID(bytes=bytes(b[o:o + 16]))),
}


def _variable(code: int, buf, off: int, end: int):
    if code & 0x10:  # vbin32, str32, sym32
        _need(end, off, 4, "a 32-bit length")
        n = _I.unpack_from(buf, off)[0]
        off += 4
    else:
        _need(end, off, 1, "an 8-bit length")
        n = buf[off]
        off += 1
    _need(end, off, n, f"a value of {n} octets")
    data = bytes(buf[off:off + n])
    off += n
    kind = code & 0x0F
    if kind == 0x00:
        return data, off
    if kind == 0x01:
        try:
            return data.decode("utf-8"), off
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e.reason} at octet {e.start}") from None
    try:
        return Symbol(data.decode("ascii")), off
    except UnicodeDecodeError:
        raise DecodeError("symbol is not ASCII") from None


def _compound_header(code: int, buf, off: int, end: int, what: str) -> tuple[int, int, int]:
    """(count, offset of the first item, offset past the container) of a list, map or array."""
    if code & 0x10:  # 32-bit size and count
        _need(end, off, 8, f"a {what}32 header")
        size, count = _I.unpack_from(buf, off)[0], _I.unpack_from(buf, off + 4)[0]
        width = 4
    else:
        _need(end, off, 2, f"a {what}8 header")
        size, count = buf[off], buf[off + 1]
        width = 1
    if size < width:
        raise DecodeError(f"{what} size {size} is smaller than its count field")
    stop = off + width + size
    if stop > end:
        raise DecodeError(f"{what} of {size} octets runs past the end of its container ({stop - end} octets short)")
    return count, off + 2 * width, stop


def _decode(buf, off: int, end: int, depth: int):
    if off >= end:
        raise DecodeError("a value is missing (no constructor octet)")
    code = buf[off]
    off += 1
    if code == 0x00:
        return _described(buf, off, end, depth)
    return _payload(code, buf, off, end, depth)


def _payload(code: int, buf, off: int, end: int, depth: int):
    hi = code & 0xF0
    if hi in (0xA0, 0xB0):
        if code & 0x0F not in (0x00, 0x01, 0x03):
            raise DecodeError(f"unknown format code 0x{code:02x}")
        return _variable(code, buf, off, end)
    if code in (0xC0, 0xD0, 0xC1, 0xD1):
        if depth >= MAX_DEPTH:
            raise DecodeError(f"values nested deeper than {MAX_DEPTH}")
        is_map = code & 1
        count, pos, stop = _compound_header(code, buf, off, end, "map" if is_map else "list")
        if count > stop - pos:  # every item takes one octet at least
            raise DecodeError(f"{'map' if is_map else 'list'} count {count} exceeds its {stop - pos} octets")
        items = []
        for _ in range(count):
            v, pos = _decode(buf, pos, stop, depth + 1)
            items.append(v)
        if pos != stop:
            raise DecodeError(f"{stop - pos} octets left over after the last item of a {'map' if is_map else 'list'}")
        if not is_map:
            return items, stop
        if count % 2:
            raise DecodeError(f"map with an odd count ({count})")
        out = {}
        for i in range(0, count, 2):
            k = items[i]
            try:
                if k in out:
                    raise DecodeError(f"map has the key {k!r} twice")
            except TypeError:
                raise DecodeError(f"map key of type {type(k).__name__} is not supported") from None
            out[k] = items[i + 1]
        return out, stop
    if code in (0xE0, 0xF0):
        if depth >= MAX_DEPTH:
            raise DecodeError(f"values nested deeper than {MAX_DEPTH}")
        count, pos, stop = _compound_header(code, buf, off, end, "array")
        return _array(buf, pos, stop, count, depth + 1), stop
    return _fixed(code, buf, off, end)


_TYPE_OF_CODE = {c: name for name, encodings in spec.ENCODINGS.items() for _, c, _, _ in encodings}
_WIDTH_OF_CODE = {c: w for encodings in spec.ENCODINGS.values() for _, c, cat, w in encodings if cat == "fixed"}


def _array(buf, pos: int, stop: int, count: int, depth: int) -> Array:
    if pos >= stop:
        raise DecodeError("array without an element constructor")
    code = buf[pos]
    pos += 1
    descriptor = None
    if code == 0x00:  # an array of described values: one descriptor for all
        descriptor, pos = _decode(buf, pos, stop, depth)
        _need(stop, pos, 1, "an array element constructor")
        code = buf[pos]
        pos += 1
        if code == 0x00:
            raise DecodeError("array element constructor described twice")
    kind = _TYPE_OF_CODE.get(code)
    if kind is None:
        raise DecodeError(f"unknown array element format code 0x{code:02x}")
    width = _WIDTH_OF_CODE.get(code)
    if width == 0:  # null, true, false, uint0, ulong0, list0: no octets per element
        if count > MAX_ZERO_WIDTH_ELEMENTS:
            raise DecodeError(f"array of {count} zero-width elements")
    elif count > stop - pos:
        raise DecodeError(f"array count {count} exceeds its {stop - pos} octets")
    items = Array((), kind)
    for _ in range(count):
        v, pos = _payload(code, buf, pos, stop, depth)
        items.append(v if descriptor is None else _describe(descriptor, v))
    if pos != stop:
        raise DecodeError(f"{stop - pos} octets left over after the last element of an array")
    return items


def _described(buf, off: int, end: int, depth: int):
    if depth >= MAX_DEPTH:
        raise DecodeError(f"values nested deeper than {MAX_DEPTH}")
    descriptor, off = _decode(buf, off, end, depth + 1)
    value, off = _decode(buf, off, end, depth + 1)
    return _describe(descriptor, value), off


def _describe(descriptor, value):
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        cls = spec.BY_CODE.get(int(descriptor))
    elif type(descriptor) is Symbol:
        cls = spec.BY_SYMBOL.get(descriptor)
    else:
        cls = None
    if cls is None:
        return Described(descriptor, value)
    return composite_from_list(cls, value)


_INT_PRIMITIVES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "timestamp"}
# primitive -> the Python types a field of it may hold once decoded (None: anything); a string
# where a symbol belongs is taken (lenient, as clients differ there)
_FIELD_TYPES = {"boolean": (bool,), "string": (str,), "symbol": (str,), "binary": (bytes,), "map": (dict,),
                "list": (Composite, Described, list), "uuid": (uuid.UUID,), "float": (Float,), "double": (float,),
                "char": (Char,)}


def _field_ok(f, v) -> bool:
    if f.primitive == "*":
        return True
    if f.primitive in _INT_PRIMITIVES:
        return isinstance(v, int) and not isinstance(v, bool)
    allowed = _FIELD_TYPES.get(f.primitive)
    return allowed is None or isinstance(v, allowed)


def composite_from_list(cls, value):
    """An instance of composite ``cls`` from its described list (a list0 is all defaults); a
    field holding a value of another type than its own is a decode error."""
    if not isinstance(value, list) or isinstance(value, Array):
        raise DecodeError(f"{cls.NAME} is not described as a list")
    fields = cls.FIELDS
    if len(value) > len(fields):
        raise DecodeError(f"{cls.NAME} has {len(value)} fields, at most {len(fields)} are defined")
    c = cls.__new__(cls)
    for i, f in enumerate(fields):
        v = value[i] if i < len(value) else None
        if v is None:
            if f.mandatory:
                raise DecodeError(f"{cls.NAME}: mandatory field {f.name.replace('_', '-')} is missing")
            v = f.default
        elif not (_field_ok(f, v) or (f.multiple and isinstance(v, list) and all(_field_ok(f, x) for x in v))):
            raise DecodeError(f"{cls.NAME}: field {f.name.replace('_', '-')} holds a {type(v).__name__}, "
                              f"not a {f.type}")
        setattr(c, f.name, v)
    return c


def decode_value(buf, off: int = 0, end: int | None = None):
    """(value, offset past it) of the value at ``buf[off:end]``; DecodeError if malformed."""
    if end is None:
        end = len(buf)
    try:
        return _decode(buf, off, end, 0)
    except (struct.error, IndexError, OverflowError, RecursionError) as e:  # belt and braces: bounds are checked
        raise DecodeError(f"malformed value: {e}") from None


def decode(data) -> object:
    """The one value ``data`` holds (octets left over are a decode error)."""
    value, off = decode_value(data, 0, len(data))
    if off != len(data):
        raise DecodeError(f"{len(data) - off} octets after the value")
    return value
