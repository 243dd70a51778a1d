"""AMQP dialects: what differs between 0-8, 0-9, 0-9-1 and Qpid's variants, as data.

The broker works on AMQP 0-9-1 method objects only (``warren.spec.amqp0_9_1``). A ``Dialect``
translates at the edge: every method that arrives in another version is decoded straight into
its 0-9-1 equivalent, and every 0-9-1 method the broker sends is encoded in the version's form.
Methods are matched by NAME (``connection.close`` is 10.60 in 0-8, 10.50 later; INVENTORY.md
§9.1), fields by name (a field missing on one side gets the default of the other; 0-9's
``basic.consume.filter`` is 0-9-1's ``arguments``).

Cost: where a version's method has the same ids and the same wire types as the 0-9-1 one (most
of them, ``basic.publish`` and ``basic.deliver`` included), the decoder *is* the 0-9-1 class and
the encoder is the 0-9-1 ``encode``: nothing is translated. The 0-9-1 dialect is the identity.

The dialects (INVENTORY.md §2, §9; which client tested each: docs/versions.md):

``0-9-1``      headers ``AMQP 0 0 9 1``; the identity.
``0-8``        ``AMQP 1 1 8 0`` and the 0-8 PDF's misprint ``AMQP 1 1 9 1``: the standard 0-8 XML,
               plus what RabbitMQ's 0-8 adds (``queue.unbind`` 50.50, sync ``basic.recover``
               60.110 / ``recover-ok`` 60.111), plus Qpid's ``exchange.bound`` (answered natively)
               and Qpid's trailing ``arguments`` table on ``basic.consume`` (read when present).
               ``basic.recover`` 60.100 is asynchronous. Server capabilities are empty (RabbitMQ).
``0-8-qpid``   the same connection after start-ok, when the client says it is Qpid (a
               ``qpid.*`` client property or "qpid" in ``product``): ``basic.recover`` 60.100 is
               synchronous and answered with Qpid's ``basic.recover-ok`` 60.101 (§7.1.1).
``0-9``        ``AMQP 1 1 0 9``: the 0-9 XML, Qpid's 0-9 additions (``basic.recover-sync``
               60.102 answered with 60.101; ``exchange.bound`` answered natively) and, as RabbitMQ serves
               0-9 with the 0-9-1 method set, the 0-9-1 methods whose ids 0-9 leaves free
               (confirms, ``exchange.bind``, ``basic.nack``, ``basic.recover`` 60.110, ...).
``0-91-qpid``  ``AMQP 1 1 0 91``: Qpid's "0-91" XML (recover 100 async, recover-sync 110/111,
               ``exchange.bound`` answered natively), plus the free 0-9-1 methods as for 0-9.

Methods of a version that have no 0-9-1 equivalent (0-9 ``message``, ``file``, ``stream``,
``tunnel``, ``dtx``, 0-8 ``test``, ``channel.alert``, 0-9 ``channel.resume/ping/pong/ok``)
are refused on arrival with 540 NOT_IMPLEMENTED naming the method; ``NATIVE_METHODS``
(Qpid's ``exchange.bound``) reach the broker in their own form instead.
A 0-9-1 method the broker sends that has no form in the version is dropped (none of them is
reachable: the broker sends them only in answer to methods that version cannot send).

Other per-version rules the connection applies (``warren.protocol.amqp0_9_1.connection``):
tune negotiation (0-8/0-9: a client frame-max of 0 or above ours is capped, not refused;
channel-max counts open channels, as 0-9-1 does after RabbitMQ), 505 UNEXPECTED_FRAME (absent
before 0-9-1) sent as 503 COMMAND_INVALID, and 0-8/0-9's out-of-band and trace frame types (4-7)
refused with 540.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import importlib

from warren.spec.fields import decode_shortstr, decode_table, decode_value
from warren.errors import NotImplemented_
from warren.spec import amqp0_9_1 as v091

__all__ = ["Dialect", "get_dialect", "DIALECTS", "DIALECT_0_9_1"]

_V091_BY_NAME = {cls.NAME: cls for cls in v091.METHODS.values()}
# fields renamed between versions with the same wire type (0-9 basic.consume.filter, §9.2),
# used in both directions
_FIELD_RENAMES = {"filter": "arguments", "arguments": "filter"}
# Python types of the field-table values 0-8 has: S, I, D, T, F (INVENTORY.md §5.2)
_TABLE_TYPES_0_8 = (str, int, decimal.Decimal, datetime.datetime, dict)


def _wire(cls) -> tuple:
    return tuple(t for _, t in cls.FIELDS)


def _converter(src, dst):
    """A function turning an instance of method class ``src`` into one of ``dst`` (by field name)."""
    dst_names = {n for n, _ in dst.FIELDS}
    pairs = []
    for name, _ in src.FIELDS:
        target = name if name in dst_names else _FIELD_RENAMES.get(name)
        if target in dst_names:
            pairs.append((target, name))

    def convert(m):
        out = dst()
        for target, name in pairs:
            setattr(out, target, getattr(m, name))
        return out

    return convert


class _Translated:
    """Decoder for a version's method whose 0-9-1 twin differs in ids or fields: decode, convert."""

    __slots__ = ("NAME", "CLASS_ID", "METHOD_ID", "INDEX", "SOURCE", "TARGET", "_decode", "_convert")

    def __init__(self, src, dst) -> None:
        self.NAME, self.CLASS_ID, self.METHOD_ID, self.INDEX = src.NAME, src.CLASS_ID, src.METHOD_ID, src.INDEX
        self.SOURCE, self.TARGET = src, dst
        self._decode = src.decode
        self._convert = _converter(src, dst)

    def decode(self, buf, off):
        m, off = self._decode(buf, off)
        return self._convert(m), off

    def __repr__(self) -> str:
        return f"<{self.NAME} {self.CLASS_ID}.{self.METHOD_ID} -> 0-9-1 {self.TARGET.NAME}>"


class _Refused:
    """Server-side decoder for a method with no 0-9-1 equivalent: 540 before decoding anything."""

    __slots__ = ("NAME", "CLASS_ID", "METHOD_ID", "INDEX", "SOURCE", "reason")

    def __init__(self, src, reason: str) -> None:
        self.NAME, self.CLASS_ID, self.METHOD_ID, self.INDEX = src.NAME, src.CLASS_ID, src.METHOD_ID, src.INDEX
        self.SOURCE = src
        self.reason = reason

    def decode(self, buf, off):
        raise NotImplemented_(f"{self.NAME} ({self.CLASS_ID}.{self.METHOD_ID}) is not implemented: {self.reason}",
                              self.CLASS_ID, self.METHOD_ID)


def _is_qpid(client_properties: dict) -> bool:
    product = client_properties.get("product")
    if isinstance(product, (str, bytes)) and "qpid" in str(product).lower():
        return True
    return any(isinstance(k, str) and k.startswith("qpid.") for k in client_properties)


def _plain_table_login(response: bytes) -> tuple[str, str] | None:
    """(LOGIN, PASSWORD) when a PLAIN response is 0-8's field table (with or without its length
    prefix, X08 connection.start-ok), None when it is anything else (SASL's NUL user NUL password)."""
    for with_length in (True, False):
        try:
            if with_length:
                fields, off = decode_table(response, 0)
            else:
                fields, off = {}, 0
                while off < len(response):
                    name, off = decode_shortstr(response, off)
                    fields[name], off = decode_value(response, off)
        except Exception:  # not a table: the SASL form
            continue
        login, password = fields.get("LOGIN"), fields.get("PASSWORD")
        if off == len(response) and isinstance(login, str) and isinstance(password, str):
            return login, password
    return None


def _table_0_8(table: dict) -> dict:
    """A table with only 0-8's value types (S, I, D, T, F): booleans become 0/1, the rest drops."""
    out = {}
    for k, v in table.items():
        if isinstance(v, bool):
            v = int(v)
        elif isinstance(v, dict):
            v = _table_0_8(v)
        elif not isinstance(v, _TABLE_TYPES_0_8) or (isinstance(v, int) and not -2**31 <= v < 2**31):
            continue
        out[k] = v
    return out


class Dialect:
    """One AMQP version (or variant) as the server and the client mode speak it."""

    def __init__(self, key: str, title: str, headers: tuple[bytes, ...], start_version: tuple[int, int],
                 tables: tuple = (), extensions: bool = False, replies: dict | None = None,
                 tails: dict | None = None, capabilities: bool = True, strict_tune: bool = True,
                 reply_codes: dict | None = None, reserved_frame_types: tuple[int, ...] = (),
                 refine=None, identity: bool = False, plain_table: bool = False) -> None:
        self.key = key
        self.title = title
        self.headers = headers
        self.header = headers[0]  # what the client mode sends
        self.start_version = start_version  # version-major, version-minor of connection.start (§2)
        self.identity = identity
        self.capabilities = capabilities  # advertise the server capabilities (RabbitMQ: not to 0-8)
        self.strict_tune = strict_tune  # 0-9-1 (D89): refuse tune-ok values above ours; 0-8/0-9 cap them
        self.reply_codes = reply_codes or {}
        self.reserved_frame_types = reserved_frame_types
        self.plain_table = plain_table  # 0-8: a PLAIN response may be a LOGIN/PASSWORD table
        self._refine = refine
        self.modules = tuple(dict.fromkeys(m for m, _, _ in tables))
        self.spec = self.modules[0] if self.modules else v091
        self.decoders: dict[int, object] = {}  # wire index -> decoder giving a 0-9-1 (or native) method
        self.server_methods: dict[int, object] = {}  # the same, refusing methods without a 0-9-1 twin
        self.unsupported: dict[int, str] = {}  # wire index -> why it is refused
        self.encoders: dict[type, object] = {}  # class -> function(method) -> payload bytes
        self.tails: dict[int, object] = {}  # wire index -> decoder of a longer form (trailing fields)
        self.replies: dict[int, tuple] = {}  # request wire index -> (0-9-1 reply INDEX, reply encoder)
        self.wire_ids: dict[int, int] = {}  # 0-9-1 INDEX -> wire INDEX where they differ
        self._to_091: dict[type, object] = {}  # native class -> converter (translate_in)
        self._from_091: dict[type, tuple] = {}  # 0-9-1 class -> (native class, converter) (translate_out)
        if identity:
            self._build_identity()
        else:
            self._build(tables, extensions, replies or {}, tails or {})

    def __repr__(self) -> str:
        return f"<Dialect {self.key}>"

    # --- building ----------------------------------------------------------------------

    def _build_identity(self) -> None:
        self.decoders = dict(v091.METHODS)
        self.server_methods = v091.METHODS  # the very dict: the 0-9-1 hot path is unchanged
        for cls in v091.METHODS.values():
            self.encoders[cls] = cls.encode

    def _build(self, tables, extensions: bool, replies: dict, tails: dict) -> None:
        mapped: dict[str, list] = {}  # 0-9-1 name -> native classes mapped to it, in priority order
        for module, include, renames in tables:
            for cls in module.METHODS.values():
                if include is not None and cls.NAME not in include:
                    continue
                if cls.INDEX in self.decoders:
                    continue  # an earlier table has this id
                target = _V091_BY_NAME.get((renames or {}).get(cls.NAME, cls.NAME))
                self.encoders[cls] = cls.encode
                if target is None:
                    self.decoders[cls.INDEX] = cls
                    if cls.NAME not in NATIVE_METHODS:
                        self.unsupported[cls.INDEX] = _why(module, cls)
                    continue
                mapped.setdefault(target.NAME, []).append(cls)
                self._to_091[cls] = _converter(cls, target)
                if cls.INDEX == target.INDEX and _wire(cls) == _wire(target):
                    self.decoders[cls.INDEX] = target
                else:
                    self.decoders[cls.INDEX] = _Translated(cls, target)
        if extensions:
            for cls in v091.METHODS.values():
                if cls.INDEX not in self.decoders:
                    self.decoders[cls.INDEX] = cls
                    mapped.setdefault(cls.NAME, []).append(cls)
        for name, natives in mapped.items():
            target = _V091_BY_NAME[name]
            native = natives[0]
            if native is target or (native.INDEX == target.INDEX and _wire(native) == _wire(target)):
                self.encoders[target] = target.encode
            else:
                self.encoders[target] = _encoder(_converter(target, native))
            self._from_091[target] = (native, _converter(target, native) if native is not target else None)
            d = self.decoders.get(target.INDEX)
            if native.INDEX != target.INDEX and (d is None or _target_of(d) is not target):
                self.wire_ids[target.INDEX] = native.INDEX
        for index, reply_cls in replies.items():
            request = self.decoders[index]
            reply_target = _V091_BY_NAME[_reply_name(_target_of(request).NAME)]
            if reply_cls is reply_target:
                self.replies[index] = (reply_target.INDEX, reply_target.encode)
            else:
                self.replies[index] = (reply_target.INDEX, _encoder(_converter(reply_target, reply_cls)))
        for index, longer in tails.items():
            target = _target_of(self.decoders[index])
            self.encoders[longer] = longer.encode
            self._to_091[longer] = _converter(longer, target)
            self.tails[index] = target if _wire(longer) == _wire(target) else _Translated(longer, target)
        self.server_methods = {
            index: _Refused(d, self.unsupported[index]) if index in self.unsupported else d
            for index, d in self.decoders.items()
        }

    # --- per-connection choices --------------------------------------------------------

    def refine(self, client_properties: dict) -> "Dialect":
        """The dialect to use once start-ok told who the client is (0-8: Qpid or not)."""
        if self._refine is None:
            return self
        return self._refine(client_properties)

    def start_ok(self, method):
        """connection.start-ok as the broker expects it (0-8's table-form PLAIN made SASL's)."""
        if self.plain_table and method.mechanism == "PLAIN":
            login = _plain_table_login(method.response)
            if login is not None:
                method.response = b"\0" + login[0].encode() + b"\0" + login[1].encode()
        return method

    def server_properties(self, properties: dict) -> dict:
        """connection.start server-properties for this version (INVENTORY.md §10, §5.2)."""
        if self.capabilities:
            return properties
        props = dict(properties)
        if "capabilities" in props:
            props["capabilities"] = {}  # RabbitMQ: server_capabilities(0-8) = []
        return _table_0_8(props)

    def reply(self, reply_code: int, reply_text: str, class_id: int, method_id: int) -> tuple:
        """A close's reply code, text and method ids as this version names them."""
        code = self.reply_codes.get(reply_code)
        if code is not None:
            old, new = _CODE_NAMES[reply_code], _CODE_NAMES[code]
            if reply_text.startswith(old):
                reply_text = new + reply_text[len(old):]
            reply_code = code
        wire = self.wire_ids.get(class_id << 16 | method_id)
        if wire is not None:
            class_id, method_id = wire >> 16, wire & 0xFFFF
        return reply_code, reply_text, class_id, method_id

    # --- translation -------------------------------------------------------------------

    def translate_in(self, method):
        """A method of this version (a native object) as the 0-9-1 method, or None if it has none."""
        if self.identity or type(method) in _V091_CLASSES:
            return method
        convert = self._to_091.get(type(method))
        return None if convert is None else convert(method)

    def translate_out(self, method):
        """A 0-9-1 method as this version's native method object, or None if it has no form here."""
        if self.identity:
            return method
        entry = self._from_091.get(type(method))
        if entry is None:
            return None
        native, convert = entry
        return method if convert is None else convert(method)

    def encode(self, method) -> bytes | None:
        """Method payload (ids + arguments) in this version's form, or None when it has none.

        Takes a 0-9-1 method (translated) or a native method of this dialect's tables (as is).
        """
        enc = self.encoders.get(type(method))
        return None if enc is None else enc(method)

    def decoder(self, index: int):
        """The decoder for a received method id (client side: nothing is refused), or None."""
        return self.decoders.get(index)


_V091_CLASSES = frozenset(v091.METHODS.values())
# Methods with no 0-9-1 twin that the broker handles in their native form (Channel.HANDLERS):
# Qpid's binding query, answered with bound-ok from the request's own table.
NATIVE_METHODS = frozenset({"exchange.bound"})
EXCHANGE_BOUND = 40 << 16 | 22
_CODE_NAMES = {503: "COMMAND_INVALID", 505: "UNEXPECTED_FRAME"}


def _encoder(convert):
    def encode(m):
        return convert(m).encode()
    return encode


def _target_of(decoder):
    return decoder.TARGET if isinstance(decoder, _Translated) else decoder


def _reply_name(name: str) -> str:
    return name + "-ok"


def _why(module, cls) -> str:
    cname = cls.NAME.split(".")[0]
    version = {"amqp0_8": "AMQP 0-8", "amqp0_8_qpid": "Qpid's AMQP 0-8", "amqp0_9": "AMQP 0-9",
               "amqp0_9_qpid": "Qpid's AMQP 0-9", "amqp0_91_qpid": "Qpid's AMQP 0-91"}.get(
        module.__name__.rsplit(".", 1)[-1], module.__name__)
    if cname in ("file", "stream", "tunnel", "dtx", "test", "message"):
        return f"Warren does not implement the {version} {cname} class"
    return f"Warren does not implement this {version} method"


# --- the dialects ------------------------------------------------------------------------------

_H_0_8 = b"AMQP\x01\x01\x08\x00"
_H_0_8_PDF = b"AMQP\x01\x01\x09\x01"  # the 0-8 PDF's header; py-amqplib sends it (RabbitMQ: 0-8)
_H_0_9 = b"AMQP\x01\x01\x00\x09"
_H_0_9_1 = b"AMQP\x00\x00\x09\x01"
_H_0_91 = b"AMQP\x01\x01\x00\x5b"  # Qpid "0-91"

# what RabbitMQ's own 0-8 adds to the 0-8 XML (RJ08, INVENTORY.md §9.6), taken from 0-9-1
_RABBIT_0_8 = frozenset({"queue.unbind", "queue.unbind-ok", "basic.recover", "basic.recover-ok"})
_CONSUME = 60 << 16 | 20


def _spec(name: str):
    return importlib.import_module(f"warren.spec.{name}")


def _make_0_8(qpid: bool) -> Dialect:
    x08, q08 = _spec("amqp0_8"), _spec("amqp0_8_qpid")
    qpid_extra = {"exchange.bound", "exchange.bound-ok"} | ({"basic.recover-ok"} if qpid else set())
    # 0-8's basic.recover (60.100) is asynchronous; Qpid made it synchronous with recover-ok 60.101
    renames = {} if qpid else {"basic.recover": "basic.recover-async"}
    replies = {60 << 16 | 110: v091.BasicRecoverOk}
    if qpid:
        replies[60 << 16 | 100] = q08.BasicRecoverOk
    return Dialect(
        "0-8-qpid" if qpid else "0-8", "AMQP 0-8 (Qpid client)" if qpid else "AMQP 0-8",
        (_H_0_8, _H_0_8_PDF), (8, 0),
        tables=((x08, None, renames), (q08, qpid_extra, None), (v091, _RABBIT_0_8, None)),
        replies=replies, tails={_CONSUME: q08.BasicConsume}, capabilities=False, strict_tune=False,
        reply_codes={505: 503}, reserved_frame_types=(4, 5, 6, 7), plain_table=True,
        refine=None if qpid else (lambda props: get_dialect("0-8-qpid") if _is_qpid(props) else get_dialect("0-8")),
    )


def _make_0_9() -> Dialect:
    x09, q09 = _spec("amqp0_9"), _spec("amqp0_9_qpid")
    return Dialect(
        "0-9", "AMQP 0-9", (_H_0_9,), (0, 9),
        tables=((x09, None, {"basic.recover": "basic.recover-async"}),
                (q09, {"exchange.bound", "exchange.bound-ok", "basic.recover-sync", "basic.recover-sync-ok"},
                 {"basic.recover-sync": "basic.recover", "basic.recover-sync-ok": "basic.recover-ok"})),
        extensions=True,
        replies={60 << 16 | 102: q09.BasicRecoverSyncOk, 60 << 16 | 110: v091.BasicRecoverOk},
        strict_tune=False, reply_codes={505: 503}, reserved_frame_types=(4, 5, 6, 7),
    )


def _make_0_91_qpid() -> Dialect:
    q91 = _spec("amqp0_91_qpid")
    return Dialect(
        "0-91-qpid", "Qpid AMQP 0-91", (_H_0_91,), (0, 91),
        tables=((q91, None, {"basic.recover": "basic.recover-async", "basic.recover-sync": "basic.recover",
                             "basic.recover-sync-ok": "basic.recover-ok"}),),
        extensions=True, replies={60 << 16 | 110: q91.BasicRecoverSyncOk},
    )


DIALECT_0_9_1 = Dialect("0-9-1", "AMQP 0-9-1", (_H_0_9_1,), (0, 9), identity=True)

_FACTORIES = {
    "0-8": lambda: _make_0_8(False),
    "0-8-qpid": lambda: _make_0_8(True),
    "0-9": _make_0_9,
    "0-9-1": lambda: DIALECT_0_9_1,
    "0-91-qpid": _make_0_91_qpid,
}
DIALECTS = tuple(_FACTORIES)


@functools.cache
def get_dialect(key: str) -> Dialect:
    """The dialect for a key of DIALECTS (built on first use: the tables are imported lazily)."""
    try:
        factory = _FACTORIES[key]
    except KeyError:
        raise ValueError(f"unknown AMQP dialect {key!r} (known: {', '.join(DIALECTS)})") from None
    return factory()
