"""``warren pipeline archive``: copy a stream into Parquet files with a Spark streaming query.

The query reads the stream with the ``warren`` source and writes with Spark's Parquet file
sink; its checkpoint holds the offsets of every batch. Killed at any moment and started again
with the same ``--checkpoint``, it re-plans an unfinished batch with the same offsets, and the
file sink's log (``_spark_metadata`` under the output) lists only the files of committed
batches, so a reader that goes through Spark (``spark.read.parquet``) sees every message
exactly once. (Reading the directory with another tool, ignore files not in that log: a
killed batch may leave some behind.)

Every column is kept by default (``LOSSLESS_COLUMNS``: the readable ones and ``property_list``,
the basic property list as the publisher encoded it), so ``warren pipeline replay`` publishes
each message as it was; ``--columns`` narrows the archive to the columns named.

``--trigger availableNow`` archives what the stream holds when the job starts, in batches of
at most ``--max-records-per-trigger``, and exits; ``continuous`` runs a batch every
``--interval`` until interrupted (Ctrl-C or SIGTERM stop the query; a batch interrupted in
flight is done again, with the same offsets, by the next run).
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time

import click

from warren.spark.jobs.checkpoint import committed_ends, planned_ends
from warren.spark.jobs.progress import Progress
from warren.spark.jobs.session import parse_confs
from warren.spark.jobs.replay import failure_cause
from warren.spark.options import OptionError, parse_read_options
from warren.spark.read.http import api_for
from warren.spark.read.http_api import StreamApiError
from warren.spark.read.planning import resolve_offset
from warren.spark.schema import LOSSLESS_COLUMNS, columns_ddl

__all__ = ["archive_command", "run_archive"]

DEFAULT_URL = "amqp://guest:guest@localhost:5672/%2F"
DEFAULT_PER_TRIGGER = 1_000_000  # records per batch: progress is known batch by batch


def _default_checkpoint(path: str) -> str:
    return path.rstrip("/") + ".checkpoint"


def _ends(progress: dict) -> dict[str, int]:
    """stream -> next offset to archive, from a batch's progress (its source's end offset)."""
    ends: dict[str, int] = {}
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            ends.update({s: int(o) for s, o in end.items()})
    return ends


def run_archive(spark, *, stream: str | None, path: str, checkpoint: str, url: str, http_url: str | None,
                trigger: str, interval: str, max_records_per_trigger: int | None,
                max_bytes_per_trigger: int | None, starting_offsets: str, records_per_partition: int | None,
                fail_on_data_loss: bool, transport: str, report=print, progress: Progress | None = None,
                columns=LOSSLESS_COLUMNS, stream_pattern: str | None = None):
    """Start the query and wait for it; returns it once it ends (stopped or done).

    ``stream`` names the streams (comma-separated); ``stream_pattern`` instead archives every
    stream whose name matches it (the source's ``streamPattern``: streams created while the
    query runs join it, from their first offset).

    ``progress`` is told, from the first second and then every second, the rows archived by this
    run (finished batches, and the batch in flight estimated from its finished tasks) and the lag:
    records committed in the stream(s) and not archived yet (asked from the HTTP API).
    ``columns``: the read schema's columns (every one by default: a lossless archive).
    """
    which = {"streamPattern": stream_pattern} if stream_pattern is not None else {"stream": stream}
    options = parse_read_options({"url": url, **which, "startingOffsets": starting_offsets,
                                  **({"httpUrl": http_url} if http_url else {})}, batch=False)
    api = api_for(options)
    try:  # an API that is not there fails here, in one line naming it
        infos = {name: api.info(name) for name in _streams(api, options)}
    except Exception:
        api.close()
        raise
    # where archiving stands before Spark reports anything: the checkpoint's last commit, or
    # where a new checkpoint starts
    start = committed_ends(checkpoint) or {s: _start(options.starting_for(s), infos[s], api) for s in infos}
    reader = spark.readStream.format("warren").schema(columns_ddl(columns)).option("url", url)
    for key, value in which.items():
        reader = reader.option(key, value)
    reader = (reader.option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", str(fail_on_data_loss).lower())
              .option("transport", transport).option("httpUrl", options.http_url))
    for key, value in (("maxRecordsPerTrigger", max_records_per_trigger),
                       ("maxBytesPerTrigger", max_bytes_per_trigger), ("recordsPerPartition", records_per_partition)):
        if value is not None:
            reader = reader.option(key, str(value))
    writer = (reader.load().writeStream.format("parquet").option("path", path)
              .option("checkpointLocation", checkpoint).queryName("warren-archive"))
    writer = writer.trigger(availableNow=True) if trigger == "availableNow" else writer.trigger(processingTime=interval)
    query = writer.start()
    stop = threading.Event()

    def on_signal(signum, frame):
        report(f"signal {signum}: stopping (a batch in flight is redone by the next run)")
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    seen = -1
    rows = 0
    archived: dict[str, int] = dict(start)  # stream -> next offset to archive
    tracker = spark.sparkContext.statusTracker() if progress is not None else None
    try:
        if progress is not None:  # the first line at once: what is left to archive
            progress.update(0, _lag(api, options, archived))
        next_look = time.monotonic() + 1.0
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
            for p in query.recentProgress:
                if p["batchId"] > seen:
                    seen = p["batchId"]
                    rows += int(p["numInputRows"])
                    archived.update(_ends(p))
            if progress is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + 1.0
                in_flight = _in_flight(tracker, planned_ends(checkpoint), archived)
                lag = _lag(api, options, archived)
                progress.update(rows + in_flight, None if lag is None else max(0, lag - in_flight))
        if stop.is_set() and query.isActive:
            query.stop()
        query.awaitTermination()
        for p in query.recentProgress:  # the last batches, finished after the loop's last look
            if p["batchId"] > seen:
                seen = p["batchId"]
                rows += int(p["numInputRows"])
                archived.update(_ends(p))
        if progress is not None:
            progress.update(rows, _lag(api, options, archived))
    finally:
        api.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    query.archived_rows = rows
    return query


def _start(spec, info, api) -> int:
    """Where a new checkpoint starts reading a stream (for progress: the query resolves its own)."""
    try:
        return resolve_offset(spec, info, api)
    except Exception:  # no record that late: the query itself says so
        return info.end


def _in_flight(tracker, planned: dict, archived: dict) -> int:
    """Rows of the batch in flight already read, estimated from its finished tasks (Spark
    reports tasks, not rows, while a batch runs; the rows spread evenly over its ranges)."""
    rows = sum(max(0, end - archived.get(s, end)) for s, end in planned.items())
    if not rows or tracker is None:
        return 0
    total = done = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            total += info.numTasks
            done += info.numCompletedTasks
    return rows * done // total if total else 0


def _streams(api, options) -> list[str]:
    """The streams archived: those named, or every one whose name matches the pattern now."""
    if options.stream_pattern is None:
        return list(options.streams)
    return [n for n in api.stream_names() if re.fullmatch(options.stream_pattern, n)]


def _lag(api, options, archived: dict) -> int | None:
    """Records committed and not archived yet (None when it is not known where archiving stands,
    or when the HTTP API does not answer: progress is no reason to fail the job). Under a
    pattern, a stream that matches and was not archived yet counts from its first offset."""
    if not archived and options.stream_pattern is None:
        return None
    try:
        lag = 0
        for s in _streams(api, options):
            info = api.info(s)
            lag += max(0, info.end - archived.get(s, info.first_offset))
        return lag
    except Exception:
        return None


@click.command("archive")
@click.option("--stream", default=None, help="Stream queue to archive (several: comma-separated).")
@click.option("--stream-pattern", default=None,
              help="Archive every stream whose name matches this regular expression (whole name), those "
                   "created while the job runs too, from their first offset (instead of --stream).")
@click.option("--to", "path", required=True, help="Output directory (Parquet; any path Spark writes to).")
@click.option("--checkpoint", default=None, help="Spark checkpoint directory [default: the output path + .checkpoint].")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="AMQP URL of the broker (vhost in the path).")
@click.option("--http-url", default=None,
              help="The broker's HTTP API [default: the URL's host, on the port the broker announces; else 15672].")
@click.option("--trigger", type=click.Choice(["availableNow", "continuous"]), default="availableNow",
              show_default=True, help="availableNow: archive what is there and exit; continuous: run until stopped.")
@click.option("--interval", default="10 seconds", show_default=True, help="Batch interval of --trigger continuous.")
@click.option("--max-records-per-trigger", type=click.IntRange(min=1), default=DEFAULT_PER_TRIGGER,
              show_default=True, help="At most this many records per batch (progress is reported per batch).")
@click.option("--max-bytes-per-trigger", type=click.IntRange(min=1), default=None,
              help="About this many octets per batch at most (estimated from the stream's average record size).")
@click.option("--starting-offsets", default="earliest", show_default=True,
              help='Where a new checkpoint starts: earliest, latest, an offset, or JSON {"stream": offset}.')
@click.option("--records-per-partition", type=click.IntRange(min=1), default=None,
              help="Records per Spark task (default 100000).")
@click.option("--fail-on-data-loss/--no-fail-on-data-loss", default=True, show_default=True,
              help="Fail when retention removed records not archived yet (else skip them, with a warning).")
@click.option("--transport", type=click.Choice(["http", "amqp"]), default="http", show_default=True)
@click.option("--columns", default=",".join(LOSSLESS_COLUMNS), show_default=True,
              help="Columns to archive, comma-separated (the default keeps everything: replay is lossless "
                   "only with property_list).")
@click.option("--master", default=None, help="Spark master [default: local[*], or spark-submit's].")
@click.option("--verbose", is_flag=True, help="Spark's own logging (WARN and INFO lines, stack traces).")
@click.option("--ship-package", is_flag=True,
              help="Ship the warren package to the executors with the job (for clusters where it is not installed).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", callback=parse_confs,
              help="A Spark setting for the job's session (repeatable), e.g. spark.executor.memory=512m.")
def archive_command(stream, stream_pattern, path, checkpoint, url, http_url, trigger, interval,
                    max_records_per_trigger,
                    max_bytes_per_trigger, starting_offsets, records_per_partition, fail_on_data_loss,
                    transport, columns, master, verbose, ship_package, confs) -> None:
    """Archive a stream queue to Parquet, exactly once across restarts (Spark streaming)."""
    from pyspark.errors import StreamingQueryException

    from warren.spark.jobs.session import JavaMissingError, job_session, require_java, under_spark_submit

    def report(line: str) -> None:
        click.echo(line, err=True)

    if (stream is None) == (stream_pattern is None):
        raise click.UsageError("give --stream or --stream-pattern (one of them)")
    checkpoint = checkpoint or _default_checkpoint(path)
    column_list = tuple(c.strip() for c in columns.split(",") if c.strip())
    try:
        columns_ddl(column_list)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--columns") from None
    try:
        if not under_spark_submit():
            require_java()
        # where the HTTP API is, and that it answers, before Spark starts: a wrong one fails in
        # a second, in one line naming the URL
        which = {"streamPattern": stream_pattern} if stream_pattern is not None else {"stream": stream}
        options = parse_read_options({"url": url, **which, **({"httpUrl": http_url} if http_url else {})},
                                     batch=False)
        with api_for(options) as api:
            names = _streams(api, options)
            for name in names:
                api.info(name)
        http_url = options.http_url
        what = stream if stream is not None else f"the streams matching {stream_pattern!r} ({len(names)} now)"
        with job_session("warren-archive", master, ship_package, confs, verbose) as spark:
            report(f"archiving {what} to {path} (checkpoint {checkpoint}, trigger {trigger})")
            progress = Progress("archived", "lag")
            query = run_archive(
                spark, stream=stream, path=path, checkpoint=checkpoint, url=url, http_url=http_url,
                trigger=trigger, interval=interval, max_records_per_trigger=max_records_per_trigger,
                max_bytes_per_trigger=max_bytes_per_trigger, starting_offsets=starting_offsets,
                records_per_partition=records_per_partition, fail_on_data_loss=fail_on_data_loss,
                transport=transport, report=report, progress=progress, columns=column_list,
                stream_pattern=stream_pattern)
            if query.exception() is None:
                lag = progress.left
                progress.finish(f"archived {query.archived_rows:,} rows of {what} to {path}"
                                + ("" if lag is None else f", {lag:,} left behind the tail"))
            else:
                raise click.ClickException(f"the archive query failed: {failure_cause(str(query.exception()))}")
    except (JavaMissingError, StreamApiError, OptionError) as e:
        raise click.ClickException(str(e)) from None
    except StreamingQueryException as e:
        raise click.ClickException(f"the archive query failed: {failure_cause(str(e))}") from None


if __name__ == "__main__":  # python -m warren.spark.jobs.archive (as `warren pipeline archive`)
    sys.exit(archive_command())
