"""``FederationManager``: runs the shovels and federation links that the runtime parameters and
policies define, on the broker's loop.

It plugs into the parameter store (``warren/management/parameters.py``): validators refuse a
bad ``shovel``, ``federation-upstream`` or ``federation-upstream-set`` value before it is
stored (HTTP 400, a definitions import that fails), and as a listener it starts a shovel when
its parameter is set, restarts it when it changes and stops it when it is cleared (or its vhost
deleted). The global parameter ``cluster_name`` (RabbitMQ's ``set_cluster_name``) renames the
node: federation's loop detection needs every node's name to differ.

Federation (``warren/federation/federation.py``) is driven by policies; the manager re-reads
which exchanges and queues are federated when an upstream changes and every
``RECONCILE_S`` (a cheap scan, and none at all in vhosts without a federation policy).

Only vhosts this process serves are run (with ``--workers`` each worker runs its own vhosts'
shovels and links; with ``--worker-mode queues``, where the runtime parameters are the node's,
one worker runs each shovel and exchange link, ``runs_here``, and a queue's link runs on the
worker that owns the queue; in a cluster one node runs each shovel and each federated exchange's
links, warren/cluster/runs.py, and a queue's links run on the queue's node). Their status over HTTP is every worker's (``warren/management/api/federation.py``).
"""

from __future__ import annotations

import asyncio
import logging
import socket

from warren.federation.federation import Federation, validate_upstream, validate_upstream_set
from warren.federation.links import Credentials
from warren.federation.shovel import Shovel, validate

__all__ = ["FederationManager", "RECONCILE_S"]

log = logging.getLogger("warren.federation")

RECONCILE_S = 1.0
SHOVEL = "shovel"
UPSTREAM = "federation-upstream"
UPSTREAM_SET = "federation-upstream-set"


class FederationManager:
    def __init__(self, broker, parameters) -> None:
        self.broker = broker
        self.parameters = parameters
        self.shovels: dict[tuple[str, str], Shovel] = {}
        self.creds = Credentials(None, "guest", "guest")
        self.federation = Federation(self)
        self.started = False
        self._reconcile_task: asyncio.Task | None = None
        # ``write(change, *args)``, awaited: runs a change of the node's files on the writer
        # thread the HTTP API's changes use, returning once it is durable (the server hands in
        # warren/management/api/common.py ``off_loop``: federation does not import the
        # management package); None: the change runs at once, on the loop (unit tests)
        self.write = None
        self._deleting: set[asyncio.Task] = set()  # shovels' own deletes under way
        parameters.validators[SHOVEL] = self._validate_shovel
        parameters.validators[UPSTREAM] = lambda vhost, name, value: validate_upstream(value)
        parameters.validators[UPSTREAM_SET] = lambda vhost, name, value: validate_upstream_set(value)
        parameters.listeners.append(self)

    @property
    def node(self) -> str:
        """This node's name as shovel headers and status show it (RabbitMQ: ``rabbit@host``)."""
        return self.broker.cluster_name or "warren@" + socket.gethostname().split(".")[0]

    # --- start and stop ---------------------------------------------------------------------

    def start(self, local_port: int | None, default_user: str | None, default_pass: str | None) -> None:
        """Run what the stored parameters define; ``local_port`` serves URIs with an empty host."""
        self.creds = Credentials(local_port, default_user or "guest", default_pass or "guest")
        self.started = True
        cluster_name = self.parameters.global_parameters.get("cluster_name")
        if isinstance(cluster_name, str) and cluster_name:
            self.broker.cluster_name = cluster_name
        for p in self.parameters.list(SHOVEL):
            self._start_shovel(p["vhost"], p["name"], p["value"])
        self._reconcile_task = asyncio.get_running_loop().create_task(self._reconcile_loop(),
                                                                      name="federation reconcile")

    async def stop(self) -> None:
        self.started = False
        if self._reconcile_task is not None:
            self._reconcile_task.cancel()
            try:
                await self._reconcile_task
            except (asyncio.CancelledError, Exception):
                pass
        shovels, self.shovels = list(self.shovels.values()), {}
        await asyncio.gather(*(s.stop() for s in shovels), return_exceptions=True)
        await self.federation.stop()

    # --- the parameter store's listener -----------------------------------------------------

    def _validate_shovel(self, vhost: str, name: str, value) -> None:
        validate(value)

    def parameter_changed(self, component: str, vhost: str, name: str, value) -> None:
        if not self.started:
            return
        if component == SHOVEL:
            old = self.shovels.pop((vhost, name), None)
            if old is not None:
                asyncio.get_running_loop().create_task(old.stop())
            if value is not None:
                self._start_shovel(vhost, name, value)
        elif component in (UPSTREAM, UPSTREAM_SET):
            self.federation.reconcile(force=True)

    def global_parameter_changed(self, name: str, value) -> None:
        if name == "cluster_name" and isinstance(value, str) and value:
            self.broker.cluster_name = value

    def runs_here(self, vhost: str, kind: str, name: str) -> bool:
        """--worker-mode queues: every worker serves the vhost, one of them runs each shovel
        and exchange link (a queue's link runs on the queue's owner, the one that holds it)."""
        return self.broker.directory.runs_here(vhost, kind, name)

    def exchanges_federated(self, federated: set[tuple[str, str]]) -> None:
        """The (vhost, exchange) pairs a federation policy applies to now, after each reconcile:
        a cluster (warren/cluster/runs.py) releases the runs of the others; alone, nothing to do."""

    def _start_shovel(self, vhost: str, name: str, value) -> None:
        if vhost not in self.broker.vhosts or not self.runs_here(vhost, "shovel", name):
            return  # another worker's vhost or shovel (or a vhost being deleted)
        try:
            definition = validate(value)
        except ValueError as e:  # stored before validation existed, or by hand: say so, run nothing
            log.error("shovel '%s' in vhost '%s' cannot run: %s", name, vhost, e)
            return
        shovel = Shovel(vhost, name, definition, self.creds, self.node, self._shovel_finished)
        self.shovels[(vhost, name)] = shovel
        shovel.start()

    def restart_shovel(self, vhost: str, name: str) -> bool:
        """Run the shovel again from its definition; False when another worker runs it."""
        value = self.parameters.get(SHOVEL, vhost, name)
        if value is self.parameters.MISSING or not self.runs_here(vhost, "shovel", name):
            return False
        self.parameter_changed(SHOVEL, vhost, name, value)
        return True

    def _shovel_finished(self, vhost: str, name: str) -> None:
        """src-delete-after reached: the shovel deletes its parameter, as RabbitMQ's does, on
        the writer thread (``write``): its fsync never holds the loop. The parameter is listed
        until the delete is durable; a definition put meanwhile is not deleted."""
        value = self.parameters.get(SHOVEL, vhost, name)
        if self.write is None:
            self.parameters.delete(SHOVEL, vhost, name)
            return
        task = asyncio.get_running_loop().create_task(self._delete_finished(vhost, name, value),
                                                      name=f"shovel {name} delete-after")
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def _delete_finished(self, vhost: str, name: str, value) -> None:
        try:
            await self.write(self._delete_if_unchanged, vhost, name, value)
        except Exception:  # a failed write keeps the parameter (and says so); the broker goes on
            log.exception("shovel '%s' in vhost '%s' done, but deleting its parameter failed", name, vhost)

    def _delete_if_unchanged(self, vhost: str, name: str, value) -> bool:
        """On the writer thread: delete the finished shovel's parameter unless it was put again."""
        if self.parameters.get(SHOVEL, vhost, name) != value:
            return False
        return self.parameters.delete(SHOVEL, vhost, name)

    # --- federation -------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            try:
                self.federation.reconcile()
            except Exception:
                log.exception("federation: applying policies failed")
            await asyncio.sleep(RECONCILE_S)

    # --- status -----------------------------------------------------------------------------

    def shovel_status(self, vhost: str | None = None) -> list[dict]:
        return [s.status() for (v, _), s in sorted(self.shovels.items()) if vhost is None or v == vhost]

    def link_status(self, vhost: str | None = None) -> list[dict]:
        return self.federation.status(vhost)
