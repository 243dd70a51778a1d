"""``warren pipeline stats --stream S``: a stream's message rate over time, as a chart.

No Spark job: the broker stamps every record with the time it stored it and keeps an index of
those times, so the number of messages stored between two moments is the difference of two
offsets (``GET /api/streams/{vhost}/{name}/offset?timestamp=``). The retained span (first to
last stored record) is cut into ``--buckets`` equal intervals and each interval's count is
asked that way: ``buckets + 1`` small requests, whatever the stream's size.

The chart is drawn in the terminal (block characters, one column per interval, the peak rate
and the time axis labelled) and, with ``--html FILE``, written as a standalone HTML page with
an SVG bar chart (no script, no external file) for a browser.
"""

from __future__ import annotations

import datetime
import html
from dataclasses import dataclass

import click

__all__ = ["Bucket", "rate_series", "terminal_chart", "html_chart", "stats_command"]

DEFAULT_URL = "amqp://guest:guest@localhost:5672/%2F"
BLOCKS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Bucket:
    start_ms: int
    end_ms: int  # exclusive
    first_offset: int
    end_offset: int  # exclusive

    @property
    def count(self) -> int:
        return max(0, self.end_offset - self.first_offset)

    @property
    def rate(self) -> float:
        """Messages per second over the bucket."""
        seconds = (self.end_ms - self.start_ms) / 1000
        return self.count / seconds if seconds > 0 else 0.0


def rate_series(api, stream: str, buckets: int) -> tuple[object, list[Bucket]]:
    """(the stream's figures, its retained span cut into ``buckets`` intervals with their counts)."""
    info = api.info(stream)
    first, last = info.first_timestamp_ms, info.last_timestamp_ms
    if first is None or last is None or info.end <= info.first_offset:
        return info, []
    last += 1  # the last record's millisecond is inside the span
    step = max(1, -(-(last - first) // buckets))
    edges = list(range(first, last, step)) + [last]
    offsets = [info.first_offset] + [api.offset_for_timestamp(stream, t) for t in edges[1:-1]] + [info.end]
    series = []
    for i in range(len(edges) - 1):
        series.append(Bucket(edges[i], edges[i + 1], offsets[i], max(offsets[i], offsets[i + 1])))
    return info, series


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _rate_text(rate: float) -> str:
    return f"{rate:,.0f}/s" if rate >= 10 else f"{rate:,.2f}/s"


def terminal_chart(series: list[Bucket], height: int = 10) -> list[str]:
    """Lines of a bar chart of the rates: one column per bucket, ``height`` rows of block
    characters (eight steps per row), the peak labelled on the left, the time span below."""
    if not series:
        return ["(no records retained)"]
    peak = max(b.rate for b in series) or 1.0
    label = _rate_text(peak)
    pad = len(label)
    levels = [round(b.rate / peak * height * 8) for b in series]
    lines = []
    for row in range(height, 0, -1):
        cells = "".join(BLOCKS[max(0, min(8, level - (row - 1) * 8))] for level in levels)
        lines.append(f"{label if row == height else '':>{pad}} │{cells}")
    lines.append(f"{'0/s':>{pad}} └{'─' * len(series)}")
    start, end = _when(series[0].start_ms), _when(series[-1].end_ms)
    lines.append(f"{'':>{pad}}  {start}  →  {end} UTC  ({len(series)} intervals of "
                 f"{(series[0].end_ms - series[0].start_ms) / 1000:g} s)")
    return lines


def html_chart(stream: str, series: list[Bucket], width: int = 900, height: int = 300) -> str:
    """A standalone HTML page: an SVG bar chart of the rates, with axes and a title per bar."""
    margin_left, margin_bottom, margin_top = 80, 40, 30
    plot_w, plot_h = width - margin_left - 20, height - margin_bottom - margin_top
    peak = max((b.rate for b in series), default=0.0) or 1.0
    bar_w = plot_w / max(1, len(series))
    bars = []
    for i, b in enumerate(series):
        h = plot_h * b.rate / peak
        x, y = margin_left + i * bar_w, margin_top + plot_h - h
        tip = html.escape(f"{_when(b.start_ms)} UTC: {b.count:,} messages, {_rate_text(b.rate)}")
        bars.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
                    f'height="{h:.1f}" fill="#3b7dd8"><title>{tip}</title></rect>')
    axis_y = margin_top + plot_h
    first = _when(series[0].start_ms) if series else ""
    last = _when(series[-1].end_ms) if series else ""
    total = sum(b.count for b in series)
    title = html.escape(f"stream {stream}: message rate ({total:,} messages)")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title></head>
<body style="font-family: sans-serif">
<h1 style="font-size: 1.1em">{title}</h1>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{title}">
<line x1="{margin_left}" y1="{margin_top}" x2="{margin_left}" y2="{axis_y}" stroke="#333"/>
<line x1="{margin_left}" y1="{axis_y}" x2="{margin_left + plot_w}" y2="{axis_y}" stroke="#333"/>
<text x="{margin_left - 6}" y="{margin_top + 4}" text-anchor="end" font-size="12">{html.escape(_rate_text(peak))}</text>
<text x="{margin_left - 6}" y="{axis_y}" text-anchor="end" font-size="12">0/s</text>
<text x="{margin_left}" y="{axis_y + 18}" font-size="12">{html.escape(first)} UTC</text>
<text x="{margin_left + plot_w}" y="{axis_y + 18}" text-anchor="end" font-size="12">{html.escape(last)} UTC</text>
{chr(10).join(bars)}
</svg>
</body></html>
"""


@click.command("stats")
@click.option("--stream", required=True, help="The stream queue to chart.")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="AMQP URL of the broker (vhost in the path).")
@click.option("--http-url", default=None,
              help="The broker's HTTP API [default: the URL's host, on the port the broker announces; else 15672].")
@click.option("--buckets", type=click.IntRange(1, 1000), default=60, show_default=True,
              help="Intervals the retained time span is cut into.")
@click.option("--height", type=click.IntRange(2, 50), default=10, show_default=True, help="Rows of the terminal chart.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the chart as a standalone HTML page (SVG) to this file.")
def stats_command(stream, url, http_url, buckets, height, html_path) -> None:
    """A stream's message rate over time, from its offsets and timestamps (no Spark job)."""
    from warren.spark.options import OptionError, parse_read_options
    from warren.spark.read.http import api_for
    from warren.spark.read.http_api import StreamApiError

    try:
        options = parse_read_options({"url": url, "stream": stream, **({"httpUrl": http_url} if http_url else {})},
                                     batch=True)
        with api_for(options) as api:
            info, series = rate_series(api, stream, buckets)
    except (OptionError, StreamApiError) as e:
        raise click.ClickException(str(e)) from None
    total = sum(b.count for b in series)
    click.echo(f"stream {stream}: {info.messages:,} messages retained, offsets {info.first_offset}..{info.end - 1}")
    for line in terminal_chart(series, height):
        click.echo(line)
    if series:
        span_s = (series[-1].end_ms - series[0].start_ms) / 1000
        busiest = max(series, key=lambda b: b.rate)
        click.echo(f"{total:,} messages over {span_s:,.1f} s: {_rate_text(total / span_s if span_s else 0)} on "
                   f"average, peak {_rate_text(busiest.rate)} at {_when(busiest.start_ms)} UTC")
    if html_path:
        with open(html_path, "w", encoding="utf-8") as f:
            f.write(html_chart(stream, series))
        click.echo(f"chart written to {html_path}")
