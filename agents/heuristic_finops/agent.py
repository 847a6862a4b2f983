"""The heuristic FinOps agent: explains a cost alert and removes the inefficiency behind it.

It reads the cost alert, looks for an autoscaler whose thresholds create excess pods (a very low CPU
target or a high replica floor) and resets it to sane values; when no workload is over-provisioned,
it concludes that the alert's budget is set below the normal cost and raises the budget instead.
"""

from __future__ import annotations

import math
import re
from typing import Any

from agents.plugin import Agent
from agents.routines import begin, finish, firing, ref, wait_for_quiet
from itbench.client import (
    ActionVerb,
    AgentAction,
    DiagnosisReport,
    Domain,
    EntityKind,
    FaultCategory,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PredictedEdge,
    PredictedEntity,
)

COST_CONFIGMAP = "cost-alert-config"
SANE_CPU_TARGET = 80
"""CPU utilisation an autoscaler should aim for (percent)."""

LOW_CPU_TARGET = 30
"""An autoscaler aiming below this utilisation over-provisions."""

BUDGET_HEADROOM = 1.5
"""A raised budget sits this far above the current cost."""


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _cpu_target(hpa: dict[str, Any]) -> int | None:
    spec = hpa.get("spec") or {}
    if "targetCPUUtilizationPercentage" in spec:
        return int(spec["targetCPUUtilizationPercentage"])
    for metric in spec.get("metrics") or []:
        resource = metric.get("resource") or {}
        if resource.get("name") == "cpu":
            target = resource.get("target") or {}
            if "averageUtilization" in target:
                return int(target["averageUtilization"])
    return None


def _wasteful(hpa: dict[str, Any]) -> str | None:
    """Why an autoscaler over-provisions, or None."""
    spec = hpa.get("spec") or {}
    target = _cpu_target(hpa)
    min_replicas = int(spec.get("minReplicas", 1))
    max_replicas = int(spec.get("maxReplicas", 1))
    if target is not None and target < LOW_CPU_TARGET:
        return f"CPU target {target}% is far below a sane {SANE_CPU_TARGET}%"
    if min_replicas > 1 and min_replicas * 2 > max_replicas:
        return f"replica floor {min_replicas} is close to the ceiling {max_replicas}"
    return None


def _fix_hpa(hpa: dict[str, Any]) -> AgentAction:
    spec = hpa.get("spec") or {}
    patch: dict[str, Any] = {"minReplicas": 1}
    if "targetCPUUtilizationPercentage" in spec:
        patch["targetCPUUtilizationPercentage"] = SANE_CPU_TARGET
    else:
        patch["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": SANE_CPU_TARGET},
                },
            }
        ]
    return AgentAction(
        verb=ActionVerb.PATCH,
        kind="HorizontalPodAutoscaler",
        name=_name(hpa),
        patch={"spec": patch},
    )


def _budget_fix(client: ITBenchClient) -> tuple[str, AgentAction] | None:
    """Raise a budget that sits below the current cost, read from the cost alert's value."""
    try:
        maps = client.get("configmaps", COST_CONFIGMAP).items
    except ITBenchAPIError:
        return None
    costs = [a.value for a in client.alerts() if "cost" in a.alertname.lower() and a.value > 0]
    if not costs:
        return None  # no cost alert fires: the budget is not the problem
    for cm in maps:
        for key, text in (cm.get("data") or {}).items():
            if not re.search(r"budget|threshold", key, re.IGNORECASE):
                continue
            try:
                budget = float(text)
            except ValueError:
                continue
            cost = max(costs)
            if cost <= budget:
                continue
            raised = math.ceil(cost * BUDGET_HEADROOM * 100) / 100
            why = f"the budget {key}={budget:g} is below the normal cost {cost:g}"
            return why, AgentAction(
                verb=ActionVerb.PATCH,
                kind="ConfigMap",
                name=_name(cm),
                patch={"data": {key: f"{raised:g}"}},
            )
    return None


def run(client: ITBenchClient) -> None:
    """Work one FinOps trial: explain the cost alert, remove the waste, report.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    if task.domain != Domain.FINOPS:
        finish(client)
        return
    notes = ["alerts: " + ", ".join(f"{a.alertname}{a.labels}" for a in task.alerts)]
    hpas = client.get("hpa").items
    waste = [(hpa, why) for hpa in hpas if (why := _wasteful(hpa)) is not None]
    entities: list[PredictedEntity] = []
    edges: list[PredictedEdge] = []
    actions: list[AgentAction] = []
    if waste:
        for hpa, why in waste:
            target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
            workload = str(target.get("name", ""))
            notes.append(f"HorizontalPodAutoscaler {_name(hpa)}: {why}")
            entities.append(
                PredictedEntity(
                    kind=EntityKind.HPA,
                    name=_name(hpa),
                    root_cause=True,
                    condition=why,
                    category=FaultCategory.AUTOSCALING,
                )
            )
            if workload:
                entities.append(
                    PredictedEntity(
                        kind=EntityKind.DEPLOYMENT, name=workload, condition="excess replicas"
                    )
                )
                edges.append(
                    PredictedEdge(
                        source=ref("HorizontalPodAutoscaler", _name(hpa)),
                        target=ref("Deployment", workload),
                        condition=why,
                        effect="runs more pods than the load needs",
                    )
                )
            actions.append(_fix_hpa(hpa))
    else:
        budget = _budget_fix(client)
        if budget is not None:
            why, action = budget
            notes.append(why)
            entities.append(
                PredictedEntity(
                    kind=EntityKind.CONFIG_MAP,
                    name=action.name,
                    root_cause=True,
                    condition=why,
                    category=FaultCategory.ALERTING_THRESHOLD,
                )
            )
            actions.append(action)
    client.submit_diagnosis(
        DiagnosisReport(entities=entities, propagation_chain=edges, reasoning="\n".join(notes))
    )
    done = []
    for action in actions:
        try:
            done.append(
                f"{action.verb.value} {action.kind}/{action.name}: {client.act(action).message}"
            )
        except ITBenchAPIError as exc:
            done.append(f"refused: {exc.detail}")
    quiet = wait_for_quiet(client, budget_seconds=600.0, step_seconds=30.0) if done else False
    client.submit_mitigation(
        MitigationReport(
            actions=done,
            resolved=quiet,
            reasoning="cost alert cleared" if quiet else f"still firing: {firing(client)}",
        )
    )
    finish(client)


AGENT = Agent(
    run=run,
    domains=("FinOps",),
    description="Explains a cost alert; resets a wasteful autoscaler or a budget set too low.",
)
"""The registry's entry (`itbench.agents`)."""
