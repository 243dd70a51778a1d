"""The client side of the fault harness (issue 33, item 5): publishers and consumers as threads of
the test process, each a real pika client that reconnects through every fault, and the history of
what each of them saw, for checker.py to judge.

A publisher publishes ids ``<name>-<n>`` (n = 0, 1, 2, ...) one at a time and waits for each
confirm before the next, so the broker holds at most one unanswered message per publisher and a
confirmed id was in the queue before the next id was sent (checker.py's order rule rests on it).
Each id ends as "confirmed", "nacked" (a basic.nack) or "unknown" (the connection or channel went
before the answer: the message may or may not be in the queue). A consumer records every delivery
before it acks it, so a delivery the consumer saw is in the history even if its ack never arrives.

Every wait is bounded: connects by pika's socket and stack timeouts, a blackholed connection by the
heartbeat (pika closes it once heartbeats stop), a consumer's loop by a short ``process_data_events``
slice, a reconnect by a backoff the stop events interrupt, and ``stop()`` by a join timeout. One
wait is the broker's: a publisher blocked on a confirm over a live connection waits until the
broker answers (pika's blocking channel has no confirm timeout); ``stop()`` names such a thread in
``stats()["stuck_threads"]`` instead of waiting for it.

History (``Workload.history()``), plain data::

    {"queue": str, "urls": [str, ...],
     "publishes": [{"id": "p0-7", "publisher": "p0", "seq": 7, "url": str,
                    "outcome": "confirmed" | "nacked" | "unknown",
                    "sent": float, "answered": float | None}, ...],
     "deliveries": [{"id": "p0-7", "redelivered": bool, "consumer": "c1", "url": str,
                     "time": float}, ...],
     "stats": Workload.stats()}

Times are ``time.monotonic()`` of this process; deliveries are listed in the order they were recorded.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter

import pika
import pika.exceptions

QUORUM = {"x-queue-type": "quorum"}
STREAM = {"x-queue-type": "stream"}

# pika closes a connection that received nothing for its check interval (heartbeat + 5 s) twice
# running: a blackholed connection is noticed within 10 to 20 s (20 s measured, a SIGSTOPped broker)
HEARTBEAT_S = 5
SOCKET_TIMEOUT_S = 5.0  # a connect to an address that does not answer
STACK_TIMEOUT_S = 10.0  # the whole connection set-up (TCP, AMQP handshake)
BLOCKED_TIMEOUT_S = 10.0  # a connection the broker blocks (an alarm) longer than this is dropped
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 1.0
POLL_S = 0.2  # a consumer's process_data_events slice: how soon it notices stop()
PREFETCH = 10
JOIN_TIMEOUT_S = 30.0
DRAIN_POLL_S = 0.5


class ConsumerCancelled(Exception):
    """The broker cancelled a consumer (basic.cancel: its queue moved or went away): reconnect."""


class _Log:
    """The history under one lock: every thread appends, the test thread reads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.publishes: list[dict] = []
        self.deliveries: list[dict] = []
        self.delivered_ids: set[str] = set()
        # confirmed ids no consumer has recorded yet: drain() ends when it is empty, without
        # comparing two growing sets on every poll (a delivery may come before its confirm)
        self.missing: set[str] = set()
        self.outcomes: Counter = Counter()
        self.reconnects: Counter = Counter()
        self.errors: Counter = Counter()

    def sent(self, publisher: str, seq: int, url: str) -> dict:
        record = {"id": f"{publisher}-{seq}", "publisher": publisher, "seq": seq, "url": url,
                  "outcome": "pending", "sent": time.monotonic(), "answered": None}
        with self.lock:
            self.publishes.append(record)
        return record

    def answered(self, record: dict, outcome: str) -> None:
        with self.lock:
            record["outcome"] = outcome
            record["answered"] = time.monotonic() if outcome != "unknown" else None
            self.outcomes[outcome] += 1
            if outcome == "confirmed" and record["id"] not in self.delivered_ids:
                self.missing.add(record["id"])

    def delivered(self, message_id: str, redelivered: bool, consumer: str, url: str, offset: int | None = None) -> None:
        with self.lock:
            self.deliveries.append({"id": message_id, "redelivered": redelivered, "consumer": consumer,
                                    "url": url, "time": time.monotonic(), "offset": offset})
            self.delivered_ids.add(message_id)
            self.missing.discard(message_id)


class Workload:
    """``publishers`` publishers (p0, p1, ...) and ``consumers`` consumers (c0, c1, ...) on
    ``queue``, spread over ``urls`` and moving to the next URL (round robin) after any failure.

    Each connection declares the queue durable with ``queue_arguments`` (quorum by default; a
    declare is idempotent) or, with ``queue_arguments=None``, passively. A declare refused (the
    queue unavailable during a fault) is a failure like any other: the thread retries later.
    """

    def __init__(self, urls: list[str], queue: str, publishers: int = 2, consumers: int = 2,
                 queue_arguments: dict | None = QUORUM, heartbeat: int = HEARTBEAT_S,
                 prefetch: int = PREFETCH, join_timeout: float = JOIN_TIMEOUT_S) -> None:
        # a stream (``queue_arguments`` STREAM): each consumer reads it from the first offset and,
        # after any failure, goes on from the offset after the last one it recorded, as a stream
        # client does; each delivery's offset is recorded (checker.py ``offset_conflicts``)
        self.stream = (queue_arguments or {}).get("x-queue-type") == "stream"
        if not urls:
            raise ValueError("a workload needs at least one URL")
        self.urls = list(urls)
        self.queue = queue
        self.queue_arguments = queue_arguments
        self.heartbeat = heartbeat
        self.prefetch = prefetch
        self.join_timeout = join_timeout
        self.publisher_names = [f"p{i}" for i in range(publishers)]
        self.consumer_names = [f"c{i}" for i in range(consumers)]
        self._next_seq = dict.fromkeys(self.publisher_names, 0)  # each touched by its own thread only
        self._next_offset: dict[str, int] = {}  # a stream consumer's next offset (its own thread's)
        self._log = _Log()
        self._stop_publishing = threading.Event()
        self._stop_consuming = threading.Event()
        self._publishers: list[threading.Thread] = []
        self._consumers: list[threading.Thread] = []
        self._stuck: list[str] = []
        self._crashed: list[str] = []

    # --- control --------------------------------------------------------------------------------

    def start(self) -> Workload:
        if self._publishers or self._consumers:
            raise RuntimeError("a workload starts once")
        # the first URL of each thread differs, so the load is spread from the start
        for i, name in enumerate(self.consumer_names):
            self._consumers.append(self._thread(name, i, self._consume, self._stop_consuming))
        for i, name in enumerate(self.publisher_names):
            self._publishers.append(self._thread(name, i + len(self.consumer_names), self._publish,
                                                 self._stop_publishing))
        for thread in self._consumers + self._publishers:
            thread.start()
        return self

    def stop_publishing(self) -> None:
        """Stop every publisher and wait for it (at most ``join_timeout``): its last id is then
        answered, or stays "unknown"."""
        self._stop_publishing.set()
        self._join(self._publishers)

    def drain(self, timeout: float, quiet_s: float | None = None) -> bool:
        """Let the consumers consume (call after the faults healed and stop_publishing()) until
        every confirmed id was delivered and the queue shows no ready message, or until the
        queue showed none and no delivery came for ``quiet_s``, or ``timeout``. True when every
        confirmed id was delivered. ``quiet_s`` (3 heartbeats by default) only ends a drain that
        misses something: it gives a broker time to notice a dead consumer and requeue what it
        held, which the ready count does not show meanwhile."""
        quiet_s = 3 * self.heartbeat if quiet_s is None else quiet_s
        deadline = time.monotonic() + timeout
        poller = _ReadyCount(self)
        try:
            quiet_since = None
            last_count = -1
            while True:
                with self._log.lock:
                    every_confirmed_seen = not self._log.missing
                    count = len(self._log.deliveries)
                ready = poller.ready()
                now = time.monotonic()
                if every_confirmed_seen and ready == 0:
                    return True
                if ready == 0 and count == last_count:
                    quiet_since = now if quiet_since is None else quiet_since
                    if now - quiet_since >= quiet_s:
                        return every_confirmed_seen
                else:
                    quiet_since = None
                last_count = count
                if now >= deadline:
                    return every_confirmed_seen
                self._stop_consuming.wait(min(DRAIN_POLL_S, max(0.0, deadline - now)))
        finally:
            poller.close()

    def stop(self) -> None:
        """Stop every thread and join it, at most ``join_timeout`` in all; a thread still running
        then (blocked in the broker's hands) is named in ``stats()["stuck_threads"]``."""
        self._stop_publishing.set()
        self._stop_consuming.set()
        self._join(self._publishers + self._consumers)

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what it saw ----------------------------------------------------------------------------

    def counts(self) -> dict:
        """Running totals, cheap enough to poll: published, confirmed, nacked, unknown,
        deliveries, delivered (distinct ids), missing (confirmed, not delivered yet), reconnects."""
        with self._log.lock:
            return {"published": len(self._log.publishes), "confirmed": self._log.outcomes["confirmed"],
                    "nacked": self._log.outcomes["nacked"], "unknown": self._log.outcomes["unknown"],
                    "deliveries": len(self._log.deliveries), "delivered": len(self._log.delivered_ids),
                    "missing": len(self._log.missing), "reconnects": sum(self._log.reconnects.values())}

    def stats(self) -> dict:
        """``{"reconnects": {thread: n}, "errors": {exception class: n}, "stuck_threads": [...],
        "crashed_threads": [...]}``: a reconnect is a session opened after a failure; an error is
        any failure of a connect, a declare, a publish or a consume."""
        with self._log.lock:
            return {"reconnects": dict(self._log.reconnects), "errors": dict(self._log.errors),
                    "stuck_threads": list(self._stuck), "crashed_threads": list(self._crashed)}

    def history(self) -> dict:
        """The history (module docstring). An id still waiting for its answer is "unknown"."""
        with self._log.lock:
            publishes = copy.deepcopy(self._log.publishes)
            deliveries = copy.deepcopy(self._log.deliveries)
        for record in publishes:
            if record["outcome"] == "pending":
                record["outcome"] = "unknown"
        return {"queue": self.queue, "urls": list(self.urls), "publishes": publishes,
                "deliveries": deliveries, "stats": self.stats()}

    # --- threads --------------------------------------------------------------------------------

    def _thread(self, name: str, first_url: int, session, stop: threading.Event) -> threading.Thread:
        # daemon: a thread stuck on a broker that never answers must not keep pytest alive
        return threading.Thread(target=self._run, args=(name, first_url, session, stop),
                                name=f"workload-{name}", daemon=True)

    def _join(self, threads: list[threading.Thread]) -> None:
        deadline = time.monotonic() + self.join_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive() and thread.name not in self._stuck:
                with self._log.lock:
                    self._stuck.append(thread.name)

    def parameters(self, url: str, name: str) -> pika.URLParameters:
        """pika's parameters for ``url``, with every timeout this module relies on; ``name`` goes
        into the connection's name, which the broker's API and logs show."""
        params = pika.URLParameters(url)
        params.heartbeat = self.heartbeat
        params.socket_timeout = SOCKET_TIMEOUT_S
        params.stack_timeout = STACK_TIMEOUT_S
        params.blocked_connection_timeout = BLOCKED_TIMEOUT_S
        params.connection_attempts = 1  # the loop below retries, on the next URL
        params.client_properties = {"connection_name": f"workload {self.queue} {name}"}
        return params

    def _declare(self, channel) -> None:
        if self.queue_arguments is None:
            channel.queue_declare(self.queue, passive=True)
        else:
            channel.queue_declare(self.queue, durable=True, arguments=self.queue_arguments)

    def _run(self, name: str, url_index: int, session, stop: threading.Event) -> None:
        """Sessions of one publisher or consumer, one connection each, until ``stop``."""
        failed = False
        backoff = BACKOFF_MIN_S
        try:
            while not stop.is_set():
                url = self.urls[url_index % len(self.urls)]
                connection = None
                try:
                    connection = pika.BlockingConnection(self.parameters(url, name))
                    channel = connection.channel()
                    self._declare(channel)
                    if failed:
                        with self._log.lock:
                            self._log.reconnects[name] += 1
                    failed = False
                    backoff = BACKOFF_MIN_S
                    session(name, connection, channel, url)
                # any failure, whatever pika raises for it (its own errors, a socket's, or a
                # state error after a close it noticed late), is one more reason to reconnect:
                # its kind is counted so a run shows what it went through
                except Exception as exc:  # noqa: BLE001
                    with self._log.lock:
                        self._log.errors[type(exc).__name__] += 1
                    failed = True
                    url_index += 1
                    stop.wait(backoff)
                    backoff = min(2 * backoff, BACKOFF_MAX_S)
                finally:
                    _close_quietly(connection)
        except BaseException as exc:  # a bug of this module: name it rather than lose it
            with self._log.lock:
                self._crashed.append(f"{name}: {exc!r}")
            raise

    def _publish(self, name: str, connection, channel, url: str) -> None:
        channel.confirm_delivery()
        while not self._stop_publishing.is_set():
            # the sequence goes on across sessions: an id is never published twice
            seq = self._next_seq[name]
            self._next_seq[name] = seq + 1
            record = self._log.sent(name, seq, url)
            properties = pika.BasicProperties(delivery_mode=2, message_id=record["id"],
                                              headers={"x-workload-id": record["id"]})
            try:
                channel.basic_publish("", self.queue, record["id"].encode(), properties, mandatory=False)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
                self._log.answered(record, "nacked")
                # a broker that refuses everything would otherwise be asked as fast as it answers
                self._stop_publishing.wait(BACKOFF_MIN_S)
                continue
            except BaseException:
                self._log.answered(record, "unknown")
                raise
            self._log.answered(record, "confirmed")

    def _consume(self, name: str, connection, channel, url: str) -> None:
        cancelled: list = []
        channel.basic_qos(prefetch_count=self.prefetch)
        channel.add_on_cancel_callback(cancelled.append)

        def on_message(ch, method, properties, body: bytes) -> None:
            offset = None
            if self.stream:
                offset = (properties.headers or {}).get("x-stream-offset")
                if isinstance(offset, int):
                    self._next_offset[name] = offset + 1
            self._log.delivered(message_id(properties, body), bool(method.redelivered), name, url, offset)
            ch.basic_ack(method.delivery_tag)

        arguments = {"x-stream-offset": self._next_offset.get(name, "first")} if self.stream else None
        channel.basic_consume(self.queue, on_message, auto_ack=False, arguments=arguments)
        while not self._stop_consuming.is_set():
            connection.process_data_events(time_limit=POLL_S)
            if cancelled:
                raise ConsumerCancelled(f"{name}: the broker cancelled the consumer on {self.queue}")


class _ReadyCount:
    """drain()'s view of the queue: its ready count (a passive declare) over one connection that
    moves to the next URL when it fails."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.url_index = 0
        self.connection = None
        self.channel = None

    def ready(self) -> int | None:
        """The queue's ready messages, or None when no node answered this time."""
        try:
            if self.connection is None:
                url = self.workload.urls[self.url_index % len(self.workload.urls)]
                self.connection = pika.BlockingConnection(self.workload.parameters(url, "drain"))
                self.channel = self.connection.channel()
            return self.channel.queue_declare(self.workload.queue, passive=True).method.message_count
        except Exception:  # noqa: BLE001 - unavailable during a fault: ask the next node next time
            self.close()
            self.url_index += 1
            return None

    def close(self) -> None:
        _close_quietly(self.connection)
        self.connection = self.channel = None


def message_id(properties, body: bytes) -> str:
    """The id a publisher gave a message: its message-id property, else its body."""
    if properties is not None and properties.message_id:
        return str(properties.message_id)
    return body.decode("utf-8", errors="backslashreplace")


def _close_quietly(connection) -> None:
    """Close a connection that may already be gone; a close that fails has nothing left to do."""
    if connection is None or connection.is_closed:
        return
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - the connection died during the close: it is closed
        pass
