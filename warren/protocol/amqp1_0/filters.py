"""A receiving link's source filter set, read as RabbitMQ 4.2 reads it (``rabbit_amqp_session``'s
``parse_filter``, ``rabbit_amqp_filter_prop``, ``rabbit_amqp_filter_sql``).

The filter set is a map of names (symbols) to described values; the name is the client's, the
descriptor says what the filter is:

* ``rabbitmq:stream-offset-spec``: where a stream receiver starts: ``first``, ``last``, ``next``
  (a string or symbol), an offset (an integer, 0 or more), a timestamp (ms, taken to the second,
  as RabbitMQ does), or an interval string (``"1h"``); it becomes the consumer argument
  ``x-stream-offset`` of the stream's own reader (``warren/broker/queues/stream.py``);
* ``rabbitmq:stream-filter``: a string or a list of strings, ``x-stream-filter`` (the stream's
  Bloom filters, ``stream_filter.py``); ``rabbitmq:stream-match-unfiltered`` (a boolean),
  ``x-stream-match-unfiltered``;
* ``amqp:properties-filter`` (0x173) and ``amqp:application-properties-filter`` (0x174): the
  property filter expressions of AMQP Filter Expressions 1.0 (csd01 §4): a map of at most 16
  fields, each a reference value the message's field must equal (numbers compare as numbers, a
  null reference matches anything), or for strings ``&p:PREFIX``, ``&s:SUFFIX`` (``&&`` escapes
  an ``&``). Every field of every expression must match. Applied by ``Match`` to the message as
  a 1.0 consumer sees it (``message.view``).

* ``amqp:sql-filter`` (0x120): RabbitMQ 4.2's SQL filter expression (filtex §6), a string
  read by ``sql_filter.py``; SQL and property expressions exclude each other (RabbitMQ's rule:
  the one met first stays, the other is left out);
* ``apache.org:selector-filter:string`` (0x0000468C:0x00000004): a JMS message selector, read by
  ``sql_filter.py`` in its JMS dialect; it holds beside any of the others (all must match).

As RabbitMQ does, a filter it does not know or cannot read is left out, not refused: the attach
answer's source carries the filters actually in place (part 3 §3.5.3) and the client decides.
An SQL expression that does not parse is left out so too (RabbitMQ 4.2 logs a warning and
leaves it out: ``LinkFilter.refused`` says why, for the adapter's log). A JMS selector that does
not parse refuses the link instead (``InvalidSelector``: ``amqp:invalid-field``, as Qpid
Broker-J and ActiveMQ answer it; a JMS client raises InvalidSelectorException). A second
expression on the same section is left out as well; the stream filters and the expressions
are read only for a stream (RabbitMQ applies them to streams only), so a receiver from another
queue gets no filter back: a queue hands each message to one consumer, and skipping one for a
selector would need the queue to offer it to the next (docs/compatibility.md).
"""

from __future__ import annotations

import datetime
import uuid

from warren.codec.amqp1_0.types import Described, Symbol, Timestamp, UInt, ULong
from warren.protocol.amqp1_0 import sql_filter
from warren.protocol.amqp1_0.addresses import AddressError

__all__ = ["LinkFilter", "Match", "InvalidSelector", "parse_filter", "OFFSET_SPEC", "STREAM_FILTER",
           "MATCH_UNFILTERED", "PROPERTIES_FILTER", "APPLICATION_PROPERTIES_FILTER", "SQL_FILTER", "SELECTOR_FILTER",
           "CAPABILITY", "SQL_CAPABILITY"]

OFFSET_SPEC = "rabbitmq:stream-offset-spec"
STREAM_FILTER = "rabbitmq:stream-filter"
MATCH_UNFILTERED = "rabbitmq:stream-match-unfiltered"
PROPERTIES_FILTER = ("amqp:properties-filter", 0x173)
APPLICATION_PROPERTIES_FILTER = ("amqp:application-properties-filter", 0x174)
SQL_FILTER = ("amqp:sql-filter", 0x120)
SELECTOR_FILTER = ("apache.org:selector-filter:string", 0x0000468C00000004)
CAPABILITY = "AMQP_FILTEX_PROP_V1_0"  # offered on a stream receiver's attach (filtex §2.2)
SQL_CAPABILITY = "AMQP_FILTEX_SQL_V1_0"  # likewise, since RabbitMQ 4.2
MAX_FIELDS = 16  # "impose a limit on the complexity of each filter expression" (RabbitMQ's)

# the properties a filter may name, with the types RabbitMQ takes for each ("id": ulong, uuid,
# binary or string; "str": a string, with the prefix / suffix modifiers)
_PROPERTIES = {
    "message-id": "id", "user-id": bytes, "to": "str", "subject": "str", "reply-to": "str",
    "correlation-id": "id", "content-type": "symbol", "content-encoding": "symbol",
    "absolute-expiry-time": Timestamp, "creation-time": Timestamp, "group-id": "str",
    "group-sequence": "uint", "reply-to-group-id": "str",
}


class _Affix:
    __slots__ = ("prefix", "octets")

    def __init__(self, prefix: bool, text: str) -> None:
        self.prefix, self.octets = prefix, text.encode("utf-8")

    def matches(self, value) -> bool:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, bytes):
            return False
        return value.startswith(self.octets) if self.prefix else value.endswith(self.octets)


class _Invalid(ValueError):
    pass


def _string(text: str):
    """A string reference value with its modifier (filtex §4.1.1)."""
    if text.startswith("&s:"):
        return _Affix(False, text[3:])
    if text.startswith("&p:"):
        return _Affix(True, text[3:])
    if text.startswith("&&"):
        return text[1:]
    if text.startswith("&"):
        raise _Invalid(text)
    return text


def _plain(v):
    """A value as Erlang's ``==`` compares it after RabbitMQ unwraps it: strings, symbols and
    binaries as octets, a uuid as its 16 octets, booleans apart from numbers."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    return v


def _equal(ref, value) -> bool:
    if ref is None:
        return True  # a null reference matches whatever the message has, or nothing
    if type(ref) is _Affix:
        return ref.matches(value)
    if value is None:
        return False
    return _plain(ref) == _plain(value)


class Match:
    """The property filter expressions of one link: ``properties`` (field name with dashes ->
    reference) and ``application`` (key -> reference), every one to match."""

    __slots__ = ("properties", "application")

    def __init__(self) -> None:
        self.properties: dict | None = None
        self.application: dict | None = None

    def matches(self, properties, application: dict, header=None, annotations=None) -> bool:
        if self.properties is not None:
            for name, ref in self.properties.items():
                if not _equal(ref, getattr(properties, name)):
                    return False
        if self.application is not None:
            for key, ref in self.application.items():
                if key not in application or not _equal(ref, application[key]):
                    return False
        return True


def _properties(fields: dict) -> dict:
    out = {}
    for key, value in fields.items():
        kind = _PROPERTIES.get(key) if type(key) is Symbol else None
        if kind is None:
            raise _Invalid(key)
        name = key.replace("-", "_")
        if kind == "id":  # a ulong, a uuid, a binary or a string
            if type(value) is str:
                value = _string(value)
            elif type(value) not in (ULong, uuid.UUID, bytes):
                raise _Invalid(key)
        elif kind == "str":
            if type(value) is not str:
                raise _Invalid(key)
            value = _string(value)
        elif kind == "symbol":
            if type(value) is not Symbol:
                raise _Invalid(key)
        elif type(value) is not (UInt if kind == "uint" else kind):
            raise _Invalid(key)
        out[name] = value
    return out


def _application(fields: dict) -> dict:
    out = {}
    for key, value in fields.items():
        if type(key) is not str:  # a string key (RabbitMQ: utf8 only, not a symbol)
            raise _Invalid(key)
        out[key] = _string(value) if type(value) is str else value
    return out


_SECTIONS = {PROPERTIES_FILTER[0]: "properties", PROPERTIES_FILTER[1]: "properties",
             APPLICATION_PROPERTIES_FILTER[0]: "application", APPLICATION_PROPERTIES_FILTER[1]: "application"}


def _expression(descriptor, value):
    """("properties" | "application", the parsed fields), or None when it is not one."""
    if type(descriptor) is ULong:
        descriptor = int(descriptor)
    elif type(descriptor) is not Symbol:
        return None
    section = _SECTIONS.get(descriptor)
    if section is None or not isinstance(value, dict) or not value or len(value) > MAX_FIELDS:
        return None
    try:
        return section, (_properties(value) if section == "properties" else _application(value))
    except _Invalid:
        return None


class InvalidSelector(AddressError):
    """A JMS selector that does not parse: the link is refused (amqp:invalid-field)."""


class _All:
    """Several expressions of one link (a JMS selector beside a property or SQL expression)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        self.parts = parts

    def matches(self, properties, application: dict, header=None, annotations=None) -> bool:
        return all(p.matches(properties, application, header, annotations) for p in self.parts)


class LinkFilter:
    """What a receiver's filter set asks of a stream: ``arguments`` (the consumer arguments of
    the stream's reader), ``match`` (what a message must match: property expressions, an SQL
    expression, a JMS selector, or None), ``effective`` (the filters in place, the attach
    answer's ``filter``; None when the client sent none) and ``refused`` ((name, why) of each
    SQL expression left out because it does not parse)."""

    __slots__ = ("arguments", "match", "effective", "refused")

    def __init__(self) -> None:
        self.arguments: dict = {}
        self.match = None
        self.effective: dict | None = None
        self.refused: list[tuple[str, str]] = []


def _offset(value):
    if isinstance(value, Timestamp):
        return datetime.datetime.fromtimestamp(int(value) // 1000, datetime.timezone.utc)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None


def parse_filter(filter_set, stream: bool) -> LinkFilter:
    """The link's filter (``filter_set``: the source's ``filter`` field as decoded)."""
    out = LinkFilter()
    if filter_set is None:
        return out
    out.effective = {}
    if not isinstance(filter_set, dict) or not stream:
        return out
    match = Match()
    sql = selector = None
    for name, value in filter_set.items():
        if type(name) is not Symbol:
            continue
        if isinstance(value, Described):
            descriptor, inner = value.descriptor, value.value
        elif name.startswith("rabbitmq:stream-"):
            # RabbitMQ 4.0's clients sent these without a descriptor (its deprecated
            # amqp_filter_set_bug, still permitted by default): the name says what it is
            descriptor, inner = name, value
        else:
            continue
        if descriptor == OFFSET_SPEC:
            offset = _offset(inner)
            if offset is None:
                continue
            out.arguments["x-stream-offset"] = offset
        elif descriptor == STREAM_FILTER:
            if isinstance(inner, list):
                out.arguments["x-stream-filter"] = [v for v in inner if type(v) is str]
            elif type(inner) is str:
                out.arguments["x-stream-filter"] = inner
            else:
                continue
        elif descriptor == MATCH_UNFILTERED:
            if not isinstance(inner, bool):
                continue
            out.arguments["x-stream-match-unfiltered"] = inner
        elif _is(descriptor, SQL_FILTER):
            if sql is not None or out.match is not None:
                continue  # one SQL expression, and not beside property expressions (RabbitMQ's rule)
            try:
                sql = sql_filter.parse(inner, sql_filter.SQL)
            except sql_filter.SqlError as error:
                out.refused.append((str(name), str(error)))
                continue
        elif _is(descriptor, SELECTOR_FILTER):
            if selector is not None:
                continue
            try:
                selector = sql_filter.parse(inner, sql_filter.JMS)
            except sql_filter.SqlError as error:
                raise InvalidSelector(f"invalid JMS selector {str(inner)[:200]!r}: {error}") from None
        else:
            parsed = _expression(descriptor, inner)
            if parsed is None or sql is not None:
                continue
            section, fields = parsed
            if getattr(match, section) is not None:
                continue  # one expression per section (RabbitMQ's rule)
            setattr(match, section, fields)
            out.match = match
        out.effective[name] = value
    parts = [m for m in (out.match, sql, selector) if m is not None]
    out.match = parts[0] if len(parts) == 1 else _All(parts) if parts else None
    return out


def _is(descriptor, known: tuple) -> bool:
    """Whether a filter's descriptor (a symbol or a code) is ``known`` (name, code)."""
    if type(descriptor) is ULong:
        return int(descriptor) == known[1]
    return type(descriptor) is Symbol and descriptor == known[0]
