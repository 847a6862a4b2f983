"""The heuristic FinOps agent: explains a cost alert and removes the inefficiency behind it.

It reads what fires (a cost alert, an autoscaler at its ceiling) and the history behind it. An
autoscaler that runs at its maximum with a CPU target far below the namespace's other
autoscalers, or whose replica bounds were raised shortly before, creates excess pods: its bounds
go back to what they were and its target to the namespace's usual one. When no autoscaler
explains the cost and the budget the alert compares against was lowered shortly before, the
threshold is what is wrong: it goes back to its earlier value (never above it). With nothing
firing it names nothing and changes nothing.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from agents.plugin import Agent
from agents.routines import (
    begin,
    finish,
    firing,
    items,
    name_of,
    ref,
    value_before_change,
    wait_for_quiet,
)
from itbench.client import (
    ActionVerb,
    AgentAction,
    AlertState,
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

BUDGET_METRIC = "itbench_cost_budget_dollars_per_hour"
"""The gauge the cost alert compares the namespace's cost with (exported from the budget)."""
DEFAULT_CPU_TARGET = 80
"""CPU utilisation an autoscaler aims for when the namespace has no other autoscaler to learn
from (percent; the Kubernetes documentation's example and a common default)."""
LOW_TARGET_SHARE = 0.5
"""A CPU target below this share of the namespace's usual one over-provisions."""
COST_ALERTS = ("CostBudgetExceeded",)
HPA_ALERTS = ("HPAMaxedOut",)


@dataclass
class Finding:
    """A cause of the cost, with its remedy."""

    kind: str
    name: str
    category: FaultCategory
    condition: str
    remedy: AgentAction
    workload: str = ""
    notes: list[str] = field(default_factory=list)


def cpu_target(hpa: dict[str, Any]) -> int | None:
    """The CPU utilisation an autoscaler aims for (percent), if it scales on CPU."""
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


def _bound(spec: dict[str, Any], key: str) -> int:
    return int(spec.get(key, 1))


def judge_hpa(
    hpa: dict[str, Any],
    peers: list[dict[str, Any]],
    earlier: dict[str, int],
    *,
    spreading: bool = False,
) -> tuple[list[str], dict[str, Any]] | None:
    """Why an autoscaler over-provisions and the spec patch that fixes it, or None.

    Args:
        hpa: The autoscaler.
        peers: The namespace's other autoscalers.
        earlier: Its replica bounds before their latest change (`minReplicas`, `maxReplicas`).
        spreading: Other autoscalers of the namespace already drive the cost up with tiny
            targets; then an idle one with such a target is the same misconfiguration.
    """
    spec = hpa.get("spec") or {}
    status = hpa.get("status") or {}
    target = cpu_target(hpa)
    peer_targets = [t for t in (cpu_target(p) for p in peers) if t is not None]
    usual = int(statistics.median_low(peer_targets)) if peer_targets else DEFAULT_CPU_TARGET
    maximum = _bound(spec, "maxReplicas")
    current = int(status.get("currentReplicas", status.get("desiredReplicas", 0)) or 0)
    why: list[str] = []
    if target is not None and target < LOW_TARGET_SHARE * usual:
        why.append(f"its CPU target {target}% is far below the namespace's usual {usual}%")
    for key in ("minReplicas", "maxReplicas"):
        before = earlier.get(key)
        if before is not None and _bound(spec, key) > before:
            why.append(f"{key} was raised from {before} to {_bound(spec, key)}")
    low_target = target is not None and target < LOW_TARGET_SHARE * usual
    if not why or (current < maximum and not (spreading and low_target)):
        # An idle autoscaler costs nothing yet; it counts only beside others that already scale
        # out on the same tiny target.
        return None
    patch: dict[str, Any] = {}
    for key in ("minReplicas", "maxReplicas"):
        before = earlier.get(key)
        if before is not None and before != _bound(spec, key):
            patch[key] = before
    if target is not None and target < LOW_TARGET_SHARE * usual:
        if "targetCPUUtilizationPercentage" in spec:
            patch["targetCPUUtilizationPercentage"] = usual
        else:
            metrics = [dict(m) for m in spec.get("metrics") or []]
            for m in metrics:
                resource = m.get("resource") or {}
                if resource.get("name") == "cpu":
                    m["resource"] = {
                        **resource,
                        "target": {**(resource.get("target") or {}), "averageUtilization": usual},
                    }
            patch["metrics"] = metrics
    if current >= maximum:
        why.append(f"it runs at its maximum of {maximum} replicas")
    else:
        why.append(f"it runs {current} of at most {maximum} replicas, and scales out on any load")
    return why, {"spec": patch}


def _earlier_bounds(client: ITBenchClient, namespace: str, hpa: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, metric in (
        ("minReplicas", "kube_horizontalpodautoscaler_spec_min_replicas"),
        ("maxReplicas", "kube_horizontalpodautoscaler_spec_max_replicas"),
    ):
        change = value_before_change(
            client, f'{metric}{{namespace="{namespace}", horizontalpodautoscaler="{hpa}"}}'
        )
        if change is not None:
            out[key] = int(change[0])
    return out


def autoscaler_findings(client: ITBenchClient, namespace: str, notes: list[str]) -> list[Finding]:
    """Autoscalers whose thresholds create excess pods."""
    hpas = items(client, "horizontalpodautoscalers")
    out = []
    earlier = {name_of(h): _earlier_bounds(client, namespace, name_of(h)) for h in hpas}
    verdicts: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for spreading in (False, True):
        for hpa in hpas:
            name = name_of(hpa)
            if name in verdicts or (spreading and not verdicts):
                continue
            peers = [p for p in hpas if name_of(p) != name]
            verdict = judge_hpa(hpa, peers, earlier[name], spreading=spreading)
            if verdict is not None:
                verdicts[name] = verdict
    for hpa in hpas:
        name = name_of(hpa)
        verdict = verdicts.get(name)
        if verdict is None:
            continue
        why, patch = verdict
        workload = str(((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name", ""))
        condition = "; ".join(why)
        notes.append(f"HorizontalPodAutoscaler {name}: {condition}")
        out.append(
            Finding(
                kind="HorizontalPodAutoscaler",
                name=name,
                category=FaultCategory.AUTOSCALING,
                condition=condition,
                remedy=AgentAction(
                    verb=ActionVerb.PATCH, kind="HorizontalPodAutoscaler", name=name, patch=patch
                ),
                workload=workload,
            )
        )
    return out


def budget_finding(client: ITBenchClient, namespace: str, notes: list[str]) -> Finding | None:
    """A cost budget lowered shortly before the cost alert fired, with the patch that puts it
    back (to its earlier value, never higher)."""
    alerts = [
        a for a in client.alerts() if a.alertname in COST_ALERTS and a.state == AlertState.FIRING
    ]
    if not alerts:
        return None
    change = value_before_change(client, f'{BUDGET_METRIC}{{namespace="{namespace}"}}')
    if change is None:
        notes.append("the cost budget has not changed recently")
        return None
    before, now = change
    if now >= before:
        notes.append(f"the cost budget was raised from {before:g} to {now:g}, not lowered")
        return None
    names = re.findall(
        r"ConfigMap ([a-z0-9][a-z0-9.-]*)", alerts[0].annotations.get("description", "")
    )
    for cm in [c for n in names for c in items(client, "configmaps", n.rstrip("."))]:
        for key, text in (cm.get("data") or {}).items():
            try:
                value = float(str(text))
            except ValueError:
                continue
            if abs(value - now) > 1e-12:
                continue
            condition = (
                f"the budget {key}={text} in ConfigMap {name_of(cm)} was lowered from {before:g}"
                f" to {now:g}, below what the namespace normally costs "
                f"({alerts[0].value:.4g} USD/h now)"
            )
            notes.append(condition)
            return Finding(
                kind="ConfigMap",
                name=name_of(cm),
                category=FaultCategory.ALERTING_THRESHOLD,
                condition=condition,
                remedy=AgentAction(
                    verb=ActionVerb.PATCH,
                    kind="ConfigMap",
                    name=name_of(cm),
                    patch={"data": {key: f"{before:g}"}},
                ),
            )
    notes.append(f"no ConfigMap named by the cost alert holds the budget {now:g}")
    return None


def _report(findings: list[Finding], notes: list[str]) -> DiagnosisReport:
    entities: list[PredictedEntity] = []
    edges: list[PredictedEdge] = []
    for f in findings:
        entities.append(
            PredictedEntity(
                kind=EntityKind(f.kind),
                name=f.name,
                root_cause=True,
                condition=f.condition[:1000],
                category=f.category,
            )
        )
        if f.workload:
            entities.append(
                PredictedEntity(
                    kind=EntityKind.DEPLOYMENT, name=f.workload, condition="excess replicas"
                )
            )
            edges.append(
                PredictedEdge(
                    source=ref(f.kind, f.name),
                    target=ref("Deployment", f.workload),
                    condition=f.condition[:300],
                    effect="runs more pods than the load needs",
                )
            )
    return DiagnosisReport(entities=entities, propagation_chain=edges, reasoning="\n".join(notes))


def run(client: ITBenchClient) -> None:
    """Work one FinOps trial: explain the cost alert, remove the waste, report.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    if task.domain != Domain.FINOPS:
        finish(client)
        return
    active = firing(client)
    notes = [f"firing: {active}"]
    findings: list[Finding] = []
    if active:
        findings = autoscaler_findings(client, task.namespace, notes)
        if not findings:
            budget = budget_finding(client, task.namespace, notes)
            findings = [budget] if budget is not None else []
    else:
        notes.append("no alert fires: nothing costs more than it should")
    client.submit_diagnosis(_report(findings, notes))
    done = []
    for f in findings:
        try:
            message = client.act(f.remedy).message
        except ITBenchAPIError as exc:
            message = f"refused: {exc.detail}"
        done.append(f"patch {f.kind}/{f.name}: {message}")
    quiet = (
        wait_for_quiet(client, budget_seconds=720.0, step_seconds=30.0, settle_seconds=60.0)
        if done
        else not active
    )
    client.submit_mitigation(
        MitigationReport(
            actions=done,
            resolved=quiet and bool(done),
            reasoning=("cost alert cleared" if quiet else f"still firing: {firing(client)}")
            if done
            else "nothing was changed",
        )
    )
    finish(client)


AGENT = Agent(
    run=run,
    domains=("FinOps",),
    description="Explains a cost alert from autoscaler history and cost series; undoes its cause.",
)
"""The registry's entry (`itbench.agents`)."""
