"""Drives one trial to a final phase: observe, step the state machine, execute, persist, wait.

The loop persists the status after every step, so a crash between any two steps can be resumed
from the last persisted status: the replayed step's actions are idempotent.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from itbench.core.agent_failures import ModelUnavailableError
from itbench.core.models.trial import TrialPhase, TrialStatus
from itbench.core.runner.actions import Decision
from itbench.core.runner.context import DEFAULT_CONFIG, Reason, RunnerConfig, TrialContext
from itbench.core.runner.evaluation import TrialScorer
from itbench.core.runner.machine import abort, step
from itbench.environments.port import EnvironmentFailure
from itbench.execution.executor import TrialExecutor

log = logging.getLogger(__name__)

AgentRunner = Callable[[TrialExecutor], None]
"""Runs an agent against the trial's open, ready session (returns when the agent is done)."""

Persist = Callable[[TrialStatus], None]
"""Stores a trial's status durably."""

MAX_STEPS = 10_000
TRIAL_GRACE_SECONDS = 120.0
"""Real seconds a trial may hold its worker past its agent's wall-clock limit (provisioning,
waiting for alerts, evaluation and scoring take a few seconds on the twin) before the driver ends
it with `DeadlineExceeded` or `PlatformError`."""
ADVANCE_SLICE_SECONDS = 300.0
"""Longest stretch of environment time advanced between two looks at the wall-clock deadline."""


class TrialStuckError(RuntimeError):
    """The state machine did not reach a final phase within the step budget."""


def drive_trial(
    status: TrialStatus,
    executor: TrialExecutor,
    *,
    persist: Persist,
    run_agent: AgentRunner | None = None,
    scorer: TrialScorer | None = None,
    config: RunnerConfig = DEFAULT_CONFIG,
    max_steps: int = MAX_STEPS,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TrialStatus:
    """Advance a trial until it is Succeeded, Failed or Errored.

    An exception of the environment ends the trial Errored (EnvironmentFailure), any other
    exception of the platform Errored (PlatformError); an exception of the agent is the agent's
    (the runner ends the trial Failed with AgentCrashed), but a `ModelUnavailableError` ends it
    Errored (ModelUnavailable). Exceptions of `persist` propagate: they
    stand for the driver itself crashing, and the trial resumes from the last persisted status.
    A trial still running at `deadline` ends at the next step or slice of waiting: Failed with
    DeadlineExceeded when the agent had changed the environment, else Errored (PlatformError).

    Args:
        status: The trial's last persisted status (a new one, or one to resume from).
        executor: The trial's executor.
        persist: Stores the status after every step.
        run_agent: Runs the agent in-process when the trial is ready (None: the agent runs
            elsewhere and time simply passes).
        scorer: The trial scorer (defaults to the scoring core's).
        config: The state machine's timing constants.
        max_steps: Safety bound on steps.
        deadline: When the trial must have ended, on `clock` (None: no limit); see
            `TRIAL_GRACE_SECONDS`.
        clock: The wall clock `deadline` is read on (seconds).

    Returns:
        The final status.
    """
    ctx = executor.ctx
    agent_ran = False

    def overdue() -> bool:
        return deadline is not None and clock() > deadline

    for _ in range(max_steps):
        if status.phase.final:
            return status
        if overdue():
            status = _overran(ctx, status, executor)
            persist(status)
            return status
        decision = step_trial(status, executor, scorer=scorer, config=config)
        persist(decision.status)
        status = decision.status
        if status.phase.final:
            return status
        if run_agent is not None and not agent_ran and _agent_may_run(status, executor):
            agent_ran = True
            _run_agent(run_agent, executor)
            continue
        if decision.wait_seconds > 0:
            try:
                _advance(executor, decision.wait_seconds, overdue)
            except EnvironmentFailure as exc:
                status = _abort(ctx, status, executor, Reason.ENVIRONMENT_FAILURE, str(exc))
                persist(status)
    raise TrialStuckError(f"trial {ctx.name!r} did not finish within {max_steps} steps")


def _advance(executor: TrialExecutor, seconds: float, overdue: Callable[[], bool]) -> None:
    """Let environment time pass in slices, stopping early once the trial is overdue."""
    left = seconds
    while left > 0:
        piece = min(left, ADVANCE_SLICE_SECONDS)
        with executor.lock:
            executor.env.advance(piece)
        left -= piece
        if overdue():
            return


def _overran(ctx: TrialContext, status: TrialStatus, executor: TrialExecutor) -> TrialStatus:
    """End a trial that held its worker past its deadline, with its owner's reason."""
    what = (
        f"the trial ran past its deadline (the agent's wall-clock limit plus "
        f"{TRIAL_GRACE_SECONDS:g} s) while {status.phase.value}"
    )
    if _agent_changed_it(status, executor):
        log.warning("trial overran after the agent's changes", extra={"trial": ctx.name})
        return _abort(
            ctx, status, executor, Reason.DEADLINE_EXCEEDED, f"{what}, after the agent's changes"
        )
    log.warning("trial overran", extra={"trial": ctx.name})
    return _abort(ctx, status, executor, Reason.PLATFORM_ERROR, what)


def step_trial(
    status: TrialStatus,
    executor: TrialExecutor,
    *,
    scorer: TrialScorer | None = None,
    config: RunnerConfig = DEFAULT_CONFIG,
) -> Decision:
    """One step of a trial: observe, decide, execute (the unit an operator reconciles).

    Persist the returned status afterwards, then let `decision.wait_seconds` pass (advance a
    simulator, or come back later). An exception of the environment or the platform ends the
    trial Errored (owner in the message) after best-effort clean-up.

    Args:
        status: The trial's last persisted status.
        executor: The trial's executor.
        scorer: The trial scorer (defaults to the scoring core's).
        config: The state machine's timing constants.

    Returns:
        The decision whose actions have been executed.
    """
    ctx = executor.ctx
    try:
        with executor.lock:
            obs = executor.observe(status)
            decision = step(ctx, status, obs, executor.now(), scorer=scorer, config=config)
            executor.execute(decision.actions)
    except EnvironmentFailure as exc:
        log.warning("environment failure", extra={"trial": ctx.name, "error": str(exc)})
        return Decision(status=_abort(ctx, status, executor, Reason.ENVIRONMENT_FAILURE, str(exc)))
    except Exception as exc:
        if _agent_changed_it(status, executor):
            # The environment worked until the agent changed it: what the agent sent broke it,
            # and the trial stays in the agent's denominator.
            log.warning("agent-induced failure", extra={"trial": ctx.name, "error": str(exc)})
            return Decision(
                status=_abort(
                    ctx,
                    status,
                    executor,
                    Reason.AGENT_INDUCED_FAILURE,
                    f"the environment broke after the agent's changes: {type(exc).__name__}: "
                    f"{str(exc)[:300]}",
                )
            )
        log.exception("platform error", extra={"trial": ctx.name})
        return Decision(
            status=_abort(
                ctx, status, executor, Reason.PLATFORM_ERROR, f"{type(exc).__name__}: {exc}"
            )
        )
    return decision


def _agent_changed_it(status: TrialStatus, executor: TrialExecutor) -> bool:
    """Whether the agent has changed the environment in this trial (an applied action, or one
    that broke inside the environment)."""
    if status.phase not in (TrialPhase.READY, TrialPhase.AGENT_RUNNING, TrialPhase.EVALUATING):
        return False
    try:
        trail = executor.trajectory()
    except Exception:
        return False
    for entry in trail:
        if not str(entry.get("action", "")).startswith("act."):
            continue
        detail = entry.get("detail")
        result = detail.get("result") if isinstance(detail, dict) else None
        if isinstance(result, dict) and result.get("outcome") == "applied":
            return True
        if entry.get("outcome") == "error" and result is None:
            return True  # the environment raised while carrying the action out
    return False


def _abort(
    ctx: TrialContext, status: TrialStatus, executor: TrialExecutor, reason: Reason, message: str
) -> TrialStatus:
    try:
        now = executor.now()
    except Exception:
        if not status.timeline:
            raise
        now = status.timeline[-1].time
    decision = abort(executor.ctx, status, now, reason, message)
    for action in decision.actions:
        try:
            executor.execute([action])
        except Exception:
            log.warning("clean-up action failed", extra={"trial": executor.ctx.name})
    return decision.status


def _agent_may_run(status: TrialStatus, executor: TrialExecutor) -> bool:
    if status.phase not in (TrialPhase.READY, TrialPhase.AGENT_RUNNING):
        return False
    session = executor.session()
    return session is not None and session.state.value == "Ready" and not executor.agent_error


def _run_agent(run_agent: AgentRunner, executor: TrialExecutor) -> None:
    try:
        run_agent(executor)
    except Exception as exc:
        record_exception(executor, exc)


def record_exception(executor: TrialExecutor, exc: BaseException, where: str = "") -> None:
    """Record an exception the agent raised: AgentCrashed, or ModelUnavailable for a
    `ModelUnavailableError`. `where` says where its traceback is kept."""
    if isinstance(exc, ModelUnavailableError):
        executor.record_agent_error(
            f"the agent's model endpoint failed: {exc}{where}", Reason.MODEL_UNAVAILABLE
        )
        return
    executor.record_agent_error(f"{type(exc).__name__}: {exc}{where}")


def _write_traceback(path: Path | None, lines: list[str]) -> str:
    """Write a traceback to `path`; what to add to the trial's message (nothing without one)."""
    if path is None:
        return ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines), encoding="utf-8")
    except OSError:
        log.warning("the agent's traceback could not be written", extra={"path": str(path)})
        return ""
    return f"; its traceback is kept in {path}"


def threaded_agent(
    run_agent: AgentRunner, wall_seconds: float, traceback_file: Path | None = None
) -> AgentRunner:
    """Wrap an agent runner so that it is abandoned after a wall-clock limit.

    An abandoned agent fails its trial (AgentTimeout); its session is closed by the state
    machine, so its further calls are refused. An exception fails it too (AgentCrashed, or
    ModelUnavailable: Errored). Either way the agent's traceback (where it raised, or where it
    was when abandoned) goes to `traceback_file`.

    Args:
        run_agent: The agent runner.
        wall_seconds: Real seconds the agent may take.
        traceback_file: Where the traceback goes (None: nowhere).
    """

    def run(executor: TrialExecutor) -> None:
        errors: list[BaseException] = []

        def target() -> None:
            try:
                run_agent(executor)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=target, name=f"agent-{executor.ctx.name}", daemon=True)
        thread.start()
        thread.join(wall_seconds)
        if thread.is_alive():
            frame = sys._current_frames().get(thread.ident or -1)
            stack = traceback.format_stack(frame) if frame is not None else []
            head = f"The agent was abandoned after {wall_seconds:g} s, here:\n"
            where = _write_traceback(traceback_file, [head, *stack]) if stack else ""
            executor.record_agent_error(
                f"the agent did not return within its {wall_seconds:g} s wall-clock limit and "
                f"was abandoned{where}",
                Reason.AGENT_TIMEOUT,
            )
        elif errors:
            exc = errors[0]
            where = _write_traceback(traceback_file, traceback.format_exception(exc))
            record_exception(executor, exc, where)

    return run
