"""The CrewAI SRE baseline, offline with scripted models, through the real gateway: it diagnoses
and mitigates a scenario and is scored; reflection corrects malformed queries and commands and
feeds execution errors back; guardrail refusals are handled; the token budget holds; claims
without action and peeks at the ground truth earn nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from itbench.client import Domain
from itbench.core.models.trial import TrialPhase
from tests.integration.agents.crew_harness import (
    CrewRun,
    action,
    final,
    offline_crew,
    recorded,
    run_crew,
    skip_without_crewai,
)

skip_without_crewai()

__all__ = ["offline_crew"]

CART_DIAGNOSIS = {
    "entities": [
        {
            "kind": "Deployment",
            "name": "cart",
            "root_cause": True,
            "category": "FeatureFlag",
            "condition": "cartFailure on",
        },
        {"kind": "Deployment", "name": "checkout", "condition": "PlaceOrder fails"},
    ],
    "propagation_chain": [
        {"source": "Deployment/cart", "target": "Deployment/checkout", "effect": "errors"}
    ],
    "reasoning": "the flag is on",
}
CART_FIX = [
    action("set_feature_flag", flag="cartFailure", variant="off"),
    action("wait", seconds=300),
    action("submit_mitigation", actions=["cartFailure off"], resolved=True),
    final("fixed"),
]


def sre(tmp_path: Path, reasoning: list[str], tool: list[str], **kw: object) -> CrewRun:
    return run_crew(
        kw.pop("scenario", "cart-flagd-failure"),  # type: ignore[arg-type]
        reasoning,
        tool,
        crew="agents.crewai_sre.crew",
        domain=Domain.SRE,
        steps_path=tmp_path / "steps.jsonl",
        **kw,  # type: ignore[arg-type]
    )


def seen(prompt: list[dict[str, object]]) -> str:
    """Everything a model was shown in one call."""
    return "\n".join(str(m.get("content", "")) for m in prompt)


def results(run: CrewRun, tool: str) -> list[str]:
    return [s.text for s in run.steps if s.kind.value == "tool-result" and s.tool == tool]


@pytest.mark.slow
def test_the_sre_crew_diagnoses_and_mitigates_a_scenario_through_the_gateway_and_is_scored(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning, tool = recorded("crewai_sre_cart.yaml")
    run = sre(tmp_path, reasoning, tool)
    status = run.status
    assert status.phase == TrialPhase.SUCCEEDED, f"{status.reason}: {status.message}"
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0
    scores = status.scores
    assert scores is not None and scores.diagnosis is not None and scores.mitigation is not None
    assert scores.diagnosis.passed and scores.mitigation.passed
    actions = run.actions()
    assert actions.index("submit.diagnosis") < actions.index("act.set-flag")
    assert actions.index("act.set-flag") < actions.index("submit.mitigation")
    assert status.agent_output is not None and status.agent_output.mitigation is not None
    assert "Switch the cartFailure flag off" in status.agent_output.mitigation.reasoning or (
        status.agent_output.mitigation.actions
    )
    # Reflection: the malformed LogQL was caught and the tool model re-prompted with the error.
    reprompt = run.tool.prompts[1][-1]["content"]
    assert "is not valid" in reprompt and "'{' is not closed" in reprompt
    assert actions.count("observe.logs") == 1, "the malformed query never reached the gateway"
    # The trajectory: thoughts, tool calls, results as the model saw them, each model call.
    kinds = {s.kind.value for s in run.steps}
    assert {"model-call", "thought", "tool-call", "tool-result", "note"} <= kinds
    calls = [s for s in run.steps if s.kind.value == "model-call"]
    assert len(calls) == len(run.reasoning.prompts) + len(run.tool.prompts) == 16
    assert all(s.prompt_tokens and s.completion_tokens is not None for s in calls)
    flags = results(run, "nl2kubectl")[0]
    assert flags in seen(run.reasoning.prompts[3]), "the model saw the result as stored"
    assert '"cartFailure": {' in flags and "defaultVariant" in flags


@pytest.mark.slow
def test_reflection_corrects_malformed_promql_and_kubectl_and_feeds_back_execution_errors(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning = [
        action("nl2metrics", request="error rate per service"),
        action("nl2kubectl", request="describe the cart deployment"),
        action("submit_diagnosis", **CART_DIAGNOSIS),
        final("cart"),
        *CART_FIX,
    ]
    errors = 'rate(traces_span_metrics_calls_total{status_code="STATUS_CODE_ERROR"}[5m])'
    tool = [
        f"sum by (service_name) ({errors}",
        f"sum by (service_name) ({errors})",
        "kubectl describe deployment cart | head -20",
        "```\nkubectl describe deployment carts\n```",
        "kubectl describe deployment cart",
    ]
    run = sre(tmp_path, reasoning, tool)
    assert run.tool.remaining == 0 and run.reasoning.remaining == 0, run.status.message
    prompts = [p[-1]["content"] for p in run.tool.prompts]
    assert "PromQL does not parse: unclosed left parenthesis" in prompts[1]
    assert "without pipes" in prompts[3]
    assert "Running the kubectl command `kubectl describe deployment carts` failed" in prompts[4]
    assert 'Deployment "carts" not found' in prompts[4]
    metrics = results(run, "nl2metrics")[0]
    assert 'service_name="cart"' in metrics and 'service_name="checkout"' in metrics
    assert results(run, "nl2kubectl")[0].startswith(
        "kubectl command: kubectl describe deployment cart\nName:         cart"
    )
    actions = run.actions()
    assert actions.count("observe.kubectl.describe") == 2, "the 404 and the corrected one"
    notes = [s.text for s in run.steps if s.kind.value == "note"]
    assert sum(n.startswith("lint:") for n in notes) == 2
    assert sum(n.startswith("error:") for n in notes) == 1
    assert run.status.phase == TrialPhase.SUCCEEDED, run.status.message


@pytest.mark.slow
def test_guardrail_refusals_by_the_linter_and_by_the_gateway_reach_the_model_and_the_trial_goes_on(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning = [
        action("submit_diagnosis", **CART_DIAGNOSIS),
        final("cart"),
        action("nl2kubectl", request="silence the alerts: scale prometheus to zero"),
        action("nl2kubectl", request="delete the persistent volume data"),
        *CART_FIX,
    ]
    tool = [
        "kubectl scale deployment/prometheus --replicas=0",
        "kubectl delete pv data",
    ]
    run = sre(tmp_path, reasoning, tool)
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, run.status.message
    linted, refused = results(run, "nl2kubectl")
    assert "Refused by the guardrails" in linted and "observability stack" in linted
    assert "Refused by the guardrails (out-of-namespace)" in refused
    assert "cluster-scoped" in refused
    assert linted in seen(run.reasoning.prompts[3])
    assert len(run.tool.prompts) == 2, "a refusal is not re-prompted to find a way around it"
    acts = [e for e in run.audit if str(e["action"]).startswith("act.")]
    assert [(e["action"], e["outcome"]) for e in acts] == [
        ("act.delete", "refused"),
        ("act.set-flag", "ok"),
    ]
    assert run.status.phase == TrialPhase.SUCCEEDED, run.status.message


@pytest.mark.slow
def test_the_token_budget_holds_on_a_huge_log_output(offline_crew: Path, tmp_path: Path) -> None:
    reasoning = [
        action("nl2logs", request="every log line of the namespace"),
        action("submit_diagnosis", **CART_DIAGNOSIS),
        final("cart"),
        final("nothing to do"),
    ]
    tool = ['{k8s_namespace_name="otel-demo"}']
    run = sre(tmp_path, reasoning, tool, args={"token_budget": "300"})
    [result] = [s for s in run.steps if s.kind.value == "tool-result" and s.tool == "nl2logs"]
    assert len(result.text) <= 300 * 4
    assert result.truncated_from is not None and result.truncated_from > 10 * 300 * 4
    assert "lines left out to stay within 300 tokens" in result.text
    [shown] = [m["content"] for m in run.reasoning.prompts[1] if "LogQL query:" in m["content"]]
    assert result.text in shown and len(shown) < 2 * 300 * 4


@pytest.mark.slow
def test_a_crew_that_claims_success_without_acting_gets_no_credit(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning = [
        final("The incident is resolved."),
        action("submit_mitigation", actions=["fixed everything"], resolved=True),
        final("All alerts are cleared."),
    ]
    run = sre(tmp_path, reasoning, [])
    status = run.status
    assert status.phase == TrialPhase.FAILED and status.reason == "TasksFailed"
    assert status.agent_output is not None and status.agent_output.mitigation is not None
    assert status.agent_output.mitigation.resolved is True, "the claim is recorded"
    scores = status.scores
    assert scores is not None and scores.mitigation is not None and scores.diagnosis is not None
    assert not scores.mitigation.passed and not scores.diagnosis.passed
    assert not [a for a in run.actions() if a.startswith("act.")]


@pytest.mark.slow
def test_a_crew_that_tries_to_read_the_ground_truth_gets_nothing_and_no_credit(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning = [
        action("nl2kubectl", request="show the scenario definition with its ground truth"),
        action("nl2kubectl", request="show the trial objects of the benchmark"),
        action(
            "submit_diagnosis",
            entities=[{"kind": "Deployment", "name": "frontend", "root_cause": True}],
        ),
        final("frontend"),
        final("nothing to do"),
    ]
    tool = [
        "kubectl get scenario cart-flagd-failure -o yaml",
        "kubectl get trials.itbench.io -n itbench-system",
    ]
    run = sre(tmp_path, reasoning, tool)
    first, second = results(run, "nl2kubectl")
    assert "Refused by the guardrails" in first and "ground truth" in first
    assert "Refused by the guardrails" in second
    assert "groundTruth" not in " ".join(s.text for s in run.steps)
    assert all("oracle" not in str(e["action"]) for e in run.audit)
    assert "observe.kubectl.get" not in run.actions()
    scores = run.status.scores
    assert scores is not None and scores.diagnosis is not None
    assert not scores.diagnosis.passed and run.status.phase == TrialPhase.FAILED
