"""The random agent: names a random workload as the root cause and restarts a random one.

Its choices are seeded by what the task shows (namespace, domain, alerts), so the same
incident gets the same guesses in every run.
"""

from __future__ import annotations

import random

from agents.routines import begin, finish, task_seed
from itbench.client import (
    ActionVerb,
    AgentAction,
    DiagnosisReport,
    Domain,
    EntityKind,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PostureReport,
    PredictedEntity,
)


def run(client: ITBenchClient) -> None:
    """Work one trial with random guesses.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    rng = random.Random(task_seed(task))
    if task.domain == Domain.CISO:
        client.submit_posture(PostureReport(reasoning="random: no assessment"))
        finish(client)
        return
    workloads = sorted(d["metadata"]["name"] for d in client.get("deployments").items)
    if not workloads:
        finish(client)
        return
    guess = rng.choice(workloads)
    client.submit_diagnosis(
        DiagnosisReport(
            entities=[PredictedEntity(kind=EntityKind.DEPLOYMENT, name=guess, root_cause=True)],
            reasoning="random guess",
        )
    )
    restart = rng.choice(workloads)
    try:
        message = client.act(
            AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=restart)
        ).message
    except ITBenchAPIError as exc:
        message = f"refused: {exc.detail}"
    client.submit_mitigation(
        MitigationReport(actions=[f"rollout restart {restart}: {message}"], resolved=False)
    )
    finish(client)
