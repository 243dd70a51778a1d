"""The `warren` command line: the click group `main` and its sub-commands.

Each command lives in its own module (`serve.py`, `policy.py`, ...). Commands whose imports are
heavy or optional are registered lazily (`LAZY_COMMANDS`): their module is imported only when
that command runs or its help is shown, so `warren serve` never imports pyspark.
"""

from __future__ import annotations

import importlib

import click

from warren import __version__

__all__ = ["main", "LAZY_COMMANDS"]

# command name -> ("module", "attribute", one-line help shown in `warren --help`)
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    # `warren pipeline archive|replay`: Spark jobs (warren/spark/pipeline.py), need pyspark
    "pipeline": ("warren.spark.pipeline", "pipeline",
                 "Spark jobs: archive a stream to Parquet, replay Parquet into an exchange."),
}


class LazyGroup(click.Group):
    """A click group that imports the modules of `LAZY_COMMANDS` only when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        module_name, attribute, _ = LAZY_COMMANDS[name]
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # `warren --help` lists the lazy commands from their one-line help, without importing them
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and super().get_command(ctx, name) is None:
                rows.append((name, LAZY_COMMANDS[name][2]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="warren")
def main() -> None:
    """Warren, an AMQP message broker."""


from warren.cli.serve import serve  # noqa: E402
from warren.cli.policy import policy  # noqa: E402

main.add_command(serve)
main.add_command(policy)
