"""Trial sessions: what the gateway knows about each trial an agent may work on, and their registry.

The trial runner opens a session per trial, marks it ready, and reads back what the agent did
(reports, rejected submissions, the audit trail). The gateway reads and updates sessions per call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.base import TelemetryToggles
from itbench.core.models.compliance import ComplianceEvaluation
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import AttemptedEscalation
from itbench.core.runner.context import AgentProgressState
from itbench.environments.port import Environment
from itbench.gateway.errors import UnknownTrialError

AgentState = AgentProgressState
"""Where the agent is in the run protocol of one trial (the state machine's own names)."""


@dataclass(frozen=True)
class CallCosts:
    """Virtual seconds each kind of gateway call costs in the simulator.

    On a live cluster time passes by itself, so these are not applied there.

    Attributes:
        observation: Reading alerts, metrics, logs, traces, topology or objects.
        action: A mutating action.
        submission: Submitting a report.
        protocol: Task, started and finished calls.
    """

    observation: float = 2.0
    action: float = 5.0
    submission: float = 1.0
    protocol: float = 0.0


@dataclass
class AuditEntry:
    """One gateway call as recorded on the trial's trajectory.

    Attributes:
        time: The environment's time when the call arrived.
        method: HTTP method.
        path: Request path.
        action: What the call did, e.g. `observe.metrics`, `act.rollout-undo`, `submit.diagnosis`.
        outcome: `ok`, `refused` (a guardrail or protocol rule), `error` (the environment or a
            bad query failed) or `rejected` (a submission failed validation).
        reason: Why it was refused, rejected or failed; empty when ok.
        detail: JSON-serialisable particulars (the action, the query, field errors).
    """

    time: datetime
    method: str
    path: str
    action: str
    outcome: str
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The entry as JSON-compatible data."""
        return {
            "time": self.time.isoformat(),
            "method": self.method,
            "path": self.path,
            "action": self.action,
            "outcome": self.outcome,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass
class TrialSession:
    """Everything the gateway needs to serve one trial, and what the agent left behind.

    Attributes:
        trial_id: The trial's id (URL segment).
        token: The trial's bearer token; it reaches this trial only.
        scenario: The scenario (its ground truth is never shown, except to an allowed oracle).
        env: The trial's environment.
        telemetry: The signals the agent may read (the scenario's, masked by the run).
        agent_name: The agent working on it.
        allow_oracle: Whether `GET /oracle` may reveal the ground truth.
        deadline: When the agent's time is up (environment time); set when marked ready.
        state: Protocol state.
        started_at: When the agent reported STARTED.
        finished_at: When the agent reported FINISHED.
        diagnosis: The accepted diagnosis report (the last one wins).
        diagnosis_at: When it was accepted.
        mitigation: The accepted mitigation report.
        mitigation_at: When it was accepted.
        posture: The accepted posture report.
        posture_at: When it was accepted.
        compliance: The platform's evaluation of the accepted CISO artefacts.
        compliance_at: When the artefacts were accepted.
        rejected_submissions: Submissions rejected as malformed or oversized.
        escalations: Actions refused as attempted privilege escalations, in order.
        audit: Every call, in order.
        virtual_cost: Virtual seconds per call kind.
        virtual_time: The environment's clock is virtual, so call costs are applied.
        lock: Serialises calls into the environment; the runner takes it too.
    """

    trial_id: str
    token: str
    scenario: Scenario
    env: Environment
    telemetry: TelemetryToggles
    agent_name: str
    allow_oracle: bool = False
    deadline: datetime | None = None
    state: AgentState = AgentState.WAITING
    started_at: datetime | None = None
    finished_at: datetime | None = None
    diagnosis: DiagnosisReport | None = None
    diagnosis_at: datetime | None = None
    mitigation: MitigationReport | None = None
    mitigation_at: datetime | None = None
    posture: PostureReport | None = None
    posture_at: datetime | None = None
    compliance: ComplianceEvaluation | None = None
    compliance_at: datetime | None = None
    rejected_submissions: int = 0
    escalations: list[AttemptedEscalation] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    virtual_cost: CallCosts = field(default_factory=CallCosts)
    virtual_time: bool = True
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def namespace(self) -> str:
        """The namespace the agent is scoped to."""
        return self.scenario.spec.environment.namespace

    def record(
        self,
        *,
        method: str,
        path: str,
        action: str,
        outcome: str,
        reason: str = "",
        detail: dict[str, Any] | None = None,
        time: datetime | None = None,
    ) -> AuditEntry:
        """Append one entry to the audit trail and return it.

        Args:
            method: HTTP method.
            path: Request path.
            action: What the call did.
            outcome: ok, refused, error or rejected.
            reason: Why, when not ok.
            detail: JSON-serialisable particulars.
            time: When the call arrived (defaults to the environment's time now).
        """
        entry = AuditEntry(
            time=time if time is not None else self.env.now(),
            method=method,
            path=path,
            action=action,
            outcome=outcome,
            reason=reason,
            detail=detail or {},
        )
        with self.lock:
            self.audit.append(entry)
        return entry

    def charge(self, seconds: float) -> None:
        """Let virtual time pass for a call, never beyond the deadline; no-op on live time."""
        if not self.virtual_time or seconds <= 0:
            return
        if self.state not in (AgentState.READY, AgentState.STARTED):
            return
        with self.lock:
            remaining = self.remaining_seconds()
            step = seconds if remaining is None else min(seconds, remaining)
            if step > 0:
                self.env.advance(step)

    def remaining_seconds(self) -> float | None:
        """Seconds until the deadline (0 when passed), or None without a deadline."""
        if self.deadline is None:
            return None
        return max((self.deadline - self.env.now()).total_seconds(), 0.0)


class SessionRegistry:
    """The open trial sessions of one gateway, by trial id and by token (thread-safe)."""

    def __init__(self) -> None:
        """Create an empty registry."""
        self._lock = threading.Lock()
        self._by_id: dict[str, TrialSession] = {}
        self._by_token: dict[str, TrialSession] = {}

    def open(self, session: TrialSession) -> None:
        """Register a session.

        Raises:
            ValueError: When the trial id or the token is already in use.
        """
        with self._lock:
            if session.trial_id in self._by_id:
                raise ValueError(f"trial {session.trial_id!r} already has an open session")
            if session.token in self._by_token:
                raise ValueError(f"trial {session.trial_id!r}: token already in use")
            self._by_id[session.trial_id] = session
            self._by_token[session.token] = session

    def close(self, trial_id: str) -> None:
        """Close a session: its token stops working; unknown ids are ignored."""
        with self._lock:
            session = self._by_id.pop(trial_id, None)
            if session is not None:
                self._by_token.pop(session.token, None)
                session.state = AgentState.CLOSED

    def get(self, trial_id: str) -> TrialSession:
        """The session of a trial.

        Raises:
            UnknownTrialError: When no session is open for it.
        """
        with self._lock:
            try:
                return self._by_id[trial_id]
            except KeyError:
                raise UnknownTrialError(trial_id) from None

    def by_token(self, token: str) -> TrialSession:
        """The session a bearer token belongs to.

        Raises:
            UnknownTrialError: When the token belongs to no open session.
        """
        with self._lock:
            try:
                return self._by_token[token]
            except KeyError:
                raise UnknownTrialError("token") from None

    def mark_ready(self, trial_id: str, deadline: datetime) -> None:
        """Mark a trial Ready for its agent with the given deadline (environment time).

        Raises:
            UnknownTrialError: When no session is open for it.
            ValueError: When the agent has already started or finished.
        """
        session = self.get(trial_id)
        with session.lock:
            if session.state not in (AgentState.WAITING, AgentState.READY):
                raise ValueError(
                    f"trial {trial_id!r} is {session.state.value}; only a Waiting trial can "
                    "become Ready"
                )
            session.deadline = deadline
            session.state = AgentState.READY

    def ready_trials(self, agent_name: str | None = None) -> list[TrialSession]:
        """Sessions in state Ready, optionally only those of one agent, by trial id."""
        with self._lock:
            sessions = sorted(self._by_id.values(), key=lambda s: s.trial_id)
        return [
            s
            for s in sessions
            if s.state == AgentState.READY and (agent_name is None or s.agent_name == agent_name)
        ]

    def sessions(self) -> list[TrialSession]:
        """Every open session, by trial id."""
        with self._lock:
            return sorted(self._by_id.values(), key=lambda s: s.trial_id)
