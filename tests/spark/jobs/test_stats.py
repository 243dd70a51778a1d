"""warren pipeline stats (warren/spark/jobs/stats.py): a stream's rate over time from its offsets
and the broker's timestamps, drawn in the terminal and as an HTML/SVG page."""

from __future__ import annotations

import re
import time

import pika
import pytest
from click.testing import CliRunner

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spark.jobs.stats import Bucket, html_chart, stats_command, terminal_chart
from warren.spec.amqp0_9_1 import BasicProperties


def test_terminal_chart_scales_to_the_peak():
    series = [Bucket(0, 1000, 0, 100), Bucket(1000, 2000, 100, 150), Bucket(2000, 3000, 150, 150)]
    lines = terminal_chart(series, height=2)
    assert lines[0] == "100/s │█  "
    assert lines[1] == "      │██ "
    assert lines[2] == "  0/s └───"
    assert "3 intervals of 1 s" in lines[3]


def test_html_chart_has_one_bar_per_interval():
    series = [Bucket(0, 500, 0, 10), Bucket(500, 1000, 10, 30)]
    page = html_chart("s<1>", series)
    assert page.count('class="bar"') == 2 and "<svg" in page and "s&lt;1&gt;" in page
    assert "30 messages" in page and "40/s" in page


@pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")
def test_stats_of_a_stream_published_in_bursts(broker, tmp_path, uid):
    name = f"stats-{uid}"
    declare_stream(broker, name)
    props = BasicProperties().encode()
    for burst, size in enumerate((300, 0, 900)):  # a burst, a pause, a burst three times larger
        if size:
            publish_raw(broker, f"{name}.k", [b"x"] * size, props)
        wait_committed(broker, name, 300 if burst < 2 else 1200)
        time.sleep(0.4)
    page = tmp_path / "chart.html"
    result = CliRunner().invoke(stats_command, ["--stream", name, "--url", broker.url, "--http-url",
                                                broker.http_url, "--buckets", "12", "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert f"stream {name}: 1,200 messages retained, offsets 0..1199" in result.output
    assert re.search(r"1,200 messages over [0-9.]+ s: .* on average, peak [0-9,.]+/s at ", result.output)
    chart = [line for line in result.output.splitlines() if "│" in line]
    assert len(chart) == 10 and all(len(line.split("│")[1]) == 12 for line in chart)
    text = page.read_text()
    assert text.count('class="bar"') == 12
    counts = [int(n.replace(",", "")) for n in re.findall(r"UTC: ([0-9,]+) messages", text)]
    assert sum(counts) == 1200 and 0 in counts  # the pause shows
    pause = counts.index(0)
    assert (sum(counts[:pause]), sum(counts[pause:])) == (300, 900)  # each burst on its side of it


@pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")
def test_stats_of_a_missing_stream_fails_clearly(broker, uid):
    result = CliRunner().invoke(stats_command, ["--stream", f"nope-{uid}", "--url", broker.url,
                                                "--http-url", broker.http_url])
    assert result.exit_code == 1 and "nope-" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(EXTERNAL_URL is not None, reason="reads streams through Warren's HTTP API")
def test_stats_of_a_classic_queue_says_why_not(broker, uid):
    """The API's bad_request carries its reason; the command shows it, not the bare error code."""
    name = f"classic-{uid}"
    conn = pika.BlockingConnection(pika.URLParameters(broker.url))
    try:
        conn.channel().queue_declare(name)
        result = CliRunner().invoke(stats_command, ["--stream", name, "--url", broker.url,
                                                    "--http-url", broker.http_url])
        assert result.exit_code == 1, result.output
        assert "bad_request: " in result.output and "not a stream" in result.output, result.output
    finally:
        conn.channel().queue_delete(name)
        conn.close()
