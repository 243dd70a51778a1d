"""The topology log: durable exchanges, queues and bindings of every vhost.

One file, the format header then one T_DEFINITION record per change, each a JSON object::

    {"op": "exchange.declare", "vhost": "/", "name": "x", "type": "topic", "durable": true,
     "auto_delete": false, "internal": false, "arguments": ["m", {...}]}
    {"op": "exchange.delete" | "queue.delete", "vhost": ..., "name": ...}
    {"op": "queue.declare", "vhost": ..., "name": ..., "durable": ..., "auto_delete": ..., "arguments": ...}
    {"op": "bind" | "unbind", "vhost": ..., "source": ..., "destination": ..., "destination_kind":
     "queue" | "exchange", "routing_key": ..., "arguments": ...}

Every change is written and fsynced before the method returns, so the broker can send
declare-ok / bind-ok afterwards; or, while ``defer_fsync`` is set, applied at once and written
and fsynced later by ``sync`` on another thread (the broker's group commit), the caller holding
its answer until then (see "Deferred fsyncs" below). A change that changes nothing (redeclaring an identical
queue, deleting a missing one) writes nothing: clients redeclare their topology on every
connect, and those calls cost no fsync. Deletes cascade as in the broker: deleting a queue
removes the bindings to it, deleting an exchange the bindings from and to it. Anything else
the broker derives (an auto-delete exchange losing its last binding) is recorded by the caller
as an explicit delete.

Replaying the log gives the current definitions. After ``compact_after`` records have become
dead (deleted, unbound or redeclared), the live definitions are rewritten to ``<path>.compact``,
fsynced, and renamed over the log (then the directory is fsynced).

What a crash leaves behind: a torn last record (a change whose call never returned: dropped and
truncated on open), or a ``<path>.compact`` left by an interrupted compaction (deleted on open:
until the rename, the old log is complete; after it, the new one is). Anything else is damage
(a bad record with good ones after it, or a whole last record failing its CRC: damage.py), and
opening refuses it with ``DamagedFile``: dropping one record of this log can bring back a
deleted queue or lose a declared one, so nothing is cut or guessed; the message names the file
and the way out (``warren store check``, and its ``--repair``, which keeps every readable record
after copying the file to the quarantine folder).

Deferred fsyncs. An fsync of this file on the event loop's thread held every connection for as
long as the disk took (seconds, when it stalls); so did a write of it, which may wait in the
kernel behind a stalled fsync of the same file (the kernel's FUSE holds the file's inode lock
through an fsync; a device that needs stable pages, a full journal). With ``defer_fsync`` set
(the broker sets it while it handles a client's methods, warren/server/connection.py), ``_log``
does no I/O: it applies the change, appends its record to ``_unwritten``, counts it in
``changes``, and calls ``on_change`` (the broker asks for a group commit, warren/broker/
durability.py); ``sync`` then, on a pool thread, takes the records not written yet (under the
lock, with a duplicate of the descriptor), writes them in one call and fsyncs, without the lock
(``durable`` counts what it covered), and compacts when due without holding the lock through any
fsync. One ``sync`` at a time (``_sync_lock``), each taking the records in the order of the
changes, so the file holds them in that order; a call without ``defer_fsync`` takes the sync
lock first and writes the records not written yet before its own. ``answers_held`` counts the
calls whose caller must wait for that fsync before answering: each deferred change, and each
call that changed nothing while earlier changes were not durable yet (a redeclare must not be
answered before the declare it repeats is safe). Changes apply in the order they are made, and
``durable`` only grows: an answer sent once ``durable`` covers its change is never taken back
by a crash; a crash before the sync loses records whose changes were applied but never answered
(the memory that held them goes with the process). A compaction or a rewrite writes every live
definition, those not written yet too, which are then dropped from ``_unwritten``. While a sync
stalls, ``_unwritten`` grows by one record per held caller at most (a connection reads nothing
more until its change is durable), plus the broker's own deletes.
Deletes of queues and exchanges are deferred too: the broker logs them with a ``token`` and
only renames the store folder aside until the delete is durable (warren/store/aside.py); the
records with tokens outlive compactions (written first, ahead of the live definitions) until
``forget_deletes``, so the start can tell by them whether a folder's delete survived.
Without ``defer_fsync`` (start-up, the broker's own changes on its tick) a change is fsynced before
the call returns, as before, and so is everything deferred before it. The HTTP API defers as a
client's connection does (warren/broker/directory.py ``durable_change``).

A failed fsync, or write. An fsync is never retried on the same file: after an EIO the kernel
may have dropped the dirty pages and report success next time (PostgreSQL's "fsyncgate", 2018).
The store holds every live definition in memory, so it writes them again, whole, to
``<path>.compact`` (with the record being logged, in the synchronous path), fsyncs that, renames
it over the log and fsyncs the folder, as a compaction does (``_rewrite``), the lock held
throughout (a failing disk only: a change made meanwhile waits for it). A failed write of
deferred records (``sync``'s, or a synchronous call writing them before its own) is handled the
same way, since their changes are applied already: the file may end in part of a record, and
the new one holds them whole. If that is durable, nothing was lost: the changes the failed call
covered are in the new file, their answers go, and the store carries on (``rewrites`` counts
it; the log says so at ERROR). If it fails too, the store fails for good (``_failed``, one
CRITICAL line): ``sync`` raises, which fails its group commit, and the broker stops, since what
was applied meanwhile may have been relied on (messages confirmed into a queue whose declare
the failed fsync lost); in the synchronous path the change is refused and so is every later
one. A synchronous call's own failed write is taken back (the file truncated to its length
before it) and refuses that change alone, as before.

Argument tables are stored as tagged JSON, losslessly: str, int and bool as JSON, None as null,
and ``["f", repr]`` float (NaN and infinities too), ``["b", base64]`` bytes, ``["D", str]``
Decimal, ``["T", isoformat]`` datetime, ``["l", [...]]`` list, ``["m", {...}]`` dict. A JSON
array is always a tag, so the encoding is unambiguous. Tuples come back as lists, bytearrays as
bytes, and a datetime's tzinfo as a fixed UTC offset (the instant and the offset are kept).
"""

from __future__ import annotations

import base64
import copy
import datetime
import decimal
import json
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from warren.store.damage import DamagedFile, damaged_header, is_torn_tail
from warren.store.record import (
    HEADER, HEADER_SIZE, KIND_DEFINITIONS, T_DEFINITION, FormatError, Scan, check_file_header, encode_record,
    file_header, find_seq_record,
)
from warren.store.fileio import fsync_ancestors
from warren.store.segment import fsync_dir

__all__ = ["DefinitionsStore", "Definitions", "ExchangeDef", "QueueDef", "BindingDef", "to_tagged", "from_tagged",
           "find_definition_records"]

log = logging.getLogger("warren.store")
DEFAULT_COMPACT_AFTER = 1000
_TYPES = frozenset((T_DEFINITION,))


# --- tagged JSON ---------------------------------------------------------------------------------

def to_tagged(v):
    """A JSON-ready form of a field-table value that ``from_tagged`` turns back into the same value."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return ["f", repr(v)]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ["b", base64.b64encode(v).decode("ascii")]
    if isinstance(v, decimal.Decimal):
        return ["D", str(v)]
    if isinstance(v, datetime.datetime):
        return ["T", v.isoformat()]
    if isinstance(v, (list, tuple)):
        return ["l", [to_tagged(x) for x in v]]
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise TypeError(f"table keys must be str, not {type(k).__name__}")
        return ["m", {k: to_tagged(x) for k, x in v.items()}]
    raise TypeError(f"cannot store a {type(v).__name__} in a definition")


def from_tagged(v):
    if not isinstance(v, list):
        return v
    tag, x = v
    if tag == "f":
        return float(x)
    if tag == "b":
        return base64.b64decode(x)
    if tag == "D":
        return decimal.Decimal(x)
    if tag == "T":
        return datetime.datetime.fromisoformat(x)
    if tag == "l":
        return [from_tagged(i) for i in x]
    if tag == "m":
        return {k: from_tagged(i) for k, i in x.items()}
    raise FormatError(f"unknown tag {tag!r} in a definition")


def _freeze(v):
    """A hashable key with the broker's notion of equal arguments (warren/broker/exchanges/base.py)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v


# --- definitions -----------------------------------------------------------------------------------

@dataclass
class ExchangeDef:
    vhost: str
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict = field(default_factory=dict)


@dataclass
class QueueDef:
    vhost: str
    name: str
    durable: bool = True
    auto_delete: bool = False
    arguments: dict = field(default_factory=dict)


@dataclass
class BindingDef:
    vhost: str
    source: str
    destination: str
    routing_key: str
    arguments: dict = field(default_factory=dict)
    destination_kind: str = "queue"  # or "exchange" (exchange-to-exchange binding)

    @property
    def key(self) -> tuple:
        return (self.vhost, self.source, self.destination_kind, self.destination, self.routing_key,
                _freeze(self.arguments))


@dataclass
class Definitions:
    exchanges: list[ExchangeDef]
    queues: list[QueueDef]
    bindings: list[BindingDef]


def _record(d) -> dict:
    """The log record that declares ``d``."""
    if isinstance(d, ExchangeDef):
        return {"op": "exchange.declare", "vhost": d.vhost, "name": d.name, "type": d.type, "durable": d.durable,
                "auto_delete": d.auto_delete, "internal": d.internal, "arguments": to_tagged(d.arguments)}
    if isinstance(d, QueueDef):
        return {"op": "queue.declare", "vhost": d.vhost, "name": d.name, "durable": d.durable,
                "auto_delete": d.auto_delete, "arguments": to_tagged(d.arguments)}
    return {"op": "bind", "vhost": d.vhost, "source": d.source, "destination": d.destination,
            "destination_kind": d.destination_kind, "routing_key": d.routing_key,
            "arguments": to_tagged(d.arguments)}


def _definition(rec: dict):
    """The definition a declare/bind record describes (the inverse of ``_record``)."""
    op = rec["op"]
    args = from_tagged(rec.get("arguments")) or {}
    if op == "exchange.declare":
        return ExchangeDef(rec["vhost"], rec["name"], rec["type"], rec["durable"], rec["auto_delete"],
                           rec["internal"], args)
    if op == "queue.declare":
        return QueueDef(rec["vhost"], rec["name"], rec["durable"], rec["auto_delete"], args)
    return BindingDef(rec["vhost"], rec["source"], rec["destination"], rec["routing_key"], args,
                      rec["destination_kind"])


def _delete_record(op: str, vhost: str, name: str, token: str | None) -> dict:
    rec = {"op": op, "vhost": vhost, "name": name}
    if token:
        rec["token"] = token
    return rec


def _content(kept_deletes: list, live: list) -> bytes:
    """A whole log: the kept deletes first (replayed, they find nothing to delete: a name
    declared again comes after them), then the live definitions."""
    return (file_header(KIND_DEFINITIONS) + b"".join(_encode(r) for r in kept_deletes)
            + b"".join(_encode(_record(d)) for d in live))


def _encode(rec: dict) -> bytes:
    # ensure_ascii: names decoded with surrogateescape (any wire octets) survive as \\udcXX escapes
    return encode_record(T_DEFINITION, json.dumps(rec, separators=(",", ":"), allow_nan=False).encode("ascii"))




class DefinitionsStore:
    # the broker's group commit takes this store beside the message stores (durability.py): it
    # has no ack logs to sync lazily
    ack_sync_interval = 0.0

    def __init__(self, path, compact_after: int = DEFAULT_COMPACT_AFTER, fsync: bool = True) -> None:
        self.path = os.fspath(path)
        self.compact_after = compact_after
        self.fsync = fsync
        # deferred fsyncs (module doc): set by the caller around the calls whose answers can wait
        self.defer_fsync = False
        self.on_change = None  # called after each deferred change: the owner schedules ``sync``
        self.changes = 0  # records written since the store opened
        self.durable = 0  # how many of them an fsync covered
        self.answers_held = 0  # calls answered with their fsync deferred (module doc)
        self.rewrites = 0  # rewrites after a failed fsync that made everything durable again (module doc)
        self._sync_lock = threading.Lock()  # one ``sync`` at a time
        self._lock = threading.Lock()
        self._exchanges: dict[tuple, ExchangeDef] = {}
        self._queues: dict[tuple, QueueDef] = {}
        self._bindings: dict[tuple, BindingDef] = {}
        self._dead = 0  # records in the file that no longer describe anything
        # deletes logged with a token (their store folder put aside, warren/store/aside.py):
        # token -> record. A compaction keeps them, ahead of the live definitions, until
        # ``forget_deletes``: the start tells by them whether a folder's delete was durable
        self._kept_deletes: dict[str, dict] = {}
        # the records of deferred changes, applied but not written yet: ``sync`` writes them,
        # in this order, right before its fsync (module doc, "Deferred fsyncs")
        self._unwritten: list[bytes] = []
        self._fd: int | None = None
        self._failed: BaseException | None = None
        self._open()

    # --- opening and replay -------------------------------------------------------------------

    def _open(self) -> None:
        tmp = self.path + ".compact"
        if os.path.exists(tmp):
            os.unlink(tmp)  # an interrupted compaction: the log itself is complete
        data = b""
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                data = f.read()
        if data and self._whole_header(data):
            scan = Scan(data, types=_TYPES)
            records = list(scan)
            if scan.error is not None:
                self._refuse_damage(data, scan)
            for _, start, n in records:
                self._apply(json.loads(data[start:start + n]))
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            if scan.end < len(data):
                log.warning("%s: %s; truncating %d octets", self.path, scan.error, len(data) - scan.end)
                os.ftruncate(self._fd, scan.end)
                self._fsync(self._fd)  # durable before any append (segment.py, ``truncate_to``)
            if self._dead >= self.compact_after:
                self._compact()
        else:  # new, or created but its header never made it to the disk
            self._fd = self._create(self.path, file_header(KIND_DEFINITIONS))
            self._fsync_dir()
            if self.fsync:  # a new data folder: its name, made by mkdir -p, must outlive a power cut too
                fsync_ancestors(self.path)

    def _whole_header(self, data) -> bool:
        """``check_file_header``, with a damaged header refused as DamagedFile (one line)."""
        data_dir = os.path.dirname(os.path.abspath(self.path))
        if damaged_header(self.path, data, KIND_DEFINITIONS, "definitions") is not None:
            raise DamagedFile(f"{self.path}: its file header is damaged (a flipped bit), so Warren does not start. "
                              f"`warren store check --repair {data_dir}` mends it (the file is copied to "
                              f"{os.path.join(data_dir, 'quarantine')} first), or restore the file from a backup")
        try:
            return check_file_header(data, KIND_DEFINITIONS)
        except FormatError as e:
            raise DamagedFile(f"{self.path}: {e}, so Warren does not start: restore the file from a backup "
                              f"(`warren store check {data_dir}` lists every damaged file)") from None

    def _refuse_damage(self, data, scan: Scan) -> None:
        """Raise DamagedFile unless the scan stopped at a torn tail (a change that never returned)."""
        bad = scan.end
        after, count = find_definition_records(data, bad)
        if not after and is_torn_tail(data, bad, HEADER_SIZE, lambda b, o: HEADER.unpack_from(b, o)[1]):
            return
        data_dir = os.path.dirname(os.path.abspath(self.path))
        raise DamagedFile(
            f"{self.path} is damaged at octet {bad} ({scan.error.split(' at ')[0]}; {count} readable records "
            f"after it): durable exchanges, queues and bindings would be lost, so Warren does not start. "
            f"Restore the file from a backup, or run `warren store check --repair {data_dir}` to keep every "
            f"readable record (the file is copied to {os.path.join(data_dir, 'quarantine')} first); "
            f"`warren store check {data_dir}` lists the damage")

    def _create(self, path: str, content: bytes) -> int:
        """Write a whole new file and fsync it; returns an append descriptor on it."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            mv = memoryview(content)
            while mv:
                mv = mv[os.write(fd, mv):]
            self._fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _fsync(self, fd: int) -> None:
        if self.fsync:
            os.fsync(fd)

    def _fsync_dir(self) -> None:
        if self.fsync:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))

    def _apply(self, rec: dict) -> None:
        op = rec["op"]
        if op in ("exchange.declare", "queue.declare", "bind"):
            d = _definition(rec)
            table = self._exchanges if op == "exchange.declare" else self._queues if op == "queue.declare" \
                else self._bindings
            key = d.key if op == "bind" else (d.vhost, d.name)
            if key in table:
                self._dead += 1  # the earlier record is superseded
            table[key] = d
        elif op == "unbind":
            if self._bindings.pop(_definition({**rec, "op": "bind"}).key, None) is not None:
                self._dead += 2
        elif op in ("exchange.delete", "queue.delete"):
            vhost, name = rec["vhost"], rec["name"]
            if rec.get("token"):
                self._kept_deletes[rec["token"]] = rec
            table = self._exchanges if op == "exchange.delete" else self._queues
            if table.pop((vhost, name), None) is not None:
                self._dead += 1 if rec.get("token") else 2  # a kept delete counts once forgotten
            kind = "exchange" if op == "exchange.delete" else "queue"
            for key, b in list(self._bindings.items()):
                if b.vhost == vhost and ((b.destination_kind == kind and b.destination == name)
                                         or (kind == "exchange" and b.source == name)):
                    del self._bindings[key]
                    self._dead += 1
        else:
            raise FormatError(f"{self.path}: unknown definition op {op!r}")

    def _is_noop(self, rec: dict) -> bool:
        op = rec["op"]
        if op in ("exchange.declare", "queue.declare", "bind"):
            d = _definition(rec)
            if op == "bind":
                return d.key in self._bindings
            table = self._exchanges if op == "exchange.declare" else self._queues
            return table.get((d.vhost, d.name)) == d
        if op == "unbind":
            return _definition({**rec, "op": "bind"}).key not in self._bindings
        vhost, name = rec["vhost"], rec["name"]
        if op == "queue.delete":
            return (vhost, name) not in self._queues and not any(
                b.vhost == vhost and b.destination_kind == "queue" and b.destination == name
                for b in self._bindings.values())
        return (vhost, name) not in self._exchanges and not any(
            b.vhost == vhost and (b.source == name or (b.destination_kind == "exchange" and b.destination == name))
            for b in self._bindings.values())

    # --- changes -------------------------------------------------------------------------------

    def _log(self, rec: dict) -> bool:
        """Write, fsync, then apply one change; False (and no I/O) if it changes nothing.
        With ``defer_fsync``: apply it and keep its record for ``sync`` to write and fsync, no
        I/O here (module doc, "Deferred fsyncs")."""
        data = _encode(rec)  # before the lock and before any I/O: a bad argument raises here
        if self.defer_fsync and self.fsync:
            with self._lock:
                self._check_open()
                if self._is_noop(rec):
                    if self.durable < self.changes:  # what it repeats is not durable yet
                        self.answers_held += 1
                    return False
                # a delete too: its store folder is only put aside, until the delete is durable (aside.py)
                self._unwritten.append(data)
                self.changes += 1
                self._apply(rec)  # in the order of the changes; durable once ``sync`` says so
                self.answers_held += 1
                if self.on_change is not None:
                    self.on_change()
                return True
        # the sync lock first, as ``sync`` takes them: the records a sync under way took are
        # written before this one
        with self._sync_lock, self._lock:
            self._check_open()
            if self._is_noop(rec):
                if self.durable < self.changes:  # what it repeats is not durable yet
                    self._fsync_now()
                return False
            self._write_unwritten()  # deferred changes before it: the log keeps their order
            good = os.fstat(self._fd).st_size
            try:
                if os.write(self._fd, data) != len(data):
                    raise OSError(f"short write to {self.path}")
            except BaseException as e:
                try:  # take a partial record back, so the next one is not appended after junk
                    os.ftruncate(self._fd, good)
                except OSError:
                    self._failed = e
                raise
            self.changes += 1
            try:
                self._fsync_now(pending=data)
            except BaseException:
                self.changes -= 1  # not applied: the next start may or may not find it (never acknowledged)
                raise
            self._apply(rec)
            if self._dead >= self.compact_after:
                try:
                    self._compact()
                except OSError as e:  # the change itself is durable; compaction is retried next time
                    log.warning("%s: compaction failed: %r", self.path, e)
            return True

    def _check_open(self) -> None:
        if self._failed is not None:
            raise OSError(f"definitions store {self.path} failed earlier: {self._failed!r}")
        if self._fd is None:
            raise ValueError("definitions store is closed")

    def declare_exchange(self, vhost: str, name: str, type: str, durable: bool = True, auto_delete: bool = False,
                         internal: bool = False, arguments: dict | None = None) -> bool:
        return self._log(_record(ExchangeDef(vhost, name, type, durable, auto_delete, internal, arguments or {})))

    def delete_exchange(self, vhost: str, name: str, token: str | None = None) -> bool:
        """``token``: the name its store folder is put aside under (aside.py), kept with the record."""
        return self._log(_delete_record("exchange.delete", vhost, name, token))

    def declare_queue(self, vhost: str, name: str, durable: bool = True, auto_delete: bool = False,
                      arguments: dict | None = None) -> bool:
        return self._log(_record(QueueDef(vhost, name, durable, auto_delete, arguments or {})))

    def delete_queue(self, vhost: str, name: str, token: str | None = None) -> bool:
        """``token``: as for ``delete_exchange``."""
        return self._log(_delete_record("queue.delete", vhost, name, token))

    @property
    def delete_tokens(self) -> frozenset:
        """The tokens of the deletes the log holds (read at open, or logged since) and not yet
        forgotten: a folder put aside under one of them was deleted durably (aside.py)."""
        with self._lock:
            return frozenset(self._kept_deletes)

    def forget_deletes(self, tokens) -> None:
        """The folders put aside under ``tokens`` are gone for good: the next compaction drops
        their delete records."""
        with self._lock:
            for t in tokens:
                if self._kept_deletes.pop(t, None) is not None:
                    self._dead += 1

    @contextmanager
    def deferred(self):
        """``defer_fsync`` set for the changes made inside (the broker's own, such as a vhost's
        deletion: whoever must answer waits for ``durable``), as it was after."""
        before, self.defer_fsync = self.defer_fsync, True
        try:
            yield self
        finally:
            self.defer_fsync = before

    def bind(self, vhost: str, source: str, destination: str, routing_key: str, arguments: dict | None = None,
             destination_kind: str = "queue") -> bool:
        return self._log(_record(BindingDef(vhost, source, destination, routing_key, arguments or {},
                                            _kind(destination_kind))))

    def unbind(self, vhost: str, source: str, destination: str, routing_key: str, arguments: dict | None = None,
               destination_kind: str = "queue") -> bool:
        rec = _record(BindingDef(vhost, source, destination, routing_key, arguments or {}, _kind(destination_kind)))
        rec["op"] = "unbind"
        return self._log(rec)

    def _fsync_now(self, pending: bytes = b"") -> None:
        """On the calling thread, both locks held: the deferred records not written yet are
        written, then the file fsynced: every change so far is durable. A failed fsync is never
        retried: the log is rewritten from memory, plus ``pending`` (the record being logged,
        not applied yet), into a new file (``_rewrite``)."""
        self._write_unwritten()
        try:
            self._fsync(self._fd)
        except BaseException as e:
            if not self._rewrite(e, pending):
                log.critical("definitions store %s: fsync failed (%r), and rewriting the log too; every later "
                             "durable declare, delete or bind is refused until a restart (what the failed fsync "
                             "covered may be lost)", self.path, e)
                raise
        self.durable = self.changes

    def _write_unwritten(self) -> None:
        """Both locks held: append the records of deferred changes that no ``sync`` took yet.
        A failed write is handled as a failed fsync (they are applied already): the log is
        rewritten from memory, or the store fails for good and this raises."""
        if not self._unwritten:
            return
        data = b"".join(self._unwritten)
        self._unwritten.clear()
        try:
            _write_all(self._fd, data)
        except BaseException as e:
            if not self._rewrite(e, what="write"):
                log.critical("definitions store %s: a write failed (%r), and rewriting the log too; every later "
                             "durable declare, delete or bind is refused until a restart", self.path, e)
                raise

    def _rewrite(self, error: BaseException, pending: bytes = b"", what: str = "fsync") -> bool:
        """After a failed fsync (or write of deferred records), the lock held (module doc, "A
        failed fsync"): the live definitions (and ``pending``) written to ``<path>.compact``,
        fsynced, renamed over the log, the folder fsynced. True once that is durable, the
        deferred records not written yet being in it too; else the store fails for good
        (``_failed``) and False: the caller says so (CRITICAL)."""
        log.error("definitions store %s: %s failed (%r); not retried: rewriting the log from memory into a "
                  "new file", self.path, what, error)
        try:
            self._replace_with(self._live_content() + pending)
        except BaseException as e:
            self._failed = error
            log.error("definitions store %s: rewriting the log failed too (%r)", self.path, e)
            return False
        self._unwritten.clear()  # applied, so in the live definitions just written
        self.rewrites += 1
        log.error("definitions store %s: rewritten after a failed %s; nothing was lost", self.path, what)
        return True

    def _live_content(self) -> bytes:
        return _content(*self._live_parts())

    def _live_parts(self) -> tuple[list, list]:
        """What a compaction writes (copies, taken under the lock): the kept deletes, then
        every live definition (``_content``)."""
        return (list(self._kept_deletes.values()),
                [*self._exchanges.values(), *self._queues.values(), *self._bindings.values()])

    def _replace_with(self, content: bytes) -> None:
        """Write ``content`` to a new file, fsync it, rename it over the log and fsync the
        folder; later records go to the new file. Raises if any step failed."""
        tmp = self.path + ".compact"
        fd = self._create(tmp, content)
        try:
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            raise
        if self._fd is not None:
            os.close(self._fd)
        self._fd = fd
        self._dead = 0
        self._fsync_dir()

    def sync(self) -> int:
        """Write the records of the deferred changes made before the call, then fsync them, off
        the event loop (module doc): the lock is held only to take those records and a duplicate
        of the descriptor, never through a write or an fsync. Compacts when due. Returns
        ``durable``; a failed write or fsync the log's rewrite does not make good fails the
        store for good and raises."""
        with self._sync_lock:
            with self._lock:
                if self._failed is not None:
                    raise OSError(f"definitions store {self.path} failed earlier: {self._failed!r}")
                upto = self.changes
                fd, data = None, b""
                if self._fd is not None and self.durable < upto and self.fsync:
                    fd = os.dup(self._fd)
                    data = b"".join(self._unwritten)  # every change up to ``upto`` not written yet
                    self._unwritten.clear()
            if fd is not None:
                what = "write"
                try:
                    _write_all(fd, data)
                    what = "fsync"
                    os.fsync(fd)
                except BaseException as e:
                    # never retried (fsyncgate): what the pages held is rewritten from memory
                    with self._lock:  # held through the rewrite's fsyncs: a rare path, and short
                        if self._failed is None and self._fd is not None and self._rewrite(e, what=what):
                            upto = self.changes
                        else:
                            self._failed = self._failed or e
                            raise OSError(getattr(e, "errno", None) or 5,
                                          f"definitions log {self.path}: {what} failed ({e!r}), and rewriting it "
                                          "too; what it covered may be lost") from e
                finally:
                    os.close(fd)
            with self._lock:
                self.durable = max(self.durable, upto)
            if self._dead >= self.compact_after:
                self._compact_unlocked()
            return self.durable

    def _compact_unlocked(self) -> None:
        """``_compact`` for ``sync`` (its sync lock held): the new file is written and fsynced
        without the lock, and renamed under it only if nothing changed meanwhile (else the next
        sync tries again). The records of deferred changes not written yet are in it, so they
        are durable once its folder is fsynced."""
        with self._lock:
            if self._fd is None or self._failed is not None or self._dead < self.compact_after:
                return
            mark = self.changes
            parts = self._live_parts()
        tmp = self.path + ".compact"
        content = _content(*parts)
        try:
            fd = self._create(tmp, content)
        except OSError as e:
            log.warning("%s: compaction failed: %r", self.path, e)
            return
        with self._lock:
            if self.changes != mark or self._fd is None:
                os.close(fd)
                os.unlink(tmp)
                return
            os.replace(tmp, self.path)
            os.close(self._fd)
            self._fd = fd
            self._dead = 0
            self._unwritten.clear()  # made before ``mark``: in the new file
        try:
            self._fsync_dir()  # before this sync returns: no later change counts as durable before it
        except BaseException as e:
            with self._lock:
                self._failed = e
            raise OSError(getattr(e, "errno", None) or 5, f"definitions log {self.path}: fsync of its folder "
                          f"after compaction failed ({e!r})") from e
        with self._lock:
            self.durable = max(self.durable, mark)

    def load(self) -> Definitions:
        """The current definitions, each list in the order of declaration (copies)."""
        with self._lock:
            return Definitions(copy.deepcopy(list(self._exchanges.values())),
                               copy.deepcopy(list(self._queues.values())),
                               copy.deepcopy(list(self._bindings.values())))

    # --- compaction and closing -----------------------------------------------------------------

    @property
    def dead_records(self) -> int:
        return self._dead

    def compact(self) -> None:
        with self._sync_lock, self._lock:
            self._compact()

    def _compact(self) -> None:
        """Both locks held (or at open): the live definitions, the deferred changes not written
        yet with them, into a new file renamed over the log."""
        tmp = self.path + ".compact"
        fd = self._create(tmp, self._live_content())  # fsynced before the rename: the rename must not expose a hole
        try:
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)  # the old log is still the one named: carry on with it
            raise
        # from here the name is the new file's: later changes must go there, not to the old one,
        # which the rename unlinked (they were acknowledged, then gone at the next start)
        os.close(self._fd)
        self._fd = fd
        self._dead = 0
        self._unwritten.clear()  # applied, so in the new file
        try:
            self._fsync_dir()
        except BaseException as e:
            # whether the rename outlives a power cut is unknown, and a retried fsync would not say
            self._failed = e
            log.critical("definitions store %s: fsync of its folder after compaction failed (%r); every "
                         "later durable declare, delete or bind is refused until a restart", self.path, e)
            raise
        self.durable = self.changes

    def close(self) -> None:
        """Write and fsync what a deferred change left (unless the store failed), then close."""
        with self._sync_lock, self._lock:
            if self._fd is not None:
                try:
                    if self.durable < self.changes and self._failed is None:
                        self._fsync_now()
                finally:
                    os.close(self._fd)
                    self._fd = None

    def __enter__(self) -> "DefinitionsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` appended to ``fd``; a write that takes nothing raises."""
    mv = memoryview(data)
    while mv:
        n = os.write(fd, mv)
        if n <= 0:
            raise OSError(5, "short write to the definitions log")
        mv = mv[n:]


def find_definition_records(data, bad: int) -> tuple[list[tuple[int, int]], int]:
    """The readable records after the bad one at ``bad``, reading around any further damage:
    ((start, end) of each stretch of whole records, how many records), what ``warren store
    check --repair`` keeps."""
    out = []
    count = 0
    off = bad
    while True:
        nxt = find_seq_record(data, off, _TYPES)
        if nxt is None:
            return out, count
        scan = Scan(data, nxt, _TYPES)
        count += sum(1 for _ in scan)
        out.append((nxt, scan.end))
        if scan.error is None:
            return out, count
        off = scan.end


def _kind(kind: str) -> str:
    if kind not in ("queue", "exchange"):
        raise ValueError(f"destination_kind must be 'queue' or 'exchange', not {kind!r}")
    return kind
