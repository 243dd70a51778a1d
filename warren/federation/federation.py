"""Federation: RabbitMQ's federated exchanges and queues, applied by policy.

Upstreams are runtime parameters of component ``federation-upstream`` (``uri`` — one or a list,
``exchange``, ``queue``, ``max-hops`` (1), ``expires``, ``message-ttl``, ``prefetch-count``
(1000), ``reconnect-delay`` (5 s), ``ack-mode`` (``on-confirm``), ``trust-user-id``) and sets of
them of component ``federation-upstream-set`` (a list of ``{"upstream": name, ...overrides}``;
the set ``all`` is every upstream of the vhost). A policy with ``federation-upstream`` or
``federation-upstream-set`` makes its matching exchanges/queues federated: one link per
(exchange or queue, upstream).

**Exchange links** (as RabbitMQ's, so either side may be RabbitMQ): on the upstream, the link
declares the upstream exchange if missing, an internal auto-delete helper exchange of type
``x-federation-upstream`` named ``federation: X -> NODE:VHOST:X B`` (arguments
``x-max-hops``, ``x-downstream-name``, ``x-downstream-vhost``: it drops what already went
through this downstream or too many brokers, warren/broker/exchanges/federation_upstream.py),
and a durable queue ``federation: X -> NODE:VHOST:X`` (``x-expires``/``x-message-ttl`` from the
upstream's ``expires``/``message-ttl``) bound to it. The upstream exchange is bound to the
helper with every binding key of the downstream exchange (kept in step as bindings come and
go, ``BINDING_SYNC_S``), so only what someone downstream wants crosses. Each message received is
republished to the downstream exchange with its routing key and an ``x-received-from`` entry
(``uri``, ``exchange``, ``redelivered``, ``cluster-name``, ``vhost``) in front of those it had,
and acknowledged upstream once the downstream confirmed it (``on-confirm``).

**Queue links**: the link consumes from the upstream queue (same name unless ``queue`` says
otherwise; consumer priority -1, as RabbitMQ, so consumers local to the upstream come first)
only while the downstream queue has a consumer with credit and no message of its own
(``QUEUE_CHECK_S``), and publishes what it receives into the downstream queue with
``x-received-from`` (``uri``, ``queue``, ``redelivered``, ``visit-count``),
``x-original-exchange`` and ``x-original-routing-key``.

Links connect to the local broker over loopback as its default user (or an explicit
``local-username`` is not supported: docs/federation.md). Status: ``Federation.status`` with
RabbitMQ's /api/federation-links fields.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from urllib.parse import quote

from warren.broker.exchanges.base import freeze
from warren.broker.exchanges.federation_upstream import as_text
from warren.broker.policies import pick
from warren.spec.fields import Long  # RabbitMQ insists on type long for these arguments
from warren.federation.client import Channel, Client, LinkError
from warren.federation.links import Backoff, connect, connect_any, ensure_queue, sleep_or_stop, status_time
from warren.federation.uri import UriError, parse_uri, parse_uris
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["Federation", "validate_upstream", "validate_upstream_set", "UPSTREAM_KEYS"]

log = logging.getLogger("warren.federation")

BINDING_SYNC_S = 0.2  # how often an exchange link compares the downstream bindings with its own
QUEUE_CHECK_S = 0.05  # how often a queue link looks whether its downstream queue wants messages
DEFAULT_PREFETCH = 1000
DEFAULT_RECONNECT_DELAY = 5
ACK_MODES = ("on-confirm", "on-publish", "no-ack")
POLICY_KEYS = ("federation-upstream", "federation-upstream-set")
BOUND_FROM = "x-bound-from"

UPSTREAM_KEYS = {
    "uri": None, "exchange": str, "queue": str, "consumer-tag": str, "max-hops": "pos", "expires": "pos",
    "message-ttl": "nonneg", "prefetch-count": "pos", "reconnect-delay": "number", "ack-mode": str,
    "trust-user-id": bool, "ha-policy": str, "queue-type": str, "bind-nowait": bool,
    "resource-cleanup-mode": str,
}


def validate_upstream(value) -> dict:
    """An upstream's definition, or ValueError with RabbitMQ-like wording."""
    if not isinstance(value, dict):
        raise ValueError("a federation upstream must be a JSON object")
    if "uri" not in value:
        raise ValueError("Key \"uri\" not found in federation-upstream")
    _check_keys(value, "federation-upstream")
    return value


def validate_upstream_set(value) -> list:
    if not isinstance(value, list):
        raise ValueError("a federation upstream set must be a JSON list of {\"upstream\": name, ...}")
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("upstream"), str):
            raise ValueError("each member of an upstream set needs \"upstream\": the name of an upstream")
        _check_keys({k: v for k, v in entry.items() if k != "upstream"}, "federation-upstream-set")
    return value


def _check_keys(value: dict, what: str) -> None:
    unknown = sorted(k for k in value if k not in UPSTREAM_KEYS)
    if unknown:
        raise ValueError(f"Unrecognised terms {unknown} in {what}")
    for key, kind in UPSTREAM_KEYS.items():
        if key not in value:
            continue
        v = value[key]
        if key == "uri":
            try:
                parse_uris(v, "uri")
            except UriError as e:
                raise ValueError(str(e)) from None
        elif kind in ("pos", "nonneg"):
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if kind == "pos" else 0):
                raise ValueError(f"{key} should be {'a positive' if kind == 'pos' else 'a non-negative'} "
                                 f"integer, got {v!r}")
        elif kind == "number":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{key} should be a number >= 0, got {v!r}")
        elif not isinstance(v, kind):
            raise ValueError(f"{key} should be a {'boolean' if kind is bool else 'string'}, got {v!r}")
    if value.get("ack-mode", "on-confirm") not in ACK_MODES:
        raise ValueError(f"ack-mode should be one of {', '.join(ACK_MODES)}; got {value.get('ack-mode')!r}")


class Federation:
    """Which links should run (policies x upstreams) and the links that do."""

    def __init__(self, manager) -> None:
        self.manager = manager
        self.links: dict[tuple, "_Link"] = {}
        self._last_policies: dict[str, int] = {}

    def _upstreams(self, vhost: str, policy_value: str, key: str) -> list[tuple[str, dict]]:
        params = self.manager.parameters
        if key == "federation-upstream":
            up = params.get("federation-upstream", vhost, policy_value)
            return [] if up is params.MISSING else [(policy_value, dict(up))]
        if policy_value == "all":
            return [(p["name"], dict(p["value"])) for p in params.list("federation-upstream", vhost)]
        members = params.get("federation-upstream-set", vhost, policy_value)
        if members is params.MISSING:
            return []
        out = []
        for m in members:
            up = params.get("federation-upstream", vhost, m.get("upstream"))
            if up is not params.MISSING:
                merged = dict(up)
                merged.update({k: v for k, v in m.items() if k != "upstream"})
                out.append((m["upstream"], merged))
        return out

    def desired(self) -> dict[tuple, dict]:
        """(vhost, kind, name, upstream) -> upstream config, from the policies in force.

        An exchange's links run in one process (``runs_here``): asked only of exchanges a
        federation policy applies to, since in a cluster the asking claims the run; those
        exchanges are told to the manager (``exchanges_federated``), which releases the others."""
        out: dict[tuple, dict] = {}
        federated: set[tuple[str, str]] = set()
        for vhost in list(self.manager.broker.vhosts.values()):
            policies = [p for p in vhost.policies if any(k in p.definition for k in POLICY_KEYS)]
            if not policies:
                continue
            for kind, objects in (("exchange", vhost.exchanges), ("queue", vhost.queues)):
                for name, obj in list(objects.items()):
                    if not name or (kind == "exchange" and (obj.TYPE == "x-federation-upstream"
                                                            or name.startswith("amq."))):
                        continue
                    if kind == "queue" and obj.exclusive_owner is not None:
                        continue
                    p = pick(vhost.policies, vhost.name, kind, name)
                    if p is None or not any(isinstance(p.definition.get(key), str) for key in POLICY_KEYS):
                        continue
                    if kind == "exchange":
                        federated.add((vhost.name, name))
                        if not self.manager.runs_here(vhost.name, kind, name):
                            continue  # another worker (--worker-mode queues) or node (a cluster) runs it
                    for key in POLICY_KEYS:
                        value = p.definition.get(key)
                        if isinstance(value, str):
                            for up_name, cfg in self._upstreams(vhost.name, value, key):
                                out[(vhost.name, kind, name, up_name)] = cfg
                            break
        self.manager.exchanges_federated(federated)
        return out

    def reconcile(self, force: bool = False) -> None:
        if not self.manager.started:
            return
        want = self.desired()
        for key, link in list(self.links.items()):
            if key not in want or want[key] != link.config:
                del self.links[key]
                asyncio.get_running_loop().create_task(link.stop(cleanup=key not in want))
        for key, cfg in want.items():
            if key not in self.links:
                vhost, kind, name, upstream = key
                try:
                    cls = ExchangeLink if kind == "exchange" else QueueLink
                    link = cls(self.manager, vhost, name, upstream, cfg)
                except (ValueError, UriError) as e:
                    log.error("federation link %s '%s' in vhost '%s' to upstream '%s' cannot run: %s",
                              kind, name, vhost, upstream, e)
                    continue
                self.links[key] = link
                link.start()

    def status(self, vhost: str | None = None) -> list[dict]:
        return [link.status() for key, link in sorted(self.links.items()) if vhost is None or key[0] == vhost]

    async def stop(self) -> None:
        links, self.links = list(self.links.values()), {}
        await asyncio.gather(*(link.stop(cleanup=False) for link in links), return_exceptions=True)


class _Link:
    """One federation link: reconnects with back-off, keeps a RabbitMQ-like status."""

    KIND = ""

    def __init__(self, manager, vhost: str, name: str, upstream: str, config: dict) -> None:
        self.manager = manager
        self.vhost, self.name, self.upstream, self.config = vhost, name, upstream, config
        self.uris = parse_uris(config["uri"])
        self.local_endpoint = parse_uri("amqp:///" + quote(vhost, safe=""))
        self.prefetch = config.get("prefetch-count", DEFAULT_PREFETCH)
        self.ack_mode = config.get("ack-mode", "on-confirm")
        self.reconnect_delay = config.get("reconnect-delay", DEFAULT_RECONNECT_DELAY)
        self.status_name, self.error, self.changed_at = "starting", "", time.time()
        self.uri = self.uris[0].redacted
        self.id = hashlib.sha1(repr((vhost, self.KIND, name, upstream)).encode()).hexdigest()[:8]
        self.forwarded = 0
        self._uri_index = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._cleanup = False
        self.local_connection = ""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"federation {self.KIND} {self.vhost}/{self.name} <- {self.upstream}")

    async def stop(self, cleanup: bool) -> None:
        self._cleanup = cleanup
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 3.0)
            except (asyncio.TimeoutError, Exception):
                task.cancel()

    def _set(self, status: str, error: str = "") -> None:
        if (status, error) != (self.status_name, self.error):
            self.status_name, self.error, self.changed_at = status, error, time.time()

    async def _run(self) -> None:
        backoff = Backoff(self.reconnect_delay)
        while not self._stop.is_set():
            self._set("starting")
            started = time.monotonic()
            try:
                await self._session()
            except LinkError as e:
                self._set("error", str(e))
                log.warning("federation link %s '%s' in vhost '%s' <- upstream '%s': %s", self.KIND, self.name,
                            self.vhost, self.upstream, e)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._set("error", f"internal error: {e!r}")
                log.exception("federation link %s '%s' in vhost '%s' failed", self.KIND, self.name, self.vhost)
            if self._stop.is_set():
                return
            if time.monotonic() - started > 10:
                backoff.reset()
            if await sleep_or_stop(self._stop, backoff.next_delay() if self.reconnect_delay else 1.0):
                return

    async def _session(self) -> None:
        creds = self.manager.creds
        label = f"Federation link (upstream: {self.upstream}, policy-driven {self.KIND} {self.name})"
        upstream, self._uri_index = await connect_any(self.uris, self._uri_index, creds, label)
        local = None
        try:
            self.uri = self.uris[self._uri_index].redacted
            user, password = creds.for_endpoint(self.local_endpoint)
            local = await connect(self.local_endpoint, user, password, label, creds.local_port)
            self.local_connection = label
            await self._transfer(upstream, local)
        finally:
            if self._cleanup and not upstream.is_closed:
                try:
                    await asyncio.wait_for(self._remove_upstream_objects(upstream), 2.0)
                except (asyncio.TimeoutError, LinkError):
                    pass
            for c in (upstream, local):
                if c is not None:
                    try:
                        await c.close(timeout=1.0)
                    except Exception:
                        c.abort()

    async def _wait(self, upstream: Client, local: Client, *others) -> None:
        """Until a connection fails (LinkError) or the link is stopped (returns)."""
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([upstream.closed, local.closed, stop, *others], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if self._stop.is_set():
            return
        for o in others:
            if o.done() and o.exception() is not None:
                raise o.exception()
        which = "upstream" if upstream.is_closed else "local broker"
        raise LinkError(f"{which}: {upstream.closed_reason or local.closed_reason}")

    async def _remove_upstream_objects(self, upstream: Client) -> None:
        """The policy no longer federates this object: what the link declared upstream goes."""

    def _forward(self, up_ch: Channel, local_ch: Channel, m, exchange: str, routing_key: str,
                 properties: bytes, body: bytes) -> None:
        """Publish downstream; ack upstream per ack-mode (after the confirm in on-confirm)."""
        try:
            fut = local_ch.publish(exchange, routing_key, properties, body)
        except LinkError:
            return  # the local connection is gone: the upstream redelivers after we reconnect
        self.forwarded += 1
        tag = m.delivery_tag
        if self.ack_mode == "no-ack":
            return
        if fut is None:
            up_ch.ack(tag)
            return

        def confirmed(f: asyncio.Future) -> None:
            if f.cancelled() or f.exception() is not None:
                return
            if f.result():
                up_ch.ack(tag)
            else:
                up_ch.nack(tag, requeue=True)
        fut.add_done_callback(confirmed)

    def status(self) -> dict:
        item = {"node": self.manager.node, "id": self.id, "vhost": self.vhost, "type": self.KIND,
                "upstream": self.upstream, "uri": self.uri, "status": self.status_name,
                "timestamp": status_time(self.changed_at), "local_connection": self.local_connection}
        item.update(self._names())
        if self.status_name == "error":
            item["error"] = self.error
        return item

    def _names(self) -> dict:
        raise NotImplementedError


def _received_from(properties: bytes, entry: dict, replace_same: tuple | None = None) -> BasicProperties:
    p, _ = BasicProperties.decode(properties, 0)
    headers = dict(p.headers or {})
    hops = list(headers.get("x-received-from") or [])
    if replace_same is not None:
        key, value = replace_same
        for i, hop in enumerate(hops):
            if isinstance(hop, dict) and hop.get("uri") == entry["uri"] and hop.get(key) == value:
                entry["visit-count"] = Long((hop.get("visit-count") or 0) + 1)
                del hops[i]
                break
    headers["x-received-from"] = [entry] + hops
    p.headers = headers
    return p


class ExchangeLink(_Link):
    KIND = "exchange"

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.upstream_exchange = self.config.get("exchange", self.name)
        self.max_hops = self.config.get("max-hops", 1)
        node = self.manager.node
        self.queue_name = f"federation: {self.upstream_exchange} -> {node}:{self.vhost}:{self.name}"
        self.helper_name = self.queue_name + " B"
        self._bound: dict[tuple, tuple[str, dict]] = {}

    def _names(self) -> dict:
        return {"exchange": self.name, "upstream_exchange": self.upstream_exchange}

    def _downstream_exchange(self):
        vhost = self.manager.broker.vhosts.get(self.vhost)
        return vhost.exchanges.get(self.name) if vhost is not None else None

    def _wanted_bindings(self) -> dict[tuple, tuple[str, dict]]:
        """The downstream exchange's binding keys, as bindings of the upstream exchange to the
        helper exchange (``x-bound-from`` says where they came from and how far they may go)."""
        ex = self._downstream_exchange()
        out: dict[tuple, tuple[str, dict]] = {}
        if ex is None:
            return out
        node = self.manager.node
        for b in list(ex.bindings.values()):
            args = dict(b.arguments or {})
            came = args.pop(BOUND_FROM, None)
            hops = self.max_hops
            if isinstance(came, list) and came and isinstance(came[0], dict):
                previous = came[0].get("hops")
                if not isinstance(previous, int) or previous <= 1:
                    continue  # a binding propagated as far as its federation allows
                hops = min(hops, previous - 1)
            else:
                came = []
            bound_from = [{"cluster-name": node, "vhost": self.vhost, "exchange": f"{self.vhost}:{self.name} B",
                           "hops": Long(hops)}] + list(came)
            args[BOUND_FROM] = bound_from
            out[(b.routing_key, freeze(args))] = (b.routing_key, args)
        return out

    async def _transfer(self, upstream: Client, local: Client) -> None:
        ex = self._downstream_exchange()
        if ex is None:
            raise LinkError(f"downstream exchange '{self.name}' is gone")
        ch = await upstream.channel()
        try:
            await ch.declare_exchange(self.upstream_exchange, ex.TYPE, passive=True)
        except LinkError as e:
            if getattr(e, "reply_code", None) != 404:
                raise
            ch = await upstream.channel()
            await ch.declare_exchange(self.upstream_exchange, ex.TYPE, durable=ex.durable,
                                      auto_delete=ex.auto_delete, arguments={})
        node = self.manager.node
        await ch.declare_exchange(self.helper_name, "x-federation-upstream", durable=True, auto_delete=True,
                                  internal=True, arguments={"x-downstream-name": node,
                                                            "x-downstream-vhost": self.vhost,
                                                            "x-internal-purpose": "federation",
                                                            "x-max-hops": Long(self.max_hops)})
        qargs = {"x-internal-purpose": "federation"}
        if "expires" in self.config:
            qargs["x-expires"] = Long(self.config["expires"])
        if "message-ttl" in self.config:
            qargs["x-message-ttl"] = Long(self.config["message-ttl"])
        await ch.declare_queue(self.queue_name, durable=True, arguments=qargs)
        await ch.bind_queue(self.queue_name, self.helper_name, "")
        self._bound = {}
        await self._sync_bindings(ch)
        lch = await local.channel()
        if self.ack_mode == "on-confirm":
            await lch.confirm_select()
        await ch.qos(self.prefetch)
        upstream_cluster = as_text(upstream.server_properties.get("cluster_name")) or ""
        upstream_vhost = self.uris[self._uri_index].vhost
        uri = self.uri
        downstream = self.name

        def on_deliver(up_ch: Channel, m, properties: bytes, body: bytes) -> None:
            p = _received_from(properties, {"uri": uri, "exchange": self.upstream_exchange,
                                            "redelivered": m.redelivered, "cluster-name": upstream_cluster,
                                            "vhost": upstream_vhost})
            self._forward(up_ch, lch, m, downstream, m.routing_key, p.encode(), body)

        await ch.consume(self.queue_name, on_deliver, no_ack=self.ack_mode == "no-ack")
        self._set("running")
        log.info("federation link exchange '%s' in vhost '%s' <- upstream '%s' (%s) running", self.name,
                 self.vhost, self.upstream, uri)
        syncing = asyncio.ensure_future(self._keep_bindings(ch))
        try:
            await self._wait(upstream, local, syncing)
        finally:
            syncing.cancel()

    async def _keep_bindings(self, ch: Channel) -> None:
        while True:
            await asyncio.sleep(BINDING_SYNC_S)
            await self._sync_bindings(ch)

    async def _sync_bindings(self, ch: Channel) -> None:
        want = self._wanted_bindings()
        for key in [k for k in self._bound if k not in want]:
            rk, args = self._bound.pop(key)
            await ch.unbind_exchange(self.helper_name, self.upstream_exchange, rk, args)
        for key, (rk, args) in want.items():
            if key not in self._bound:
                await ch.bind_exchange(self.helper_name, self.upstream_exchange, rk, args)
                self._bound[key] = (rk, args)

    async def _remove_upstream_objects(self, upstream: Client) -> None:
        ch = await upstream.channel()
        await ch.delete_queue(self.queue_name)
        await ch.delete_exchange(self.helper_name)


class QueueLink(_Link):
    KIND = "queue"

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.upstream_queue = self.config.get("queue", self.name)
        self.consumer_tag = self.config.get("consumer-tag") or f"federation-link-{self.upstream}"  # RabbitMQ's

    def _names(self) -> dict:
        return {"queue": self.name, "upstream_queue": self.upstream_queue, "consumer_tag": self.consumer_tag}

    def _downstream_wants(self) -> bool:
        """Consumers with credit downstream and nothing of its own to give them."""
        vhost = self.manager.broker.vhosts.get(self.vhost)
        q = vhost.queues.get(self.name) if vhost is not None else None
        if q is None or not q.consumers or q.message_count:
            return False
        return any(c.has_capacity() for c in q.consumers)

    async def _transfer(self, upstream: Client, local: Client) -> None:
        await ensure_queue(upstream, self.upstream_queue)
        ch = await upstream.channel()
        await ch.qos(self.prefetch)
        lch = await local.channel()
        if self.ack_mode == "on-confirm":
            await lch.confirm_select()
        uri = self.uri
        queue = self.name

        def on_deliver(up_ch: Channel, m, properties: bytes, body: bytes) -> None:
            p = _received_from(properties, {"uri": uri, "queue": queue, "redelivered": m.redelivered,
                                            "visit-count": Long(1)}, replace_same=("queue", queue))
            p.headers.setdefault("x-original-exchange", m.exchange)
            p.headers.setdefault("x-original-routing-key", m.routing_key)
            self._forward(up_ch, lch, m, "", queue, p.encode(), body)

        self._set("running")
        log.info("federation link queue '%s' in vhost '%s' <- upstream '%s' (%s) running", self.name, self.vhost,
                 self.upstream, uri)
        pulling = asyncio.ensure_future(self._pull_when_wanted(ch, on_deliver))
        try:
            await self._wait(upstream, local, pulling)
        finally:
            pulling.cancel()

    async def _pull_when_wanted(self, ch: Channel, on_deliver) -> None:
        tag = None
        while True:
            wants = self._downstream_wants()
            if wants and tag is None:
                tag = await ch.consume(self.upstream_queue, on_deliver, no_ack=self.ack_mode == "no-ack",
                                       arguments={"x-priority": -1}, tag=self.consumer_tag)
            elif not wants and tag is not None:
                await ch.cancel(tag)
                tag = None
            await asyncio.sleep(QUEUE_CHECK_S)
