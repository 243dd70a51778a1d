"""The hand-written exposition format, read back by prometheus_client's parser (the reference)."""

from __future__ import annotations

import math

import pytest

from warren.metrics.probes import Histogram
from warren.metrics.text import escape_label, header, histogram_lines, labels, number

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client (the test extra) reads the output")


def parse(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_label_values_with_quotes_backslashes_and_newlines_round_trip():
    hostile = 'a"b\\c\nd{}=,é'
    text = header("rabbitmq_queue_messages", "gauge", "depth") + f"rabbitmq_queue_messages{labels([('vhost', '/'), ('queue', hostile)])} 3\n"
    (sample,) = parse(text)["rabbitmq_queue_messages"].samples
    assert sample.labels == {"vhost": "/", "queue": hostile}
    assert sample.value == 3
    assert escape_label("plain") == "plain"


def test_help_text_escapes_backslash_and_newline():
    text = header("x_total", "counter", "two\nlines \\ here") + "x_total 1\n"
    assert parse(text)["x"].documentation == "two\nlines \\ here"


@pytest.mark.parametrize("value, text", [(0, "0"), (12345678901234, "12345678901234"), (True, "1"), (0.5, "0.5"),
                                         (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN")])
def test_numbers_as_prometheus_spells_them(value, text):
    assert number(value) == text


def test_histogram_is_cumulative_with_sum_count_and_inf_bucket():
    h = Histogram((0.01, 0.1, 1.0))
    for v in (0.005, 0.05, 0.05, 0.5, 5.0):
        h.observe(v)
    text = header("warren_x_seconds", "histogram", "x") + histogram_lines("warren_x_seconds", h, [("generation", "2")])
    family = parse(text)["warren_x_seconds"]
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.01": 1, "0.1": 3, "1.0": 4, "+Inf": 5}
    assert {s.name: s.value for s in family.samples if not s.name.endswith("_bucket")} == {
        "warren_x_seconds_sum": pytest.approx(5.605), "warren_x_seconds_count": 5}
    assert all(s.labels["generation"] == "2" for s in family.samples)
