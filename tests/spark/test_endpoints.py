"""Where the HTTP API is (warren/spark/endpoints.py): found from the port Warren announces in
connection.start, not assumed to be 15672, with a RabbitMQ node running beside it; and every
HTTP error of ``warren pipeline`` is one line naming the URL it used."""

from __future__ import annotations

import pika
import pytest
from click.testing import CliRunner

from tests.conftest import EXTERNAL_URL
from tests.e2e.amqp0_10.client010 import Client010
from tests.e2e.clientmode import SocketClient
from tests.spark.stream_helpers import declare_stream
from warren.spark import endpoints
from warren.spark.jobs.archive import archive_command
from warren.spark.jobs.stats import stats_command
from warren.spark.options import parse_read_options

pytestmark = pytest.mark.skipif(EXTERNAL_URL is not None, reason="the announced port is Warren's")


def test_warren_announces_its_http_port_and_every_client_still_connects(broker):
    endpoints.clear_cache()
    assert endpoints.announced_http_port(broker.host, broker.port) == broker.http_port
    with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
        assert conn._impl.server_properties["http_port"] == broker.http_port
        conn.channel().queue_declare("", exclusive=True)
    for dialect in ("0-8", "0-9-1"):
        with SocketClient(broker, dialect) as c:
            assert c.conn.server_properties["http_port"] == broker.http_port
    with Client010(broker) as c:
        c.session(1)


def test_the_default_http_url_is_the_brokers_own_not_the_rabbitmq_beside_it(broker, rabbitmq_node, uid):
    endpoints.clear_cache()
    stream = f"ep-{uid}"
    declare_stream(broker, stream)
    options = parse_read_options({"url": broker.url, "stream": stream}, batch=True)
    assert options.http_url == broker.http_url
    assert options.http_url != rabbitmq_node.http_url
    # RabbitMQ announces no port: RabbitMQ's default on the URL's host
    assert endpoints.announced_http_port(rabbitmq_node.host, rabbitmq_node.amqp_port) is None
    rabbit = parse_read_options({"url": rabbitmq_node.amqp_url, "stream": stream}, batch=True)
    assert rabbit.http_url == f"http://{rabbitmq_node.host}:15672"
    # the stats command reads through the discovered API
    result = CliRunner().invoke(stats_command, ["--stream", stream, "--url", broker.url])
    assert result.exit_code == 0, result.output
    assert f"stream {stream}: 0 messages retained" in result.output


def _one_line_error(result, url: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert f"HTTP API at {url}" in lines[0], result.output
    assert "Traceback" not in result.output and "at org.apache" not in result.output


def test_http_errors_name_the_url_in_one_line(broker, rabbitmq_node, uid, tmp_path):
    # RabbitMQ's own management API (it has no stream records API): a refusal naming it
    result = CliRunner().invoke(stats_command, ["--stream", "s", "--url", rabbitmq_node.amqp_url,
                                                "--http-url", rabbitmq_node.http_url])
    _one_line_error(result, rabbitmq_node.http_url)
    # nothing listening: the archive fails before Spark starts, naming the URL
    dead = f"http://127.0.0.1:{_free_port()}"
    result = CliRunner().invoke(archive_command, ["--stream", "s", "--to", str(tmp_path / "out"), "--url", broker.url,
                                                  "--http-url", dead])
    _one_line_error(result, dead)
    # a stream that does not exist, on the discovered API
    result = CliRunner().invoke(archive_command, ["--stream", f"missing-{uid}", "--to", str(tmp_path / "out"),
                                                  "--url", broker.url])
    _one_line_error(result, broker.http_url)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
