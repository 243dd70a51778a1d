"""Base classes of the generated method and property classes (hand-written).

A generated method class has ``NAME``, ``CLASS_ID``, ``METHOD_ID``, ``INDEX``
(``class_id << 16 | method_id``), ``SYNCHRONOUS``, ``CONTENT``, ``FIELDS`` (name, wire type)
and two functions: ``decode(buf, off) -> (method, off)`` and ``encode() -> bytes`` (the method
payload: ids then arguments).
"""

from __future__ import annotations

__all__ = ["Method", "Properties", "tables"]


class _Fields:
    __slots__ = ()
    FIELDS: tuple = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, n) == getattr(other, n) for n, _ in self.FIELDS)

    def __hash__(self):  # mutable: not hashable
        raise TypeError(f"unhashable type: {type(self).__name__}")

    def as_dict(self) -> dict:
        return {n: getattr(self, n) for n, _ in self.FIELDS}


class Method(_Fields):
    __slots__ = ()
    NAME = ""
    CLASS_ID = 0
    METHOD_ID = 0
    INDEX = 0
    SYNCHRONOUS = False
    CONTENT = False

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self.FIELDS)
        return f"<{self.NAME}({args})>"


class Properties(_Fields):
    __slots__ = ()
    CLASS_ID = 0

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self.FIELDS if getattr(self, n) is not None)
        return f"<{type(self).__name__}({args})>"


def tables(namespace: dict) -> tuple[dict, dict, dict]:
    """The lookup tables of a generated module, from the classes it defines or imports:
    ``METHODS`` (``INDEX`` -> method class, in id order), ``PROPERTIES`` (class id -> properties
    class) and ``CLASS_IDS`` (class name, e.g. ``"basic"`` -> id)."""
    methods = sorted((v for v in namespace.values()
                      if isinstance(v, type) and issubclass(v, Method) and v is not Method),
                     key=lambda c: c.INDEX)
    properties = sorted((v for v in namespace.values()
                         if isinstance(v, type) and issubclass(v, Properties) and v is not Properties),
                        key=lambda c: c.CLASS_ID)
    class_ids = {}
    for m in methods:
        class_ids.setdefault(m.NAME.split(".")[0], m.CLASS_ID)
    return ({m.INDEX: m for m in methods}, {p.CLASS_ID: p for p in properties},
            dict(sorted(class_ids.items(), key=lambda kv: kv[1])))
