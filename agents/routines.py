"""Routines every baseline agent shares: taking a trial, waiting for alerts, reading objects and
metric history, entity names.

Built only on the public SDK (`itbench.client`), like any agent submitted from outside.
"""

from __future__ import annotations

from typing import Any

from itbench.client import AlertState, ITBenchAPIError, ITBenchClient, TaskDescription

RESERVE_SECONDS = 30.0
"""Time kept back before the deadline for the last reports and FINISHED."""


def task_seed(task: TaskDescription) -> str:
    """A seed for an agent's random choices from what the task shows (its namespace, domain,
    alerts and requirement), so the same incident gets the same choices in every run; the trial
    id is random per run and would not."""
    alerts = sorted(
        (a.alertname, sorted((str(k), str(v)) for k, v in a.labels.items())) for a in task.alerts
    )
    return f"{task.namespace}/{task.domain}/{alerts}/{task.requirement}"


def begin(client: ITBenchClient) -> TaskDescription:
    """Take the Ready trial, report STARTED and return the task.

    Args:
        client: The SDK client holding the trial's token.
    """
    client.next_trial()
    task = client.task()
    client.started()
    return task


def firing(client: ITBenchClient) -> list[str]:
    """Names of the alerts firing now, sorted."""
    return sorted({a.alertname for a in client.alerts() if a.state == AlertState.FIRING})


def remaining(client: ITBenchClient, fallback: float) -> float:
    """Seconds left before the deadline minus the reserve (`fallback` when there is none)."""
    left = client.task().remaining_seconds
    return (left if left is not None else fallback) - RESERVE_SECONDS


def wait_for_quiet(
    client: ITBenchClient,
    *,
    budget_seconds: float,
    step_seconds: float,
    settle_seconds: float = 0.0,
) -> bool:
    """Let time pass until no alert fires, within a budget and before the deadline.

    Args:
        client: The SDK client.
        budget_seconds: The most time to wait in total.
        step_seconds: How long each wait is before alerts are checked again.
        settle_seconds: Once quiet, how long the alerts must stay quiet (re-checked at the end).

    Returns:
        Whether the alerts were quiet when it stopped.
    """
    waited = 0.0
    while True:
        if not firing(client):
            if settle_seconds <= 0:
                return True
            room = min(settle_seconds, remaining(client, budget_seconds))
            if room <= 0:
                return True
            client.wait(room)
            if not firing(client):
                return True
            waited += room
        step = min(step_seconds, budget_seconds - waited, remaining(client, budget_seconds))
        if step <= 0:
            return False
        waited += client.wait(step).waited_seconds


def finish(client: ITBenchClient) -> None:
    """Report FINISHED, tolerating a trial that already ended."""
    try:
        client.finished()
    except ITBenchAPIError as exc:
        if exc.status not in (401, 409):
            raise


def ref(kind: str, name: str) -> str:
    """An entity reference, `Kind/name`."""
    return f"{kind}/{name}"


def name_of(obj: dict[str, Any]) -> str:
    """An object's metadata.name."""
    return str((obj.get("metadata") or {}).get("name", ""))


def items(client: ITBenchClient, kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """`kubectl get` items of a kind, or none when the kind or object does not exist."""
    try:
        return client.get(kind, name).items
    except ITBenchAPIError as exc:
        if exc.status in (403, 404):
            return []
        raise


def vector(client: ITBenchClient, promql: str) -> dict[tuple[str, ...], float]:
    """An instant query as {label values in label-name order: value}; empty without metrics."""
    try:
        result = client.query(promql)["result"]
    except ITBenchAPIError:
        return {}
    out: dict[tuple[str, ...], float] = {}
    for row in result:
        labels = {k: v for k, v in row["metric"].items() if k != "__name__"}
        try:
            value = float(row["value"][1])
        except (TypeError, ValueError):
            continue
        if value == value:  # NaN answers say nothing
            out[tuple(labels[k] for k in sorted(labels))] = value
    return out


def value_before_change(client: ITBenchClient, promql: str) -> tuple[float, float] | None:
    """What a single series read before its latest change, from the last 30 minutes of history.

    Returns:
        (earlier value, current value), or None without history or when the value never changed.
    """
    try:
        result = client.query_range(promql, step="15s")["result"]
    except ITBenchAPIError:
        return None
    if len(result) != 1:
        return None
    values = [float(v) for _, v in result[0]["values"]]
    if not values:
        return None
    current = values[-1]
    for value in reversed(values):
        if value != current:
            return value, current
    return None
