"""Option values of the ``warren`` data source: one parser for the readers, the writer and the drain.

Spark hands a Python data source its options with lower-cased keys (``maxRecordsPerTrigger``
arrives as ``maxrecordspertrigger``), so every key is looked up lower-cased while messages name
it as documented. An empty value counts as not given. A bad value is an ``OptionError`` (a
``ValueError``) that names the option and what it got, raised on the driver before any task.
"""

from __future__ import annotations

__all__ = ["OptionError", "option_map", "int_option", "float_option", "bool_option"]

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class OptionError(ValueError):
    """An option of the ``warren`` data source is missing or malformed."""


def option_map(options) -> dict[str, str]:
    """Spark's options as a plain dict with lower-cased keys and text values."""
    return {str(k).lower(): str(v) for k, v in dict(options or {}).items()}


def _given(opts: dict, key: str) -> str | None:
    raw = opts.get(key.lower())
    return None if raw is None or raw == "" else raw


def int_option(opts: dict, key: str, default: int | None, minimum: int = 1) -> int | None:
    raw = _given(opts, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise OptionError(f"option {key} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key} must be at least {minimum}, not {value}")
    return value


def float_option(opts: dict, key: str, default: float, minimum: float = 0.001) -> float:
    raw = _given(opts, key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OptionError(f"option {key} must be a number, not {raw!r}") from None
    if not value >= minimum:  # NaN too
        raise OptionError(f"option {key} must be at least {minimum}, not {value}")
    return value


def bool_option(opts: dict, key: str, default: bool) -> bool:
    raw = _given(opts, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"option {key} must be true or false, not {raw!r}")
