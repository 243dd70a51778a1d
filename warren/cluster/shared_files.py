"""The node files as one state for the whole cluster, kept in etcd (docs/clustering.md, "Shared
metadata").

``access.json`` (users, vhosts, permissions, topic permissions, vhost and user limits),
``policies.json`` and ``parameters.json`` (runtime and global parameters) are each kept whole
under ``/warren/<C>/files/<name>``. The stores that own them (warren/access/control.py,
warren/management/policy_store.py, warren/management/parameters.py) hardly change: they already
read-modify-write their file under ``node_file.locked`` and write it with
``node_file.replace_durably``, and they already take a change that another process wrote into
the file (``AccessControl.refresh``, ``Broker.tick``'s policy look, ``refresh_global``, every
half second), as ``--workers`` needs. (The server gives the parameter store ``parameters.json``
as its node-wide shared file, as ``--worker-mode queues`` does with its own, so that it is read
again under the lock and looked at; ``AccessControl._change`` announces what it read again
there, vhosts made or gone, as ``refresh`` would.) This module plugs into those two calls
(``node_file.share``):

* ``locked(path)`` also takes the file's **cluster-wide lock**, the key ``locks/<name>`` written
  only if absent with a lease of its own (``LOCK_TTL``), and in the same etcd transaction reads
  the file's key: if another node changed it since, its content goes into the local file first,
  so the store's read inside the lock sees the cluster's latest. The put below deletes the lock
  key in its own transaction; a change that writes nothing (refused by the store) revokes the
  lock's lease; a node that dies holding the lock holds it at most ``LOCK_TTL`` seconds.
* ``replace_durably(path, data)`` puts ``data`` in etcd first, in a transaction that succeeds
  only while the lock key is still the one this node created (a node that lost its lock, cut
  off past its TTL, cannot overwrite a later change), then writes the file. A change is thus
  answered only once etcd committed it; when etcd cannot (unreachable, no quorum, lock not
  obtained in time) the change raises ``SharedMetadataUnavailable`` (the HTTP API answers 503
  with RabbitMQ's JSON error), one warning is logged, and the file is left as it was.

Why a lock rather than a compare-and-swap on the key's mod_revision: the stores' changes are
written as "read under the lock, change, write" with the change's checks (user exists, vhost
exists, ...) in the middle; a CAS that fails would have to run the whole change again, which each
store would have to be rewritten for. The lock keeps that shape, cluster-wide, and the fenced put
keeps it safe when a lock outlives its holder.

The **watcher** (``start``: an asyncio task, as the member watch in node.py) reads ``files/``
whole, then follows it from the revision read; each change of another node is written into the
local file (``node_file.apply_shared``, on a thread: it fsyncs), and the existing looks apply it
to the running broker within a second (``attach``: at once after the write): vhosts made or torn
down, users, policies, parameters.
A node's own writes are not applied again: the revision each file holds is remembered
(``applied``), and an event at or below it is skipped.

At **start**, before the broker reads any of them (``take_or_seed``): each file the cluster has
replaces the node's own (a node joining, or back from a restart, takes the cluster's state);
one the cluster does not have yet is seeded from the node's file, written only if still absent
(of two first nodes, one seeds and the other takes it).

Calls to etcd from ``locked``/``replace_durably`` are synchronous (plain HTTP to the JSON
gateway, bounded by ``timeout`` per member): they run on the HTTP API's writer thread
(node_file.py ``on_loop``), at start before the loop serves, or, for the rare change made on the
loop (a definitions file loaded at start), on the loop, bounded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from aiohttp import web

from warren.cluster.etcd import NO_QUORUM_MARKS, EtcdError, EtcdNoQuorum, EtcdUnreachable, KeyValue
from warren.cluster.node import cancel_tasks
from warren.store import node_file

__all__ = ["SharedFiles", "SharedMetadataUnavailable", "FILES", "LOCK_TTL"]

log = logging.getLogger("warren.cluster")

# the shared node files and the mode each is written with (access.json holds password hashes)
FILES = {"access.json": 0o600, "policies.json": 0o644, "parameters.json": 0o644}
LOCK_TTL = 10  # seconds a file's lock outlives a node that died holding it
LOCK_WAIT = 15.0  # seconds a change waits for another node's lock before it is refused


class SharedMetadataUnavailable(web.HTTPServiceUnavailable):
    """A change of the cluster's metadata that etcd did not commit; the HTTP API answers it as
    it is (503, ``{"error": "service_unavailable", "reason": ...}``); ``str()`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(text=json.dumps({"error": "service_unavailable", "reason": reason}),
                         content_type="application/json")
        self.why = reason

    def __str__(self) -> str:
        return self.why


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


class _SyncEtcd:
    """The few calls the writer thread makes, blocking (urllib), each bounded by ``timeout`` per
    member; the same errors as the asyncio client (etcd.py)."""

    def __init__(self, endpoints, timeout: float) -> None:
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._preferred = 0

    def call(self, path: str, body: dict) -> dict:
        failures, no_quorum = [], False
        n = len(self.endpoints)
        for i in range(n):
            endpoint = self.endpoints[(self._preferred + i) % n]
            request = urllib.request.Request(f"{endpoint}/v3/{path}", json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    answer = json.loads(resp.read() or b"{}")
            except urllib.error.HTTPError as e:
                try:
                    answer = json.loads(e.read() or b"{}")
                except ValueError:
                    answer = {}
                message = str(answer.get("message") or answer.get("error") or f"HTTP {e.code}")
                if any(mark in message for mark in NO_QUORUM_MARKS):
                    failures.append(f"{endpoint}: {message}")
                    no_quorum = True
                    continue
                raise EtcdError(f"etcd at {endpoint} refused {path}: {message}") from None
            except (TimeoutError, OSError) as e:  # URLError is an OSError
                reason = getattr(e, "reason", None) or e
                if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                    failures.append(f"{endpoint}: no answer in {self.timeout:g} s")
                    no_quorum = no_quorum or self._reachable(endpoint)
                else:
                    failures.append(f"{endpoint}: {getattr(reason, 'strerror', None) or reason}")
                continue
            except ValueError:
                failures.append(f"{endpoint}: not etcd's JSON gateway")
                continue
            if "error" in answer:
                message = str(answer.get("message") or answer["error"])
                if any(mark in message for mark in NO_QUORUM_MARKS):
                    failures.append(f"{endpoint}: {message}")
                    no_quorum = True
                    continue
                raise EtcdError(f"etcd at {endpoint} refused {path}: {message}")
            self._preferred = self.endpoints.index(endpoint)
            return answer
        if no_quorum:
            raise EtcdNoQuorum("etcd has no quorum (" + "; ".join(failures) + ")")
        raise EtcdUnreachable("etcd is unreachable (" + "; ".join(failures) + ")")

    @staticmethod
    def _reachable(endpoint: str) -> bool:
        try:
            with urllib.request.urlopen(f"{endpoint}/version", timeout=1) as resp:
                return resp.status == 200
        except (OSError, ValueError):
            return False


class _File:
    """The hook of one shared file (node_file.share): its cluster-wide lock and its publishing."""

    def __init__(self, owner: "SharedFiles", name: str, path: Path, mode: int) -> None:
        self.owner = owner
        self.name = name
        self.path = path
        self.mode = mode
        self.key = f"{owner.prefix}files/{name}"
        self.lock_key = f"{owner.prefix}locks/{name}"
        self.applied = 0  # the etcd revision of the content the local file holds (0: none yet)
        self._holder: int | None = None  # the thread holding the cluster-wide lock
        self._depth = 0
        self._lease = 0
        self._lock_revision = 0  # the create revision of our lock key: the fence of a put

    # --- node_file's hook ---------------------------------------------------------------------

    def acquire(self) -> None:
        if self._holder == threading.get_ident():
            self._depth += 1
            return
        try:
            lease, revision, kv = self.owner.take_lock(self)
        except EtcdError as e:
            raise self.owner.refuse(self.name, str(e)) from None
        self._holder, self._depth, self._lease, self._lock_revision = threading.get_ident(), 1, lease, revision
        if kv is not None and kv.mod_revision > self.applied:
            try:
                self._take(kv)
            except BaseException:  # the file could not be written: no change, the lock freed
                self.release()
                raise

    def release(self) -> None:
        if self._holder != threading.get_ident():
            return
        self._depth -= 1
        if self._depth:
            return
        lease, self._holder, self._lease, self._lock_revision = self._lease, None, 0, 0
        if lease:  # 0: the fenced put released it already
            self.owner.drop_lock(lease)

    def publish(self, data: bytes) -> None:
        if self._holder != threading.get_ident():  # written without node_file.locked: lock it here
            self.acquire()
            try:
                self.publish(data)
            finally:
                self.release()
            return
        try:
            if not self._lease:  # a second write in one hold: the first put freed the lock, take it again
                self._lease, self._lock_revision, _ = self.owner.take_lock(self)
            self.applied = self.owner.put_fenced(self, data)
            self._lease = 0  # the put deleted the lock key; its lease ends by itself (LOCK_TTL)
        except EtcdError as e:
            raise self.owner.refuse(self.name, str(e)) from None

    # --- the cluster's content into the file ----------------------------------------------------

    def _take(self, kv: KeyValue) -> None:
        """Under the file's lock: the file holds ``kv``'s value from now on."""
        try:
            current = self.path.read_bytes()
        except FileNotFoundError:
            current = None
        if current != kv.value:
            node_file.replace_locally(self.path, kv.value, self.mode)
        self.applied = max(self.applied, kv.mod_revision)

    def apply(self, kv: KeyValue) -> bool:
        """Another node's change, from the watcher (on a thread): into the file unless it holds
        this revision or a later one already. True if the file was written."""
        if kv.mod_revision <= self.applied:
            return False
        written = node_file.apply_shared(self.path, kv.value, self.mode,
                                         still_new=lambda: kv.mod_revision > self.applied)
        self.applied = max(self.applied, kv.mod_revision)
        return written


class SharedFiles:
    """The shared node files of one clustered node: hooks, start-up sync and the watcher."""

    def __init__(self, node, data_dir: Path, *, timeout: float = 5.0) -> None:
        self.node = node  # warren/cluster/node.py ClusterNode: its async client, name, lease TTL
        self.prefix = node.prefix
        self.etcd = _SyncEtcd(node.client.endpoints, timeout)
        self.files = {name: _File(self, name, Path(data_dir) / name, mode) for name, mode in FILES.items()}
        self._task: asyncio.Task | None = None
        self._stopped = False
        self.applied_changes = 0  # other nodes' changes written into the files (logs, tests)
        self.runs = None  # which node runs each shovel (runs.py), once the server has its federation
        self._appliers: dict = {}  # file name -> what applies it to the running broker (attach)

    # --- start ----------------------------------------------------------------------------------

    def take_or_seed(self) -> None:
        """Before the broker reads the files: the cluster's state replaces the node's; a file
        the cluster does not have yet is seeded from the node's. Then the hooks are in place.
        EtcdError when etcd cannot be read (the node does not start then: it just joined)."""
        for f in self.files.values():
            kv = self._get(f.key)
            if kv is None and f.path.exists():
                answer = self.etcd.call("kv/txn", {
                    "compare": [{"key": _b64(f.key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                    "success": [{"request_put": {"key": _b64(f.key), "value": _b64(f.path.read_bytes())}}],
                    "failure": [{"request_range": {"key": _b64(f.key)}}]})
                if answer.get("succeeded"):
                    f.applied = int(answer["header"]["revision"])
                    log.info("cluster %s: %s seeded from this node's %s", self.node.cluster_name, f.key, f.path)
                    continue
                kvs = (answer.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
                kv = KeyValue.of(kvs[0]) if kvs else None
            if kv is not None:
                with node_file.locked(f.path):  # not shared yet: the flock alone
                    if f.path.exists() and f.path.read_bytes() != kv.value:  # changed alone, or another folder's
                        log.info("cluster %s: %s replaced by the cluster's (changed while this node was away, "
                                 "or this folder's own before it joined)", self.node.cluster_name, f.path)
                    f._take(kv)
        for f in self.files.values():
            node_file.share(f.path, f)

    def _get(self, key: str) -> KeyValue | None:
        kvs = self.etcd.call("kv/range", {"key": _b64(key)}).get("kvs") or []
        return KeyValue.of(kvs[0]) if kvs else None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watcher, on ``loop`` (it runs once the loop does)."""
        if self._task is None:
            self._task = loop.create_task(self._watch())

    def attach(self, broker, manager, parameters) -> None:
        """Once the server has them: another node's change written into a file is applied to
        the running broker at once (the half-second looks would apply it too, later), and one
        node of the cluster runs each shovel (runs.py)."""
        def policies():
            if broker.policy_file.changed():
                broker.reload_policies()
        self._appliers = {"access.json": broker.access.refresh, "policies.json": policies,
                          "parameters.json": parameters.refresh_global}
        from warren.cluster.runs import Runs
        self.runs = Runs(self.node, manager)
        self.runs.install(parameters)

    async def stop(self) -> None:
        self._stopped = True
        if self.runs is not None:
            await self.runs.stop()
        for f in self.files.values():
            node_file.unshare(f.path)
        await cancel_tasks(self._task)
        self._task = None

    # --- the lock and the fenced put (on the writer thread) ------------------------------------

    def take_lock(self, f: _File) -> tuple[int, int, KeyValue | None]:
        """The cluster-wide lock of ``f`` (waiting up to LOCK_WAIT for another node's): its
        lease, the lock key's create revision, and the file's key as etcd holds it."""
        lease = int(self.etcd.call("lease/grant", {"TTL": str(LOCK_TTL)})["ID"])
        holder = json.dumps({"node": self.node.node_name, "pid": os.getpid()})
        deadline = time.monotonic() + LOCK_WAIT
        pause = 0.01
        try:
            while True:
                answer = self.etcd.call("kv/txn", {
                    "compare": [{"key": _b64(f.lock_key), "target": "CREATE", "result": "EQUAL",
                                 "create_revision": "0"}],
                    "success": [{"request_put": {"key": _b64(f.lock_key), "value": _b64(holder), "lease": str(lease)}},
                                {"request_range": {"key": _b64(f.key)}}],
                    "failure": [{"request_range": {"key": _b64(f.lock_key)}}]})
                if answer.get("succeeded"):
                    kvs = (answer.get("responses") or [{}, {}])[1].get("response_range", {}).get("kvs") or []
                    return lease, int(answer["header"]["revision"]), KeyValue.of(kvs[0]) if kvs else None
                if time.monotonic() + pause > deadline:
                    kvs = (answer.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
                    by = kvs[0].get("value") if kvs else None
                    raise EtcdError(f"the cluster's lock of {f.name} was not free within {LOCK_WAIT:g} s "
                                    f"(held by {base64.b64decode(by).decode(errors='replace') if by else '?'})")
                time.sleep(pause)
                pause = min(0.1, pause * 2)
        except BaseException:
            self.drop_lock(lease)
            raise

    def drop_lock(self, lease: int) -> None:
        try:
            self.etcd.call("lease/revoke", {"ID": str(lease)})
        except EtcdError as e:  # the lock key goes with its lease, LOCK_TTL at most
            if "lease not found" not in str(e):
                log.warning("cluster %s: could not release a file lock at once (%s); it ends in %d s",
                            self.node.cluster_name, e, LOCK_TTL)

    def put_fenced(self, f: _File, data: bytes) -> int:
        """Put ``data`` as ``f``'s content if our lock key is still ours, and delete that key in
        the same transaction (the lock is free once the change is in etcd: one call fewer than a
        revoke after it; the lease, holding nothing, ends by itself); the revision written."""
        answer = self.etcd.call("kv/txn", {
            "compare": [{"key": _b64(f.lock_key), "target": "CREATE", "result": "EQUAL",
                         "create_revision": str(f._lock_revision)}],
            "success": [{"request_put": {"key": _b64(f.key), "value": _b64(data)}},
                        {"request_delete_range": {"key": _b64(f.lock_key)}}],
            "failure": []})
        if not answer.get("succeeded"):
            raise EtcdError(f"this node lost the cluster's lock of {f.name} before writing it (etcd was "
                            f"out of reach for more than {LOCK_TTL} s)")
        return int(answer["header"]["revision"])

    def refuse(self, name: str, why: str) -> SharedMetadataUnavailable:
        log.warning("cluster %s: a change of %s was refused: %s", self.node.cluster_name, name, why)
        return SharedMetadataUnavailable(f"the cluster's metadata cannot be changed now ({name}): {why}")

    # --- the watcher ------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """files/ read whole, then followed from the revision read; read whole again whenever
        the watch ends or fails (as node.py's member watch). Trouble is logged once."""
        client, prefix = self.node.client, f"{self.prefix}files/"
        loop = asyncio.get_running_loop()
        problem = None
        while not self._stopped:
            try:
                kvs, revision = await client.range_prefix(prefix)
                for kv in kvs:
                    await self._apply(loop, prefix, kv)
                if problem is not None:
                    log.info("cluster %s: following the shared metadata again", self.node.cluster_name)
                problem = None
                async for event in client.watch_prefix(prefix, start_revision=revision + 1):
                    if event.kind == "PUT":
                        await self._apply(loop, prefix, event.kv)
            except EtcdError as e:
                if problem is None:
                    log.warning("cluster %s: cannot follow the shared metadata (serving with what this node "
                                "has): %s", self.node.cluster_name, e)
                problem = str(e)
            except ValueError as e:  # not JSON: a stream cut mid-line
                problem = str(e)
            except OSError as e:  # a file could not be written: said (once), and tried again
                if problem != str(e):
                    log.error("cluster %s: cannot write the shared metadata: %s", self.node.cluster_name, e)
                problem = str(e)
            if self._stopped:
                break
            await asyncio.sleep(0.5 if problem is None else 1.0)

    async def _apply(self, loop, prefix: str, kv: KeyValue) -> None:
        f = self.files.get(kv.key.decode()[len(prefix):])
        if f is None or kv.mod_revision <= f.applied:
            return
        if await loop.run_in_executor(None, f.apply, kv):
            self.applied_changes += 1
            log.info("cluster %s: %s changed by another node (revision %d)", self.node.cluster_name, f.name,
                     kv.mod_revision)
            applier = self._appliers.get(f.name)
            if applier is not None:
                try:
                    applier()
                except Exception:  # the next look tries again; the watch goes on
                    log.exception("cluster %s: applying %s to the broker failed", self.node.cluster_name, f.name)
