"""One audited call on a trial session: the state check, the audit entry, the virtual cost and the
translation of environment and unexpected failures, in one place for every operation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from itbench.environments.port import EnvironmentFailure
from itbench.gateway.errors import (
    CallError,
    EnvironmentUnavailableError,
    InternalFailureError,
    NotFoundError,
    WrongStateError,
    bounded,
)
from itbench.gateway.sessions import AgentState, TrialSession

log = logging.getLogger(__name__)

RUNNING = (AgentState.READY, AgentState.STARTED)
"""The states in which a trial accepts observations, actions and reports."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a call came from, as the audit trail records it.

    Attributes:
        method: The HTTP method, or `MCP` for a tool call.
        path: The request path, or the MCP tool's name.
    """

    method: str
    path: str


class Call:
    """One audited call in progress: the action it records, its outcome and detail."""

    __slots__ = ("action", "detail", "outcome")

    def __init__(self, action: str) -> None:
        """Start recording a call under an action name (`observe.alerts`, `act`, ...)."""
        self.action = action
        self.outcome = "ok"
        self.detail: dict[str, Any] = {}


def check_state(
    session: TrialSession, now: datetime, states: tuple[AgentState, ...], enforce_deadline: bool
) -> None:
    """Refuse a call the trial's protocol state or deadline does not allow.

    Raises:
        WrongStateError: Not Ready yet, finished, or past the deadline.
    """
    if session.state not in states:
        if session.state == AgentState.WAITING:
            detail = "the trial is not Ready yet; poll GET /v1/trials?state=Ready"
            slug = "trial-not-ready"
        else:
            detail = f"the trial is {session.state.value}; no more calls are accepted"
            slug = "trial-finished"
        raise WrongStateError(slug, "Wrong trial state", detail, extra={"state": session.state})
    if enforce_deadline and session.deadline is not None and now >= session.deadline:
        raise WrongStateError(
            "deadline-passed",
            "Deadline passed",
            f"the trial's deadline {session.deadline.isoformat()} has passed; report FINISHED",
            extra={"deadline": session.deadline.isoformat()},
        )


@contextmanager
def audited(
    session: TrialSession,
    origin: Origin,
    action: str,
    cost: float,
    *,
    states: tuple[AgentState, ...] = RUNNING,
    enforce_deadline: bool = True,
) -> Iterator[Call]:
    """Run one call on a session under its lock, and record it on the audit trail.

    The call is refused when the trial's state or deadline does not allow it. A call that
    fails with a `CallError` is recorded with that error's outcome and still costs its virtual
    seconds; an environment failure becomes `EnvironmentUnavailableError` and anything unexpected
    `InternalFailureError`, both recorded.

    Args:
        session: The trial session.
        origin: Where the call came from.
        action: The action name the audit trail records (the body may refine it).
        cost: Virtual seconds the call costs.
        states: Protocol states that accept the call.
        enforce_deadline: Whether the call is refused after the deadline.

    Yields:
        The call, whose action, outcome and detail the body may set.
    """
    with session.lock:
        call = Call(action)
        arrived = session.env.now()
        try:
            check_state(session, arrived, states, enforce_deadline)
            yield call
        except CallError as exc:
            session.record(
                time=arrived,
                method=origin.method,
                path=origin.path,
                action=call.action,
                outcome=exc.outcome,
                reason=exc.detail,
                detail=call.detail,
            )
            exc.recorded = True
            session.charge(cost)
            raise
        except EnvironmentFailure as exc:
            session.record(
                time=arrived,
                method=origin.method,
                path=origin.path,
                action=call.action,
                outcome="error",
                reason=bounded(f"environment failure: {exc}"),
                detail=call.detail,
            )
            failure = EnvironmentUnavailableError(
                "environment-failure",
                "Environment failure",
                bounded(
                    f"the trial's environment failed: {exc}; the trial will be Errored, "
                    "not counted against the agent"
                ),
            )
            failure.recorded = True
            raise failure from exc
        except Exception as exc:
            log.exception("gateway call failed", extra={"trial": session.trial_id})
            session.record(
                time=arrived,
                method=origin.method,
                path=origin.path,
                action=call.action,
                outcome="error",
                reason=bounded(f"internal error: {type(exc).__name__}: {exc}"),
                detail=call.detail,
            )
            internal = InternalFailureError(
                "internal-error",
                "Internal error",
                bounded(f"the gateway failed on this call ({type(exc).__name__}: {exc})"),
            )
            internal.recorded = True
            raise internal from exc
        else:
            session.record(
                time=arrived,
                method=origin.method,
                path=origin.path,
                action=call.action,
                outcome=call.outcome,
                detail=call.detail,
            )
            session.charge(cost)


def require_signal(session: TrialSession, signal: str) -> None:
    """Refuse a read of a signal the trial does not offer (the traces-off ablation, say).

    Raises:
        NotFoundError: The signal is switched off for this trial.
    """
    if not getattr(session.telemetry, signal):
        raise NotFoundError(
            "telemetry-unavailable",
            "Signal not available",
            f"{signal} are not available in this trial (see telemetry in the task)",
            extra={"signal": signal},
        )
