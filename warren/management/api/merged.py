"""--worker-mode queues: lists that merge every worker's objects (warren/spread).

Each worker's API holds the objects of its own process (its queues, its connections); the
others' come over the links as the JSON their own API would answer (``Spread.api_rows``), and
are listed, sorted and paged with ours by ``reply_objects`` as ``RemoteRow``s: what a field
getter asks of a remote row is read from its JSON.
"""

from __future__ import annotations

from warren.management.api.common import lookup

__all__ = ["RemoteRow", "merged_fields", "PeerApi", "add_figures"]


class RemoteRow:
    """An object another worker holds, as its owner's API shows it (its JSON)."""

    __slots__ = ("json", "name")

    def __init__(self, json: dict) -> None:
        self.json = json
        self.name = json.get("name")


def merged_fields(fields: dict) -> dict:
    """Field getters that read a ``RemoteRow``'s JSON and ask a local object as before."""
    return {k: (lambda o, g=g, k=k: lookup(o.json, k) if type(o) is RemoteRow else g(o)) for k, g in fields.items()}


def add_figures(total: dict, more: dict) -> None:
    """Add another worker's figures (``more``: the same JSON shape) into ``total``: numbers key
    by key, nested, and a history's ``samples`` point by point (``_add_samples``)."""
    for k, v in more.items():
        mine = total.get(k)
        if k == "samples" and isinstance(mine, list) and isinstance(v, list):
            _add_samples(total, v)
        elif isinstance(v, dict) and isinstance(mine, dict):
            add_figures(mine, v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(mine, (int, float)) \
                and k not in ("avg", "avg_rate"):  # those two: from the summed samples
            total[k] = round(mine + v, 1) if isinstance(v, float) else mine + v


def _add_samples(details: dict, theirs: list) -> None:
    """Sum another worker's points into ours by timestamp, then ``avg`` and ``avg_rate`` again
    (stats._ranged's). Both ends the points at now rounded down to the increment: a worker that
    answered across a boundary has one point more at one end, where its nearest point counts."""
    ours = details["samples"]
    if not ours or not theirs:
        return
    by_time = {s["timestamp"]: s["sample"] for s in theirs}
    for s in ours:
        ts = s["timestamp"]
        s["sample"] += by_time.get(ts, theirs[0]["sample"] if ts > theirs[0]["timestamp"] else theirs[-1]["sample"])
    points = len(ours)
    if points > 1:
        incr = ours[0]["timestamp"] - ours[1]["timestamp"]
        details["avg_rate"] = (ours[0]["sample"] - ours[-1]["sample"]) * 1000 / ((points - 1) * incr)
        details["avg"] = sum(s["sample"] for s in ours) / points


class PeerApi:
    """What another worker's API (or Prometheus scrape) asks of ours (``Spread``'s ``api``): our
    objects' JSON, and acts on objects we hold (closing a connection, reading a stream). An
    answer that waits (a stream's read, the owner of a consumer asked in turn) is a coroutine:
    the links answer once it is done. ``more_rows`` are kinds other parts of the node answer
    (the server passes the Prometheus snapshot's, warren/metrics: the HTTP API does not import it)."""

    def __init__(self, app, more_rows: dict | None = None) -> None:
        self.app = app
        self.more_rows = more_rows or {}

    def rows(self, kind: str, *args):
        from warren.management.api import connections, queues
        if kind == "queues":
            return queues.local_rows(self.app, *args)
        if kind == "connections":
            return connections.local_connection_rows(self.app)
        if kind == "channels":
            return connections.local_channel_rows(self.app)
        if kind == "consumers":
            return connections.consumer_rows(self.app, *args)
        if kind == "proxy_consumers":
            return connections.proxy_consumer_rows(self.app, *args)
        if kind in self.more_rows:  # "metrics": a Prometheus scrape of another worker (warren/metrics/server.py)
            return self.more_rows[kind](*args)
        if kind == "vhosts":
            from warren.management.api.vhosts import local_vhost_rows
            return local_vhost_rows(self.app, *args)
        if kind in ("shovel_status", "link_status"):  # warren/management/api/federation.py: what runs here
            from warren.management.api.common import SERVER
            server = self.app[SERVER]
            manager = server.federation if server is not None else None
            return getattr(manager, kind)(*args) if manager is not None else []
        if kind == "totals":
            from warren.management.api.overview import totals
            return [totals(self.app, *args)]
        return []

    def act(self, what: str, *args):
        from warren.management.api import connections, queues
        if what == "close_connection":
            return connections.close_local(self.app, *args)
        if what == "get":
            return queues.local_get(self.app, *args)
        if what == "restart_shovel":  # warren/management/api/federation.py: the worker that runs it restarts it
            from warren.management.api.common import SERVER
            server = self.app[SERVER]
            return server is not None and server.federation.restart_shovel(*args)
        if what == "stream":
            from warren.management.api.streams import local_answer
            return local_answer(self.app, *args)
        if what == "forget_vhost":  # a deleted vhost's counts (a new one of that name starts at 0)
            from warren.management.api.common import STATS
            self.app[STATS].forget_vhost(*args)
            return True
        return False
