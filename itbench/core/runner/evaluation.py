"""How the runner judges a trial: the environment's health against its baseline, and the
scoring seam with its default scorer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from itbench.core.models.observations import AlertInterval, EnvironmentSnapshot
from itbench.core.models.trial import AgentOutput, TrialScores
from itbench.core.runner.context import TrialContext
from itbench.core.scoring.profile import DEFAULT_PROFILE, EvaluationProfile
from itbench.core.scoring.trial import TrialEvidence, grade_trial

ALERTS_FIRING = "alerts firing: "
"""Prefix of the health problem that lists firing alerts."""


# ---- health checks ---------------------------------------------------------------------------


def unhealthy(snapshot: EnvironmentSnapshot | None) -> list[str]:
    """Why an environment is not healthy (empty when every workload is ready and nothing fires).

    Args:
        snapshot: The environment's snapshot (None counts as not observed).
    """
    if snapshot is None:
        return ["no snapshot observed"]
    problems = [
        f"{w.kind}/{w.name} {w.ready_replicas}/{w.desired_replicas} ready"
        for w in snapshot.workloads
        if w.ready_replicas < w.desired_replicas
    ]
    if snapshot.firing_alerts:
        names = sorted({a.alertname for a in snapshot.firing_alerts})
        problems.append(f"{ALERTS_FIRING}{', '.join(names)}")
    return problems


def baseline_differences(
    baseline: EnvironmentSnapshot, current: EnvironmentSnapshot | None
) -> list[str]:
    """How the environment differs from its baseline (empty when restored).

    Args:
        baseline: The snapshot taken before injection.
        current: The snapshot now.
    """
    if current is None:
        return ["no snapshot observed"]
    out: list[str] = []
    for base in baseline.workloads:
        now_w = current.workload(base.name)
        if now_w is None:
            out.append(f"{base.kind}/{base.name} is missing")
            continue
        if now_w.desired_replicas != base.desired_replicas:
            out.append(
                f"{base.kind}/{base.name} replicas {now_w.desired_replicas} "
                f"!= baseline {base.desired_replicas}"
            )
        if now_w.ready_replicas < min(base.ready_replicas, now_w.desired_replicas):
            out.append(
                f"{base.kind}/{base.name} {now_w.ready_replicas}/{now_w.desired_replicas} ready"
            )
    was_firing = {(a.alertname, tuple(sorted(a.labels.items()))) for a in baseline.firing_alerts}
    new_alerts = sorted(
        {
            a.alertname
            for a in current.firing_alerts
            if (a.alertname, tuple(sorted(a.labels.items()))) not in was_firing
        }
    )
    if new_alerts:
        out.append(f"{ALERTS_FIRING}{', '.join(new_alerts)}")
    if current.alert_rules_fingerprint != baseline.alert_rules_fingerprint:
        out.append("alert rules differ from the baseline")
    changed = sorted(k for k, v in baseline.flags.items() if current.flags.get(k) != v)
    if changed:
        out.append(f"flags differ from the baseline: {', '.join(changed)}")
    return out


# ---- scoring seam ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationInput:
    """Everything the scorer may use; nothing the agent merely claims is trusted.

    Attributes:
        context: The trial.
        output: What the agent submitted.
        ready_at: When the agent was let in.
        agent_finished_at: When the agent finished (or its time ran out).
        baseline: The environment's snapshot before injection.
        samples: Snapshots through the observation window, in time order.
        alert_history: Every firing interval since provisioning.
        topology_objects: Kubernetes objects of the application.
        service_calls: The service call graph.
        window_seconds: The observation window.
    """

    context: TrialContext
    output: AgentOutput
    ready_at: datetime
    agent_finished_at: datetime
    baseline: EnvironmentSnapshot
    samples: list[EnvironmentSnapshot]
    alert_history: list[AlertInterval]
    topology_objects: list[dict[str, object]]
    service_calls: list[tuple[str, str]]
    window_seconds: float


class TrialScorer(Protocol):
    """Scores one trial and says whether its tasks passed."""

    def __call__(self, evaluation: EvaluationInput) -> tuple[TrialScores, list[str]]:
        """Return the scores and the names of the tasks that failed (empty when all passed)."""
        ...


# ---- the default scorer ----------------------------------------------------------------------


def score_trial(
    evaluation: EvaluationInput, profile: EvaluationProfile = DEFAULT_PROFILE
) -> tuple[TrialScores, list[str]]:
    """Score a trial with the scoring core (default evaluation profile).

    See `itbench.core.scoring.trial.grade_trial` for what each task needs.

    Args:
        evaluation: The trial's evidence and the agent's output.
        profile: The evaluation profile.

    Returns:
        The scores, and a description of each failed task (empty when every task passed).
    """
    ctx = evaluation.context
    return grade_trial(
        TrialEvidence(
            scenario=ctx.scenario,
            seed=ctx.spec.seed,
            output=evaluation.output,
            ready_at=evaluation.ready_at,
            agent_finished_at=evaluation.agent_finished_at,
            baseline=evaluation.baseline,
            samples=evaluation.samples,
            alert_history=evaluation.alert_history,
            topology_objects=evaluation.topology_objects,
            service_calls=evaluation.service_calls,
            window_seconds=evaluation.window_seconds,
        ),
        profile,
    )
