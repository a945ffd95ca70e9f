"""Prometheus metrics of one gateway app, in its own registry (not the global one)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from internal.api.responses import StorageStatus
from internal.common.web import Handler
from internal.gateway.labels import OTHER, ClientLabels
from internal.gateway.storage_gauges import StorageGauges

# Clients named in labels at once; the others share the label "other", and a client
# unseen this long gives its label back (bounded cardinality; internal.gateway.labels).
MAX_CLIENT_LABELS = 64
CLIENT_LABEL_IDLE_SECONDS = 600.0
# embedd's lane figures (GET /v1/embed/lanes, its /readyz `lanes`) -> gauges:
# (field, scale to the metric's unit, metric, help).
_EMBED_LANE_GAUGES = (
    ("pending", 1.0, "lakehouse_embed_lane_pending",
     "Texts waiting in each embedd lane for a model call (the lane's queue depth)"),
    ("texts", 1.0, "lakehouse_embed_lane_texts",
     "Texts each embedd lane has embedded since embedd started"),
    ("wait_total_ms", 0.001, "lakehouse_embed_lane_wait_seconds_sum",
     "Every text's wait for its model call, summed since embedd started (/ texts: the "
     "mean wait)"),
    ("wait_max_ms", 0.001, "lakehouse_embed_lane_wait_max_seconds",
     "The longest a text waited for its model call since embedd started"),
)
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """Request counts and latencies per route, and per upstream daemon."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "lakehouse_gateway_requests", "Requests served by the gateway",
            ("method", "route", "status"), registry=self.registry)
        self.latency = Histogram(
            "lakehouse_gateway_request_seconds", "Gateway request latency until the response is sent",
            ("method", "route"), buckets=_BUCKETS, registry=self.registry)
        self.upstream_requests = Counter(
            "lakehouse_gateway_upstream_requests", "Requests sent to upstream daemons",
            ("upstream", "status"), registry=self.registry)
        self.upstream_latency = Histogram(
            "lakehouse_gateway_upstream_seconds", "Upstream latency until response headers arrive",
            ("upstream",), buckets=_BUCKETS, registry=self.registry)
        self.replica_lag = Gauge(
            "lakehouse_read_replica_lag_seconds", "How far each PostgreSQL standby searches "
            "read from is behind the primary, as vectord measures it", ("replica",),
            registry=self.registry)
        # Made on the first report of an HA cluster, so a stack without one shows none.
        self.ha_leader_changes: Gauge | None = None
        self.storage: StorageGauges | None = None
        self.ha_lag: Gauge | None = None
        self.ha_leader: Gauge | None = None
        self.replica_up = Gauge(
            "lakehouse_read_replica_up", "1 when the standby takes searches, else 0",
            ("replica",), registry=self.registry)
        lane_client = ("lane", "client")
        self.client_in_flight = Gauge(
            "lakehouse_gateway_client_in_flight", "Requests of each client in flight, per "
            "lane (search, write); client: a key's id, a hash of a token, or an address "
            "when auth is off", lane_client, registry=self.registry)
        self.client_queued = Gauge(
            "lakehouse_gateway_client_queued", "Requests of each client waiting for a "
            "place, per lane", lane_client, registry=self.registry)
        self.client_wait = Histogram(
            "lakehouse_gateway_client_wait_seconds", "Time a request waited for a place "
            "among its client's share, per lane", lane_client, buckets=_BUCKETS,
            registry=self.registry)
        self.client_rejected = Counter(
            "lakehouse_gateway_client_rejected", "Requests answered 429: past the client's "
            "share, per lane", lane_client, registry=self.registry)
        self.lane_in_flight = Gauge(
            "lakehouse_gateway_lane_in_flight", "Requests of all clients in flight, per lane",
            ("lane",), registry=self.registry)
        self.lane_queued = Gauge(
            "lakehouse_gateway_lane_queued", "Requests of all clients waiting for a place, "
            "per lane (the lane's queue depth)", ("lane",), registry=self.registry)
        self.client_labels = ClientLabels(MAX_CLIENT_LABELS, CLIENT_LABEL_IDLE_SECONDS)
        # embedd's lanes (interactive, bulk), as its /readyz reports them at each scrape.
        self.embed_lanes = [(field, scale, Gauge(name, doc, ("embedd", "model", "lane"),
                                                 registry=self.registry))
                            for field, scale, name, doc in _EMBED_LANE_GAUGES]
        self._lanes: set[str] = set()
        # Labelled children by label values: prometheus_client's labels() validates and
        # locks on every call, a few microseconds each, four times a proxied request.
        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}
        # observe_load's gauges by (lane,) and (lane, label), set at a scrape; a client's
        # pair is dropped with its series (expire_clients).
        self._gauges: dict[tuple[str, ...], tuple[Any, Any]] = {}
        self._waits: dict[tuple[str, str], Any] = {}  # observe_wait's children, likewise
        # Called at each scrape before the registry is read: gauges of state kept
        # elsewhere (the admissions' loads), set then instead of on every request.
        self.at_scrape: list[Callable[[], None]] = []

    def _pair(self, kind: str, counter: Counter, histogram: Histogram, *labels: str
              ) -> tuple[Any, Any]:
        """(counter child, histogram child); the histogram has every label but the status."""
        key = (kind, *labels)
        pair = self._children.get(key)
        if pair is None:
            pair = (counter.labels(*labels), histogram.labels(*labels[:-1]))
            self._children[key] = pair
        return pair

    def observe_upstream(self, upstream: str, status: str, seconds: float) -> None:
        count, latency = self._pair("upstream", self.upstream_requests, self.upstream_latency,
                                    upstream, status)
        count.inc()
        latency.observe(seconds)

    def observe_request(self, method: str, route: str, status: str, seconds: float) -> None:
        count, latency = self._pair("request", self.requests, self.latency, method, route, status)
        count.inc()
        latency.observe(seconds)

    def client_label(self, client: str) -> str:
        """The client's label, or "other" while MAX_CLIENT_LABELS others hold one."""
        return self.client_labels.label(client, time.monotonic())

    def observe_load(self, lane: str, lane_in_flight: int, lane_queued: int,
                     clients: dict[str, tuple[int, int]]) -> None:
        """A lane's requests in flight and waiting, and each named client's, read from the
        admission at a scrape (never on a request's path): `clients` holds the busy ones,
        (in flight, waiting); a named client not in it has neither."""
        lane_pair = self._gauges.get((lane,))
        if lane_pair is None:
            self._lanes.add(lane)
            lane_pair = self._gauges[(lane,)] = (self.lane_in_flight.labels(lane),
                                                 self.lane_queued.labels(lane))
        lane_pair[0].set(lane_in_flight)
        lane_pair[1].set(lane_queued)
        # The busy clients (seen now: a long request keeps its client's label) and those
        # that came to this lane since their label was given (their waits' series).
        named = [c for c in clients if self.client_label(c) != OTHER]
        named += [label for ln, label in self._waits if ln == lane and label != OTHER]
        for client in named:
            if (lane, client) not in self._gauges:
                self._gauges[(lane, client)] = (self.client_in_flight.labels(lane, client),
                                                self.client_queued.labels(lane, client))
        for key, pair in self._gauges.items():
            if len(key) == 2 and key[0] == lane:
                in_flight, queued = clients.get(key[1], (0, 0))
                pair[0].set(in_flight)
                pair[1].set(queued)

    def observe_wait(self, lane: str, label: str, seconds: float) -> None:
        """A request's wait for its place; `label`: its client's (client_label)."""
        child = self._waits.get((lane, label))
        if child is None:
            child = self._waits[(lane, label)] = self.client_wait.labels(lane, label)
        child.observe(seconds)

    def observe_rejected(self, lane: str, label: str) -> None:
        self.client_rejected.labels(lane, label).inc()

    def expire_clients(self) -> None:
        """Drop the series of clients unseen for CLIENT_LABEL_IDLE_SECONDS (at a scrape)."""
        for client in self.client_labels.expire(time.monotonic()):
            for lane in self._lanes:
                self._gauges.pop((lane, client), None)
                self._waits.pop((lane, client), None)
                for metric in (self.client_in_flight, self.client_queued, self.client_wait,
                               self.client_rejected):
                    metric.remove(lane, client)  # absent series: nothing happens

    def observe_embed_lanes(self, embedd: str, models: list[dict[str, Any]]) -> None:
        """One embedd's lanes per model (its /readyz `lanes`)."""
        for m in models:
            lanes = m.get("lanes")
            for lane, st in (lanes.items() if isinstance(lanes, dict) else ()):
                if isinstance(st, dict):
                    for field, scale, gauge in self.embed_lanes:
                        gauge.labels(embedd, str(m.get("id", "?")), str(lane)).set(
                            float(st.get(field) or 0) * scale)

    def observe_storage(self, status: StorageStatus) -> None:
        """Per corpus its rows, table and index bytes and whether its vector index fits in
        shared_buffers; the memory vectord and PostgreSQL hold (vectord's storage figures).
        A corpus gone since the last scrape loses its series."""
        if self.storage is None:
            self.storage = StorageGauges(self.registry)
        self.storage.publish(status)

    def observe_ha(self, ha: Mapping[str, Any] | None) -> None:
        """The Patroni cluster vectord follows (its /readyz `ha`), when there is one."""
        if ha is None:
            return
        if self.ha_leader_changes is None:
            self.ha_leader_changes = Gauge(
                "lakehouse_ha_leader_changes", "Leader changes vectord has followed since "
                "it started", registry=self.registry)
            self.ha_lag = Gauge(
                "lakehouse_ha_replication_lag_bytes", "How far each node's replay is behind "
                "the leader, as Patroni reports it (0 for the leader)", ("node",),
                registry=self.registry)
            self.ha_leader = Gauge("lakehouse_ha_leader", "1 for the node that leads, else 0",
                                   ("node",), registry=self.registry)
        assert self.ha_lag is not None and self.ha_leader is not None
        self.ha_leader_changes.set(float(ha.get("leader_changes") or 0))
        for n in ha.get("nodes") or []:
            name = str(n.get("name", "?"))
            self.ha_lag.labels(name).set(float(n.get("lag") or 0))
            self.ha_leader.labels(name).set(1.0 if n.get("role") == "leader" else 0.0)

    def observe_replicas(self, replicas: list[dict[str, Any]]) -> None:
        """The standbys vectord reported (its /readyz `read_replicas`)."""
        for r in replicas:
            name = str(r.get("replica", "?"))
            self.replica_lag.labels(name).set(float(r.get("lag_seconds") or 0.0))
            self.replica_up.labels(name).set(1.0 if r.get("state") == "ok" else 0.0)

    def middleware(self) -> Middleware:
        metrics = self

        @web.middleware
        async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            started = time.perf_counter()
            status = 500
            try:
                resp = await handler(request)
                status = resp.status
                return resp
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                metrics.observe_request(request.method, _route_label(request), str(status),
                                        time.perf_counter() - started)

        return metrics_middleware

    async def handler(self, _: web.Request) -> web.Response:
        self.expire_clients()
        for publish in self.at_scrape:
            publish()
        body = generate_latest(self.registry)
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp


def _route_label(request: web.Request) -> str:
    """The route template, never the raw path (bounded label cardinality)."""
    route = request.match_info.route
    resource = route.resource if route is not None else None
    if resource is None:
        return "unmatched"
    return resource.canonical
