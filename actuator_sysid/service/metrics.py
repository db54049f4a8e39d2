"""Prometheus metrics: request counts and latency by route, plus fits by status, queue depth and fit
durations read from the database at scrape time (so they are right across restarts and API replicas)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .db import Repository

access = logging.getLogger("actuator_sysid.access")

FIT_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)


class _DbCollector(Collector):
    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        counts = self.repo.fit_counts()
        fits = GaugeMetricFamily("actuator_sysid_fits", "Fits in the database by status", labels=["status"])
        for status, n in counts.items():
            fits.add_metric([status], n)
        yield fits
        yield GaugeMetricFamily(
            "actuator_sysid_queue_depth",
            "Fits queued and not yet claimed by a worker",
            value=counts["queued"],
        )
        durations = self.repo.fit_durations()
        buckets = [(str(b), sum(1 for d in durations if d <= b)) for b in FIT_BUCKETS]
        buckets.append(("+Inf", len(durations)))
        hist = HistogramMetricFamily(
            "actuator_sysid_fit_duration_seconds", "Run time of finished fits (start to succeeded or failed)"
        )
        hist.add_metric([], buckets, sum_value=float(sum(durations)))
        yield hist


class Metrics:
    """The registry of one app and the ASGI middleware that counts its requests and writes the access log."""

    def __init__(self, repo: Repository) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "actuator_sysid_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "actuator_sysid_http_request_duration_seconds",
            "HTTP request latency by route",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.registry.register(_DbCollector(repo))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            start = time.perf_counter()
            status = 500

            async def send_status(msg: Message) -> None:
                nonlocal status
                if msg["type"] == "http.response.start":
                    status = msg["status"]
                await send(msg)

            try:
                await app(scope, receive, send_status)
            finally:
                route = scope.get("route")
                name = getattr(route, "path", None) or "unmatched"
                elapsed = time.perf_counter() - start
                self.requests.labels(name, scope["method"], str(status)).inc()
                self.latency.labels(name).observe(elapsed)
                access.info(
                    "%s %s %d",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "route": name,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                        "project": scope.get("state", {}).get("project"),
                    },
                )

        return wrapped
