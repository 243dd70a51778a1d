"""One node of the cluster runs each shovel and each federated exchange's links (docs/clustering.md,
"Shared metadata").

The runtime parameters and policies are the cluster's (shared_files.py) and so are exchanges
(topology.py), so every node hears of each shovel and each federated exchange and would run it:
a message would then be shovelled, or federated, once per node. Instead, the node that runs one
holds the key ``/warren/<C>/runs/<kind>/<vhost>/<name>`` (``kind`` "shovel" or "exchange"; vhost
and name percent-quoted), written only if absent with the node's membership lease: whichever
node writes it first runs it, the others do not. When that node stops or dies, its lease ends,
the key goes, and the other nodes, which watch ``runs/``, try to take it: one wins and starts it
(within the lease TTL of the death, plus a moment). A shovel deleted, or an exchange no
federation policy applies to any more (or deleted), releases its key.

This plugs into the federation manager's existing seams: ``runs_here(vhost, kind, name)`` (with
``--worker-mode queues`` the one that picks a worker per shovel and exchange) must answer at
once, on the loop, so an unclaimed one answers False and a claim starts in the background; once
won, a shovel is started through ``restart_shovel`` and an exchange's links by a reconcile of
federation. ``exchanges_federated`` hears, after each reconcile, which exchanges a federation
policy applies to. A queue's federation links run on the queue's node, which alone holds the
queue (other nodes have a handle in ``remote_queues``, which federation does not read).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse

from warren.cluster.etcd import EtcdError
from warren.cluster.node import cancel_tasks

__all__ = ["Runs"]

log = logging.getLogger("warren.cluster")

SHOVEL = "shovel"
EXCHANGE = "exchange"  # a federated exchange: all its upstreams' links
CLAIMED = (SHOVEL, EXCHANGE)


class Runs:
    def __init__(self, node, manager) -> None:
        self.node = node  # node.py's ClusterNode: client, lease, name
        self.manager = manager  # warren/federation/manager.py FederationManager
        self.prefix = f"{node.prefix}runs/"
        self.held: set[tuple[str, str, str]] = set()  # (kind, vhost, name) whose key this node holds
        self.others: dict[tuple[str, str, str], str] = {}  # held by another node: its name
        self._claiming: set[tuple[str, str, str]] = set()
        self._default = manager.runs_here
        self._task: asyncio.Task | None = None
        self._stopped = False
        self._background: set[asyncio.Task] = set()

    def install(self, parameters) -> None:
        """Take over the manager's ``runs_here`` for shovels and exchanges, hear of shovels cleared
        and of exchanges no longer federated, and watch
        ``runs/`` (on the running loop)."""
        self.manager.runs_here = self.runs_here
        self.manager.exchanges_federated = self.exchanges_federated
        parameters.listeners.append(self)
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="cluster runs")

    async def stop(self) -> None:
        self._stopped = True
        await cancel_tasks(self._task, *self._background)

    def key(self, k: tuple[str, str, str]) -> str:
        return self.prefix + "/".join(urllib.parse.quote(part, safe="") for part in k)

    def _of(self, key: bytes) -> tuple[str, str, str] | None:
        parts = key.decode()[len(self.prefix):].split("/")
        return tuple(urllib.parse.unquote(p) for p in parts) if len(parts) == 3 else None

    # --- the manager's seam ---------------------------------------------------------------------

    def runs_here(self, vhost: str, kind: str, name: str) -> bool:
        if kind not in CLAIMED:
            return self._default(vhost, kind, name)
        k = (kind, vhost, name)
        if k in self.held:
            return True
        if k not in self.others:
            self._claim_soon(k)
        return False

    def parameter_changed(self, component: str, vhost: str, name: str, value) -> None:
        k = (component, vhost, name)
        if component == SHOVEL and value is None and k in self.held:
            self.held.discard(k)
            self._spawn(self._release(k))

    def global_parameter_changed(self, name: str, value) -> None:
        pass

    def exchanges_federated(self, federated: set[tuple[str, str]]) -> None:
        for k in [k for k in self.held if k[0] == EXCHANGE and (k[1], k[2]) not in federated]:
            self.held.discard(k)
            self._spawn(self._release(k))

    # --- claims -----------------------------------------------------------------------------------

    def _spawn(self, coro) -> None:
        if self._stopped:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _claim_soon(self, k) -> None:
        if k not in self._claiming:
            self._claiming.add(k)
            self._spawn(self._claim(k))

    async def _claim(self, k) -> None:
        try:
            written, existing = await self.node.client.put_if_absent(self.key(k), self.node.node_name,
                                                                     lease=self.node.lease)
        except EtcdError as e:
            log.warning("cluster %s: cannot take the run of %s '%s' in vhost '%s': %s", self.node.cluster_name,
                        k[0], k[2], k[1], e)
            return  # tried again when the watch reads runs/ again
        finally:
            self._claiming.discard(k)
        if not written:
            if existing is not None and existing.lease == self.node.lease:
                written = True  # ours already (a claim answered late)
            else:
                self.others[k] = existing.value.decode() if existing is not None else "?"
                return
        self.held.add(k)
        log.info("cluster %s: this node runs %s '%s' in vhost '%s'", self.node.cluster_name, k[0], k[2], k[1])
        self._started(k)

    def _started(self, k) -> None:
        if k[0] == SHOVEL:
            self.manager.restart_shovel(k[1], k[2])
        else:
            self.manager.federation.reconcile(force=True)  # its links start: runs_here answers True now

    async def _release(self, k) -> None:
        try:
            await self.node.client.delete(self.key(k))
        except EtcdError as e:  # the key goes with the lease anyway
            log.warning("cluster %s: cannot release the run of %s '%s': %s", self.node.cluster_name, k[0], k[2], e)

    def _lost(self, k, holder: str | None) -> None:
        """Another node runs ``k`` now (our lease ended meanwhile): ours stops."""
        self.held.discard(k)
        if holder is not None:
            self.others[k] = holder
        log.warning("cluster %s: %s '%s' in vhost '%s' is run by another node now: stopped here",
                    self.node.cluster_name, k[0], k[2], k[1])
        if k[0] == EXCHANGE:
            self.manager.federation.reconcile(force=True)  # its links stop: runs_here answers False now
            return
        shovel = self.manager.shovels.pop((k[1], k[2]), None)
        if shovel is not None:
            self._spawn(shovel.stop())

    def _unclaimed(self) -> None:
        """Every shovel defined that no node runs: try to take it."""
        for p in self.manager.parameters.list(SHOVEL):
            k = (SHOVEL, p["vhost"], p["name"])
            if k not in self.held and k not in self.others and p["vhost"] in self.manager.broker.vhosts:
                self._claim_soon(k)

    # --- the watch ------------------------------------------------------------------------------

    async def _watch(self) -> None:
        client = self.node.client
        problem = None
        while not self._stopped:
            try:
                kvs, revision = await client.range_prefix(self.prefix)
                seen = {}
                for kv in kvs:
                    k = self._of(kv.key)
                    if k is not None:
                        seen[k] = kv
                for k in list(self.held):
                    kv = seen.get(k)
                    if kv is None or kv.lease != self.node.lease:
                        self._lost(k, kv.value.decode() if kv is not None else None)
                self.others = {k: kv.value.decode() for k, kv in seen.items() if kv.lease != self.node.lease}
                self.held |= {k for k, kv in seen.items() if kv.lease == self.node.lease}
                problem = None
                if self.manager.started:
                    self._unclaimed()
                async for event in client.watch_prefix(self.prefix, start_revision=revision + 1):
                    k = self._of(event.kv.key)
                    if k is None:
                        continue
                    if event.kind == "DELETE":
                        self.others.pop(k, None)
                        if k in self.held:
                            self._lost(k, None)
                        if k[0] == EXCHANGE:
                            self.manager.federation.reconcile(force=True)  # its node went: asks runs_here again
                        elif self.manager.parameters.get(k[0], k[1], k[2]) is not self.manager.parameters.MISSING:
                            self._claim_soon(k)  # its node went: one of the others takes it
                    elif event.kv.lease == self.node.lease:
                        self.held.add(k)
                    else:
                        if k in self.held:
                            self._lost(k, event.kv.value.decode())
                        self.others[k] = event.kv.value.decode()
            except EtcdError as e:
                if problem is None:
                    log.warning("cluster %s: cannot follow which node runs each shovel: %s", self.node.cluster_name, e)
                problem = str(e)
            except ValueError as e:
                problem = str(e)
            if self._stopped:
                break
            await asyncio.sleep(0.5 if problem is None else 1.0)
