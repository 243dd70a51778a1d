"""The `warren` command line: the click group `main` and its sub-commands.

Each command lives in its own module (`serve.py`, `policy.py`, ...). Commands whose imports are
heavy or optional are registered lazily (`LAZY_COMMANDS`): their module is imported only when
that command runs or its help is shown, so `warren serve` never imports pyspark.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

import click

from warren import DISTRIBUTION, __version__, other_distributions

__all__ = ["main", "LAZY_COMMANDS", "LazyCommand", "version_lines"]


@dataclass(frozen=True)
class LazyCommand:
    module: str  # imported only when the command is used
    attribute: str  # the click command in that module
    help: str  # one line for `warren --help`
    needs: str | None = None  # an optional distribution's top-level module the command cannot run without
    extra: str | None = None  # the extra that installs it: pip install 'warren-broker[extra]'


# command name -> where it is; register further commands with one line here
LAZY_COMMANDS: dict[str, LazyCommand] = {
    "pipeline": LazyCommand("warren.spark.jobs.pipeline", "pipeline",
                            "Spark jobs: archive a stream to Parquet, replay Parquet into an exchange.",
                            needs="pyspark", extra="spark"),
    "ctl": LazyCommand("warren.cli.ctl", "ctl", "rabbitmqctl's everyday commands against a running broker."),
    "policy": LazyCommand("warren.cli.policy", "policy", "Policies through the running broker (ctl's set_policy...)."),
    "store": LazyCommand("warren.cli.store", "store", "The data folder's store files, offline: `store check DATA_DIR`."),
}


def _missing(name: str, lazy: LazyCommand) -> click.Command:
    """A stand-in for a command whose optional dependency is not installed: one line, exit 1."""

    @click.command(name, help=lazy.help, context_settings={"ignore_unknown_options": True,
                                                           "allow_extra_args": True, "help_option_names": []})
    def missing() -> None:
        click.echo(f"Error: `warren {name}` needs {lazy.needs}, which is not installed; install it with: "
                   f"pip install '{DISTRIBUTION}[{lazy.extra}]' (in a clone: pip install -e '.[{lazy.extra}]')", err=True)
        sys.exit(1)

    return missing


class LazyGroup(click.Group):
    """A click group that imports the modules of `LAZY_COMMANDS` only when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        lazy = LAZY_COMMANDS[name]
        if lazy.needs is not None:
            try:
                importlib.import_module(lazy.needs)
            except ImportError:
                return _missing(name, lazy)
        return getattr(importlib.import_module(lazy.module), lazy.attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # `warren --help` lists the lazy commands from their one-line help, without importing them
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and super().get_command(ctx, name) is None:
                rows.append((name, LAZY_COMMANDS[name].help))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def version_lines() -> list[str]:
    """What `warren --version` prints: the version, the distribution it came from (PyPI's
    `warren` is another project), where it is installed, and whether the C accelerators load."""
    import os
    import platform

    import warren
    try:  # each beside its Python twin (setup.py)
        from warren.broker import _messages  # noqa: F401
        from warren.codec import _speedups  # noqa: F401
        from warren.store import _records  # noqa: F401
        accelerators = "compiled"
    except ImportError:
        accelerators = "not compiled (pure Python)"
    lines = [f"warren {__version__} (distribution {DISTRIBUTION}, the Warren message broker)",
             f"Python {platform.python_version()}, C accelerators {accelerators}, "
             f"package at {os.path.dirname(os.path.abspath(warren.__file__))}"]
    for other in other_distributions():
        lines.append(f"warning: the distribution '{other}' also installs a package named `warren` in this "
                     f"environment and may have overwritten files of {DISTRIBUTION} (PyPI's `warren` is an "
                     f"unrelated project): pip uninstall {other} {DISTRIBUTION}, then install {DISTRIBUTION} again "
                     f"(docs/install.md)")
    return lines


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    for line in version_lines():
        click.echo(line, err=line.startswith("warning:"))
    ctx.exit()


@click.group(cls=LazyGroup)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version, the distribution (warren-broker) and where it is installed, then exit.")
def main() -> None:
    """Warren, an AMQP message broker (distribution warren-broker).

    Shell completion (click's): eval "$(_WARREN_COMPLETE=bash_source warren)" in ~/.bashrc
    (zsh_source, fish_source for those shells; docs/cli.md).
    """


from warren.cli.serve import serve  # noqa: E402

main.add_command(serve)
