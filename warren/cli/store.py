"""`warren store check DATA_DIR`: every damaged record of a stopped broker's data folder, offline.

It reads the folder as the broker's recovery would (warren/store/check.py) and prints one line
per finding: damage (what recovery reads around, or refuses to start on) with the records it
costs, and torn tails (what a crash leaves, cut at start). It changes nothing, unless
`--repair` is given: then a damaged definitions log is copied to the quarantine folder and
rewritten with every readable record (and the store folder of a queue whose declare was lost
is copied there too, since the broker's start removes store folders no definition owns) (queues and streams need no such step: the broker
repairs them at start and keeps a copy aside). `--repair` takes the data folder's lock, so it
refuses to run beside a broker.

Exit status: 0 nothing damaged (torn tails are not damage), 1 damage found (after `--repair`:
damage left that the broker will not start on), 2 the folder cannot be read.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys

import click

__all__ = ["store"]

LOCK_FILE = "warren.lock"  # warren/server/server.py: held by a running broker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def store() -> None:
    """The data folder's store files, offline (the broker stopped)."""


@store.command("check")
@click.argument("data_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of lines.")
@click.option("--repair", is_flag=True,
              help="Keep every readable record of a damaged definitions log (a copy goes to the quarantine "
                   "folder first); needs the broker stopped.")
def check(data_dir: str, as_json: bool, repair: bool) -> None:
    """Report every damaged record in DATA_DIR and what it would cost; changes nothing (but --repair)."""
    from warren.store.check import check_data_dir, repair_definitions
    from warren.store.record import FormatError

    repaired = None
    if repair:
        lock = _lock(data_dir)
        try:
            repaired = repair_definitions(data_dir)
        except (OSError, FormatError) as e:  # not a definitions log of ours, or unreadable: nothing guessed
            raise click.ClickException(f"cannot repair the definitions log of {data_dir}: {e}") from None
        finally:
            lock.close()
    try:
        report = check_data_dir(data_dir)
    except OSError as e:
        click.echo(f"Error: cannot read {data_dir}: {e.strerror or e}", err=True)
        sys.exit(2)
    if as_json:
        doc = report.to_json()
        if repaired is not None:
            doc["repaired"] = {"copy": repaired[0], "records_kept": repaired[1], "octets_dropped": repaired[2],
                               "store_folders_kept": repaired[3]}
        click.echo(json.dumps(doc, indent=1))
    else:
        if repaired is not None:
            click.echo(f"repaired definitions.log: {repaired[1]} records kept, {repaired[2]} octets dropped; "
                       f"the file as it was is in {repaired[0]}")
            for folder in repaired[3]:
                click.echo(f"kept {folder}: the store of a queue or exchange the damaged records declared "
                           f"(the broker's start removes store folders no definition owns)")
        for f in report.findings:
            click.echo(f"{f.status}: {f.what}: {f.detail}")
        damaged = len(report.damaged)
        click.echo(f"{report.files} files checked in {report.data_dir}: "
                   + (f"{damaged} damaged" if damaged else "no damage")
                   + (f", {len(report.findings) - damaged} torn tails" if len(report.findings) > damaged else ""))
    sys.exit(1 if report.damaged else 0)


def _lock(data_dir: str):
    """The data folder's lock, as the broker takes it; refuses if a broker holds it."""
    try:
        lock = open(os.path.join(data_dir, LOCK_FILE), "a+")
    except OSError as e:
        raise click.ClickException(f"cannot open {data_dir}/{LOCK_FILE}: {e.strerror or e}") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lock.close()
        if e.errno in (errno.EAGAIN, errno.EACCES):
            raise click.ClickException(f"{data_dir} is in use by a running warren serve; stop it first") from None
        raise click.ClickException(f"cannot lock {data_dir}: {e.strerror or e}") from None
    return lock
