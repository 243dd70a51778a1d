"""Where each queue of the cluster lives: the queue directory in etcd.

Each node lists its own queues under ``/warren/<C>/queues/<vhost>/<name>/<node>`` (vhost and
name percent-encoded), the value being what ``/api/queues`` shows of a queue that cannot be
asked (``name``, ``vhost``, ``node``, ``type``, ``durable``, ``auto_delete``, ``exclusive``,
``arguments``). A durable queue's key has no lease: it stays while its node is down, which is
how every other node knows that queue is there and down (RabbitMQ's ``state: down``, its
``home node ... is down or inaccessible``). Other queues' keys are held by the node's lease:
they go with it, as the queues do.

The node writes the differences between its queues and what it last wrote once a second
(``PUBLISH_INTERVAL``), in transactions of at most ``BATCH`` operations, rather than on each
declare: nothing is added to a declare's path, and the directory is a view at most a second
old. Every node follows the prefix (ClusterNode's ``queues``, a watch); ``forget`` removes a
forgotten node's keys, as RabbitMQ deletes a forgotten node's queues.

What uses it: the handles of other nodes' queues that any node serves (``reach.py``), the HTTP
API (a queue of another node is found, shown, read, purged and deleted through any node; a down
node's durable queues are listed ``state: down``) and a declare through another node of a
durable queue whose node is down (refused as RabbitMQ refuses it). A declare that makes a queue
writes its key before it is answered (``publish_once``), so another node knows it at once:
a node asked for a queue it has no handle of reads that queue's keys from etcd itself (``read``,
api.py ``look_again``) rather than answer 404 while its watch is a moment behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from urllib.parse import quote

from warren.cluster.etcd import EtcdError
from warren.cluster.node import cancel_tasks

__all__ = ["QueueDirectory", "PUBLISH_INTERVAL", "queue_key", "plain"]

log = logging.getLogger("warren.cluster")

PUBLISH_INTERVAL = 1.0  # seconds between two writes of this node's differences
BATCH = 100  # operations per etcd transaction (etcd refuses more than 128)


def queue_key(prefix: str, vhost: str, name: str, node: str) -> str:
    return f"{prefix}queues/{quote(vhost, safe='')}/{quote(name, safe='')}/{node}"


def plain(value):
    """An argument as JSON carries it, the same on every node (AMQP tables may hold bytes,
    decimals, times): the queue directory's and the shared topology's (topology.py)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


@dataclass
class Claim:
    """A new queue's name claimed in the directory (``QueueDirectory.claim``)."""
    key: str
    value: str
    holder: dict | None = None  # another node's record of the name: the claim lost
    revision: int = 0  # etcd's revision of the claim's write (won)


class QueueDirectory:
    """This node's part of the queue directory (module doc): ``start`` publishes its queues;
    ``where(vhost, name)`` and ``down_rows(vhosts)`` read every node's."""

    def __init__(self, cluster, broker) -> None:
        self.cluster = cluster
        self.broker = broker
        self.published: dict[str, str] = {}  # key -> value, as last written
        self.lease = cluster.lease  # the lease the leased keys were written with
        self._made: dict[int, tuple] = {}  # id(queue) -> (queue, exclusive, key, value, leased): _ours
        self._task: asyncio.Task | None = None
        self._stopped = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._publish_loop())

    async def stop(self) -> None:
        self._stopped = True
        await cancel_tasks(self._task)
        self._task = None

    # --- this node's queues into etcd ------------------------------------------------------------

    def _ours(self) -> dict[str, tuple[str, bool]]:
        """key -> (value, held by the lease) for every queue this node holds now. A queue's entry
        is made once and kept while the queue lives (only a 0-10 relock changes it), so the look
        each second costs a dictionary read per queue, not a JSON encoding."""
        prefix, me = self.cluster.prefix, self.cluster.node_name
        out, made, kept = {}, self._made, {}
        for vhost in list(self.broker.vhosts.values()):
            for q in list(vhost.queues.values()):
                if q.deleted:
                    continue
                exclusive = q.exclusive_owner is not None
                entry = made.get(id(q))
                if entry is None or entry[0] is not q or entry[1] != exclusive:
                    entry = (q, exclusive, queue_key(prefix, vhost.name, q.name, me),
                             json.dumps(self.record_of(vhost.name, q), sort_keys=True), exclusive or not q.durable)
                kept[id(q)] = entry
                out[entry[2]] = (entry[3], entry[4])
        self._made = kept
        return out

    def record_of(self, vhost: str, q) -> dict:
        """The directory's record of this node's queue ``q`` (module doc)."""
        return {"name": q.name, "vhost": vhost, "node": self.cluster.node_name, "type": q.queue_type,
                "durable": q.durable, "auto_delete": q.auto_delete, "exclusive": q.exclusive_owner is not None,
                "arguments": plain(q.arguments)}

    async def _publish_loop(self) -> None:
        problem = None
        first = True
        while not self._stopped:
            try:
                if first:  # what a previous run of this node left (its durable queues' keys)
                    me = "/" + self.cluster.node_name
                    kvs = await self.cluster.client.get_prefix(self.cluster.prefix + "queues/")
                    self.published = {kv.key.decode(): kv.value.decode() for kv in kvs
                                      if kv.key.decode().endswith(me)}
                    first = False
                await self.publish_once()
                if problem is not None:
                    log.info("cluster %s: the queue directory is written again", self.cluster.cluster_name)
                problem = None
            except EtcdError as e:
                if problem is None:
                    log.warning("cluster %s: cannot write this node's queues into the queue directory: %s",
                                self.cluster.cluster_name, e)
                problem = str(e)
            await asyncio.sleep(PUBLISH_INTERVAL)

    async def publish_once(self) -> None:
        """Write what changed since the last write (puts and deletes, in batches)."""
        ours = self._ours()
        if self.cluster.lease != self.lease:  # registered again (node.py): the old lease took its keys
            self.published = {k: v for k, v in self.published.items() if k in ours and not ours[k][1]}
            self.lease = self.cluster.lease
        puts = [(k, v, self.cluster.lease if leased else 0) for k, (v, leased) in ours.items()
                if self.published.get(k) != v]
        deletes = [k for k in self.published if k not in ours]
        ops = [("put", p) for p in puts] + [("delete", d) for d in deletes]
        for i in range(0, len(ops), BATCH):
            chunk = ops[i:i + BATCH]
            await self.cluster.client.write_many([p for kind, p in chunk if kind == "put"],
                                                 [d for kind, d in chunk if kind == "delete"])
            for kind, item in chunk:
                if kind == "put":
                    self.published[item[0]] = item[1]
                else:
                    self.published.pop(item, None)

    def listed_but_gone(self, vhost: str, name: str) -> bool:
        """Whether etcd still lists a queue ``name`` of this node that is gone (deleted since the
        last write: ``publish_once`` removes its key)."""
        v = self.broker.vhosts.get(vhost)
        return (v is None or name not in v.queues) and \
            queue_key(self.cluster.prefix, vhost, name, self.cluster.node_name) in self.published

    async def claim(self, vhost: str, name: str, durable: bool, exclusive: bool, arguments: dict) -> Claim:
        """Before this node makes a new queue ``name``: its key written only if no node's key
        for that name exists, so two nodes declaring one name at once do not both make it (the
        loser declares the winner's). Won (``holder`` None): call ``made`` or ``unclaim`` next,
        without an await between; lost: ``holder`` is the record of the node holding the name."""
        me = self.cluster.node_name
        record = {"name": name, "vhost": vhost, "node": me, "type": arguments.get("x-queue-type", "classic"),
                  "durable": durable, "auto_delete": False, "exclusive": exclusive, "arguments": plain(arguments)}
        key = queue_key(self.cluster.prefix, vhost, name, me)
        claim = Claim(key, json.dumps(record, sort_keys=True))
        claim.revision, there = await self.cluster.client.put_if_none_under(
            key, claim.value, key[:-len(me)], lease=self.cluster.lease if exclusive or not durable else 0)
        if not claim.revision:
            claim.holder = {"name": name, "vhost": vhost, "node": there[0].key.decode().rsplit("/", 1)[-1]}
            try:
                claim.holder.update(json.loads(there[0].value))
            except ValueError:
                pass
        return claim

    def made(self, claim: Claim) -> None:
        """The claimed queue is made: its key is taken as written (``publish_once`` writes it
        again only if the queue differs from the claim: a policy's queue type, say)."""
        self.published[claim.key] = claim.value

    async def unclaim(self, claim: Claim) -> None:
        """The claimed queue was not made (its declare refused): its key goes."""
        await self.cluster.client.delete(claim.key)

    # --- every node's queues, as followed ---------------------------------------------------------

    def records(self, vhost: str | None = None, name: str | None = None) -> list[dict]:
        """Every queue of the directory (of ``vhost``, named ``name``), other nodes' only."""
        me = self.cluster.node_name
        out = []
        for record in list(self.cluster.queues.values()):
            if record.get("node") == me or "name" not in record:
                continue
            if (vhost is None or record.get("vhost") == vhost) and (name is None or record["name"] == name):
                out.append(record)
        return out

    async def read(self, vhost: str, name: str) -> list[dict]:
        """Other nodes' records of queue ``name`` of ``vhost`` as etcd holds them now: one
        linearizable range read, not the watch's view (which may be a moment behind)."""
        prefix = queue_key(self.cluster.prefix, vhost, name, "")
        me = self.cluster.node_name
        out = []
        for kv in await self.cluster.client.get_prefix(prefix):
            node = kv.key.decode()[len(prefix):]
            if node == me or not node or "/" in node:
                continue
            try:
                record = json.loads(kv.value)
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append({**record, "name": name, "vhost": vhost, "node": record.get("node") or node})
        return out

    def where(self, vhost: str, name: str) -> dict | None:
        """The record of queue ``name`` of ``vhost`` on another node: a running node's first,
        else a down node's; None if no other node holds one."""
        found = self.records(vhost, name)
        running = [r for r in found if self.cluster.running(r["node"])]
        return (running or found or [None])[0]

    def down_rows(self, vhosts: list[str]) -> list[dict]:
        """``/api/queues`` rows of the durable queues whose node is down (RabbitMQ 3.10's shape)."""
        rows = []
        for record in self.records():
            # a down node's durable queues (its others' keys go with its lease, moments later)
            if record.get("vhost") in vhosts and record.get("durable") and not self.cluster.running(record["node"]):
                rows.append({"name": record["name"], "vhost": record["vhost"], "node": record["node"],
                             "state": "down", "type": record.get("type", "classic"),
                             "durable": record.get("durable", True), "auto_delete": record.get("auto_delete", False),
                             "exclusive": record.get("exclusive", False), "arguments": record.get("arguments", {})})
        return rows
