"""Client threads and checks for the crash tests (tests/e2e/test_kill9.py).

* `ConfirmPublisher`: a pika SelectConnection in a thread that keeps up to `window` persistent
  messages unconfirmed, each with message_id = a unique increasing integer, and records an id in
  `confirmed` the moment its basic.ack arrives.
* `AckingConsumer`: a pika BlockingConnection consumer in a thread that acks most deliveries and
  holds some unacked; it records which ids it tried to ack and which acks were sent.
* `body_for(id, size)`: the only body a message with that id may carry.
* `Ledger`: what was published, confirmed and acked over all cycles, and the check of a drained
  queue against it.

The broker is killed under these threads; every callback tolerates the connection vanishing.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field

import pika


class BrokerLogWarning(UserWarning):
    """A broker log holds a traceback or an ERROR line (reported, does not fail the test)."""


def warn_about_log_errors(brokers) -> None:
    """Emit a BrokerLogWarning with the first ERROR/Traceback excerpt of each broker log."""
    import warnings
    for n, b in enumerate(brokers):
        lines = b.log().splitlines()
        for i, line in enumerate(lines):
            if "Traceback" in line or " ERROR " in line:
                excerpt = "\n".join(lines[max(0, i - 2):i + 12])
                warnings.warn(BrokerLogWarning(f"broker {n} ({b.log_path}):\n{excerpt}"), stacklevel=2)
                break


def body_for(msg_id: int, size: int) -> bytes:
    """sha256(str(id)) repeated to `size` octets: a garbled or mixed-up body cannot pass."""
    d = hashlib.sha256(str(msg_id).encode()).digest()
    return (d * (size // len(d) + 1))[:size]


def small_size(msg_id: int) -> int:
    """Varied small sizes (16 .. ~4 KiB), so records straddle write and page boundaries."""
    return 16 + (msg_id * 7919) % 4000


class ConfirmPublisher(threading.Thread):
    """Publishes persistent messages to `queue` (default exchange) on a confirm channel.

    `next_id()` hands out ids; `size_of(id)` gives the body size. Up to `window` publishes are
    unconfirmed at a time; at most `max_messages` are published; with `transient_every` = k > 0,
    ids divisible by k are published transient (delivery_mode 1); `max_rate` (messages/s) paces
    publishing so that it still runs when a kill comes. `sent` holds every id for which
    basic.publish was attempted (recorded before the call), `confirmed` / `nacked` the ids in the
    order their confirms arrived, `sizes` the body size of each id.
    """

    def __init__(self, params: pika.ConnectionParameters, queue: str, next_id, size_of,
                 window: int = 256, max_messages: int | None = None, transient_every: int = 0,
                 max_rate: float | None = None):
        super().__init__(daemon=True, name="confirm-publisher")
        self.params, self.queue, self.next_id, self.size_of = params, queue, next_id, size_of
        self.window, self.max_messages = window, max_messages
        self.transient_every = transient_every
        self.max_rate = max_rate
        self._t0 = 0.0
        self._pump_scheduled = False
        self.sent: list[int] = []
        self.transient: set[int] = set()   # ids published with delivery_mode 1
        self.sizes: dict[int, int] = {}
        self.confirmed: list[int] = []
        self.nacked: list[int] = []
        self.error: BaseException | None = None
        self.close_reason: object = None
        self.last_confirm_at = 0.0         # time.monotonic() of the last basic.ack/nack
        self.started = threading.Event()   # confirm.select-ok received, publishing begins
        self.done = threading.Event()
        self._outstanding: dict[int, int] = {}  # delivery tag -> id, in publish order
        self._tag = 0
        self._finishing = False
        self._conn: pika.SelectConnection | None = None
        self._ch = None
        self._props = None

    # -- thread
    def run(self) -> None:
        try:
            self._conn = pika.SelectConnection(
                self.params, on_open_callback=self._on_open,
                on_open_error_callback=self._on_open_error, on_close_callback=self._on_closed)
            self._conn.ioloop.start()
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e
        finally:
            self.done.set()

    def finish(self) -> None:
        """Stop publishing, wait for the outstanding confirms, then close (graceful runs only)."""
        def go():
            self._finishing = True
            self._maybe_close()
        if self._conn is not None and not self.done.is_set():
            self._conn.ioloop.add_callback_threadsafe(go)

    @property
    def unconfirmed(self) -> int:
        return len(self._outstanding)

    # -- callbacks (publisher thread)
    def _on_open(self, conn) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_open_error(self, conn, err) -> None:
        self.error = err if isinstance(err, BaseException) else RuntimeError(str(err))
        conn.ioloop.stop()

    def _on_closed(self, conn, reason) -> None:
        self.close_reason = reason
        conn.ioloop.stop()

    def _on_channel(self, ch) -> None:
        self._ch = ch
        ch.add_on_close_callback(self._on_channel_closed)
        ch.confirm_delivery(self._on_confirm, callback=self._on_select_ok)

    def _on_channel_closed(self, ch, reason) -> None:
        self.close_reason = reason
        if self._conn is not None and self._conn.is_open:
            self._conn.close()

    def _on_select_ok(self, _frame) -> None:
        self._t0 = time.monotonic()
        self.started.set()
        self._pump()

    def _scheduled_pump(self) -> None:
        self._pump_scheduled = False
        self._pump()

    def _pump(self) -> None:
        ch = self._ch
        budget = float("inf")
        if self.max_rate:
            budget = self.max_rate * (time.monotonic() - self._t0) + 1
        while (not self._finishing and ch is not None and ch.is_open
               and len(self._outstanding) < self.window
               and (self.max_messages is None or len(self.sent) < self.max_messages)):
            if len(self.sent) >= budget:
                if not self._pump_scheduled and self._conn is not None:
                    self._pump_scheduled = True
                    self._conn.ioloop.call_later(0.005, self._scheduled_pump)
                break
            i = self.next_id()
            size = self.size_of(i)
            self.sent.append(i)
            self.sizes[i] = size
            mode = 2
            if self.transient_every and i % self.transient_every == 0:
                mode = 1
                self.transient.add(i)
            props = pika.BasicProperties(delivery_mode=mode, message_id=str(i))
            ch.basic_publish("", self.queue, body_for(i, size), props)
            self._tag += 1
            self._outstanding[self._tag] = i

    def _on_confirm(self, frame) -> None:
        m = frame.method
        self.last_confirm_at = time.monotonic()
        if m.multiple:
            tags = [t for t in self._outstanding if t <= m.delivery_tag]
        else:
            tags = [m.delivery_tag] if m.delivery_tag in self._outstanding else []
        into = self.confirmed if isinstance(m, pika.spec.Basic.Ack) else self.nacked
        for t in tags:
            into.append(self._outstanding.pop(t))
        self._pump()
        self._maybe_close()

    def _maybe_close(self) -> None:
        if self._finishing and not self._outstanding and self._conn is not None and self._conn.is_open:
            self._conn.close()


class AckingConsumer(threading.Thread):
    """Consumes `queue` with manual acks and prefetch `prefetch`.

    Every `hold_every`-th id is held unacked (at most `max_held` at a time), the rest are acked
    one by one. An id goes into `ack_attempted` before basic.ack is called and into `acked` after
    the call returned (the frame was written). Bodies are checked against `body_for` with `sizes`.
    """

    def __init__(self, params: pika.ConnectionParameters, queue: str, sizes: dict[int, int],
                 prefetch: int = 64, hold_every: int = 11, max_held: int = 30):
        super().__init__(daemon=True, name="acking-consumer")
        self.params, self.queue, self.sizes = params, queue, sizes
        # never hold more than half the prefetch window, or the consumer stalls
        self.prefetch, self.hold_every, self.max_held = prefetch, hold_every, min(max_held, prefetch // 2)
        self.delivered: list[int] = []
        self.delivered_at: dict[int, float] = {}   # id -> time.monotonic() of its (first) delivery
        self.held: set[int] = set()
        self.ack_attempted: set[int] = set()
        self.acked: set[int] = set()
        self.bad: list[str] = []
        self.error: BaseException | None = None
        self.started = threading.Event()
        self._stop_requested = threading.Event()
        self._conn: pika.BlockingConnection | None = None

    def stop(self, close: bool = True, timeout: float = 10.0) -> None:
        """Ask the thread to end; with close=True it closes its connection (graceful runs)."""
        self._close_at_end = close
        self._stop_requested.set()
        self.join(timeout)

    _close_at_end = False

    def run(self) -> None:
        try:
            self._conn = pika.BlockingConnection(self.params)
            ch = self._conn.channel()
            ch.basic_qos(prefetch_count=self.prefetch)
            ch.basic_consume(self.queue, self._on_message)
            self.started.set()
            while not self._stop_requested.is_set():
                self._conn.process_data_events(time_limit=0.05)
            if self._close_at_end and self._conn.is_open:
                self._conn.close()
        except BaseException as e:  # the broker was killed under us (expected in crash runs)
            self.error = e
        finally:
            self.started.set()

    def _on_message(self, ch, method, props, body) -> None:
        try:
            i = int(props.message_id)
        except (TypeError, ValueError):
            self.bad.append(f"delivery with message_id {props.message_id!r}")
            return
        self.delivered.append(i)
        self.delivered_at.setdefault(i, time.monotonic())
        if i not in self.sizes or body != body_for(i, self.sizes[i]):
            self.bad.append(f"id {i}: body of {len(body)} octets does not match")
        if i % self.hold_every == 0 and len(self.held) < self.max_held:
            self.held.add(i)
            return
        self.ack_attempted.add(i)
        ch.basic_ack(method.delivery_tag)
        self.acked.add(i)


@dataclass
class Drained:
    """One message as basic.get returned it after a restart."""
    msg_id: int | None
    redelivered: bool
    body: bytes
    delivery_mode: int | None
    raw_id: object = None
    delivery_tag: int = 0


@dataclass
class Ledger:
    """What happened over all cycles; `check` judges a drained queue against it."""
    sent: set[int] = field(default_factory=set)           # basic.publish attempted
    sizes: dict[int, int] = field(default_factory=dict)
    transient: set[int] = field(default_factory=set)      # published with delivery_mode 1
    confirmed: set[int] = field(default_factory=set)      # basic.ack received by the publisher
    nacked: set[int] = field(default_factory=set)
    maybe_acked: set[int] = field(default_factory=set)    # ack attempted (consumer or drain)
    delivered: set[int] = field(default_factory=set)      # handed to a client at least once
    duplicates: int = 0                                   # acked ids that came back (allowed)

    def check(self, drained: list[Drained], message_count: int | None = None,
              expect_redelivered: set[int] = frozenset(), restarted: bool = True) -> tuple[dict, list[str]]:
        """Returns (figures, problems). Problems: a confirmed, never-acked id missing; an id never
        published; a body or property that does not match its id; an id twice in one queue;
        ids out of publish order; a declare-ok message count different from what basic.get found;
        an id of `expect_redelivered` (delivered well before the kill, never acked) present with
        redelivered=False; after a restart, a transient message."""
        problems: list[str] = []
        ids = [d.msg_id for d in drained if d.msg_id is not None]
        seen: set[int] = set()
        twice = sorted({i for i in ids if i in seen or seen.add(i)})
        if twice:
            problems.append(f"ids present twice in the queue: {twice[:20]}")
        for d in drained:
            if d.msg_id is None:
                problems.append(f"message with unparsable message_id {d.raw_id!r} ({len(d.body)} octets)")
            elif d.msg_id not in self.sent:
                problems.append(f"id {d.msg_id} was never published")
            elif d.body != body_for(d.msg_id, self.sizes[d.msg_id]):
                problems.append(f"id {d.msg_id}: body of {len(d.body)} octets (expected "
                                f"{self.sizes[d.msg_id]}) does not match its id")
            if d.msg_id in self.transient:
                if restarted:
                    problems.append(f"transient id {d.msg_id} survived a restart")
                elif d.delivery_mode != 1:
                    problems.append(f"transient id {d.msg_id} has delivery_mode {d.delivery_mode!r}")
            elif d.msg_id is not None and d.delivery_mode != 2:
                problems.append(f"id {d.msg_id}: delivery_mode {d.delivery_mode!r}, published as 2")
        out_of_order = [(a, b) for a, b in zip(ids, ids[1:]) if b <= a]
        if out_of_order:
            problems.append(f"ids out of publish order (first pairs): {out_of_order[:10]}")
        required = self.confirmed - self.maybe_acked - (self.transient if restarted else set())
        lost = sorted(required - seen)
        if lost:
            problems.append(f"{len(lost)} confirmed, never-acked ids missing: {lost[:30]}")
        if message_count is not None and message_count != len(drained):
            problems.append(f"queue.declare-ok said {message_count} messages, basic.get found {len(drained)}")
        not_flagged = sorted(d.msg_id for d in drained if d.msg_id in expect_redelivered and not d.redelivered)
        if not_flagged:
            problems.append(f"{len(not_flagged)} ids delivered and unacked well before the kill came back "
                            f"with redelivered=False: {not_flagged[:20]}")
        dups = seen & self.maybe_acked
        self.duplicates += len(dups)
        delivered_back = [d for d in drained if d.msg_id in self.delivered]
        fresh = [d for d in drained if d.msg_id is not None and d.msg_id not in self.delivered]
        figures = {
            "present": len(drained),
            "required": len(required),
            "lost": len(lost),
            "duplicates": len(dups),
            "unconfirmed_present": len(seen & (self.sent - self.confirmed)),
            "delivered_back": len(delivered_back),
            "delivered_back_redelivered": sum(d.redelivered for d in delivered_back),
            "fresh_redelivered": sum(d.redelivered for d in fresh),
            "old_unacked_back": sum(d.msg_id in expect_redelivered for d in drained),
            "old_unacked_back_redelivered": sum(d.msg_id in expect_redelivered and d.redelivered for d in drained),
        }
        return figures, problems


def drain_with_get(channel, queue: str, deadline_s: float = 30.0) -> list[Drained]:
    """basic.get (no auto-ack) until the queue is empty; the caller acks with multiple=True."""
    out: list[Drained] = []
    deadline = time.monotonic() + deadline_s
    while True:
        method, props, body = channel.basic_get(queue, auto_ack=False)
        if method is None:
            return out
        try:
            msg_id = int(props.message_id)
        except (TypeError, ValueError):
            msg_id = None
        out.append(Drained(msg_id, bool(method.redelivered), body, props.delivery_mode,
                           props.message_id, method.delivery_tag))
        if time.monotonic() > deadline:
            raise AssertionError(f"draining {queue} took over {deadline_s}s ({len(out)} messages)")
