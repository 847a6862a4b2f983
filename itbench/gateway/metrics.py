"""Prometheus metrics of the agent API: requests by route template and outcome, and their duration.

Labels are route templates (`/v1/trials/{trial_id}/actions`), never raw paths, so trial ids and
object names never become label values and the number of series stays fixed by the app's routes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from time import perf_counter
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OUTCOMES = ("ok", "refused", "client_error", "server_error")
"""Request outcomes: answered, refused by a guardrail, any other 4xx, and 5xx."""
UNMATCHED = "unmatched"
"""The route label of a request no route matched (its raw path is never a label); its method
label is `other`, as is that of a method a matched route does not serve."""
REFUSED_KEY = "itbench.refused"
"""Scope key the problem handlers set when a guardrail refused the request."""


class GatewayMetrics:
    """Request counts by route, method and outcome, and request durations by route and method."""

    def __init__(self, registry: CollectorRegistry) -> None:
        """Create the metrics in `registry` (the operator's, so its /metrics serves them).

        Args:
            registry: Where the metrics are registered.
        """
        self.requests = Counter(
            "itbench_gateway_requests_total",
            "Agent API requests, by route template, method and outcome "
            "(ok, refused by a guardrail, client_error, server_error).",
            ["route", "method", "outcome"],
            registry=registry,
        )
        self.duration = Histogram(
            "itbench_gateway_request_duration_seconds",
            "Time to answer one agent API request, by route template and method.",
            ["route", "method"],
            buckets=_BUCKETS,
            registry=registry,
        )
        # Children by label values: one dict lookup per request instead of `labels()`.
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._histograms: dict[tuple[str, str], Any] = {}

    def instrument(self, app: FastAPI, routes: Iterable[BaseRoute]) -> None:
        """Measure every request `app` serves, with the series of `routes` (its routes) at zero.

        Args:
            app: The gateway application.
            routes: Its routes whose series start at zero (the routers' own, whose paths are
                the full templates); any other route of `app` gets its series on first use.
        """
        for route in routes:
            if isinstance(route, Route):
                for method in sorted(route.methods or ()):
                    self._histogram(route.path, method)
                    for outcome in OUTCOMES:
                        self._counter(route.path, method, outcome)
        self._histogram(UNMATCHED, "other")
        self._counter(UNMATCHED, "other", "client_error")
        app.add_middleware(_Measure, metrics=self)

    def observe(self, route: str, method: str, outcome: str, seconds: float) -> None:
        """Count one answered request and observe its duration."""
        self._counter(route, method, outcome).inc()
        self._histogram(route, method).observe(seconds)

    def _counter(self, route: str, method: str, outcome: str) -> Any:
        key = (route, method, outcome)
        child = self._counters.get(key)
        if child is None:
            child = self._counters[key] = self.requests.labels(route, method, outcome)
        return child

    def _histogram(self, route: str, method: str) -> Any:
        key = (route, method)
        child = self._histograms.get(key)
        if child is None:
            child = self._histograms[key] = self.duration.labels(route, method)
        return child


def outcome_of(status: int, refused: bool) -> str:
    """The outcome label of a response status (`refused` when a guardrail refused the call)."""
    if status < 400:
        return "ok"
    if refused:
        return "refused"
    return "client_error" if status < 500 else "server_error"


class _Measure:
    """ASGI middleware timing each HTTP request and counting it by its matched route template."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        except asyncio.CancelledError:
            status = 499  # the client went away before the answer: a client error, as nginx's
            raise
        except BaseException:
            status = 500
            raise
        finally:
            # The router stores the matched route in the scope; its template is the label.
            # Methods outside the route's own (a 405) share one label, as unmatched paths do.
            route = scope.get("route")
            if isinstance(route, Route):
                template = route.path
                method = scope["method"] if scope["method"] in (route.methods or ()) else "other"
            else:
                template, method = UNMATCHED, "other"
            self.metrics.observe(
                template,
                method,
                outcome_of(status, bool(scope.get(REFUSED_KEY))),
                perf_counter() - start,
            )
