"""The alert rules as data: one source for the simulator's evaluator and the live PrometheusRule.

Expressions read the series the pinned stack stores: OpenTelemetry span metrics (the collector's
spanmetrics connector, exported by its Prometheus exporter and scraped by a ServiceMonitor),
kube-state-metrics (kube_*), cAdvisor (container_*) and the collector's kafkametrics receiver
(kafka_consumer_group_lag_sum_ratio). Scraped series carry the scrape's own labels (job,
instance, pod, service, ...) and cAdvisor may hold two series for one container after a restart,
so every rule aggregates or matches on the labels it means.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from itbench.core.shop import DEFAULT_COST_BUDGET_PER_HOUR, PRICE_PER_CORE_HOUR, PRICE_PER_GIB_HOUR

RULE_NAME = "astronomy-shop-alerts"
"""metadata.name of the PrometheusRule."""
GROUP_NAME = "astronomy-shop.rules"
EVALUATION_INTERVAL_SECONDS = 30
"""Rule evaluation interval (kube-prometheus-stack's default evaluationInterval)."""

LATENCY_THRESHOLD_MS = 1000.0
"""p95 server latency above which RequestLatencyHigh fires."""
ERROR_RATIO_THRESHOLD = 0.05
"""Share of failed server spans above which RequestErrorRate fires."""
CONSUMER_LAG_THRESHOLD = 100
"""Messages of consumer lag above which KafkaConsumerLag fires."""
THROTTLING_THRESHOLD = 0.25
"""Share of throttled CFS periods above which CPUThrottlingHigh fires."""
MEMORY_THRESHOLD = 0.9
"""Working set as a share of the memory limit above which MemoryUsageHigh fires."""
KAFKA_LAG_METRIC = "kafka_consumer_group_lag_sum_ratio"
"""kafkametrics' `kafka.consumer_group.lag_sum` (a unit-"1" gauge, hence `_ratio`)."""
QUIET_SERVICES = ("flagd", "load-generator")
"""Services left out of NoRequests: they serve no steady stream of spans of their own."""

_SERVING = 'span_kind=~"SPAN_KIND_SERVER|SPAN_KIND_CONSUMER"'


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule.

    Attributes:
        name: The alertname.
        expr: PromQL expression; every result element is an alert.
        for_seconds: How long the expression must hold before the alert fires.
        labels: Labels added to the alert; values may use `{{ $labels.x }}` templates.
        annotations: summary and description; may use `{{ $labels.x }}` and `{{ $value }}`.
    """

    name: str
    expr: str
    for_seconds: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        """The rule as an entry of a Prometheus rule group."""
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": format_duration(self.for_seconds),
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }


def alert_rules(namespace: str) -> list[AlertRule]:
    """The alert rules for an application namespace.

    Args:
        namespace: Namespace the Astronomy Shop runs in.

    Returns:
        The rules in a fixed order.
    """
    ns = f'namespace="{namespace}"'
    calls = "traces_span_metrics_calls_total"
    container = "{{ $labels.container }}"
    quiet = "|".join(QUIET_SERVICES)
    # `or` keeps both terms when one is missing (no CPU requests would otherwise empty the sum).
    cost = (
        f'sum by (namespace) (kube_pod_container_resource_requests{{{ns}, resource="cpu"}}'
        f" * {PRICE_PER_CORE_HOUR}"
        f' or kube_pod_container_resource_requests{{{ns}, resource="memory"}}'
        f" / {2**30} * {PRICE_PER_GIB_HOUR})"
    )
    # cAdvisor keeps the series of a restarted container's old ID for a while: take one per pod.
    working_set = (
        "max by (namespace, pod, container) "
        f'(container_memory_working_set_bytes{{{ns}, container!=""}})'
    )
    limits = (
        "max by (namespace, pod, container) (kube_pod_container_resource_limits"
        f'{{{ns}, resource="memory"}})'
    )
    return [
        AlertRule(
            "RequestErrorRate",
            f"sum by (service_name) (rate({calls}{{{ns}, {_SERVING}, "
            f'status_code="STATUS_CODE_ERROR"}}[2m])) / sum by (service_name) '
            f"(rate({calls}{{{ns}, {_SERVING}}}[2m])) > {ERROR_RATIO_THRESHOLD}",
            60,
            {"severity": "critical"},
            {
                "summary": "{{ $labels.service_name }} fails too many requests",
                "description": "{{ $value }} of the spans {{ $labels.service_name }} serves end "
                "in an error.",
            },
        ),
        AlertRule(
            "RequestLatencyHigh",
            "histogram_quantile(0.95, sum by (service_name, le) (rate("
            "traces_span_metrics_duration_milliseconds_bucket"
            f'{{{ns}, span_kind="SPAN_KIND_SERVER"}}'
            f"[2m]))) > {LATENCY_THRESHOLD_MS:g}",
            120,
            {"severity": "warning"},
            {
                "summary": "{{ $labels.service_name }} is slow",
                "description": "p95 latency of {{ $labels.service_name }} is {{ $value }} ms.",
            },
        ),
        AlertRule(
            "NoRequests",
            f'sum by (service_name) (rate({calls}{{{ns}, {_SERVING}, service_name!~"{quiet}"}}'
            "[2m])) == 0",
            120,
            {"severity": "critical"},
            {
                "summary": "{{ $labels.service_name }} serves no requests",
                "description": "{{ $labels.service_name }} has not served a request for 2 minutes.",
            },
        ),
        AlertRule(
            "PodNotReady",
            f"kube_deployment_spec_replicas{{{ns}}} - kube_deployment_status_replicas_available"
            f"{{{ns}}} > 0 or kube_deployment_status_replicas{{{ns}}}"
            f" - kube_deployment_status_replicas_ready{{{ns}}} > 0",
            60,
            {"severity": "warning"},
            {
                "summary": "Deployment {{ $labels.deployment }} has pods that are not ready",
                "description": "{{ $value }} pod(s) of {{ $labels.namespace }}/"
                "{{ $labels.deployment }} are not ready.",
            },
        ),
        AlertRule(
            "PodCrashLooping",
            "max by (namespace, container) (max_over_time("
            f'kube_pod_container_status_waiting_reason{{{ns}, reason="CrashLoopBackOff"}}[5m]))'
            " >= 1",
            60,
            {"severity": "warning", "deployment": container},
            {
                "summary": "Container {{ $labels.container }} is crash looping",
                "description": "A container of {{ $labels.namespace }}/{{ $labels.container }} "
                "is waiting in CrashLoopBackOff.",
            },
        ),
        AlertRule(
            "ContainerOOMKilled",
            "max by (namespace, container) (increase(kube_pod_container_status_restarts_total"
            f"{{{ns}}}[10m])) > 0 and on (namespace, container) max by (namespace, container) ("
            f'kube_pod_container_status_last_terminated_reason{{{ns}, reason="OOMKilled"}}) > 0',
            0,
            {"severity": "warning", "deployment": container},
            {
                "summary": "Container {{ $labels.container }} was OOM-killed",
                "description": "{{ $labels.namespace }}/{{ $labels.container }} restarted after "
                "exceeding its memory limit.",
            },
        ),
        AlertRule(
            "CPUThrottlingHigh",
            "sum by (namespace, container) (increase(container_cpu_cfs_throttled_periods_total"
            f'{{{ns}, container!=""}}[5m])) / sum by (namespace, container) (increase('
            f'container_cpu_cfs_periods_total{{{ns}, container!=""}}[5m]))'
            f" > {THROTTLING_THRESHOLD}",
            120,
            {"severity": "warning", "deployment": container},
            {
                "summary": "Container {{ $labels.container }} is CPU throttled",
                "description": "{{ $value }} of the CFS periods of {{ $labels.namespace }}/"
                "{{ $labels.container }} are throttled.",
            },
        ),
        AlertRule(
            "MemoryUsageHigh",
            f"max by (namespace, container) ({working_set} / on (namespace, pod, container) "
            f"{limits}) > {MEMORY_THRESHOLD}",
            60,
            {"severity": "warning", "deployment": container},
            {
                "summary": "Container {{ $labels.container }} is close to its memory limit",
                "description": "{{ $labels.namespace }}/{{ $labels.container }} uses {{ $value }} "
                "of its memory limit.",
            },
        ),
        AlertRule(
            "KafkaConsumerLag",
            f'sum by (group) ({KAFKA_LAG_METRIC}{{topic="orders"}}) > {CONSUMER_LAG_THRESHOLD}',
            120,
            {"severity": "warning", "consumer_group": "{{ $labels.group }}"},
            {
                "summary": "Consumer group {{ $labels.group }} lags behind",
                "description": "{{ $labels.group }} is {{ $value }} messages behind on orders.",
            },
        ),
        AlertRule(
            "HPAMaxedOut",
            f"kube_horizontalpodautoscaler_status_current_replicas{{{ns}}}"
            f" == kube_horizontalpodautoscaler_spec_max_replicas{{{ns}}}"
            f" and kube_horizontalpodautoscaler_spec_max_replicas{{{ns}}}"
            f" != kube_horizontalpodautoscaler_spec_min_replicas{{{ns}}}",
            120,
            {"severity": "warning"},
            {
                "summary": "HPA {{ $labels.horizontalpodautoscaler }} runs at its maximum",
                "description": "{{ $labels.namespace }}/{{ $labels.horizontalpodautoscaler }} "
                "has been at maxReplicas ({{ $value }}).",
            },
        ),
        AlertRule(
            "CostBudgetExceeded",
            f"{cost} > {DEFAULT_COST_BUDGET_PER_HOUR:g}",
            120,
            {"severity": "warning"},
            {
                "summary": "Namespace {{ $labels.namespace }} exceeds its cost budget",
                "description": "Requested resources cost {{ $value }} USD per hour, more than "
                f"the namespace's budget of {DEFAULT_COST_BUDGET_PER_HOUR:g} USD per hour.",
            },
        ),
    ]


ALERT_NAMES: tuple[str, ...] = tuple(r.name for r in alert_rules("otel-demo"))
"""Every alertname the rules define."""


def prometheus_rule(
    namespace: str, selector_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The monitoring.coreos.com/v1 PrometheusRule the live stack installs (the same rules).

    Args:
        namespace: Namespace of the application (and of the PrometheusRule).
        selector_labels: Labels the stack's Prometheus selects rules by (kube-prometheus-stack:
            `release: <its release name>`).
    """
    labels = {"app.kubernetes.io/part-of": "opentelemetry-demo", **(selector_labels or {})}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": RULE_NAME, "namespace": namespace, "labels": labels},
        "spec": {
            "groups": [
                {
                    "name": GROUP_NAME,
                    "interval": format_duration(EVALUATION_INTERVAL_SECONDS),
                    "rules": [r.manifest() for r in alert_rules(namespace)],
                }
            ]
        },
    }


def rules_from_manifest(manifest: dict[str, Any]) -> list[AlertRule]:
    """Read the alerting rules back from a PrometheusRule (recording rules are skipped).

    Raises:
        ValueError: A rule lacks `alert` or `expr`, or has an unparsable `for`.
    """
    out: list[AlertRule] = []
    for group in manifest.get("spec", {}).get("groups", []) or []:
        for rule in group.get("rules", []) or []:
            if "alert" not in rule:
                continue
            if not rule.get("expr"):
                raise ValueError(f"alert rule {rule.get('alert')!r} has no expr")
            out.append(
                AlertRule(
                    name=str(rule["alert"]),
                    expr=str(rule["expr"]),
                    for_seconds=parse_duration(str(rule.get("for", "0s"))),
                    labels={str(k): str(v) for k, v in (rule.get("labels") or {}).items()},
                    annotations={
                        str(k): str(v) for k, v in (rule.get("annotations") or {}).items()
                    },
                )
            )
    return out


def rules_fingerprint(manifest: dict[str, Any]) -> str:
    """A sha256 digest of a PrometheusRule's groups (what is evaluated, nothing else)."""
    text = json.dumps(manifest.get("spec", {}), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds in a Prometheus duration such as `1m30s` (whole seconds).

    Raises:
        ValueError: The text is not a duration.
    """
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return int(total)


def format_duration(seconds: int) -> str:
    """A Prometheus duration for whole seconds (`90` -> `1m30s`, `0` -> `0s`)."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


_TEMPLATE = re.compile(r"\{\{\s*\$(labels\.([A-Za-z_][A-Za-z0-9_]*)|value)\s*\}\}")


def render_template(text: str, labels: dict[str, str], value: float) -> str:
    """Expand `{{ $labels.x }}` and `{{ $value }}` as Prometheus does in rule labels/annotations."""

    def sub(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            return labels.get(m.group(2), "")
        return f"{value:.4g}"

    return _TEMPLATE.sub(sub, text)
