"""Prometheus metrics, one registry per app so several apps can share a process (tests do).

Every label takes few values whatever clients send: the route is its template (`unmatched` for
paths no route knows), the method one of HTTP's standard ones or `other`, the status a number.
Anything a client can vary freely would otherwise grow one series per value, without bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cpci.urls import API_PREFIX

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    """The method as a label: a standard one as it is, anything else `other`."""
    return method if method in METHODS else "other"


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "cpci_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "cpci_http_request_seconds",
            "HTTP request latency by route",
            ["method", "route"],
            registry=self.registry,
        )
        self.uploads = Counter(
            "cpci_uploads", "shard uploads by outcome", ["status"], registry=self.registry
        )
        self.results = Counter("cpci_results_ingested", "results stored", registry=self.registry)


class MetricsMiddleware:
    """Counts and times every request, labelled by route template (not raw path)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is None:
                route = "unmatched"
            elif scope["path"].startswith(API_PREFIX) and not route.startswith(API_PREFIX):
                route = API_PREFIX + route  # routes of included routers carry their own path
            method = method_label(scope["method"])
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)
