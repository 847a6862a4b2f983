"""Templates: placeholders, parameters, seeded draws and the validation of every instance."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from itbench.core.catalog import Catalog, Variants, validate_template
from itbench.core.models import Scenario
from itbench.core.models.scenario import Split
from itbench.core.variants import (
    MAX_INSTANCES,
    PARAMETERS_ANNOTATION,
    PlaceholderError,
    Reference,
    choice_index,
    instance_seed,
    references,
    secret_seed,
)

SRC = "scenarios/sre/pinned/scenario.yaml"
WORKLOADS = ["cart", "checkout", "quote"]


def template(**parameters: Any) -> dict[str, Any]:
    """A valid template over the workload a nonexistent-node fault pins (3 instances)."""
    params = parameters or {
        "target": {
            "description": "The pinned Deployment.",
            "choices": list(WORKLOADS),
            "attributes": {"language": [".NET", "Go", "PHP"]},
        }
    }
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "pinned"},
        "spec": {
            "description": "${target} is pinned to a node that does not exist",
            "domain": "SRE",
            "class": "PodFault",
            "parameters": params,
            "environment": {"technologies": ["${target.language}", "Kubernetes"]},
            "triggers": {
                "alerts": [{"alertname": "PodNotReady", "labels": {"deployment": "${target}"}}]
            },
            "faults": [{"id": "kubernetes.nonexistent-node", "args": {"workload": "${target}"}}],
            "groundTruth": {
                "entities": [
                    {"id": "w", "kind": "Deployment", "name": "${target}", "rootCause": True}
                ],
                "mitigations": [
                    {
                        "description": "undo ${target}",
                        "steps": [
                            {"action": "rollout-undo", "kind": "Deployment", "name": "${target}"}
                        ],
                    }
                ],
            },
        },
    }


def variants_of(doc: dict[str, Any]) -> Variants:
    found, problems = validate_template(doc, SRC)
    assert problems == [], [str(p) for p in problems]
    assert found is not None
    return found


def problems_of(doc: dict[str, Any]) -> dict[str, str]:
    found, problems = validate_template(doc, SRC)
    assert found is None
    return {p.path: p.reason for p in problems}


def test_every_choice_becomes_a_validated_instance_in_declared_order() -> None:
    variants = variants_of(template())
    assert [i.values for i in variants.instances] == [{"target": w} for w in WORKLOADS]
    scenarios = [i.scenario for i in variants.instances]
    assert [s.spec.faults[0].args["workload"] for s in scenarios] == WORKLOADS
    assert [s.spec.environment.technologies[0] for s in scenarios] == [".NET", "Go", "PHP"]
    assert scenarios[1].spec.description == "checkout is pinned to a node that does not exist"
    assert all(s.spec.parameters == {} for s in scenarios)
    assert scenarios[2].metadata.annotations[PARAMETERS_ANNOTATION] == '{"target":"quote"}'
    assert variants.scenario is scenarios[0]


def test_the_same_seed_draws_the_same_instance_and_seeds_spread_over_every_choice() -> None:
    variants = variants_of(template())
    assert variants.instance(7) == variants.instance(7)
    drawn = {variants.instance(seed).values["target"] for seed in range(64)}
    assert drawn == set(WORKLOADS)


def test_the_draw_follows_the_documented_formula() -> None:
    digest = hashlib.sha256(b"itbench.io/variant/pinned/42/target").digest()
    assert choice_index("pinned", 42, "target", 3) == int.from_bytes(digest[:8], "big") % 3
    variants = variants_of(template())
    assert variants.instance(42).values == {
        "target": WORKLOADS[choice_index("pinned", 42, "target", 3)]
    }


def test_a_whole_value_placeholder_keeps_an_integer_type() -> None:
    doc = template(
        port={"description": "Probe port.", "range": {"min": 990, "max": 999, "step": 9}}
    )
    doc["spec"]["description"] = "readiness probe on port ${port}"
    doc["spec"]["faults"] = [
        {"id": "kubernetes.bad-readiness-probe", "args": {"workload": "cart", "port": "${port}"}}
    ]
    doc["spec"]["triggers"]["alerts"][0]["labels"] = {"deployment": "cart"}
    doc["spec"]["environment"]["technologies"] = [".NET", "Kubernetes"]
    for entity in doc["spec"]["groundTruth"]["entities"]:
        entity["name"] = "cart"
    doc["spec"]["groundTruth"]["mitigations"][0]["steps"][0]["name"] = "cart"
    doc["spec"]["groundTruth"]["mitigations"][0]["description"] = "undo cart"
    doc["spec"]["triggers"]["timeoutSeconds"] = "${port}"  # an integer field
    variants = variants_of(doc)
    assert [i.values for i in variants.instances] == [{"port": 990}, {"port": 999}]
    spec = variants.instances[1].scenario.spec
    assert spec.faults[0].args["port"] == 999
    assert spec.triggers.timeout_seconds == 999 and isinstance(spec.triggers.timeout_seconds, int)
    assert spec.description == "readiness probe on port 999"


def test_a_doubled_dollar_is_a_literal_placeholder_opening() -> None:
    doc = template()
    doc["spec"]["title"] = "costs $${target} in $5"
    assert variants_of(doc).scenario.spec.title == "costs ${target} in $5"


def test_placeholder_grammar() -> None:
    assert references("a ${x} b ${y.z} $${w}") == [Reference("x"), Reference("y", "z")]
    for bad in ("${}", "${X}", "${a.b.c}", "${a-b}", "${unclosed"):
        with pytest.raises(PlaceholderError):
            references(bad)


def test_a_choice_that_breaks_the_scenario_is_named_with_its_field() -> None:
    doc = template()
    doc["spec"]["parameters"]["target"]["choices"] = ["cart", "nonexistent"]
    doc["spec"]["parameters"]["target"]["attributes"] = {"language": [".NET", "Go"]}
    problems = problems_of(doc)
    assert problems["spec.faults[0].args.workload"].startswith(
        "with target=nonexistent: the shop has no Deployment 'nonexistent'"
    )
    assert problems["spec.triggers.alerts[0].labels.deployment"].startswith(
        "with target=nonexistent:"
    )


def test_a_problem_of_every_instance_is_reported_once_without_values() -> None:
    doc = template()
    doc["spec"]["class"] = ""
    assert problems_of(doc) == {"spec.class": "String should have at least 1 character"}


@pytest.mark.parametrize(
    ("where", "value", "path", "reason"),
    [
        ("description", "${nobody}", "spec.description", "${nobody} names no parameter"),
        ("title", "${target.colour}", "spec.title", "parameter target has no attribute colour"),
        ("title", "${Target}", "spec.title", "malformed placeholder"),
        ("class", "Pod${target}", "spec.class", "identifies the scenario"),
    ],
)
def test_placeholder_problems_name_the_field(
    where: str, value: str, path: str, reason: str
) -> None:
    doc = template()
    doc["spec"][where] = value
    assert reason in problems_of(doc)[path]


def test_placeholders_in_metadata_or_keys_are_refused() -> None:
    doc = template()
    doc["metadata"]["labels"] = {"team": "${target}"}
    assert "only under spec" in problems_of(doc)["metadata.labels.team"]
    doc = template()
    doc["spec"]["faults"][0]["args"] = {"${target}": "cart", "workload": "${target}"}
    assert "not allowed in keys" in problems_of(doc)["spec.faults[0].args.${target}"]


def test_a_declared_parameter_must_be_used() -> None:
    doc = template()
    doc["spec"]["parameters"]["spare"] = {"description": "unused", "choices": [1, 2]}
    assert problems_of(doc) == {"spec.parameters.spare": "declared but never used as ${spare}"}


@pytest.mark.parametrize(
    ("declaration", "path", "reason"),
    [
        ({"description": "x"}, "spec.parameters.target.choices", "either choices or range"),
        (
            {"description": "x", "choices": [1], "range": {"min": 1, "max": 2}},
            "spec.parameters.target.choices",
            "either choices or range",
        ),
        ({"description": "x", "choices": ["a", "a"]}, "spec.parameters.target.choices[1]", "twice"),
        (
            {"description": "x", "choices": ["a", "b"], "attributes": {"lang": ["Go"]}},
            "spec.parameters.target.attributes.lang",
            "1 values for 2 choices",
        ),
        (
            {"description": "x", "range": {"min": 0, "max": 10_000}},
            "spec.parameters.target.range",
            "10001 values, at most 256",
        ),
        (
            {"description": "x", "range": {"min": 5, "max": 1}},
            "spec.parameters.target.range.max",
            "below min",
        ),
    ],
)
def test_parameter_declarations_are_checked(
    declaration: dict[str, Any], path: str, reason: str
) -> None:
    doc = template()
    doc["spec"]["parameters"]["target"] = declaration
    assert reason in problems_of(doc)[path]


def test_the_instances_of_a_template_are_bounded() -> None:
    doc = template()
    for n in range(5):
        doc["spec"]["parameters"][f"p{n}"] = {"description": "x", "choices": list(range(4))}
        doc["spec"]["title"] = doc["spec"].get("title", "") + f"${{p{n}}}"
    assert MAX_INSTANCES < 3 * 4**5
    assert "3072 instances, at most 256" in problems_of(doc)["spec.parameters"]


def test_instances_must_share_their_complexity() -> None:
    doc = template()
    # cart and checkout share Go with the list (4 technologies, Easy); quote adds Rust (Medium).
    doc["spec"]["parameters"]["target"]["attributes"] = {"language": ["Go", "Go", "Rust"]}
    doc["spec"]["environment"]["technologies"] = ["${target.language}", "Go", "Java", "PHP", "C++"]
    assert "differ in complexity" in problems_of(doc)["spec.parameters"]


def test_a_file_without_parameters_is_its_own_single_instance() -> None:
    plain = template()
    del plain["spec"]["parameters"]
    text = json.dumps(plain).replace("${target.language}", "Go").replace("${target}", "cart")
    variants = variants_of(json.loads(text))
    assert len(variants.instances) == 1
    assert variants.instance(1) == variants.instance(2) == variants.instances[0]
    assert variants.instances[0].values == {}


def test_splits_draw_from_the_public_seed_or_from_the_secret() -> None:
    assert instance_seed(Split.DEV, seed=42, scenario="pinned", attempt=3) == 42
    secret = "correct horse battery staple"
    expected = hmac.new(secret.encode(), b"pinned/3", hashlib.sha256).digest()
    drawn = instance_seed(Split.TEST, seed=42, scenario="pinned", attempt=3, secret=secret)
    assert drawn == int.from_bytes(expected[:8], "big") == secret_seed(secret, "pinned", 3)
    assert secret_seed(secret, "pinned", 4) != drawn
    assert secret_seed(secret + "!", "pinned", 3) != drawn
    with pytest.raises(ValueError, match="needs a seed secret"):
        instance_seed(Split.TEST, seed=42, scenario="pinned", attempt=0)


def test_the_catalog_draws_instances_and_its_digest_covers_every_file() -> None:
    variants = variants_of(template())
    catalog = Catalog([variants])
    assert catalog.instance("pinned", 5) == variants.instance(5)
    same = Catalog([variants_of(template())])
    assert catalog.digest == same.digest and catalog.digest.startswith("sha256:")
    changed = template()
    changed["spec"]["title"] = "another title"
    assert Catalog([variants_of(changed)]).digest != catalog.digest


def test_a_catalog_of_plain_scenarios_records_each_as_one_instance() -> None:
    scenario = variants_of(template()).instances[1].scenario
    catalog = Catalog([scenario])
    assert isinstance(catalog.get("pinned"), Scenario)
    assert catalog.variants("pinned").instances[0].scenario == scenario
