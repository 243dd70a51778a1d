"""What a local Spark checkpoint says about a ``warren`` streaming query, for progress lines.

Spark writes, before a micro-batch runs, ``offsets/<batch id>``: a version line, a metadata
line, then one JSON line per source with the offsets the batch ends at (for the warren source
``{"stream": next offset}``); once the batch is done, ``commits/<batch id>``. So from the first
second of a run, before Spark reports any progress, the checkpoint tells where archiving stands
(the end of the newest committed batch) and how far the batch in flight goes (the end of the
newest planned one). Only a checkpoint on the local file system is read (a ``file:`` URL or a
plain path); elsewhere these return nothing and progress waits for Spark's reports.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

__all__ = ["committed_ends", "planned_ends"]


def _local(checkpoint: str) -> str | None:
    parts = urlsplit(checkpoint)
    if parts.scheme in ("", "file"):
        path = parts.path if parts.scheme else checkpoint
        return path if os.path.isdir(path) else None
    return None


def _batches(folder: str) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(folder) if name.isdigit())
    except OSError:
        return []


def _ends_of(path: str) -> dict[str, int]:
    """The stream -> end offset lines of one offsets file ({} if unreadable)."""
    ends: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return ends
    for line in lines[2:]:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            ends.update({str(k): int(v) for k, v in value.items() if isinstance(v, int)})
    return ends


def committed_ends(checkpoint: str) -> dict[str, int]:
    """stream -> next offset to archive, as of the newest committed batch ({} if none)."""
    root = _local(checkpoint)
    if root is None:
        return {}
    done = _batches(os.path.join(root, "commits"))
    return _ends_of(os.path.join(root, "offsets", str(done[-1]))) if done else {}


def planned_ends(checkpoint: str) -> dict[str, int]:
    """stream -> end offset of the newest planned batch ({} if none)."""
    root = _local(checkpoint)
    if root is None:
        return {}
    planned = _batches(os.path.join(root, "offsets"))
    return _ends_of(os.path.join(root, "offsets", str(planned[-1]))) if planned else {}
