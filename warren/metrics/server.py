"""The Prometheus endpoint: ``/metrics``, ``/metrics/per-object``, ``/metrics/detailed`` and
``/metrics/cluster`` on their own port.

As RabbitMQ's ``rabbitmq_prometheus`` (port 15692): ``/metrics`` sums the queue, channel and
connection families over the node, so its size does not grow with the number of queues;
``/metrics/per-object`` has one sample per queue, channel and connection. Both carry the node's
and Warren's own families (render.py, docs/metrics.md). ``/metrics/detailed`` answers only the
families a scrape asks for, of the vhosts it asks for (detailed.py). ``/metrics/cluster`` (Warren's)
holds ``/metrics`` of every running node of a cluster, each sample labelled with its node
(cluster_view.py); the others stay the node's own, as RabbitMQ's do.

Served by aiohttp on the broker's event loop, behind the HTTP API's guard (time and size limits,
warren/http/limits.py). A scrape must not stall the broker: the snapshot is read a slice of
objects at a time (collect.py) and the text is formatted and written a chunk at a time (render.py),
with a turn of the loop between slices, so clients are served throughout. The response is
streamed (chunked), gzip-compressed when the scraper accepts it, as Prometheus does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import platform
import time
import zlib

from aiohttp import web

from warren import __version__
from warren.broker.node import node_name
from warren.http.limits import HttpLimits, limits_middleware
from warren.http.site import GuardedSite
from warren.metrics.cluster_view import merge_nodes
from warren.metrics.collect import Probes, add_snapshot, read_snapshot
from warren.metrics.probes import GcPauseProbe, Histogram, LoopLagProbe
from warren.metrics.detailed import render_detailed
from warren.metrics.render import render
from warren.metrics.text import CONTENT_TYPE, header, labels

__all__ = ["MetricsServer", "PROMETHEUS_PORT_DEFAULT"]

log = logging.getLogger("warren.metrics")

PROMETHEUS_PORT_DEFAULT = 15692  # RabbitMQ's rabbitmq_prometheus port
RABBITMQ_API_LEVEL = "3.10.8"  # the RabbitMQ this follows (the HTTP API's rabbitmq_version)
GZIP_LEVEL = 1  # the text compresses about 10:1 even at the fastest level
WRITE_SIZE = 65536  # octets gathered before a write to the socket
PEER_TEXT_KIND = "metrics_text"  # what /metrics/cluster asks of the other nodes (warren/cluster/api.py)


class MetricsServer:
    """Prometheus metrics of ``server`` (a warren.server.Server)."""

    def __init__(self, server, limits: HttpLimits | None = None) -> None:
        self.server = server
        self.limits = limits or HttpLimits()
        self.started_at = time.time()
        self.loop_lag = LoopLagProbe(server.loop)
        self.gc_pauses = GcPauseProbe()
        self.sync_latency: Histogram = server.sync_latency  # the group commits' (Server.sync_latency)
        self.last_duration: dict[str, float] = {}  # endpoint -> seconds of its previous scrape
        self.last_busy: dict[str, float] = {}  # endpoint -> loop seconds its previous scrape used
        self.last_longest_step: dict[str, float] = {}  # endpoint -> the longest it held the loop at once
        self.port: int | None = None
        self._site = GuardedSite(self.build_app(), self.limits)
        node = node_name()
        cluster = server.broker.cluster_name or node
        # RabbitMQ draws a random id once per cluster and stores it; Warren's is derived from the
        # node name and the data folder, so it is the same across restarts with no extra file; a
        # node of a cluster on etcd derives it from the cluster's id, the same on every node
        membership = getattr(server, "cluster", None)
        origin = f"cluster|{membership.cluster_id}" if membership is not None else \
            f"{node}|{server.config.data_dir.resolve()}"
        digest = hashlib.sha256(origin.encode()).digest()
        cluster_id = "rabbitmq-cluster-id-" + base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")
        self.identity_labels = (("rabbitmq_node", node), ("rabbitmq_cluster", cluster),
                                ("rabbitmq_cluster_permanent_id", cluster_id))
        self.build_labels = (("rabbitmq_version", RABBITMQ_API_LEVEL), ("prometheus_plugin_version", __version__),
                             ("prometheus_client_version", "warren-text-0.0.4"),
                             ("erlang_version", f"Python {platform.python_version()}"),
                             ("product", "Warren"), ("product_version", __version__))

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[limits_middleware(self.limits)])
        app.router.add_get("/metrics", self.aggregated)
        app.router.add_get("/metrics/per-object", self.per_object)
        app.router.add_get("/metrics/detailed", self.detailed)
        app.router.add_get("/metrics/cluster", self.cluster_wide)
        return app

    async def aggregated(self, request: web.Request) -> web.StreamResponse:
        return await self.scrape(request, per_object=False)

    async def per_object(self, request: web.Request) -> web.StreamResponse:
        return await self.scrape(request, per_object=True)

    async def detailed(self, request: web.Request) -> web.StreamResponse:
        """RabbitMQ's filtered endpoint: ``?family=...&vhost=...`` (warren/metrics/detailed.py)."""
        return await self.scrape(request, per_object=True, families=request.query.getall("family", []),
                                 vhosts=request.query.getall("vhost", []))

    def identity_lines(self) -> str:
        """The node's build and identity samples, with which every endpoint's answer ends."""
        return (f"{header('rabbitmq_build_info', 'untyped', 'RabbitMQ & Erlang/OTP version info')}"
                f"rabbitmq_build_info{labels(self.build_labels)} 1\n"
                f"{header('rabbitmq_identity_info', 'untyped', 'RabbitMQ node & cluster identity info')}"
                f"rabbitmq_identity_info{labels(self.identity_labels)} 1\n")

    async def scrape(self, request: web.Request, per_object: bool, families: list[str] | None = None,
                     vhosts: list[str] | None = None) -> web.StreamResponse:
        """``families`` (a list, even empty): /metrics/detailed's answer instead of the whole exposition."""
        endpoint = "/metrics/detailed" if families is not None else "/metrics/per-object" if per_object else "/metrics"
        started = time.perf_counter()
        snap = await self.node_snapshot(per_object)
        chunks = (render(snap, self) if families is None
                  else render_detailed(snap, self.server.broker, families, vhosts or [], self.identity_lines()))
        return await self.stream(request, endpoint, started, chunks, snap.read_seconds, snap.longest_step)

    async def node_snapshot(self, per_object: bool):
        """This node's snapshot (collect.py), every worker's under --worker-mode queues."""
        snap = await read_snapshot(self.server, per_object)
        snap.probes = Probes.of(self)
        # --worker-mode queues: every worker's queues, channels and counts (broker/directory.py)
        for other in await self.server.broker.directory.api_rows("metrics", per_object):
            add_snapshot(snap, other)
        return snap

    async def cluster_wide(self, request: web.Request) -> web.StreamResponse:
        """``/metrics/cluster``: the aggregated families of every running node of the cluster,
        labelled ``rabbitmq_node`` (cluster_view.py); a node alone answers for itself the same way."""
        started = time.perf_counter()
        snap, theirs = await asyncio.gather(self.node_snapshot(False), self.cluster_texts())

        def chunks():
            texts = [(node_name(), "".join(render(snap, self))), *theirs]  # a few hundred lines
            yield ""  # a turn for the loop before the merge
            answered = {node for node, _ in texts}
            yield from merge_nodes(texts, [node for node in self.cluster_nodes() if node not in answered])

        return await self.stream(request, "/metrics/cluster", started, chunks(), snap.read_seconds, snap.longest_step)

    async def cluster_texts(self) -> list[tuple[str, str]]:
        """The other running nodes' /metrics texts, (node, text); a node that does not answer
        within the links' bound is left out and logged (warren/cluster/api.py ``api_rows``)."""
        if getattr(self.server, "cluster", None) is None:
            return []
        rows = await self.server.broker.directory.api_rows(PEER_TEXT_KIND)
        return [(row["node"], row["text"]) for row in rows  # (a row of another shape: a node that cannot tell)
                if isinstance(row, dict) and isinstance(row.get("node"), str) and isinstance(row.get("text"), str)]

    def cluster_nodes(self) -> list[str]:
        """Every node of the cluster, running or not (just this one outside a cluster)."""
        membership = getattr(self.server, "cluster", None)
        if membership is None:
            return [node_name()]
        return sorted({*membership.known, *membership.members})

    async def node_rows(self) -> list[dict]:
        """What another node's /metrics/cluster asks of this one: this node's /metrics text."""
        snap = await self.node_snapshot(False)
        text = []
        for chunk in render(snap, self):
            text.append(chunk)
            await asyncio.sleep(0)
        return [{"node": node_name(), "text": "".join(text)}]

    async def stream(self, request: web.Request, endpoint: str, started: float, chunks, busy: float,
                     longest: float) -> web.StreamResponse:
        """Write ``chunks`` (text) as the response, a turn of the loop between them; ``busy`` and
        ``longest``: the loop time the scrape used before (its snapshot's reading)."""
        response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE})
        gzip = "gzip" in request.headers.get("Accept-Encoding", "")
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31) if gzip else None
        if gzip:
            response.headers["Content-Encoding"] = "gzip"
        await response.prepare(request)
        step = time.thread_time()
        pending: list[bytes] = []
        size = 0
        for chunk in chunks:
            if chunk:
                data = chunk.encode()
                if compressor is not None:
                    data = compressor.compress(data)
                pending.append(data)
                size += len(data)
            held = time.thread_time() - step
            busy += held
            longest = max(longest, held)
            if size >= WRITE_SIZE:
                await response.write(b"".join(pending))
                pending, size = [], 0
            await asyncio.sleep(0)  # a turn for the broker between chunks
            step = time.thread_time()
        if compressor is not None:
            pending.append(compressor.flush())
        busy += time.thread_time() - step
        if pending:
            await response.write(b"".join(pending))
        await response.write_eof()
        self.last_duration[endpoint] = time.perf_counter() - started
        self.last_busy[endpoint] = busy
        self.last_longest_step[endpoint] = longest
        return response

    # --- life cycle ------------------------------------------------------------------------------

    async def start(self, host: str, port: int, ssl_context=None) -> int:
        """Listen on host:port (0 = ephemeral), over TLS with ``ssl_context`` (--http-tls), and start
        the probes; returns the port bound."""
        self.port = await self._site.start(host, port, ssl_context)
        self.loop_lag.start()
        self.gc_pauses.start()
        log.info("Prometheus metrics on %s://%s:%d/metrics (and /metrics/per-object, /metrics/detailed, "
                 "/metrics/cluster)", "https" if ssl_context else "http", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop listening and the probes (idempotent)."""
        self.loop_lag.stop()
        self.gc_pauses.stop()
        await self._site.stop()
