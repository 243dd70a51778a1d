"""Where each setting of ``warren serve`` comes from: command line, environment, file, default.

Precedence, highest first: the command line, the environment (``WARREN_<FIELD>``), the
configuration file (``warren.toml``, read with the stdlib ``tomllib``), the built-in default of
the ``Config`` field. Everything here is derived from the fields of ``warren.config.Config``
and their type annotations, so a field added there is at once a key of the file and an
environment variable, with no code here: ``heartbeat`` is ``heartbeat = 30`` in the file and
``WARREN_HEARTBEAT=30`` in the environment. Keys may also be spelled as on the command line
(``data-dir``, and ``vhost`` for ``vhosts``).

The file is the one named by ``--config FILE``, else by ``$WARREN_CONFIG_FILE``; there is no
implicit file (a stray ``warren.toml`` in the working folder is never picked up by surprise).
Unknown keys and values of the wrong type are errors naming the key and the file. Unknown
``WARREN_*`` environment variables are ignored: other tools use the prefix too (the test
suite's ``WARREN_TEST_BROKER_URL``, the build's ``WARREN_NO_EXTENSIONS``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

from warren.config import INTERNAL_FIELDS, Config

__all__ = ["SettingsError", "Source", "CONFIG_FILE_ENV", "ENV_PREFIX", "option_fields", "resolve", "to_toml"]

ENV_PREFIX = "WARREN_"
CONFIG_FILE_ENV = "WARREN_CONFIG_FILE"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A setting that cannot be used; ``str()`` is one line for the operator."""


@dataclasses.dataclass(frozen=True)
class Source:
    kind: str  # "command line", "environment", "file", "default"
    detail: str = ""  # the variable or the file

    def __str__(self) -> str:
        return f"{self.kind} ({self.detail})" if self.detail else self.kind


DEFAULT = Source("default")
COMMAND_LINE = Source("command line")


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    base: type  # str, int, float, bool, Path, or tuple (of str)
    optional: bool  # None is a legal value (and the default)


def option_fields() -> dict[str, _Field]:
    """The settable fields of Config, by name, with the type their values must have."""
    hints = typing.get_type_hints(Config)
    out = {}
    for f in dataclasses.fields(Config):
        if f.name in INTERNAL_FIELDS:
            continue
        hint = hints[f.name]
        args = typing.get_args(hint)
        optional = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        if optional:
            hint = next(a for a in args if a is not type(None))
        base = tuple if typing.get_origin(hint) is tuple else hint
        out[f.name] = _Field(f.name, base, optional)
    return out


def _type_name(field: _Field) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean (true or false)",
            Path: "a path (string)", tuple: "an array of strings"}.get(field.base, field.base.__name__)


def _from_toml(field: _Field, value: Any) -> Any:
    """The value of a TOML key, or TypeError."""
    base = field.base
    if base is bool:
        ok = isinstance(value, bool)
    elif base is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif base in (str, Path):
        ok = isinstance(value, str)
        value = Path(value) if ok and base is Path else value
    elif base is tuple:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    else:
        ok = False
    if not ok:
        raise TypeError(_type_name(field))
    return value


def _from_text(field: _Field, text: str) -> Any:
    """The value of an environment variable, or TypeError."""
    base = field.base
    try:
        if base is bool:
            lowered = text.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError
        if base is int:
            return int(text.strip().replace("_", ""))
        if base is float:
            return float(text.strip())
        if base is Path:
            return Path(text)
        if base is tuple:
            return tuple(p.strip() for p in text.split(",") if p.strip())
        return text
    except ValueError:
        raise TypeError(_type_name(field) + (" (true/false, yes/no, on/off, 1/0)" if base is bool else "")) from None


def _aliases(fields: Mapping[str, _Field], extra: Mapping[str, str]) -> dict[str, str]:
    """Every accepted spelling of a key -> the field name."""
    names = {}
    for name in fields:
        names[name] = name
        names[name.replace("_", "-")] = name
    for alias, name in extra.items():
        if name in fields:
            names[alias] = name
            names[alias.replace("_", "-")] = name
            names[alias.replace("-", "_")] = name
    return names


def read_file(path: Path, aliases: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings of a TOML file, by field name; SettingsError names the key and the file."""
    fields = option_fields()
    names = _aliases(fields, aliases or {})
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise SettingsError(f"configuration file {path} not found") from None
    except OSError as e:
        raise SettingsError(f"cannot read configuration file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"configuration file {path} is not valid TOML: {e}") from None
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = names.get(key)
        if name is None:
            raise SettingsError(f"unknown key '{key}' in configuration file {path}")
        if name in out:
            raise SettingsError(f"key '{key}' given twice (as another spelling of '{name}') in {path}")
        try:
            out[name] = _from_toml(fields[name], value)
        except TypeError as e:
            raise SettingsError(f"key '{key}' in configuration file {path} must be {e}, "
                                f"not {type(value).__name__} {value!r}") from None
    return out


def read_environment(environ: Mapping[str, str], aliases: Mapping[str, str] | None = None) -> dict[str, tuple]:
    """WARREN_<FIELD> variables: field name -> (value, variable name)."""
    fields = option_fields()
    names = _aliases(fields, aliases or {})
    out: dict[str, tuple] = {}
    for spelling, name in sorted(names.items()):
        if "-" in spelling:
            continue
        var = ENV_PREFIX + spelling.upper()
        if var not in environ:
            continue
        if name in out:
            raise SettingsError(f"environment variables {out[name][1]} and {var} both set '{name}'")
        try:
            out[name] = (_from_text(fields[name], environ[var]), var)
        except TypeError as e:
            raise SettingsError(f"environment variable {var} must be {e}, not {environ[var]!r}") from None
    return out


def resolve(command_line: Mapping[str, Any], *, config_file: Path | None = None,
            environ: Mapping[str, str] | None = None, aliases: Mapping[str, str] | None = None,
            use_environment: bool = True) -> tuple[Config, dict[str, Source]]:
    """The validated Config from the four sources, and where each field's value came from.

    ``command_line`` holds only the options given on the command line (field name -> value).
    ``config_file`` is ``--config``; without it ``$WARREN_CONFIG_FILE`` names the file, if set.
    ``use_environment=False`` reads neither the environment nor $WARREN_CONFIG_FILE (a worker
    process gets everything from its supervisor)."""
    environ = os.environ if environ is None else environ
    fields = option_fields()
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {name: DEFAULT for name in fields}
    if config_file is None and use_environment and environ.get(CONFIG_FILE_ENV):
        config_file = Path(environ[CONFIG_FILE_ENV])
    if config_file is not None:
        for name, value in read_file(config_file, aliases).items():
            values[name] = value
            sources[name] = Source("file", str(config_file))
    if use_environment:
        for name, (value, var) in read_environment(environ, aliases).items():
            values[name] = value
            sources[name] = Source("environment", var)
    for name, value in command_line.items():
        values[name] = value
        sources[name] = COMMAND_LINE
    try:
        config = Config(**values).validate()
    except (TypeError, ValueError) as e:
        raise SettingsError(str(e)) from None
    return config, sources


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    # a JSON string is a TOML basic string (the same escapes)
    return json.dumps(str(value), ensure_ascii=False)


def to_toml(config: Config, sources: Mapping[str, Source] | None = None, *,
            hide: tuple[str, ...] = ("default_pass",)) -> str:
    """The settings of ``config`` as a TOML file ``read_file`` reads back; with ``sources``,
    each line says where its value came from. Unset (None) values are comments; ``hide``
    are written as a placeholder comment (the password is not printed)."""
    lines = []
    for name in option_fields():
        value = getattr(config, name)
        where = f"  # {sources[name]}" if sources else ""
        if value is None:
            lines.append(f"# {name} is not set" + (f" ({sources[name]})" if sources else ""))
        elif name in hide:
            lines.append(f"# {name} = (hidden){where}")
        else:
            lines.append(f"{name} = {_toml_value(value)}{where}")
    return "\n".join(lines) + "\n"
