"""Field-table values as text: how the Spark source's ``headers`` column shows a header, and
how the broker's records endpoint compares a header with a value asked for (the same function
on both sides, so a filter the broker applies keeps exactly the rows Spark would).

Strings as they are; booleans ``true``/``false``; integers and decimals in decimal; floats as
Python's ``repr``; timestamps ISO 8601 UTC (``2024-05-01T12:00:00Z``); byte arrays as UTF-8
(invalid sequences replaced by U+FFFD); void as None; nested tables and arrays as compact JSON
whose scalars are rendered the same way (numbers and booleans stay JSON numbers and booleans).
Text that is not valid UTF-8 on the wire (the codec keeps it with ``surrogateescape``) gets
U+FFFD too, as Arrow strings must be UTF-8.
"""

from __future__ import annotations

import datetime
import decimal
import json

__all__ = ["render_value", "valid_text"]


def valid_text(s: str) -> str:
    """``s`` as valid UTF-8 text: lone surrogates (undecodable wire octets) become U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _json_default(v):
    if isinstance(v, (decimal.Decimal, datetime.datetime, bytes, bytearray)):
        return render_value(v)
    raise TypeError(f"cannot render {type(v).__name__}")


def _jsonable(v):
    if isinstance(v, str):
        return valid_text(v)
    if isinstance(v, dict):
        return {valid_text(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def render_value(v) -> str | None:
    """A decoded field-table value as text (None for void)."""
    if v is None:
        return None
    if isinstance(v, str):
        return valid_text(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.isoformat() + "Z"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, (dict, list)):
        return json.dumps(_jsonable(v), default=_json_default, separators=(",", ":"), ensure_ascii=False)
    return valid_text(str(v))
