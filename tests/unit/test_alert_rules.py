"""The alert rules: agreed names and labels, the PrometheusRule, and promtool's verdict."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import promql_parser
import pytest
import yaml

from itbench.core.alert_rules import (
    ALERT_NAMES,
    alert_rules,
    format_duration,
    parse_duration,
    prometheus_rule,
    render_template,
    rules_fingerprint,
    rules_from_manifest,
)

AGREED = {
    "RequestErrorRate": "service_name",
    "RequestLatencyHigh": "service_name",
    "NoRequests": "service_name",
    "PodNotReady": "deployment",
    "PodCrashLooping": "deployment",
    "ContainerOOMKilled": "deployment",
    "CPUThrottlingHigh": "deployment",
    "KafkaConsumerLag": "consumer_group",
    "HPAMaxedOut": "horizontalpodautoscaler",
    "CostBudgetExceeded": "namespace",
    "MemoryUsageHigh": "deployment",
}


def test_the_agreed_alert_names_exist_once() -> None:
    assert sorted(ALERT_NAMES) == sorted(AGREED)


@pytest.mark.parametrize("rule", alert_rules("otel-demo"), ids=lambda r: r.name)
def test_each_rule_parses_and_yields_its_label(rule: object) -> None:
    from itbench.core.alert_rules import AlertRule

    assert isinstance(rule, AlertRule)
    promql_parser.parse(rule.expr)
    label = AGREED[rule.name]
    by_template = any(f"$labels.{label}" in v or k == label for k, v in rule.labels.items())
    assert by_template or label in rule.expr
    assert rule.annotations["summary"] and rule.annotations["description"]


def test_rules_are_scoped_to_the_namespace() -> None:
    for rule in alert_rules("shop-a"):
        if "kube_" in rule.expr or "container_" in rule.expr:
            assert 'namespace="shop-a"' in rule.expr


def test_prometheus_rule_round_trips() -> None:
    manifest = prometheus_rule("otel-demo")
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"]["namespace"] == "otel-demo"
    assert rules_from_manifest(manifest) == alert_rules("otel-demo")


def test_fingerprint_changes_with_any_rule_edit() -> None:
    manifest = prometheus_rule("otel-demo")
    edited = prometheus_rule("otel-demo")
    edited["spec"]["groups"][0]["rules"][0]["for"] = "1h"
    assert rules_fingerprint(manifest) == rules_fingerprint(prometheus_rule("otel-demo"))
    assert rules_fingerprint(manifest) != rules_fingerprint(edited)


def test_durations_and_templates() -> None:
    assert parse_duration("1m30s") == 90
    assert parse_duration("0s") == 0
    assert format_duration(90) == "1m30s"
    assert format_duration(3600) == "1h"
    with pytest.raises(ValueError):
        parse_duration("soon")
    text = render_template("{{ $labels.container }} at {{ $value }}", {"container": "ad"}, 0.5)
    assert text == "ad at 0.5"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(prometheus_rule("otel-demo")["spec"]))
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERT_NAMES)} rules found" in done.stdout


# ---- promtool on series shaped like the real exporters' ------------------------------------------

_NS = "otel-demo"
_COLLECTOR = {
    "container": "opentelemetry-collector",
    "endpoint": "metrics",
    "instance": "10.244.1.7:8888",
    "job": "otel-collector",
    "namespace": _NS,
    "pod": "otel-collector-6d8f9c7b5-x2k4q",
    "service": "otel-collector",
}
"""What the ServiceMonitor scrape of the collector's Prometheus exporter adds to every series."""
_KSM = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.244.0.12:8080",
    "job": "kube-state-metrics",
    "pod": "kube-prometheus-stack-kube-state-metrics-6c5d7b9f4d-lmx2k",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
"""kube-state-metrics' scrape labels (honorLabels: the object's own namespace, pod and
container win)."""
_KUBELET = {
    "endpoint": "https-metrics",
    "instance": "172.18.0.2:10250",
    "job": "kubelet",
    "metrics_path": "/metrics/cadvisor",
    "node": "kind-worker",
    "service": "kube-prometheus-stack-kubelet",
}


def _selector(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _span(service: str, status: str, values: str, **extra: str) -> dict[str, str]:
    labels = {
        **_COLLECTOR,
        "exported_instance": f"uid-{service}-1",
        "exported_job": f"{_NS}/{service}",
        "otel_scope_name": "spanmetricsconnector",
        "service_name": service,
        "span_kind": "SPAN_KIND_SERVER",
        "span_name": extra.pop("span_name", "oteldemo.CheckoutService/PlaceOrder"),
        "status_code": status,
        **extra,
    }
    return {"series": _selector("traces_span_metrics_calls_total", labels), "values": values}


def _ksm(name: str, values: str, **labels: str) -> dict[str, str]:
    return {"series": _selector(name, {**_KSM, "namespace": _NS, **labels}), "values": values}


def _cadvisor(name: str, pod: str, container: str, cid: str, values: str) -> dict[str, str]:
    labels = {
        **_KUBELET,
        "container": container,
        "id": f"/kubepods.slice/kubepods-burstable.slice/pod-{pod}.slice/cri-{cid}.scope",
        "image": f"ghcr.io/open-telemetry/demo:x-{container}",
        "name": cid,
        "namespace": _NS,
        "pod": pod,
    }
    return {"series": _selector(name, labels), "values": values}


def _latency(service: str, slow: bool) -> list[dict[str, str]]:
    out = []
    bounds = ("2", "100", "1000", "2000", "5000", "+Inf")
    for le in bounds:
        # 10 calls/min; when slow, every call takes 2-5 s.
        under = le in ("+Inf",) or (not slow and True) or (slow and le == "5000")
        step = 10 if under else 0
        labels = {
            **_COLLECTOR,
            "exported_instance": f"uid-{service}-1",
            "exported_job": f"{_NS}/{service}",
            "otel_scope_name": "spanmetricsconnector",
            "service_name": service,
            "span_kind": "SPAN_KIND_SERVER",
            "span_name": "oteldemo.AdService/GetAds",
            "status_code": "STATUS_CODE_UNSET",
            "le": le,
        }
        out.append(
            {
                "series": _selector("traces_span_metrics_duration_milliseconds_bucket", labels),
                "values": f"0+{step}x60",
            }
        )
    return out


def _case(
    series: list[dict[str, str]], alert: str, fires: list[dict[str, str]], at: str = "12m"
) -> dict[str, object]:
    return {
        "interval": "15s",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": f} for f in fires]}
        ],
    }


def _promtool_cases() -> list[dict[str, object]]:
    rules = {r.name: r for r in alert_rules(_NS)}

    def labels(alert: str, **own: str) -> dict[str, str]:
        rendered = {
            k: v.replace("{{ $labels.container }}", own.get("container", "")).replace(
                "{{ $labels.group }}", own.get("group", "")
            )
            for k, v in rules[alert].labels.items()
        }
        return {**own, **rendered}

    pod_a, pod_b = "cart-7c9f8d6b54-abcde", "cart-7c9f8d6b54-fghij"
    cases = [
        # RequestErrorRate: one service's error share above 5 %, counted over both its pods.
        _case(
            [
                _span("checkout", "STATUS_CODE_UNSET", "0+60x60"),
                _span("checkout", "STATUS_CODE_ERROR", "0+30x60"),
                _span("checkout", "STATUS_CODE_ERROR", "0+30x60", exported_instance="uid-2"),
                _span("checkout", "STATUS_CODE_ERROR", "0+1x60", span_kind="SPAN_KIND_CLIENT"),
            ],
            "RequestErrorRate",
            [labels("RequestErrorRate", service_name="checkout")],
        ),
        _case(
            [
                _span("checkout", "STATUS_CODE_UNSET", "0+600x60"),
                _span("checkout", "STATUS_CODE_ERROR", "0+1x60"),
            ],
            "RequestErrorRate",
            [],
        ),
        # A namespace other than the shop's is not the shop's problem.
        _case(
            [_span("checkout", "STATUS_CODE_ERROR", "0+30x60", namespace="elsewhere")],
            "RequestErrorRate",
            [],
        ),
        _case(
            _latency("ad", slow=True),
            "RequestLatencyHigh",
            [labels("RequestLatencyHigh", service_name="ad")],
        ),
        _case(_latency("ad", slow=False), "RequestLatencyHigh", []),
        # NoRequests: a service whose counter stopped; flagd and load-generator are left out.
        _case(
            [
                _span(
                    "payment",
                    "STATUS_CODE_UNSET",
                    "0+10x20 200x40",
                    span_name="oteldemo.PaymentService/Charge",
                ),
                _span(
                    "flagd",
                    "STATUS_CODE_UNSET",
                    "5x60",
                    span_name="flagd.evaluation.v1.Service/ResolveBoolean",
                ),
                _span(
                    "cart",
                    "STATUS_CODE_UNSET",
                    "0+10x60",
                    span_name="POST /oteldemo.CartService/GetCart",
                ),
            ],
            "NoRequests",
            [labels("NoRequests", service_name="payment")],
        ),
        # ...and clears once the counter moves again.
        _case(
            [
                _span(
                    "payment",
                    "STATUS_CODE_UNSET",
                    "0+10x10 100x20 100+10x30",
                    span_name="oteldemo.PaymentService/Charge",
                ),
            ],
            "NoRequests",
            [],
        ),
        # PodNotReady: KSM's deployment series carry the scrape's labels on both sides.
        _case(
            [
                _ksm("kube_deployment_spec_replicas", "1x60", deployment="cart"),
                _ksm("kube_deployment_status_replicas_available", "1x20 0x40", deployment="cart"),
                _ksm("kube_deployment_status_replicas", "1x60", deployment="cart"),
                _ksm("kube_deployment_status_replicas_ready", "1x20 0x40", deployment="cart"),
            ],
            "PodNotReady",
            [labels("PodNotReady", **_KSM, namespace=_NS, deployment="cart")],
        ),
        _case(
            [
                _ksm("kube_deployment_spec_replicas", "1x60", deployment="cart"),
                _ksm("kube_deployment_status_replicas_available", "0x20 1x40", deployment="cart"),
                _ksm("kube_deployment_status_replicas", "1x60", deployment="cart"),
                _ksm("kube_deployment_status_replicas_ready", "0x20 1x40", deployment="cart"),
            ],
            "PodNotReady",
            [],
        ),
        # PodCrashLooping: two crash-looping pods of one container give one alert.
        _case(
            [
                _ksm(
                    "kube_pod_container_status_waiting_reason",
                    "1x60",
                    container="cart",
                    pod=p,
                    uid=f"u-{p}",
                    reason="CrashLoopBackOff",
                )
                for p in (pod_a, pod_b)
            ],
            "PodCrashLooping",
            [labels("PodCrashLooping", namespace=_NS, container="cart")],
        ),
        _case(
            [
                _ksm(
                    "kube_pod_container_status_waiting_reason",
                    "1x10 _x50",
                    container="cart",
                    pod=pod_a,
                    uid="u-a",
                    reason="CrashLoopBackOff",
                )
            ],
            "PodCrashLooping",
            [],
        ),
        # ContainerOOMKilled: restarts and the last termination reason, matched per container.
        _case(
            [
                _ksm(
                    "kube_pod_container_status_restarts_total",
                    "0x30 1x30",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                ),
                _ksm(
                    "kube_pod_container_status_last_terminated_reason",
                    "_x30 1x30",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                    reason="OOMKilled",
                ),
            ],
            "ContainerOOMKilled",
            [labels("ContainerOOMKilled", namespace=_NS, container="email")],
        ),
        _case(
            [
                _ksm(
                    "kube_pod_container_status_restarts_total",
                    "0x30 1x30",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                ),
                _ksm(
                    "kube_pod_container_status_last_terminated_reason",
                    "_x30 1x30",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                    reason="Error",
                ),
            ],
            "ContainerOOMKilled",
            [],
        ),
        # CPUThrottlingHigh: the pod-level cgroup series (container="") does not count.
        _case(
            [
                _cadvisor("container_cpu_cfs_periods_total", "ad-1", "ad", "c1", "0+10x60"),
                _cadvisor(
                    "container_cpu_cfs_throttled_periods_total", "ad-1", "ad", "c1", "0+5x60"
                ),
                _cadvisor("container_cpu_cfs_periods_total", "ad-1", "", "p1", "0+10x60"),
                _cadvisor("container_cpu_cfs_throttled_periods_total", "ad-1", "", "p1", "0+0x60"),
            ],
            "CPUThrottlingHigh",
            [labels("CPUThrottlingHigh", namespace=_NS, container="ad")],
        ),
        _case(
            [
                _cadvisor("container_cpu_cfs_periods_total", "ad-1", "ad", "c1", "0+10x60"),
                _cadvisor(
                    "container_cpu_cfs_throttled_periods_total", "ad-1", "ad", "c1", "0+1x60"
                ),
            ],
            "CPUThrottlingHigh",
            [],
        ),
        # MemoryUsageHigh: after a restart cAdvisor holds the old and the new container id.
        _case(
            [
                _cadvisor(
                    "container_memory_working_set_bytes", "email-1", "email", "old", "99000000x60"
                ),
                _cadvisor(
                    "container_memory_working_set_bytes", "email-1", "email", "new", "98000000x60"
                ),
                _cadvisor(
                    "container_memory_working_set_bytes", "email-1", "", "pod", "99000000x60"
                ),
                _ksm(
                    "kube_pod_container_resource_limits",
                    "104857600x60",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                    node="kind-worker",
                    resource="memory",
                    unit="byte",
                ),
                _ksm(
                    "kube_pod_container_resource_limits",
                    "0.2x60",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                    node="kind-worker",
                    resource="cpu",
                    unit="core",
                ),
            ],
            "MemoryUsageHigh",
            [labels("MemoryUsageHigh", namespace=_NS, container="email")],
        ),
        _case(
            [
                _cadvisor(
                    "container_memory_working_set_bytes", "email-1", "email", "old", "50000000x60"
                ),
                _cadvisor(
                    "container_memory_working_set_bytes", "email-1", "email", "new", "40000000x60"
                ),
                _ksm(
                    "kube_pod_container_resource_limits",
                    "104857600x60",
                    container="email",
                    pod="email-1",
                    uid="u-e",
                    node="kind-worker",
                    resource="memory",
                    unit="byte",
                ),
            ],
            "MemoryUsageHigh",
            [],
        ),
        # KafkaConsumerLag: the receiver's lag_sum per group (unit "1": stored with _ratio).
        _case(
            [
                {
                    "series": _selector(
                        "kafka_consumer_group_lag_sum_ratio",
                        {
                            **_COLLECTOR,
                            "group": g,
                            "topic": "orders",
                            "otel_scope_name": "kafkametricsreceiver",
                        },
                    ),
                    "values": v,
                }
                for g, v in (("fraud-detection", "0+20x60"), ("accounting", "0x60"))
            ]
            + [
                {
                    "series": _selector(
                        "kafka_consumer_group_lag_ratio",
                        {
                            **_COLLECTOR,
                            "group": "fraud-detection",
                            "topic": "orders",
                            "partition": "0",
                        },
                    ),
                    "values": "0+20x60",
                }
            ],
            "KafkaConsumerLag",
            [labels("KafkaConsumerLag", group="fraud-detection")],
        ),
        _case(
            [
                {
                    "series": _selector(
                        "kafka_consumer_group_lag_sum_ratio",
                        {**_COLLECTOR, "group": "fraud-detection", "topic": "orders"},
                    ),
                    "values": "0+20x20 0x40",
                }
            ],
            "KafkaConsumerLag",
            [],
        ),
        # HPAMaxedOut: at max, and max above min; an HPA pinned at min = max does not count.
        _case(
            [
                _ksm(
                    "kube_horizontalpodautoscaler_status_current_replicas",
                    "3x60",
                    horizontalpodautoscaler="frontend",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_max_replicas",
                    "3x60",
                    horizontalpodautoscaler="frontend",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_min_replicas",
                    "1x60",
                    horizontalpodautoscaler="frontend",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_status_current_replicas",
                    "2x60",
                    horizontalpodautoscaler="cart",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_max_replicas",
                    "2x60",
                    horizontalpodautoscaler="cart",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_min_replicas",
                    "2x60",
                    horizontalpodautoscaler="cart",
                ),
            ],
            "HPAMaxedOut",
            [labels("HPAMaxedOut", **_KSM, namespace=_NS, horizontalpodautoscaler="frontend")],
        ),
        # ...and clears when the autoscaler scales back below its maximum.
        _case(
            [
                _ksm(
                    "kube_horizontalpodautoscaler_status_current_replicas",
                    "3x20 1x40",
                    horizontalpodautoscaler="frontend",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_max_replicas",
                    "3x60",
                    horizontalpodautoscaler="frontend",
                ),
                _ksm(
                    "kube_horizontalpodautoscaler_spec_min_replicas",
                    "1x60",
                    horizontalpodautoscaler="frontend",
                ),
            ],
            "HPAMaxedOut",
            [],
        ),
        # CostBudgetExceeded: CPU and memory requests per container; memory alone still sums.
        _case(
            [
                _ksm(
                    "kube_pod_container_resource_requests",
                    f"{cpu}x60",
                    container=c,
                    pod=f"{c}-1",
                    uid=f"u-{c}",
                    node="kind-worker",
                    resource="cpu",
                    unit="core",
                )
                for c, cpu in (("frontend", "2"), ("ad", "1"))
            ]
            + [
                _ksm(
                    "kube_pod_container_resource_requests",
                    "268435456x60",
                    container="ad",
                    pod="ad-1",
                    uid="u-ad",
                    node="kind-worker",
                    resource="memory",
                    unit="byte",
                ),
            ],
            "CostBudgetExceeded",
            [labels("CostBudgetExceeded", namespace=_NS)],
        ),
        _case(
            [
                _ksm(
                    "kube_pod_container_resource_requests",
                    "0.5x60",
                    container="ad",
                    pod="ad-1",
                    uid="u-ad",
                    node="kind-worker",
                    resource="cpu",
                    unit="core",
                ),
                _ksm(
                    "kube_pod_container_resource_requests",
                    "268435456x60",
                    container="ad",
                    pod="ad-1",
                    uid="u-ad",
                    node="kind-worker",
                    resource="memory",
                    unit="byte",
                ),
            ],
            "CostBudgetExceeded",
            [],
        ),
        _case(
            [
                _ksm(
                    "kube_pod_container_resource_requests",
                    f"{30 * 2**30}x60",
                    container="ad",
                    pod="ad-1",
                    uid="u-ad",
                    node="kind-worker",
                    resource="memory",
                    unit="byte",
                ),
            ],
            "CostBudgetExceeded",
            [labels("CostBudgetExceeded", namespace=_NS)],
        ),
    ]
    return cases


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_tests_every_rule_on_realistic_series(tmp_path: Path) -> None:
    spec = prometheus_rule(_NS)["spec"]
    for group in spec["groups"]:
        for rule in group["rules"]:
            # Annotations render $value; the expressions, `for` and labels are under test here.
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    cases = _promtool_cases()
    tested = {c["alert_rule_test"][0]["alertname"] for c in cases}  # type: ignore[index]
    assert tested == set(ALERT_NAMES)
    for alert in ALERT_NAMES:
        kinds = [
            bool(c["alert_rule_test"][0]["exp_alerts"])
            for c in cases
            if c["alert_rule_test"][0]["alertname"] == alert
        ]  # type: ignore[index]
        assert True in kinds and False in kinds, f"{alert} needs a firing and a quiet case"
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": ["rules.yaml"], "evaluation_interval": "30s", "tests": cases},
            sort_keys=False,
        )
    )
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
