"""``warren pipeline replay``: archived Parquet rows published again, checked with pika.

The command runs in-process through click's CliRunner, so it reuses the test session's
SparkSession (a new JVM per test would cost seconds); the Parquet files are written in the
data source schema, as ``warren pipeline archive`` writes them.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.spark.pika_admin import NO_DEDUP, NO_DEDUP_REASON, admin, get_all, message_count
from warren.spark.jobs.replay import replay_command
from warren.spark.schema import FULL_SCHEMA_DDL

pytestmark = pytest.mark.timeout(180)  # may be the first Spark test of the process

ROWS = 3000


def _archive(spark, path, rows: int = ROWS) -> None:
    """Rows as an archive of stream "events" holds them: offsets 0.., two routing keys."""
    df = spark.range(0, rows, numPartitions=3).selectExpr(
        "cast(concat('e-', cast(id as string)) as binary) as body",
        "if(id % 2 = 0, 'even', 'odd') as routing_key",
        "'original-exchange' as exchange",
        "id as offset",
        "'events' as stream",
        "timestamp_millis(1700000000000 + id) as timestamp",
        "concat('orig-', cast(id as string)) as message_id",
        "'text/plain' as content_type",
        "map('n', cast(id as string)) as headers",
        "named_struct('content_type', 'text/plain', 'content_encoding', cast(null as string), "
        "'delivery_mode', 2, 'priority', cast(null as int), 'correlation_id', cast(null as string), "
        "'reply_to', cast(null as string), 'expiration', cast(null as string), "
        "'message_id', concat('orig-', cast(id as string)), 'timestamp', timestamp_seconds(1700000000), "
        "'type', cast(null as string), 'user_id', cast(null as string), 'app_id', 'archiver') as properties",
        "cast(null as binary) as property_list",  # rows without it: published from the readable columns
    )
    # the archive's column names and types (nullability aside): every column the source reads
    assert df.schema.simpleString() == spark.createDataFrame([], FULL_SCHEMA_DDL).schema.simpleString()
    df.write.mode("overwrite").parquet(str(path))


def _replay(*args):
    return CliRunner().invoke(replay_command, [str(a) for a in args], catch_exceptions=False)


def test_replay_publishes_every_row(spark, broker, uid, tmp_path):
    _archive(spark, tmp_path / "archive")
    exchange = f"sr-x-{uid}"
    with admin(broker) as ch:
        ch.exchange_declare(exchange, "direct")
        for key in ("even", "odd"):
            ch.queue_declare(f"sr-{key}-{uid}")
            ch.queue_bind(f"sr-{key}-{uid}", exchange, key)
        result = _replay("--from", tmp_path / "archive", "--exchange", exchange, "--url", broker.url)
        assert result.exit_code == 0, result.output
        assert f"published {ROWS} messages" in result.output
        assert f"published {ROWS:,} rows in " in result.output  # the progress summary (stderr)
        assert message_count(ch, f"sr-even-{uid}") == message_count(ch, f"sr-odd-{uid}") == ROWS // 2
        seen = set()
        for key in ("even", "odd"):
            for method, props, body in get_all(ch, f"sr-{key}-{uid}", ROWS):
                n = int(body.decode()[2:])
                seen.add(n)
                assert method.exchange == exchange and method.routing_key == ("even" if n % 2 == 0 else "odd")
                assert props.message_id == f"orig-{n}"  # the archived id is kept
                # no --write-id: published as archived, without a deduplication header of ours
                assert props.headers == {"n": str(n)}
                assert (props.content_type, props.delivery_mode, props.app_id) == ("text/plain", 2, "archiver")
                assert props.timestamp == 1700000000
        assert seen == set(range(ROWS))
        for key in ("even", "odd"):
            ch.queue_delete(f"sr-{key}-{uid}")
        ch.exchange_delete(exchange)


@pytest.mark.skipif(NO_DEDUP, reason=NO_DEDUP_REASON)
def test_ordered_replay_twice_with_a_write_id_is_deduplicated(spark, broker, uid, tmp_path):
    _archive(spark, tmp_path / "archive", 1000)
    queue = f"sr-dedup-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue, arguments={"x-message-deduplication": True, "x-cache-size": 10_000})
        for _ in range(2):
            result = _replay("--from", tmp_path / "archive", "--exchange", "", "--routing-key", queue,
                             "--url", broker.url, "--ordered", "--write-id", f"r{uid}")
            assert result.exit_code == 0, result.output
        assert message_count(ch, queue) == 1000
        bodies = [int(b.decode()[2:]) for _m, _p, b in get_all(ch, queue, 1000)]
        assert bodies == list(range(1000))  # --ordered: the stream's offset order
        ch.queue_delete(queue)


def test_replay_failure_names_the_cause(spark, broker, uid, tmp_path):
    _archive(spark, tmp_path / "archive", 100)
    queue = f"sr-full-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue, arguments={"x-max-length": 5, "x-overflow": "reject-publish"})
        result = _replay("--from", tmp_path / "archive", "--exchange", "", "--routing-key", queue,
                         "--url", broker.url)
        assert result.exit_code != 0
        assert "replay failed" in result.output and "basic.nack" in result.output
        ch.queue_delete(queue)


def test_replay_needs_an_archive(tmp_path):
    result = _replay("--from", tmp_path / "nothing-here", "--exchange", "x")
    assert result.exit_code != 0 and "does not exist" in result.output


def _archive_with_user_ids(spark, path, rows: int = 10) -> None:
    """An archive with property lists; every other message carries user_id 'someone-else'."""
    from warren.spark.schema import COLUMN_TYPES
    from warren.spec.amqp0_9_1 import BasicProperties

    data = []
    for i in range(rows):
        user = "someone-else" if i % 2 else "guest"
        raw = BasicProperties(delivery_mode=2, user_id=user, headers={"i": i}).encode()
        props = {name: None for name in ("content_type", "content_encoding", "delivery_mode", "priority",
                                         "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                                         "type", "user_id", "app_id")}
        props.update(delivery_mode=2, user_id=user)
        data.append((b"u-%d" % i, "k", "x", props, raw))
    schema = ", ".join(f"{c} {COLUMN_TYPES[c]}" for c in ("body", "routing_key", "exchange", "properties",
                                                          "property_list"))
    spark.createDataFrame(data, schema).write.mode("overwrite").parquet(str(path))


def test_a_user_id_of_another_user_is_dropped_and_said_or_kept_and_refused(spark, broker, uid, tmp_path):
    _archive_with_user_ids(spark, tmp_path / "archive")
    queue = f"sr-user-{uid}"
    with admin(broker) as ch:
        ch.queue_declare(queue)
        result = _replay("--from", tmp_path / "archive", "--exchange", "", "--routing-key", queue,
                         "--url", broker.url)
        assert result.exit_code == 0, result.output
        assert "5 messages carry a user_id other than 'guest'" in result.output
        got = {body: props for _m, props, body in get_all(ch, queue, 10)}
        assert len(got) == 10
        for i in range(10):
            props = got[b"u-%d" % i]
            assert props.user_id == (None if i % 2 else "guest") and props.headers == {"i": i}
            assert props.delivery_mode == 2
        result = _replay("--from", tmp_path / "archive", "--exchange", "", "--routing-key", queue,
                         "--url", broker.url, "--keep-user-id")
        assert result.exit_code != 0 and "replay failed" in result.output
        assert "406" in result.output or "PRECONDITION_FAILED" in result.output, result.output
        ch.queue_delete(queue)
