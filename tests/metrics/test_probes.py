"""The process probes: event-loop lag and GC pauses, measured for real."""

from __future__ import annotations

import asyncio
import gc
import time

from warren.metrics.probes import GcPauseProbe, Histogram, LoopLagProbe


def test_histogram_counts_each_observation_in_its_bucket():
    h = Histogram((1.0, 2.0))
    for v in (0.5, 1.0, 1.5, 3.0):
        h.observe(v)
    assert h.counts == [2, 1, 1]  # le 1.0 holds 0.5 and 1.0 (upper bounds are inclusive)
    assert h.cumulative() == [(1.0, 2), (2.0, 3), (float("inf"), 4)]
    assert (h.count, h.sum, h.last) == (4, 6.0, 3.0)


def test_loop_lag_probe_sees_a_callback_that_holds_the_loop():
    async def main():
        probe = LoopLagProbe(asyncio.get_running_loop(), interval=0.02)
        probe.start()
        try:
            await asyncio.sleep(0.1)
            time.sleep(0.15)  # hold the loop, as a slow callback would
            deadline = time.monotonic() + 5
            while probe.histogram.last < 0.1 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            probe.stop()
        return probe.histogram

    h = asyncio.run(main())
    assert h.count >= 3
    assert max(b for b, n in zip(h.bounds + (float("inf"),), h.counts) if n) >= 0.1  # a bucket above 100 ms


def test_gc_probe_times_every_generation_it_is_told_about():
    probe = GcPauseProbe()
    probe.start()
    try:
        cycle = []
        cycle.append(cycle)  # cyclic garbage: a full pass finds it
        del cycle
        gc.collect()
        gc.collect(0)
    finally:
        probe.stop()
    assert probe.histograms[2].count >= 1 and probe.histograms[2].sum > 0
    assert probe.histograms[0].count >= 1
    assert probe.collected[2] >= 1
    assert probe._callback not in gc.callbacks
