"""`export_definitions` and `import_definitions`: RabbitMQ's definitions JSON through the API.

A big import is sent in batches (``--batch-size`` objects per POST, in the order RabbitMQ
imports them: users, vhosts, permissions, parameters, policies, queues, exchanges, bindings),
so the progress line can say how far the broker got and a time-out applies to one batch, not
to the whole file. The API takes any subset of a definitions document, so each batch is a
valid document of its own; the first carries the file's other keys (versions, metadata). A
file that fits in one batch goes in one request, exactly as it is.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import click

from warren.cli.ctl import api, common_options, ctl, settings
from warren.cli.ctl.access import no_such_vhost
from warren.cli.ctl.client import EX_CANTCREAT, EX_DATAERR, EX_NOINPUT, ApiError, CtlError, exit_code_for_status
from warren.cli.ctl.output import info, progress

__all__ = ["SECTIONS", "batches"]

# the sections that list objects, in RabbitMQ's import order
SECTIONS = ("users", "vhosts", "permissions", "topic_permissions", "parameters", "global_parameters",
            "policies", "queues", "exchanges", "bindings")
DEFAULT_BATCH = 1000


def batches(document: dict, size: int) -> list[tuple[dict, int]]:
    """The document cut into (partial document, object count) pieces of at most `size` objects,
    sections in import order; the first piece also carries the non-list keys."""
    extra = {k: v for k, v in document.items() if not (k in SECTIONS and isinstance(v, list))}
    pieces: list[tuple[dict, int]] = []
    current: dict = dict(extra)
    count = 0
    for section in SECTIONS:
        items = document.get(section)
        if not isinstance(items, list):
            continue
        start = 0
        while start < len(items):
            room = size - count
            chunk = items[start:start + room]
            current.setdefault(section, []).extend(chunk)
            count += len(chunk)
            start += len(chunk)
            if count >= size:
                pieces.append((current, count))
                current, count = {}, 0
    if count or not pieces:
        pieces.append((current, count))
    return pieces


def _vhost_missing(e: ApiError, vhost: str | None) -> bool:
    return vhost is not None and e.status == 404


@ctl.command("export_definitions")
@click.argument("path")
@click.option("--vhost", "-p", default=None, help="Only this vhost's definitions (default: the whole broker).")
@common_options
def export_definitions(path: str, vhost: str | None) -> None:
    """Exports users, vhosts, permissions, parameters, policies, queues, exchanges and bindings
    as RabbitMQ's definitions JSON to PATH ("-" for stdout)."""
    s = settings()
    where = "standard output" if path == "-" else f'a file at "{path}"'
    info(s, f"Exporting definitions in JSON to {where} ...")
    try:
        # written as the broker sent it: never decoded, so nothing is lost or reordered
        document = api(s).get(*(("definitions", vhost) if vhost is not None else ("definitions",)), raw=True)
    except ApiError as e:
        if _vhost_missing(e, vhost):
            raise no_such_vhost(vhost) from None
        raise
    if not document.endswith(b"\n"):
        document += b"\n"
    if path == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(document)
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise CtlError(EX_CANTCREAT, f"directory {target.parent} does not exist")
    try:  # a half-written file never replaces a good one
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(document)
        os.replace(tmp, target)
    except OSError as e:
        raise CtlError(EX_CANTCREAT, f"cannot write {path}: {e}") from None


@ctl.command("import_definitions")
@click.argument("path", required=False, default="-")
@click.option("--vhost", "-p", default=None,
              help="Import into this vhost (a per-vhost document, as the API's /api/definitions/VHOST).")
@click.option("--batch-size", default=DEFAULT_BATCH, show_default=True, type=click.IntRange(min=1),
              help="Objects per request (the progress step).")
@common_options
def import_definitions(path: str, vhost: str | None, batch_size: int) -> None:
    """Imports a definitions JSON file (RabbitMQ's format) from PATH ("-" or none: stdin)."""
    s = settings()
    source = "standard input" if path == "-" else f'a file at "{path}"'
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        raise CtlError(EX_NOINPUT, f"cannot read {path}: {e.strerror or e}") from None
    try:
        document = json.loads(raw)
    except RecursionError:
        document = None  # too deep for us to cut into batches: the broker gets it whole
    except ValueError as e:
        raise CtlError(EX_DATAERR, f"{source} is not valid JSON: {e}") from None
    if document is not None and not isinstance(document, dict):
        raise CtlError(EX_DATAERR, f"{source} is not a definitions document (a JSON object)")
    info(s, f"Importing definitions in JSON from {source} ...")
    client = api(s)
    segments = ("definitions", vhost) if vhost is not None else ("definitions",)
    if document is None:
        pieces = [(None, 0)]
    else:
        pieces = batches(document, batch_size)
    total = sum(n for _, n in pieces)
    bar = progress(s, "Importing definitions")
    started = time.monotonic()
    done = 0
    for piece, count in pieces:
        # one piece: the file's own octets, as they are
        body = raw if len(pieces) == 1 else json.dumps(piece).encode()
        try:
            client.request("POST", *segments, data=body)
        except ApiError as e:
            bar.done()
            if _vhost_missing(e, vhost):
                raise no_such_vhost(vhost) from None
            what = f" after {done} of {total} objects" if done else ""
            raise CtlError(exit_code_for_status(e.status), f"import refused{what}: {e.describe()}") from None
        done += count
        if len(pieces) > 1:
            sections = ", ".join(k for k in SECTIONS if k in piece)
            bar.update(f"{done}/{total} objects ({100 * done // max(total, 1)}%, {sections})")
    bar.done()
    elapsed = time.monotonic() - started
    info(s, f"Imported {total} objects in {elapsed:.1f} s." if total else f"Imported in {elapsed:.1f} s.")
