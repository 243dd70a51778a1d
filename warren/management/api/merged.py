"""--worker-mode queues: lists that merge every worker's objects (warren/spread).

Each worker's API holds the objects of its own process (its queues, its connections); the
others' come over the links as the JSON their own API would answer (``Spread.api_rows``), and
are listed, sorted and paged with ours by ``reply_objects`` as ``RemoteRow``s: what a field
getter asks of a remote row is read from its JSON.
"""

from __future__ import annotations

from warren.management.api.common import lookup

__all__ = ["RemoteRow", "merged_fields", "PeerApi"]


class RemoteRow:
    """An object another worker holds, as its owner's API shows it (its JSON)."""

    __slots__ = ("json", "name")

    def __init__(self, json: dict) -> None:
        self.json = json
        self.name = json.get("name")


def merged_fields(fields: dict) -> dict:
    """Field getters that read a ``RemoteRow``'s JSON and ask a local object as before."""
    return {k: (lambda o, g=g, k=k: lookup(o.json, k) if type(o) is RemoteRow else g(o)) for k, g in fields.items()}


class PeerApi:
    """What another worker's API asks of ours (``Spread``'s ``api``): our objects' JSON, and
    acts on objects we hold (closing a connection)."""

    def __init__(self, app) -> None:
        self.app = app

    def rows(self, kind: str, *args) -> list[dict]:
        from warren.management.api import connections, queues
        if kind == "queues":
            return queues.local_rows(self.app, *args)
        if kind == "connections":
            return connections.local_connection_rows(self.app)
        if kind == "channels":
            return connections.local_channel_rows(self.app)
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
        return False
