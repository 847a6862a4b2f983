"""Trial handlers: drive the core's trial state machine from a Kopf timer, one tick at a time.

Each tick reads the Trial's status, lets the executor observe the trial's environment, asks the
state machine (`itbench.core.runner.step`) what to do, executes the actions through the
environment port and the gateway sessions, and writes the new status. The environment's clock
moves once per tick by what the state machine asked to wait. Actions are idempotent (keyed by the
trial's UID), so a tick replayed after an operator restart injects nothing twice.
"""

from __future__ import annotations

import logging
import secrets
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from time import perf_counter
from typing import Any

import kopf

from itbench.core.catalog import validate_template
from itbench.core.models.agent_submission import AgentSubmission, BuiltinAgent
from itbench.core.models.base import GROUP, VERSION, Condition
from itbench.core.models.benchmark_run import EnvironmentType, Execution
from itbench.core.models.trial import Trial, TrialPhase, TrialStatus
from itbench.core.runner.actions import Action, Decision, InjectFault, RemoveFault
from itbench.core.runner.context import OUTCOMES, Owner, Reason, TrialContext, session_id_for
from itbench.core.runner.machine import abort, new_status, step
from itbench.core.variants import canonical_values, values_label
from itbench.environments.port import Environment, EnvironmentFailure
from itbench.execution.driver import threaded_agent
from itbench.execution.evidence import EvidenceStore
from itbench.execution.executor import TrialExecutor
from itbench.operator import jobs, workloads
from itbench.operator.artefacts import (
    ARTEFACT_LABEL,
    TRAJECTORY,
    TRAJECTORY_KEY,
    config_map_ref,
    trajectory_document,
    trajectory_name,
)
from itbench.operator.bodies import (
    ADMITTED,
    CANCELLED,
    FORCE_RELEASE,
    RUN_LABEL,
    annotation,
    bounded,
    condition,
    controller_uid,
    parse,
    parsed_status,
    problem_text,
    scenario_document,
    source,
)
from itbench.operator.bodies import now as wall_clock
from itbench.operator.kubeapi import (
    AGENT_SUBMISSIONS,
    BENCHMARK_RUNS,
    SCENARIOS,
    TRIALS,
    WRITE_ERRORS,
    Json,
)
from itbench.operator.runtime import OperatorRuntime

log = logging.getLogger(__name__)


class TrialSetupError(Exception):
    """The trial cannot be set up (its Scenario or AgentSubmission is missing or invalid)."""


@dataclass
class _Live:
    """What the operator keeps in memory for a running trial (rebuilt after a restart)."""

    ctx: TrialContext
    executor: TrialExecutor
    agent: AgentSubmission
    agent_ran: bool = False
    published: bool = False
    status: TrialStatus | None = None


@dataclass
class _Unsaved:
    """A finished trial whose trajectory the API refused to store: kept until a retry stores it."""

    run: str
    calls: list[dict[str, Any]]
    status: TrialStatus


Stored = tuple[bool, str, str]
"""The TrajectoryStored condition of a finished trial: (stored, reason, message)."""

LEASED = "Leased"
"""Condition of a cluster Trial: the cluster and slot its lease holds."""
TRAJECTORY_STORED = "TrajectoryStored"
"""Condition of a finished Trial: whether its trajectory is in `status.trajectoryRef`."""
ORPHANED = "Orphaned"
"""Reason of a Trial no BenchmarkRun owns: it never runs."""
INVALID_SPEC = "InvalidSpec"
"""Reason of a Trial whose spec does not parse."""
EVENT_CHARS = 240
"""Most characters of a Trial's phase Event (the full message is in status)."""


def _status(body: Mapping[str, Any]) -> TrialStatus | None:
    return parsed_status(TrialStatus, body)


def _stored(body: Mapping[str, Any]) -> Json:
    raw = body.get("status")
    return dict(raw) if isinstance(raw, Mapping) else {}


def _fixed_time(status: TrialStatus | None, fallback: datetime) -> datetime:
    if status is not None and status.timeline:
        return status.timeline[-1].time
    return fallback


class TrialDriver:
    """Advances Trials and releases what they hold; one per operator instance."""

    def __init__(self, runtime: OperatorRuntime) -> None:
        """Bind the driver to the operator's runtime."""
        self.runtime = runtime
        self.api = runtime.api
        self._live: dict[str, _Live] = {}
        self._done: set[str] = set()
        # One lock per Trial: a tick and the deletion finalizer never run at the same time, so a
        # tick in flight cannot inject into an environment the finalizer has just released.
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # Trials whose owning run was checked (UID -> True): checked once, not on every tick.
        self._owned: set[str] = set()
        # Finished trials whose trajectory is still to be stored (the API refused it), by UID.
        self._unsaved: dict[str, _Unsaved] = {}
        # Counting a run's stored trajectories and adding one happen together.
        self._retention = threading.Lock()
        # Trials with environment.execution: job run in a Job's pod, not here.
        self._jobs = jobs.TrialJobs(runtime.api, runtime.config, self._write)

    def _lock(self, uid: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(uid, threading.Lock())

    # ---- setting a trial up -------------------------------------------------------------------
    def _context(self, trial: Trial, uid: str) -> tuple[TrialContext, AgentSubmission]:
        spec = trial.spec
        namespace = trial.metadata.namespace or "default"
        scenario_body = self.api.get(SCENARIOS, None, spec.scenario)
        if scenario_body is None:
            raise TrialSetupError(f"Scenario {spec.scenario} does not exist")
        variants, problems = validate_template(
            scenario_document(scenario_body), source(scenario_body)
        )
        if variants is None:
            raise TrialSetupError(f"Scenario {spec.scenario} is invalid: {problem_text(problems)}")
        wanted = canonical_values(spec.parameters)
        found = [i for i in variants.instances if canonical_values(i.values) == wanted]
        if not found:
            raise TrialSetupError(
                f"Scenario {spec.scenario} has no instance with spec.parameters "
                f"{values_label(spec.parameters) or '(none)'}; was the template changed?"
            )
        scenario = found[0].scenario
        agent_body = self.api.get(AGENT_SUBMISSIONS, namespace, spec.agent_ref.name)
        if agent_body is None:
            raise TrialSetupError(
                f"AgentSubmission {namespace}/{spec.agent_ref.name} does not exist"
            )
        agent, problems = parse(AgentSubmission, agent_body)
        if agent is None:
            raise TrialSetupError(
                f"AgentSubmission {namespace}/{spec.agent_ref.name} is invalid: "
                f"{problem_text(problems)}"
            )
        ctx = TrialContext(
            uid=uid,
            name=workloads.gateway_trial_id(namespace, trial.metadata.name),
            spec=spec,
            scenario=scenario,
            agent_name=agent.metadata.name,
        )
        return ctx, agent

    def _live_for(
        self,
        trial: Trial,
        uid: str,
        env: Environment,
        known: tuple[TrialContext, AgentSubmission] | None = None,
    ) -> _Live:
        live = self._live.get(uid)
        if live is None:
            ctx, agent = known or self._context(trial, uid)
            on_cluster = ctx.spec.environment.type == EnvironmentType.CLUSTER
            executor = TrialExecutor(
                ctx,
                env,
                self.runtime.sessions,
                _cluster_evidence(self.runtime, trial, uid)
                if on_cluster
                else self.runtime.evidence,
                config=self.runtime.config.runner,
                # A live cluster's clock is its own: agents' calls take the time they take.
                virtual_time=not on_cluster,
                token_factory=lambda: self._kept_token(trial, uid) or secrets.token_urlsafe(24),
            )
            live = _Live(ctx=ctx, executor=executor, agent=agent)
            self._live[uid] = live
        return live

    def _kept_token(self, trial: Trial, uid: str) -> str | None:
        """The gateway token an earlier operator process gave this trial's agent, if any.

        The token Secret outlives the process that wrote it, and an image or external agent
        still working holds that token: a session reopened after a restart takes it again, so
        the agent keeps its access instead of running out its deadline as if it had failed.
        """
        name = workloads.workload_name(trial.metadata.name)
        try:
            kept = self.api.secret_data(trial.metadata.namespace or "", name)
        except WRITE_ERRORS as exc:
            log.warning("cannot read the token Secret %s of trial %s: %s", name, uid, exc)
            return None
        if kept.get("trialId") != session_id_for(uid):
            return None  # another Trial's Secret of the same name (deleted and made again)
        return kept.get("token") or None

    # ---- one tick -----------------------------------------------------------------------------
    def advance(self, body: kopf.Body) -> None:
        """Advance one Trial by one tick and write its status.

        Args:
            body: The Trial object.
        """
        uid = body["metadata"]["uid"]
        if body["metadata"].get("deletionTimestamp"):
            return
        if uid in self._unsaved:
            with self._lock(uid):
                self._store_again(body)
            return
        if uid in self._done:
            return
        with self._lock(uid):
            self._advance(body)

    def retrying(self, uid: str) -> bool:
        """Whether a finished trial's trajectory still waits to be stored."""
        return uid in self._unsaved

    def waiting_for_admission(self, body: Mapping[str, Any], status: Any) -> bool:
        """Whether a Trial has nothing to do until its run admits or cancels it.

        True for a Trial this operator has already found owned by its run and marked Queued,
        which carries neither annotation. Its next step comes with a change of the Trial (the
        run's annotation, a deletion), and every change is a watch event that asks again.
        """
        phase = status.get("phase") if isinstance(status, Mapping) else None
        uid = str((body.get("metadata") or {}).get("uid", ""))
        return (
            phase == TrialPhase.QUEUED
            and uid in self._owned
            and not annotation(body, ADMITTED)
            and not annotation(body, CANCELLED)
        )

    def _advance(self, body: kopf.Body) -> None:
        meta = body["metadata"]
        uid, name, namespace = meta["uid"], meta["name"], meta["namespace"]
        old = _stored(body)
        status = _status(body)
        if uid in self._done or (status is not None and status.phase.final):
            return
        live = self._live.get(uid)
        if live is not None and live.status is not None and _behind(status, live.status):
            # The body lags behind what this operator last wrote (its watch event is on the way).
            status = live.status
        before = status
        trial, problems = parse(Trial, body)
        if trial is None:
            self._write(body, old, status, _invalid_status(status, problem_text(problems)))
            return
        started = status is not None and status.phase not in (TrialPhase.PENDING, TrialPhase.QUEUED)
        if not started and uid not in self._owned:
            orphan = self._orphan(body, trial)
            if orphan is not None:
                self._write(body, old, status, _orphan_status(status, orphan))
                return
            self._owned.add(uid)
        if not annotation(body, ADMITTED) and not annotation(body, CANCELLED):
            if status is None or status.phase in (TrialPhase.PENDING, TrialPhase.QUEUED):
                queued = TrialStatus(
                    phase=TrialPhase.QUEUED,
                    reason="WaitingForCapacity",
                    message=(
                        f"waiting for a slot of BenchmarkRun {namespace}/{trial.spec.run_ref.name} "
                        "(its concurrency and the environment's capacity)"
                    ),
                )
                self._write(body, old, status, queued)
            return
        if self._jobs.handles(body, trial, old, status):
            return
        env = self.runtime.environments.get(uid)
        on_cluster = trial.spec.environment.type == EnvironmentType.CLUSTER
        try:
            if env is None and started and on_cluster:
                # A live cluster outlives the operator: its lease and injection records are on
                # the Trial, so a restarted operator takes the trial over (limits do not apply).
                env = self.runtime.environments.create(self._context(trial, uid)[0])
                if env is None:
                    message = self.runtime.environments.waiting(uid) or "no environment"
                    self._end_without_env(
                        body, old, status or TrialStatus(), Reason.ENVIRONMENT_FAILURE, message
                    )
                    return
            if env is None:
                if started:
                    assert status is not None
                    message = (
                        f"the environment of trial {namespace}/{name} is gone (it lived in an "
                        "operator process that ended); the trial cannot continue"
                    )
                    self._end_without_env(body, old, status, Reason.ENVIRONMENT_FAILURE, message)
                    return
                if annotation(body, CANCELLED):
                    self._end_without_env(
                        body,
                        old,
                        status or TrialStatus(),
                        Reason.CANCELLED,
                        "the run was cancelled (spec.cancel) before this trial started",
                    )
                    return
                limit = self.runtime.config.max_environments
                known = (
                    self._context(trial, uid)
                    if len(self.runtime.environments) < limit  # else skip the reads: full
                    else None
                )
                env = (
                    self.runtime.environments.create(known[0], limit=limit)
                    if known is not None
                    else None
                )
                if known is None or env is None:
                    why = self.runtime.environments.waiting(uid)
                    waiting = TrialStatus(
                        phase=TrialPhase.QUEUED,
                        reason="WaitingForEnvironment",
                        message=(
                            f"admitted; {why}"
                            if why
                            else f"admitted; waiting for one of the operator's {limit} environments"
                        ),
                    )
                    self._write(body, old, status, waiting)
                    return
                live = self._live_for(trial, uid, env, known)
            else:
                live = self._live_for(trial, uid, env)
        except TrialSetupError as exc:
            self._end_without_env(
                body, old, status or TrialStatus(), Reason.PLATFORM_ERROR, str(exc)
            )
            return
        except EnvironmentFailure as exc:
            self._end_without_env(
                body, old, status or TrialStatus(), Reason.ENVIRONMENT_FAILURE, str(exc)
            )
            return
        if status is None or (
            status.phase in (TrialPhase.PENDING, TrialPhase.QUEUED) and not status.timeline
        ):
            status = new_status(live.executor.now()).model_copy(
                update={"clock": "virtual" if live.executor.virtual_time else "wall"}
            )
        if annotation(body, CANCELLED):
            status = self._abort(
                live, status, Reason.CANCELLED, "the run was cancelled (spec.cancel)"
            )
        else:
            status = self._steps(live, status)
        stored: Stored | None = None
        if status.phase.final:
            # Before the release closes the session that holds the audit trail.
            calls = [dict(c) for c in live.executor.trajectory()]
            status, stored = self._keep_trajectory(body, trial.spec.run_ref.name, calls, status)
        written = self._write(body, old, before, status, stored)
        if uid in self._unsaved:
            self._unsaved[uid].status = written
        live.status = status
        if not status.phase.final:
            self._publish(body, live)
        if status.phase.final:
            self._release(body, live.agent)

    def _orphan(self, body: kopf.Body, trial: Trial) -> str | None:
        """Why no BenchmarkRun owns this Trial (None when its run does).

        A Trial runs only when its controller owner reference is the UID of the run its
        spec.runRef names; a label alone never makes a run adopt a Trial.
        """
        namespace = trial.metadata.namespace or body["metadata"]["namespace"]
        run = trial.spec.run_ref.name
        owner = controller_uid(body, "BenchmarkRun")
        if owner is None:
            return (
                "no BenchmarkRun owns this Trial (it has no controller owner reference); Trials "
                "are created by BenchmarkRuns, so delete it and create a BenchmarkRun instead"
            )
        run_body = self.api.get(BENCHMARK_RUNS, namespace, run)
        if run_body is None:
            return (
                f"BenchmarkRun {namespace}/{run} (spec.runRef) does not exist; this Trial will "
                "never run: delete it"
            )
        if str(run_body["metadata"].get("uid", "")) != owner:
            return (
                f"BenchmarkRun {namespace}/{run} (spec.runRef) does not own this Trial (its owner "
                "reference names another object); this Trial will never run: delete it"
            )
        return None

    def _steps(self, live: _Live, status: TrialStatus) -> TrialStatus:
        executor = live.executor
        waits = 0
        for _ in range(self.runtime.config.steps_per_tick):
            try:
                with executor.lock:
                    obs = executor.observe(status)
                    decision = step(
                        live.ctx, status, obs, executor.now(), config=self.runtime.config.runner
                    )
                    self._execute(executor, decision.actions)
            except EnvironmentFailure as exc:
                return self._abort(live, status, Reason.ENVIRONMENT_FAILURE, str(exc))
            except Exception as exc:
                log.exception("platform error", extra={"trial": live.ctx.name})
                return self._abort(
                    live, status, Reason.PLATFORM_ERROR, f"{type(exc).__name__}: {exc}"
                )
            status = decision.status
            if status.phase.final:
                return status
            if self._run_builtin_agent(live, status):
                continue
            if decision.wait_seconds > 0:
                try:
                    with executor.lock:
                        executor.env.advance(decision.wait_seconds)
                except EnvironmentFailure as exc:
                    return self._abort(live, status, Reason.ENVIRONMENT_FAILURE, str(exc))
                waits += 1
                if waits >= self.runtime.config.waits_per_tick:
                    return status
        return status

    def _execute(self, executor: TrialExecutor, actions: Sequence[Action]) -> None:
        metrics = self.runtime.metrics
        for action in actions:
            if isinstance(action, InjectFault | RemoveFault):
                start = perf_counter()
                try:
                    executor.execute([action])
                except Exception:
                    failures = (
                        metrics.injection_failures
                        if isinstance(action, InjectFault)
                        else metrics.recovery_failures
                    )
                    failures.inc()
                    raise
                seconds = (
                    metrics.injection_seconds
                    if isinstance(action, InjectFault)
                    else metrics.recovery_seconds
                )
                seconds.observe(perf_counter() - start)
            else:
                executor.execute([action])

    def _run_builtin_agent(self, live: _Live, status: TrialStatus) -> bool:
        runtime = live.agent.spec.runtime
        if (runtime.builtin is None and runtime.command is None) or live.agent_ran:
            return False
        if status.phase not in (TrialPhase.READY, TrialPhase.AGENT_RUNNING):
            return False
        session = live.executor.session()
        if session is None or session.state.value != "Ready" or live.executor.agent_error:
            return False
        live.agent_ran = True
        if runtime.command is not None:
            self._run_command_agent(live)
            return True
        from itbench.execution.benchmark import builtin_runner

        assert runtime.builtin is not None
        runner = builtin_runner(BuiltinAgent(runtime.builtin.name), self.runtime.gateway())
        threaded_agent(runner, self.runtime.config.agent_wall_seconds)(live.executor)
        return True

    def _run_command_agent(self, live: _Live) -> None:
        """Run a command agent against the gateway on loopback (the agent's failures are its
        own: a missing program, a crash or a hang fails the trial). It sees its own variables
        and credentials, not the operator's environment; it runs in the operator's pod, so the
        command runtime is for trusted agents (untrusted ones run as images)."""
        from itbench.execution.agents import AgentProblemError, from_command
        from itbench.execution.runners import command_runner, loopback_url

        command = live.agent.spec.runtime.command
        assert command is not None
        meta = live.agent.metadata
        env = {e.name: e.value for e in command.env}
        if command.credentials_secret_ref is not None:
            env.update(
                self.api.secret_data(meta.namespace or "", command.credentials_secret_ref.name)
            )
        try:
            info = from_command(
                shlex.join(command.command), name=meta.name, wall_seconds=command.wall_seconds
            )
        except AgentProblemError as exc:
            live.executor.record_agent_error(str(exc))
            return
        app = self.runtime.gateway()
        runner = command_runner(info, lambda: loopback_url(app), extra_env=env, inherit_env=False)
        runner(live.executor)

    def _abort(self, live: _Live, status: TrialStatus, reason: Reason, message: str) -> TrialStatus:
        executor = live.executor
        try:
            now = executor.now()
        except EnvironmentFailure:
            now = _fixed_time(status, wall_clock())
        decision: Decision = abort(live.ctx, status, now, reason, message)
        for action in decision.actions:
            try:
                self._execute(executor, [action])
            except Exception:
                log.warning("clean-up action failed", extra={"trial": live.ctx.name})
        return decision.status

    def _end_without_env(
        self, body: kopf.Body, old: Json, status: TrialStatus, reason: Reason, message: str
    ) -> None:
        phase, owner = OUTCOMES.get(reason, (TrialPhase.ERRORED, Owner.PLATFORM))
        who = owner.value if owner else "platform"
        base = status if status.timeline else status.model_copy(update={"timeline": []})
        final = base.model_copy(
            update={"phase": phase, "reason": str(reason), "message": f"{who}: {message}"}
        )
        self._write(body, old, _status(body), final)
        # After a restart nothing is known in memory: look the agent up, so that an image
        # agent's Job and token Secret go too.
        self._release(body, self._agent_of(body))

    # ---- trajectories -------------------------------------------------------------------------
    def _keep_trajectory(
        self, body: kopf.Body, run: str, calls: list[dict[str, Any]], status: TrialStatus
    ) -> tuple[TrialStatus, Stored]:
        """Store a finished trial's audit trail in a ConfigMap it owns and refer to it.

        Never fails the trial: a refused write is logged, kept in memory and retried on the
        next tick; a run over the retention limit keeps no more trajectories.
        """
        meta = body["metadata"]
        uid, name, namespace = meta["uid"], meta["name"], meta["namespace"]
        config = self.runtime.config
        cm = trajectory_name(name)
        try:
            with self._retention:
                kept = self.api.config_map_names(
                    namespace, f"{RUN_LABEL}={run},{ARTEFACT_LABEL}={TRAJECTORY}"
                )
                if cm not in kept and len(kept) >= config.trajectories_per_run:
                    self._unsaved.pop(uid, None)
                    return status, (
                        False,
                        "RetentionLimit",
                        f"not stored: BenchmarkRun {namespace}/{run} already keeps {len(kept)} "
                        f"trajectories, the operator's limit (--trajectories-per-run "
                        f"{config.trajectories_per_run})",
                    )
                text, dropped = trajectory_document(
                    f"{namespace}/{name}", run, calls, config.trajectory_bytes
                )
                self.api.put_config_map(
                    namespace,
                    cm,
                    {TRAJECTORY_KEY: text},
                    _plain(body),
                    labels={RUN_LABEL: run, ARTEFACT_LABEL: TRAJECTORY},
                )
        except WRITE_ERRORS as exc:
            # Once at WARNING; the retries, every tick until the API takes it, at DEBUG.
            level = logging.DEBUG if uid in self._unsaved else logging.WARNING
            log.log(
                level,
                "trajectory not stored; retrying on the next tick",
                extra={"trial": f"{namespace}/{name}", "error": bounded(str(exc), 300)},
            )
            self._unsaved[uid] = _Unsaved(run=run, calls=calls, status=status)
            return status, (
                False,
                "WriteFailed",
                f"ConfigMap {namespace}/{cm} could not be written "
                f"({bounded(str(exc), 200)}); retrying",
            )
        self._unsaved.pop(uid, None)
        ref = config_map_ref(cm)
        if dropped:
            stored = (
                True,
                "Truncated",
                f"{len(calls) - dropped} of {len(calls)} calls stored in {ref}; {dropped} left "
                f"out over the {config.trajectory_bytes}-byte limit (the document says so)",
            )
        else:
            stored = (True, "Stored", f"{len(calls)} calls stored in {ref}")
        return status.model_copy(update={"trajectory_ref": ref}), stored

    def _store_again(self, body: kopf.Body) -> None:
        """Retry storing the trajectory of a finished trial (its status gains the reference)."""
        uid = body["metadata"]["uid"]
        unsaved = self._unsaved.get(uid)
        if unsaved is None:
            return
        status, stored = self._keep_trajectory(body, unsaved.run, unsaved.calls, unsaved.status)
        if stored[1] != "WriteFailed":  # stored, or the run keeps no more: say so
            self._write(body, _stored(body), unsaved.status, status, stored)

    def _write(
        self,
        body: kopf.Body,
        old: Json,
        previous: TrialStatus | None,
        status: TrialStatus,
        stored: Stored | None = None,
    ) -> TrialStatus:
        meta = body["metadata"]
        generation = meta.get("generation")
        conditions = _conditions(status, previous, generation)
        if stored is not None:
            conditions = condition(conditions, TRAJECTORY_STORED, *stored, generation)
        leased = _lease_condition(body)
        if leased is not None:
            conditions = condition(conditions, LEASED, *leased, generation)
        status = status.model_copy(
            update={
                "observed_generation": generation,
                "conditions": conditions,
                "clock": status.clock or (previous.clock if previous is not None else None),
            }
        )
        flipped = previous is None or previous.phase != status.phase
        if flipped:  # the event goes first, so whoever sees the new phase also finds its event
            # An agent that fails is the benchmark working (Normal); only what the platform, the
            # environment or the object itself broke is a Warning.
            warning = status.phase == TrialPhase.ERRORED and status.reason != Reason.CANCELLED
            self.api.event(
                _plain(body),
                status.reason or status.phase.value,
                bounded(f"{status.phase.value}: {status.message}".strip(": "), EVENT_CHARS),
                warning=warning,
            )
        self.api.patch_status(TRIALS, meta["namespace"], meta["name"], status.wire(), old)
        self.runtime.metrics.trial_phase(meta["uid"], status.phase.value)
        if flipped and status.phase.final:
            self.runtime.metrics.trial_outcomes.labels(
                phase=status.phase.value, reason=status.reason
            ).inc()
            if status.scores is not None:
                self.runtime.metrics.trial_scored(status.scores)
        return status

    # ---- agent workloads ----------------------------------------------------------------------
    def _publish(self, body: kopf.Body, live: _Live) -> None:
        """Hand an image or external agent its trial: the token Secret, and for images a Job."""
        runtime = live.agent.spec.runtime
        session = live.executor.session()
        if live.published or (runtime.image is None and runtime.external is None) or not session:
            return
        trial = _plain(body)
        namespace = trial["metadata"]["namespace"]
        config = self.runtime.config
        self.api.ensure(workloads.token_secret(trial, session.token))
        if runtime.image is not None:
            account, api_token = workloads.agent_account(
                live.ctx.spec.environment,
                config.agent_service_account,
                config.cluster_agent_service_account,
            )
            self.api.ensure(workloads.service_account(namespace, account))
            self.api.ensure(
                workloads.agent_job(
                    trial,
                    runtime.image,
                    gateway_url=config.gateway_url,
                    service_account_name=account,
                    deadline_seconds=live.ctx.spec.timeouts.agent_seconds,
                    api_token=api_token,
                )
            )
        live.published = True

    def _release(self, body: kopf.Body, agent: AgentSubmission | None) -> None:
        """Drop what a trial holds: faults left behind, its environment, session and workload."""
        meta = body["metadata"]
        uid = meta["uid"]
        self._done.add(uid)
        live = self._live.pop(uid, None)
        agent = agent or (live.agent if live is not None else None)
        env = self.runtime.environments.get(uid)
        if env is not None:
            try:
                _remove_faults(env)
            except EnvironmentFailure as exc:
                # Keep the environment: the finalizer retries, or is forced to let go. What is
                # left stays recorded (a cluster trial's records keep its cluster dirty).
                log.warning("removal failed at release: %s", exc, extra={"trial": meta["name"]})
                self.api.event(
                    _plain(body),
                    "RemovalFailed",
                    f"the trial ended but removing what it left failed ({exc}); deleting the "
                    "Trial retries it",
                    warning=True,
                )
            else:
                self.runtime.environments.release(uid)
        self.runtime.evidence.forget(uid)
        self.runtime.sessions.close(session_id_for(str(uid)))
        if agent is not None and agent.spec.runtime.kind() in ("image", "external"):
            name = workloads.workload_name(meta["name"])
            if agent.spec.runtime.image is not None:
                self.api.remove("Job", meta["namespace"], name)
            self.api.remove("Secret", meta["namespace"], name)

    # ---- deletion -----------------------------------------------------------------------------
    def finalize(self, body: kopf.Body) -> None:
        """Remove a deleted Trial's faults and agent workload (idempotent).

        Raises:
            kopf.TemporaryError: The environment is unreachable and no force-release was asked.
        """
        meta = body["metadata"]
        uid = meta["uid"]
        lock = self._lock(uid)
        if not lock.acquire(timeout=self.runtime.config.retry_seconds):
            raise kopf.TemporaryError(
                f"{source(body)}: a tick is still running; releasing after it",
                delay=self.runtime.config.retry_seconds,
            )
        try:
            self._finalize(body, meta, uid)
        finally:
            lock.release()
        with self._locks_guard:
            self._locks.pop(uid, None)

    def _finalize(self, body: kopf.Body, meta: Any, uid: str) -> None:
        self._done.add(uid)  # no tick starts work on it from now on
        self._unsaved.pop(uid, None)
        env = self.runtime.environments.get(uid) or self._reattach(body, uid)
        if env is not None:
            try:
                _remove_faults(env)
            except EnvironmentFailure as exc:
                if not annotation(body, FORCE_RELEASE):
                    message = (
                        f"cannot remove the faults of {source(body)}: the environment is "
                        f"unreachable ({exc}); retrying. To release without recovery, annotate "
                        f"it {FORCE_RELEASE}=true"
                    )
                    self.api.event(_plain(body), "ReleaseBlocked", message, warning=True)
                    raise kopf.TemporaryError(
                        message, delay=self.runtime.config.retry_seconds
                    ) from exc
                self.api.event(
                    _plain(body),
                    "ForceReleased",
                    f"released without recovery ({FORCE_RELEASE}=true): the environment "
                    "may still carry the fault and must be rebuilt",
                    warning=True,
                )
                self.runtime.environments.discard(uid)
        self._release(body, self._agent_of(body))
        self.runtime.metrics.trial_phase(uid, None)

    def _reattach(self, body: kopf.Body, uid: str) -> Environment | None:
        """The environment of a cluster Trial whose faults a previous operator process left
        recorded on it (None: nothing to remove, or not a cluster Trial).

        Raises:
            kopf.TemporaryError: The cluster cannot be reached, or what it carries is unknown,
                and no force-release was asked.
        """
        from itbench.operator.clusters import InjectionRecords

        trial, _ = parse(Trial, body)
        if trial is None or trial.spec.environment.type != EnvironmentType.CLUSTER:
            return None
        if not InjectionRecords.of(body).outstanding:
            return None
        try:
            return self.runtime.environments.create(self._context(trial, uid)[0])
        except (TrialSetupError, EnvironmentFailure) as exc:
            if annotation(body, FORCE_RELEASE):
                return None  # released without recovery, as asked
            message = (
                f"cannot rebuild the environment of {source(body)} to remove its faults "
                f"({exc}); retrying. To release without recovery, annotate it "
                f"{FORCE_RELEASE}=true"
            )
            self.api.event(_plain(body), "ReleaseBlocked", message, warning=True)
            raise kopf.TemporaryError(message, delay=self.runtime.config.retry_seconds) from exc

    def _agent_of(self, body: kopf.Body) -> AgentSubmission | None:
        live = self._live.get(body["metadata"]["uid"])
        if live is not None:
            return live.agent
        trial, _ = parse(Trial, body)
        if trial is None:
            return None
        ref = trial.spec.agent_ref.name
        agent_body = self.api.get(AGENT_SUBMISSIONS, body["metadata"]["namespace"], ref)
        if agent_body is None:
            return None
        agent, _ = parse(AgentSubmission, agent_body)
        return agent


def _cluster_evidence(runtime: OperatorRuntime, trial: Trial, uid: str) -> EvidenceStore:
    """A cluster trial's evidence: its snapshots also kept in a ConfigMap it owns, so that a
    restarted operator scores it against the baseline taken before its faults."""
    from itbench.operator.clusters import trial_evidence

    namespace = trial.metadata.namespace or "default"
    return trial_evidence(runtime.evidence, runtime.api, namespace, trial.metadata.name, uid)


def _lease_condition(body: Mapping[str, Any]) -> tuple[bool, str, str] | None:
    from itbench.operator.clusters import lease_condition

    return lease_condition(body)


def _remove_faults(env: Environment) -> None:
    # Each injection recorded the state the earlier ones left: undo them last in, first out.
    for key in reversed(env.injections()):
        env.remove(key)


def _behind(seen: TrialStatus | None, written: TrialStatus) -> bool:
    """Whether a status read from a body is older than the one last written."""
    if seen is None:
        return True
    if seen.phase == TrialPhase.QUEUED and written.phase != TrialPhase.QUEUED:
        return True
    return len(seen.timeline) < len(written.timeline)


def _plain(body: kopf.Body) -> Json:
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": dict(body["metadata"]),
    }


def _invalid_status(status: TrialStatus | None, message: str) -> TrialStatus:
    base = status or TrialStatus()
    return base.model_copy(
        update={
            "phase": TrialPhase.ERRORED,
            "reason": INVALID_SPEC,
            "message": f"the Trial spec is invalid: {message}; it will never run",
        }
    )


def _orphan_status(status: TrialStatus | None, message: str) -> TrialStatus:
    base = status or TrialStatus()
    return base.model_copy(
        update={"phase": TrialPhase.ERRORED, "reason": ORPHANED, "message": f"orphan: {message}"}
    )


def _conditions(
    status: TrialStatus, previous: TrialStatus | None, generation: int | None
) -> list[Condition]:
    """The Trial's standard conditions, derived from its phase.

    Valid: the spec parsed and a run owns the Trial. Ready: the agent may work on the trial now.
    Complete: the trial has ended (any final phase; the reason and the phase say how).
    """
    conditions = list(previous.conditions if previous is not None else status.conditions)
    phase = status.phase
    reason = status.reason or phase.value
    valid = reason not in (INVALID_SPEC, ORPHANED)
    conditions = condition(
        conditions,
        "Valid",
        valid,
        "Validated" if valid else reason,
        "the spec is valid and a BenchmarkRun owns the Trial" if valid else status.message,
        generation,
    )
    ready = phase in (TrialPhase.READY, TrialPhase.AGENT_RUNNING)
    conditions = condition(
        conditions,
        "Ready",
        ready,
        reason,
        "the agent may work on the trial" if ready else f"{phase.value}: {status.message}",
        generation,
    )
    return condition(
        conditions,
        "Complete",
        phase.final,
        reason,
        f"{phase.value}: {status.message}" if phase.final else f"in progress ({phase.value})",
        generation,
    )


def _not_final(status: Any, **_: Any) -> bool:
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase not in (TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.ERRORED)


def register(registry: kopf.OperatorRegistry, runtime: OperatorRuntime) -> None:
    """Register the Trial handlers of one operator instance.

    Args:
        registry: The operator's Kopf registry.
        runtime: What the handlers share.
    """
    driver = TrialDriver(runtime)

    def due(body: kopf.Body, status: Any, **_: Any) -> bool:
        # Finished trials tick on only while their trajectory waits to be stored; a queued
        # trial does not tick until its run admits or cancels it (a run creates all its Trials
        # at once, and a timer per waiting Trial would hold memory and the handlers' threads).
        if driver.retrying(str(body["metadata"].get("uid", ""))):
            return True
        return _not_final(status) and not driver.waiting_for_admission(body, status)

    @kopf.timer(
        GROUP,
        VERSION,
        TRIALS,
        id="advance",
        interval=runtime.config.trial_tick_seconds,
        when=due,
        registry=registry,
    )
    def advance(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("Trial"):
            driver.advance(body)

    def in_a_job(body: kopf.Body, **_: Any) -> bool:
        # A filter sees every Trial, valid or not: any shape of spec is an answer, never an error.
        spec = body.get("spec")
        environment = spec.get("environment") if isinstance(spec, Mapping) else None
        return (
            isinstance(environment, Mapping)
            and environment.get("execution") == Execution.JOB.value
            and not runtime.config.trial_pod
        )

    @kopf.on.event(GROUP, VERSION, TRIALS, id="job-status", when=in_a_job, registry=registry)
    def job_status(body: kopf.Body, **_: Any) -> None:
        # A trial Job's pod writes its Trial's status: the metrics follow it from the watch,
        # final phases included (the timer stops at those).
        status = _status(body)
        if status is not None:
            runtime.metrics.trial_seen(str(body["metadata"]["uid"]), status)

    @kopf.on.delete(GROUP, VERSION, TRIALS, id="release", registry=registry)
    def release(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("Trial"):
            driver.finalize(body)
