"""Runtime parameters, shovels and federation links: rabbitmqctl's `set_parameter`,
`clear_parameter`, `list_parameters`, `shovel_status`, `delete_shovel`, `federation_status`.

A parameter's VALUE is JSON (a shovel's or a federation upstream's definition); the broker
validates it (a bad shovel definition exits 65 with the broker's reason). Clearing a parameter
that does not exist exits 69; an unknown vhost 65, as for policies.
"""

from __future__ import annotations

import json

import click

from warren.cli.ctl import api, common_options, ctl, settings, vhost_option
from warren.cli.ctl.access import missing_in_vhost, no_such_vhost
from warren.cli.ctl.client import EX_DATAERR, ApiError, CtlError, not_found_as
from warren.cli.ctl.output import emit_rows, info

__all__ = []

# rabbitmqctl shovel_status's columns and where /api/shovels has them
SHOVEL_COLUMNS = (("name", "name"), ("vhost", "vhost"), ("type", "type"), ("state", "state"),
                  ("source", "src_uri"), ("destination", "dest_uri"), ("termination_reason", "reason"))
FEDERATION_COLUMNS = (("id", "id"), ("type", "type"), ("vhost", "vhost"), ("upstream", "upstream"),
                      ("exchange", "exchange"), ("queue", "queue"), ("upstream_exchange", "upstream_exchange"),
                      ("upstream_queue", "upstream_queue"), ("status", "status"), ("error", "error"),
                      ("uri", "uri"), ("last_changed", "timestamp"))


@ctl.command("set_parameter")
@click.argument("component")
@click.argument("name")
@click.argument("value")
@vhost_option
@common_options
def set_parameter(component: str, name: str, value: str, vhost: str) -> None:
    """Sets runtime parameter NAME of COMPONENT (shovel, federation-upstream,
    federation-upstream-set...) to VALUE, a JSON value."""
    s = settings()
    try:
        parsed = json.loads(value)
    except ValueError as e:
        raise CtlError(EX_DATAERR, f"the parameter value is not valid JSON ({e}): {value}") from None
    client = api(s)
    info(s, f'Setting runtime parameter "{name}" for component "{component}" to "{value}" in vhost "{vhost}" ...')
    with not_found_as(lambda: no_such_vhost(vhost)):
        client.put("parameters", component, vhost, name, body={"component": component, "vhost": vhost,
                                                              "name": name, "value": parsed})


@ctl.command("clear_parameter")
@click.argument("component")
@click.argument("name")
@vhost_option
@common_options
def clear_parameter(component: str, name: str, vhost: str) -> None:
    """Clears runtime parameter NAME of COMPONENT (a shovel stops, an upstream goes)."""
    s = settings()
    client = api(s)
    info(s, f'Clearing runtime parameter "{name}" for component "{component}" on vhost "{vhost}" ...')
    with not_found_as(lambda: missing_in_vhost(client, vhost, f"Parameter {component} '{name}' in vhost '{vhost}'")):
        client.delete("parameters", component, vhost, name)


@ctl.command("list_parameters")
@vhost_option
@common_options
def list_parameters(vhost: str) -> None:
    """Lists the runtime parameters of a vhost (component, name, value)."""
    s = settings()
    client = api(s)
    info(s, f'Listing runtime parameters for vhost "{vhost}" ...')
    try:
        items = [p for p in (client.get("parameters") or []) if p.get("vhost") == vhost]
    except ApiError:
        raise
    if not items and not client.exists("vhosts", vhost):
        raise no_such_vhost(vhost)
    emit_rows(s, ("component", "name", "value"),
              ([p.get("component"), p.get("name"), json.dumps(p.get("value"), separators=(",", ":"))]
               for p in items))


@ctl.command("shovel_status")
@common_options
def shovel_status() -> None:
    """Each shovel's state (starting, running, terminated with its reason)."""
    s = settings()
    info(s, "Shovel status on node ...")
    items = api(s).get("shovels") or []
    emit_rows(s, [c for c, _ in SHOVEL_COLUMNS], ([i.get(k) for _, k in SHOVEL_COLUMNS] for i in items))


@ctl.command("delete_shovel")
@click.argument("name")
@vhost_option
@common_options
def delete_shovel(name: str, vhost: str) -> None:
    """Deletes a dynamic shovel (its runtime parameter)."""
    s = settings()
    client = api(s)
    info(s, f'Deleting shovel {name} in vhost {vhost}')
    with not_found_as(lambda: missing_in_vhost(client, vhost, f"Shovel '{name}' in vhost '{vhost}'")):
        client.delete("parameters", "shovel", vhost, name)


@ctl.command("federation_status")
@common_options
def federation_status() -> None:
    """Each federation link's status."""
    s = settings()
    info(s, "Listing federation links on node ...")
    items = api(s).get("federation-links") or []
    emit_rows(s, [c for c, _ in FEDERATION_COLUMNS], ([i.get(k) for _, k in FEDERATION_COLUMNS] for i in items))
