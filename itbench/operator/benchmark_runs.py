"""BenchmarkRun handlers: resolve scenarios, create and schedule Trials, aggregate their results.

Level-based: every tick compares the Trials that should exist with those that do, admits queued
Trials within the run's concurrency and the environment's capacity, and recomputes the summary
from the Trials' statuses, so an operator restart resumes a run from the API alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from itbench.core.catalog import Catalog, CatalogError, Variants, validate_template
from itbench.core.complexity import effective_complexity
from itbench.core.models.agent_record import AgentInfo, AgentRuntimeKind
from itbench.core.models.agent_submission import AgentSubmission, AgentSubmissionStatus
from itbench.core.models.base import API_VERSION, GROUP, VERSION, Domain, LocalObjectReference
from itbench.core.models.benchmark_run import (
    BenchmarkRun,
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    EnvironmentType,
    RunPhase,
    RunSummary,
)
from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.scenario import (
    ParameterValue,
    Scenario,
    ScenarioPhase,
    ScenarioStatus,
    Split,
)
from itbench.core.models.trial import TrialPhase, TrialSpec, TrialStatus
from itbench.core.scoring.aggregate import build_report, headline
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.tasks import tasks_for
from itbench.core.variants import instance_seed
from itbench.execution.plan import TrialPlan, trial_seed
from itbench.execution.report_html import render_html
from itbench.operator import clusters, jobs
from itbench.operator.artefacts import (
    ARTEFACT_LABEL,
    PAGE_TRAJECTORY_BYTES,
    REPORT,
    TRAJECTORY_KEY,
    config_map_ref,
    referenced_config_map,
    report_data,
    stored,
    trajectory_calls,
)
from itbench.operator.bodies import (
    ADMITTED,
    CANCELLED,
    RUN_LABEL,
    annotation,
    condition,
    controller_uid,
    now,
    parse,
    parsed_status,
    problem_text,
    scenario_document,
    source,
)
from itbench.operator.kubeapi import (
    AGENT_SUBMISSIONS,
    BENCHMARK_RUNS,
    SCENARIOS,
    TRIALS,
    WRITE_ERRORS,
    Json,
    owner_reference,
)
from itbench.operator.runtime import OperatorRuntime
from itbench.reports.store import trial_records_text

log = logging.getLogger(__name__)

MAX_NAME = 253
FINAL_RUN_PHASES = tuple(p for p in RunPhase if p.final)


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
    return parsed_status(TrialStatus, trial)


def _final(trial: Mapping[str, Any]) -> bool:
    status = _trial_status(trial)
    return status is not None and status.phase.final


def _validated(body: Mapping[str, Any]) -> ScenarioStatus | None:
    """A Scenario's status when the operator has validated its current generation."""
    status = parsed_status(ScenarioStatus, body)
    if status is None or status.phase not in (ScenarioPhase.READY, ScenarioPhase.INVALID):
        return None
    if status.observed_generation != body["metadata"].get("generation"):
        return None
    return status


def _ready_scenarios(runtime: OperatorRuntime) -> dict[str, Variants]:
    """The Ready Scenarios by name, each with every instance of its template."""
    scenarios: dict[str, Variants] = {}
    for body in runtime.api.list_objects(SCENARIOS):
        status = parsed_status(ScenarioStatus, body)
        if status is None or status.phase != ScenarioPhase.READY:
            continue
        variants, _ = validate_template(scenario_document(body), source(body))
        if variants is not None:
            scenarios[variants.name] = variants
    return scenarios


MIN_SECRET_CHARS = 16
"""Characters a seed secret needs (as `itbench run --seed-secret`)."""


def _unvalidated_scenarios(runtime: OperatorRuntime) -> list[str]:
    """Scenarios the operator has not yet validated at their current generation."""
    return sorted(
        str(body["metadata"]["name"])
        for body in runtime.api.list_objects(SCENARIOS)
        if _validated(body) is None
    )


def _record(
    run: str,
    name: str,
    trial: Mapping[str, Any],
    scenario_name: str,
    attempt: int,
    scenario: Scenario | None,
    spec: BenchmarkRunSpec,
    agent: str,
    parameters: Mapping[str, ParameterValue] | None = None,
) -> TrialRecord:
    # Scenario and attempt come from the run's own plan (the Trial's name), never from a body a
    # user could have edited; the Trial contributes only its status.
    status = _trial_status(trial) or TrialStatus()
    if scenario is not None:
        complexity = effective_complexity(scenario.spec)[0]
        domain = scenario.spec.domain
        klass = scenario.spec.scenario_class
        traces = scenario.spec.environment.telemetry.masked_by(spec.telemetry).traces
    else:  # the Scenario was deleted after the run resolved it
        complexity, domain, klass, traces = None, None, "Unknown", spec.telemetry.traces
    return TrialRecord(
        trial=name,
        run=run,
        scenario=scenario_name,
        attempt=attempt,
        domain=domain or Domain.SRE,
        scenario_class=klass,
        complexity=complexity,
        traces_enabled=traces,
        phase=status.phase if status.phase.final else TrialPhase.ERRORED,
        reason=status.reason,
        scores=status.scores,
        agent=agent,
        tasks=tasks_for(scenario) if scenario is not None else [],
        split=spec.split,
        parameters=dict(parameters or {}),
        cluster=_cluster(trial),
    )


def _cluster(trial: Mapping[str, Any]) -> str:
    """Which cluster a Trial ran on, from its lease (empty: it never held one)."""
    lease = clusters.Lease.of(trial)
    return "" if lease is None else f"{lease.secret} ({lease.cluster})"[:600]


_RUNTIME_KINDS = {
    "builtin": AgentRuntimeKind.CALLABLE,
    "command": AgentRuntimeKind.COMMAND,
    "image": AgentRuntimeKind.IMAGE,
    "external": AgentRuntimeKind.EXTERNAL,
}


def agent_info(name: str, submission: AgentSubmission | None) -> AgentInfo:
    """How the report page names the run's agent: the AgentSubmission and what it runs."""
    runtime = submission.spec.runtime if submission is not None else None
    kind = runtime.kind() if runtime is not None else "external"
    target = "gateway"
    if runtime is not None and runtime.image is not None:
        target = str(runtime.image.image)
    elif runtime is not None and runtime.command is not None:
        target = " ".join(runtime.command.command)
    elif runtime is not None and runtime.builtin is not None:
        target = runtime.builtin.name.value
    return AgentInfo(
        name=name[:64].rstrip("-."),  # a Kubernetes name is longer than an agent's may be
        runtime=_RUNTIME_KINDS[kind],
        target=target[:4000],
    )


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def display_summary(report: Report, domain: Domain | None) -> RunSummary:
    """The headline of a report for status: the persona's own tasks, rounded for display.

    Fractions keep 4 decimals and times 0.1 s, so printer columns and `kubectl get -o yaml` read
    well on any API server (which prints numbers as stored); the report keeps full precision.
    """
    base = headline(report)
    diagnosis, mitigation = base.diagnosis_pass_at_1, base.mitigation_pass_at_1
    cost = efficiency = None
    if domain == Domain.FINOPS:
        diagnosis = _pass_at_1(report, "finops.diagnosis")
        mitigation = _pass_at_1(report, "finops.mitigation")
        cost = _mean(report, "finops.cost_proximity")
        efficiency = _mean(report, "finops.efficiency_proximity")
    elif domain == Domain.CISO:
        diagnosis, mitigation = _pass_at_1(report, "ciso.posture"), None
    return base.model_copy(
        update={
            "domain": domain,
            "diagnosis_pass_at_1": _round(diagnosis, 4),
            "mitigation_pass_at_1": _round(mitigation, 4),
            "fl_ntam": _round(base.fl_ntam, 4),
            "fpc_ntam": _round(base.fpc_ntam, 4),
            "mttd_seconds": _round(base.mttd_seconds, 1),
            "mttr_seconds": _round(base.mttr_seconds, 1),
            "cost_proximity": _round(cost, 4),
            "efficiency_proximity": _round(efficiency, 4),
            "resolution_rate": _round(base.resolution_rate, 4),
        }
    )


def _pass_at_1(report: Report, key: str) -> float | None:
    task = report.task(key)
    return task.pass_at_k[0].estimate.mean if task is not None and task.pass_at_k else None


def _mean(report: Report, key: str) -> float | None:
    score = report.score(key)
    return score.estimate.mean if score is not None else None


def _outcome(summary: RunSummary) -> RunPhase:
    """The final phase of a run whose trials all finished: what the agent did."""
    if summary.succeeded:
        return RunPhase.SUCCEEDED
    if summary.failed:
        return RunPhase.FAILED
    return RunPhase.ERRORED


def _changed_fields(old: BenchmarkRunSpec, new: BenchmarkRunSpec) -> list[str]:
    """Spec fields (camelCase paths) that differ, cancel aside."""
    before, after = old.wire(), new.wire()
    keys = sorted((set(before) | set(after)) - {"cancel"})
    return [f"spec.{k}" for k in keys if before.get(k) != after.get(k)]


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
        raw = body.get("status")
        stored = dict(raw) if isinstance(raw, Mapping) else {}
        self.old: Json = dict(written if written is not None else stored)
        try:
            self.previous = BenchmarkRunStatus.model_validate(self.old)
        except ValueError:
            self.previous = BenchmarkRunStatus()
        self.raw_body = body
        self.domain: Domain | None = None
        self._scenarios: dict[str, Variants] | None = None
        self.seed_secret: str | None = None
        self.submission: AgentSubmission | None = None

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
        accepted = self.previous.accepted_spec
        refusal: tuple[str, str] | None = None
        if accepted is not None:
            # The run has started: a spec change is refused whole (only cancel goes through),
            # as the CRD's transition rule refuses it where the API server validates.
            if run is None:
                refusal = (
                    "InvalidSpec",
                    f"the new spec is invalid ({problem_text(problems)}); the change is refused "
                    "and the run goes on with the spec it started with",
                )
                spec = accepted
            else:
                changed = _changed_fields(accepted, run.spec)
                if changed:
                    shown = ", ".join(changed[:5]) + (", ..." if len(changed) > 5 else "")
                    refusal = (
                        "SpecFrozen",
                        f"{shown} changed after the run started; the change is refused whole "
                        "and the run goes on with the spec it started with (only spec.cancel "
                        "may change; create a new BenchmarkRun instead)",
                    )
                spec = accepted.model_copy(update={"cancel": accepted.cancel or run.spec.cancel})
        elif run is None:
            self.invalid(
                "InvalidSpec",
                f"{source(self.body)} is invalid: {problem_text(problems)}; fix the spec",
            )
            return
        else:
            spec = run.spec
        if refusal is not None and self.previous.observed_generation != self.generation:
            self.api.event(self.body, refusal[0], refusal[1], warning=True)
        agent_name = spec.agent_ref.name
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
        agent_status = parsed_status(AgentSubmissionStatus, agent_body)
        if agent_status is None or not agent_status.ready:
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
                chosen = Catalog(self.variants().values()).select(
                    spec.scenarios,
                    level=agent.spec.level,
                    classes=agent.spec.scenario_classes,
                    domain=agent.spec.type,
                )
            except CatalogError as exc:
                self.invalid("ScenarioSelection", f"spec.scenarios: {exc}")
                return
            names = [s.name for s in chosen]
        self.domain = agent.spec.type
        self.submission = agent
        if accepted is None and not self.check_kubeconfig(spec):
            return
        refused = jobs.refusal(spec.environment, agent) if accepted is None else None
        if refused is not None:
            self.invalid("ExecutionUnsupported", refused)
            return
        if spec.split == Split.TEST and not self.read_seed_secret(spec):
            return
        self.reconcile_trials(spec, names, agent_name, refusal)

    def check_kubeconfig(self, spec: BenchmarkRunSpec) -> bool:
        """Before a cluster run starts, check its kubeconfig Secrets; False when it cannot."""
        names = spec.environment.secret_names()
        if not names:
            return True
        field = clusters.secret_field(spec.environment)
        if spec.environment.type != EnvironmentType.CLUSTER:
            self.invalid(
                "KubeconfigSecretUnused",
                f"{field} is set but spec.environment.type is "
                f"{spec.environment.type.value}; set type: cluster or drop the reference",
            )
            return False
        for name in names:
            try:
                clusters.read_kubeconfig(self.api, self.namespace, spec.environment, name)
            except clusters.KubeconfigError as exc:
                missing = not self.api.secret_exists(self.namespace, name)
                # A missing Secret may yet be created (the run then starts); a bad one is fixed
                # by editing it, which the next reconcile sees as well.
                (self.pending if missing else self.invalid)(
                    "KubeconfigSecretNotFound" if missing else "KubeconfigSecretInvalid", str(exc)
                )
                return False
        return True

    def read_seed_secret(self, spec: BenchmarkRunSpec) -> bool:
        """Read the test split's secret (kept in memory only); False when the run cannot go on."""
        ref = spec.seed_secret_ref
        assert ref is not None  # the model requires it for the test split
        data = self.api.secret_data(self.namespace, ref.name)
        if not data:
            self.pending(
                "SeedSecretNotFound",
                f"Secret {self.namespace}/{ref.name} (spec.seedSecretRef) does not exist or is "
                "empty; create it with the test split's secret",
            )
            return False
        secret = data.get(ref.key)
        if secret is None or len(secret) < MIN_SECRET_CHARS:
            self.invalid(
                "SeedSecretInvalid",
                f"spec.seedSecretRef: key {ref.key!r} of Secret {self.namespace}/{ref.name} "
                + ("is missing" if secret is None else "is too short")
                + f"; the secret needs at least {MIN_SECRET_CHARS} characters",
            )
            return False
        self.seed_secret = secret
        return True

    def variants(self) -> dict[str, Variants]:
        """The Ready Scenarios by name (read once per reconcile, and only when needed)."""
        if self._scenarios is None:
            self._scenarios = _ready_scenarios(self.runtime)
        return self._scenarios

    def scenarios(self) -> dict[str, Scenario]:
        """The representative instance of every Ready Scenario, by name."""
        return {n: v.scenario for n, v in self.variants().items()}

    def instance(
        self, spec: BenchmarkRunSpec, scenario: str, attempt: int
    ) -> tuple[Scenario | None, dict[str, ParameterValue]]:
        """The instance of a scenario an attempt runs, and the template values that make it.

        The dev split draws from the run's seed; the test split from the seed secret, so the
        values of a published test-split run cannot be known from the scenario files.
        """
        variants = self.variants().get(scenario)
        if variants is None:
            return None, {}
        draw = instance_seed(
            spec.split,
            seed=spec.seed,
            scenario=scenario,
            attempt=attempt,
            secret=self.seed_secret,
        )
        chosen = variants.instance(draw)
        return chosen.scenario, dict(chosen.values)

    def owned(self, trial: Mapping[str, Any]) -> bool:
        """Whether a Trial belongs to this run: its controller is this run's UID."""
        return bool(self.uid) and controller_uid(trial, "BenchmarkRun") == self.uid

    def reconcile_trials(
        self,
        spec: BenchmarkRunSpec,
        names: list[str],
        agent: str,
        refusal: tuple[str, str] | None,
    ) -> None:
        # The plan: Trial name -> (scenario, attempt). Trials are adopted by owner reference and
        # name, never by label alone, so a foreign Trial carrying the run's label is not counted.
        plan = {
            trial_name(self.name, s, a): (s, a)
            for a in range(spec.trials_per_scenario)
            for s in names
        }
        trials = {
            t["metadata"]["name"]: t
            for t in self.api.list_objects(TRIALS, self.namespace, f"{RUN_LABEL}={self.name}")
            if t["metadata"]["name"] in plan and self.owned(t)
        }
        if not spec.cancel:
            for tname, (scenario, attempt) in plan.items():
                if tname in trials:
                    continue
                body = self.trial_body(spec, tname, scenario, attempt)
                if not self.api.create(TRIALS, self.namespace, body):
                    # It exists but was not listed: read it rather than trust our own copy.
                    existing = self.api.get(TRIALS, self.namespace, tname)
                    if existing is None:
                        continue  # deleted meanwhile; the next tick creates it again
                    if not self.owned(existing):
                        self.invalid(
                            "TrialNameTaken",
                            f"Trial {self.namespace}/{tname} already exists and is not owned by "
                            "this run; delete it or rename this run",
                        )
                        return
                    body = existing
                trials[tname] = body
        ordered = sorted(trials.items(), key=lambda kv: (plan[kv[0]][1], plan[kv[0]][0]))
        finished = [(n, t) for n, t in ordered if _final(t)]
        active = [(n, t) for n, t in ordered if not _final(t) and annotation(t, ADMITTED)]
        queued = [(n, t) for n, t in ordered if not _final(t) and not annotation(t, ADMITTED)]
        slots = spec.environment.slots(spec.concurrency)
        if spec.cancel:
            for tname, trial in active:
                if not annotation(trial, CANCELLED):
                    self.api.annotate(TRIALS, self.namespace, tname, {CANCELLED: "true"})
        else:
            free = max(slots - len(active), 0)
            for tname, _ in queued[:free]:
                self.api.annotate(TRIALS, self.namespace, tname, {ADMITTED: "true"})
            active += queued[:free]
            queued = queued[free:]
        # A cancelled run's queued Trials never start: they are not waiting.
        self.runtime.metrics.queue_depth.labels(namespace=self.namespace, run=self.name).set(
            0 if spec.cancel else len(queued)
        )
        self.summarise(spec, names, plan, len(ordered), finished, active, agent, refusal)

    def trial_body(self, spec: BenchmarkRunSpec, name: str, scenario: str, attempt: int) -> Json:
        _instance, parameters = self.instance(spec, scenario, attempt)
        trial = TrialSpec(
            run_ref=LocalObjectReference(name=self.name),
            agent_ref=spec.agent_ref,
            scenario=scenario,
            attempt=attempt,
            seed=trial_seed(spec.seed, scenario, attempt),
            telemetry=spec.telemetry,
            timeouts=spec.timeouts,
            environment=spec.environment,
            allow_oracle=spec.allow_oracle,
            split=spec.split,
            parameters=parameters,
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
            "spec": trial.wire(),
        }

    def store_report(
        self,
        spec: BenchmarkRunSpec,
        plan: dict[str, tuple[str, int]],
        report: Report,
        records: list[TrialRecord],
        finished: list[tuple[str, Json]],
        instances: Mapping[str, tuple[Scenario | None, dict[str, ParameterValue]]],
        agent: str,
    ) -> tuple[str, list[str]] | None:
        """Write the run's ConfigMap: report.json, trials.jsonl and report.html (what fits).

        Returns:
            Its reference and the notes on what was compressed or left out; None when the API
            refused a read or the write (logged; the caller retries on the next tick).
        """
        name = report_name(self.name)
        info = agent_info(agent, self.submission)
        statuses = {t: _trial_status(body) or TrialStatus() for t, body in finished}
        plans: list[TrialPlan] = []
        trajectories: dict[str, list[dict[str, Any]]] = {}
        read = unread = 0
        try:
            for tname, body in finished:
                scenario, parameters = instances[tname]
                if scenario is None:  # deleted since: counted in the report, not on the page
                    continue
                scenario_name, attempt = plan[tname]
                plans.append(
                    TrialPlan(
                        name=tname,
                        uid=str(body["metadata"].get("uid", "")),
                        run=self.name,
                        agent=info,
                        scenario=scenario,
                        attempt=attempt,
                        seed=trial_seed(spec.seed, scenario_name, attempt),
                        telemetry=spec.telemetry,
                        timeouts=spec.timeouts,
                        allow_oracle=spec.allow_oracle,
                        split=spec.split,
                        parameters=parameters,
                    )
                )
                cm = referenced_config_map(statuses[tname].trajectory_ref)
                if cm is None:
                    continue
                if read >= PAGE_TRAJECTORY_BYTES:
                    unread += 1
                    continue
                found = self.api.config_map(self.namespace, cm) or {}
                read += len(found.get(TRAJECTORY_KEY, ""))
                trajectories[tname] = trajectory_calls(found)
            known = []
            if unread:
                known.append(
                    f"report.html shows the trajectories of {len(trajectories)} trials; the other "
                    f"{unread} are only in their Trials' ConfigMaps (status.trajectoryRef): the "
                    f"page reads at most {PAGE_TRAJECTORY_BYTES} bytes of trajectories"
                )
            files = [
                ("report.json", report.model_dump_json(by_alias=True)),
                ("trials.jsonl", trial_records_text(records)),
            ]
            limit = self.runtime.config.report_bytes
            html = render_html(report, plans, statuses, records, trajectories)
            data, binary, notes = report_data([*files, ("report.html", html)], limit, known)
            if not stored("report.html", data, binary) and trajectories:
                # The page without its trajectories still shows every table and chart.
                light = render_html(report, plans, statuses, records, {})
                known.append(
                    "report.html shows no trajectories: with them it did not fit, even "
                    "compressed; each Trial's is in the ConfigMap its status.trajectoryRef names"
                )
                data, binary, notes = report_data([*files, ("report.html", light)], limit, known)
            self.api.put_config_map(
                self.namespace,
                name,
                data,
                self.body,
                binary_data=binary,
                labels={RUN_LABEL: self.name, ARTEFACT_LABEL: REPORT},
            )
        except WRITE_ERRORS as exc:
            retry = self.uid in self.runtime.unstored_reports
            self.runtime.unstored_reports.add(self.uid)
            log.log(
                logging.DEBUG if retry else logging.WARNING,
                "report not stored; retrying on the next tick",
                extra={"run": f"{self.namespace}/{self.name}", "error": str(exc)[:300]},
            )
            return None
        self.runtime.unstored_reports.discard(self.uid)
        return config_map_ref(name), notes

    def summarise(
        self,
        spec: BenchmarkRunSpec,
        names: list[str],
        plan: dict[str, tuple[str, int]],
        total: int,
        finished: list[tuple[str, Json]],
        active: list[tuple[str, Json]],
        agent: str,
        refusal: tuple[str, str] | None,
    ) -> None:
        previous = self.previous
        summary = previous.summary
        report_ref = previous.report_ref
        notes: list[str] = []
        domain = self.domain
        cancelled = spec.cancel
        done = bool(total) and len(finished) == total
        # A finished run's phase says what the agent did; it is decided from the summary below.
        phase = RunPhase.CANCELLED if cancelled and not active else RunPhase.RUNNING
        complete = (cancelled and not active) or done
        if complete or len(finished) != previous.finished_trials:
            instances = {t: self.instance(spec, *plan[t]) for t, _ in finished}
            records = [
                _record(
                    self.name,
                    tname,
                    trial,
                    plan[tname][0],
                    plan[tname][1],
                    instances[tname][0],
                    spec,
                    agent,
                    instances[tname][1],
                )
                for tname, trial in finished
            ]
            report = build_report(records, DEFAULT_PROFILE, agent=agent, created_at=now())
            summary = display_summary(report, domain) if records else RunSummary(domain=domain)
            if complete:
                kept = self.store_report(spec, plan, report, records, finished, instances, agent)
                if kept is None:
                    return  # the status waits for the report: the next tick tries again
                report_ref, notes = kept
        if done and not cancelled:
            phase = _outcome(summary)
        conditions = condition(
            previous.conditions,
            "Valid",
            True,
            "Resolved",
            f"{len(names)} scenarios x {spec.trials_per_scenario} trials",
            self.generation,
        )
        if refusal is None:
            conditions = condition(
                conditions,
                "SpecAccepted",
                True,
                "Accepted",
                f"the run follows the spec of generation {self.generation}",
                self.generation,
            )
        else:
            conditions = condition(
                conditions, "SpecAccepted", False, refusal[0], refusal[1], self.generation
            )
        if complete:
            reason = "Cancelled" if cancelled else "AllTrialsFinished"
            message = (
                f"{len(finished)}/{total} trials finished ({summary.succeeded} succeeded, "
                f"{summary.failed} failed, {summary.errored} errored); report in {report_ref}"
            )
            if notes:
                message += f" ({len(notes)} file(s) compressed or left out over the size limit: "
                message += "see its notes.txt)"
        else:
            reason = "Cancelling" if cancelled else "TrialsRunning"
            message = f"{len(finished)}/{total} finished, {len(active)} running"
        conditions = condition(conditions, "Complete", complete, reason, message, self.generation)
        usable = clusters.usable_condition(spec.environment, self.raw_body)
        if usable is not None:
            conditions = condition(
                conditions, clusters.CLUSTERS_CONDITION, *usable, self.generation
            )
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
                "accepted_spec": spec,
                "conditions": conditions,
            }
        )
        event = None
        if phase != previous.phase:
            event = (phase.value, f"run is {phase.value}: {message}", False)
        self.write(status, event)


def delete_trials(runtime: OperatorRuntime, body: kopf.Body) -> int:
    """Delete a run's own Trials (their finalizers release the environments); return those left.

    Only Trials this run controls (owner reference with its UID) are deleted: a foreign Trial
    that carries the run's label stays.
    """
    meta = body["metadata"]
    uid = str(meta.get("uid", ""))
    trials = [
        t
        for t in runtime.api.list_objects(TRIALS, meta["namespace"], f"{RUN_LABEL}={meta['name']}")
        if uid and controller_uid(t, "BenchmarkRun") == uid
    ]
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
            runtime.unstored_reports.discard(str(meta.get("uid", "")))
            with contextlib.suppress(KeyError):  # never reconciled: no series to drop
                runtime.metrics.queue_depth.remove(meta["namespace"], meta["name"])
        if left:
            raise kopf.TemporaryError(
                f"waiting for {left} trials to release their environments",
                delay=runtime.config.retry_seconds,
            )
