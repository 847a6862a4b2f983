"""The action executor: observes a trial's environment and gateway session, and carries out the
state machine's actions against them. The embedded driver and the operator both use it.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from itbench.core.models.observations import AlertInterval
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.actions import (
    Action,
    CloseSession,
    CollectSample,
    InjectFault,
    MarkForRebuild,
    MarkReady,
    OpenSession,
    ProvisionEnvironment,
    RecordTopology,
    RemoveFault,
    ResetEnvironment,
    TakeBaseline,
)
from itbench.core.runner.context import (
    DEFAULT_CONFIG,
    PHASE_NEEDS,
    AgentProgress,
    AgentProgressState,
    Observation,
    ObservationNeeds,
    Reason,
    RunnerConfig,
    TrialContext,
    topology_kinds,
)
from itbench.core.runner.machine import sample_keys
from itbench.environments.port import Environment
from itbench.execution.evidence import AgentRecord, EvidenceStore, TopologyRecord
from itbench.gateway.errors import UnknownTrialError
from itbench.gateway.sessions import SessionRegistry, TrialSession

log = logging.getLogger(__name__)


def baseline_key(ctx: TrialContext) -> str:
    """The evidence key of a trial's baseline snapshot."""
    return f"{ctx.uid}/baseline"


def topology_key(ctx: TrialContext) -> str:
    """The evidence key of the topology recorded when the agent was let in."""
    return f"{ctx.uid}/topology"


def agent_key(ctx: TrialContext) -> str:
    """The evidence key of the agent's record, stored when its session closes."""
    return f"{ctx.uid}/close"


class TrialExecutor:
    """Runs one trial's actions against its environment and the gateway's sessions.

    Every action is idempotent: injections are keyed (the environment applies a key once),
    evidence is first-write-wins, sessions are opened only when absent.
    """

    def __init__(
        self,
        ctx: TrialContext,
        env: Environment,
        registry: SessionRegistry,
        evidence: EvidenceStore,
        *,
        config: RunnerConfig = DEFAULT_CONFIG,
        virtual_time: bool = True,
        token_factory: Callable[[], str] = lambda: secrets.token_urlsafe(24),
        on_rebuild: Callable[[str], None] | None = None,
    ) -> None:
        """Bind a trial to its environment, sessions and evidence.

        Args:
            ctx: The trial.
            env: Its environment.
            registry: The gateway sessions the agent reaches the trial through.
            evidence: Where baseline, samples and the agent's record are kept.
            config: The state machine's timing constants (for the sample keys).
            virtual_time: The environment's clock is virtual (gateway calls cost time).
            token_factory: Makes the session's bearer token.
            on_rebuild: Called with the reason when the environment must be rebuilt.
        """
        self.ctx = ctx
        self.env = env
        self.registry = registry
        self.evidence = evidence
        self.config = config
        self.virtual_time = virtual_time
        self._token_factory = token_factory
        self._on_rebuild = on_rebuild
        self.agent_error = ""
        self.agent_error_reason = Reason.AGENT_CRASHED
        self.rebuild_reason: str | None = None
        self.lock = threading.RLock()
        """Serialises calls into the environment: the runner's steps and waits take it, and on a
        virtual clock the trial's gateway session shares it, so an agent's calls never
        interleave with a tick (the simulator is not thread-safe)."""

    # ---- observe ------------------------------------------------------------------------
    def now(self) -> datetime:
        """The environment's current time."""
        return self.env.now()

    def session(self) -> TrialSession | None:
        """The trial's open gateway session, if any."""
        try:
            return self.registry.get(self.ctx.session_id)
        except UnknownTrialError:
            return None

    @property
    def token(self) -> str | None:
        """The bearer token of the open session, if any."""
        session = self.session()
        return session.token if session is not None else None

    def observe(self, status: TrialStatus) -> Observation:
        """Gather what the current phase's step reads (see `PHASE_NEEDS`).

        Args:
            status: The trial's status.
        """
        needs = PHASE_NEEDS.get(status.phase, frozenset())
        ctx = self.ctx
        snapshot = self.env.snapshot() if ObservationNeeds.SNAPSHOT in needs else None
        alerts = self.env.alerts() if ObservationNeeds.ALERTS in needs else []
        injected = (
            frozenset(self.env.injections()) if ObservationNeeds.INJECTED in needs else frozenset()
        )
        baseline = None
        samples = {}
        if ObservationNeeds.EVIDENCE in needs:
            baseline = self.evidence.snapshot(baseline_key(ctx))
            for key in sample_keys(ctx, self.config):
                sample = self.evidence.snapshot(key)
                if sample is not None:
                    samples[key] = sample
        agent = self._agent_progress() if ObservationNeeds.AGENT in needs else None
        objects: list[dict[str, object]] = []
        calls: list[tuple[str, str]] = []
        history: list[AlertInterval] = []
        if ObservationNeeds.TOPOLOGY in needs and self._scoring_due(status, samples):
            # Scoring reads the alert history and the topology; nothing earlier does.
            history = self.env.alert_history()
            recorded = self.evidence.topology(topology_key(ctx))
            if recorded is None:
                recorded = self._topology(topology_kinds(ctx.scenario))
            objects = list(recorded.objects)
            calls = list(recorded.calls)
        return Observation(
            snapshot=snapshot,
            alerts=alerts,
            alert_history=history,
            injected=injected,
            baseline=baseline,
            samples=samples,
            agent=agent,
            topology_objects=objects,
            service_calls=calls,
        )

    def _topology(self, kinds: Sequence[str]) -> TopologyRecord:
        objects: list[dict[str, Any]] = []
        for kind in kinds:
            try:
                found = self.env.get_objects(kind)
            except (KeyError, ValueError):
                continue  # a kind this environment does not have
            objects.extend(o if o.get("kind") else {**o, "kind": kind} for o in found)
        return TopologyRecord(objects=objects, calls=list(self.env.service_calls()))

    def _scoring_due(self, status: TrialStatus, samples: Mapping[str, object]) -> bool:
        # The topology is only read for the step that scores: when every sample is in.
        return all(k in samples for k in sample_keys(self.ctx, self.config))

    def _agent_progress(self) -> AgentProgress | None:
        session = self.session()
        if session is not None:
            return AgentProgress(
                state=session.state,
                started_at=session.started_at,
                finished_at=session.finished_at,
                diagnosis=session.diagnosis,
                diagnosis_at=session.diagnosis_at,
                mitigation=session.mitigation,
                posture=session.posture,
                posture_at=session.posture_at,
                compliance=session.compliance,
                compliance_at=session.compliance_at,
                rejected_submissions=session.rejected_submissions,
                attempted_escalations=tuple(session.escalations),
                error=self.agent_error,
                error_reason=self.agent_error_reason,
            )
        record = self.evidence.agent(agent_key(self.ctx))
        if record is None:
            return None
        try:
            state = AgentProgressState(record.state)
        except ValueError:
            state = AgentProgressState.CLOSED
        return AgentProgress(
            state=state,
            started_at=_time(record.started_at),
            finished_at=_time(record.finished_at),
            diagnosis=record.diagnosis,
            diagnosis_at=_time(record.diagnosis_at),
            mitigation=record.mitigation,
            posture=record.posture,
            posture_at=_time(record.posture_at),
            compliance=record.compliance,
            compliance_at=_time(record.compliance_at),
            rejected_submissions=record.rejected_submissions,
            attempted_escalations=tuple(record.attempted_escalations),
            error=record.error or self.agent_error,
            error_reason=_reason(record.error_reason) if record.error else self.agent_error_reason,
        )

    def record_agent_error(self, message: str, reason: Reason = Reason.AGENT_CRASHED) -> None:
        """Note how the agent's turn ended without FINISHED: it crashed (the default), ran past
        its wall-clock limit (AgentTimeout), exited without reporting FINISHED
        (AgentExitedWithoutFinish), all three the agent's failures, or its model endpoint failed
        (ModelUnavailable, the infrastructure's: the trial ends Errored). The first one noted
        stands."""
        if self.agent_error:
            return
        self.agent_error = message or "the agent raised an exception"
        self.agent_error_reason = reason

    # ---- act ----------------------------------------------------------------------------
    def execute(self, actions: Sequence[Action]) -> None:
        """Carry out actions in order (each is idempotent)."""
        for action in actions:
            self._run(action)

    def _run(self, action: Action) -> None:
        env = self.env
        if isinstance(action, ProvisionEnvironment):
            env.provision()
        elif isinstance(action, TakeBaseline):
            self.evidence.put_snapshot(action.key, env.snapshot())
        elif isinstance(action, InjectFault):
            env.inject(action.key, list(action.changes))
        elif isinstance(action, CollectSample):
            if self.evidence.snapshot(action.key) is None:
                self.evidence.put_snapshot(action.key, env.snapshot())
        elif isinstance(action, RemoveFault):
            env.remove(action.key)
        elif isinstance(action, OpenSession):
            self._open(action)
        elif isinstance(action, RecordTopology):
            if self.evidence.topology(action.key) is None:
                self.evidence.put_topology(action.key, self._topology(action.kinds))
        elif isinstance(action, MarkReady):
            session = self.session()
            if session is not None and session.state.value in ("Waiting", "Ready"):
                self.registry.mark_ready(action.trial_id, action.deadline)
        elif isinstance(action, CloseSession):
            self._close()
        elif isinstance(action, ResetEnvironment):
            env.provision()
        elif isinstance(action, MarkForRebuild):
            self.rebuild_reason = action.reason
            log.warning(
                "the environment of trial %s is marked for rebuild: %s",
                self.ctx.name,
                action.reason,
                extra={"trial": self.ctx.name, "reason": action.reason},
            )
            if self._on_rebuild is not None:
                self._on_rebuild(action.reason)

    def _open(self, action: OpenSession) -> None:
        if self.session() is not None or self.evidence.agent(agent_key(self.ctx)) is not None:
            return
        self.registry.open(
            TrialSession(
                trial_id=action.trial_id,
                token=self._token_factory(),
                scenario=self.ctx.scenario,
                env=self.env,
                telemetry=action.telemetry,
                agent_name=action.agent_name,
                allow_oracle=action.allow_oracle,
                virtual_time=self.virtual_time,
                # On a virtual clock every call into the environment is computation, so the
                # session shares the runner's lock; on wall time the environment waits by
                # sleeping, and sharing it would stall the agent's calls during the runner's
                # waits (and the runner during an agent's wait).
                lock=self.lock if self.virtual_time else threading.RLock(),
            )
        )

    def _close(self) -> None:
        session = self.session()
        if session is None:
            if self.evidence.agent(agent_key(self.ctx)) is None:
                self.evidence.put_agent(
                    agent_key(self.ctx),
                    AgentRecord(
                        state="Closed",
                        error=self.agent_error,
                        error_reason=self.agent_error_reason.value,
                    ),
                )
            return
        with session.lock:
            record = AgentRecord(
                state=session.state.value,
                started_at=_iso(session.started_at),
                finished_at=_iso(session.finished_at),
                diagnosis=session.diagnosis,
                diagnosis_at=_iso(session.diagnosis_at),
                mitigation=session.mitigation,
                posture=session.posture,
                posture_at=_iso(session.posture_at),
                compliance=session.compliance,
                compliance_at=_iso(session.compliance_at),
                rejected_submissions=session.rejected_submissions,
                attempted_escalations=list(session.escalations),
                error=self.agent_error,
                error_reason=self.agent_error_reason.value,
                audit=[entry.as_dict() for entry in session.audit],
            )
        self.evidence.put_agent(agent_key(self.ctx), record)
        self.registry.close(self.ctx.session_id)

    def trajectory(self) -> list[dict[str, object]]:
        """The audit trail of the agent's calls (from the open session or the stored record)."""
        session = self.session()
        if session is not None:
            return [entry.as_dict() for entry in session.audit]
        record = self.evidence.agent(agent_key(self.ctx))
        return list(record.audit) if record is not None else []


def _reason(value: str) -> Reason:
    try:
        return Reason(value)
    except ValueError:
        return Reason.AGENT_CRASHED


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
