"""Routines every baseline agent shares: taking a trial, waiting for alerts to clear, entity names.

Built only on the public SDK (`itbench.client`), like any agent submitted from outside.
"""

from __future__ import annotations

from itbench.client import AlertState, ITBenchAPIError, ITBenchClient, TaskDescription

RESERVE_SECONDS = 30.0
"""Time kept back before the deadline for the last reports and FINISHED."""


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


def wait_for_quiet(client: ITBenchClient, *, budget_seconds: float, step_seconds: float) -> bool:
    """Let time pass until no alert fires, within a budget and before the deadline.

    Args:
        client: The SDK client.
        budget_seconds: The most time to wait in total.
        step_seconds: How long each wait is before alerts are checked again.

    Returns:
        Whether the alerts were quiet when it stopped.
    """
    waited = 0.0
    while True:
        if not firing(client):
            return True
        remaining = client.task().remaining_seconds
        room = (remaining if remaining is not None else budget_seconds) - RESERVE_SECONDS
        step = min(step_seconds, budget_seconds - waited, room)
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
