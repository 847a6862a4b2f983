"""Waiting on the twin's virtual clock for alerts to fire or clear, and injecting faults."""

from __future__ import annotations

from collections.abc import Callable

from itbench.core.faults import get_fault
from itbench.core.models.observations import Alert, AlertState
from itbench.environments.sim import SimEnvironment

WaitFor = Callable[[SimEnvironment, str, dict[str, str], float], float | None]


def firing(env: SimEnvironment, alertname: str, labels: dict[str, str]) -> list[Alert]:
    """The firing alerts of a name that carry the given labels."""
    return [
        a for a in env.alerts() if a.state == AlertState.FIRING and a.matches(alertname, labels)
    ]


def wait_for_alert(
    env: SimEnvironment, alertname: str, labels: dict[str, str], within: float
) -> float | None:
    """Advance in 15-s steps until the alert fires; seconds waited, or None if it never did."""
    waited = 0.0
    while waited < within:
        env.advance(15)
        waited += 15
        if firing(env, alertname, labels):
            return waited
    return None


def wait_until_clear(env: SimEnvironment, within: float) -> float | None:
    """Advance until no alert is active; seconds waited, or None."""
    waited = 0.0
    while waited < within:
        env.advance(15)
        waited += 15
        if not env.alerts():
            return waited
    return None


def inject(env: SimEnvironment, fault_id: str, key: str = "fault", **args: object) -> None:
    """Inject a fault of the library with arguments."""
    assert env.inject(key, get_fault(fault_id).changes(args, env.namespace))
