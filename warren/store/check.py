"""Offline check of a data folder: every damaged record, and what it would cost, changing nothing.

``check_data_dir(data_dir)`` reads every store file the broker would open at start (with
``--workers``, each worker's folder too) and scans it as recovery does (damage.py), but only
reads: nothing is cut, rewritten, copied or created.
What it finds is a list of ``Finding``s:

* ``damage``: a damaged stretch recovery reads around (queues, streams) or refuses (the
  definitions log, the node's JSON files), with the records it costs;
* ``torn``: a torn tail (what a crash leaves: the last write cut short or zeros), the octets
  recovery would cut; nothing that was synced is in them.

Queue and stream folders are named by a digest of (vhost, name) (broker/durability.py); the
definitions log, read here without changing it, gives the names back where it still holds them.

``repair_definitions(data_dir)`` is the one change this module makes, and only when asked
(``warren store check --repair``): the definitions log is copied to the quarantine folder, then
rewritten with every readable record. Queue and stream files need no such step: the broker
repairs them at start, keeping a copy aside.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field

from warren.store.aside import ASIDE_PREFIX
from warren.store.damage import (
    QUARANTINE, Damage, damaged_header, is_torn_tail, quarantine_copy, rewrite_file, scan_seq_file, scan_stream_file,
)
from warren.store.definitions import DefinitionsStore, find_definition_records
from warren.store.node_file import NODE_FILES, check_node_file
from warren.store.record import (
    FILE_HEADER_SIZE, HEADER, HEADER_SIZE, KIND_ACKS, KIND_DEFINITIONS, KIND_MESSAGES, T_ACK, T_DEFINITION,
    T_DELIVERED, T_MESSAGE, T_RETURNED, FormatError, Scan, check_file_header, file_header,
)
from warren.store.stream_format import KIND_STREAM

__all__ = ["Finding", "CheckReport", "check_data_dir", "repair_definitions", "DEFINITIONS_FILE"]

DEFINITIONS_FILE = "definitions.log"
_MESSAGE_TYPES = frozenset((T_MESSAGE,))
_ACK_TYPES = frozenset((T_ACK, T_DELIVERED, T_RETURNED))
_DEFINITION_TYPES = frozenset((T_DEFINITION,))


@dataclass
class Finding:
    path: str
    status: str         # "damage" or "torn"
    what: str           # whose file: "queue 'q' in vhost '/'", "definitions", ...
    detail: str         # one line: where, why, what it costs
    records: int | None = None  # records it costs (None: unknown, at least one)
    start: int = 0
    end: int = 0

    def to_json(self) -> dict:
        return {"file": self.path, "status": self.status, "of": self.what, "detail": self.detail,
                "records": self.records, "start": self.start, "end": self.end}


@dataclass
class CheckReport:
    data_dir: str
    files: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def damaged(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "damage"]

    def to_json(self) -> dict:
        return {"data_dir": self.data_dir, "files": self.files, "damaged": len(self.damaged),
                "findings": [f.to_json() for f in self.findings]}


def _digest(vhost: str, name: str) -> str:
    return hashlib.sha256(f"{vhost}\0{name}".encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def check_data_dir(data_dir) -> CheckReport:
    """Scan every store file of ``data_dir``; reads only."""
    data_dir = os.fspath(data_dir)
    report = CheckReport(data_dir)
    names = _check_definitions(data_dir, report)
    for name in NODE_FILES:
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            report.files += 1
            problem = check_node_file(path)
            if problem is not None:
                report.findings.append(Finding(path, "damage", NODE_FILES[name], f"{problem}; the broker will "
                                               f"not start on it (restore it from a backup or mend it)"))
    for root, kind in (("queues", "queue"), ("delayed", "delayed exchange"), ("streams", "stream")):
        top = os.path.join(data_dir, root)
        if not os.path.isdir(top):
            continue
        for digest in sorted(os.listdir(top)):
            folder = os.path.join(top, digest)
            if not os.path.isdir(folder):
                continue
            owner = names.get(digest)
            what = f"{kind} '{owner[1]}' in vhost '{owner[0]}'" if owner else f"{kind} folder {digest}"
            if digest.startswith(ASIDE_PREFIX):  # a delete's (aside.py): the next start removes it or puts it back
                what = f"{kind} folder {digest}, put aside by a delete"
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if root == "streams":
                    if name.startswith("stream.") and name[7:].isdigit():
                        _check_stream_file(path, int(name[7:]), what, report)
                else:
                    prefix, _, num = name.partition(".")
                    if prefix in ("msgs", "acks") and len(num) == 10 and num.isdigit():
                        _check_seq_file(path, prefix, what, report)
    workers = os.path.join(data_dir, "workers")  # --workers N: each worker's own data folder
    if os.path.isdir(workers):
        for index in sorted(os.listdir(workers)):
            if os.path.isdir(os.path.join(workers, index)):
                part = check_data_dir(os.path.join(workers, index))
                report.files += part.files
                report.findings += part.findings
    return report


def _check_definitions(data_dir: str, report: CheckReport) -> dict[str, tuple[str, str]]:
    """Check the definitions log; returns digest -> (vhost, name) of every queue and exchange it names."""
    path = os.path.join(data_dir, DEFINITIONS_FILE)
    names: dict[str, tuple[str, str]] = {}
    if not os.path.exists(path):
        return names
    report.files += 1
    data = _read(path)
    header = damaged_header(path, data, KIND_DEFINITIONS, "definitions")
    if header is not None:
        report.findings.append(Finding(path, "damage", "definitions", "damaged file header (a flipped bit): the "
                                       f"broker will not start on it; `warren store check --repair {data_dir}` "
                                       "mends it", 0, 0, FILE_HEADER_SIZE))
        data = file_header(KIND_DEFINITIONS) + data[FILE_HEADER_SIZE:]
    try:
        if not data or not check_file_header(data, KIND_DEFINITIONS):
            return names
    except FormatError as e:
        report.findings.append(Finding(path, "damage", "definitions", str(e)))
        return names
    stretches = []
    scan = Scan(data, FILE_HEADER_SIZE, _DEFINITION_TYPES)
    good = [(s, n) for _, s, n in scan]
    if scan.error is not None:
        bad = scan.end
        stretches, count = find_definition_records(data, bad)
        if stretches or not is_torn_tail(data, bad, HEADER_SIZE, lambda b, o: HEADER.unpack_from(b, o)[1]):
            end = stretches[0][0] if stretches else len(data)
            report.findings.append(Finding(
                path, "damage", "definitions",
                f"{scan.error}; {count} readable records after it. The broker will not start on it: restore it "
                f"from a backup, or `warren store check --repair {data_dir}` keeps every readable record "
                f"(the changes in the damaged octets {bad}..{end - 1} are lost)", None, bad, end))
        else:
            report.findings.append(Finding(path, "torn", "definitions",
                                           f"{scan.error}: a change that never returned; {len(data) - bad} octets "
                                           f"would be cut at start", 1, bad, len(data)))
        for a, b in stretches:
            good += [(s, n) for _, s, n in Scan(data[:b], a, _DEFINITION_TYPES)]
    for start, n in good:
        try:
            rec = json.loads(data[start:start + n])
        except ValueError:
            continue
        if rec.get("op") in ("queue.declare", "exchange.declare"):
            names[_digest(rec["vhost"], rec["name"])] = (rec["vhost"], rec["name"])
    return names


def _finding(d: Damage, what: str) -> Finding:
    return Finding(d.path, "damage", what, d.describe(), d.records, d.start, d.end)


def _check_seq_file(path: str, prefix: str, what: str, report: CheckReport) -> None:
    kind = KIND_MESSAGES if prefix == "msgs" else KIND_ACKS
    data = _checked_header(path, kind, "messages" if prefix == "msgs" else "acks", "started over", what, report)
    if data is None:
        return
    scan, damage, _ = scan_seq_file(path, data, _MESSAGE_TYPES if prefix == "msgs" else _ACK_TYPES,
                                    "messages" if prefix == "msgs" else "acks", None if prefix == "msgs" else 8)
    report.findings += [_finding(d, what) for d in damage]
    _torn(path, data, scan.end, scan.error, damage, what, report)


def _checked_header(path: str, kind, label: str, fate: str, what: str, report: CheckReport) -> bytes | None:
    """The file's octets with a damaged header mended (and reported), or None when there is
    nothing past the header to scan: a torn header (``fate``: what the start would do with the
    file) or one that is not ours."""
    report.files += 1
    data = _read(path)
    header = damaged_header(path, data, kind, label)
    if header is not None:
        report.findings.append(_finding(header, what))
        data = file_header(kind) + data[FILE_HEADER_SIZE:]
    try:
        if not check_file_header(data, kind):
            if data:
                report.findings.append(Finding(path, "torn", what, "torn file header: never held synced data; "
                                               f"the file would be {fate}", 0, 0, len(data)))
            return None
    except FormatError as e:
        report.findings.append(Finding(path, "damage", what, str(e)))
        return None
    return data


def _check_stream_file(path: str, base: int, what: str, report: CheckReport) -> None:
    data = _checked_header(path, KIND_STREAM, "stream", "removed", what, report)
    if data is None:
        return
    runs, damage = scan_stream_file(path, data, base)
    report.findings += [_finding(d, what) for d in damage]
    last = runs[-1].scan
    _torn(path, data, last.end, last.error, damage, what, report)


def _torn(path: str, data, end: int, error: str | None, damage: list, what: str, report: CheckReport) -> None:
    """A torn tail after the last good record (not already counted as a damaged tail)."""
    if error is None or end >= len(data) or any(d.tail for d in damage):
        return
    report.findings.append(Finding(path, "torn", what, f"{error}: a torn tail (what a crash leaves); "
                                   f"{len(data) - end} octets would be cut at start", None, end, len(data)))


def repair_definitions(data_dir, fsync: bool = True) -> tuple[str, int, int, list[str]] | None:
    """Keep every readable record of a damaged definitions log: (copy kept aside, records kept,
    octets dropped, store folders copied aside), or None if it is not damaged. The caller holds
    the data folder's lock.

    A queue or delayed exchange whose declare was in the damaged octets is gone from the log,
    and the broker's start removes store folders no definition owns (broker/durability.py): so
    each such folder is copied to the quarantine folder first, its messages kept for a person
    to look at."""
    data_dir = os.fspath(data_dir)
    path = os.path.join(data_dir, DEFINITIONS_FILE)
    if not os.path.exists(path):
        return None
    data = original = _read(path)
    header = damaged_header(path, data, KIND_DEFINITIONS, "definitions")
    if header is not None:
        data = file_header(KIND_DEFINITIONS) + data[FILE_HEADER_SIZE:]
    if not data or not check_file_header(data, KIND_DEFINITIONS):
        return None
    scan = Scan(data, FILE_HEADER_SIZE, _DEFINITION_TYPES)
    kept = sum(1 for _ in scan)
    if scan.error is None and header is None:
        return None
    stretches, count = find_definition_records(data, scan.end) if scan.error is not None else ([], 0)
    copy = quarantine_copy(path, original, os.path.join(data_dir, QUARANTINE), fsync, folder="")
    clean = bytearray(data[:scan.end])
    for a, b in stretches:
        clean += data[a:b]
    rewrite_file(path, clean, fsync)
    return copy, kept + count, len(data) - len(clean), _keep_unowned_stores(data_dir, fsync)


def _keep_unowned_stores(data_dir: str, fsync: bool) -> list[str]:
    """Copy the store folders the repaired definitions log no longer owns to the quarantine folder."""
    store = DefinitionsStore(os.path.join(data_dir, DEFINITIONS_FILE), fsync=fsync)
    try:
        defs = store.load()
    finally:
        store.close()
    owned = {"queues": {_digest(q.vhost, q.name) for q in defs.queues},
             "delayed": {_digest(e.vhost, e.name) for e in defs.exchanges}}
    owned["streams"] = owned["queues"]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    kept = []
    for root, mine in owned.items():
        top = os.path.join(data_dir, root)
        if not os.path.isdir(top):
            continue
        for digest in sorted(os.listdir(top)):
            folder = os.path.join(top, digest)
            if os.path.isdir(folder) and digest not in mine:
                target = os.path.join(data_dir, QUARANTINE, f"{root}-{digest}.{stamp}")
                shutil.copytree(folder, target)
                if fsync:
                    for name in os.listdir(target):
                        fd = os.open(os.path.join(target, name), os.O_RDONLY | os.O_CLOEXEC)
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                kept.append(target)
    return kept

