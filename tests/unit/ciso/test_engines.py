"""The policy engines run in a child process: Rego with regorus, CEL policies with a CEL engine;
a policy that never finishes or crashes the engine costs one evaluation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from itbench.ciso.engines import EngineSandbox
from itbench.core.ciso.namespace import baseline_objects
from itbench.core.ciso.policies import BASELINE_SET


@pytest.fixture(scope="module")
def sandbox() -> Iterator[EngineSandbox]:
    box = EngineSandbox(timeout_seconds=10.0)
    yield box
    box.close()


def test_rego_evaluates_on_input(sandbox: EngineSandbox) -> None:
    module = "package cis\n\nviolations contains x.name if {\n  some x in input.items\n  x.bad\n}\n"
    answer = sandbox.call(
        {"op": "rego-eval", "module": module, "input": {"items": [{"name": "a", "bad": True}]}}
    )
    assert answer["ok"] is True
    assert answer["value"] == {"violations": ["a"]}


def test_rego_that_does_not_compile_names_the_problem(sandbox: EngineSandbox) -> None:
    answer = sandbox.call({"op": "rego-compile", "module": "package cis\nviolations[x] {"})
    assert answer["ok"] is False
    assert answer["error"]


def test_a_policy_that_never_finishes_is_stopped_and_the_engine_replaced() -> None:
    box = EngineSandbox(timeout_seconds=1.0)
    try:
        # Enumerating ten billion numbers takes far longer than the limit.
        module = "package cis\n\nn := count([x | some x in numbers.range(1, 10000000000)])\n"
        first = box.call({"op": "rego-eval", "module": module, "input": {}})
        assert first["ok"] is False
        assert first.get("timeout") or first.get("crashed") or "memory" in first["error"]
        again = box.call({"op": "rego-eval", "module": "package cis\n\nok := true\n", "input": {}})
        assert again["value"] == {"ok": True}
        assert box.restarts >= 1 or not first.get("timeout")
    finally:
        box.close()


def test_the_installed_policy_set_passes_the_hardened_namespace(sandbox: EngineSandbox) -> None:
    objects = baseline_objects()
    namespace = next(o for o in objects if o["kind"] == "Namespace")
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{d['metadata']['name']}-0", "namespace": "otel-demo"},
            "spec": d["spec"]["template"]["spec"],
        }
        for d in objects
        if d["kind"] == "Deployment"
    ]
    answer = sandbox.call(
        {"op": "cel-eval", "docs": list(BASELINE_SET), "objects": pods, "namespace": namespace}
    )
    assert answer["ok"] is True, answer
    results = {tuple(r[:2]) for r in answer["results"]}
    assert results and all(r[1] == "pass" for r in results)
    assert len({r[0] for r in results}) == len(pods)


def test_cel_that_does_not_compile_names_the_field(sandbox: EngineSandbox) -> None:
    doc = {
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "ValidatingPolicy",
        "metadata": {"name": "broken"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
            },
            "validations": [{"expression": "object.spec.(("}],
        },
    }
    answer = sandbox.call({"op": "cel-build", "docs": [doc]})
    assert answer["ok"] is False
    assert "ValidatingPolicy/broken: validations[0]" in answer["error"]


def test_pattern_style_kyverno_is_live_only(sandbox: EngineSandbox) -> None:
    doc = {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "disallow-host-network"},
        "spec": {
            "rules": [
                {
                    "name": "host-network",
                    "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "validate": {"pattern": {"spec": {"=(hostNetwork)": False}}},
                }
            ]
        },
    }
    answer = sandbox.call({"op": "cel-build", "docs": [doc]})
    assert answer["ok"] is False
    assert answer["liveOnly"] is True
    assert "pattern" in answer["error"]


def test_a_huge_result_is_refused_with_its_size(sandbox: EngineSandbox) -> None:
    module = (
        "package cis\n\n"
        'violations := {sprintf("Role/%d", [n]) | some n in numbers.range(1, 400000)}\n'
    )
    answer = sandbox.call({"op": "rego-eval", "module": module, "input": {}}, 30.0)
    assert answer["ok"] is False
    assert "more than the 4 MiB" in answer["error"]
    again = sandbox.call({"op": "rego-eval", "module": "package cis\n\nok := true\n", "input": {}})
    assert again["value"] == {"ok": True}
