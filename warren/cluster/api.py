"""Every node's HTTP API answers for the whole cluster: the other nodes' queues, connections,
channels, consumers, vhost and overview figures, shovel and federation link status, listed with
this node's; closing a connection or restarting a shovel that another node holds. RabbitMQ's
management plugin on any node does the same over Erlang distribution; here over the inter-node
links (links.py), through the seam the worker processes of one node already use: the vhost
directory's ``api_rows``/``api_act`` (warren/broker/directory.py), answered on the other side by
that node's own ``directory.api`` (warren/management/api/merged.py ``PeerApi``). The HTTP API
never learns which it is.

A node that does not answer in time (killed, cut off) is left out of that answer and logged;
the rest of the cluster is listed.
"""

from __future__ import annotations

import asyncio
import logging

from warren.errors import InternalError

__all__ = ["ClusterApi", "NODE_LOCAL"]

log = logging.getLogger("warren.cluster")

# kinds that stay each node's own: a Prometheus scrape answers for the scraped node (each node
# is scraped), and proxy consumers are a worker-process matter
NODE_LOCAL = frozenset({"metrics", "proxy_consumers"})


class ClusterApi:
    """The directory's view of the other nodes (``directory.elsewhere``) and the answers to them."""

    def __init__(self, directory) -> None:
        self.directory = directory
        self.links = None  # NodeLinks, set once listening (warren/server/server.py)

    # --- what the other nodes ask of this one (NodeLinks' handler) -----------------------------

    def node_request(self, node: str, op: str, args: tuple):
        api = self.directory.api  # None without an HTTP API: nothing to show
        if op == "api_rows":
            kind, kind_args = args
            return [] if api is None or kind in NODE_LOCAL else api.rows(kind, *kind_args)
        if op == "api_act":
            what, what_args = args
            return False if api is None else api.act(what, *what_args)
        raise InternalError(f"node {node} asked for {op!r}, which this node does not know")

    # --- what this node asks of the others -------------------------------------------------------

    async def api_rows(self, kind: str, args: tuple) -> list:
        if kind in NODE_LOCAL or self.links is None:
            return []
        peers = self.links.running_peers()
        answers = await asyncio.gather(*(self.links.ask(p, "api_rows", kind, args) for p in peers),
                                       return_exceptions=True)
        rows = []
        for peer, answer in zip(peers, answers):
            if isinstance(answer, BaseException):
                log.warning("cluster: node %s's %s are missing from this answer: %s", peer, kind, answer)
                continue
            rows.extend(answer)
        return rows

    async def api_act(self, what: str, args: tuple) -> bool:
        if self.links is None:
            return False
        peers = self.links.running_peers()
        answers = await asyncio.gather(*(self.links.ask(p, "api_act", what, args) for p in peers),
                                       return_exceptions=True)
        for peer, answer in zip(peers, answers):
            if isinstance(answer, BaseException):
                log.warning("cluster: node %s could not be asked to %s: %s", peer, what, answer)
        return any(answer is True for answer in answers)
