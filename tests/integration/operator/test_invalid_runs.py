"""Invalid BenchmarkRuns end in a clear condition and one Event, never in a crash loop."""

from __future__ import annotations

from typing import Any

import pytest
from operator_lab import NS, Lab, until

pytestmark = pytest.mark.asyncio


def _run(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "agentRef": {"name": "oracle"},
        "scenarios": {"names": ["cart-flagd-failure"]},
    }
    body.update(spec)
    return {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


ORACLE = {
    "apiVersion": "itbench.io/v1alpha1",
    "kind": "AgentSubmission",
    "metadata": {"name": "oracle", "namespace": NS},
    "spec": {"agentName": "oracle", "type": "SRE", "runtime": {"builtin": {"name": "oracle"}}},
}


@pytest.mark.parametrize(
    ("spec", "reason", "needle"),
    [
        (
            {"scenarios": {"selector": {"domains": ["Astrology"]}}},
            "InvalidSpec",
            "spec.scenarios.selector.domains[0]",
        ),
        (
            {"scenarios": {"selector": {"classes": ["NoSuchClass"]}}},
            "ScenarioSelection",
            "matches no scenario",
        ),
        ({"scenarios": {"names": ["no-such-scenario"]}}, "ScenarioSelection", "no-such-scenario"),
        ({"agentRef": {"name": "ghost"}}, "AgentNotFound", "default/ghost"),
        ({"trialsPerScenario": 1000}, "InvalidSpec", "spec.trialsPerScenario"),
    ],
    ids=[
        "bad-selector",
        "selector-matches-nothing",
        "unknown-scenario",
        "unknown-agent",
        "trials-out-of-range",
    ],
)
async def test_invalid_run_gets_condition_and_one_event(
    lab: Lab, spec: dict[str, Any], reason: str, needle: str
) -> None:
    handle = await lab.start()
    lab.cluster.apply_scenarios("cart-flagd-failure")
    lab.cluster.apply(ORACLE)
    await until(
        lambda: ((lab.cluster.get("agentsubmissions", "oracle") or {}).get("status") or {}).get(
            "ready"
        ),
        what="the agent Ready",
    )
    lab.cluster.apply(_run("bad", **spec))

    def status() -> dict[str, Any]:
        return (lab.cluster.get("benchmarkruns", "bad") or {}).get("status") or {}

    await until(lambda: status().get("phase") == "Invalid", what="phase Invalid")
    valid = next(c for c in status()["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False" and valid["reason"] == reason
    assert needle in valid["message"]
    # Many reconcile ticks later: still one Event, no trial, no handler error.
    registry = handle.runtime.metrics.registry
    kind = {"kind": "BenchmarkRun"}

    def reconciles() -> float:
        count = registry.get_sample_value("itbench_operator_reconcile_duration_seconds_count", kind)
        return count or 0.0

    seen = reconciles()
    await until(lambda: reconciles() >= seen + 10, what="ten more reconciles")
    events = [e for e in lab.cluster.events("bad") if e["reason"] == reason]
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert lab.cluster.objects("trials") == []
    assert not registry.get_sample_value("itbench_operator_reconcile_errors_total", kind)
