"""BenchmarkRun handlers: resolve scenarios, create and schedule Trials, aggregate their results.

Level-based: every tick compares the Trials that should exist with those that do, admits queued
Trials within the run's concurrency and the environment's capacity, and recomputes the summary
from the Trials' statuses, so an operator restart resumes a run from the API alone.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from typing import Any

import kopf

from itbench.core.catalog import Catalog, CatalogError
from itbench.core.complexity import effective_complexity
from itbench.core.models.agent_submission import AgentSubmission
from itbench.core.models.base import API_VERSION, GROUP, VERSION, Domain, LocalObjectReference
from itbench.core.models.benchmark_run import BenchmarkRun, BenchmarkRunStatus, RunPhase, RunSummary
from itbench.core.models.report import TrialRecord
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialPhase, TrialSpec, TrialStatus
from itbench.core.scoring.aggregate import build_report, headline
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.tasks import tasks_for
from itbench.execution.plan import trial_seed
from itbench.operator.bodies import (
    ADMITTED,
    CANCELLED,
    RUN_LABEL,
    annotation,
    condition,
    now,
    parse,
    problem_text,
    source,
)
from itbench.operator.kubeapi import (
    AGENT_SUBMISSIONS,
    BENCHMARK_RUNS,
    SCENARIOS,
    TRIALS,
    Json,
    owner_reference,
)
from itbench.operator.runtime import OperatorRuntime

MAX_NAME = 253
FINAL_RUN_PHASES = (RunPhase.SUCCEEDED, RunPhase.CANCELLED)


def trial_name(run: str, scenario: str, attempt: int) -> str:
    """The deterministic name of one Trial of a run (creation is idempotent by name).

    `<run>-<scenario>-<digest>-<attempt>`: the digest of (run, scenario) keeps runs apart whose
    names and scenario names join alike (run `r-finops` with scenario `no-fault-control`, and
    run `r` with `finops-no-fault-control`). Long names are cut before the digest.
    """
    digest = hashlib.sha256(f"{run}/{scenario}".encode()).hexdigest()
    name = f"{run}-{scenario}-{digest[:6]}-{attempt}"
    if len(name) <= MAX_NAME:
        return name
    suffix = f"-{digest[:12]}-{attempt}"
    return f"{run}-{scenario}"[: MAX_NAME - len(suffix)].rstrip("-.") + suffix


def report_name(run: str) -> str:
    """Name of the ConfigMap holding a run's full report."""
    return f"{run[: MAX_NAME - 7]}-report"


def _trial_status(trial: Mapping[str, Any]) -> TrialStatus | None:
    raw = trial.get("status")
    if not raw:
        return None
    try:
        return TrialStatus.model_validate(raw)
    except ValueError:
        return None


def _final(trial: Mapping[str, Any]) -> bool:
    status = _trial_status(trial)
    return status is not None and status.phase.final


def _ready_scenarios(runtime: OperatorRuntime) -> dict[str, Scenario]:
    scenarios: dict[str, Scenario] = {}
    for body in runtime.api.list_objects(SCENARIOS):
        if (body.get("status") or {}).get("phase") != "Ready":
            continue
        scenario, _ = parse(Scenario, body)
        if scenario is not None:
            scenarios[scenario.name] = scenario
    return scenarios


def _unvalidated_scenarios(runtime: OperatorRuntime) -> list[str]:
    """Scenarios the operator has not yet validated at their current generation."""
    waiting: list[str] = []
    for body in runtime.api.list_objects(SCENARIOS):
        status = body.get("status") or {}
        validated = status.get("phase") in ("Ready", "Invalid") and status.get(
            "observedGeneration"
        ) == body["metadata"].get("generation")
        if not validated:
            waiting.append(str(body["metadata"]["name"]))
    return sorted(waiting)


def _record(trial: Mapping[str, Any], scenario: Scenario | None, agent: str) -> TrialRecord:
    spec = TrialSpec.model_validate(trial["spec"])
    status = _trial_status(trial) or TrialStatus()
    if scenario is not None:
        complexity = effective_complexity(scenario.spec)[0]
        domain = scenario.spec.domain
        klass = scenario.spec.scenario_class
        traces = scenario.spec.environment.telemetry.masked_by(spec.telemetry).traces
    else:  # the Scenario was deleted after the run resolved it
        complexity, domain, klass, traces = None, None, "Unknown", spec.telemetry.traces
    return TrialRecord(
        trial=trial["metadata"]["name"],
        run=spec.run_ref.name,
        scenario=spec.scenario,
        attempt=spec.attempt,
        domain=domain or Domain.SRE,
        scenario_class=klass,
        complexity=complexity,
        traces_enabled=traces,
        phase=status.phase if status.phase.final else TrialPhase.ERRORED,
        reason=status.reason,
        scores=status.scores,
        agent=agent,
        tasks=tasks_for(scenario) if scenario is not None else [],
    )


class _Reconciler:
    """One reconcile of one BenchmarkRun."""

    def __init__(self, runtime: OperatorRuntime, body: kopf.Body) -> None:
        self.runtime = runtime
        self.api = runtime.api
        self.body: Json = {
            "apiVersion": body.get("apiVersion"),
            "kind": body.get("kind"),
            "metadata": dict(body["metadata"]),
            "spec": body.get("spec"),
        }
        meta = body["metadata"]
        self.name: str = meta["name"]
        self.namespace: str = meta["namespace"]
        self.generation: int | None = meta.get("generation")
        self.uid: str = str(meta.get("uid", ""))
        written = runtime.run_statuses.get(self.uid)
        self.old: Json = dict(written if written is not None else (body.get("status") or {}))
        try:
            self.previous = BenchmarkRunStatus.model_validate(self.old)
        except ValueError:
            self.previous = BenchmarkRunStatus()
        self.raw_body = body
        self._scenarios: dict[str, Scenario] | None = None

    # -- outcomes -----------------------------------------------------------------------------
    def write(self, status: BenchmarkRunStatus, event: tuple[str, str, bool] | None = None) -> None:
        # The event goes first, so whoever sees the new status also finds the event about it.
        status = status.model_copy(update={"observed_generation": self.generation})
        changed = status.phase != self.previous.phase
        if event is not None and (changed or self.previous.observed_generation != self.generation):
            reason, message, warning = event
            self.api.event(self.body, reason, message, warning=warning)
        elif changed:
            self.api.event(self.body, status.phase.value, f"run is {status.phase.value}")
        wire = status.wire()
        self.api.patch_status(BENCHMARK_RUNS, self.namespace, self.name, wire, self.old)
        self.runtime.run_statuses[self.uid] = wire

    def invalid(self, reason: str, message: str) -> None:
        conditions = condition(
            self.previous.conditions, "Valid", False, reason, message, self.generation
        )
        status = self.previous.model_copy(
            update={"phase": RunPhase.INVALID, "conditions": conditions}
        )
        self.write(status, (reason, message, True))

    def pending(self, reason: str, message: str) -> None:
        conditions = condition(
            self.previous.conditions, "Valid", False, reason, message, self.generation
        )
        status = self.previous.model_copy(
            update={"phase": RunPhase.PENDING, "conditions": conditions}
        )
        self.write(status, (reason, message, False))

    # -- the reconcile ------------------------------------------------------------------------
    def run(self) -> None:
        if self.previous.phase in FINAL_RUN_PHASES:
            # A finished run keeps its outcome: a later spec edit (say, cancel) is acknowledged
            # by observedGeneration and changes nothing else.
            if self.previous.observed_generation != self.generation:
                self.write(self.previous)
            return
        run, problems = parse(BenchmarkRun, self.raw_body)
        if run is None:
            self.invalid(
                "InvalidSpec",
                f"{source(self.body)} is invalid: {problem_text(problems)}; fix the spec",
            )
            return
        agent_name = run.spec.agent_ref.name
        agent_body = self.api.get(AGENT_SUBMISSIONS, self.namespace, agent_name)
        if agent_body is None:
            self.invalid(
                "AgentNotFound",
                f"AgentSubmission {self.namespace}/{agent_name} does not exist; create it or "
                "fix spec.agentRef.name",
            )
            return
        agent, problems = parse(AgentSubmission, agent_body)
        if agent is None:
            self.invalid(
                "AgentInvalid",
                f"AgentSubmission {self.namespace}/{agent_name} is invalid: "
                f"{problem_text(problems)}",
            )
            return
        if not (agent_body.get("status") or {}).get("ready"):
            self.pending(
                "AgentNotReady",
                f"AgentSubmission {self.namespace}/{agent_name} is not Ready yet; see its "
                "conditions",
            )
            return
        names = self.previous.scenarios
        if not names:
            # A selection is made once: wait until every Scenario has been validated, or a
            # catalog applied together with the run would be cut to the part checked so far.
            waiting = _unvalidated_scenarios(self.runtime)
            if waiting:
                shown = ", ".join(waiting[:5]) + (", ..." if len(waiting) > 5 else "")
                self.pending(
                    "ScenariosValidating",
                    f"waiting for {len(waiting)} Scenario(s) to be validated ({shown})",
                )
                return
            try:
                chosen = Catalog(self.scenarios().values()).select(
                    run.spec.scenarios,
                    level=agent.spec.level,
                    classes=agent.spec.scenario_classes,
                    domain=agent.spec.type,
                )
            except CatalogError as exc:
                self.invalid("ScenarioSelection", f"spec.scenarios: {exc}")
                return
            names = [s.name for s in chosen]
        self.reconcile_trials(run, names, agent_name)

    def scenarios(self) -> dict[str, Scenario]:
        """The Ready Scenarios by name (read once per reconcile, and only when needed)."""
        if self._scenarios is None:
            self._scenarios = _ready_scenarios(self.runtime)
        return self._scenarios

    def reconcile_trials(self, run: BenchmarkRun, names: list[str], agent: str) -> None:
        spec = run.spec
        wanted = [(s, a) for a in range(spec.trials_per_scenario) for s in names]
        trials = {
            t["metadata"]["name"]: t
            for t in self.api.list_objects(TRIALS, self.namespace, f"{RUN_LABEL}={self.name}")
        }
        if not spec.cancel:
            for scenario, attempt in wanted:
                tname = trial_name(self.name, scenario, attempt)
                if tname in trials:
                    continue
                body = self.trial_body(run, tname, scenario, attempt)
                if not self.api.create(TRIALS, self.namespace, body):
                    # It exists but was not listed: read it rather than trust our own copy.
                    existing = self.api.get(TRIALS, self.namespace, tname)
                    if existing is None:
                        continue  # deleted meanwhile; the next tick creates it again
                    owner = (existing["metadata"].get("labels") or {}).get(RUN_LABEL)
                    if owner != self.name:
                        self.invalid(
                            "TrialNameTaken",
                            f"Trial {self.namespace}/{tname} already exists and belongs to "
                            f"{owner or 'no run'}; rename this run",
                        )
                        return
                    body = existing
                trials[tname] = body
        ordered = sorted(
            trials.values(), key=lambda t: (t["spec"]["attempt"], t["spec"]["scenario"])
        )
        finished = [t for t in ordered if _final(t)]
        active = [t for t in ordered if not _final(t) and annotation(t, ADMITTED)]
        queued = [t for t in ordered if not _final(t) and not annotation(t, ADMITTED)]
        slots = min(spec.concurrency, spec.environment.capacity)
        if spec.cancel:
            for trial in active:
                if not annotation(trial, CANCELLED):
                    self.api.annotate(
                        TRIALS, self.namespace, trial["metadata"]["name"], {CANCELLED: "true"}
                    )
        else:
            free = max(slots - len(active), 0)
            for trial in queued[:free]:
                self.api.annotate(
                    TRIALS, self.namespace, trial["metadata"]["name"], {ADMITTED: "true"}
                )
            active += queued[:free]
            queued = queued[free:]
        # A cancelled run's queued Trials never start: they are not waiting.
        self.runtime.metrics.queue_depth.labels(namespace=self.namespace, run=self.name).set(
            0 if spec.cancel else len(queued)
        )
        self.summarise(run, names, ordered, finished, active, agent)

    def trial_body(self, run: BenchmarkRun, name: str, scenario: str, attempt: int) -> Json:
        spec = TrialSpec(
            run_ref=LocalObjectReference(name=self.name),
            agent_ref=run.spec.agent_ref,
            scenario=scenario,
            attempt=attempt,
            seed=trial_seed(run.spec.seed, scenario, attempt),
            telemetry=run.spec.telemetry,
            timeouts=run.spec.timeouts,
            environment=run.spec.environment,
            allow_oracle=run.spec.allow_oracle,
        )
        return {
            "apiVersion": API_VERSION,
            "kind": "Trial",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {RUN_LABEL: self.name},
                "ownerReferences": [owner_reference(self.body)],
            },
            "spec": spec.wire(),
        }

    def summarise(
        self,
        run: BenchmarkRun,
        names: list[str],
        trials: list[Json],
        finished: list[Json],
        active: list[Json],
        agent: str,
    ) -> None:
        total = len(trials)
        previous = self.previous
        summary = previous.summary
        report_ref = previous.report_ref
        cancelled = run.spec.cancel
        if cancelled:
            phase = RunPhase.CANCELLED if not active else RunPhase.RUNNING
        elif total and len(finished) == total:
            phase = RunPhase.SUCCEEDED
        else:
            phase = RunPhase.RUNNING
        complete = phase in FINAL_RUN_PHASES
        if complete or len(finished) != previous.finished_trials:
            scenarios = self.scenarios()
            records = [_record(t, scenarios.get(t["spec"]["scenario"]), agent) for t in finished]
            report = build_report(records, DEFAULT_PROFILE, agent=agent, created_at=now())
            summary = headline(report) if records else RunSummary()
            if complete:
                cm = report_name(self.name)
                self.api.put_config_map(
                    self.namespace,
                    cm,
                    {"report.json": report.model_dump_json(by_alias=True)},
                    self.body,
                )
                report_ref = f"configmap/{cm}"
        conditions = condition(
            previous.conditions,
            "Valid",
            True,
            "Resolved",
            f"{len(names)} scenarios x {run.spec.trials_per_scenario} trials",
            self.generation,
        )
        if complete:
            reason = "Cancelled" if cancelled else "AllTrialsFinished"
            message = f"{len(finished)}/{total} trials finished; report in {report_ref}"
        else:
            reason = "Cancelling" if cancelled else "TrialsRunning"
            message = f"{len(finished)}/{total} finished, {len(active)} running"
        conditions = condition(conditions, "Complete", complete, reason, message, self.generation)
        started = previous.started_at or (now().isoformat() if active or finished else None)
        status = previous.model_copy(
            update={
                "phase": phase,
                "progress": f"{len(finished)}/{total}",
                "total_trials": total,
                "finished_trials": len(finished),
                "running_trials": len(active),
                "queued_trials": total - len(finished) - len(active),
                "scenarios": names,
                "summary": summary,
                "report_ref": report_ref,
                "started_at": started,
                "finished_at": previous.finished_at or (now().isoformat() if complete else None),
                "conditions": conditions,
            }
        )
        event = None
        if phase != previous.phase:
            event = (phase.value, f"run is {phase.value}: {message}", False)
        self.write(status, event)


def delete_trials(runtime: OperatorRuntime, body: kopf.Body) -> int:
    """Delete a run's Trials (their finalizers release the environments); return those left."""
    meta = body["metadata"]
    trials = runtime.api.list_objects(TRIALS, meta["namespace"], f"{RUN_LABEL}={meta['name']}")
    for trial in trials:
        runtime.api.delete(TRIALS, meta["namespace"], trial["metadata"]["name"])
    return len(trials)


def register(registry: kopf.OperatorRegistry, runtime: OperatorRuntime) -> None:
    """Register the BenchmarkRun handlers of one operator instance.

    Args:
        registry: The operator's Kopf registry.
        runtime: What the handlers share.
    """

    @kopf.timer(
        GROUP,
        VERSION,
        BENCHMARK_RUNS,
        id="reconcile",
        interval=runtime.config.run_tick_seconds,
        registry=registry,
    )
    def reconcile(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("BenchmarkRun"):
            _Reconciler(runtime, body).run()

    @kopf.on.delete(GROUP, VERSION, BENCHMARK_RUNS, id="release-trials", registry=registry)
    def release(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("BenchmarkRun"):
            left = delete_trials(runtime, body)
        if not left:
            meta = body["metadata"]
            runtime.run_statuses.pop(str(meta.get("uid", "")), None)
            with contextlib.suppress(KeyError):  # never reconciled: no series to drop
                runtime.metrics.queue_depth.remove(meta["namespace"], meta["name"])
        if left:
            raise kopf.TemporaryError(
                f"waiting for {left} trials to release their environments",
                delay=runtime.config.retry_seconds,
            )
