"""`warren ctl`: rabbitmqctl's everyday commands against a running broker, over its HTTP API.

The commands, their arguments, column names and exit codes are rabbitmqctl's; they reach the
broker through the management HTTP API (RabbitMQ's paths and JSON), so they work against
Warren and against RabbitMQ alike. docs/ctl.md lists the commands and the exit codes.

Where the broker is and who asks: ``--url`` (``WARREN_CTL_URL``; without either, a local
Warren found by `discover.py`, else ``http://127.0.0.1:15672``, and a line on stderr says which
was used), ``--username``/``--password`` (``WARREN_CTL_USER``/``WARREN_CTL_PASS``,
or the URL's ``user:pass@``, default guest/guest). The general options (those, ``--formatter``,
``-q``, ``-s``, ``-t``) go before or after the command name, as with rabbitmqctl.

Modules: `client.py` (HTTP and exit codes), `output.py` (formatters), `listing.py` (the
``list_*`` commands), `node.py` (status, ping, await_startup), `access.py` (users, vhosts,
permissions, limits), `objects.py` (queues, connections, policies), `definitions.py`,
`parameters.py` (runtime parameters, shovels, federation links), `quorum.py` (a cluster's
replicated quorum queues: add_member, delete_member, grow, shrink, quorum_status), `discover.py`
(a local Warren).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import click

from warren.cli.ctl.client import EX_SOFTWARE, EX_USAGE, Api, ApiError, CtlError, exit_code_for_status
from warren.cli.ctl.discover import find_local_warren
from warren.cli.ctl.output import FORMATTERS, info

__all__ = ["ctl", "Settings", "settings", "api", "common_options", "vhost_option", "CtlCommand"]

DEFAULT_URL = "http://127.0.0.1:15672"
DEFAULT_TIMEOUT_S = 60.0
# Field tables nest (a queue argument may hold tables in tables) deeper than Python's default
# recursion limit of 1000 lets json decode; 10000 levels stay well within the C stack.
RECURSION_LIMIT = 10000


@dataclass(frozen=True)
class Settings:
    url: str
    username: str
    password: str
    formatter: str
    quiet: bool
    silent: bool
    no_table_headers: bool
    timeout: float
    url_from: str | None = None  # where the URL came from when neither --url nor WARREN_CTL_URL gave it


def _remember(ctx: click.Context, param: click.Parameter, value):
    """Keep a general option given on the group or on the command (the later one wins)."""
    if value is not None and value is not False:
        # kept as "url", "quiet", ...: the parameter names carry a prefix so that they never
        # clash with a command's own arguments (add_user's USERNAME and PASSWORD)
        ctx.ensure_object(dict)[param.name.removeprefix("opt_")] = value
    return value


def common_options(f):
    """The general options, accepted before and after the command name."""
    options = [
        click.option("--url", "opt_url", help=f"The broker's HTTP API [env WARREN_CTL_URL; default: a running Warren found here (its data folder's listeners.json, the warren.toml), else {DEFAULT_URL}]."),
        click.option("--username", "opt_username", help="User [env WARREN_CTL_USER; default guest]."),
        click.option("--password", "opt_password", help="Password [env WARREN_CTL_PASS; default guest]."),
        click.option("--formatter", "opt_formatter", type=click.Choice(FORMATTERS),
                     help="Output format [default table]."),
        click.option("--quiet", "-q", "opt_quiet", is_flag=True, default=False,
                     help="No informational messages."),
        click.option("--silent", "-s", "opt_silent", is_flag=True, default=False,
                     help="No informational messages and no table header row."),
        click.option("--no-table-headers", "opt_no_table_headers", is_flag=True, default=False,
                     help="No table header row."),
        click.option("--timeout", "-t", "opt_timeout", type=click.FloatRange(min=0, min_open=True),
                     help=f"Seconds to wait for the broker's answer [default {DEFAULT_TIMEOUT_S:g}]."),
    ]
    for option in reversed(options):
        f = option(f)
    # the values are kept in ctx.obj by _remember, not passed to the function
    for param in f.__click_params__[-len(options):]:
        param.expose_value = False
        param.callback = _remember
        param.is_eager = False
    return f


def vhost_option(f):
    return click.option("--vhost", "-p", default="/", show_default=True, help="Virtual host.")(f)


def settings() -> Settings:
    """The effective general options: command line, then environment, then URL, then defaults."""
    given = click.get_current_context().find_object(dict) or {}
    env = os.environ
    url, url_from = given.get("url") or env.get("WARREN_CTL_URL"), None
    if not url:  # beside RabbitMQ, 15672 is RabbitMQ's: a local Warren first (discover.py)
        found = find_local_warren(env)
        if found is not None:
            url, url_from = found.url, f"the Warren found in {found.where} (--url to choose another)"
        else:
            url, url_from = DEFAULT_URL, ("RabbitMQ's default management port: no --url, WARREN_CTL_URL or "
                                          "running Warren found here")
    parts = urlsplit(url)
    username = given.get("username") or env.get("WARREN_CTL_USER") or (
        unquote(parts.username) if parts.username else None) or "guest"
    password = given.get("password")
    if password is None:
        password = env.get("WARREN_CTL_PASS")
    if password is None:
        password = unquote(parts.password) if parts.password is not None else "guest"
    return Settings(url=url, username=username, password=password,
                    formatter=given.get("formatter") or "table",
                    quiet=bool(given.get("quiet")), silent=bool(given.get("silent")),
                    no_table_headers=bool(given.get("no_table_headers")),
                    timeout=float(given.get("timeout") or DEFAULT_TIMEOUT_S), url_from=url_from)


def api(s: Settings | None = None) -> Api:
    s = s or settings()
    if s.url_from is not None:  # say which broker answers when the command line did not (once per command)
        meta = click.get_current_context().meta
        if not meta.get("warren.ctl.url_said"):
            meta["warren.ctl.url_said"] = True
            info(s, f"Using {_without_password(s.url)}, {s.url_from}")
    return Api(s.url, s.username, s.password, s.timeout)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _as_usage(e: click.UsageError) -> click.UsageError:
    e.exit_code = EX_USAGE  # rabbitmqctl's code for a bad command line (click's own is 2)
    return e


class _UsageExits64:
    """Mixed into ctl's command and group: a bad command line exits 64 (rabbitmqctl), not click's 2."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as e:
            raise _as_usage(e) from None


class CtlCommand(_UsageExits64, click.Command):
    """A ctl command: usage errors exit 64, API errors exit with their mapped code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ApiError as e:
            raise CtlError(exit_code_for_status(e.status), e.describe()) from None
        except RecursionError:
            raise CtlError(EX_SOFTWARE, "a value in the broker's answer is nested too deeply to print") from None


class CtlGroup(_UsageExits64, click.Group):
    command_class = CtlCommand

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise _as_usage(e) from None


@click.group(cls=CtlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@common_options
def ctl() -> None:
    """rabbitmqctl's everyday commands against a running broker (Warren or RabbitMQ), over its
    HTTP API. Exit codes: 0 ok, 64 usage, 65 data error or unknown vhost, 66 no input file,
    67 unknown user, 69 broker unreachable or object not found, 70 software error, 73 cannot
    write, 75 timed out, 77 access refused (docs/ctl.md)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))


# the commands register themselves on `ctl`
from warren.cli.ctl import access, definitions, listing, node, objects, parameters, quorum  # noqa: E402,F401
