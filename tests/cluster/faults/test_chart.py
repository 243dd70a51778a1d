"""chart.py draws what a fault run's report holds: one span per fault, one bar per serving
interval on its node's row, the check's counts in the title."""

from __future__ import annotations

import re

from tests.cluster.faults.chart import draw


def report() -> dict:
    publishes = [{"id": f"p0-{i}", "outcome": "confirmed", "sent": 10.0 + i / 10, "answered": 10.05 + i / 10}
                 for i in range(50)]
    return {"cycles": 2, "check": "ok: published=50 confirmed=50 nacked=0 lost=0", "overlapping_leaders": 0,
            "faults": [{"kind": "kill-leader", "node": "n1", "start": 11.0, "end": 12.5},
                       {"kind": "slow-disk", "node": "n2", "start": 13.0, "end": 14.0}],
            "intervals": [["//q", "n1", 1, 10.0, 11.0], ["//q", "n2", 2, 12.0, None]],
            "history": {"publishes": publishes, "deliveries": [{"id": p["id"], "time": p["answered"] + 0.01}
                                                               for p in publishes]}}


def test_each_fault_and_each_serving_interval_is_drawn_with_the_counts_in_the_title():
    svg = draw(report())
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert len(re.findall(r"<title>kill-leader on n1</title>", svg)) == 1
    assert len(re.findall(r"<title>slow-disk on n2</title>", svg)) == 1
    assert len(re.findall(r"<title>epoch \d+</title>", svg)) == 2
    assert "n1 leads" in svg and "n2 leads" in svg and "n3 leads" not in svg
    assert "overlapping leaders: 0" in svg and "lost=0" in svg
    # the rate lines peak at the busiest second: 10 confirms in each whole second here
    assert ">10/s<" in svg
