"""The ``list_*`` commands: rabbitmqctl's columns, read from the management API's objects.

Each listing names the API path it reads, rabbitmqctl's default columns, and every column it
accepts with where the value sits in the API's JSON (most have the same name; rabbitmqctl's
``pid`` columns are the API's ``name``, a binding's ``source_name`` is its ``source``, and so
on). A column the broker does not report prints empty; a column rabbitmqctl does not know is
a usage error (64), as with rabbitmqctl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import click

from warren.cli.ctl import api, common_options, ctl, settings, vhost_option
from warren.cli.ctl.client import EX_DATAERR, EX_USAGE, ApiError, CtlError
from warren.cli.ctl.output import emit_rows, info

__all__ = ["LISTINGS", "Listing", "fetch"]


@dataclass(frozen=True)
class Listing:
    what: str                       # "queues": the banner's word
    path: Callable[[str], tuple]    # vhost -> API path segments
    defaults: tuple[str, ...]       # rabbitmqctl's default columns
    columns: dict[str, Any] = field(default_factory=dict)  # column -> dotted API path or callable(obj)
    per_vhost: bool = True

    def value(self, column: str, obj: dict) -> Any:
        where = self.columns[column]
        if callable(where):
            return where(obj)
        for key in where.split("."):
            if not isinstance(obj, dict):
                return None
            obj = obj.get(key)
        return obj


def _same(*names: str) -> dict[str, str]:
    return {n: n for n in names}


LISTINGS: dict[str, Listing] = {
    "queues": Listing(
        "queues", lambda v: ("queues", v), ("name", "messages"),
        {**_same("arguments", "auto_delete", "consumer_capacity", "consumer_utilisation", "consumers",
                 "disk_reads", "disk_writes", "durable", "exclusive", "exclusive_consumer_tag",
                 "head_message_timestamp", "leader", "members", "memory", "message_bytes",
                 "message_bytes_persistent", "message_bytes_ram", "message_bytes_ready",
                 "message_bytes_unacknowledged", "messages", "messages_persistent", "messages_ram",
                 "messages_ready", "messages_ready_ram", "messages_unacknowledged",
                 "messages_unacknowledged_ram", "name", "online", "policy", "slave_pids", "state",
                 "synchronised_slave_pids", "type", "vhost", "idle_since"),
         # Erlang process ids have no equivalent over HTTP: the node the queue lives on stands in
         "pid": "node", "owner_pid": "owner_pid_details.name",
         "exclusive_consumer_pid": "exclusive_consumer_details.channel_details.name"}),
    "exchanges": Listing(
        "exchanges", lambda v: ("exchanges", v), ("name", "type"),
        _same("arguments", "auto_delete", "durable", "internal", "name", "policy", "type", "vhost")),
    "bindings": Listing(
        "bindings", lambda v: ("bindings", v),
        ("source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"),
        {"source_name": "source", "source_kind": lambda b: "exchange", "destination_name": "destination",
         "destination_kind": "destination_type", "routing_key": "routing_key", "arguments": "arguments",
         "properties_key": "properties_key", "vhost": "vhost"}),
    "connections": Listing(
        "connections", lambda v: ("connections",), ("user", "peer_host", "peer_port", "state"),
        {**_same("auth_mechanism", "channel_max", "channels", "client_properties", "connected_at",
                 "frame_max", "host", "name", "peer_cert_issuer", "peer_cert_subject", "peer_cert_validity",
                 "peer_host", "peer_port", "port", "protocol", "recv_cnt", "recv_oct", "send_cnt",
                 "send_oct", "send_pend", "ssl", "ssl_cipher", "ssl_hash", "ssl_key_exchange",
                 "ssl_protocol", "state", "timeout", "user", "vhost", "node"),
         "pid": "name"}, per_vhost=False),
    "channels": Listing(
        "channels", lambda v: ("channels",), ("pid", "user", "consumer_count", "messages_unacknowledged"),
        {**_same("acks_uncommitted", "confirm", "consumer_count", "global_prefetch_count",
                 "messages_unacknowledged", "messages_uncommitted", "messages_unconfirmed", "name",
                 "number", "prefetch_count", "transactional", "user", "vhost", "state", "node"),
         "pid": "name", "connection": "connection_details.name"}, per_vhost=False),
    "consumers": Listing(
        "consumers", lambda v: ("consumers", v),
        ("queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments"),
        {**_same("ack_required", "active", "activity_status", "arguments", "consumer_tag", "prefetch_count",
                 "exclusive"),
         "queue_name": "queue.name", "channel_pid": "channel_details.name", "vhost": "queue.vhost"}),
    "users": Listing(
        "users", lambda v: ("users",), ("user", "tags"),
        {"user": "name", "name": "name", "tags": "tags", "limits": "limits"}, per_vhost=False),
    "vhosts": Listing(
        "vhosts", lambda v: ("vhosts",), ("name",),
        _same("cluster_state", "default_queue_type", "description", "name", "tags", "tracing",
              "messages", "messages_ready", "messages_unacknowledged"), per_vhost=False),
    "permissions": Listing(
        "permissions", lambda v: ("vhosts", v, "permissions"), ("user", "configure", "write", "read"),
        _same("user", "configure", "write", "read", "vhost")),
    "policies": Listing(
        "policies", lambda v: ("policies", v), ("vhost", "name", "pattern", "apply-to", "definition", "priority"),
        _same("vhost", "name", "pattern", "apply-to", "definition", "priority")),
}


def check_columns(listing: Listing, columns: tuple[str, ...]) -> tuple[str, ...]:
    # rabbitmqctl also takes "name,messages" as one argument
    wanted = tuple(c for arg in columns for c in arg.split(",") if c) or listing.defaults
    unknown = [c for c in wanted if c not in listing.columns]
    if unknown:
        raise CtlError(EX_USAGE, f"info key(s) {', '.join(unknown)} are not supported; must be one of "
                                 f"{', '.join(sorted(listing.columns))}")
    return wanted


def fetch(listing: Listing, vhost: str) -> list:
    """The API's objects of a listing; an unknown vhost is a data error (65)."""
    try:
        objects = api().get(*listing.path(vhost))
    except ApiError as e:
        if e.status == 404 and listing.per_vhost:
            raise CtlError(EX_DATAERR, f"Virtual host '{vhost}' does not exist") from None
        raise
    if isinstance(objects, dict) and "items" in objects:  # a pagination object
        objects = objects["items"]
    return objects or []


def run_listing(name: str, vhost: str | None, columns: tuple[str, ...]) -> None:
    listing = LISTINGS[name]
    wanted = check_columns(listing, columns)
    s = settings()
    if listing.per_vhost and vhost is not None:
        info(s, f"Listing {listing.what} for vhost {vhost} ...")
    else:
        info(s, f"Listing {listing.what} ...")
    objects = fetch(listing, vhost if vhost is not None else "/")
    emit_rows(s, wanted, ([listing.value(c, o) for c in wanted] for o in objects))


def _register(name: str, summary: str) -> None:
    listing = LISTINGS[name]

    def command(columns: tuple[str, ...], vhost: str | None = None) -> None:
        run_listing(name, vhost, columns)

    command.__doc__ = (f"{summary}\n\nCOLUMNS (default: {' '.join(listing.defaults)}) are any of: "
                       f"{', '.join(sorted(listing.columns))}.")
    command = click.argument("columns", nargs=-1)(command)
    if listing.per_vhost:
        command = vhost_option(command)
    command = common_options(command)
    ctl.command(f"list_{name}")(command)


for _name, _summary in [
    ("queues", "Lists the queues of a vhost and their properties."),
    ("exchanges", "Lists the exchanges of a vhost."),
    ("bindings", "Lists the bindings of a vhost."),
    ("connections", "Lists the broker's AMQP connections."),
    ("channels", "Lists the broker's channels."),
    ("consumers", "Lists the consumers of a vhost."),
    ("users", "Lists the users and their tags."),
    ("vhosts", "Lists the virtual hosts."),
    ("permissions", "Lists the users' permissions in a vhost."),
]:
    _register(_name, _summary)
