"""The twin's telemetry behind the stack's own protocols.

* `/metrics`: the Prometheus text exposition of the twin's latest scrape (every series the
  stack's Prometheus would hold, with its job, instance, pod and other labels: scrape it with
  `honor_labels: true`). A series the latest scrape did not write is left out, so Prometheus
  marks it stale as it would.
* Loki's query API (`/loki/api/v1/query_range`, `query`, `labels`, `label/<name>/values`).
* Jaeger's query API (`/api/services`, `/api/services/<service>/operations`, `/api/traces`).
* flagd's OFREP bulk and single evaluation (`/ofrep/v1/evaluate/flags[/<key>]`): the variant
  flagd serves, from the copy its newest ready pod read at start.

Times are the twin's own (its clock may run faster than the wall clock).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from itbench.core.shop import flag_variants, service_calls
from itbench.environments.sim.environment import SimEnvironment
from itbench.environments.sim.logql import LogQLError
from itbench.environments.sim.series import is_stale
from itbench.environments.sim.traffic import served_variant

Json = dict[str, Any]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def exposition(env: SimEnvironment) -> str:
    """The text exposition of every series written by the twin's latest scrape."""
    store = env.series_store
    latest = env.scraped_at
    if latest is None:
        return ""
    lines: list[str] = []
    for name in store.names():
        rows = []
        for series in store.series_named(name):
            if not series.timestamps or series.timestamps[-1] < latest - 1e-6:
                continue
            value = series.values[-1]
            if is_stale(value):
                continue
            labels = ",".join(
                f'{k}="{_escape(str(v))}"'
                for k, v in sorted(series.labels.items())
                if k != "__name__"
            )
            rows.append(
                f"{name}{{{labels}}} {_number(value)}" if labels else f"{name} {_number(value)}"
            )
        if rows:
            lines.append(f"# TYPE {name} untyped")
            lines.extend(rows)
    return "\n".join(lines) + "\n"


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _loki_time(raw: str | None, default: float) -> float:
    """Loki's time parameter: epoch nanoseconds, epoch seconds or RFC 3339."""
    if not raw:
        return default
    try:
        number = float(raw)
    except ValueError:
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise web.HTTPBadRequest(text=f"cannot parse time {raw!r}") from None
    return number / 1e9 if number > 1e12 else number


class TelemetryEndpoints:
    """The handlers, over one twin.

    Args:
        env: The twin.
        lock: The lock its clock steps under.
        now: The twin's time now (epoch seconds).
    """

    def __init__(
        self, env: SimEnvironment, lock: threading.RLock, now: Callable[[], float]
    ) -> None:
        self.env = env
        self.lock = lock
        self.now = now
        self._cached: tuple[float, str] = (-1.0, "")
        self.scrapes = 0

    def application(self) -> web.Application:
        """An application serving /metrics, Loki and OFREP (Jaeger has its own port)."""
        app = web.Application()
        self.add_metrics(app)
        self.add_loki(app)
        self.add_ofrep(app)
        return app

    def jaeger_application(self) -> web.Application:
        """An application serving Jaeger's query API."""
        app = web.Application()
        self.add_jaeger(app)
        return app

    # ---- Prometheus ---------------------------------------------------------------------------
    def add_metrics(self, app: web.Application) -> None:
        """Route /metrics."""
        app.router.add_get("/metrics", self.metrics)

    async def metrics(self, request: web.Request) -> web.Response:
        """The exposition of the latest scrape (computed once per step)."""
        self.scrapes += 1
        with self.lock:
            at = self.env.now().timestamp()
            if self._cached[0] != at:
                self._cached = (at, exposition(self.env))
            text = self._cached[1]
        return web.Response(
            text=text,
            content_type="text/plain",
            charset="utf-8",
            headers={"X-Prometheus-Scrape-Format": "text/plain; version=0.0.4"},
        )

    # ---- Loki ---------------------------------------------------------------------------------
    def add_loki(self, app: web.Application) -> None:
        """Route Loki's query API."""
        app.router.add_get("/ready", self.ready)
        app.router.add_route("*", "/loki/api/v1/query_range", self.loki_range)
        app.router.add_route("*", "/loki/api/v1/query", self.loki_instant)
        app.router.add_get("/loki/api/v1/labels", self.loki_labels)
        app.router.add_get("/loki/api/v1/label/{name}/values", self.loki_values)

    async def ready(self, request: web.Request) -> web.Response:
        """Loki's readiness."""
        return web.Response(text="ready")

    async def _params(self, request: web.Request) -> dict[str, str]:
        params = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            params.update({k: str(v) for k, v in (await request.post()).items()})
        return params

    async def loki_range(self, request: web.Request) -> web.Response:
        """`/loki/api/v1/query_range` for log queries (stream selectors and line filters)."""
        params = await self._params(request)
        now = self.now()
        end = _loki_time(params.get("end"), now)
        start = _loki_time(params.get("start"), end - 3600)
        return self._logs(params, start, end)

    async def loki_instant(self, request: web.Request) -> web.Response:
        """`/loki/api/v1/query`: a log query over the hour before `time`."""
        params = await self._params(request)
        end = _loki_time(params.get("time"), self.now())
        return self._logs(params, end - 3600, end)

    def _logs(self, params: dict[str, str], start: float, end: float) -> web.Response:
        query = params.get("query", "")
        try:
            limit = int(params.get("limit") or 100)
        except ValueError:
            return _json({"status": "error", "error": "limit must be a number"}, 400)
        direction = params.get("direction", "backward").lower()
        try:
            with self.lock:
                data = self._query_logs(query, start, end, limit, direction)
        except (LogQLError, ValueError) as exc:
            return web.Response(status=400, text=f"parse error : {exc}")
        return _json({"status": "success", "data": data})

    def _query_logs(self, query: str, start: float, end: float, limit: int, direction: str) -> Json:
        from itbench.environments.sim.logql import query_logs

        store = self.env.log_book
        return query_logs(store, query, start, end, limit, direction)

    async def loki_labels(self, request: web.Request) -> web.Response:
        """Every stream label name."""
        with self.lock:
            names = sorted({k for labels, _ in self.env.log_book.streams() for k in labels})
        return _json({"status": "success", "data": names})

    async def loki_values(self, request: web.Request) -> web.Response:
        """Every value of one stream label."""
        name = request.match_info["name"]
        with self.lock:
            values = sorted(
                {labels[name] for labels, _ in self.env.log_book.streams() if name in labels}
            )
        return _json({"status": "success", "data": values})

    # ---- Jaeger -------------------------------------------------------------------------------
    def add_jaeger(self, app: web.Application, prefix: str = "") -> None:
        """Route Jaeger's query API (under prefix)."""
        app.router.add_get(f"{prefix}/api/services", self.jaeger_services)
        app.router.add_get(f"{prefix}/api/services/{{service}}/operations", self.jaeger_operations)
        app.router.add_get(f"{prefix}/api/operations", self.jaeger_operations)
        app.router.add_get(f"{prefix}/api/traces", self.jaeger_traces)

    @staticmethod
    def _jaeger(data: Any, status: int = 200, error: str | None = None) -> web.Response:
        errors = [{"code": status, "msg": error}] if error else None
        return _json(
            {
                "data": data,
                "total": len(data) if isinstance(data, list) else 0,
                "limit": 0,
                "offset": 0,
                "errors": errors,
            },
            status,
        )

    async def jaeger_services(self, request: web.Request) -> web.Response:
        """The services that have spans."""
        names = sorted({s for pair in service_calls() for s in pair})
        if not self.env.telemetry.traces:
            names = []
        return self._jaeger(names)

    async def jaeger_operations(self, request: web.Request) -> web.Response:
        """A service's span names (from its span metrics)."""
        service = request.match_info.get("service") or request.query.get("service", "")
        with self.lock:
            names = sorted(
                {
                    s.labels.get("span_name", "")
                    for s in self.env.series_store.series_named("traces_span_metrics_calls_total")
                    if s.labels.get("service_name") == service
                }
                - {""}
            )
        return self._jaeger(names)

    async def jaeger_traces(self, request: web.Request) -> web.Response:
        """Trace search: service (required), operation, tags (JSON), start/end (us), limit."""
        query = request.query
        service = query.get("service", "")
        if not service:
            return self._jaeger([], 400, "parameter 'service' is required")
        try:
            tags = json.loads(query["tags"]) if query.get("tags") else {}
            limit = int(query.get("limit") or 20)
            now = self.now()
            end = float(query["end"]) / 1e6 if query.get("end") else now
            start = float(query["start"]) / 1e6 if query.get("start") else end - 3600
        except (ValueError, TypeError) as exc:
            return self._jaeger([], 400, f"bad parameter: {exc}")
        if not isinstance(tags, dict):
            return self._jaeger([], 400, "tags must be a JSON object")
        with self.lock:
            traces = self.env.search_traces(
                service,
                query.get("operation") or None,
                {str(k): str(v) for k, v in tags.items()},
                datetime.fromtimestamp(start, tz=UTC),
                datetime.fromtimestamp(end, tz=UTC),
                limit,
            )
        return self._jaeger(traces)

    # ---- flagd --------------------------------------------------------------------------------
    def add_ofrep(self, app: web.Application, prefix: str = "") -> None:
        """Route flagd's OFREP evaluation (under prefix)."""
        app.router.add_post(f"{prefix}/ofrep/v1/evaluate/flags", self.ofrep_bulk)
        app.router.add_post(f"{prefix}/ofrep/v1/evaluate/flags/{{key}}", self.ofrep_one)

    def _evaluations(self) -> list[Json]:
        with self.lock:
            text = self.env.traffic.served_config()
        if not text:
            raise web.HTTPServiceUnavailable(text="flagd is not serving")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            return []
        variants = flag_variants(text)
        out = []
        for key, spec in sorted((doc.get("flags") or {}).items()):
            if not isinstance(spec, dict) or spec.get("state", "ENABLED") != "ENABLED":
                continue
            variant = served_variant(spec)
            targeted = isinstance(spec.get("targeting"), dict) and bool(spec["targeting"])
            out.append(
                {
                    "key": key,
                    "value": (variants.get(key) or {}).get(variant),
                    "variant": variant,
                    "reason": "TARGETING_MATCH" if targeted else "STATIC",
                    "metadata": {},
                }
            )
        return out

    async def ofrep_bulk(self, request: web.Request) -> web.Response:
        """Every enabled flag's evaluation."""
        return _json({"flags": self._evaluations()})

    async def ofrep_one(self, request: web.Request) -> web.Response:
        """One flag's evaluation (404 FLAG_NOT_FOUND when flagd does not serve it)."""
        key = request.match_info["key"]
        for flag in self._evaluations():
            if flag["key"] == key:
                return _json(flag)
        return _json(
            {"key": key, "errorCode": "FLAG_NOT_FOUND", "errorDetails": f"flag {key} not found"},
            404,
        )
