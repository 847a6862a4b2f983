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
