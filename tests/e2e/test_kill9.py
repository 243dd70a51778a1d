"""The crash test of durability (issue 3): SIGKILL the broker while clients publish and ack.

Each cycle starts Warren on the same data directory, runs a confirm publisher (persistent
messages, message_id = a unique increasing integer, body = a function of the id) and usually an
acking consumer, SIGKILLs the broker after a random 0.2-1.5 s, restarts it and drains the queue
with basic.get. The judgement after every restart:

* every id whose publisher confirm arrived and that no one tried to ack is in the queue (lost = 0);
* ids acked before the kill may come back (acks are not confirmed in AMQP): counted as duplicates;
* nothing unknown or garbled: every message is an id that was published, once, with its body;
* every 10th id is published transient (delivery_mode 1) and never comes back;
* the queue holds the ids in publish order, and queue.declare-ok counts what basic.get finds;
* an unacked delivery made over 0.5 s before the kill comes back with redelivered=True;
* after a final graceful restart the drained (acked) queue stays empty.

One cycle uses 100 KiB bodies (multi-frame on a frame_max 16384 connection) so kills tear large
records. The "paging" variant runs fewer cycles with a 1 MiB --memory-budget, so most of the
queue lives on disk (persistent messages in the queue store, transient ones in spill files).
Set WARREN_KILL9_SEED to replay a run, WARREN_KILL9_CYCLES to change the number of cycles.
`test_kill9_clients_control_run_without_a_kill` runs the same clients and checks without a kill,
so it also runs against RabbitMQ (WARREN_TEST_BROKER_URL) as a check of the test itself.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import time

import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from .helpers import connect, make_queue, params
from .kill9clients import (
    AckingConsumer, ConfirmPublisher, Ledger, drain_with_get, small_size, warn_about_log_errors,
)

pytestmark = pytest.mark.timeout(150)

CYCLES = int(os.environ.get("WARREN_KILL9_CYCLES", "10"))
SEED = int(os.environ.get("WARREN_KILL9_SEED", str(random.randrange(1 << 30))))
LARGE_CYCLE = 3            # this cycle publishes LARGE_BODY bodies
LARGE_BODY = 100 * 1024
REDELIVERED_GRACE_S = 0.5  # an unacked delivery this long before the kill must come back redelivered
SMALL_MAX, LARGE_MAX = 8000, 1000   # publishes per cycle at most (bounds drain time and disk)
SMALL_RATE, LARGE_RATE = 5000, 600  # messages/s at most: publishing still runs at the kill (<= 1.5 s)
TRANSIENT_EVERY = 10                 # every 10th id is published transient: gone after a restart
WINDOWS = (1, 16, 256)               # unconfirmed publishes in flight (1 = publish, wait, publish)


def _recovery_line(log: str) -> str:
    for line in log.splitlines():
        if "recover" in line.lower():
            return line.strip()[-160:]
    return "(no line mentions recovery)"


def _run_clients(b, queue: str, ids, rng: random.Random, large: bool, consumer_odds: float):
    """Start the publisher and (with probability `consumer_odds`) a consumer against broker `b`."""
    size_of = (lambda i: LARGE_BODY) if large else small_size
    window = 16 if large else rng.choice(WINDOWS)
    pub = ConfirmPublisher(params(b, frame_max=16384 if large else 131072), queue, lambda: next(ids),
                           size_of, window=window, max_messages=LARGE_MAX if large else SMALL_MAX,
                           transient_every=TRANSIENT_EVERY, max_rate=LARGE_RATE if large else SMALL_RATE)
    pub.start()
    assert pub.started.wait(10), f"publisher never got confirm.select-ok: {pub.error or pub.close_reason}"
    cons = None
    if rng.random() < consumer_odds:
        time.sleep(rng.uniform(0.0, 0.2))
        cons = AckingConsumer(params(b), queue, pub.sizes, prefetch=rng.choice([16, 64, 256]))
        cons.start()
        assert cons.started.wait(10)
        assert cons.error is None, f"consumer failed to start: {cons.error!r}"
    return pub, cons


def _drain_and_check(b, queue: str, ledger: Ledger, expect_redelivered: set[int] = frozenset()):
    c = connect(b)
    try:
        ch = c.channel()
        ok = ch.queue_declare(queue, durable=True)
        drained = drain_with_get(ch, queue)
        figures, problems = ledger.check(drained, ok.method.message_count, expect_redelivered)
        got = {d.msg_id for d in drained if d.msg_id is not None}
        ledger.delivered |= got
        ledger.maybe_acked |= got      # attempted from here on: may come back after the next kill
        if drained:
            ch.basic_ack(drained[-1].delivery_tag, multiple=True)
        return figures, problems
    finally:
        if c.is_open:
            c.close()


def _fail(problems: list[str], brokers) -> None:
    logs = "\n".join(f"--- broker log {n} (tail)\n{bp.log()[-3000:]}" for n, bp in enumerate(brokers[-2:]))
    pytest.fail(f"seed {SEED}: " + "; ".join(problems) + "\n" + logs, pytrace=False)


def _files_under(path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


# (label, cycles, extra broker options, odds of a consumer in a cycle)
MODES = {
    "plain": (CYCLES, (), 0.75),
    # A memory budget of 1 MiB: the queue pages to disk beyond its first 2048 messages, transient
    # ones to the (never recovered) spill files.
    "paging": (max(2, CYCLES // 2), ("--memory-budget", str(1 << 20)), 0.4),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_kill9_cycles_lose_no_confirmed_message(start_broker, tmp_path, mode):
    cycles, extra, consumer_odds = MODES[mode]
    rng = random.Random(f"{SEED}-{mode}")
    data_dir = tmp_path / "kill9-data"
    data_dir.mkdir()
    queue = "kill9-queue"
    ledger = Ledger()
    ids = itertools.count(1)
    t0 = time.monotonic()
    print(f"kill9[{mode}]: seed={SEED} cycles={cycles} options={list(extra)} data_dir={data_dir}")

    b = start_broker(*extra, data_dir=data_dir)
    brokers = [b]
    c = connect(b)
    c.channel().queue_declare(queue, durable=True)
    c.close()

    for cycle in range(1, cycles + 1):
        large = cycle == LARGE_CYCLE and mode == "plain"
        pub, cons = _run_clients(b, queue, ids, rng, large, consumer_odds)
        delay = rng.uniform(0.2, 1.5)
        time.sleep(delay)
        spill_files = _files_under(data_dir / "spill")
        # The clients must still be running when the kill comes: a broker that closed them (an
        # internal error on publish, say) would otherwise pass with nothing to judge.
        early_end = []
        if pub.done.is_set():
            early_end.append(f"publisher connection ended before the kill: {pub.error or pub.close_reason!r}")
        if cons is not None and not cons.is_alive():
            early_end.append(f"consumer connection ended before the kill: {cons.error!r}")
        b.proc.kill()                      # SIGKILL
        killed_at = time.monotonic()
        rc = b.proc.wait()
        assert rc == -signal.SIGKILL, f"broker exited with {rc} before the kill:\n{b.log()[-3000:]}"
        assert pub.done.wait(15), "publisher thread did not notice the dead broker"
        if cons is not None:
            cons.join(15)
            assert not cons.is_alive(), "consumer thread did not notice the dead broker"
        ledger.sent |= set(pub.sent)
        ledger.sizes.update(pub.sizes)
        ledger.transient |= pub.transient
        ledger.confirmed |= set(pub.confirmed)
        ledger.nacked |= set(pub.nacked)
        problems: list[str] = list(early_end)
        if not pub.confirmed:
            problems.append(f"no publish was confirmed in {delay:.2f}s ({len(pub.sent)} sent)")
        old_unacked: set[int] = set()
        if cons is not None:
            old_unacked = {i for i, t in cons.delivered_at.items()
                           if i not in cons.ack_attempted and killed_at - t > REDELIVERED_GRACE_S}
            ledger.maybe_acked |= cons.ack_attempted
            ledger.delivered |= set(cons.delivered)
            problems += [f"live delivery: {p}" for p in cons.bad[:10]]

        t_start = time.monotonic()
        b = start_broker(*extra, data_dir=data_dir)
        startup = time.monotonic() - t_start
        brokers.append(b)
        figures, more = _drain_and_check(b, queue, ledger, old_unacked)
        drain_s = time.monotonic() - t_start - startup
        problems += more
        gap_ms = (killed_at - pub.last_confirm_at) * 1000 if pub.last_confirm_at else float("nan")
        print(f"kill9 cycle {cycle:2d}: {'100KiB' if large else 'small '} window={pub.window} "
              f"killed after {delay:.2f}s sent={len(pub.sent)} confirmed={len(pub.confirmed)} "
              f"nacked={len(pub.nacked)} unconfirmed_at_kill={len(pub.sent) - len(pub.confirmed) - len(pub.nacked)} "
              f"last_confirm={gap_ms:.1f}ms_before_kill "
              f"consumer={'yes' if cons else 'no'} acked={len(cons.acked) if cons else 0} "
              f"held={len(cons.held) if cons else 0} spill_files={spill_files} "
              f"| restart {startup:.2f}s drain {drain_s:.2f}s "
              + " ".join(f"{k}={v}" for k, v in figures.items())
              + f" | log: {_recovery_line(b.log())}")
        if problems:
            _fail(problems, brokers)

    # After a graceful stop the acks of the last drain are on disk: the queue stays empty.
    b.stop()
    assert b.proc.returncode == 0, f"SIGTERM exit code {b.proc.returncode}:\n{b.log()[-3000:]}"
    b = start_broker(*extra, data_dir=data_dir)
    brokers.append(b)
    figures, problems = _drain_and_check(b, queue, ledger)
    if figures["present"]:
        problems.append(f"{figures['present']} acked messages came back after a graceful restart")
    if problems:
        _fail(problems, brokers)

    warn_about_log_errors(brokers)
    elapsed = time.monotonic() - t0
    print(f"kill9: cycles={cycles} confirmed={len(ledger.confirmed - ledger.transient)} lost=0 "
          f"duplicates={ledger.duplicates} nacked={len(ledger.nacked)} mode={mode} seconds={elapsed:.1f}")


def test_kill9_clients_control_run_without_a_kill(broker, cleanup, uid):
    """The same publisher, consumer and checks with a graceful end instead of a kill: everything
    confirmed and not acked is in the queue exactly once, in order. Also runs against RabbitMQ."""
    c = connect(broker)
    ch = c.channel()
    q = make_queue(ch, cleanup, f"kill9-control-{uid}", durable=True)
    ledger = Ledger()
    ids = itertools.count(1)
    pub = ConfirmPublisher(params(broker), q, lambda: next(ids), small_size, window=128, max_messages=3000,
                           transient_every=TRANSIENT_EVERY)
    pub.start()
    assert pub.started.wait(10), pub.error
    cons = AckingConsumer(params(broker), q, pub.sizes, prefetch=32)
    cons.start()
    assert cons.started.wait(10) and cons.error is None, cons.error
    time.sleep(1.0)
    pub.finish()
    assert pub.done.wait(20), f"publisher did not finish: {pub.unconfirmed} unconfirmed"
    assert pub.error is None, pub.error
    assert not isinstance(pub.close_reason, (ConnectionClosedByBroker, ChannelClosedByBroker)), pub.close_reason
    cons.stop(close=True)
    assert not cons.is_alive() and cons.error is None, cons.error
    assert cons.bad == []
    assert sorted(pub.confirmed) == pub.sent, "every publish confirmed, none nacked"

    ledger.sent, ledger.sizes, ledger.confirmed = set(pub.sent), dict(pub.sizes), set(pub.confirmed)
    ledger.transient = set(pub.transient)
    ledger.maybe_acked, ledger.delivered = set(cons.ack_attempted), set(cons.delivered)
    ok = ch.queue_declare(q, passive=True)
    drained = drain_with_get(ch, q)
    figures, problems = ledger.check(drained, ok.method.message_count, restarted=False)
    assert problems == []
    got = [d.msg_id for d in drained]
    assert set(got) == set(pub.confirmed) - cons.acked, "no crash: acked ids must not come back"
    assert figures["duplicates"] == 0
    held = [d for d in drained if d.msg_id in cons.held]
    assert len(held) == len(cons.held) and all(d.redelivered for d in held), "held ids requeued as redelivered"
    # Deliveries still in the client's buffer when it closed were requeued as redelivered too;
    # the broker never had more than `prefetch` of them outstanding.
    assert sum(d.redelivered for d in drained if d.msg_id not in cons.delivered) <= 32
    print(f"kill9 control: sent={len(pub.sent)} consumer_acked={len(cons.acked)} held={len(cons.held)} "
          f"left={len(drained)}")
    c.close()
