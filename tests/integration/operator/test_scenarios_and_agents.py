"""Scenario and AgentSubmission handlers: validation to a clear status, condition and Event."""

from __future__ import annotations

import pytest
from operator_lab import NS, Lab, until

pytestmark = pytest.mark.asyncio


def _agent(name: str, runtime: dict[str, object], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "AgentSubmission",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"agentName": name, "type": "SRE", "runtime": runtime, **spec},
    }


def _phase(lab: Lab, plural: str, name: str) -> str | None:
    obj = lab.cluster.get(plural, name)
    return ((obj or {}).get("status") or {}).get("phase")


async def test_applied_catalog_scenarios_become_ready_with_complexity(lab: Lab) -> None:
    await lab.start()
    lab.cluster.apply_scenarios("cart-flagd-failure", "no-fault-control")
    await until(
        lambda: (
            _phase(lab, "scenarios", "cart-flagd-failure") == "Ready"
            and _phase(lab, "scenarios", "no-fault-control") == "Ready"
        ),
        what="scenarios Ready",
    )
    status = lab.cluster.get("scenarios", "cart-flagd-failure")["status"]  # type: ignore[index]
    assert status["complexity"] in ("Easy", "Medium", "Hard")
    assert status["complexityScore"] > 0
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "Validated"
    assert "kopf" not in status
    table = lab.cluster.kubectl("get", "scenarios")
    row = next(line for line in table.splitlines() if line.startswith("cart-flagd-failure"))
    assert row.split()[1:4] == ["SRE", "ServiceFailure", status["complexity"]]


async def test_invalid_scenario_is_marked_invalid_with_field_paths_and_an_event(lab: Lab) -> None:
    await lab.start()
    lab.cluster.apply(
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "broken"},
            "spec": {
                "description": "a fault with a bad argument",
                "domain": "SRE",
                "class": "PodFault",
                "faults": [{"id": "no-such-fault"}],
                "triggers": {"alerts": [{"alertname": "X"}]},
            },
        }
    )
    await until(lambda: _phase(lab, "scenarios", "broken") == "Invalid", what="Invalid")
    status = lab.cluster.get("scenarios", "broken")["status"]  # type: ignore[index]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "spec.faults[0]" in ready["message"]
    events = await until(lambda: lab.cluster.events("broken", "default"), what="an Event")
    assert events[0]["type"] == "Warning" and "spec.faults[0]" in events[0]["message"]


async def test_builtin_agent_is_ready_and_image_agent_waits_for_its_secret(lab: Lab) -> None:
    await lab.start()
    lab.cluster.apply(_agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        _agent(
            "boxed",
            {"image": {"image": "example.org/agent:1", "credentialsSecretRef": {"name": "llm"}}},
        )
    )
    await until(lambda: _phase(lab, "agentsubmissions", "oracle") == "Ready", what="Ready")
    await until(lambda: _phase(lab, "agentsubmissions", "boxed") == "Invalid", what="Invalid")
    boxed = lab.cluster.get("agentsubmissions", "boxed")["status"]  # type: ignore[index]
    ready = next(c for c in boxed["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "CredentialsSecretMissing" and "default/llm" in ready["message"]
    lab.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm", "namespace": NS},
            "stringData": {"OPENAI_API_KEY": "x"},
        }
    )
    await until(lambda: _phase(lab, "agentsubmissions", "boxed") == "Ready", what="Ready")
    reasons = [e["reason"] for e in lab.cluster.events("boxed")]
    assert reasons == ["CredentialsSecretMissing", "Validated"]


async def test_agent_with_two_runtimes_is_invalid_with_the_field_path(lab: Lab) -> None:
    await lab.start()
    lab.cluster.apply(
        _agent("twice", {"builtin": {"name": "oracle"}, "external": {"pollIntervalSeconds": 5}})
    )
    await until(lambda: _phase(lab, "agentsubmissions", "twice") == "Invalid", what="Invalid")
    status = lab.cluster.get("agentsubmissions", "twice")["status"]  # type: ignore[index]
    message = status["conditions"][0]["message"]
    assert "spec.runtime" in message and "exactly one" in message
