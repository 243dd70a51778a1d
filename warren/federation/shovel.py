"""Dynamic shovels: RabbitMQ's runtime parameters of component ``shovel``, run by Warren.

A shovel consumes from a source (a queue, or an exchange through a queue of its own) on one
broker and publishes to a destination (a queue or an exchange) on another, or the same. The
definition is RabbitMQ's (``validate`` checks it with RabbitMQ's keys and defaults):

* ``src-uri``/``dest-uri``: a URI or a list (tried in turn, warren/federation/links.py);
* ``src-queue``, or ``src-exchange`` with ``src-exchange-key`` (default ``#``): the exchange
  gets an exclusive, server-named queue of the shovel's; a named queue that does not exist is
  declared durable, as RabbitMQ does (``dest-queue`` too);
* ``dest-queue``, or ``dest-exchange`` with ``dest-exchange-key`` (default: the message's own
  routing key); neither: the message's own exchange and routing key;
* ``ack-mode``: ``on-confirm`` (default: the source is acked only once the destination
  confirmed the message, so nothing is lost when either end goes away; a message in flight may
  arrive twice, at most ``src-prefetch-count`` of them per failure), ``on-publish`` (acked once
  written to the destination), ``no-ack`` (consumed without acks);
* ``src-prefetch-count`` (default 1000), ``src-delete-after`` (``never``, ``queue-length``: the
  messages the queue held when the shovel started, or a number; the shovel then deletes its
  own parameter), ``dest-add-forward-headers`` (header ``x-shovelled``),
  ``dest-add-timestamp-header`` (``x-shovelled-timestamp``), ``reconnect-delay`` (seconds,
  default 5; 0: a failed shovel stays terminated), ``src-protocol``/``dest-protocol``
  (``amqp091``; ``amqp10`` is refused: Warren speaks AMQP 0-9-1 only).

State (``Shovel.status``): ``starting`` while connecting, ``running``, ``terminated`` with the
``reason`` while waiting to reconnect (or for good), RabbitMQ's HTTP fields.
"""

from __future__ import annotations

import asyncio
import logging
import time

from warren.federation.client import Channel, Client, LinkError
from warren.federation.links import Backoff, Credentials, connect_any, ensure_queue, sleep_or_stop, status_time
from warren.federation.uri import UriError, parse_uris
from warren.spec.fields import Long
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["ShovelDefinition", "Shovel", "validate", "ShovelError"]

log = logging.getLogger("warren.federation")

ACK_MODES = ("on-confirm", "on-publish", "no-ack")
DEFAULT_PREFETCH = 1000
DEFAULT_RECONNECT_DELAY = 5
# the keys RabbitMQ 3.10 accepts for a dynamic shovel (older names as aliases)
KEYS = {"src-uri", "dest-uri", "src-queue", "src-exchange", "src-exchange-key", "dest-queue", "dest-exchange",
        "dest-exchange-key", "ack-mode", "src-prefetch-count", "src-delete-after", "dest-add-forward-headers",
        "dest-add-timestamp-header", "reconnect-delay", "src-protocol", "dest-protocol", "src-consumer-args",
        "dest-publish-properties", "dest-queue-args", "src-queue-args"}
ALIASES = {"prefetch-count": "src-prefetch-count", "delete-after": "src-delete-after",
           "add-forward-headers": "dest-add-forward-headers", "add-timestamp-header": "dest-add-timestamp-header",
           "publish-properties": "dest-publish-properties"}
# properties a definition may set on every message (RabbitMQ's dest-publish-properties)
PUBLISH_PROPERTIES = {"content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
                      "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id",
                      "cluster_id", "headers"}


class ShovelError(ValueError):
    """A definition RabbitMQ would refuse (the message is its validation text)."""


class ShovelDefinition:
    def __init__(self, value: dict) -> None:
        v = {ALIASES.get(k, k): x for k, x in value.items()}
        self.raw = value
        self.src_uris = parse_uris(v["src-uri"], "src-uri")
        self.dest_uris = parse_uris(v["dest-uri"], "dest-uri")
        self.src_queue: str | None = v.get("src-queue")
        self.src_exchange: str | None = v.get("src-exchange")
        self.src_exchange_key: str = v.get("src-exchange-key", "#")
        self.dest_queue: str | None = v.get("dest-queue")
        self.dest_exchange: str | None = v.get("dest-exchange")
        self.dest_exchange_key: str | None = v.get("dest-exchange-key")
        self.ack_mode: str = v.get("ack-mode", "on-confirm")
        self.prefetch: int = v.get("src-prefetch-count", DEFAULT_PREFETCH)
        self.delete_after = v.get("src-delete-after", "never")
        self.forward_headers: bool = v.get("dest-add-forward-headers", False)
        self.timestamp_header: bool = v.get("dest-add-timestamp-header", False)
        self.reconnect_delay: float = v.get("reconnect-delay", DEFAULT_RECONNECT_DELAY)
        self.consumer_args: dict = v.get("src-consumer-args") or {}
        self.publish_properties: dict = v.get("dest-publish-properties") or {}
        self.dest_queue_args: dict = v.get("dest-queue-args") or {}
        self.src_queue_args: dict = v.get("src-queue-args") or {}
        self.src_protocol = v.get("src-protocol", "amqp091")
        self.dest_protocol = v.get("dest-protocol", "amqp091")


def validate(value) -> ShovelDefinition:
    """The definition, or ShovelError saying what is wrong (RabbitMQ's checks and wording)."""
    if not isinstance(value, dict):
        raise ShovelError("a shovel definition must be a JSON object")
    v = {ALIASES.get(k, k): x for k, x in value.items()}
    unknown = sorted(k for k in v if k not in KEYS)
    if unknown:
        raise ShovelError(f"Unrecognised terms {unknown} in shovel")
    for side in ("src", "dest"):
        proto = v.get(f"{side}-protocol", "amqp091")
        if proto == "amqp10":
            raise ShovelError(f"{side}-protocol amqp10: AMQP 1.0 shovels are not supported by Warren "
                              "(it speaks AMQP 0-9-1 only); use amqp091")
        if proto != "amqp091":
            raise ShovelError(f"{side}-protocol should be one of amqp091, amqp10; got {proto!r}")
        if f"{side}-uri" not in v:
            raise ShovelError(f"Key \"{side}-uri\" not found in shovel")
        try:
            parse_uris(v[f"{side}-uri"], f"{side}-uri")
        except UriError as e:
            raise ShovelError(str(e)) from None
    _one_of(v, "src-queue", "src-exchange", required=True)
    _one_of(v, "dest-queue", "dest-exchange", required=False)
    for key in ("src-queue", "src-exchange", "src-exchange-key", "dest-queue", "dest-exchange", "dest-exchange-key"):
        if key in v and not isinstance(v[key], str):
            raise ShovelError(f"{key} should be a string, got {v[key]!r}")
    if "src-exchange-key" in v and "src-exchange" not in v:
        raise ShovelError("src-exchange-key needs src-exchange")
    if "dest-exchange-key" in v and "dest-queue" in v:
        raise ShovelError("dest-exchange-key cannot be used with dest-queue")
    if v.get("ack-mode", "on-confirm") not in ACK_MODES:
        raise ShovelError(f"ack-mode should be one of {', '.join(ACK_MODES)}; got {v.get('ack-mode')!r}")
    prefetch = v.get("src-prefetch-count", DEFAULT_PREFETCH)
    if not _int(prefetch) or prefetch < 1:
        raise ShovelError(f"src-prefetch-count should be a positive integer, got {prefetch!r}")
    delete_after = v.get("src-delete-after", "never")
    if delete_after not in ("never", "queue-length") and not (_int(delete_after) and delete_after >= 0):
        raise ShovelError(f"src-delete-after should be \"never\", \"queue-length\" or a number >= 0; "
                          f"got {delete_after!r}")
    if delete_after == "queue-length" and "src-queue" not in v:
        raise ShovelError("src-delete-after queue-length needs src-queue")
    for key in ("dest-add-forward-headers", "dest-add-timestamp-header"):
        if key in v and not isinstance(v[key], bool):
            raise ShovelError(f"{key} should be true or false, got {v[key]!r}")
    delay = v.get("reconnect-delay", DEFAULT_RECONNECT_DELAY)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise ShovelError(f"reconnect-delay should be a number >= 0, got {delay!r}")
    for key in ("src-consumer-args", "dest-publish-properties", "dest-queue-args", "src-queue-args"):
        if key in v and not isinstance(v[key], dict):
            raise ShovelError(f"{key} should be a JSON object, got {v[key]!r}")
    bad = sorted(set(v.get("dest-publish-properties") or {}) - PUBLISH_PROPERTIES)
    if bad:
        raise ShovelError(f"dest-publish-properties: unknown properties {bad}")
    return ShovelDefinition(value)


def _one_of(v: dict, a: str, b: str, required: bool) -> None:
    if a in v and b in v:
        raise ShovelError(f"Cannot specify both {a} and {b}")
    if required and a not in v and b not in v:
        raise ShovelError(f"Must specify one of {a} or {b}")


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class Shovel:
    """One running dynamic shovel (a task), owned by the FederationManager."""

    def __init__(self, vhost: str, name: str, definition: ShovelDefinition, creds: Credentials,
                 node: str, on_finished) -> None:
        self.vhost, self.name, self.d = vhost, name, definition
        self.creds = creds
        self.node = node
        self.on_finished = on_finished  # called (vhost, name) once src-delete-after is reached
        self.state = "starting"
        self.reason = ""
        self.changed_at = time.time()
        self.src_uri = definition.src_uris[0].redacted
        self.dest_uri = definition.dest_uris[0].redacted
        self.forwarded = 0  # messages published to the destination (all sessions)
        self.confirmed = 0  # ... and confirmed (on-confirm) or acked at the source
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._src_index = self._dest_index = 0
        self._forward_header: dict | None = None
        self.blocked = False

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"shovel {self.vhost}/{self.name}")

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    def _set(self, state: str, reason: str = "") -> None:
        if state != self.state or reason != self.reason:
            self.state, self.reason, self.changed_at = state, reason, time.time()

    async def _run(self) -> None:
        backoff = Backoff(self.d.reconnect_delay)
        while not self._stop.is_set():
            self._set("starting")
            started = time.monotonic()
            try:
                finished = await self._session()
            except LinkError as e:
                finished = False
                self._set("terminated", str(e))
                log.warning("shovel '%s' in vhost '%s': %s", self.name, self.vhost, e)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug: say so and keep the broker running
                finished = False
                self._set("terminated", f"internal error: {e!r}")
                log.exception("shovel '%s' in vhost '%s' failed", self.name, self.vhost)
            if finished:
                self._set("terminated", "src-delete-after reached")
                log.info("shovel '%s' in vhost '%s' done (%d messages): deleting it", self.name, self.vhost,
                         self.forwarded)
                self.on_finished(self.vhost, self.name)
                return
            if self.d.reconnect_delay == 0 or self._stop.is_set():
                return
            if time.monotonic() - started > 10:
                backoff.reset()
            if await sleep_or_stop(self._stop, backoff.next_delay()):
                return

    # --- one session: both connections up, messages flowing ---------------------------------

    async def _session(self) -> bool:
        """Move messages until a connection fails (LinkError) or src-delete-after is reached (True)."""
        d = self.d
        label = f"Shovel {self.name}"
        src, self._src_index = await connect_any(d.src_uris, self._src_index, self.creds, label)
        dest = None
        try:
            dest, self._dest_index = await connect_any(d.dest_uris, self._dest_index, self.creds, label)
            self.src_uri = d.src_uris[self._src_index].redacted
            self.dest_uri = d.dest_uris[self._dest_index].redacted
            return await self._transfer(src, dest)
        finally:
            # the source first: its unacked deliveries go back to its queue
            await _close(src)
            if dest is not None:
                await _close(dest)

    async def _transfer(self, src: Client, dest: Client) -> bool:
        d = self.d
        dch = await dest.channel()
        if d.dest_queue is not None:
            await ensure_queue(dest, d.dest_queue, d.dest_queue_args)
        if d.ack_mode == "on-confirm":
            await dch.confirm_select()
        sch = await src.channel()
        remaining: int | None = None
        if d.src_queue is not None:
            count = await ensure_queue(src, d.src_queue, d.src_queue_args)
            queue = d.src_queue
            if d.delete_after == "queue-length":
                remaining = count
        else:
            ok = await sch.declare_queue("", durable=False, exclusive=True, auto_delete=True)
            queue = ok.queue
            await sch.bind_queue(queue, d.src_exchange, d.src_exchange_key)
        if isinstance(d.delete_after, int) and not isinstance(d.delete_after, bool):
            remaining = d.delete_after
        if remaining == 0:
            return True
        no_ack = d.ack_mode == "no-ack" and remaining is None  # a count needs acks to stop exactly
        prefetch = d.prefetch if remaining is None else min(d.prefetch, remaining)
        await sch.qos(prefetch)
        done = asyncio.get_running_loop().create_future()
        pending: set = set()  # confirm futures not yet resolved (on-confirm)
        state = {"remaining": remaining}

        def on_deliver(ch: Channel, m, properties: bytes, body: bytes) -> None:
            left = state["remaining"]
            if left is not None:
                if left <= 0:
                    return  # past the count: left unacked, back to the queue when we close
                state["remaining"] = left - 1
            exchange, routing_key = self._destination(m)
            if d.forward_headers or d.timestamp_header or d.publish_properties:
                properties = self._edit(properties, m)
            try:
                fut = dch.publish(exchange, routing_key, properties, body)
            except LinkError:
                return  # the destination is gone; the session ends on its closed future
            self.forwarded += 1
            tag = m.delivery_tag
            if fut is None:  # on-publish / no-ack
                if not no_ack:
                    ch.ack(tag)
                self.confirmed += 1
                if state["remaining"] == 0 and not done.done():
                    done.set_result(True)
            else:
                pending.add(fut)
                fut.add_done_callback(lambda f, t=tag: self._confirmed(f, t, ch, pending, state, done))
            if not dest.can_write() and not state.get("paused") and src.transport is not None:
                state["paused"] = True  # the destination pushes back: stop reading the source
                src.transport.pause_reading()
                asyncio.ensure_future(_resume_when_writable(src, dest, state))

        await sch.consume(queue, on_deliver, no_ack=no_ack, arguments=d.consumer_args)
        self._set("running")
        log.info("shovel '%s' in vhost '%s' running: %s -> %s", self.name, self.vhost, self.src_uri, self.dest_uri)
        waits = [src.closed, dest.closed, done]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if done.done():
            return True
        reason = src.closed_reason or dest.closed_reason
        which = "source" if src.closed_reason is not None else "destination"
        raise LinkError(f"{which}: {reason}")

    def _confirmed(self, fut: asyncio.Future, tag: int, src_channel: Channel, pending: set, state: dict,
                   done: asyncio.Future) -> None:
        pending.discard(fut)
        if fut.cancelled() or fut.exception() is not None:
            return  # the destination went away: the source redelivers it after we reconnect
        if fut.result():
            src_channel.ack(tag)
            self.confirmed += 1
        else:
            # nacked by the destination: back to the source queue (RabbitMQ requeues too)
            src_channel.nack(tag, requeue=True)
            if state["remaining"] is not None:
                state["remaining"] += 1
            return
        if state["remaining"] == 0 and not pending and not done.done():
            done.set_result(True)

    def _destination(self, m) -> tuple[str, str]:
        d = self.d
        if d.dest_queue is not None:
            return "", d.dest_queue
        if d.dest_exchange is not None:
            return d.dest_exchange, d.dest_exchange_key if d.dest_exchange_key is not None else m.routing_key
        return m.exchange, d.dest_exchange_key if d.dest_exchange_key is not None else m.routing_key

    def _edit(self, properties: bytes, m) -> bytes:
        """The property list with the forward/timestamp headers and dest-publish-properties."""
        p, _ = BasicProperties.decode(properties, 0)
        d = self.d
        for key, value in d.publish_properties.items():
            setattr(p, key, value)
        headers = dict(p.headers or {})
        if d.forward_headers:
            headers["x-shovelled"] = [self._forward_table()] + list(headers.get("x-shovelled") or [])
        if d.timestamp_header:
            headers["x-shovelled-timestamp"] = Long(int(time.time()))  # RabbitMQ sends a long
        p.headers = headers
        return p.encode()

    def _forward_table(self) -> dict:
        t = {"shovelled-by": self.node, "shovel-type": "dynamic", "shovel-name": self.name,
             "shovel-vhost": self.vhost, "src-uri": self.src_uri, "dest-uri": self.dest_uri}
        t.update(self._ends("-"))
        return t

    def _ends(self, sep: str) -> dict:
        """The source's and destination's queue or exchange (and key), RabbitMQ's names with
        ``sep`` between words: "-" in the x-shovelled header, "_" in the HTTP status."""
        d = self.d
        t = {}
        if d.src_queue is not None:
            t[f"src{sep}queue"] = d.src_queue
        else:
            t[f"src{sep}exchange"] = d.src_exchange
            t[f"src{sep}exchange{sep}key"] = d.src_exchange_key
        if d.dest_queue is not None:
            t[f"dest{sep}queue"] = d.dest_queue
        elif d.dest_exchange is not None:
            t[f"dest{sep}exchange"] = d.dest_exchange
            if d.dest_exchange_key is not None:
                t[f"dest{sep}exchange{sep}key"] = d.dest_exchange_key
        return t

    # --- status ---------------------------------------------------------------------------

    def status(self) -> dict:
        """RabbitMQ's /api/shovels item for a dynamic shovel."""
        item = {"node": self.node, "timestamp": status_time(self.changed_at), "name": self.name,
                "vhost": self.vhost, "type": "dynamic", "state": self.state}
        if self.state == "terminated":
            item["reason"] = self.reason
            return item
        item.update({"src_uri": self.src_uri, "src_protocol": "amqp091", "dest_protocol": "amqp091",
                     "dest_uri": self.dest_uri})
        item.update(self._ends("_"))
        item["forwarded"] = self.forwarded  # Warren's own count (not in RabbitMQ 3.10)
        return item


async def _resume_when_writable(src: Client, dest: Client, state: dict) -> None:
    try:
        await dest.writable()
    except LinkError:
        return
    state["paused"] = False
    if src.transport is not None and not src.is_closed:
        src.transport.resume_reading()


async def _close(client: Client) -> None:
    try:
        await client.close(timeout=1.0)
    except Exception:  # closing is best effort: the session is over either way
        client.abort()
