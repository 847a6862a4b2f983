"""The trial state machine: from Pending to Succeeded, Failed or Errored, as pure decisions.

`step` reads the trial's status and what the executor observed, and returns the next status with
idempotent actions (data) for an executor to carry out. It never reads a clock: time comes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from itbench.core.models.base import ConditionStatus, set_condition
from itbench.core.models.observations import AlertState
from itbench.core.models.trial import (
    MAX_RECORDED_ESCALATIONS,
    AgentOutput,
    TimelineEntry,
    TrialPhase,
    TrialStatus,
)
from itbench.core.runner.actions import (
    Action,
    CloseSession,
    CollectSample,
    Decision,
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
    AGENT_END_REASONS,
    DEFAULT_CONFIG,
    OUTCOMES,
    RESET_CONDITION,
    AgentProgress,
    AgentProgressState,
    Observation,
    Owner,
    Reason,
    RunnerConfig,
    TrialContext,
    topology_kinds,
)
from itbench.core.runner.evaluation import (
    ALERTS_FIRING,
    EvaluationInput,
    TrialScorer,
    baseline_differences,
    score_trial,
    unhealthy,
)

# ---- the state machine -----------------------------------------------------------------------


def new_status(now: datetime) -> TrialStatus:
    """The status of a trial that has just been created."""
    return TrialStatus(
        phase=TrialPhase.PENDING,
        reason=Reason.CREATED,
        timeline=[TimelineEntry(phase=TrialPhase.PENDING, time=now, message="trial created")],
    )


def step(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    *,
    scorer: TrialScorer | None = None,
    config: RunnerConfig = DEFAULT_CONFIG,
) -> Decision:
    """Advance a trial by one step.

    Replaying a step with the same status and observation yields the same decision, and every
    action is keyed by the trial's uid and step, so an executor may replay after a crash.

    Args:
        ctx: The trial.
        status: Its current status.
        obs: What the executor observed (see `PHASE_NEEDS`).
        now: The environment's current time.
        scorer: Scores the trial in Evaluating (defaults to the scoring core's `score_trial`).
        config: Timing constants.

    Returns:
        The next status, the actions to execute, and how long to wait before the next step.
    """
    handler = _HANDLERS.get(status.phase)
    if handler is None:
        return Decision(status=status)
    return handler(ctx, status, obs, now, scorer or score_trial, config)


def abort(
    ctx: TrialContext, status: TrialStatus, now: datetime, reason: Reason, message: str
) -> Decision:
    """End a trial at once because the platform or the environment broke (owner in the message).

    The injected faults are removed and the environment marked for rebuild, best effort.

    Args:
        ctx: The trial.
        status: Its current status.
        now: The current time.
        reason: An Errored reason (EnvironmentFailure, PlatformError or Cancelled).
        message: What went wrong.
    """
    if status.phase.final:
        return Decision(status=status)
    phase, owner = OUTCOMES.get(reason, (TrialPhase.ERRORED, Owner.PLATFORM))
    text = f"{owner.value if owner else 'platform'}: {message}"
    actions: list[Action] = [RemoveFault(key=k) for k in reversed(ctx.inject_keys())]
    actions.append(CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id))
    actions.append(MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=text))
    return Decision(status=_enter(status, phase, now, reason, text), actions=actions)


def trial_outcome(reason: str) -> tuple[TrialPhase, str | None]:
    """The final phase and owner a reason leads to (Errored, platform, for unknown reasons)."""
    try:
        phase, owner = OUTCOMES[Reason(reason)]
    except (ValueError, KeyError):
        return TrialPhase.ERRORED, Owner.PLATFORM.value
    return phase, owner.value if owner else None


_Handler = Callable[
    [TrialContext, TrialStatus, Observation, datetime, TrialScorer, RunnerConfig], Decision
]


def _pending(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    return Decision(
        status=_enter(
            status, TrialPhase.PROVISIONING, now, Reason.PROVISIONING, "provisioning environment"
        ),
        actions=[ProvisionEnvironment(key=f"{ctx.uid}/provision")],
    )


def _provisioning(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    if obs.baseline is not None:
        if not ctx.inject_keys():
            return Decision(
                status=_enter(
                    status,
                    TrialPhase.AWAITING_ALERTS,
                    now,
                    Reason.CONTROL if ctx.scenario.spec.control else Reason.FAULT_INJECTED,
                    "nothing to inject",
                )
            )
        return _start_injecting(ctx, status, now)
    problems = unhealthy(obs.snapshot)
    if not problems and elapsed >= config.settle_seconds:
        return Decision(status=status, actions=[TakeBaseline(key=f"{ctx.uid}/baseline")])
    if elapsed >= config.provision_timeout_seconds:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.ENVIRONMENT_NOT_READY,
            f"environment: not healthy after {elapsed:.0f} s: {'; '.join(problems)}",
            inject=False,
            config=config,
        )
    wait = config.settle_seconds - elapsed if not problems else config.poll_seconds
    return Decision(status=status, wait_seconds=max(wait, 0.0) or config.poll_seconds)


def _start_injecting(ctx: TrialContext, status: TrialStatus, now: datetime) -> Decision:
    actions: list[Action] = list(ctx.injections())
    ids = ", ".join(f.id for f in ctx.scenario.spec.faults) or "nothing"
    return Decision(
        status=_enter(status, TrialPhase.INJECTING, now, Reason.INJECTING, f"injecting {ids}"),
        actions=actions,
    )


def _injecting(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    missing = [k for k in ctx.inject_keys() if k not in obs.injected]
    if not missing:
        if ctx.scenario.spec.control or not ctx.scenario.spec.faults:
            return Decision(
                status=_enter(
                    status,
                    TrialPhase.AWAITING_ALERTS,
                    now,
                    Reason.CONTROL if ctx.scenario.spec.control else Reason.FAULT_INJECTED,
                    "nothing to inject",
                )
            )
        entered = _enter(
            status,
            TrialPhase.AWAITING_ALERTS,
            now,
            Reason.FAULT_INJECTED,
            "fault injected; waiting for the triggering alerts",
        )
        return Decision(status=entered.model_copy(update={"injections": 1}))
    if _elapsed(status, now) >= config.injection_timeout_seconds:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.INJECTION_FAILED,
            f"fault injection: not confirmed for {', '.join(missing)}",
            inject=True,
            config=config,
        )
    redo = _start_injecting(ctx, status, now).actions
    return Decision(
        status=status,
        actions=[a for a in redo if isinstance(a, InjectFault) and a.key in missing],
        wait_seconds=config.poll_seconds,
    )


def _awaiting_alerts(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    spec = ctx.scenario.spec
    firing = [a for a in obs.alerts if a.state == AlertState.FIRING]
    if spec.control:
        if firing:
            names = ", ".join(sorted({a.alertname for a in firing}))
            return _recover_then(
                ctx,
                status,
                now,
                Reason.CONTROL_NOT_QUIET,
                f"environment: alerts fired in a no-fault control: {names}",
                inject=True,
                config=config,
            )
        window = min(config.control_window_seconds, ctx.alerts_timeout_seconds())
        if elapsed < window:
            return Decision(status=status, wait_seconds=min(config.poll_seconds, window - elapsed))
        return _make_ready(ctx, status, now, "control window passed quietly")
    expected = spec.triggers.alerts
    pending = [e for e in expected if not any(a.matches(e.alertname, e.labels) for a in firing)]
    if not pending:
        names = ", ".join(e.alertname for e in expected) or "none expected"
        return _make_ready(ctx, status, now, f"triggering alerts firing: {names}")
    timeout = ctx.alerts_timeout_seconds()
    if elapsed >= timeout:
        names = ", ".join(e.alertname + (f"{e.labels}" if e.labels else "") for e in pending)
        return _recover_then(
            ctx,
            status,
            now,
            Reason.FAULT_DID_NOT_MANIFEST,
            f"fault injection: expected alerts did not fire within {timeout:.0f} s: {names}",
            inject=True,
            config=config,
        )
    return Decision(status=status, wait_seconds=min(config.poll_seconds, timeout - elapsed))


def _make_ready(ctx: TrialContext, status: TrialStatus, now: datetime, message: str) -> Decision:
    deadline = now + timedelta(seconds=ctx.spec.timeouts.agent_seconds)
    entered = _enter(status, TrialPhase.READY, now, Reason.AGENT_READY, message)
    topology = RecordTopology(key=f"{ctx.uid}/topology", kinds=topology_kinds(ctx.scenario))
    return Decision(
        status=entered.model_copy(update={"ready_at": now}),
        actions=[topology, *_session_actions(ctx, deadline)],
    )


def _session_actions(ctx: TrialContext, deadline: datetime) -> list[Action]:
    return [
        OpenSession(
            key=f"{ctx.uid}/session",
            trial_id=ctx.session_id,
            agent_name=ctx.agent_name,
            telemetry=ctx.agent_telemetry(),
            allow_oracle=ctx.spec.allow_oracle,
        ),
        MarkReady(key=f"{ctx.uid}/ready", trial_id=ctx.session_id, deadline=deadline),
    ]


def _deadline(ctx: TrialContext, status: TrialStatus) -> datetime:
    ready_at = status.ready_at or status.timeline[-1].time
    return ready_at + timedelta(seconds=ctx.spec.timeouts.agent_seconds)


def _ready(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    deadline = _deadline(ctx, status)
    agent = obs.agent
    if agent is None:
        # The session is gone (e.g. the gateway restarted): publish it again.
        return Decision(status=status, actions=_session_actions(ctx, deadline))
    if agent.error:
        return _to_evaluating(ctx, status, agent, now, agent.error_reason, agent.error)
    if agent.state in (AgentProgressState.STARTED, AgentProgressState.FINISHED):
        started = agent.started_at or now
        entered = _enter(
            status, TrialPhase.AGENT_RUNNING, started, Reason.AGENT_STARTED, "agent started"
        )
        return Decision(status=entered.model_copy(update={"agent_started_at": started}))
    if now >= deadline:
        return _to_evaluating(
            ctx, status, agent, now, Reason.AGENT_TIMEOUT, "the agent never started"
        )
    remaining = (deadline - now).total_seconds()
    return Decision(status=status, wait_seconds=min(config.agent_poll_seconds, remaining))


def _agent_running(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    deadline = _deadline(ctx, status)
    agent = obs.agent
    if agent is None:
        return Decision(status=status, actions=_session_actions(ctx, deadline))
    if agent.error:
        return _to_evaluating(ctx, status, agent, now, agent.error_reason, agent.error)
    if agent.state == AgentProgressState.FINISHED:
        return _to_evaluating(ctx, status, agent, now, Reason.AGENT_FINISHED, "agent finished")
    if agent.state == AgentProgressState.CLOSED and now < deadline:
        return _to_evaluating(
            ctx,
            status,
            agent,
            now,
            Reason.AGENT_TIMEOUT,
            "the agent's session was closed before it finished",
        )
    if now >= deadline:
        limit = ctx.spec.timeouts.agent_seconds
        return _to_evaluating(
            ctx,
            status,
            agent,
            now,
            Reason.AGENT_TIMEOUT,
            f"the agent did not finish within its {limit} s limit",
        )
    remaining = (deadline - now).total_seconds()
    return Decision(status=status, wait_seconds=min(config.agent_poll_seconds, remaining))


def _to_evaluating(
    ctx: TrialContext,
    status: TrialStatus,
    agent: AgentProgress,
    now: datetime,
    reason: Reason,
    message: str,
) -> Decision:
    output = AgentOutput(
        diagnosis=agent.diagnosis,
        mitigation=agent.mitigation,
        posture=agent.posture,
        compliance=agent.compliance,
        compliance_submitted_at=agent.compliance_at,
        diagnosis_submitted_at=agent.diagnosis_at,
        rejected_submissions=agent.rejected_submissions,
        attempted_escalations=list(agent.attempted_escalations[:MAX_RECORDED_ESCALATIONS]),
    )
    finished = agent.finished_at if reason == Reason.AGENT_FINISHED and agent.finished_at else now
    timeline = list(status.timeline)
    if status.phase == TrialPhase.READY and agent.started_at is not None:
        timeline.append(
            TimelineEntry(
                phase=TrialPhase.AGENT_RUNNING, time=agent.started_at, message="agent started"
            )
        )
    base = status.model_copy(
        update={
            "timeline": timeline,
            "agent_output": output,
            "agent_started_at": status.agent_started_at or agent.started_at,
            "agent_finished_at": finished,
        }
    )
    return Decision(
        status=_enter(base, TrialPhase.EVALUATING, now, reason, message),
        actions=[CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id)],
    )


def sample_keys(ctx: TrialContext, config: RunnerConfig = DEFAULT_CONFIG) -> list[str]:
    """Keys of the observation-window samples of a trial, in time order."""
    count = max(config.sample_count, 1) + 1 if ctx.window_seconds() > 0 else 1
    return [f"{ctx.uid}/sample/{i}" for i in range(count)]


def _evaluating(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    entered_at = status.timeline[-1].time
    elapsed = (now - entered_at).total_seconds()
    window = ctx.window_seconds()
    keys = sample_keys(ctx, config)
    interval = window / (len(keys) - 1) if len(keys) > 1 else 0.0
    due = len(keys) if interval == 0 else min(math.floor(elapsed / interval + 1e-9) + 1, len(keys))
    missing = [k for k in keys[:due] if k not in obs.samples]
    if missing:
        return Decision(status=status, actions=[CollectSample(key=k) for k in missing])
    if due < len(keys):
        next_at = due * interval
        return Decision(status=status, wait_seconds=max(next_at - elapsed, 0.0))
    if obs.baseline is None:
        return _recover_then(
            ctx,
            status,
            now,
            Reason.PLATFORM_ERROR,
            "platform: the baseline snapshot of this trial is missing",
            inject=True,
            config=config,
        )
    output = status.agent_output or AgentOutput()
    evaluation = EvaluationInput(
        context=ctx,
        output=output,
        ready_at=status.ready_at or entered_at,
        agent_finished_at=status.agent_finished_at or entered_at,
        baseline=obs.baseline,
        samples=[obs.samples[k] for k in keys],
        alert_history=list(obs.alert_history),
        topology_objects=list(obs.topology_objects),
        service_calls=list(obs.service_calls),
        window_seconds=window,
    )
    scores, failed = scorer(evaluation)
    mitigation = scores.mitigation
    cleared_at: datetime | None = None
    if mitigation is not None and mitigation.passed and mitigation.ttr_seconds is not None:
        cleared_at = evaluation.ready_at + timedelta(seconds=mitigation.ttr_seconds)
    scored = status.model_copy(update={"scores": scores, "alerts_cleared_at": cleared_at})
    if status.reason in AGENT_END_REASONS:
        reason = Reason(status.reason)
        message = status.message
    elif failed:
        reason = Reason.TASKS_FAILED
        message = "failed: " + "; ".join(failed)
    else:
        reason = Reason.TASKS_PASSED
        message = "every task passed"
    return _recover_then(ctx, scored, now, reason, message, inject=True, config=config)


def _recover_then(
    ctx: TrialContext,
    status: TrialStatus,
    now: datetime,
    reason: Reason,
    message: str,
    *,
    inject: bool,
    config: RunnerConfig,
) -> Decision:
    if not inject:
        # Nothing was injected: the environment itself is at fault and is rebuilt.
        phase, _owner = trial_outcome(reason)
        return Decision(
            status=_enter(status, phase, now, reason, message),
            actions=[MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=message)],
        )
    # Later injections recorded the state the earlier ones left, so undo them last-in first-out.
    actions: list[Action] = [RemoveFault(key=k) for k in reversed(ctx.inject_keys())]
    if status.phase in (TrialPhase.READY, TrialPhase.AGENT_RUNNING):
        actions.append(CloseSession(key=f"{ctx.uid}/close", trial_id=ctx.session_id))
    if not config.await_recovery:
        # The environment is discarded after this trial: nothing will run on it again.
        phase, owner = trial_outcome(reason)
        final = _final_message(message, owner)
        return Decision(status=_enter(status, phase, now, reason, final), actions=actions)
    return Decision(
        status=_enter(status, TrialPhase.RECOVERING, now, reason, message), actions=actions
    )


def _recovering(
    ctx: TrialContext,
    status: TrialStatus,
    obs: Observation,
    now: datetime,
    scorer: TrialScorer,
    config: RunnerConfig,
) -> Decision:
    elapsed = _elapsed(status, now)
    if obs.baseline is None:
        # Nothing was measured before injection, so only health can be checked.
        differences = unhealthy(obs.snapshot)
    else:
        differences = baseline_differences(obs.baseline, obs.snapshot)
    phase, owner = trial_outcome(status.reason)
    if not differences:
        return Decision(
            status=_enter(
                status, phase, now, Reason(status.reason), _final_message(status.message, owner)
            )
        )
    if elapsed >= ctx.spec.timeouts.recovery_seconds:
        text = f"environment: baseline not restored after {elapsed:.0f} s: " + "; ".join(
            differences
        )
        rebuild = MarkForRebuild(key=f"{ctx.uid}/rebuild", reason=text)
        if phase == TrialPhase.FAILED:
            # The agent already failed; an environment it left broken must not turn its
            # failure into an Errored trial that the report leaves out of the denominators.
            message = f"{_final_message(status.message, owner)}; {text}"
            return Decision(
                status=_enter(status, phase, now, Reason(status.reason), message),
                actions=[rebuild],
            )
        return Decision(
            status=_enter(status, TrialPhase.ERRORED, now, Reason.RECOVERY_FAILED, text),
            actions=[rebuild],
        )
    actions: list[Action] = []
    conditions = status.conditions
    reset_done = any(c.type == RESET_CONDITION for c in conditions)
    # Alerts clear by themselves once the fault is gone; only changed objects need a reset.
    changed = [d for d in differences if not d.startswith(ALERTS_FIRING)]
    if changed and elapsed >= config.reset_after_seconds and not reset_done:
        actions.append(ResetEnvironment(key=f"{ctx.uid}/reset"))
        conditions = set_condition(
            conditions,
            type=RESET_CONDITION,
            status=ConditionStatus.TRUE,
            reason="BaselineNotRestored",
            message="; ".join(changed),
            now=now,
        )
    remaining = ctx.spec.timeouts.recovery_seconds - elapsed
    return Decision(
        status=status.model_copy(update={"conditions": conditions}),
        actions=actions,
        wait_seconds=max(min(config.poll_seconds, remaining), 0.0) or config.poll_seconds,
    )


def _final_message(message: str, owner: str | None) -> str:
    if owner is None or message.startswith(f"{owner}:"):
        return message
    return f"{owner}: {message}"


_HANDLERS: dict[TrialPhase, _Handler] = {
    TrialPhase.PENDING: _pending,
    TrialPhase.QUEUED: _pending,
    TrialPhase.PROVISIONING: _provisioning,
    TrialPhase.INJECTING: _injecting,
    TrialPhase.AWAITING_ALERTS: _awaiting_alerts,
    TrialPhase.READY: _ready,
    TrialPhase.AGENT_RUNNING: _agent_running,
    TrialPhase.EVALUATING: _evaluating,
    TrialPhase.RECOVERING: _recovering,
}


# ---- helpers of the machine ------------------------------------------------------------------


def _elapsed(status: TrialStatus, now: datetime) -> float:
    if not status.timeline:
        return 0.0
    return (now - status.timeline[-1].time).total_seconds()


def _enter(
    status: TrialStatus, phase: TrialPhase, now: datetime, reason: str, message: str
) -> TrialStatus:
    timeline = [*status.timeline, TimelineEntry(phase=phase, time=now, message=message)]
    return status.model_copy(
        update={"phase": phase, "reason": str(reason), "message": message, "timeline": timeline}
    )
