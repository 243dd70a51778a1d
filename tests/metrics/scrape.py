"""Helpers of the metrics tests: start a broker with --prometheus-port, scrape, read the text."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

from tests.conftest import launch_broker


def launch_with_metrics(tmp: Path, *extra: str):
    """A private Warren with Prometheus metrics on an ephemeral port: (BrokerProc, metrics base URL)."""
    b = launch_broker(tmp, "--prometheus-port", "0", *extra)
    ready = Path(b.args[b.args.index("--ready-file") + 1])
    port = json.loads(ready.read_text())["prometheus_port"]
    assert isinstance(port, int) and port > 0
    return b, f"http://127.0.0.1:{port}"


def fetch(url: str, accept_gzip: bool = False, timeout: float = 10) -> tuple[str, dict]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if accept_gzip else {})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        body = r.read()
        headers = {k.lower(): v for k, v in r.headers.items()}
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return body.decode(), headers


def samples(text: str) -> dict:
    """{(sample name, frozenset of label pairs): value} of an exposition."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, name: str, **label_values) -> float:
    return parsed[(name, frozenset(label_values.items()))]


def declarations(text: str) -> dict:
    """{family name: (TYPE, HELP)} from the # lines, as written (counters keep their _total)."""
    types, helps = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line[7:].split(" ", 1)
            types[name] = kind
        elif line.startswith("# HELP "):
            name, _, text_ = line[7:].partition(" ")
            helps[name] = text_
    return {name: (kind, helps.get(name)) for name, kind in types.items()}


def promtool_check(text: str) -> subprocess.CompletedProcess:
    """``promtool check metrics`` on the text (its lint: names, types, HELP, units)."""
    return subprocess.run([shutil.which("promtool"), "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
