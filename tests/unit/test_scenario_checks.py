"""The validator's second pass: sane values, Kubernetes names, and names that exist in the shop."""

from __future__ import annotations

from typing import Any

import pytest

from itbench.core.alert_rules import alert_rules
from itbench.core.catalog import validate_document
from itbench.core.scenario_checks import rule_label_names, shop_inventory
from itbench.core.topology import build_topology
from itbench.environments.sim.objects import baseline_objects
from tests.unit.test_catalog import SRC, doc


def problems(d: dict[str, Any]) -> dict[str, str]:
    found, listed = validate_document(d, SRC)
    assert found is None
    return {p.path: p.reason for p in listed}


def finops_doc() -> dict[str, Any]:
    """A valid FinOps scenario with a cost target."""
    d = doc(
        domain="FinOps",
        **{"class": "AutoscalerMisconfiguration"},
        faults=[
            {
                "id": "kubernetes.hpa-misconfiguration",
                "args": {"workload": "frontend", "cpuUtilization": 5, "maxReplicas": 8},
            }
        ],
        triggers={
            "alerts": [{"alertname": "CostBudgetExceeded", "labels": {"namespace": "otel-demo"}}]
        },
    )
    truth = d["spec"]["groundTruth"]
    truth["entities"] = [
        {"id": "h", "kind": "HorizontalPodAutoscaler", "name": "frontend", "rootCause": True}
    ]
    truth["propagation"] = []
    truth["mitigations"] = [
        {
            "description": "restore the autoscaler",
            "steps": [
                {
                    "action": "patch",
                    "kind": "HorizontalPodAutoscaler",
                    "name": "frontend",
                    "patch": '{"spec":{"maxReplicas":3}}',
                }
            ],
        }
    ]
    truth["finops"] = {"cpuCores": 1.5, "memoryBytes": 2**30, "costPerHour": 0.05}
    return d


def test_the_finops_example_is_valid() -> None:
    found, listed = validate_document(finops_doc(), SRC)
    assert listed == [] and found is not None


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_cost_is_refused_at_its_path(bad: float) -> None:
    d = finops_doc()
    d["spec"]["groundTruth"]["finops"]["costPerHour"] = bad
    assert problems(d) == {"spec.groundTruth.finops.costPerHour": f"{bad} is not a finite number"}


def test_non_finite_numbers_are_refused_anywhere() -> None:
    d = doc()
    d["spec"]["faults"][0]["args"]["weight"] = float("nan")
    assert problems(d) == {"spec.faults[0].args.weight": "nan is not a finite number"}


@pytest.mark.parametrize(
    ("char", "code"),
    [("\u200b", "U+200B"), ("\u202e", "U+202E"), ("\u2066", "U+2066"), ("\ufeff", "U+FEFF")],
)
def test_invisible_and_bidirectional_characters_in_names_are_refused(char: str, code: str) -> None:
    d = doc()
    d["spec"]["groundTruth"]["entities"][0]["name"] = f"check{char}out"
    assert problems(d) == {
        "spec.groundTruth.entities[0].name": f"character {code} at offset 5 is an invisible or "
        "control character; remove it"
    }


def test_names_must_follow_the_kubernetes_grammar_of_their_kind() -> None:
    d = doc()
    d["spec"]["groundTruth"]["entities"][0]["name"] = "Checkout"
    d["spec"]["groundTruth"]["mitigations"][0]["steps"] = [
        {"action": "patch", "kind": "Service", "name": "1checkout", "patch": "{}"}
    ]
    found = problems(d)
    assert (
        "is not a valid Deployment name: a DNS-1123 subdomain"
        in found["spec.groundTruth.entities[0].name"]
    )
    assert (
        "is not a valid Service name: a DNS-1035 label"
        in found["spec.groundTruth.mitigations[0].steps[0].name"]
    )


@pytest.mark.parametrize("field", ["apiVersion", "kind"])
def test_api_version_and_kind_are_required_as_kubectl_requires_them(field: str) -> None:
    d = doc()
    del d[field]
    assert field in problems(d)
    assert "kubectl apply needs it" in problems(d)[field]


def test_ground_truth_entities_must_exist_in_the_topology() -> None:
    d = doc()
    d["spec"]["groundTruth"]["entities"].append({"id": "x", "kind": "Service", "name": "billing"})
    assert problems(d)["spec.groundTruth.entities[2].name"].startswith(
        "the shop has no Service 'billing', nor do the faults create one (Services: ad, cart"
    )


def test_pods_are_named_after_an_existing_workload() -> None:
    d = doc()
    d["spec"]["groundTruth"]["entities"][1]["name"] = "checkout-7d9f"
    assert validate_document(d, SRC)[1] == []
    d["spec"]["groundTruth"]["entities"][1]["name"] = "billing"
    assert "belongs to no Deployment" in problems(d)["spec.groundTruth.entities[1].name"]


def test_mitigation_targets_must_exist() -> None:
    d = doc()
    d["spec"]["groundTruth"]["mitigations"][0]["steps"].append(
        {"action": "delete", "kind": "NetworkPolicy", "name": "checkout-ingress"}
    )
    assert problems(d) == {
        "spec.groundTruth.mitigations[0].steps[1].name": "the shop has no NetworkPolicy "
        "'checkout-ingress', nor do the faults create one"
    }


def test_objects_a_fault_creates_exist_after_injection() -> None:
    d = doc(
        faults=[{"id": "kubernetes.block-ingress", "args": {"workload": "checkout", "port": 8080}}]
    )
    d["spec"]["groundTruth"]["entities"].append(
        {"id": "np", "kind": "NetworkPolicy", "name": "checkout-ingress", "rootCause": True}
    )
    d["spec"]["groundTruth"]["mitigations"][0]["steps"] = [
        {"action": "delete", "kind": "NetworkPolicy", "name": "checkout-ingress"}
    ]
    assert validate_document(d, SRC)[1] == []
    d = doc(
        faults=[{"id": "kubernetes.hpa-misconfiguration", "args": {"workload": "checkout"}}],
        triggers={
            "alerts": [
                {"alertname": "HPAMaxedOut", "labels": {"horizontalpodautoscaler": "checkout"}}
            ]
        },
    )
    assert validate_document(d, SRC)[1] == []


def test_a_fault_whose_only_root_causes_are_injector_objects_is_refused() -> None:
    d = doc(
        **{"class": "NetworkDelay"},
        faults=[{"id": "chaos.network-delay", "args": {"workload": "checkout", "latencyMs": 500}}],
    )
    truth = d["spec"]["groundTruth"]
    truth["entities"] = [
        {"id": "x", "kind": "NetworkChaos", "name": "checkout-network-delay", "rootCause": True},
        {"id": "c", "kind": "Deployment", "name": "checkout"},
    ]
    truth["propagation"] = [{"source": "x", "target": "c"}]
    truth["mitigations"][0]["steps"] = [
        {"action": "delete", "kind": "NetworkChaos", "name": "checkout-network-delay"}
    ]
    found = problems(d)
    assert list(found) == ["spec.groundTruth.entities"]
    assert "NetworkChaos/checkout-network-delay" in found["spec.groundTruth.entities"]
    assert "rootCause: true" in found["spec.groundTruth.entities"]
    truth["entities"][1]["rootCause"] = True
    assert validate_document(d, SRC)[1] == []


def test_fault_targets_must_exist() -> None:
    d = doc(faults=[{"id": "kubernetes.service-selector", "args": {"service": "billing"}}])
    found = problems(d)
    assert "the shop has no Service 'billing'" in found["spec.faults[0].args.service"]
    assert found["spec.faults[0]"] == (
        "the fault changes Service/'billing', which does not exist in the shop"
    )


def test_expected_alerts_must_be_defined_by_a_rule() -> None:
    d = doc(triggers={"alerts": [{"alertname": "CheckoutOnFire"}]})
    assert problems(d)["spec.triggers.alerts[0].alertname"].startswith(
        "no alert rule defines 'CheckoutOnFire' (rules: RequestErrorRate, "
    )


def test_expected_alert_labels_must_be_ones_the_rule_can_produce() -> None:
    d = doc(
        triggers={"alerts": [{"alertname": "PodNotReady", "labels": {"service_name": "checkout"}}]}
    )
    assert problems(d)["spec.triggers.alerts[0].labels.service_name"].startswith(
        "PodNotReady alerts carry no label 'service_name' (they carry alertname, deployment,"
    )


@pytest.mark.parametrize(
    ("alert", "labels", "reason"),
    [
        ("RequestErrorRate", {"service_name": "billing"}, "no service reports spans as 'billing'"),
        ("PodNotReady", {"deployment": "billing"}, "the shop has no Deployment 'billing'"),
        ("HPAMaxedOut", {"horizontalpodautoscaler": "quote"}, "no HorizontalPodAutoscaler 'quote'"),
        ("CostBudgetExceeded", {"namespace": "prod"}, "is not the scenario's namespace"),
        ("KafkaConsumerLag", {"consumer_group": "billing"}, "no Kafka consumer group 'billing'"),
        ("PodNotReady", {"severity": "critical"}, "have severity 'warning', not 'critical'"),
    ],
)
def test_expected_alert_label_values_must_exist(
    alert: str, labels: dict[str, str], reason: str
) -> None:
    d = doc(triggers={"alerts": [{"alertname": alert, "labels": labels}]})
    key = next(iter(labels))
    assert reason in problems(d)[f"spec.triggers.alerts[0].labels.{key}"]


def test_every_rule_declares_the_labels_its_alerts_carry() -> None:
    labels = {r.name: rule_label_names(r) for r in alert_rules("otel-demo")}
    assert {"service_name", "severity"} <= labels["RequestErrorRate"]
    assert {"deployment", "namespace"} <= labels["PodNotReady"]
    assert {"deployment", "container", "namespace"} <= labels["ContainerOOMKilled"]
    assert {"consumer_group", "group"} <= labels["KafkaConsumerLag"]
    assert "horizontalpodautoscaler" in labels["HPAMaxedOut"]
    assert "service_name" not in labels["PodNotReady"]


def test_the_shop_inventory_exists_in_the_twin() -> None:
    # Everything the validator accepts as existing must exist in the simulator's baseline.
    topology = build_topology(baseline_objects("otel-demo"), [])
    missing = [f"{k}/{n}" for k, n in shop_inventory().objects if f"{k}/{n}" not in topology]
    assert missing == []


def test_long_bad_values_are_quoted_as_excerpts_with_their_length() -> None:
    d = doc()
    d["spec"]["groundTruth"]["entities"][0]["name"] = "x" * 1_000_000
    d["spec"]["domain"] = "y" * 1_000_000
    found, listed = validate_document(d, SRC)
    assert found is None
    text = "\n".join(str(p) for p in listed)
    assert len(text) < 2000
    assert "(1000000 characters)" in text
