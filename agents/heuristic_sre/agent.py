"""The heuristic SRE agent: a classical, model-free incident responder.

It follows the firing alerts and the error and latency signals (span metrics, or error traces when
metrics are off, logs when both are) through the call graph to where the incident starts,
inspects the evidence there (`reasoning`, `causes`), names each cause with its category and the
propagation chain up to the users, and applies the narrowest remedy on exactly the object at
fault: restore the pod template fields that changed since the previous revision, switch a flag
flagd serves back off, fix a Service's selector or targetPort, let a NetworkPolicy admit the port
it blocks, scale a Deployment back to what it ran. A cause read from symptoms alone gets no
action. Then it waits, checks that the alerts stay cleared, restarts a workload whose symptoms
outlast a flag switched off, and reports. With no alert firing it names nothing and changes
nothing.
"""

from __future__ import annotations

import itertools

from agents.heuristic_sre.causes import Finding, Investigation
from agents.heuristic_sre.graph import Graph
from agents.heuristic_sre.objects import Objects
from agents.heuristic_sre.reasoning import investigate
from agents.heuristic_sre.signals import Signals, read_signals
from agents.plugin import Agent
from agents.routines import begin, finish, firing, ref, remaining, wait_for_quiet
from itbench.client import (
    ActionVerb,
    AgentAction,
    AlertState,
    DiagnosisReport,
    Domain,
    EntityKind,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PredictedEdge,
    PredictedEntity,
)

STEP_SECONDS = 30.0
"""How long each wait is before the alerts are checked again."""
SETTLE_SECONDS = 60.0
"""How long the alerts must stay quiet before the incident counts as over."""
FOLLOW_UP_SECONDS = 150.0
"""How long a workload's symptoms may outlast its flag being switched off before a restart."""
LINGERING = frozenset(
    {
        "RequestLatencyHigh",
        "RequestErrorRate",
        "MemoryUsageHigh",
        "ContainerOOMKilled",
        "CPUThrottlingHigh",
        "PodNotReady",
    }
)
"""Alerts that a restart clears when the flag that caused them is already off (a leak, a cache
that grew, a burnt CPU budget)."""


def report(findings: list[Finding], inv: Investigation) -> DiagnosisReport:
    """The diagnosis: each cause with its category, and the chains up to the users."""
    symptomatic = inv.signals.symptomatic() | {f.service for f in findings}
    entities: dict[str, PredictedEntity] = {}
    for f in findings:
        entities[f.ref] = PredictedEntity(
            kind=EntityKind(f.kind),
            name=f.name,
            root_cause=True,
            condition=f.condition[:1000],
            category=f.category,
        )
    edges: dict[tuple[str, str], PredictedEdge] = {}
    for f in findings:
        chain = inv.graph.chain_up(f.service, symptomatic)
        first = ref("Deployment", chain[0])
        if f.ref != first:
            edges.setdefault(
                (f.ref, first),
                PredictedEdge(
                    source=f.ref,
                    target=first,
                    condition=f.condition[:300],
                    effect=f"{chain[0]} misbehaves",
                ),
            )
        for service in chain:
            entities.setdefault(
                ref("Deployment", service),
                PredictedEntity(kind=EntityKind.DEPLOYMENT, name=service, condition="symptoms"),
            )
        for a, b in itertools.pairwise(chain):
            edges.setdefault(
                (ref("Deployment", a), ref("Deployment", b)),
                PredictedEdge(
                    source=ref("Deployment", a),
                    target=ref("Deployment", b),
                    condition=f"{a} fails or is slow",
                    effect=f"calls from {b} fail or slow down",
                ),
            )
    return DiagnosisReport(
        entities=list(entities.values()),
        propagation_chain=list(edges.values()),
        reasoning="\n".join(inv.notes)[-19_000:],
    )


def _act(client: ITBenchClient, action: AgentAction) -> str:
    try:
        return client.act(action).message
    except ITBenchAPIError as exc:
        return f"refused: {exc.detail}"


def _alerts_on(client: ITBenchClient, workload: str) -> set[str]:
    out = set()
    for alert in client.alerts():
        if alert.state != AlertState.FIRING:
            continue
        if workload in (alert.labels.get(k) for k in ("service_name", "deployment", "container")):
            out.add(alert.alertname)
    return out


def remedy(client: ITBenchClient, findings: list[Finding]) -> tuple[list[str], bool]:
    """Apply the remedies of the definite causes, then wait for the alerts to stay cleared,
    restarting a workload whose symptoms outlast its flag being switched off.

    Returns:
        What was done, and whether the alerts were quiet at the end.
    """
    done: list[str] = []
    applied: set[str] = set()
    for f in findings:
        for action in f.remedy if f.definite else []:
            key = action.model_dump_json()
            if key not in applied:
                applied.add(key)
                done.append(f"{f.remedy_words}: {_act(client, action)}")
    if not done:
        return done, not firing(client)
    follow = [w for f in findings if f.definite and f.kind == "Flag" for w in f.follow_up]
    waited = 0.0
    restarted: set[str] = set()
    while True:
        if wait_for_quiet(
            client, budget_seconds=0.0, step_seconds=STEP_SECONDS, settle_seconds=SETTLE_SECONDS
        ):
            return done, True
        if waited >= FOLLOW_UP_SECONDS:
            for w in follow:
                if w not in restarted and _alerts_on(client, w) & LINGERING:
                    restarted.add(w)
                    action = AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=w)
                    done.append(
                        f"restart Deployment {w}, whose symptoms outlast its flag: "
                        f"{_act(client, action)}"
                    )
        step = min(STEP_SECONDS, remaining(client, STEP_SECONDS))
        if step <= 0:
            return done, not firing(client)
        waited += client.wait(step).waited_seconds


def run(client: ITBenchClient) -> None:
    """Work one SRE trial: investigate, report, remedy, wait for the alerts to clear, report.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    if task.domain != Domain.SRE:
        finish(client)
        return
    objects = Objects.read(client, task.namespace)
    graph = Graph.from_topology(client.topology().edges)
    signals: Signals = read_signals(client, task, objects, graph.callees)
    inv = Investigation(client, objects, signals, graph, notes=list(signals.notes))
    findings = investigate(inv)
    client.submit_diagnosis(report(findings, inv))
    done, quiet = remedy(client, findings)
    if done:
        reasoning = "alerts cleared" if quiet else f"alerts still firing: {firing(client)}"
    elif findings:
        reasoning = (
            "no object shows the cause ("
            + "; ".join(f"{f.ref}: {f.category.value}" for f in findings)
            + "), so nothing was changed; the cause needs the team that runs the platform"
        )
    else:
        reasoning = "nothing is wrong; nothing was changed"
    client.submit_mitigation(
        MitigationReport(actions=done, resolved=quiet and bool(done), reasoning=reasoning)
    )
    finish(client)


AGENT = Agent(
    run=run,
    domains=("SRE",),
    description="Reasons from alerts, span metrics, pods and rollouts to the cause; undoes it.",
)
"""The registry's entry (`itbench.agents`)."""
