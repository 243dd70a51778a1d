"""How `warren ctl` prints: rabbitmqctl's formatters and its banner lines.

* ``table`` (the default, as rabbitmqctl's): a header line, then one line per row, the
  columns separated by tabs, so `cut -f` and `awk -F'\\t'` take them apart;
* ``pretty_table``: the same columns aligned with spaces, for people;
* ``csv``: RFC 4180, header first;
* ``json``: one JSON array of objects (column -> value, values as JSON types) for scripts.

Informational lines ("Listing queues for vhost / ...") go to stderr, so stdout carries only
the result; ``-q/--quiet`` drops them, ``-s/--silent`` also the header row (as
``--no-table-headers`` does).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any, Iterable, Sequence

import click

__all__ = ["FORMATTERS", "cell", "emit_rows", "emit_value", "info", "progress"]

FORMATTERS = ("table", "pretty_table", "json", "csv")


def cell(value: Any) -> str:
    """One value as table text: booleans lowercase, lists of names as ``[a, b]`` (rabbitmqctl's
    look for tags), other structures as compact JSON, tabs and newlines escaped so a row stays
    one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float, str)):
        text = str(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = "[" + ", ".join(value) + "]"
    else:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def emit_rows(settings, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows (values in the order of `columns`) with the chosen formatter."""
    rows = list(rows)
    headers = not (settings.silent or settings.no_table_headers)
    if settings.formatter == "json":
        # one object per line (as rabbitmqctl): valid JSON that grep and head still get along with
        objects = [json.dumps(dict(zip(columns, row)), separators=(",", ":")) for row in rows]
        click.echo("[\n" + ",\n".join(objects) + "\n]" if objects else "[]")
        return
    if settings.formatter == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if headers:
            writer.writerow(columns)
        for row in rows:
            writer.writerow([cell(v) if not isinstance(v, str) else v for v in row])
        click.echo(out.getvalue(), nl=False)
        return
    text_rows = [[cell(v) for v in row] for row in rows]
    if headers:
        text_rows.insert(0, list(columns))
    if settings.formatter == "pretty_table" and text_rows:
        widths = [max(len(r[i]) for r in text_rows) for i in range(len(columns))]
        for r in text_rows:
            click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        return
    for r in text_rows:
        click.echo("\t".join(r))


def emit_value(settings, value: Any, text: str | None = None) -> None:
    """A single result (status, limits, a document): JSON with ``--formatter json``, else `text`
    (or compact JSON when there is no text form)."""
    if settings.formatter == "json" or text is None:
        click.echo(json.dumps(value, indent=1 if settings.formatter == "json" else None))
    else:
        click.echo(text, nl=not text.endswith("\n"))


def info(settings, message: str) -> None:
    """A banner line on stderr, unless -q/-s."""
    if not (settings.quiet or settings.silent):
        click.echo(message, err=True)


class progress:
    """Progress of a long job on stderr: one line rewritten in place on a terminal, a line per
    step otherwise (logs of a deployment job keep them); nothing with -q."""

    def __init__(self, settings, label: str) -> None:
        self.enabled = not (settings.quiet or settings.silent)
        self.label = label
        self.tty = sys.stderr.isatty()
        self._shown = False

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        if self.tty:
            click.echo(f"\r{self.label}: {text}\x1b[K", err=True, nl=False)
            self._shown = True
        else:
            click.echo(f"{self.label}: {text}", err=True)

    def done(self, text: str | None = None) -> None:
        if text is not None:
            self.update(text)
        if self.enabled and self.tty and self._shown:
            click.echo("", err=True)
