"""``warren pipeline``: Spark jobs between Warren and files (archive a stream, replay files)."""

from __future__ import annotations

import click

__all__ = ["pipeline"]


@click.group()
def pipeline() -> None:
    """Spark jobs: archive a stream to Parquet, replay Parquet into an exchange; a stream's rate chart."""


def _add_commands() -> None:
    from warren.spark.jobs.archive import archive_command
    from warren.spark.jobs.replay import replay_command
    from warren.spark.jobs.stats import stats_command

    pipeline.add_command(archive_command, "archive")
    pipeline.add_command(replay_command, "replay")
    pipeline.add_command(stats_command, "stats")


_add_commands()
