"""AMQP 0-10 types, structs, controls, commands and header segments (INVENTORY.md §11.3-11.4).

Two ways of reading a value:

* **A field of a struct, control or command**, whose type the spec names: decoded to a plain
  Python value (``str8``/``str16`` -> ``str``, ``vbin*`` -> ``bytes``, integers and ``datetime``
  -> ``int``, ``uuid`` -> ``uuid.UUID``, ``sequence-set`` -> ``SequenceSet``, a struct-typed
  field -> that struct's object, ``map`` -> ``dict``, ``array`` -> ``Array``).
* **A typed value** inside a ``map``, ``list`` or ``array``, where a type code precedes it:
  decoded to a Python value whose class says which type it came as, so it encodes back to the
  same octets. The common types are plain classes (``str`` = str16, ``bytes`` = vbin32, ``int``
  = int64, ``float`` = double, ``bool`` = boolean, ``dict`` = map, ``list`` = list, ``None`` =
  void, ``uuid.UUID`` = uuid, ``decimal.Decimal`` = dec64); the others are thin subclasses
  (``UInt8(5)`` is an ``int``, ``Str8("x")`` a ``str``, ``Datetime`` an ``int`` of seconds, ``Bin``
  the fixed-width binaries by their length). A type code we do not know is kept as ``Unknown``
  (its width follows from the code's range, P010 §5.2) and written back as it came. Encoding a
  plain ``int`` picks int64 (uint64 above its range); a ``str`` longer than str16 allows is
  written as vbin32 (its octets).

Structs are read and written from the generated tables (``warren/spec/amqp0_10.py``): packing
flags (``PACK`` octets, little-endian: octet n holds fields 8n..8n+7, least significant bit
first), then the present fields; a ``bit`` field is its flag; ``SIZE`` is the width of a leading
byte count; a coded struct has its class and struct code after the count.

Every decoder checks every read against the end of its container, nests maps/lists/arrays at
most ``MAX_DEPTH`` deep, and raises only ``DecodeError``.
"""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid

from warren.codec.amqp0_10.errors import DecodeError, EncodeError
from warren.codec.amqp0_10.sets import ByteRanges, SequenceSet
from warren.spec import amqp0_10 as spec
from warren.spec.base010 import Struct

__all__ = [
    "MAX_DEPTH", "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "UInt64", "Float32", "Char", "CharUtf32",
    "Datetime", "Bin", "Dec32", "Str8", "Str8Latin", "Str8Utf16", "Str16Latin", "Str16Utf16", "Vbin8", "Vbin16",
    "BIT", "Bit", "Array", "Unknown", "UnknownStruct", "encode_typed", "decode_typed", "encode_map", "decode_map",
    "encode_value", "decode_value", "encode_fields", "decode_fields", "encode_struct", "decode_struct",
    "encode_struct32", "decode_struct32", "encode_control", "decode_control", "encode_command",
    "decode_command", "encode_header", "decode_header", "UnknownOp",
]

MAX_DEPTH = 100  # maps, lists and arrays nested deeper are refused (as 0-9-1 field tables)


# --- typed values -------------------------------------------------------------------------------

class Int8(int):
    __slots__ = ()


class UInt8(int):
    __slots__ = ()


class Int16(int):
    __slots__ = ()


class UInt16(int):
    __slots__ = ()


class Int32(int):
    __slots__ = ()


class UInt32(int):
    __slots__ = ()


class UInt64(int):
    __slots__ = ()


class Datetime(int):
    """Seconds since the epoch (``datetime``, 64-bit POSIX time_t)."""

    __slots__ = ()


class Float32(float):
    __slots__ = ()


class Char(str):
    """One iso-8859-15 character."""

    __slots__ = ()


class CharUtf32(str):
    __slots__ = ()


class Bin(bytes):
    """A fixed-width binary (bin8 ... bin1024, bin40, bin72): its length says which."""

    __slots__ = ()


class Dec32(decimal.Decimal):
    __slots__ = ()


class Str8(str):
    __slots__ = ()


class Str8Latin(str):
    __slots__ = ()


class Str8Utf16(str):
    __slots__ = ()


class Str16Latin(str):
    __slots__ = ()


class Str16Utf16(str):
    __slots__ = ()


class Vbin8(bytes):
    __slots__ = ()


class Vbin16(bytes):
    __slots__ = ()


class Bit:
    """The ``bit`` type as a typed value (zero octets: present means set)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "BIT"


BIT = Bit()


class Array(list):
    """An ``array``: values of one type (``type``, a type name of the spec)."""

    __slots__ = ("type",)

    def __init__(self, items=(), type: str = "str16") -> None:  # noqa: A002 - the spec's word
        super().__init__(items)
        self.type = type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Array) and self.type == other.type and list.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Array({list.__repr__(self)}, type={self.type!r})"


class Unknown:
    """A typed value of a type code we do not know: kept as its octets (size prefix included)."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, bytes(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown) and (self.code, self.data) == (other.code, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Unknown(0x{self.code:02x}, {self.data!r})"


class UnknownStruct:
    """A coded struct whose code we do not know: its class and struct code and the octets after them."""

    __slots__ = ("index", "data")

    def __init__(self, index: int, data: bytes) -> None:
        self.index, self.data = index, bytes(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownStruct) and (self.index, self.data) == (other.index, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UnknownStruct(0x{self.index:04x}, {self.data!r})"


class UnknownOp(DecodeError):
    """A control or command code that is not in the spec (answered not-implemented)."""

    def __init__(self, text: str, class_code: int, code: int) -> None:
        super().__init__(text)
        self.class_code, self.code = class_code, code


# --- primitive codecs: name -> (decode(buf, off, end, depth) -> (value, off), encode(value) -> bytes) ---

_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_u64 = struct.Struct(">Q")
_dec32 = struct.Struct(">Bi")
_dec64 = struct.Struct(">Bq")
_PREFIX = {1: _u8, 2: _u16, 4: _u32}


def _past(what: str) -> DecodeError:
    return DecodeError(f"{what} runs past the end of its container")


def _fixed_struct(fmt: str, what: str):
    st = struct.Struct(fmt)
    size = st.size

    def decode(buf, off, end, depth):
        if off + size > end:
            raise _past(what)
        return st.unpack_from(buf, off)[0], off + size

    def encode(v):
        try:
            return st.pack(v)
        except (struct.error, TypeError) as e:
            raise EncodeError(f"cannot encode {v!r} as {what}: {e}") from None

    return decode, encode


def _fixed_bytes(size: int, what: str):
    def decode(buf, off, end, depth):
        if off + size > end:
            raise _past(what)
        return bytes(buf[off:off + size]), off + size

    def encode(v):
        if len(v) != size:
            raise EncodeError(f"{what} takes {size} octets, not {len(v)}")
        return bytes(v)

    return decode, encode


def _boolean():
    def decode(buf, off, end, depth):
        if off + 1 > end:
            raise _past("boolean")
        return buf[off] != 0, off + 1

    return decode, lambda v: b"\x01" if v else b"\x00"


def _char(width: int, codec: str, what: str):
    def decode(buf, off, end, depth):
        if off + width > end:
            raise _past(what)
        try:
            return str(buf[off:off + width], codec), off + width
        except (UnicodeDecodeError, ValueError) as e:
            raise DecodeError(f"{what}: {e}") from None

    def encode(v):
        try:
            b = v.encode(codec)
        except (UnicodeEncodeError, AttributeError) as e:
            raise EncodeError(f"{what}: {e}") from None
        if len(b) != width:
            raise EncodeError(f"{what} is one character")
        return b

    return decode, encode


def _decimal(st: struct.Struct, what: str):
    def decode(buf, off, end, depth):
        if off + st.size > end:
            raise _past(what)
        exponent, mantissa = st.unpack_from(buf, off)
        return decimal.Decimal(mantissa).scaleb(-exponent), off + st.size

    def encode(v):
        sign, digits, exponent = v.as_tuple()
        if not isinstance(exponent, int):
            raise EncodeError(f"cannot encode {v} as {what}")
        mantissa = int("".join(map(str, digits)) or "0")
        if exponent > 0:
            mantissa *= 10 ** exponent
            exponent = 0
        try:
            return st.pack(-exponent, -mantissa if sign else mantissa)
        except struct.error:
            raise EncodeError(f"{v} is out of range for {what}") from None

    return decode, encode


def _variable(width: int, codec: str | None, what: str):
    prefix = _PREFIX[width]
    limit = (1 << (8 * width)) - 1

    def decode(buf, off, end, depth):
        if off + width > end:
            raise _past(what)
        n = prefix.unpack_from(buf, off)[0]
        off += width
        stop = off + n
        if stop > end:
            raise _past(what)
        if codec is None:
            return bytes(buf[off:stop]), stop
        try:
            return str(buf[off:stop], codec, "surrogateescape" if codec == "utf-8" else "strict"), stop
        except (UnicodeDecodeError, ValueError) as e:
            raise DecodeError(f"{what}: {e}") from None

    def encode(v):
        if codec is None:
            b = bytes(v)
        else:
            try:
                b = v.encode(codec, "surrogateescape" if codec == "utf-8" else "strict")
            except (UnicodeEncodeError, AttributeError) as e:
                raise EncodeError(f"{what}: {e}") from None
        if len(b) > limit:
            raise EncodeError(f"{what} holds at most {limit} octets, not {len(b)}")
        return prefix.pack(len(b)) + b

    return decode, encode


def _uuid():
    def decode(buf, off, end, depth):
        if off + 16 > end:
            raise _past("uuid")
        return uuid.UUID(bytes=bytes(buf[off:off + 16])), off + 16

    def encode(v):
        if isinstance(v, uuid.UUID):
            return v.bytes
        if isinstance(v, (bytes, bytearray)) and len(v) == 16:
            return bytes(v)
        raise EncodeError(f"cannot encode {v!r} as uuid")

    return decode, encode


def _void():
    return (lambda buf, off, end, depth: (None, off)), (lambda v: b"")


def _bit():
    return (lambda buf, off, end, depth: (BIT, off)), (lambda v: b"")


def _ranges(cls, item: struct.Struct, what: str):
    pair = item.size * 2

    def decode(buf, off, end, depth):
        if off + 2 > end:
            raise _past(what)
        n = _u16.unpack_from(buf, off)[0]
        off += 2
        stop = off + n
        if stop > end:
            raise _past(what)
        if n % pair:
            raise DecodeError(f"{what} of {n} octets is not a whole number of ranges")
        values = [item.unpack_from(buf, p)[0] for p in range(off, stop, item.size)]
        return cls(zip(values[0::2], values[1::2])), stop

    def encode(v):
        if not isinstance(v, cls):
            v = cls(v)
        parts = []
        try:
            for lo, hi in v.ranges:
                parts.append(item.pack(lo) + item.pack(hi))
        except struct.error as e:
            raise EncodeError(f"{what}: {e}") from None
        body = b"".join(parts)
        if len(body) > 0xFFFF:
            raise EncodeError(f"{what} of {len(body)} octets is too long")
        return _u16.pack(len(body)) + body

    return decode, encode


def _container(buf, off, end, what):
    """(start of the content, end of the content) of a container with a uint32 size."""
    if off + 4 > end:
        raise _past(what)
    stop = off + 4 + _u32.unpack_from(buf, off)[0]
    if stop > end:
        raise _past(what)
    return off + 4, stop


def decode_map(buf, off: int, end: int | None = None, depth: int = 0):
    """A ``map`` (uint32 size, uint32 count, entries: str8 key, type code, value) -> dict."""
    if end is None:
        end = len(buf)
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps, lists and arrays nested more than {MAX_DEPTH} deep")
    p, stop = _container(buf, off, end, "map")
    if p + 4 > stop:
        raise _past("map count")
    count = _u32.unpack_from(buf, p)[0]
    p += 4
    result: dict = {}
    for _ in range(count):
        if p >= stop:
            raise DecodeError("map holds fewer entries than its count")
        key_end = p + 1 + buf[p]
        if key_end >= stop:
            raise _past("map key")
        key = str(buf[p + 1:key_end], "utf-8", "surrogateescape")
        value, p = decode_typed(buf, key_end, stop, depth + 1)
        result.setdefault(key, value)  # the first of duplicate keys wins, as in 0-9-1 tables
    if p != stop:
        raise DecodeError("map holds more octets than its entries")
    return result, stop


def encode_map(value) -> bytes:
    if not value:
        return b"\x00\x00\x00\x04\x00\x00\x00\x00"
    parts = []
    for key, v in value.items():
        k = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
        if len(k) > 255:
            raise EncodeError(f"map key of {len(k)} octets (at most 255)")
        parts.append(_u8.pack(len(k)) + k)
        parts.append(encode_typed(v))
    body = b"".join(parts)
    return _u32.pack(len(body) + 4) + _u32.pack(len(value)) + body


def _decode_list(buf, off, end, depth):
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps, lists and arrays nested more than {MAX_DEPTH} deep")
    p, stop = _container(buf, off, end, "list")
    if p + 4 > stop:
        raise _past("list count")
    count = _u32.unpack_from(buf, p)[0]
    p += 4
    items = []
    for _ in range(count):
        if p >= stop:
            raise DecodeError("list holds fewer items than its count")
        value, p = decode_typed(buf, p, stop, depth + 1)
        items.append(value)
    if p != stop:
        raise DecodeError("list holds more octets than its items")
    return items, stop


def _encode_list(value) -> bytes:
    body = b"".join(encode_typed(v) for v in value)
    return _u32.pack(len(body) + 4) + _u32.pack(len(value)) + body


_ZERO_WIDTH_ARRAY_MAX = 65536  # an array of voids/bits has no octets per item: bound its count


def _decode_array(buf, off, end, depth):
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps, lists and arrays nested more than {MAX_DEPTH} deep")
    p, stop = _container(buf, off, end, "array")
    if p + 5 > stop:
        raise _past("array header")
    code = buf[p]
    count = _u32.unpack_from(buf, p + 1)[0]
    p += 5
    name = _CODE_NAMES.get(code)
    if name is None:
        decode = _unknown_decoder(code)
        wrap = None
    else:
        decode, _, wrap = _TYPED[name]
    if count > stop - p and (count > _ZERO_WIDTH_ARRAY_MAX or _width_of_code(code) != 0):
        raise DecodeError(f"array count {count} is more than its {stop - p} octets can hold")
    items = []
    for _ in range(count):
        value, p = decode(buf, p, stop, depth + 1)
        items.append(wrap(value) if wrap is not None else value)
    if p != stop:
        raise DecodeError("array holds more octets than its items")
    return Array(items, name or f"0x{code:02x}"), stop


def _array_type(value) -> str:
    if isinstance(value, Array):
        return value.type
    if not value:
        return "str16"
    return _type_of(value[0])


def _encode_array(value) -> bytes:
    name = _array_type(value)
    if name.startswith("0x"):  # an array of a type code we did not know, written back as it came
        code = int(name, 16)
        body = b"".join(v.data for v in value)
    else:
        code = spec.TYPES[name][0]
        if code is None:
            raise EncodeError(f"{name} has no type code and cannot be an array's type")
        encode = _TYPED[name][1]
        body = b"".join(encode(v) for v in value)
    return _u32.pack(len(body) + 5) + _u8.pack(code) + _u32.pack(len(value)) + body


def decode_struct32(buf, off: int, end: int | None = None, depth: int = 0):
    """A ``struct32``: uint32 size, class code, struct code, packing flags and fields."""
    if end is None:
        end = len(buf)
    p, stop = _container(buf, off, end, "struct32")
    if p + 2 > stop:
        raise _past("struct32 code")
    index = buf[p] << 8 | buf[p + 1]
    cls = spec.STRUCTS.get(index)
    if cls is None:
        return UnknownStruct(index, buf[p + 2:stop]), stop
    obj, _ = decode_fields(cls, buf, p + 2, stop, depth, sized=True)
    return obj, stop


def encode_struct32(obj) -> bytes:
    if isinstance(obj, UnknownStruct):
        body = _u16.pack(obj.index) + obj.data
    else:
        if obj.INDEX is None:
            raise EncodeError(f"{obj.NAME} is not a coded struct and cannot be a struct32")
        body = _u16.pack(obj.INDEX) + encode_fields(obj)
    return _u32.pack(len(body)) + body


_TYPE_FACTORIES = {
    "int8": lambda: _fixed_struct(">b", "int8"), "uint8": lambda: _fixed_struct(">B", "uint8"),
    "int16": lambda: _fixed_struct(">h", "int16"), "uint16": lambda: _fixed_struct(">H", "uint16"),
    "int32": lambda: _fixed_struct(">i", "int32"), "uint32": lambda: _fixed_struct(">I", "uint32"),
    "int64": lambda: _fixed_struct(">q", "int64"), "uint64": lambda: _fixed_struct(">Q", "uint64"),
    "sequence-no": lambda: _fixed_struct(">I", "sequence-no"), "datetime": lambda: _fixed_struct(">Q", "datetime"),
    "float": lambda: _fixed_struct(">f", "float"), "double": lambda: _fixed_struct(">d", "double"),
    "boolean": _boolean, "char": lambda: _char(1, "iso8859_15", "char"),
    "char-utf32": lambda: _char(4, "utf-32-be", "char-utf32"),
    "dec32": lambda: _decimal(_dec32, "dec32"), "dec64": lambda: _decimal(_dec64, "dec64"),
    "uuid": _uuid, "void": _void, "bit": _bit,
    "vbin8": lambda: _variable(1, None, "vbin8"), "vbin16": lambda: _variable(2, None, "vbin16"),
    "vbin32": lambda: _variable(4, None, "vbin32"),
    "str8": lambda: _variable(1, "utf-8", "str8"), "str16": lambda: _variable(2, "utf-8", "str16"),
    "str8-latin": lambda: _variable(1, "iso8859_15", "str8-latin"),
    "str16-latin": lambda: _variable(2, "iso8859_15", "str16-latin"),
    "str8-utf16": lambda: _variable(1, "utf-16-be", "str8-utf16"),
    "str16-utf16": lambda: _variable(2, "utf-16-be", "str16-utf16"),
    "sequence-set": lambda: _ranges(SequenceSet, _u32, "sequence-set"),
    "byte-ranges": lambda: _ranges(ByteRanges, _u64, "byte-ranges"),
    "map": lambda: (decode_map, encode_map), "list": lambda: (_decode_list, _encode_list),
    "array": lambda: (_decode_array, _encode_array), "struct32": lambda: (decode_struct32, encode_struct32),
}

# the class a typed value of each type decodes to (None: the decoder's own value is right)
_WRAP = {
    "int8": Int8, "uint8": UInt8, "int16": Int16, "uint16": UInt16, "int32": Int32, "uint32": UInt32,
    "uint64": UInt64, "datetime": Datetime, "float": Float32, "char": Char, "char-utf32": CharUtf32,
    "dec32": Dec32, "str8": Str8, "str8-latin": Str8Latin, "str8-utf16": Str8Utf16, "str16-latin": Str16Latin,
    "str16-utf16": Str16Utf16, "vbin8": Vbin8, "vbin16": Vbin16,
}

# name -> (decode, encode, wrap) for every type of the spec
_TYPED: dict = {}
for _name, (_code, _fixed, _var) in spec.TYPES.items():
    if _name in _TYPE_FACTORIES:
        _dec, _enc = _TYPE_FACTORIES[_name]()
    elif _name.startswith("bin") and _fixed:
        _dec, _enc = _fixed_bytes(_fixed, _name)
        _WRAP[_name] = Bin
    else:  # pragma: no cover - a type the spec added that this module does not know
        raise ImportError(f"no codec for the 0-10 type {_name}")
    _TYPED[_name] = (_dec, _enc, _WRAP.get(_name))

_CODE_NAMES = {code: name for name, (code, _, _) in spec.TYPES.items() if code is not None}
_BIN_BY_WIDTH = {fixed: name for name, (code, fixed, _) in spec.TYPES.items() if name.startswith("bin") and code is not None}
# the type a value of each class is written as
_CLASS_TYPES = {
    Int8: "int8", UInt8: "uint8", Int16: "int16", UInt16: "uint16", Int32: "int32", UInt32: "uint32",
    UInt64: "uint64", Datetime: "datetime", Float32: "float", Char: "char", CharUtf32: "char-utf32", Dec32: "dec32",
    Str8: "str8", Str8Latin: "str8-latin", Str8Utf16: "str8-utf16", Str16Latin: "str16-latin",
    Str16Utf16: "str16-utf16", Vbin8: "vbin8", Vbin16: "vbin16", Bit: "bit",
    bool: "boolean", float: "double", str: "str16", bytes: "vbin32", bytearray: "vbin32", memoryview: "vbin32",
    dict: "map", list: "list", tuple: "list", Array: "array", uuid.UUID: "uuid", decimal.Decimal: "dec64",
    type(None): "void", SequenceSet: "sequence-set", ByteRanges: "byte-ranges",
}
_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


def _width_of_code(code: int) -> int | None:
    """Octets of a value of type ``code`` from its range (P010 §5.2): a fixed width, or -1, -2,
    -4 for a 1/2/4-octet size prefix; None for a range the spec does not define."""
    hi = code >> 4
    if hi <= 7:
        return 1 << hi
    return {8: -1, 9: -2, 0xA: -4, 0xC: 5, 0xD: 9, 0xF: 0}.get(hi)


def _unknown_decoder(code: int):
    width = _width_of_code(code)
    if width is None:
        def undefined(buf, off, end, depth):
            raise DecodeError(f"type code 0x{code:02x} is in no range the spec defines")
        return undefined

    def decode(buf, off, end, depth):
        if width >= 0:
            stop = off + width
        else:
            n = -width
            if off + n > end:
                raise _past(f"type 0x{code:02x}")
            stop = off + n + _PREFIX[n].unpack_from(buf, off)[0]
        if stop > end:
            raise _past(f"type 0x{code:02x}")
        return Unknown(code, buf[off:stop]), stop

    return decode


def _type_of(v) -> str:
    name = _CLASS_TYPES.get(type(v))
    if name is not None:
        if name == "str16" and len(v) > 16383 and len(v.encode("utf-8", "surrogateescape")) > 0xFFFF:
            return "vbin32"  # too long for str16: its octets
        return name
    if type(v) is Bin:
        name = _BIN_BY_WIDTH.get(len(v))
        if name is None:
            raise EncodeError(f"no fixed-width binary type of {len(v)} octets")
        return name
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        if _I64_MIN <= v <= _I64_MAX:
            return "int64"
        if 0 <= v <= _U64_MAX:
            return "uint64"
        raise EncodeError(f"integer {v} does not fit in 64 bits")
    if isinstance(v, Struct):
        return "struct32"
    if isinstance(v, datetime.datetime):
        return "datetime"
    for cls, name in _CLASS_TYPES.items():  # subclasses of the plain classes
        if isinstance(v, cls):
            return name
    raise EncodeError(f"cannot write a {type(v).__name__} as a 0-10 typed value")


def encode_typed(v) -> bytes:
    """A typed value: type code, then the value (see module docstring for the type chosen)."""
    if isinstance(v, Unknown):
        return _u8.pack(v.code) + v.data
    if isinstance(v, UnknownStruct):
        return b"\xab" + encode_struct32(v)
    name = _type_of(v)
    if name == "datetime" and isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        v = int(v.timestamp())
    elif name == "vbin32" and isinstance(v, str):
        v = v.encode("utf-8", "surrogateescape")
    return _u8.pack(spec.TYPES[name][0]) + _TYPED[name][1](v)


def decode_typed(buf, off: int, end: int | None = None, depth: int = 0):
    """A type code and its value -> (value, offset after it)."""
    if end is None:
        end = len(buf)
    if off >= end:
        raise _past("type code")
    code = buf[off]
    name = _CODE_NAMES.get(code)
    if name is None:
        return _unknown_decoder(code)(buf, off + 1, end, depth)
    decode, _, wrap = _TYPED[name]
    value, off = decode(buf, off + 1, end, depth)
    return (wrap(value) if wrap is not None else value), off


def encode_value(type_name: str, v) -> bytes:
    """A value of a type the spec names (no type code)."""
    return _TYPED[type_name][1](v)


def decode_value(type_name: str, buf, off: int, end: int | None = None):
    """A value of a type the spec names (no type code), as a plain Python value."""
    return _TYPED[type_name][0](buf, off, len(buf) if end is None else end, 0)


# --- structs, controls, commands ------------------------------------------------------------

_PLANS: dict = {}


def _plan(cls) -> tuple:
    """(attribute, decode, encode) per field of a struct/control/command; decode None = a bit."""
    plan = _PLANS.get(cls)
    if plan is None:
        entries = []
        for name, typ, _ in cls.FIELDS:
            if typ == "bit":
                entries.append((name, None, None))
            elif typ in _TYPED:
                entries.append((name, _TYPED[typ][0], _TYPED[typ][1]))
            else:
                sub = spec.BY_NAME[typ]
                entries.append((name, _struct_decoder(sub), encode_struct))
        plan = _PLANS[cls] = tuple(entries)
    return plan


def _struct_decoder(cls):
    def decode(buf, off, end, depth):
        return decode_struct(cls, buf, off, end, depth)
    return decode


def encode_fields(obj) -> bytes:
    """Packing flags and the present fields of a struct, control or command."""
    cls = type(obj)
    encoder = _ENCODERS.get(cls)
    if encoder is None:
        encoder = _ENCODERS[cls] = _compile_encoder(cls)
    return encoder(obj)


_ENCODERS: dict = {}


def _compile_encoder(cls):
    """``encode_fields`` for one class as straight-line code (see ``_compile_decoder``)."""
    plan = _plan(cls)
    pack = cls.PACK
    env = {"EncodeError": EncodeError}
    lines = ["def encode(o):", "    flags = 0", "    parts = [b'']"]
    for i, (name, _, encode) in enumerate(plan):
        lines.append(f"    v = o.{name}")
        if encode is None:
            lines += ["    if v:", f"        flags |= {1 << i}"]
            continue
        env[f"e{i}"] = encode
        lines += ["    if v is not None:", f"        flags |= {1 << i}", f"        parts.append(e{i}(v))"]
    if pack:
        lines.append(f"    parts[0] = flags.to_bytes({pack}, 'little')")
    else:
        lines += [f"    if flags != {(1 << len(plan)) - 1}:",
                  f"        raise EncodeError({cls.NAME + ' has no packing flags: every field must be set'!r})"]
    lines.append("    return b''.join(parts)")
    exec(compile("\n".join(lines), f"<0-10 encoder of {cls.NAME}>", "exec"), env)  # noqa: S102 - our own text
    return env["encode"]


def decode_fields(cls, buf, off: int, end: int, depth: int = 0, sized: bool = False):
    """(object, offset after its fields). ``sized``: inside a struct's own byte count, where
    octets and flags past the fields we know are a later version's and are skipped."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = _compile_decoder(cls)
    return decoder(buf, off, end, depth, sized)


_DECODERS: dict = {}


def _compile_decoder(cls):
    """A decoder of ``cls``'s fields as straight-line code (made once per class, from its
    FIELDS): the same work as a loop over the fields, without the loop's per-field overhead
    (a transfer's header holds two structs of up to 12 fields)."""
    plan = _plan(cls)
    pack = cls.PACK
    env = {"_past": _past, "DecodeError": DecodeError, "cls": cls, "new": cls.__new__}
    lines = ["def decode(buf, off, end, depth, sized):"]
    if pack:
        lines += [
            f"    if off + {pack} > end:",
            f"        raise _past({cls.NAME + ' packing flags'!r})",
            f"    flags = int.from_bytes(buf[off:off + {pack}], 'little')",
            f"    off += {pack}",
            f"    if flags >> {len(plan)} and not sized:",
            f"        raise DecodeError({cls.NAME + ': packing flag set for a field it does not have'!r})",
        ]
    lines.append("    o = new(cls)")
    for i, (name, decode, _) in enumerate(plan):
        if decode is None:
            lines.append(f"    o.{name} = {'True' if not pack else f'bool(flags & {1 << i})'}")
            continue
        env[f"d{i}"] = decode
        if not pack:
            lines.append(f"    o.{name}, off = d{i}(buf, off, end, depth)")
            continue
        lines += [f"    if flags & {1 << i}:",
                  f"        o.{name}, off = d{i}(buf, off, end, depth)",
                  "    else:",
                  f"        o.{name} = None"]
    lines.append("    return o, off")
    exec(compile("\n".join(lines), f"<0-10 decoder of {cls.NAME}>", "exec"), env)  # noqa: S102 - our own text
    return env["decode"]


def encode_struct(obj) -> bytes:
    """A struct with its size prefix (``SIZE`` octets) and its code when it has one."""
    cls = type(obj)
    body = encode_fields(obj)
    if cls.INDEX is not None:
        body = _u16.pack(cls.INDEX) + body
    if not cls.SIZE:
        return body
    if len(body) >= 1 << (8 * cls.SIZE):
        raise EncodeError(f"{cls.NAME} of {len(body)} octets does not fit its {cls.SIZE}-octet size")
    return _PREFIX[cls.SIZE].pack(len(body)) + body


def decode_struct(cls, buf, off: int, end: int, depth: int = 0):
    if not cls.SIZE:
        return decode_fields(cls, buf, off, end, depth)
    width = cls.SIZE
    if off + width > end:
        raise _past(f"{cls.NAME} size")
    stop = off + width + _PREFIX[width].unpack_from(buf, off)[0]
    if stop > end:
        raise _past(cls.NAME)
    off += width
    if cls.INDEX is not None:
        if off + 2 > stop:
            raise _past(f"{cls.NAME} code")
        index = buf[off] << 8 | buf[off + 1]
        if index != cls.INDEX:
            raise DecodeError(f"{cls.NAME} expected (0x{cls.INDEX:04x}), struct code 0x{index:04x} found")
        off += 2
    obj, after = decode_fields(cls, buf, off, stop, depth, sized=True)
    return obj, stop


def encode_control(ctl) -> bytes:
    """A control segment: class code, control code, packing flags, fields."""
    return _u16.pack(ctl.INDEX) + encode_fields(ctl)


def decode_control(buf, off: int = 0, end: int | None = None):
    if end is None:
        end = len(buf)
    if off + 2 > end:
        raise _past("control code")
    cls = spec.CONTROLS.get(buf[off] << 8 | buf[off + 1])
    if cls is None:
        raise UnknownOp(f"unknown control 0x{buf[off]:02x}:0x{buf[off + 1]:02x}", buf[off], buf[off + 1])
    obj, after = decode_fields(cls, buf, off + 2, end)
    if after != end:
        raise DecodeError(f"{cls.NAME}: {end - after} octets after its fields")
    return obj


_SYNC = b"\x01\x01"
_NO_SYNC = b"\x01\x00"


def encode_command(cmd, sync: bool = False) -> bytes:
    """A command segment: class code, command code, ``session.header`` (sync flag), packing
    flags, fields."""
    return b"".join((_u16.pack(cmd.INDEX), _SYNC if sync else _NO_SYNC, encode_fields(cmd)))


def decode_command(buf, off: int = 0, end: int | None = None):
    """(command, sync) from a command segment."""
    if end is None:
        end = len(buf)
    if off + 3 > end:
        raise _past("command code and session header")
    class_code, code = buf[off], buf[off + 1]
    header_end = off + 3 + buf[off + 2]
    if header_end > end:
        raise _past("session header")
    sync = header_end > off + 3 and bool(buf[off + 3] & 1)
    cls = spec.COMMANDS.get(class_code << 8 | code)
    if cls is None:
        raise UnknownOp(f"unknown command 0x{class_code:02x}:0x{code:02x}", class_code, code)
    obj, after = decode_fields(cls, buf, header_end, end)
    if after != end:
        raise DecodeError(f"{cls.NAME}: {end - after} octets after its fields")
    return obj, sync


def encode_header(structs) -> bytes:
    """A header segment: coded structs (size 4), in any order."""
    return b"".join(encode_struct(s) if not isinstance(s, UnknownStruct) else encode_struct32(s) for s in structs)


def decode_header(buf, off: int = 0, end: int | None = None) -> list:
    """The structs of a header segment (an unknown code is kept as ``UnknownStruct``)."""
    if end is None:
        end = len(buf)
    out = []
    while off < end:
        value, off = decode_struct32(buf, off, end)
        out.append(value)
    return out
