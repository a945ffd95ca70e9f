"""Prometheus metrics of one gateway app, in its own registry (not the global one)."""

from __future__ import annotations

import time
from collections.abc import Mapping
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

from internal.common.web import Handler

# Clients named in labels; later ones share the label "other" (bounded cardinality).
MAX_CLIENT_LABELS = 64
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
        self.ha_lag: Gauge | None = None
        self.ha_leader: Gauge | None = None
        self.replica_up = Gauge(
            "lakehouse_read_replica_up", "1 when the standby takes searches, else 0",
            ("replica",), registry=self.registry)
        self.client_in_flight = Gauge(
            "lakehouse_gateway_client_in_flight", "Requests of each client in flight "
            "(client: a hash of its token, or its address when auth is off)", ("client",),
            registry=self.registry)
        self.client_queued = Gauge(
            "lakehouse_gateway_client_queued", "Requests of each client waiting for a place",
            ("client",), registry=self.registry)
        self.client_wait = Histogram(
            "lakehouse_gateway_client_wait_seconds", "Time a request waited for a place "
            "among its client's share", ("client",), buckets=_BUCKETS, registry=self.registry)
        self.client_rejected = Counter(
            "lakehouse_gateway_client_rejected", "Requests answered 429: past the client's "
            "share", ("client",), registry=self.registry)
        self._client_labels: set[str] = set()
        # Labelled children by label values: prometheus_client's labels() validates and
        # locks on every call, a few microseconds each, four times a proxied request.
        self._children: dict[tuple[str, ...], tuple[Any, Any]] = {}

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
        """The client's label, or "other" once MAX_CLIENT_LABELS clients have one."""
        if client in self._client_labels:
            return client
        if len(self._client_labels) >= MAX_CLIENT_LABELS:
            return "other"
        self._client_labels.add(client)
        return client

    def observe_load(self, client: str, in_flight: int, queued: int) -> None:
        label = self.client_label(client)
        if label == "other":  # a sum of many clients is not one client's load
            return
        self.client_in_flight.labels(label).set(in_flight)
        self.client_queued.labels(label).set(queued)

    def observe_wait(self, client: str, seconds: float) -> None:
        self.client_wait.labels(self.client_label(client)).observe(seconds)

    def observe_rejected(self, client: str) -> None:
        self.client_rejected.labels(self.client_label(client)).inc()

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
