"""Base classes of the generated AMQP 0-10 tables (hand-written; ``warren/spec/amqp0_10.py``).

0-10 has three kinds of generated class, all plain holders of their fields (the wire form is
``warren.codec.amqp0_10``'s business, so this package stays free of codec imports):

* ``Control``: a connection or session control (track 0), e.g. ``SessionAttach``.
* ``Command``: a numbered command of the session layer (track 1), e.g. ``MessageTransfer``;
  ``RESULT`` names the struct of its ``execution.result`` (or None), ``HEADER``/``BODY`` whether
  header and body segments may follow it, ``HEADER_STRUCTS`` the structs its header may hold.
* ``Struct``: a struct (``SIZE``: width of its size prefix, ``PACK``: octets of packing flags,
  ``CODE``/``INDEX``: its code when it is a coded struct, else None).

Every class has ``NAME`` (``"class.name"`` as in the XML), ``CLASS_CODE``, ``FIELDS``: a tuple of
``(attribute, wire type, required)`` where the wire type is a type name of the spec (``"str8"``,
``"sequence-set"``, ...) or, for a field whose type is a struct, the struct's ``NAME``
(``"message.reply-to"``). A field that is absent on the wire is ``None`` (a ``bit`` is False),
so an object built with no arguments encodes as "all fields absent".
"""

from __future__ import annotations

__all__ = ["Compound", "Control", "Command", "Struct", "tables"]


class Compound:
    __slots__ = ()
    NAME = ""
    CLASS_CODE = 0
    CODE: int | None = 0
    INDEX: int | None = 0  # CLASS_CODE << 8 | CODE
    PACK = 2  # octets of packing flags (controls and commands: always 2)
    FIELDS: tuple = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(getattr(self, n) == getattr(other, n) for n, _, _ in self.FIELDS)

    def __hash__(self):  # mutable: not hashable
        raise TypeError(f"unhashable type: {type(self).__name__}")

    def as_dict(self) -> dict:
        return {n: getattr(self, n) for n, _, _ in self.FIELDS}

    def __repr__(self) -> str:
        shown = ((n, getattr(self, n)) for n, _, _ in self.FIELDS)
        args = ", ".join(f"{n}={v!r}" for n, v in shown if v is not None and v is not False)
        return f"<{self.NAME}({args})>"


class Control(Compound):
    __slots__ = ()
    IMPLEMENT: tuple = ()  # (role, "must" | "may"): who handles it
    RESPONSES: tuple = ()


class Command(Compound):
    __slots__ = ()
    IMPLEMENT: tuple = ()
    RESPONSES: tuple = ()
    RESULT: str | None = None  # NAME of the result struct
    HEADER = False
    BODY = False
    HEADER_STRUCTS: tuple = ()


class Struct(Compound):
    __slots__ = ()
    SIZE = 0  # octets of the size prefix: 0, 1, 2 or 4
    PACK = 0


def tables(namespace: dict) -> tuple[dict, dict, dict, dict]:
    """The lookup tables of the generated module: ``CONTROLS`` and ``COMMANDS`` (``INDEX`` ->
    class), ``STRUCTS`` (``INDEX`` -> class, coded structs only) and ``BY_NAME`` (``NAME`` ->
    class, every control, command and struct)."""
    classes = sorted((v for v in namespace.values() if isinstance(v, type) and issubclass(v, Compound)
                      and v not in (Compound, Control, Command, Struct)), key=lambda c: (c.CLASS_CODE, c.CODE or 0))
    controls = {c.INDEX: c for c in classes if issubclass(c, Control)}
    commands = {c.INDEX: c for c in classes if issubclass(c, Command)}
    structs = {c.INDEX: c for c in classes if issubclass(c, Struct) and c.INDEX is not None}
    return controls, commands, structs, {c.NAME: c for c in classes}
