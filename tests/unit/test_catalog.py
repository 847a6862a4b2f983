"""Scenario validation names every problem by field path; the catalog selects scenarios for runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from itbench.core.catalog import (
    Catalog,
    CatalogError,
    Problem,
    SelectionError,
    UnknownScenarioError,
    check_catalog,
    validate_document,
)
from itbench.core.models import AgentLevel, Complexity, Domain, Scenario, ScenarioSelection

SRC = "scenarios/sre/x/scenario.yaml"


def doc(name: str = "checkout-image", **spec: Any) -> dict[str, Any]:
    """A valid SRE scenario document (Easy: 2 x 1 x 2 = 4), with spec fields overridden."""
    base: dict[str, Any] = {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": name},
        "spec": {
            "description": "checkout points at an image that does not exist",
            "domain": "SRE",
            "class": "CorruptImage",
            "environment": {"technologies": ["Kubernetes", "Go"]},
            "triggers": {
                "alerts": [{"alertname": "PodNotReady", "labels": {"deployment": "checkout"}}]
            },
            "faults": [{"id": "kubernetes.nonexistent-image", "args": {"workload": "checkout"}}],
            "groundTruth": {
                "entities": [
                    {"id": "c", "kind": "Deployment", "name": "checkout", "rootCause": True},
                    {"id": "p", "kind": "Pod", "name": "checkout", "aliases": ["Pod/checkout-*"]},
                ],
                "propagation": [{"source": "c", "target": "p"}],
                "mitigations": [
                    {
                        "description": "undo",
                        "steps": [
                            {"action": "rollout-undo", "kind": "Deployment", "name": "checkout"}
                        ],
                    }
                ],
            },
        },
    }
    base["spec"].update(spec)
    return base


def scenario(name: str, **spec: Any) -> Scenario:
    found, problems = validate_document(doc(name, **spec), name)
    assert problems == []
    assert found is not None
    return found


def paths(problems: list[Problem]) -> dict[str, str]:
    return {p.path: p.reason for p in problems}


def test_a_valid_document_yields_its_scenario_and_no_problems() -> None:
    found, problems = validate_document(doc(), SRC)
    assert problems == []
    assert found is not None and found.name == "checkout-image"


def test_missing_required_field_is_reported_at_its_path() -> None:
    d = doc()
    del d["spec"]["description"]
    found, problems = validate_document(d, SRC)
    assert found is None
    assert problems == [Problem(SRC, "spec.description", "required field is missing")]


def test_wrong_enum_value_names_allowed_values_and_the_bad_input() -> None:
    _, problems = validate_document(doc(domain="Finance"), SRC)
    assert paths(problems) == {
        "spec.domain": "Input should be 'SRE', 'CISO' or 'FinOps', got 'Finance'"
    }


def test_unknown_field_is_reported_with_a_spelling_hint() -> None:
    _, problems = validate_document(doc(faultz=[]), SRC)
    assert paths(problems) == {"spec.faultz": "unknown field (check spelling and camelCase)"}


def test_unknown_fault_id_is_reported_at_the_fault() -> None:
    d = doc(faults=[{"id": "kubernetes.nope", "args": {}}])
    _, problems = validate_document(d, SRC)
    assert [p.path for p in problems] == ["spec.faults[0].id"]
    assert "unknown fault id 'kubernetes.nope'" in problems[0].reason


def test_fault_args_are_checked_against_the_faults_own_schema() -> None:
    d = doc(
        faults=[{"id": "kubernetes.block-ingress", "args": {"workload": "cart", "port": 70000}}]
    )
    _, problems = validate_document(d, SRC)
    assert paths(problems) == {
        "spec.faults[0].args.port": "Input should be less than or equal to 65535"
    }
    d = doc(faults=[{"id": "kubernetes.block-ingress", "args": {"workload": "cart"}}])
    assert [p.path for p in validate_document(d, SRC)[1]] == ["spec.faults[0].args.port"]


def test_fault_arg_of_a_non_scalar_type_is_one_problem_not_one_per_union_member() -> None:
    d = doc()
    d["spec"]["faults"][0]["args"]["workload"] = ["a", "b"]
    _, problems = validate_document(d, SRC)
    assert len(problems) == 1
    assert problems[0].path == "spec.faults[0].args.workload"
    assert "valid integer" in problems[0].reason and "valid string" in problems[0].reason


def test_model_validator_messages_extend_the_field_path() -> None:
    d = doc()
    d["spec"]["groundTruth"]["propagation"] = [{"source": "c", "target": "ghost"}]
    _, problems = validate_document(d, SRC)
    assert [p.path for p in problems] == ["spec.groundTruth.propagation[0].target"]
    assert "'ghost' is not an entity id" in problems[0].reason


def test_sre_fault_scenario_needs_alerts_and_a_root_cause() -> None:
    d = doc(triggers={"alerts": []})
    d["spec"]["groundTruth"]["entities"][0]["rootCause"] = False
    _, problems = validate_document(d, SRC)
    assert set(paths(problems)) == {"spec.triggers.alerts", "spec.groundTruth.entities"}


def test_a_document_that_is_not_a_mapping_is_one_problem() -> None:
    assert validate_document(["a"], SRC) == (
        None,
        [Problem(SRC, "", "expected a Scenario object (a mapping), got list")],
    )
    assert validate_document(None, SRC)[1][0].reason.endswith("got nothing")


def test_wrong_kind_is_reported() -> None:
    d = doc()
    d["kind"] = "Scenaro"
    assert paths(validate_document(d, SRC)[1]) == {
        "kind": "Input should be 'Scenario', got 'Scenaro'"
    }


def test_duplicate_names_are_reported_at_the_later_source() -> None:
    a, b = scenario("same"), scenario("same")
    problems = check_catalog([("one.yaml", a), ("two.yaml", b), ("three.yaml", scenario("x"))])
    assert problems == [
        Problem(
            "two.yaml", "metadata.name", "duplicate scenario name 'same' (also defined in one.yaml)"
        )
    ]
    with pytest.raises(CatalogError, match="duplicate scenario name 'same'"):
        Catalog([a, b])


def _catalog() -> Catalog:
    hard = {"environment": {"technologies": ["Go", "nodejs", "Kubernetes", "Java", "Rust"]}}
    finops_spec = doc("cost", domain="FinOps", triggers={"alerts": []})["spec"]
    finops_spec["class"] = "CostAlertMisconfiguration"
    finops = Scenario.model_validate({**doc("cost"), "spec": finops_spec})
    control = scenario("control", control=True, faults=[], triggers={"alerts": []})
    return Catalog(
        [
            scenario("easy-a"),
            scenario("easy-b"),
            scenario("hard-a", **hard),
            scenario("other-class", **{"class": "PodFailure"}),
            finops,
            control,
        ]
    )


def test_catalog_looks_up_by_name_and_reports_complexity() -> None:
    cat = _catalog()
    assert len(cat) == 6 and "easy-a" in cat
    assert cat.names == sorted(cat.names)
    assert cat.get("hard-a").name == "hard-a"
    assert cat.complexity("hard-a")[0].value == "Hard"
    assert cat.complexity("cost") == (Complexity.EASY, None)
    with pytest.raises(UnknownScenarioError, match="unknown scenario: nope"):
        cat.get("nope")


def test_selecting_unknown_names_raises_naming_every_unknown_one() -> None:
    sel = ScenarioSelection(names=["easy-a", "ghost", "phantom"])
    with pytest.raises(UnknownScenarioError) as err:
        _catalog().select(sel)
    assert err.value.names == ["ghost", "phantom"]
    assert "unknown scenarios: ghost, phantom" in str(err.value)


def test_named_scenarios_the_agent_cannot_take_are_refused_with_the_reason() -> None:
    sel = ScenarioSelection(names=["hard-a", "cost"])
    with pytest.raises(SelectionError) as err:
        _catalog().select(sel, level=AgentLevel.BEGINNER, domain=Domain.SRE)
    assert "hard-a (Hard is above what a Beginner agent takes)" in str(err.value)
    assert "cost (domain FinOps, agent is SRE)" in str(err.value)


def test_selector_filters_by_domain_level_classes_and_keeps_controls() -> None:
    cat = _catalog()
    sel = ScenarioSelection.model_validate({"selector": {"domains": ["SRE"]}})
    assert [s.name for s in cat.select(sel)] == [
        "control",
        "easy-a",
        "easy-b",
        "hard-a",
        "other-class",
    ]
    beginner = cat.select(sel, level=AgentLevel.BEGINNER, classes=["CorruptImage"])
    assert [s.name for s in beginner] == ["control", "easy-a", "easy-b"]
    no_controls = ScenarioSelection.model_validate(
        {"selector": {"domains": ["SRE"], "complexities": ["Easy"], "includeControls": False}}
    )
    assert [s.name for s in cat.select(no_controls)] == ["easy-a", "easy-b", "other-class"]


def test_seeded_sample_is_deterministic_and_sized() -> None:
    cat = _catalog()
    sel = ScenarioSelection.model_validate(
        {"selector": {"domains": ["SRE"]}, "sample": {"size": 3, "seed": 7}}
    )
    first = [s.name for s in cat.select(sel)]
    assert first == [s.name for s in cat.select(sel)]
    assert len(first) == 3 and first == sorted(first)
    draws = {
        tuple(
            s.name
            for s in cat.select(
                ScenarioSelection.model_validate(
                    {"selector": {"domains": ["SRE"]}, "sample": {"size": 3, "seed": seed}}
                )
            )
        )
        for seed in range(20)
    }
    assert len(draws) > 1


def test_a_selector_that_matches_nothing_is_an_error() -> None:
    sel = ScenarioSelection.model_validate({"selector": {"domains": ["CISO"]}})
    with pytest.raises(SelectionError, match="matches no scenario"):
        _catalog().select(sel)


def test_catalog_documents_are_not_mutated_by_validation() -> None:
    d = doc()
    before = copy.deepcopy(d)
    validate_document(d, SRC)
    assert d == before


def test_status_of_a_cluster_object_is_ignored() -> None:
    d = doc()
    d["status"] = {"phase": "Ready", "kopf": {"progress": {}}}
    found, problems = validate_document(d, "scenario/checkout-image")
    assert problems == []
    assert found is not None and found.status is None
