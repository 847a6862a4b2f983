"""Generated CRDs are valid, structural, described, and their CEL rules say what the models say."""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from itbench.core.crds import (
    EDITOR_SCHEMAS,
    KINDS,
    all_crds,
    all_editor_schemas,
    cel_rules,
    structural_problems,
    structural_schema,
)
from itbench.core.models import (
    AgentSubmission,
    BenchmarkRun,
    DiagnosisReport,
    MitigationReport,
    PostureReport,
    Scenario,
    Trial,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "scenarios").glob("*/*/scenario.yaml"))
CRDS = all_crds()


def crd_of(kind: str) -> dict[str, Any]:
    return next(c for c in CRDS.values() if c["spec"]["names"]["kind"] == kind)


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = crd_of(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("name", sorted(CRDS))
def test_crd_is_a_valid_apiextensions_v1_object(name: str) -> None:
    crd = CRDS[name]
    assert kubernetes_validate.validate(crd, "1.32", strict=True) == "1.32"
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert name == f"itbench.io_{crd['spec']['names']['plural']}.yaml"


def test_kubernetes_validate_does_reject_a_broken_crd() -> None:
    broken = copy.deepcopy(crd_of("Scenario"))
    broken["spec"]["versions"][0]["servedd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.32", strict=True)


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_schema_is_structural_and_every_property_is_described(kind: str) -> None:
    schema = schema_of(kind)
    assert structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert "x-kubernetes-preserve-unknown-fields" not in str(schema)
    assert "$ref" not in str(schema)


def test_structural_check_catches_what_kubernetes_rejects() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"description": "a", "$ref": "#/x"},
            "b": {"description": "b", "anyOf": [{"type": "string"}, {"type": "integer"}]},
            "c": {"type": "array", "description": "c"},
            "d": {"type": "string"},
        },
    }
    problems = structural_problems(bad)
    assert "a: uses $ref" in problems
    assert "a: has no type" in problems
    assert "b: uses anyOf" in problems
    assert "c: array without items" in problems
    assert "d: has no description" in problems


def test_structural_check_holds_metadata_to_kube_apiservers_rule() -> None:
    # kube-apiserver: "properties[metadata]: Forbidden: must not specify anything other than
    # name and generateName" (a description included).
    def root(metadata: dict[str, object]) -> dict[str, object]:
        return {"type": "object", "properties": {"metadata": metadata}}

    assert structural_problems(root({"type": "object"})) == []
    assert (
        structural_problems(
            root({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}})
        )
        == []
    )
    assert structural_problems(root({"type": "object", "description": "Standard."})) == [
        "metadata: must not specify description"
    ]
    assert structural_problems(
        root({"type": "object", "properties": {"labels": {"type": "object"}}})
    ) == ["metadata.labels: must not be specified (only name and generateName)"]
    nested = {"type": "object", "description": "n", "properties": {"metadata": {"type": "string"}}}
    assert structural_problems({"type": "object", "properties": {"spec": nested}}) == [
        "spec.metadata: has no description"
    ]


def test_int_or_string_fields_and_dicts_map_to_kubernetes_forms() -> None:
    fault = schema_of("Scenario")["properties"]["spec"]["properties"]["faults"]["items"]
    assert fault["properties"]["args"]["type"] == "object"
    assert fault["properties"]["args"]["additionalProperties"] == {
        "x-kubernetes-int-or-string": True
    }
    run = schema_of("BenchmarkRun")["properties"]["spec"]["properties"]
    assert run["trialsPerScenario"]["default"] == 3
    assert run["timeouts"]["default"] == {"agentSeconds": 900, "recoverySeconds": 600}
    summary = schema_of("BenchmarkRun")["properties"]["status"]["properties"]["summary"]
    assert summary["properties"]["diagnosisPassAt1"]["type"] == "number"


def test_exclusive_bounds_use_openapi_v3_booleans() -> None:
    finops = schema_of("Scenario")["properties"]["spec"]["properties"]["groundTruth"]
    cpu = finops["properties"]["finops"]["properties"]["cpuCores"]
    assert (cpu["minimum"], cpu["exclusiveMinimum"]) == (0, True)


@pytest.mark.parametrize(
    ("kind", "scope", "short", "columns"),
    [
        ("Scenario", "Cluster", ["scn"], ["Domain", "Class", "Complexity", "Phase", "Age"]),
        (
            "AgentSubmission",
            "Namespaced",
            ["agsub"],
            ["Type", "Level", "Ready", "Best diagnosis", "Best mitigation", "Age"],
        ),
        (
            "BenchmarkRun",
            "Namespaced",
            ["bench", "br"],
            [
                "Agent",
                "Phase",
                "Progress",
                "Diagnosis pass@1",
                "Mitigation pass@1",
                "Age",
                "Domain",
                "Errored",
                "FL-NTAM",
                "Cost proximity",
            ],
        ),
        (
            "Trial",
            "Namespaced",
            ["trl"],
            [
                "Scenario",
                "Attempt",
                "Phase",
                "Reason",
                "Diagnosis",
                "Mitigation",
                "Age",
                "FinOps diagnosis",
                "FinOps mitigation",
            ],
        ),
    ],
)
def test_names_scope_columns_and_status_subresource(
    kind: str, scope: str, short: list[str], columns: list[str]
) -> None:
    crd = crd_of(kind)
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["scope"] == scope
    assert crd["spec"]["names"]["shortNames"] == short
    assert crd["spec"]["names"]["categories"] == ["itbench"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == columns
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_every_printer_column_path_exists_in_the_schema(kind: str) -> None:
    schema = schema_of(kind)
    for column in crd_of(kind)["spec"]["versions"][0]["additionalPrinterColumns"]:
        parts = column["jsonPath"].strip(".").split(".")
        if parts[0] == "metadata":
            assert (parts, column["type"]) == (["metadata", "creationTimestamp"], "date")
            continue
        node = schema
        for part in parts:
            node = node["properties"][part]
        assert node["type"] == column["type"]


def _models_under(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    if model in seen:
        return
    seen.add(model)
    yield model
    for info in model.model_fields.values():
        stack: list[Any] = [info.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                yield from _models_under(tp, seen)
            stack.extend(typing.get_args(tp))
            if isinstance(tp, types.UnionType):
                stack.extend(tp.__args__)


API_MODELS = [
    m
    for root in (Scenario, AgentSubmission, BenchmarkRun, Trial)
    for m in _models_under(root, set())
]


@pytest.mark.parametrize("model", sorted(set(API_MODELS), key=lambda m: m.__name__))
def test_every_model_field_has_a_description(model: type[BaseModel]) -> None:
    missing = [n for n, f in model.model_fields.items() if not (f.description or "").strip()]
    assert missing == []
    assert (model.__doc__ or "").strip()


def _strict(node: Any) -> Any:
    """The CRD schema as a JSON Schema that also rejects fields the API server would prune."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        if out.pop("x-kubernetes-int-or-string", False):
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def test_there_are_example_scenarios() -> None:
    names = {p.parent.name for p in EXAMPLES}
    assert {"cart-flagd-failure", "checkout-nonexistent-image"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_scenario_validates_against_the_generated_crd_schema(path: Path) -> None:
    document = _load(path)
    validator = jsonschema.Draft4Validator(_strict(schema_of("Scenario")))
    assert [e.message for e in validator.iter_errors(document)] == []
    # The same document also passes the model, so schema and model agree on it.
    assert Scenario.model_validate(document).name == document["metadata"]["name"]


def test_crd_schema_rejects_what_the_model_rejects() -> None:
    document = _load(ROOT / "scenarios/sre/checkout-nonexistent-image/scenario.yaml")
    validator = jsonschema.Draft4Validator(_strict(schema_of("Scenario")))
    bad_enum = copy.deepcopy(document)
    bad_enum["spec"]["domain"] = "Finance"
    bad_field = copy.deepcopy(document)
    bad_field["spec"]["faultz"] = []
    bad_bound = copy.deepcopy(document)
    bad_bound["spec"]["triggers"]["timeoutSeconds"] = 0
    for bad in (bad_enum, bad_field, bad_bound):
        assert list(validator.iter_errors(bad)) != []


def test_editor_schema_validates_example_scenarios_and_rejects_typos() -> None:
    schema = all_editor_schemas()["scenario.schema.json"]
    validator = jsonschema.Draft202012Validator(schema)
    for path in EXAMPLES:
        assert [e.message for e in validator.iter_errors(_load(path))] == []
    typo = _load(EXAMPLES[0])
    typo["spec"]["descripton"] = "x"
    assert any("descripton" in e.message for e in validator.iter_errors(typo))


# CEL: every rule compiles, and evaluates as the API server would on sample objects.

CEL = celpy.Environment()


def evaluate(rule: str, self_value: Any, old_value: Any = None) -> bool:
    activation = {"self": celpy.json_to_cel(self_value)}
    if old_value is not None:
        activation["oldSelf"] = celpy.json_to_cel(old_value)
    return bool(CEL.program(CEL.compile(rule)).evaluate(activation))


def rule_at(kind: str, path: str, index: int = 0) -> str:
    rules = [r for p, r in cel_rules(crd_of(kind)) if p == path]
    return str(rules[index]["rule"])


@pytest.mark.parametrize("name", sorted(CRDS))
def test_every_cel_rule_compiles_and_has_a_message(name: str) -> None:
    for _, rule in cel_rules(CRDS[name]):
        CEL.compile(rule["rule"])
        assert rule["message"]


def test_run_selects_exactly_one_of_names_or_selector() -> None:
    rule = rule_at("BenchmarkRun", "spec.scenarios")
    assert evaluate(rule, {"names": ["a"]})
    assert evaluate(rule, {"names": [], "selector": {}})
    assert not evaluate(rule, {"names": ["a"], "selector": {}})
    assert not evaluate(rule, {"names": []})


def test_cancel_cannot_go_back_to_false() -> None:
    rule = rule_at("BenchmarkRun", "spec.cancel")
    assert evaluate(rule, True, False)
    assert evaluate(rule, False, False)
    assert evaluate(rule, True, True)
    assert not evaluate(rule, False, True)


def _run(phase: str | None = None, **spec: Any) -> dict[str, Any]:
    run = BenchmarkRun.model_validate(
        {
            "metadata": {"name": "r", "namespace": "n"},
            "spec": {"agentRef": {"name": "a"}, "scenarios": {"names": ["s"]}, **spec},
        }
    ).wire()
    if phase is not None:
        run["status"] = {"phase": phase}
    return run


def test_run_spec_is_frozen_once_started_except_cancel() -> None:
    rule = rule_at("BenchmarkRun", "")
    running = _run("Running")
    assert evaluate(rule, _run("Running", trialsPerScenario=3), running)
    assert evaluate(rule, _run("Running", cancel=True), running)
    assert not evaluate(rule, _run("Running", trialsPerScenario=10), running)
    assert not evaluate(rule, _run("Running", scenarios={"names": ["other"]}), running)
    assert not evaluate(rule, _run("Running", timeouts={"agentSeconds": 5}), running)
    # Before the run starts (no status, or Pending) the spec may change.
    assert evaluate(rule, _run(trialsPerScenario=10), _run())
    assert evaluate(rule, _run("Pending", trialsPerScenario=10), _run("Pending"))
    # An Invalid run that never started may be fixed in place (its message says how) ...
    assert evaluate(rule, _run("Invalid", agentRef={"name": "b"}), _run("Invalid"))
    # ... but not one that ran trials before it became Invalid.
    started = _run("Invalid")
    started["status"]["startedAt"] = "2026-01-01T00:00:00Z"
    assert not evaluate(rule, _run("Invalid", agentRef={"name": "b"}), started)


def test_agent_runtime_is_exactly_one_of_image_external_builtin() -> None:
    rule = rule_at("AgentSubmission", "spec.runtime")
    assert evaluate(rule, {"image": {"image": "x"}})
    assert evaluate(rule, {"builtin": {"name": "oracle"}})
    assert not evaluate(rule, {})
    assert not evaluate(rule, {"image": {"image": "x"}, "external": {}})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_scenarios_pass_the_scenario_cel_rules(path: Path) -> None:
    spec = _load(path)["spec"]
    for index in range(2):
        assert evaluate(rule_at("Scenario", "spec", index), spec)


def test_scenario_cel_rules_refuse_a_control_with_faults_and_a_fault_scenario_without() -> None:
    control_with_fault = {"control": True, "domain": "SRE", "faults": [{"id": "x"}]}
    assert not evaluate(rule_at("Scenario", "spec", 0), control_with_fault)
    assert not evaluate(rule_at("Scenario", "spec", 1), {"domain": "SRE", "faults": []})
    assert evaluate(rule_at("Scenario", "spec", 1), {"domain": "CISO", "faults": []})


def test_editor_schemas_cover_every_kind_and_agent_report() -> None:
    schemas = all_editor_schemas()
    assert set(schemas) == {
        "scenario.schema.json",
        "agentsubmission.schema.json",
        "benchmarkrun.schema.json",
        "trial.schema.json",
        "diagnosis-report.schema.json",
        "mitigation-report.schema.json",
        "posture-report.schema.json",
    }
    report = DiagnosisReport.model_validate(
        {"entities": [{"kind": "Deployment", "name": "cart", "rootCause": True}]}
    ).wire()
    validator = jsonschema.Draft202012Validator(schemas["diagnosis-report.schema.json"])
    assert list(validator.iter_errors(report)) == []
    assert list(validator.iter_errors({"entities": [{"kind": "Planet", "name": "x"}]})) != []
    assert MitigationReport.model_json_schema()["title"] == "MitigationReport"
    assert PostureReport.__name__ in {m.__name__ for _, m in EDITOR_SCHEMAS}
    assert "status" in structural_schema(Trial)["properties"]


# Images and quantities: one grammar, in the CRD (pattern) and in the model the operator parses.

IMAGES_OK = [
    "ubuntu",
    "ghcr.io/org/agent:1.0",
    "localhost:5000/team/agent",
    "[::1]:5000/a/b:c",
    "registry.example.org/a__b/c-d.e@sha256:" + "0" * 64,
]
IMAGES_BAD = ["", "Org/UPPER", "a:b:c", "-leading", "trailing/", "with space", "a:", "a@sha256:12"]
QUANTITIES_OK = ["1", "500m", "1.5", "1Gi", "2e3", ".5", "+1k", "100n"]
QUANTITIES_BAD = ["", "-1", "1.5.5", "1Gb", "one", "1 Gi", "0x10"]


def _image_submission(image: str, cpu: str | None = None) -> dict[str, Any]:
    runtime: dict[str, Any] = {"image": image}
    if cpu is not None:
        runtime["resources"] = {"requests": {"cpu": cpu}}
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "AgentSubmission",
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"agentName": "a", "type": "SRE", "runtime": {"image": runtime}},
    }


def _model_accepts(document: dict[str, Any]) -> bool:
    try:
        AgentSubmission.model_validate(document)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("image", "cpu", "ok"),
    [(i, None, True) for i in IMAGES_OK]
    + [(i, None, False) for i in IMAGES_BAD]
    + [("ubuntu", q, True) for q in QUANTITIES_OK]
    + [("ubuntu", q, False) for q in QUANTITIES_BAD],
)
def test_crd_schema_and_model_agree_on_images_and_quantities(
    image: str, cpu: str | None, ok: bool
) -> None:
    document = _image_submission(image, cpu)
    validator = jsonschema.Draft4Validator(_strict(schema_of("AgentSubmission")))
    assert (list(validator.iter_errors(document)) == []) is ok
    assert _model_accepts(document) is ok


def test_image_and_quantity_patterns_in_the_crd_are_the_models() -> None:
    from itbench.core.models.agent_submission import IMAGE_REFERENCE, QUANTITY

    image = schema_of("AgentSubmission")["properties"]["spec"]["properties"]["runtime"][
        "properties"
    ]["image"]["properties"]
    assert image["image"]["pattern"] == IMAGE_REFERENCE
    cpu = image["resources"]["properties"]["requests"]["properties"]["cpu"]
    assert (cpu["type"], cpu["pattern"]) == ("string", QUANTITY)
