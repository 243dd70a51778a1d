"""The fuzzing harness, bounded (issue 16 point 5): hostile frame sequences from Hypothesis over
real sockets against one private broker, while a pika client publishes and consumes beside.

Each example is one connection: a valid handshake, then mutated frames, truncated frames,
huge declared sizes, wrong frame-end octets, random class/method ids, bad field-table types,
tables nested thousands deep, bad property lists or random octets (``fuzzframes.py``). The
broker must answer with a known reply code for the scope (the expected one where the input
has one: 501 for a bad frame end or an oversize frame, 502 for deep nesting...) or close the
socket; and, over the whole run: stay up, log no traceback (an unhandled exception is ours),
keep its resident memory within a bound, and serve the control client without a failure.

The default run is small (``FUZZ_EXAMPLES`` examples, a few seconds); ``bench/fuzz.py
--minutes N`` runs the same cases for as long as asked (nightly). Set WARREN_FUZZ_EXAMPLES to
run more here. Against another broker (WARREN_TEST_BROKER_URL) it is skipped: it needs the
broker's process for its memory and log.
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e.fuzzframes import (
    ControlClient, cases, check_outcome, ensure_queue, nested_table, rss_kib, run_case, Case,
    declare_with_arguments,
)

FUZZ_EXAMPLES = int(os.environ.get("WARREN_FUZZ_EXAMPLES", "60"))
RSS_GROWTH_LIMIT_KIB = 150 * 1024  # the broker may grow this much over the run, at most
QUEUE = f"fuzz-{uuid.uuid4().hex[:8]}"

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren (its process, memory and log)")


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """A private broker, its queue, a running control client and the starting RSS."""
    b = launch_broker(tmp_path_factory.mktemp("fuzz"))
    try:
        ensure_queue(b.host, b.port, QUEUE)
        control = ControlClient(b.host, b.port)
        control.start()
        baseline = rss_kib(b.proc.pid)
        yield b, control, baseline
        control.stop()
    finally:
        b.stop()


@settings(max_examples=FUZZ_EXAMPLES, deadline=10_000, derandomize=False, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(case=cases(QUEUE))
def test_hostile_frames_get_a_known_answer_and_hurt_no_one(fuzzed, case):
    b, control, baseline = fuzzed
    out = run_case(b.host, b.port, case)
    check_outcome(case, out)
    assert b.proc.poll() is None, "the broker died"


@pytest.mark.parametrize("depth", [101, 1000, 100_000])
def test_deep_nesting_is_refused_without_recursion(fuzzed, depth):
    """Fixed examples of the deepest inputs (the frame holds 100,000 levels: 7 octets each
    would not fit, so the frame-size limit answers first)."""
    b, control, _ = fuzzed
    data = declare_with_arguments(1, QUEUE + "-deep", nested_table(depth))
    out = run_case(b.host, b.port, Case("deep", [data], expect=frozenset({501, 502})))
    check_outcome(Case("deep", [data], expect=frozenset({501, 502})), out)
    assert out.codes or out.closed


def test_the_broker_survived_the_fuzzing_whole(fuzzed):
    """After the fuzzing (this test runs after the one above): up, no traceback, memory
    bounded, and the control client never failed."""
    b, control, baseline = fuzzed
    assert b.proc.poll() is None
    log = b.log()
    assert "Traceback" not in log and "internal error on connection" not in log, log[-3000:]
    growth = rss_kib(b.proc.pid) - baseline
    assert growth < RSS_GROWTH_LIMIT_KIB, f"RSS grew {growth} KiB over the fuzzing"
    assert not control.failures, control.failures
    assert control.latencies, "the control client made no round trip"
    assert max(control.latencies) < 5.0, f"slowest control round trip {max(control.latencies):.2f}s"
