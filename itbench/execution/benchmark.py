"""The embedded benchmark: agents (registered, callables or commands) attempt planned trials,
each on a fresh simulator, in a pool of processes; statuses are persisted per step, so an
interrupted run can be resumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import logging
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench.core.models.agent_record import AgentInfo
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.trial import TimelineEntry, TrialPhase, TrialStatus
from itbench.core.runner.context import Reason, RunnerConfig
from itbench.core.runner.machine import new_status
from itbench.environments.sim.environment import DEFAULT_START
from itbench.environments.sim.twins import twin_for
from itbench.execution.agents import builtin
from itbench.execution.artefacts import RunStore
from itbench.execution.driver import TRIAL_GRACE_SECONDS, AgentRunner, drive_trial
from itbench.execution.evidence import MemoryEvidenceStore
from itbench.execution.executor import TrialExecutor
from itbench.execution.plan import TrialPlan
from itbench.execution.runners import agent_runner, callable_runner, loopback_url
from itbench.gateway.inprocess import InProcessGateway
from itbench.gateway.sessions import SessionRegistry

log = logging.getLogger(__name__)

EMBEDDED_CONFIG = RunnerConfig(agent_poll_seconds=math.inf)
"""In-process agents are done when they return, so the runner waits out the rest at once."""
TRIAL_TWIN_CONFIG = dataclasses.replace(EMBEDDED_CONFIG, await_recovery=False)
"""A benchmark trial's twin is built for it and discarded after it (the next trial gets a new
one): its faults are removed when the trial ends, with no wait for its baseline."""

POOL_RETRIES = 2
"""How often a pool whose worker died is rebuilt for the trials still to run."""


@dataclass
class _Worker:
    """What one worker process reuses across trials: the gateway's registry and the gateway its
    in-process agents call (whose app is served on loopback once an agent command needs it)."""

    registry: SessionRegistry
    app: InProcessGateway

    def url(self) -> str:
        """The URL of this worker's gateway on loopback (served on first use)."""
        return loopback_url(self.app.app)


GC_THRESHOLDS = (1_000_000, 50, 100)
"""Collector thresholds while trials run. A trial allocates a few hundred thousand short-lived
objects (samples, label sets, responses); with the default first-generation threshold of 700
the collector rescans them so often that it costs a fifth of the run. At this threshold a trial
rarely triggers a collection at all, and each trial ends with one (`_run_collected`), when its
environment is garbage: every object is scanned about once, and a process holds at most one
trial's garbage."""
FULL_COLLECTION_EVERY = 32
"""Trials between full collections. After each other trial only the youngest generation is
collected: what the trial allocated, and nearly all of its garbage. The objects that outlive
trials (a worker's caches, grown by its first trials) are then not rescanned after every trial,
which halves the collector's time per trial; a full pass now and then still frees the rare
garbage cycle that reached an older generation."""
_trials_collected = [0]


@contextlib.contextmanager
def _tuned_gc() -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def _init_worker() -> None:
    # A worker process: import and build what its trials share, then keep the collector off
    # those long-lived objects and make it run less often.
    _worker()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@functools.cache
def _worker() -> _Worker:
    # Built on first use in each worker process (never at import), then reused by its trials.
    registry = SessionRegistry()
    return _Worker(registry=registry, app=InProcessGateway(registry))


def builtin_runner(agent: BuiltinAgent | AgentInfo, app: Any) -> AgentRunner:
    """An agent runner calling a built-in (or any callable) agent through the SDK's in-process
    client; the agent is found in the registry.

    Args:
        agent: Which built-in agent.
        app: The gateway app the client calls (no socket).
    """
    info = builtin(agent) if isinstance(agent, BuiltinAgent) else agent
    return callable_runner(info, app)


def restarted(previous: TrialStatus, now: Any) -> TrialStatus:
    """A fresh status for a trial whose environment was lost mid-way (a new process)."""
    status = new_status(now)
    note = TimelineEntry(
        phase=TrialPhase.PENDING,
        time=now,
        message=f"restarted: the environment was lost while {previous.phase.value}",
    )
    return status.model_copy(update={"timeline": [note]})


def run_trial(plan: TrialPlan, root: str | None) -> TrialStatus:
    """Run one planned trial to its final phase on a fresh simulator (spawn-safe entry point).

    The trial holds its worker at most its agent's wall-clock limit plus `TRIAL_GRACE_SECONDS`
    (see `drive_trial`).

    Args:
        plan: The trial.
        root: The run directory to persist into (None: nothing is persisted).

    Returns:
        The final status.
    """
    started = time.monotonic()
    store = RunStore(Path(root)) if root is not None else None
    worker = _worker()
    scenario = plan.scenario
    env = twin_for(scenario, seed=plan.seed)
    ctx = plan.context()
    executor = TrialExecutor(ctx, env, worker.registry, MemoryEvidenceStore(), virtual_time=True)
    previous = store.load_status(plan.name) if store is not None else None
    if previous is not None and previous.phase.final:
        return previous
    status = new_status(env.now()) if previous is None else restarted(previous, env.now())

    written: list[TrialPhase] = []

    def persist(s: TrialStatus) -> None:
        # The twin lives in this process, so a trial interrupted mid-way starts over (see
        # `restarted`): steps within a phase leave nothing a resume could use, and only phase
        # changes are written, for progress and post-mortems.
        if store is not None and (not written or written[-1] != s.phase):
            store.save_status(plan.name, s)
            written.append(s.phase)

    files = None
    if store is not None:
        store.clear_agent_files(plan.name)
        files = store.agent_files(plan.name)
    runner = agent_runner(plan.agent, app=worker.app, gateway_url=worker.url, files=files)
    try:
        final = drive_trial(
            status,
            executor,
            persist=persist,
            run_agent=runner,
            config=TRIAL_TWIN_CONFIG,
            deadline=started + plan.agent.wall_seconds + TRIAL_GRACE_SECONDS,
        )
    finally:
        worker.registry.close(ctx.session_id)
    if store is not None:
        ref = store.save_trajectory(plan.name, executor.trajectory())
        final = final.model_copy(update={"trajectory_ref": ref})
        store.save_status(plan.name, final)
    return final


def _run_collected(plan: TrialPlan, root: str | None) -> TrialStatus:
    """`run_trial`, then a collection of the garbage it left (see `GC_THRESHOLDS` and
    `FULL_COLLECTION_EVERY`)."""
    try:
        return run_trial(plan, root)
    finally:
        collect_after_trial()


def collect_after_trial() -> int:
    """The collection that follows each trial in a process (see `FULL_COLLECTION_EVERY`).

    Returns:
        The number of unreachable objects found.
    """
    _trials_collected[0] += 1
    return gc.collect(2 if _trials_collected[0] % FULL_COLLECTION_EVERY == 0 else 1)


def errored(plan: TrialPlan, message: str, previous: TrialStatus | None = None) -> TrialStatus:
    """The status of a trial the platform could not run at all (at its last known time)."""
    now = previous.timeline[-1].time if previous and previous.timeline else DEFAULT_START
    base = previous or new_status(now)
    entry = TimelineEntry(phase=TrialPhase.ERRORED, time=now, message=f"platform: {message}")
    return base.model_copy(
        update={
            "phase": TrialPhase.ERRORED,
            "reason": Reason.PLATFORM_ERROR.value,
            "message": f"platform: {message}",
            "timeline": [*base.timeline, entry],
        }
    )


Progress = Callable[[TrialPlan, TrialStatus], None]
"""Called once per finished trial."""


def run_trials(
    plans: Sequence[TrialPlan],
    *,
    store: RunStore | None,
    workers: int,
    on_done: Progress | None = None,
) -> dict[str, TrialStatus]:
    """Run planned trials, in a process pool when `workers` > 1.

    A trial's own crash ends that trial (Failed or Errored, by owner); a worker process dying
    rebuilds the pool for the trials still to run; no trial is lost.

    Args:
        plans: The trials.
        store: Where statuses are persisted (None: nowhere).
        workers: Processes to use (1: run in this process).
        on_done: Called as each trial finishes.

    Returns:
        Final status by trial name.
    """
    root = str(store.root) if store is not None else None
    results: dict[str, TrialStatus] = {}

    def done(plan: TrialPlan, status: TrialStatus) -> None:
        results[plan.name] = status
        if on_done is not None:
            on_done(plan, status)

    if workers <= 1:
        for plan in plans:
            try:
                with _tuned_gc():
                    status = _run_collected(plan, root)
            except Exception as exc:
                log.exception("trial crashed", extra={"trial": plan.name})
                status = errored(plan, f"{type(exc).__name__}: {exc}")
            done(plan, status)
        return results
    todo = list(plans)
    for attempt in range(POOL_RETRIES + 1):
        if not todo:
            break
        broken = False
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_init_worker
        ) as pool:
            futures: dict[Future[TrialStatus], TrialPlan] = {
                pool.submit(_run_collected, plan, root): plan for plan in todo
            }
            for future in as_completed(futures):
                plan = futures[future]
                try:
                    status = future.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                except Exception as exc:
                    status = errored(plan, f"{type(exc).__name__}: {exc}")
                done(plan, status)
        todo = [p for p in todo if p.name not in results]
        if broken and attempt == POOL_RETRIES:
            for plan in todo:
                previous = store.load_status(plan.name) if store is not None else None
                done(plan, errored(plan, "the worker process running it died", previous))
            todo = []
    return results


def default_workers() -> int:
    """Worker processes to use by default: the machine's cores."""
    return max(os.cpu_count() or 1, 1)
