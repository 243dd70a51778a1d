"""A fault run drawn (test_faults.py's report, JSON): confirms and deliveries per second, each
fault's span coloured by kind, and which node served the queue when (one row per node: two bars
at one time would be two leaders at once). Plain SVG, no dependency.

    python -m tests.cluster.faults.chart REPORT.json OUT.svg
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from html import escape

WIDTH, LEFT, RIGHT = 1100, 70, 20
RATE_TOP, RATE_HEIGHT = 40, 160
FAULT_TOP, FAULT_HEIGHT = RATE_TOP + RATE_HEIGHT + 20, 22
LEADER_TOP, ROW = FAULT_TOP + FAULT_HEIGHT + 30, 20
COLOURS = {"kill-leader": "#d62728", "kill-follower": "#ff9896", "kill-etcd": "#9467bd", "pause-leader": "#ff7f0e",
           "partition-leader": "#1f77b4", "leader-from-etcd": "#17becf", "leader-from-nodes": "#2ca02c",
           "slow-disk": "#8c564b", "links-slow": "#bcbd22", "links-cut": "#e377c2", "links-drop": "#7f7f7f",
           "kill-followers": "#000000"}
LEGEND_PER_ROW = 6


def per_second(times: list[float], start: float, seconds: int) -> list[int]:
    counts = Counter(int(t - start) for t in times if t >= start)
    return [counts.get(i, 0) for i in range(seconds)]


def draw(report: dict) -> str:
    history = report["history"]
    confirms = [p["answered"] for p in history["publishes"] if p["outcome"] == "confirmed"]
    deliveries = [d["time"] for d in history["deliveries"]]
    start = min(p["sent"] for p in history["publishes"])
    end = max(confirms + deliveries + [f["end"] for f in report["faults"]])
    seconds = max(1, int(end - start) + 1)
    span = WIDTH - LEFT - RIGHT

    def x(t: float) -> float:
        return LEFT + (t - start) / (end - start or 1) * span

    rates = {"confirmed": per_second(confirms, start, seconds), "delivered": per_second(deliveries, start, seconds)}
    top = max(max(r) for r in rates.values()) or 1
    nodes = sorted({i[1] for i in report["intervals"]})
    legend_rows = (len(COLOURS) + LEGEND_PER_ROW - 1) // LEGEND_PER_ROW
    height = LEADER_TOP + ROW * len(nodes) + 35 + 16 * legend_rows
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="14" font-size="12">{report["cycles"]} faults; overlapping leaders: '
           f'{report["overlapping_leaders"]}; {escape(report["check"].split(" nacked=")[0])}</text>',
           f'<text x="{LEFT}" y="27" font-size="11">nacked={escape(report["check"].split(" nacked=")[-1])}</text>',
           f'<text x="4" y="{RATE_TOP + 10}">{top}/s</text><text x="4" y="{RATE_TOP + RATE_HEIGHT}">0</text>']
    for name, colour in (("confirmed", "#333"), ("delivered", "#2ca02c")):
        points = " ".join(f"{x(start + i + 0.5):.1f},{RATE_TOP + RATE_HEIGHT - v / top * RATE_HEIGHT:.1f}"
                          for i, v in enumerate(rates[name]))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1" points="{points}"/>')
    out.append(f'<text x="{WIDTH - 260}" y="{RATE_TOP + 12}">confirms per second (black), deliveries (green)</text>')
    out.append(f'<text x="4" y="{FAULT_TOP + 15}">faults</text>')
    for f in report["faults"]:
        colour = COLOURS.get(f["kind"], "#999")
        out.append(f'<rect x="{x(f["start"]):.1f}" y="{FAULT_TOP}" width="{max(1.0, x(f["end"]) - x(f["start"])):.1f}" '
                   f'height="{FAULT_HEIGHT}" fill="{colour}"><title>{escape(f["kind"])} on {escape(f["node"])}</title></rect>')
    for i, node in enumerate(nodes):
        y = LEADER_TOP + i * ROW
        out.append(f'<text x="4" y="{y + 13}">{escape(node)} leads</text>')
        for queue, who, epoch, s, e in report["intervals"]:
            if who == node:
                e = end if e is None else e
                out.append(f'<rect x="{x(s):.1f}" y="{y}" width="{max(1.0, x(e) - x(s)):.1f}" height="{ROW - 6}" '
                           f'fill="#555"><title>epoch {epoch}</title></rect>')
    legend_y = LEADER_TOP + ROW * len(nodes) + 25
    for i, (kind, colour) in enumerate(COLOURS.items()):
        x0, y0 = LEFT + (i % LEGEND_PER_ROW) * 150, legend_y + (i // LEGEND_PER_ROW) * 16
        out.append(f'<rect x="{x0}" y="{y0 - 9}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x0 + 14}" y="{y0}">{kind}</text>')
    out.append(f'<text x="{LEFT}" y="{height - 5}">{seconds} s</text></svg>')
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1]) as source:
        svg = draw(json.load(source))
    with open(sys.argv[2], "w") as target:
        target.write(svg)
