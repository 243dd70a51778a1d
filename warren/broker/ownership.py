"""Which worker owns what, with ``--workers N``: a vhost (the default mode) or a queue
(``--worker-mode queues``), fixed by its name so that a restart finds its data again.

The first rule was ``crc32(name) % N``. CRC-32 is linear, so the names people number (``orders-0``
… ``orders-3``, the benchmark's ``bench-4p4c-16B-4q-0`` … ``-3``) often all hashed to the same
worker of two: a four-queue load ran on one core. The rule now (placement 2) hashes a name
without its trailing number and adds the number, so a numbered family is dealt out one per
worker in turn, and anything else is spread by a 64-bit BLAKE2b hash.

A data folder keeps the rule it was written with, and the worker count and mode, in
``workers/layout.json``: a folder from before that file (workers' folders, no layout) keeps
placement 1, and a start with another ``--workers`` or ``--worker-mode`` than the folder's is
refused with the reason, since each worker would look for its data where another one left it.
The same holds between one process and workers: one process keeps its data in the folder
itself (``definitions.log`` and the stores beside it), workers each in ``workers/<i>``, and
neither would see the other's.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from pathlib import Path

from warren.store.node_file import replace_durably
from warren.store.record import KIND_DEFINITIONS, file_header

__all__ = ["PLACEMENT", "LEGACY_PLACEMENT", "place", "LayoutMismatch", "check_layout", "check_single"]

PLACEMENT = 2  # what a new data folder gets
LEGACY_PLACEMENT = 1  # crc32 of the whole key, folders written before layout.json
LAYOUT_FILE = "layout.json"
ONE_PROCESS_LOG = "definitions.log"  # one process's topology log (warren/broker/durability.py)
_TRAILING_NUMBER = re.compile(r"(\d{1,18})$")
_WAY_OUT = "or move the messages to a node with a new data folder first (a shovel, or definitions export and import)"


def place(key: str, name: str, workers: int, placement: int = PLACEMENT) -> int:
    """The worker (0 … workers-1) of ``name``; ``key`` is what identifies it (a vhost's name, or
    vhost NUL queue name), ``name`` the part whose trailing number deals a family out."""
    if placement == LEGACY_PLACEMENT:
        return zlib.crc32(key.encode("utf-8", "surrogateescape")) % workers
    number = _TRAILING_NUMBER.search(name)
    if number is not None:
        key = key[:len(key) - len(number.group(1))]
    digest = hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + (int(number.group(1)) if number else 0)) % workers


class LayoutMismatch(Exception):
    """The data folder was written by a node with another worker count or mode."""


def check_layout(data_dir: Path, workers: int, mode: str) -> int:
    """The placement rule of ``data_dir`` for ``workers`` workers in ``mode``: recorded in its
    layout file, written now for a new folder (atomically). Raises LayoutMismatch when the
    folder was written with another count or mode."""
    root = data_dir / "workers"
    path = root / LAYOUT_FILE
    if _one_process_data(data_dir):
        raise LayoutMismatch(
            f"the data folder {data_dir} holds the definitions of a broker run as one process (without "
            f"--workers), which worker processes would not see; start without --workers (this start has "
            f"--workers {workers} --worker-mode {mode}), {_WAY_OUT}")
    if path.exists():
        layout = json.loads(path.read_text())
        if (layout.get("workers"), layout.get("mode")) != (workers, mode):
            raise LayoutMismatch(
                f"the data folder {data_dir} was written by --workers {layout.get('workers')} "
                f"--worker-mode {layout.get('mode')}, and its vhosts' and queues' data lie in the folder of the "
                f"worker that owned them then; start with those options (this start has --workers {workers} "
                f"--worker-mode {mode}), {_WAY_OUT}")
        return int(layout.get("placement", LEGACY_PLACEMENT))
    placement = LEGACY_PLACEMENT if _has_worker_folders(root) else PLACEMENT
    replace_durably(path, json.dumps({"workers": workers, "mode": mode, "placement": placement}).encode())
    return placement


def check_single(data_dir: Path) -> None:
    """A start as one process: refused (LayoutMismatch) where worker processes keep the data."""
    root = data_dir / "workers"
    path = root / LAYOUT_FILE
    if path.exists():
        layout = json.loads(path.read_text())
        written = f"--workers {layout.get('workers')} --worker-mode {layout.get('mode')}"
    elif _has_worker_folders(root):
        written = "--workers N (the folder has workers' folders and no layout file)"
    else:
        return
    raise LayoutMismatch(
        f"the data folder {data_dir} was written by {written}, and its vhosts' and queues' data lie "
        f"in the workers' folders, which one process would not see; start with those options, {_WAY_OUT}")


def _has_worker_folders(root: Path) -> bool:
    return root.is_dir() and any(p.name.isdigit() for p in root.iterdir())


def _one_process_data(data_dir: Path) -> bool:
    """Whether one process's topology log holds anything (more than its header)."""
    try:
        return (data_dir / ONE_PROCESS_LOG).stat().st_size > len(file_header(KIND_DEFINITIONS))
    except FileNotFoundError:
        return False
