"""``warren pipeline replay``: publish Parquet files (as ``warren pipeline archive`` writes them) again.

The files hold rows of the data source schema (body, routing_key, exchange, headers,
properties, offset, stream); the rows go through the ``warren`` writer, so each is published
with confirms and the command fails if any publish is nacked, returned or unconfirmed.
``--exchange`` replaces the archived exchange; the archived routing keys are kept unless
``--routing-key`` replaces them. ``offset`` and ``stream`` are not published; columns the writer
does not know are left out. Rows are published by several tasks in parallel, so the order
across files is not kept; ``--ordered`` publishes from one task, sorted by (stream, offset).

Rows with a ``property_list`` (every archive since it is kept by default) are published with
their property list octet for octet: every basic property (delivery mode and priority
included) and every header with its field type. What a broker imposes is the one difference
(docs/spark.md, "Round trips"): it accepts a ``user_id`` property only when it names the user
publishing, so a message whose ``user_id`` names another user is published without it, and
the command says how many were (``--keep-user-id`` keeps it and lets the broker refuse them).

Running a replay twice publishes everything twice, unless both runs use the same
``--write-id`` and the target exchange or queue deduplicates (``x-message-deduplication``):
message ids are ``<write id>:0:<partition>:<row>`` and repeat for the same files. Only then is a
deduplication header added to each message (otherwise the messages are published as archived).
"""

from __future__ import annotations

import re
import threading

import click

from warren.spark.amqp_link import DEFAULT_URL, parse_url
from warren.spark.jobs.progress import Progress
from warren.spark.jobs.session import parse_confs

__all__ = ["replay_command", "replay", "failure_cause"]

WRITER_COLUMNS = ("body", "routing_key", "exchange", "message_id", "content_type", "headers", "properties",
                  "property_list")
# the exceptions a task raises, as Spark's error text shows them (``module.Class: message``)
_WARREN_ERROR = re.compile(r"warren\.spark(?:\.\w+)+: (.*)")


def replay(spark, source: str, exchange: str, url: str = DEFAULT_URL, routing_key: str | None = None,
           write_id: str | None = None, ordered: bool = False, mandatory: bool = False,
           confirm_window: int | None = None, progress: Progress | None = None, keep_user_id: bool = False,
           report=None) -> int:
    """Publish every row of the Parquet file(s) at ``source``; returns how many were published.

    ``progress`` hears, about every second, the rows published so far, estimated from the
    write's finished tasks (Spark's status tracker: tasks, not rows, are what Spark reports
    while a job runs), and how many are left."""
    from warren.spark import register

    register(spark)
    df = spark.read.parquet(source)
    if ordered and "offset" in df.columns:
        keys = [c for c in ("stream", "offset") if c in df.columns]
        df = df.repartition(1).sortWithinPartitions(*keys)
    elif ordered:
        df = df.coalesce(1)
    if "body" not in df.columns:
        raise click.ClickException(f"{source} has no body column: is it a warren archive?")
    df = df.select(*[c for c in df.columns if c in WRITER_COLUMNS])
    rows = df.count()
    if not keep_user_id and report is not None:
        foreign = _foreign_user_ids(df, parse_url(url).username)
        if foreign:
            report(f"{foreign:,} messages carry a user_id other than {parse_url(url).username!r}, which the broker "
                   "refuses from this user: published without it (--keep-user-id to keep it and fail)")
    writer = (df.write.format("warren").mode("append").option("url", url).option("exchange", exchange)
              .option("dropForeignUserId", str(not keep_user_id).lower()))
    if not write_id:
        writer = writer.option("dedupHeader", "none")  # published as archived: no header of ours
    if routing_key is not None:
        writer = writer.option("routingKey", routing_key)
    if write_id:
        writer = writer.option("writeId", write_id)
    if mandatory:
        writer = writer.option("mandatory", "true")
    if confirm_window:
        writer = writer.option("confirmWindow", str(confirm_window))
    if progress is None or getattr(spark, "sparkContext", None) is None:
        writer.save()
        return rows
    # the save runs here (a Python data source is looked up in the session of the calling
    # thread); a helper thread reads Spark's status tracker meanwhile
    tracker = spark.sparkContext.statusTracker()
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(1.0):
            done = _published_estimate(tracker, rows)
            if done is not None:
                progress.update(done, rows - done)

    watcher = threading.Thread(target=watch, name="warren-replay-progress", daemon=True)
    watcher.start()
    try:
        writer.save()
    finally:
        finished.set()
        watcher.join(5.0)
    progress.update(rows, 0)
    return rows


def _foreign_user_ids(df, user: str) -> int:
    """Rows whose user_id property names another user than ``user`` (0 when the archive has no
    ``properties`` column to tell)."""
    if "properties" not in df.columns:
        return 0
    from pyspark.sql import functions as F

    user_id = F.col("properties.user_id")
    return df.where(user_id.isNotNull() & (user_id != F.lit(user))).count()


def _published_estimate(tracker, rows: int) -> int | None:
    """Rows of the running write's finished tasks, assuming rows spread evenly over its tasks."""
    total = completed = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            total += info.numTasks
            completed += info.numCompletedTasks
    return rows * completed // total if total else None


def failure_cause(text: str) -> str | None:
    """The warren error inside Spark's wrapped task failure (else Spark's first line): one line
    for a person, without the Java and Python stack traces around it."""
    found = _WARREN_ERROR.findall(text)
    if found:
        return found[-1]
    lines = text.strip().splitlines()
    return lines[0] if lines else None


@click.command("replay")
@click.option("--from", "source", required=True, type=click.Path(exists=True),
              help="Parquet file or directory of rows in the warren schema (as archived).")
@click.option("--exchange", required=True, help='Exchange to publish to ("" is the default exchange).')
@click.option("--url", default=DEFAULT_URL, show_default=True, help="Broker URL (vhost percent-encoded).")
@click.option("--routing-key", default=None, help="Publish every row with this routing key (default: each row's).")
@click.option("--write-id", default=None,
              help="Fixed id prefix: a second replay with the same id repeats the message ids (deduplication).")
@click.option("--ordered", is_flag=True, help="Publish from one task in (stream, offset) order.")
@click.option("--mandatory", is_flag=True, help="Fail if a message cannot be routed to any queue.")
@click.option("--confirm-window", type=click.IntRange(1), default=None, help="Unconfirmed publishes per task.")
@click.option("--keep-user-id", is_flag=True,
              help="Publish a user_id naming another user as it is (the broker refuses it: the replay fails).")
@click.option("--master", default=None, help="Spark master [default: local[*], or spark-submit's].")
@click.option("--verbose", is_flag=True, help="Spark's own logging (WARN and INFO lines, stack traces).")
@click.option("--ship-package", is_flag=True,
              help="Ship the warren package to the executors with the job (for clusters where it is not installed).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", callback=parse_confs,
              help="A Spark setting for the job's session (repeatable), e.g. spark.executor.memory=512m.")
def replay_command(source, exchange, url, routing_key, write_id, ordered, mandatory, confirm_window, keep_user_id,
                   master, verbose, ship_package, confs) -> None:
    """Publish archived Parquet rows to an exchange, with publisher confirms."""
    from warren.spark.jobs.session import JavaMissingError, job_session

    try:
        with job_session("warren pipeline replay", master, ship_package, confs, verbose) as spark:
            progress = Progress("published", "left")
            rows = replay(spark, source, exchange, url, routing_key, write_id, ordered, mandatory, confirm_window,
                          progress, keep_user_id, report=lambda line: click.echo(line, err=True))
            progress.finish(f"published {rows:,} rows")
    except JavaMissingError as e:
        raise click.ClickException(str(e)) from None
    except click.ClickException:
        raise
    except Exception as e:
        raise click.ClickException(f"replay failed: {failure_cause(str(e)) or repr(e)}") from e
    click.echo(f"published {rows} messages from {source} to exchange {exchange!r} (all confirmed)")
