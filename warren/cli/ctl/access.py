"""Users, virtual hosts, permissions and vhost limits.

The API's PUT on a user replaces the whole user (a PUT without a password leaves it without
one), so ``set_user_tags`` sends the stored hash back and ``change_password`` the stored
tags. rabbitmqctl's ``add_user`` refuses an existing user (70) where the API would overwrite
it, so it looks first. ``set_vhost_limits`` replaces the vhost's limits as rabbitmqctl does:
limits left out of the new document are cleared.
"""

from __future__ import annotations

import json

import click

from warren.cli.ctl import api, common_options, ctl, settings, vhost_option
from warren.cli.ctl.client import EX_DATAERR, EX_NOUSER, EX_SOFTWARE, EX_UNAVAILABLE, ApiError, CtlError, not_found_as
from warren.cli.ctl.output import emit_value, info

__all__ = ["no_such_user", "no_such_vhost", "missing_in_vhost", "parse_json_argument"]


def no_such_user(user: str) -> CtlError:
    return CtlError(EX_NOUSER, f'User "{user}" does not exist')


def no_such_vhost(vhost: str) -> CtlError:
    return CtlError(EX_DATAERR, f"Virtual host '{vhost}' does not exist")


def missing_in_vhost(client, vhost: str, what: str) -> CtlError:
    """A 404 on an object in a vhost: the vhost (65) or the object (69) is missing."""
    if not client.exists("vhosts", vhost):
        return no_such_vhost(vhost)
    return CtlError(EX_UNAVAILABLE, f"{what} not found")


def parse_json_argument(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise CtlError(EX_DATAERR, f"{what} is not valid JSON ({e}): {text}") from None
    if not isinstance(value, dict):
        raise CtlError(EX_DATAERR, f"{what} must be a JSON object, not {text}")
    return value


def _user(client, name: str) -> dict:
    with not_found_as(lambda: no_such_user(name)):
        return client.get("users", name)


def _vhost_or_user_missing(client, vhost: str, user: str, e: ApiError) -> CtlError | ApiError:
    """Which of the two a refused permissions call lacked (the API says only "vhost_or_user_not_found")."""
    if e.status not in (400, 404):
        return e
    if not client.exists("users", user):
        return no_such_user(user)
    if not client.exists("vhosts", vhost):
        return no_such_vhost(vhost)
    return e


def _delete(announce: str, missing, *path: str) -> None:
    """DELETE ``path``; a 404 is ``missing()`` (the user's or vhost's own message and code)."""
    s = settings()
    info(s, announce)
    with not_found_as(missing):
        api(s).delete(*path)


# --- users -------------------------------------------------------------------------------------

@ctl.command("add_user")
@click.argument("username")
@click.argument("password")
@common_options
def add_user(username: str, password: str) -> None:
    """Creates a user (no permissions, no tags). An empty PASSWORD disables password login."""
    s = settings()
    client = api(s)
    info(s, f'Adding user "{username}" ...')
    if client.exists("users", username):
        raise CtlError(EX_SOFTWARE, f'User "{username}" already exists')
    body = {"password": password, "tags": ""} if password else {"password_hash": "", "tags": ""}
    client.put("users", username, body=body)


@ctl.command("delete_user")
@click.argument("username")
@common_options
def delete_user(username: str) -> None:
    """Deletes a user (and its permissions)."""
    _delete(f'Deleting user "{username}" ...', lambda: no_such_user(username), "users", username)


@ctl.command("change_password")
@click.argument("username")
@click.argument("new_password")
@common_options
def change_password(username: str, new_password: str) -> None:
    """Changes a user's password (its tags stay)."""
    s = settings()
    client = api(s)
    info(s, f'Changing password for user "{username}" ...')
    user = _user(client, username)
    client.put("users", username, body={"password": new_password, "tags": _tags_text(user.get("tags"))})


def _tags_text(tags) -> str:
    return ",".join(tags) if isinstance(tags, list) else (tags or "")


@ctl.command("set_user_tags")
@click.argument("username")
@click.argument("tags", nargs=-1)
@common_options
def set_user_tags(username: str, tags: tuple[str, ...]) -> None:
    """Sets a user's tags (administrator, monitoring, policymaker, management, impersonator);
    none clears them. The password stays."""
    s = settings()
    client = api(s)
    info(s, f'Setting tags for user "{username}" to [{", ".join(tags)}] ...')
    user = _user(client, username)
    body = {"tags": ",".join(tags), "password_hash": user.get("password_hash", "")}
    if user.get("hashing_algorithm"):
        body["hashing_algorithm"] = user["hashing_algorithm"]
    client.put("users", username, body=body)


# --- virtual hosts -----------------------------------------------------------------------------

@ctl.command("add_vhost")
@click.argument("vhost")
@click.option("--description", default=None, help="Description.")
@click.option("--tags", default=None, help="Comma-separated tags.")
@click.option("--default-queue-type", type=click.Choice(["classic", "quorum", "stream"]), default=None,
              help="Queue type of declarations that name none.")
@common_options
def add_vhost(vhost: str, description: str | None, tags: str | None, default_queue_type: str | None) -> None:
    """Creates a virtual host (nothing happens if it exists)."""
    s = settings()
    client = api(s)
    info(s, f'Adding vhost "{vhost}" ...')
    if client.exists("vhosts", vhost):
        return  # as rabbitmqctl: done, and the existing one keeps its description and tags
    body = {}
    if description is not None:
        body["description"] = description
    if tags is not None:
        body["tags"] = tags
    if default_queue_type is not None:
        body["default_queue_type"] = default_queue_type
    client.put("vhosts", vhost, body=body)


@ctl.command("delete_vhost")
@click.argument("vhost")
@common_options
def delete_vhost(vhost: str) -> None:
    """Deletes a virtual host with its queues, exchanges and permissions; its connections are closed."""
    _delete(f'Deleting vhost "{vhost}" ...', lambda: no_such_vhost(vhost), "vhosts", vhost)


# --- permissions -------------------------------------------------------------------------------

@ctl.command("set_permissions")
@click.argument("username")
@click.argument("conf")
@click.argument("write")
@click.argument("read")
@vhost_option
@common_options
def set_permissions(username: str, conf: str, write: str, read: str, vhost: str) -> None:
    """Sets a user's configure, write and read permissions (regular expressions) in a vhost."""
    s = settings()
    client = api(s)
    info(s, f'Setting permissions for user "{username}" in vhost "{vhost}" ...')
    try:
        client.put("permissions", vhost, username, body={"configure": conf, "write": write, "read": read})
    except ApiError as e:
        raise _vhost_or_user_missing(client, vhost, username, e) from None


@ctl.command("clear_permissions")
@click.argument("username")
@vhost_option
@common_options
def clear_permissions(username: str, vhost: str) -> None:
    """Revokes a user's permissions in a vhost."""
    s = settings()
    client = api(s)
    info(s, f'Clearing permissions for user "{username}" in vhost "{vhost}" ...')
    try:
        client.delete("permissions", vhost, username)
    except ApiError as e:
        error = _vhost_or_user_missing(client, vhost, username, e)
        if error is e and e.status == 404:
            return  # both exist and there was nothing to clear: done, as rabbitmqctl
        raise error from None


# --- vhost limits ------------------------------------------------------------------------------

def _limits(client, vhost: str) -> dict:
    with not_found_as(lambda: no_such_vhost(vhost)):
        answer = client.get("vhost-limits", vhost)
    if isinstance(answer, list):
        merged: dict = {}
        for entry in answer:
            merged.update(entry.get("value") or {})
        return merged
    return dict(answer or {})


@ctl.command("set_vhost_limits")
@click.argument("definition")
@vhost_option
@common_options
def set_vhost_limits(definition: str, vhost: str) -> None:
    """Sets a vhost's limits, e.g. '{"max-connections": 100, "max-queues": 1000}' (a negative
    value means no limit). Limits not named are cleared, as with rabbitmqctl."""
    s = settings()
    limits = parse_json_argument(definition, "the limit definition")
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise CtlError(EX_DATAERR, f"limit {name} must be an integer, not {json.dumps(value)}")
    client = api(s)
    info(s, f'Setting vhost limits to "{definition}" for vhost "{vhost}" ...')
    current = _limits(client, vhost)
    for name, value in limits.items():
        client.put("vhost-limits", vhost, name, body={"value": value})
    for name in current:
        if name not in limits:
            client.delete("vhost-limits", vhost, name)


@ctl.command("clear_vhost_limits")
@vhost_option
@common_options
def clear_vhost_limits(vhost: str) -> None:
    """Clears all limits of a vhost."""
    s = settings()
    client = api(s)
    info(s, f'Clearing vhost "{vhost}" limits ...')
    for name in _limits(client, vhost):
        client.delete("vhost-limits", vhost, name)


@ctl.command("list_vhost_limits")
@vhost_option
@common_options
def list_vhost_limits(vhost: str) -> None:
    """Shows a vhost's limits as a JSON object."""
    s = settings()
    info(s, f'Listing limits for vhost "{vhost}" ...')
    limits = _limits(api(s), vhost)
    emit_value(s, limits, json.dumps(limits, separators=(",", ":")))

