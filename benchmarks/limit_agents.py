"""Agents that try to make the twin model thousands of pods, for `bench_agent_limits` and the
limit tests: ordinary SDK clients asking for what the Kubernetes API accepts (up to its int32
maximum) through every verb that sets replicas."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from itbench.client import ITBenchAPIError, ITBenchClient
from itbench.core.models.observations import ActionVerb, AgentAction

API_MAX = 2**31 - 1
"""The largest `replicas` the Kubernetes API's int32 field takes."""
SCALE_MAX = 1000
"""The largest `replicas` the gateway's scale verb takes."""
HOLD_SECONDS = 600.0
"""Trial time each agent keeps its turn for, from STARTED (its actions included)."""


def _act(client: ITBenchClient, action: AgentAction) -> None:
    # A guardrail's refusal (the observability stack is off limits) is not what is tested here.
    with contextlib.suppress(ITBenchAPIError):
        client.act(action)


def _hpa(target: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{target}-burst"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": replicas,
            "maxReplicas": replicas,
        },
    }


def _hold(client: ITBenchClient, began: datetime) -> None:
    """Wait until `HOLD_SECONDS` after `began`, then report FINISHED."""
    now = client.wait(1).now
    client.wait(max(HOLD_SECONDS - (now - began).total_seconds(), 1.0))
    client.finished()


def scale_everything(client: ITBenchClient) -> None:
    """Every Deployment to 1000 replicas by the scale verb and to the API's maximum by a patch,
    and an HPA holding the cart at 1000; then FINISHED."""
    began = client.started().time
    for d in client.get("Deployment").items:
        name = d["metadata"]["name"]
        _act(
            client,
            AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name=name, replicas=SCALE_MAX),
        )
        _act(
            client,
            AgentAction(
                verb=ActionVerb.PATCH,
                kind="Deployment",
                name=name,
                patch={"spec": {"replicas": API_MAX}},
            ),
        )
    _act(
        client,
        AgentAction(
            verb=ActionVerb.APPLY, kind="HorizontalPodAutoscaler", manifest=_hpa("cart", 1000)
        ),
    )
    _hold(client, began)


def scale_to_the_bound(client: ITBenchClient) -> None:
    """Every Deployment to the most replicas the limits allow (the pod quota then holds), and
    an HPA holding the cart there; then FINISHED."""
    from itbench.environments.sim.limits import MAX_REPLICAS

    began = client.started().time
    for d in client.get("Deployment").items:
        _act(
            client,
            AgentAction(
                verb=ActionVerb.SCALE,
                kind="Deployment",
                name=d["metadata"]["name"],
                replicas=MAX_REPLICAS,
            ),
        )
    _act(
        client,
        AgentAction(
            verb=ActionVerb.APPLY,
            kind="HorizontalPodAutoscaler",
            manifest=_hpa("cart", MAX_REPLICAS),
        ),
    )
    _hold(client, began)


def wait_only(client: ITBenchClient) -> None:
    """The others' turn without their actions: lists the Deployments, waits as long, then
    FINISHED (the baseline they are measured against)."""
    began = client.started().time
    client.get("Deployment")
    _hold(client, began)


def restart_everything(client: ITBenchClient) -> None:
    """Pod churn: two Deployments at 60 replicas each, rolled out again one after the other
    for the whole turn (every rollout makes new pods, and every new pod new series); then
    FINISHED."""
    client.started()
    names = [d["metadata"]["name"] for d in client.get("Deployment").items][:2]
    for name in names:
        _act(client, AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name=name, replicas=60))
    i = 0
    while (client.wait(1).remaining_seconds or 0.0) > 10:
        name = names[i % len(names)]
        _act(client, AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=name))
        i += 1
    client.finished()
