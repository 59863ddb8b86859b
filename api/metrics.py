"""Prometheus metrics of the API: requests by route and status, and their latency."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from api.access import ASGIApp, Receive, Scope, Send

__all__ = ["KNOWN_METHODS", "ApiMetrics", "MetricsMiddleware"]

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
"""Method label values; any other method token is counted as ``other``."""


class ApiMetrics:
    """The API's own registry (one per app, so tests can build many apps)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ledger_api_requests_total",
            "HTTP requests answered",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ledger_api_request_seconds",
            "time to answer an HTTP request",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=self.registry,
        )

    def render(self, _: Request) -> Response:
        """The ``/metrics`` endpoint."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Count every HTTP request by its route template (not its raw path: bounded label values)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def record_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            method = method if method in KNOWN_METHODS else "other"  # clients choose it: bound the labels
            self.metrics.requests.labels(template, method, str(status["code"])).inc()
            self.metrics.latency.labels(template).observe(time.perf_counter() - start)
