#!/usr/bin/env python3
"""Draw the README's performance chart (an SVG) from bench/compare.py's own output.

    python tools/perf_chart.py [INPUT] [OUTPUT]
    (defaults: bench/results/matrix.txt docs/images/matrix.svg)

INPUT is either what compare.py prints (its "## Warren / RabbitMQ" table is read; anything
else in the file is ignored) or the JSON lines of its ``--json-out``, whose medians are taken
as compare.py takes them. The chart has one pair of bars per throughput scenario, Warren's
and RabbitMQ's msg/s on one scale, with the ratio at the end of each pair; the rate-limited
latency rows (both brokers hold the same rate) are left out of the bars and named below them.
The file is plain SVG text written here, no plotting library: it diffs, and regenerating it
needs nothing beyond Python. ``tests/test_docs.py`` checks that the committed chart is what
this script makes of the committed input.
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = ROOT / "bench" / "results" / "matrix.txt"
DEFAULT_OUTPUT = ROOT / "docs" / "images" / "matrix.svg"
WARREN_COLOUR, RABBITMQ_COLOUR = "#2f6f4f", "#e07b39"  # RabbitMQ's orange beside a green
RATE_LIMITED = ("latency-",)  # scenarios held to a fixed rate: equal by construction


def _number(cell: str) -> float | None:
    cell = cell.strip().replace(",", "")
    try:
        return float(cell)
    except ValueError:
        return None


def read_summary(text: str) -> list[dict]:
    """The rows of compare.py's "## Warren / RabbitMQ" table: scenario, warren, rabbitmq (msg/s)."""
    rows, in_table = [], False
    for line in text.splitlines():
        if line.startswith("## Warren / RabbitMQ"):
            in_table = True
            continue
        if in_table and line.startswith("## "):
            break
        if not in_table or not line.startswith("|") or line.startswith("|---") or "Warren msg/s" in line:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        warren, rabbitmq = _number(cells[1]), _number(cells[2])
        if warren is not None:
            rows.append({"scenario": cells[0], "warren": warren, "rabbitmq": rabbitmq})
    return rows


def read_json_lines(text: str) -> list[dict]:
    """compare.py's ``--json-out`` runs, as medians per scenario and broker (its own functions)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from compare import headline, median  # the same figure compare.py prints

    runs: dict[str, dict[str, list[float]]] = {}
    for line in text.splitlines():
        if line.strip():
            run = json.loads(line)
            runs.setdefault(run["scenario"], {}).setdefault(run.get("broker", "warren"), []).append(headline(run))
    return [{"scenario": name, "warren": median(by.get("warren", [])), "rabbitmq": median(by.get("rabbit", []))}
            for name, by in runs.items() if by.get("warren")]


def read_input(path: Path) -> list[dict]:
    text = path.read_text()
    rows = read_json_lines(text) if text.lstrip().startswith("{") else read_summary(text)
    if not rows:
        raise SystemExit(f"{path}: no compare.py summary table or JSON lines found")
    return rows


def _si(value: float) -> str:
    return f"{value / 1000:,.0f}k" if value >= 1000 else f"{value:,.0f}"


def draw(rows: list[dict], source: str) -> str:
    """The SVG text of the chart."""
    bars = [r for r in rows if not r["scenario"].startswith(RATE_LIMITED)]
    held = [r["scenario"] for r in rows if r["scenario"].startswith(RATE_LIMITED)]
    label_w, plot_w, right_w, bar_h, gap, top = 190, 440, 70, 11, 9, 46
    width = label_w + plot_w + right_w
    height = top + len(bars) * (2 * bar_h + gap) + 60
    top_value = max(max(r["warren"], r["rabbitmq"] or 0) for r in bars)
    scale = plot_w / top_value
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<title>Warren and RabbitMQ 3.10, messages per second by scenario ({escape(source)})</title>',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{label_w}" y="16" font-size="13" font-weight="bold">Messages per second '
           f'(higher is better)</text>',
           f'<rect x="{label_w}" y="26" width="10" height="10" fill="{WARREN_COLOUR}"/>'
           f'<text x="{label_w + 14}" y="35">Warren</text>',
           f'<rect x="{label_w + 70}" y="26" width="10" height="10" fill="{RABBITMQ_COLOUR}"/>'
           f'<text x="{label_w + 84}" y="35">RabbitMQ 3.10</text>']
    # grid lines at round values
    step = 10 ** (len(str(int(top_value))) - 1)
    step = step * 2 if top_value / step < 4 else step
    for tick in range(0, int(top_value) + 1, step):
        x = label_w + tick * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 56}" stroke="#dddddd"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 42}" text-anchor="middle" fill="#555555">{_si(tick)}</text>')
    y = top
    for r in bars:
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h + 4}" text-anchor="end">{escape(r["scenario"])}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{r["warren"] * scale:.1f}" height="{bar_h}" '
                   f'fill="{WARREN_COLOUR}"><title>Warren {r["warren"]:,.0f} msg/s</title></rect>')
        if r["rabbitmq"]:
            out.append(f'<rect x="{label_w}" y="{y + bar_h}" width="{r["rabbitmq"] * scale:.1f}" height="{bar_h}" '
                       f'fill="{RABBITMQ_COLOUR}"><title>RabbitMQ {r["rabbitmq"]:,.0f} msg/s</title></rect>')
            end = label_w + max(r["warren"], r["rabbitmq"]) * scale + 6
            out.append(f'<text x="{end:.1f}" y="{y + bar_h + 4}">{r["warren"] / r["rabbitmq"]:.2f}×</text>')
        y += 2 * bar_h + gap
    notes = [f"Source: {source} (medians; its header says the run and the machine)."]
    if held:
        notes.append(f"Not drawn: {', '.join(held)} (both brokers held to the same rate; their p99 is in "
                     f"docs/performance.md).")
    for i, note in enumerate(notes):
        out.append(f'<text x="8" y="{height - 22 + 12 * i}" fill="#555555" font-size="10">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    source = Path(argv[0]) if argv else DEFAULT_INPUT
    target = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    rows = read_input(source)
    try:
        shown = source.resolve().relative_to(ROOT)
    except ValueError:
        shown = source
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(draw(rows, f"bench/compare.py, {shown}"))
    print(f"{target}: {len(rows)} scenarios from {source}")


if __name__ == "__main__":
    main(sys.argv[1:])
