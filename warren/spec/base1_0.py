"""Base class of the generated AMQP 1.0 tables (hand-written; ``warren/spec/amqp1_0.py``).

AMQP 1.0 (OASIS, part 1 §1.4 "composite types") describes its performatives, SASL frames,
message sections and delivery states as *composite types*: a described list whose descriptor is a
symbol (``amqp:open:list``) or a ulong (``0x00000000:0x00000010``, domain id : descriptor id),
and whose items are the fields in order. Every generated class is a ``Composite``: a plain holder
of its fields (the wire form is ``warren.codec.amqp1_0``'s business, so this package imports no
codec).

Class attributes of each generated class:

* ``NAME``: the type's name in the XML (``"open"``); ``SYMBOL`` and ``CODE``: its descriptors;
* ``PROVIDES``: what it provides (``("frame",)``, ``("delivery-state", "outcome")``);
* ``FIELDS``: a tuple of ``Field`` (attribute, declared type, primitive it encodes as, mandatory,
  multiple, default, requires). A field absent on the wire (a null, or cut off the end of the
  list) is its default, None when it has none.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Composite", "Field", "tables"]


class Field(NamedTuple):
    name: str  # the Python attribute
    type: str  # the declared type: a primitive, a restricted type, a composite, or "*"
    primitive: str  # the primitive the declared type encodes as ("*": any, the value says)
    mandatory: bool
    multiple: bool  # a single value or an array of them
    default: object
    requires: str | None  # for "*": what the value must provide ("address", "outcome", ...)


class Composite:
    __slots__ = ()
    NAME = ""
    SYMBOL = ""
    CODE = 0
    PROVIDES: tuple = ()
    FIELDS: tuple = ()

    def __init__(self, *args, **kwargs) -> None:
        fields = self.FIELDS
        if len(args) > len(fields):
            raise TypeError(f"{self.NAME} takes at most {len(fields)} fields")
        for f, value in zip(fields, args):
            setattr(self, f.name, value)
        for f in fields[len(args):]:
            setattr(self, f.name, kwargs.pop(f.name, f.default))
        if kwargs:
            raise TypeError(f"{self.NAME} has no field {next(iter(kwargs))!r}")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS)

    def __hash__(self):  # mutable: not hashable
        raise TypeError(f"unhashable type: {type(self).__name__}")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in self.FIELDS}

    def __repr__(self) -> str:
        shown = ((f.name, getattr(self, f.name), f.default) for f in self.FIELDS)
        args = ", ".join(f"{n}={v!r}" for n, v, d in shown if v is not None and v != d)
        return f"<{self.NAME}({args})>"


def tables(namespace: dict) -> tuple[dict, dict]:
    """(numeric descriptor -> class, symbolic descriptor -> class) of the composites in a module."""
    by_code, by_symbol = {}, {}
    for value in list(namespace.values()):
        if isinstance(value, type) and issubclass(value, Composite) and value is not Composite:
            by_code[value.CODE] = value
            by_symbol[value.SYMBOL] = value
    return by_code, by_symbol
