"""Starting a clustered node: create or join the cluster in etcd, hold a membership lease.

Keys, under ``/warren/<cluster name>/`` (docs/clustering.md):

``id``            the cluster's identity, written once by the node that creates the cluster
                  (JSON: ``id``, a random UUID; ``created``; ``by``, the creating node's name)
``secret``        the cluster secret, when the creating node made it (no --cluster-secret-file)
``secret-check``  sha256 of ``<id>:<secret>``: a joining node's secret must give the same digest
``nodes/<NAME>``  one per running node, held by that node's lease (JSON: name, pid, listeners,
                  and ``status``: the node's figures as its ``/api/nodes`` row shows them,
                  written again every ``STATUS_INTERVAL`` seconds)
``members/<NAME>`` one per node that ever joined, without a lease: the cluster's disc nodes,
                  running or not, until ``forget`` (``warren ctl forget_cluster_node``) removes it

The creating node writes ``id``, ``secret`` and ``secret-check`` in one transaction that
succeeds only if ``id`` does not exist yet: of two first nodes starting at once, one creates
and the other joins. A node's ``nodes/<NAME>`` is written the same way (only if absent, with
its lease), so a second node of the same name is refused while the first one's lease lives,
and a node that dies (kill -9) leaves the list when its lease ends (``cluster_lease_ttl``).

The data folder records the cluster it belongs to (``cluster.json``: cluster name, id, node
name), written once the join succeeded; a folder of another cluster (another id) or of another
node name is refused. A data folder without the file (a single node's, or a new one) joins.

The cluster secret is checked at join and then proves each inter-node link (links.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import stat
import time
import uuid
from pathlib import Path

from warren.cluster.etcd import EtcdClient, EtcdError

__all__ = ["ClusterError", "ClusterNode", "CLUSTER_FILE", "STATUS_INTERVAL", "join", "cluster_prefix", "cancel_tasks"]

log = logging.getLogger("warren.cluster")

CLUSTER_FILE = "cluster.json"  # in the data folder: which cluster and node it belongs to
STATUS_INTERVAL = 5.0  # seconds between writes of this node's figures (RabbitMQ samples every 5 s)
COUNTS_DELAY = 0.05  # seconds a change of counts waits for others to join its write
# the part of the lease's TTL this node does not count on (``lease_valid``): etcd counts the TTL
# from when a renewal reaches it, this node from before it sent it, and the margin covers clocks
# that run at slightly different rates (a lease ends by etcd's clock, is trusted by this node's)
LEASE_MARGIN = 0.2


class ClusterError(Exception):
    """The node cannot join its cluster; ``str()`` is one line for the operator."""


async def cancel_tasks(*tasks) -> None:
    """Cancel the cluster's background tasks (None ones skipped) and wait until they ended."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


def cluster_prefix(cluster_name: str) -> str:
    return f"/warren/{cluster_name}/"


def _digest(cluster_id: str, secret: str) -> str:
    return hashlib.sha256(f"{cluster_id}:{secret}".encode()).hexdigest()


def read_secret_file(path: Path) -> str:
    """The secret in ``path``; ClusterError if it cannot be read, is empty, or is readable or
    writable by anyone but its owner (it must be 0600 or stricter, as an Erlang cookie)."""
    try:
        mode = os.stat(path).st_mode
        text = path.read_text().strip()
    except OSError as e:
        raise ClusterError(f"cannot read cluster secret file {path}: {e.strerror or e}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterError(f"cluster secret file {path} is open to others (mode {stat.S_IMODE(mode):04o}): "
                           f"chmod 600 {path}")
    if not text:
        raise ClusterError(f"cluster secret file {path} is empty")
    return text


def read_folder_record(data_dir: Path) -> dict | None:
    path = data_dir / CLUSTER_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ClusterError(f"cannot read {path}: {e}") from None
    if not isinstance(record, dict) or not isinstance(record.get("cluster_id"), str):
        raise ClusterError(f"{path} is not a cluster record (no cluster_id)")
    return record


def write_folder_record(data_dir: Path, record: dict) -> None:
    path = data_dir / CLUSTER_FILE
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(record, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ClusterNode:
    """This node's membership: the etcd client, the cluster's id, the lease that holds
    ``nodes/<name>`` and the task that keeps it alive."""

    def __init__(self, client: EtcdClient, cluster_name: str, node_name: str, cluster_id: str,
                 lease: int, ttl: int, record: dict) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self.node_name = node_name
        self.cluster_id = cluster_id
        self.prefix = cluster_prefix(cluster_name)
        self.lease = lease
        self.ttl = ttl
        # until when (time.monotonic()) this node's lease surely lives, whatever became of etcd
        # since: a replicated queue's leader serves only until then (replicas.py); set by
        # ``lease_renewed`` for each grant and renewal, from when it was sent
        self.lease_valid_until = 0.0
        self.record = record  # the value of nodes/<name>
        self._keeper: asyncio.Task | None = None
        self._watchers: list[asyncio.Task] = []
        self._reporter: asyncio.Task | None = None
        self._writes: set[asyncio.Task] = set()
        self._counts_due = False  # a write of the counts is scheduled (share_counts)
        self._writing = asyncio.Lock()
        self._left = False
        # the live members by name (their records), this node's included: read once, then kept
        # by a watch on nodes/ (start_watch); the HTTP API may read it (no import of this package)
        self.members: dict[str, dict] = {node_name: record}
        # every node that joined and was not forgotten, running or not (members/), kept the same way
        self.known: dict[str, dict] = {node_name: {"name": node_name}}
        # every node's queues by key (queues/<vhost>/<name>/<node>), kept the same way (queues.py)
        self.queues: dict[str, dict] = {}
        # the etcd revision each followed view is current to (the read's, then each change's)
        self.followed_revision: dict[str, int] = {}
        # every exchange and binding by key (topology/<vhost>/...), kept the same way (topology.py),
        # and each key's etcd create revision: the cluster's order of creation (a consistent-hash
        # exchange's buckets follow its bindings' order)
        self.topology: dict[str, dict] = {}
        self.topology_order: dict[str, int] = {}
        # every replicated queue's record by key (replicas/<vhost>/<name>), kept the same way (replicas.py)
        self.replicas: dict[str, dict] = {}
        # why etcd cannot take a change now (the lease's last renewal failed), or None
        self.etcd_problem: str | None = None
        self.status_of = None  # () -> this node's figures (the HTTP API's /api/nodes row), set by it
        # () called after each change of ``members``, ``queues``, ``topology`` or ``replicas`` (``listen``)
        # ``lease`` after each renewal or new lease (``lease_valid_until``, ``lease``)
        self._listeners: dict[str, list] = {"members": [], "queues": [], "topology": [], "replicas": [],
                                            "lease": []}
        # nodes whose inter-node link closed (warren/cluster/reach.py) since their record last
        # changed: not running, whatever their lease says until it ends
        self.unreachable: set[str] = set()
        self.secret = ""  # the cluster secret (set by ``join``): what the inter-node links prove (links.py)

    @property
    def node_key(self) -> str:
        return f"{self.prefix}nodes/{self.node_name}"

    def lease_renewed(self, sent_at: float, ttl: int) -> None:
        """A grant or renewal sent at ``sent_at`` (time.monotonic()) came back with ``ttl``."""
        self.lease_valid_until = max(self.lease_valid_until, sent_at + ttl * (1.0 - LEASE_MARGIN))

    def lease_valid(self) -> bool:
        """Whether this node's lease surely lives now: past ``lease_valid_until`` etcd may have
        ended it (a node paused, or cut off from etcd), and another node may lead what it led."""
        return time.monotonic() < self.lease_valid_until

    def start_keepalive(self) -> None:
        if self._keeper is None:
            self._keeper = asyncio.get_running_loop().create_task(self._keep_alive())

    def start_watch(self) -> None:
        if not self._watchers:
            loop = asyncio.get_running_loop()
            self._watchers = [loop.create_task(self._follow("nodes/", "members", "member list")),
                              loop.create_task(self._follow("members/", "known", "list of nodes")),
                              loop.create_task(self._follow("queues/", "queues", "queue directory")),
                              loop.create_task(self._follow("topology/", "topology", "exchanges and bindings")),
                              loop.create_task(self._follow("replicas/", "replicas", "replicated queues"))]

    def running(self, name: str) -> bool:
        """Whether ``name``'s lease is alive, it listens (its record says running) and its link
        to this node did not close since (``unreachable``)."""
        return self.members.get(name, {}).get("state") == "running" and name not in self.unreachable

    async def forget(self, name: str) -> None:
        """Remove ``name`` from the cluster for good (``warren ctl forget_cluster_node``): only a
        node that is not running (ClusterError otherwise, or when no such node joined). Started
        again with its data folder, it is refused (``join``)."""
        if self.running(name):  # (a node whose link closed is not, though its lease may live on a moment)
            raise ClusterError(f"node {name!r} is running: stop it before forgetting it")
        if await self.client.delete(f"{self.prefix}members/{name}") == 0:
            raise ClusterError(f"node {name!r} is not a node of cluster {self.cluster_name!r}")
        self.known.pop(name, None)
        # its member key, if its lease has not ended yet (it died a moment ago), goes too
        await self.client.delete(f"{self.prefix}nodes/{name}")
        self.members.pop(name, None)
        # its durable queues go with it, as RabbitMQ deletes a forgotten node's (queues.py)
        stale = [kv.key.decode() for kv in await self.client.get_prefix(f"{self.prefix}queues/")
                 if kv.key.decode().endswith("/" + name)]
        for i in range(0, len(stale), 100):
            await self.client.write_many([], stale[i:i + 100])
        log.info("cluster %s: node %s forgotten", self.cluster_name, name)

    async def _follow(self, subkey: str, attribute: str, what: str) -> None:
        """The records under ``subkey`` from etcd into ``self.<attribute>``, by name: read whole,
        then followed by a watch from the revision read (nothing missed, nothing twice); read
        whole again whenever the watch ends or fails (etcd restarted, a member gone, the revision
        compacted). One streamed response, no thread. A member cut off from its majority may
        hold the stream open silently: the view is then stale until the stream ends (the lease
        renewals log the trouble meanwhile)."""
        prefix = self.prefix + subkey
        problem = None
        quick = False  # the last round was read again at once after a short watch
        while not self._left:
            followed = False  # the read worked: read again at once (at most twice in a row if short)
            began = asyncio.get_running_loop().time()
            try:
                kvs, revision = await self.client.range_prefix(prefix)
                followed = True
                records = _members(prefix, kvs)
                if attribute == "topology":
                    self.topology_order = {kv.key.decode()[len(prefix):]: kv.create_revision for kv in kvs}
                setattr(self, attribute, records)
                self.followed_revision[attribute] = revision
                self._changed(attribute)
                if problem is not None:
                    log.info("cluster %s: following the %s again", self.cluster_name, what)
                problem = None
                async for event in self.client.watch_prefix(prefix, start_revision=revision + 1):
                    name = event.kv.key.decode()[len(prefix):]
                    if event.kind == "DELETE":
                        records.pop(name, None)
                        if attribute == "topology":
                            self.topology_order.pop(name, None)
                    else:
                        records[name] = _record(event.kv.value)
                        if attribute == "topology":
                            self.topology_order[name] = event.kv.create_revision
                        if attribute == "members":  # it wrote its record again: it runs (again)
                            self.unreachable.discard(name)
                    self.followed_revision[attribute] = max(self.followed_revision.get(attribute, 0),
                                                            event.kv.mod_revision)
                    self._changed(attribute)
            except EtcdError as e:
                if problem is None:
                    log.warning("cluster %s: cannot follow the %s: %s", self.cluster_name, what, e)
                problem = str(e)
            except ValueError as e:  # not JSON: a stream cut mid-line
                problem = str(e)
            if self._left:
                break
            short = asyncio.get_running_loop().time() - began <= 1.0
            if followed and not (short and quick):
                quick = short
                continue
            quick = False
            await asyncio.sleep(max(0.5, self.ttl / 3))

    async def _keep_alive(self) -> None:
        """Renew the lease every third of its TTL. While etcd cannot be reached the node goes on
        serving its queues, says so once, and refuses changes of exchanges and bindings
        (``etcd_problem``, topology.py); a lease that expired
        meanwhile (the member key is gone) is replaced by a new one if the name is still free."""
        problem: str | None = None  # logged once until it changes or ends
        while not self._left:
            await asyncio.sleep(max(0.5, self.ttl / 3))
            try:
                # bounded by a third of the TTL: a slow member must not hold the next renewal past it
                sent_at = time.monotonic()
                left = await self.client.keep_alive(self.lease, timeout=max(0.5, self.ttl / 3))
                if left > 0:
                    self.lease_renewed(sent_at, min(left, self.ttl))
                    self._changed("lease")
                else:
                    if problem is None:
                        log.warning("cluster %s: this node's lease expired (etcd was out of reach for more "
                                    "than %d s); registering %s again", self.cluster_name, self.ttl, self.node_name)
                    await self._register_again()
                if problem is not None:
                    log.info("cluster %s: membership of %s renewed", self.cluster_name, self.node_name)
                problem = None
            except EtcdError as e:
                if problem is None:
                    log.warning("cluster %s: cannot renew this node's lease: %s", self.cluster_name, e)
                problem = problem or str(e)
            except ClusterError as e:
                if problem != str(e):
                    log.error("cluster %s: %s", self.cluster_name, e)
                problem = str(e)
            self.etcd_problem = problem

    async def _register_again(self) -> None:
        sent_at = time.monotonic()
        lease, self.ttl = await self.client.grant(self.ttl)
        written, existing = await self.client.put_if_absent(self.node_key, json.dumps(self.record), lease=lease)
        if not written:
            await self.client.revoke(lease)
            raise ClusterError(f"node name {self.node_name} was taken by another node while etcd was out of reach "
                               f"({_describe(existing.value if existing else b'')}); this node is not listed")
        self.lease = lease
        # a new lease: what the old one allowed is over (a leader of the old one serves no more)
        self.lease_valid_until = sent_at + self.ttl * (1.0 - LEASE_MARGIN)
        self._changed("lease")

    async def announce(self, **listeners) -> None:
        """Add the node's listeners (ports) to its member record, once they are bound; from then
        on its figures (``status_of``) are written again every ``STATUS_INTERVAL`` seconds."""
        self.record = {**self.record, **listeners, "state": "running"}
        await self._write_record()
        if self._reporter is None and self.status_of is not None:
            self._reporter = asyncio.get_running_loop().create_task(self._report())

    async def _write_record(self) -> None:
        # one write at a time, each of the record as it is when its turn comes: the last write
        # is of the newest record (two in flight could reach etcd in either order)
        async with self._writing:
            if self.status_of is not None:
                try:
                    self.record = {**self.record, "status": self.status_of()}
                except Exception:  # the figures are a view: a failure to gather them must not stop the node
                    log.exception("cluster %s: this node's figures could not be gathered", self.cluster_name)
            await self.client.put(self.node_key, json.dumps(self.record), lease=self.lease)

    def listen(self, attribute: str, listener) -> None:
        """Call ``listener()`` after each change of ``members`` (alarms.py, reach.py),
        ``queues`` (reach.py) or ``topology`` (topology.py), after a node's link closed
        (``members``: ``unreachable`` changed), and after each renewal or replacement of this
        node's ``lease`` (replicas.py)."""
        self._listeners[attribute].append(listener)

    def _changed(self, attribute: str) -> None:
        for listener in self._listeners.get(attribute, ()):
            try:
                listener()
            except Exception:  # a listener's failure must not stop the watch
                log.exception("cluster %s: a listener of the %s failed", self.cluster_name, attribute)

    def mark_unreachable(self, name: str) -> None:
        """``name``'s link closed (reach.py): not running from now until it writes its record."""
        if name not in self.unreachable:
            self.unreachable.add(name)
            self._changed("members")

    def share_counts(self, counts: dict) -> None:
        """This node's counts (a user's connections and channels: warren/cluster/api.py) into
        its member record, written within moments; changes meanwhile go in the same write."""
        self.record = {**self.record, "counts": dict(counts)}
        if not self._counts_due and not self._left:
            self._counts_due = True
            asyncio.get_running_loop().call_later(COUNTS_DELAY, self._write_counts)

    def _write_counts(self) -> None:
        self._counts_due = False
        self.report_now()

    def report_now(self) -> None:
        """Write this node's record (its figures) now, not at the next turn: its alarms changed."""
        if self.record.get("state") == "running" and not self._left:  # announced: else announce writes it
            task = asyncio.get_running_loop().create_task(self._report_once())
            self._writes.add(task)  # held until done (the loop keeps only a weak reference)
            task.add_done_callback(self._writes.discard)

    async def _report_once(self) -> None:
        try:
            await self._write_record()
        except EtcdError as e:
            log.warning("cluster %s: could not write this node's figures: %s", self.cluster_name, e)

    async def _report(self) -> None:
        """This node's figures into its member record every ``STATUS_INTERVAL`` seconds, which
        the other nodes' ``/api/nodes`` show (RabbitMQ's nodes ask each other; here etcd's watch
        carries them). etcd out of reach: the lease renewal logs it, this waits for the next turn."""
        while not self._left:
            await asyncio.sleep(STATUS_INTERVAL)
            try:
                await self._write_record()
            except EtcdError:
                pass

    async def read_members(self) -> dict[str, dict]:
        """The live members' records (those whose lease is alive), by name, read from etcd now."""
        prefix = f"{self.prefix}nodes/"
        return _members(prefix, await self.client.get_prefix(prefix))

    async def leave(self, timeout: float = 3.0) -> None:
        """Stop renewing and revoke the lease: the member key goes at once. Bounded: a node whose
        etcd is gone still stops (its key then goes when the lease ends)."""
        self._left = True
        await cancel_tasks(self._keeper, self._reporter, *self._watchers)
        self._keeper = self._reporter = None
        self._watchers = []
        try:
            await asyncio.wait_for(self.client.revoke(self.lease), timeout)
        except (EtcdError, asyncio.TimeoutError) as e:
            log.warning("cluster %s: could not leave at once (%s); the member key goes in %d s",
                        self.cluster_name, e or "no answer in time", self.ttl)
        await self.client.close()


def _members(prefix: str, kvs) -> dict[str, dict]:
    """The member records of the ``nodes/`` keys read, by node name."""
    return {kv.key.decode()[len(prefix):]: _record(kv.value) for kv in kvs}


def _record(value: bytes) -> dict:
    try:
        record = json.loads(value)
    except ValueError:
        return {"state": "unreadable"}
    return record if isinstance(record, dict) else {"state": "unreadable"}


def _describe(value: bytes) -> str:
    try:
        record = json.loads(value)
        return f"pid {record.get('pid')} on {record.get('host')}, started {record.get('started')}"
    except ValueError:
        return "a record Warren did not write"


async def join(config, *, timeout: float = 5.0) -> ClusterNode:
    """Create or join ``config.cluster_name`` through the etcd at ``config.cluster_etcd``, as
    ``config.node_name``; the member, its lease being kept alive. ClusterError (one line) when
    refused: a data folder of another cluster or node, a name already running, a wrong or
    missing secret, a secret file open to others, etcd unreachable or without quorum."""
    name, cluster = config.node_name, config.cluster_name
    data_dir = Path(config.data_dir)
    own_secret = read_secret_file(config.cluster_secret_file) if config.cluster_secret_file else None
    folder = read_folder_record(data_dir)
    if folder is not None and folder.get("cluster_name") != cluster:
        raise ClusterError(f"data folder {data_dir.resolve()} belongs to cluster {folder.get('cluster_name')!r} "
                           f"(id {folder['cluster_id']}), not {cluster!r}")
    if folder is not None and folder.get("node_name") != name:
        raise ClusterError(f"data folder {data_dir.resolve()} is node {folder.get('node_name')!r}'s, "
                           f"not {name!r}'s")
    client = EtcdClient(config.cluster_etcd, timeout=timeout)
    lease = 0
    try:
        prefix = cluster_prefix(cluster)
        cluster_id, created = await _create_or_read(client, prefix, name, own_secret, folder)
        if folder is not None and folder["cluster_id"] != cluster_id:
            raise ClusterError(f"data folder {data_dir.resolve()} belongs to another cluster (id "
                               f"{folder['cluster_id']}) than {cluster!r} in etcd (id {cluster_id})")
        secret = await _check_secret(client, prefix, cluster, cluster_id, own_secret)
        member_key = f"{prefix}members/{name}"
        if folder is not None and await client.get(member_key) is None:
            raise ClusterError(f"node {name!r} was removed from cluster {cluster!r} (forget_cluster_node): its "
                               f"data folder {data_dir.resolve()} is no longer the cluster's; start it with a new one")
        granted_at = time.monotonic()
        lease, ttl = await client.grant(config.cluster_lease_ttl)
        record = {"name": name, "cluster": cluster, "cluster_id": cluster_id, "pid": os.getpid(),
                  "host": os.uname().nodename, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "state": "starting"}
        joined = json.dumps({"name": name, "joined": record["started"]})
        written, existing = await client.put_if_absent(f"{prefix}nodes/{name}", json.dumps(record), lease=lease,
                                                       also=None if folder is not None else {member_key: joined})
        if not written:
            raise ClusterError(f"node name {name!r} is already running in cluster {cluster!r} "
                               f"({_describe(existing.value if existing else b'')}; its lease is alive)")
        if folder is None:
            try:
                write_folder_record(data_dir, {"cluster_name": cluster, "cluster_id": cluster_id, "node_name": name})
            except OSError as e:
                raise ClusterError(f"cannot write {data_dir.resolve() / CLUSTER_FILE}: {e.strerror or e}") from None
        node = ClusterNode(client, cluster, name, cluster_id, lease, ttl, record)
        node.secret = secret  # the inter-node links' (links.py)
        node.lease_renewed(granted_at, ttl)
        log.info("cluster %s (id %s): %s node %s through etcd at %s (lease %d s)", cluster, cluster_id,
                 "created by" if created else "joined as", name, ", ".join(config.cluster_etcd), ttl)
        node.start_keepalive()
        node.start_watch()
        return node
    except EtcdError as e:  # unreachable, no quorum (EtcdNoQuorum), or refused: the error says which
        await _give_up(client, lease)
        raise ClusterError(f"cannot join cluster {cluster!r}: {e}") from None
    except BaseException:
        await _give_up(client, lease)
        raise


async def _give_up(client: EtcdClient, lease: int) -> None:
    if lease:
        try:
            await client.revoke(lease)
        except EtcdError:
            pass
    await client.close()


async def _create_or_read(client: EtcdClient, prefix: str, name: str, own_secret: str | None,
                          folder: dict | None) -> tuple[str, bool]:
    """The cluster's id, and whether this node created it (in one transaction with its secret)."""
    existing = await client.get(prefix + "id")
    if existing is None:
        if folder is not None:  # a folder of a cluster this etcd never had (or lost)
            raise ClusterError(f"data folder belongs to cluster id {folder['cluster_id']}, which this etcd "
                               f"does not hold (under {prefix}): not creating a new cluster over it")
        cluster_id = str(uuid.uuid4())
        secret = own_secret if own_secret is not None else secrets.token_hex(32)
        also = {prefix + "secret-check": _digest(cluster_id, secret)}
        if own_secret is None:
            also[prefix + "secret"] = secret
        identity = json.dumps({"id": cluster_id, "by": name,
                               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        written, existing = await client.put_if_absent(prefix + "id", identity, also=also)
        if written:
            return cluster_id, True
    try:
        return json.loads(existing.value)["id"], False
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ClusterError(f"{prefix}id in etcd is not a Warren cluster's identity") from None


async def _check_secret(client: EtcdClient, prefix: str, cluster: str, cluster_id: str,
                        own_secret: str | None) -> str:
    """The cluster's secret (the file's, or the one kept in etcd), checked against secret-check."""
    check = await client.get(prefix + "secret-check")
    if check is None:
        raise ClusterError(f"cluster {cluster!r} has no {prefix}secret-check in etcd (not made by Warren?)")
    secret = own_secret
    if secret is None:
        stored = await client.get(prefix + "secret")
        if stored is None:
            raise ClusterError(f"cluster {cluster!r} was created with a secret file: give --cluster-secret-file")
        secret = stored.value.decode()
    if _digest(cluster_id, secret) != check.value.decode():
        raise ClusterError(f"the cluster secret of {'--cluster-secret-file' if own_secret is not None else 'etcd'} "
                           f"is not cluster {cluster!r}'s (its secret-check in etcd differs)")
    return secret
