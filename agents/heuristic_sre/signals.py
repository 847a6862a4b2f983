"""What the telemetry says about each service: alerts, error ratios, latency, failing calls and the
error messages behind them.

Span metrics first; error traces when metrics are off; logs when both are. Error messages (from
logs, else from the status of error spans) are read the way an SRE reads them: the chain
`X on Y failed: ...` names the service that saw the failure last, and the innermost message names
the address or peer the failing call went to.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agents.heuristic_sre.objects import Objects
from agents.routines import vector
from itbench.client import AlertState, ITBenchAPIError, ITBenchClient, TaskDescription

ERROR_RATIO = 0.05
"""A service whose served spans fail more often than this is failing (the alert's threshold)."""
SLOW_MS = 1000.0
"""A service whose p95 latency is above this is slow (the alert's threshold)."""
THROTTLED = 0.25
"""A container throttled in more than this share of CFS periods is CPU-starved."""

SERVING = 'span_kind=~"SPAN_KIND_SERVER|SPAN_KIND_CONSUMER"'
CALLING = 'span_kind=~"SPAN_KIND_CLIENT"'
ERROR = 'status_code="STATUS_CODE_ERROR"'
CALLS = "traces_span_metrics_calls_total"
ERRORS_Q = f"sum by (service_name) (rate({CALLS}{{{SERVING}, {ERROR}}}[2m]))"
SERVED_Q = f"sum by (service_name) (rate({CALLS}{{{SERVING}}}[2m]))"
LATENCY_Q = (
    "histogram_quantile(0.95, sum by (service_name, le) (rate("
    f"traces_span_metrics_duration_milliseconds_bucket{{{SERVING}}}[2m])))"
)
SPANS_Q = f"sum by (service_name, span_name) (increase({CALLS}{{{SERVING}}}[30m]))"
CLIENT_ERRORS_Q = f"sum by (service_name, span_name) (rate({CALLS}{{{CALLING}, {ERROR}}}[2m]))"
CLIENT_CALLS_Q = f"sum by (service_name, span_name) (rate({CALLS}{{{CALLING}}}[2m]))"
THROTTLE_Q = (
    'sum by (container) (increase(container_cpu_cfs_throttled_periods_total{{namespace="{ns}", '
    'container!=""}}[5m])) / sum by (container) (increase(container_cpu_cfs_periods_total'
    '{{namespace="{ns}", container!=""}}[5m]))'
)
MEMORY_Q = (
    'max by (container) (container_memory_working_set_bytes{{namespace="{ns}", container!=""}}'
    ' / on (namespace, pod, container) kube_pod_container_resource_limits{{namespace="{ns}", '
    'resource="memory"}})'
)
ALERT_LABELS = ("service_name", "deployment", "consumer_group", "container")
ERROR_LINES = '{{namespace="{ns}"}} |~ "(?i)(error|fail|exception|refused|timeout|denied)"'

_CHAIN = re.compile(r"\bon ([a-z0-9][a-z0-9-]*)(?: failed)?: ")
_HOSTS = (
    re.compile(r"no endpoints for service ([a-z0-9][a-z0-9-]*)"),
    re.compile(r"dial tcp ([\w.-]+):(\d+)"),
    re.compile(r"lookup ([\w.-]+)"),
    re.compile(r"https?://([\w.-]+)(?::(\d+))?"),
    re.compile(r"\bfrom ([a-z0-9][a-z0-9-]*)\b"),
    re.compile(r"\(([A-Za-z][\w.-]*):(\d+)\)"),
)


@dataclass(frozen=True)
class Failure:
    """One failure as a service reported it.

    Attributes:
        reporter: The deepest service the message chain names (the one whose call or
            operation failed).
        text: The innermost message.
        host: The address the innermost message names, if any.
        target: The workload behind that address (a Service of the namespace or a pod IP).
    """

    reporter: str
    text: str
    host: str | None = None
    target: str | None = None

    @property
    def kind(self) -> str:
        """What the message says happened, in a word."""
        t = self.text.lower()
        if "no endpoints" in t:
            return "no-endpoints"
        if "no such host" in t or "name resolver" in t or "is not set" in t:
            return "unresolvable"
        if "i/o timeout" in t or ("deadline exceeded" in t and "overloaded" not in t):
            return "timeout"
        if "connection refused" in t:
            return "refused"
        if "connection aborted" in t or "eof" in t.split():
            return "aborted"
        if re.search(r"http [45]\d\d", t):
            return "http-status"
        if "unimplemented" in t or "unknown service" in t:
            return "wrong-program"
        if "exec format error" in t:
            return "exec-format"
        if "overloaded" in t or "throttled" in t:
            return "overloaded"
        if "auth" in t or "password" in t or "permission" in t:
            return "auth"
        return "error"


@dataclass
class Signals:
    """The incident as the telemetry shows it, per service."""

    firing: dict[str, set[str]] = field(default_factory=dict)
    pending: dict[str, set[str]] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    rate: dict[str, float] = field(default_factory=dict)
    throttled: dict[str, float] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    edges: dict[tuple[str, str], float] = field(default_factory=dict)
    """(caller, callee) -> share of the calls that fail; callee '' when it reports no spans."""
    failures: list[Failure] = field(default_factory=list)
    lines: dict[str, list[str]] = field(default_factory=dict)
    """Error log lines per service."""
    instrumented: set[str] = field(default_factory=set)
    source: str = "metrics"
    notes: list[str] = field(default_factory=list)

    def alerts(self, service: str) -> set[str]:
        """Alert names firing or pending on a service."""
        return self.firing.get(service, set()) | self.pending.get(service, set())

    def failing(self, service: str) -> bool:
        """Whether a service fails too many of the requests it serves."""
        return self.errors.get(service, 0.0) > ERROR_RATIO or "RequestErrorRate" in self.alerts(
            service
        )

    def slow(self, service: str) -> bool:
        """Whether a service is slow."""
        return self.latency.get(service, 0.0) > SLOW_MS or "RequestLatencyHigh" in self.alerts(
            service
        )

    def callees_failing(self, caller: str) -> dict[str, float]:
        """Callees that calls from `caller` fail on ('' for callees that report no spans)."""
        return {c: r for (a, c), r in self.edges.items() if a == caller and r > 0}

    def symptomatic(self) -> set[str]:
        """Every service that shows a symptom."""
        out = set(self.firing) | set(self.pending)
        out |= {s for s in self.errors if self.failing(s)}
        out |= {s for s in self.latency if self.slow(s)}
        out |= {s for s, v in self.throttled.items() if v > THROTTLED}
        return out


def read_signals(
    client: ITBenchClient, task: TaskDescription, objects: Objects, callees: dict[str, list[str]]
) -> Signals:
    """Read the alerts and whichever telemetry the trial offers.

    Args:
        client: The SDK client.
        task: The task (telemetry toggles, namespace, time).
        objects: The namespace's objects (to resolve addresses and HPAs).
        callees: The call graph, caller -> callees.
    """
    sig = Signals()
    _read_alerts(client, sig, objects)
    telemetry = task.telemetry
    ns = task.namespace
    if telemetry.metrics:
        _read_span_metrics(client, sig, callees)
        sig.throttled = {k[0]: v for k, v in vector(client, THROTTLE_Q.format(ns=ns)).items()}
        sig.memory = {k[0]: v for k, v in vector(client, MEMORY_Q.format(ns=ns)).items()}
    if not sig.instrumented and telemetry.traces:
        sig.source = "traces"
        _read_trace_statistics(client, sig, objects, callees)
    if telemetry.logs:
        _read_logs(client, task, sig, objects)
    elif telemetry.traces:
        _read_trace_messages(client, sig, objects)
    if not sig.instrumented and not telemetry.traces:
        sig.source = "logs"
        for f in sig.failures:
            sig.errors[f.reporter] = max(sig.errors.get(f.reporter, 0.0), 1.0)
            if f.target and f.target != f.reporter:
                sig.edges[(f.reporter, f.target)] = 1.0
    sig.notes.append(f"signals from {sig.source}")
    return sig


def _read_alerts(client: ITBenchClient, sig: Signals, objects: Objects) -> None:
    hpa_targets = {
        str((h.get("metadata") or {}).get("name")): str(
            ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name", "")
        )
        for h in objects.hpas
    }
    for alert in client.alerts():
        service = next((alert.labels[k] for k in ALERT_LABELS if alert.labels.get(k)), None)
        hpa = alert.labels.get("horizontalpodautoscaler")
        if service is None and hpa:
            service = hpa_targets.get(hpa, hpa)
        if service is None:
            service = alert.labels.get("namespace", "")
        book = sig.firing if alert.state == AlertState.FIRING else sig.pending
        book.setdefault(service, set()).add(alert.alertname)
    shown = {s: sorted(a) for s, a in sig.firing.items()}
    sig.notes.append(f"firing alerts by service: {shown}")
    if sig.pending:
        sig.notes.append(f"pending: { {s: sorted(a) for s, a in sig.pending.items()} }")


def _read_span_metrics(client: ITBenchClient, sig: Signals, callees: dict[str, list[str]]) -> None:
    served = {k[0]: v for k, v in vector(client, SERVED_Q).items()}
    errors = {k[0]: v for k, v in vector(client, ERRORS_Q).items()}
    sig.rate = served
    sig.errors = {s: errors.get(s, 0.0) / r for s, r in served.items() if r > 0}
    sig.latency = {k[0]: v for k, v in vector(client, LATENCY_Q).items()}
    owners: dict[str, str] = {}
    for (service, span), count in vector(client, SPANS_Q).items():
        sig.instrumented.add(service)
        if count > 0:
            owners.setdefault(span, service)
    calls = vector(client, CLIENT_CALLS_Q)
    for (caller, span), failed in vector(client, CLIENT_ERRORS_Q).items():
        if failed <= 0:
            continue
        callee = _callee_of(caller, span, owners, callees)
        total = calls.get((caller, span), failed)
        key = (caller, callee)
        sig.edges[key] = max(sig.edges.get(key, 0.0), failed / total if total else 1.0)
    failing = {s: round(v, 3) for s, v in sig.errors.items() if v > ERROR_RATIO}
    slow = {s: round(v) for s, v in sig.latency.items() if v > SLOW_MS}
    sig.notes.append(
        f"span error ratios above {ERROR_RATIO}: {failing}; p95 above {SLOW_MS:g} ms: {slow}"
    )
    if sig.edges:
        shown = {f"{a}->{b or '?'}": round(r, 3) for (a, b), r in sorted(sig.edges.items())}
        sig.notes.append(f"failing calls (share of client spans in error): {shown}")


def _callee_of(
    caller: str, span: str, owners: dict[str, str], callees: dict[str, list[str]]
) -> str:
    """The service a client span calls: the one serving a span of that name, or the proxy's
    upstream cluster; '' when no service reports such a span."""
    proxied = re.fullmatch(r"router (\S+) egress", span)
    if proxied:
        return proxied.group(1)
    owner = owners.get(span)
    if owner and owner != caller:
        return owner
    return ""


def parse_failure(service: str, line: str, objects: Objects) -> Failure:
    """Read one error line: who saw the failure last, the innermost message, whom it names."""
    known = set(objects.deployments) | set(objects.services)
    reporter, text = service, line
    for match in _CHAIN.finditer(line):
        if match.group(1) in known:
            reporter, text = match.group(1), line[match.end() :]
    if reporter == service and "failed: " in line:
        text = line.split("failed: ", 1)[1]
    text = text.rstrip('"}').strip()
    host: str | None = None
    for pattern in _HOSTS:
        m = pattern.search(text)
        if m:
            host = m.group(1)
            break
    return Failure(reporter, text[:300], host, _resolve(host, objects) if host else None)


def _resolve(host: str, objects: Objects) -> str | None:
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", host):
        pod = objects.pod_by_ip(host)
        return objects.owner_of(pod) if pod is not None else None
    name = host.split(".", 1)[0]
    if name in objects.services:
        return name if name in objects.deployments else _selected_workload(name, objects)
    return None


def _selected_workload(service: str, objects: Objects) -> str | None:
    selector = ((objects.services[service].get("spec") or {}).get("selector")) or {}
    for name, d in objects.deployments.items():
        labels = (((d.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            return name
    return None


def _read_logs(
    client: ITBenchClient, task: TaskDescription, sig: Signals, objects: Objects
) -> None:
    start = _ago(task.now, 300)
    try:
        data = client.logs(ERROR_LINES.format(ns=task.namespace), start=start, limit=1000)
    except ITBenchAPIError as exc:
        sig.notes.append(f"logs unavailable: {exc.detail}")
        return
    seen: Counter[tuple[str, str, str | None]] = Counter()
    for stream in data.get("result") or []:
        labels = stream.get("stream") or {}
        service = str(labels.get("service_name") or labels.get("container") or "")
        for _, line in stream.get("values") or []:
            sig.lines.setdefault(service, []).append(str(line))
            failure = parse_failure(service, str(line), objects)
            seen[(failure.reporter, failure.text, failure.target)] += 1
            sig.failures.append(failure)
    top = [f"{r}: {t[:120]}" for (r, t, _), _n in seen.most_common(6)]
    if top:
        sig.notes.append("innermost error messages in the logs: " + " | ".join(top))


def _read_trace_messages(client: ITBenchClient, sig: Signals, objects: Objects) -> None:
    for service in sorted(sig.symptomatic() & set(objects.deployments))[:6]:
        for trace in _traces(client, service, {"error": "true"}, 10):
            for svc, text in _deepest_errors(trace):
                sig.failures.append(parse_failure(svc, text, objects))
    if sig.failures:
        top = Counter(f"{f.reporter}: {f.text[:120]}" for f in sig.failures).most_common(6)
        sig.notes.append("innermost errors in traces: " + " | ".join(t for t, _ in top))


def _traces(
    client: ITBenchClient, service: str, tags: dict[str, str] | None, limit: int
) -> list[dict[str, Any]]:
    try:
        return client.traces(service, tags=tags, lookback="5m", limit=limit)
    except ITBenchAPIError:
        return []


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t.get("key"): t.get("value") for t in span.get("tags") or []}


def _deepest_errors(trace: dict[str, Any]) -> list[tuple[str, str]]:
    """(service, status message) of the error spans none of whose children is in error."""
    processes = trace.get("processes") or {}
    spans = trace.get("spans") or []
    erroring = {s["spanID"]: s for s in spans if str(_tags(s).get("error")).lower() == "true"}
    parents = {
        r.get("spanID")
        for s in erroring.values()
        for r in s.get("references") or []
        if r.get("refType") == "CHILD_OF"
    }
    out = []
    for span_id, span in erroring.items():
        if span_id in parents:
            continue
        service = str((processes.get(span.get("processID")) or {}).get("serviceName", ""))
        text = str(_tags(span).get("otel.status_description") or "error")
        out.append((service, text))
    return out


def _read_trace_statistics(
    client: ITBenchClient, sig: Signals, objects: Objects, callees: dict[str, list[str]]
) -> None:
    """Error ratios, p95 latency and failing calls per service from a sample of traces."""
    entry = sorted(s for s, cs in callees.items() if s in objects.deployments and cs)
    roots = [s for s in entry if not any(s in cs for cs in callees.values())] or entry[:1]
    traces: dict[str, dict[str, Any]] = {}
    for root in roots[:2]:
        for trace in _traces(client, root, None, 40) + _traces(client, root, {"error": "true"}, 20):
            traces[str(trace.get("traceID"))] = trace
    served: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    durations: dict[str, list[float]] = defaultdict(list)
    calls: Counter[tuple[str, str]] = Counter()
    call_errors: Counter[tuple[str, str]] = Counter()
    for trace in traces.values():
        processes = trace.get("processes") or {}
        spans = {s["spanID"]: s for s in trace.get("spans") or []}
        children: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in spans.values():
            for r in s.get("references") or []:
                if r.get("refType") == "CHILD_OF":
                    children[str(r.get("spanID"))].append(s)
        for span_id, s in spans.items():
            service = str((processes.get(s.get("processID")) or {}).get("serviceName", ""))
            tags = _tags(s)
            error = str(tags.get("error")).lower() == "true"
            kind = str(tags.get("span.kind", ""))
            if kind in ("server", "consumer"):
                sig.instrumented.add(service)
                served[service] += 1
                failed[service] += error
                durations[service].append(float(s.get("duration", 0)) / 1000.0)
            elif kind == "client":
                child = next(
                    (
                        str((processes.get(c.get("processID")) or {}).get("serviceName", ""))
                        for c in children.get(span_id, [])
                    ),
                    "",
                )
                calls[(service, child)] += 1
                call_errors[(service, child)] += error
    sig.errors = {s: failed[s] / n for s, n in served.items() if n}
    sig.rate = {s: float(n) for s, n in served.items()}
    for s, values in durations.items():
        values.sort()
        sig.latency[s] = values[min(len(values) - 1, int(0.95 * len(values)))]
    for key, n in calls.items():
        if call_errors[key]:
            sig.edges[key] = call_errors[key] / n
    sig.notes.append(
        f"{len(traces)} traces read; span error shares: "
        f"{ {s: round(v, 2) for s, v in sig.errors.items() if v > ERROR_RATIO} }"
    )


def _ago(now: datetime | None, seconds: float) -> datetime | None:
    return now - timedelta(seconds=seconds) if now is not None else None
