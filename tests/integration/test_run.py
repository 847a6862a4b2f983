"""The executor and driver over a real gateway session, crash/resume between any two steps, and
the embedded benchmark end to end (oracle 1.0, null 0, `itbench run`)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from itbench.client import ITBenchClient
from itbench.core.faults import ObjectChange
from itbench.core.models.agent_io import DiagnosisReport, PredictedEntity
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import Domain
from itbench.core.models.observations import (
    ActionResult,
    ActionVerb,
    AgentAction,
    Alert,
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialPhase, TrialStatus
from itbench.core.runner.machine import new_status
from itbench.core.tasks import mitigation_applies
from itbench.environments.port import Environment, EnvironmentFailure
from itbench.execution import benchmark
from itbench.execution.artefacts import RunStore
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial, threaded_agent
from itbench.execution.evidence import FileEvidenceStore, MemoryEvidenceStore
from itbench.execution.executor import TrialExecutor
from itbench.execution.plan import TrialPlan, plan_trials
from itbench.gateway.app import create_app
from itbench.gateway.sessions import SessionRegistry
from tests.integration.ciso_sample import answer_shape, ciso_sample

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCENARIO_FILE = Path(__file__).parents[2] / "scenarios" / "sre" / "cart-flagd-failure"


def cart_scenario() -> Scenario:
    import yaml

    doc = yaml.safe_load((SCENARIO_FILE / "scenario.yaml").read_text())
    return Scenario.model_validate(doc)


@dataclass
class FakeShop:
    """A tiny stand-in environment: the cart fails while its flag is on (fault or not)."""

    now_: datetime = T0
    fail_on_inject: bool = False
    applied: list[str] = field(default_factory=list)
    inject_calls: int = 0
    flag_on_since: datetime | None = None
    history: list[AlertInterval] = field(default_factory=list)
    provisioned: int = 0

    def now(self) -> datetime:
        return self.now_

    def advance(self, seconds: float) -> None:
        self.now_ += timedelta(seconds=seconds)
        self._update_history()

    def provision(self) -> None:
        self.provisioned += 1

    def _firing(self) -> bool:
        since = self.flag_on_since
        return since is not None and (self.now_ - since).total_seconds() >= 30

    def _update_history(self) -> None:
        open_ = [i for i in self.history if i.end is None]
        if self._firing() and not open_:
            self.history.append(
                AlertInterval(
                    alertname="RequestErrorRate", labels={"service_name": "cart"}, start=self.now_
                )
            )
        elif not self._firing() and open_:
            open_[0].end = self.now_

    def alerts(self) -> list[Alert]:
        if not self._firing():
            return []
        return [
            Alert(
                alertname="RequestErrorRate",
                labels={"service_name": "cart"},
                state=AlertState.FIRING,
                active_at=self.now_,
            )
        ]

    def alert_history(self) -> list[AlertInterval]:
        return [i.model_copy() for i in self.history]

    def snapshot(self) -> EnvironmentSnapshot:
        workloads = [
            WorkloadHealth(
                kind="Deployment",
                name=n,
                desired_replicas=1,
                ready_replicas=1,
                requests_per_second=10.0,
            )
            for n in ("frontend", "checkout", "cart")
        ]
        return EnvironmentSnapshot(
            time=self.now_,
            workloads=workloads,
            firing_alerts=self.alerts(),
            alert_rules_fingerprint="rules",
            frontend_requests_per_second=10.0,
            flags={"cartFailure": "on" if self.flag_on_since else "off"},
        )

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        self.inject_calls += 1
        if self.fail_on_inject:
            raise EnvironmentFailure("the flagd ConfigMap cannot be written")
        if key in self.applied:
            return False
        self.applied.append(key)
        self.flag_on_since = self.now_
        return True

    def remove(self, key: str) -> bool:
        if key not in self.applied:
            return False
        self.flag_on_since = None
        self._update_history()
        return True

    def injections(self) -> list[str]:
        return list(self.applied)

    def query_metrics(self, query: str, time: datetime) -> dict[str, Any]:
        return {"resultType": "vector", "result": []}

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> dict[str, Any]:
        return {"resultType": "matrix", "result": []}

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> dict[str, Any]:
        return {"resultType": "streams", "result": []}

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[dict[str, Any]]:
        return []

    def get_objects(
        self, kind: str, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        if kind not in ("Deployment", "Service"):
            return []
        return [
            {
                "apiVersion": "v1",
                "kind": kind,
                "metadata": {"name": n, "namespace": "otel-demo", "labels": {"app": n}},
            }
            for n in ("frontend", "checkout", "cart")
            if name is None or n == name
        ]

    def service_calls(self) -> list[tuple[str, str]]:
        return [("frontend", "checkout"), ("checkout", "cart")]

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        return []

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        return []

    def act(self, action: AgentAction) -> ActionResult:
        if action.verb == ActionVerb.SET_FLAG and action.flag == "cartFailure":
            self.flag_on_since = None if action.variant == "off" else self.now_
            self._update_history()
            return ActionResult(ok=True, message="flag set", outcome="applied")
        return ActionResult(ok=True, message="unchanged", outcome="unchanged")


def fixing_agent(client: ITBenchClient) -> None:
    """Names the cart as root cause, switches the flag off, waits, finishes."""
    client.next_trial(timeout=0)
    client.started()
    client.submit_diagnosis(
        DiagnosisReport(
            entities=[
                PredictedEntity(
                    kind="Deployment", name="cart", root_cause=True, category="FeatureFlag"
                )
            ]
        )
    )
    client.act(
        AgentAction(
            verb=ActionVerb.SET_FLAG,
            kind="Flag",
            name="cartFailure",
            flag="cartFailure",
            variant="off",
        )
    )
    client.wait(60)
    client.finished()


@dataclass
class Harness:
    """One trial on a FakeShop with a real gateway, registry and evidence store."""

    env: FakeShop
    executor: TrialExecutor
    app: Any
    saved: list[TrialStatus] = field(default_factory=list)


def harness(tmp_path: Path, *, env: FakeShop | None = None) -> Harness:
    plans = plan_trials(
        "test", [cart_scenario()], [BuiltinAgent.ORACLE], trials=1, seed=1, allow_oracle=True
    )
    ctx = plans[0].context()
    shop = env or FakeShop()
    registry = SessionRegistry()
    executor = TrialExecutor(ctx, shop, registry, FileEvidenceStore(tmp_path / "evidence"))
    return Harness(env=shop, executor=executor, app=create_app(registry))


def agent_runner(h: Harness, agent: Callable[[ITBenchClient], None]) -> Any:
    def run(executor: TrialExecutor) -> None:
        assert executor.token is not None
        client = ITBenchClient.in_process(h.app, executor.token)
        try:
            agent(client)
        finally:
            client.close()

    return run


def drive(
    h: Harness,
    status: TrialStatus,
    persist: Callable[[TrialStatus], None],
    agent: Callable[[ITBenchClient], None] = fixing_agent,
) -> TrialStatus:
    return drive_trial(
        status,
        h.executor,
        persist=persist,
        run_agent=agent_runner(h, agent),
        config=EMBEDDED_CONFIG,
    )


def test_fake_shop_satisfies_the_environment_port() -> None:
    assert isinstance(FakeShop(), Environment)


def test_trial_succeeds_through_the_gateway_with_scores_and_trajectory(tmp_path: Path) -> None:
    h = harness(tmp_path)
    final = drive(h, new_status(h.env.now()), h.saved.append)
    assert final.phase == TrialPhase.SUCCEEDED, final.message
    assert final.scores is not None and final.scores.diagnosis is not None
    assert final.scores.diagnosis.passed and final.scores.diagnosis.fl_ntam == 1.0
    assert final.scores.mitigation is not None and final.scores.mitigation.passed
    assert final.scores.diagnosis.ttd_seconds is not None
    assert final.scores.mitigation.ttr_seconds is not None
    assert h.env.applied == h.executor.ctx.inject_keys()
    assert [k for k in h.env.applied if "/inject/" in k] == [f"{h.executor.ctx.uid}/inject/0"]
    assert h.env.flag_on_since is None, "the fault was removed"
    actions = [e["action"] for e in h.executor.trajectory()]
    assert {"protocol.started", "submit.diagnosis", "protocol.finished"} <= set(actions)
    assert h.saved[-1] == final
    assert h.executor.session() is None, "the session is closed after the agent's turn"


def test_agent_exception_fails_the_trial_as_the_agents_fault(tmp_path: Path) -> None:
    def crashing(client: ITBenchClient) -> None:
        client.next_trial(timeout=0)
        client.started()
        raise RuntimeError("model provider unreachable")

    h = harness(tmp_path)
    final = drive(h, new_status(h.env.now()), h.saved.append, crashing)
    assert final.phase == TrialPhase.FAILED
    assert final.reason == "AgentCrashed"
    assert "model provider unreachable" in final.message
    assert h.env.flag_on_since is None


def test_agent_over_its_wall_clock_limit_is_abandoned_and_fails_as_a_timeout(
    tmp_path: Path,
) -> None:
    import threading

    release = threading.Event()

    def stuck(client: ITBenchClient) -> None:
        release.wait(5)

    h = harness(tmp_path)
    final = drive_trial(
        new_status(h.env.now()),
        h.executor,
        persist=h.saved.append,
        run_agent=threaded_agent(agent_runner(h, stuck), wall_seconds=0.0),
        config=EMBEDDED_CONFIG,
    )
    release.set()
    assert final.phase == TrialPhase.FAILED
    assert final.reason == "AgentTimeout"
    assert "wall-clock limit" in final.message


def test_environment_failure_errors_the_trial_naming_the_environment(tmp_path: Path) -> None:
    h = harness(tmp_path, env=FakeShop(fail_on_inject=True))
    final = drive(h, new_status(h.env.now()), h.saved.append)
    assert final.phase == TrialPhase.ERRORED
    assert final.reason == "EnvironmentFailure"
    assert final.message.startswith("environment:")
    assert h.executor.rebuild_reason is not None


class DriverCrashError(Exception):
    """The driver process dies."""


def _reference_steps() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        h = harness(Path(tmp))
        drive(h, new_status(h.env.now()), h.saved.append)
        return len(h.saved)


REFERENCE_STEPS = _reference_steps()


@pytest.mark.parametrize("when", ["before-persist", "after-persist"])
@pytest.mark.parametrize("crash_at", range(REFERENCE_STEPS))
def test_crash_between_any_two_steps_resumes_without_reinjecting(
    tmp_path: Path, crash_at: int, when: str
) -> None:
    h = harness(tmp_path)
    store = RunStore(tmp_path / "run")
    name = h.executor.ctx.name
    steps = 0

    def crashing_persist(status: TrialStatus) -> None:
        nonlocal steps
        if steps == crash_at and when == "before-persist":
            steps += 1
            raise DriverCrashError
        store.save_status(name, status)
        steps += 1
        if steps - 1 == crash_at:
            raise DriverCrashError

    with pytest.raises(DriverCrashError):
        drive(h, new_status(h.env.now()), crashing_persist)
    resumed_from = store.load_status(name) or new_status(h.env.now())
    final = drive(h, resumed_from, lambda s: store.save_status(name, s))
    assert final.phase == TrialPhase.SUCCEEDED, final.message
    assert h.env.injections() == h.executor.ctx.inject_keys(), "each injection once"
    assert final.injections == 1
    assert store.load_status(name) == final
    phases = [e.phase for e in final.timeline]
    assert phases.count(TrialPhase.INJECTING) == 1
    assert phases[-1] == TrialPhase.SUCCEEDED


def test_run_store_round_trips_plans_statuses_and_trajectories(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r")
    plans = plan_trials("r", [cart_scenario()], [BuiltinAgent.HEURISTIC_SRE], trials=2, seed=42)
    store.save_plan(plans)
    assert store.load_plan() == plans
    status = new_status(T0)
    store.save_status(plans[0].name, status)
    assert store.load_status(plans[0].name) == status
    assert store.load_status("missing") is None
    ref = store.save_trajectory(plans[0].name, [{"action": "observe.alerts"}])
    assert ref == f"trajectories/{plans[0].name}.json"
    assert store.load_trajectory(plans[0].name) == [{"action": "observe.alerts"}]
    assert json.loads(store.plan_path.read_text())[0]["name"] == plans[0].name


def test_plans_give_each_attempt_its_own_seed_and_every_agent_the_same_seeds() -> None:
    plans = plan_trials(
        "r", [cart_scenario()], [BuiltinAgent.HEURISTIC_SRE, BuiltinAgent.NULL], trials=3, seed=42
    )
    by_agent: dict[str, list[int]] = {}
    for plan in plans:
        by_agent.setdefault(plan.agent.name, []).append(plan.seed)
    assert by_agent["heuristic-sre"] == by_agent["null"]
    assert len(set(by_agent["null"])) == 3
    assert len({p.uid for p in plans}) == len(plans) == 6
    finops_only = plan_trials(
        "r", [cart_scenario()], [BuiltinAgent.HEURISTIC_FINOPS], trials=3, seed=42
    )
    assert finops_only == [], "heuristic-finops takes FinOps scenarios only"


def test_memory_evidence_store_is_first_write_wins() -> None:
    store = MemoryEvidenceStore()
    first = FakeShop().snapshot()
    assert store.put_snapshot("k", first)
    assert not store.put_snapshot("k", first.model_copy(update={"alert_rules_fingerprint": "x"}))
    stored = store.snapshot("k")
    assert stored is not None and stored.alert_rules_fingerprint == "rules"


# ---- the embedded benchmark on the simulator -------------------------------------------------

ROOT = Path(__file__).parents[2]


FULL_CATALOG = os.environ.get("ITBENCH_FULL_CATALOG") == "1"
"""The catalog-wide runs below take minutes on two cores, so `make test` runs them over a sample
that covers every fault of the library and every kind of CISO answer, and over every scenario
when asked for (ITBENCH_FULL_CATALOG=1). Each fault scenario's own oracle run is in
test_baseline_agents.py, each CISO scenario's reference answer in test_ciso_reference.py and each
scenario's self-test in test_catalog_selftest.py, all over the whole catalog."""


def catalog_scenarios() -> list[Scenario]:
    from itbench.catalog_files import load_catalog

    catalog, problems = load_catalog(ROOT / "scenarios")
    assert problems == [], problems
    scenarios = sorted(catalog, key=lambda s: s.name)
    return scenarios if FULL_CATALOG else fault_cover(scenarios)


def fault_cover(scenarios: list[Scenario]) -> list[Scenario]:
    """Every control and FinOps scenario (their trials are cheap or few), one CISO scenario of
    every class and reference answer shape (`ciso_sample`), and the fewest SRE scenarios that
    between them inject every fault the rest of the catalog injects (greedily: the scenario
    adding most faults not yet covered, the first by name on a tie)."""
    chosen = ciso_sample(
        [s for s in scenarios if s.spec.control or s.spec.domain in (Domain.CISO, Domain.FINOPS)]
    )
    covered = {f.id for s in chosen for f in s.spec.faults}
    rest = [s for s in scenarios if s not in chosen]
    wanted = {f.id for s in rest for f in s.spec.faults} - covered
    while wanted:
        best = max(rest, key=lambda s: len({f.id for f in s.spec.faults} & wanted))
        chosen.append(best)
        wanted -= {f.id for f in best.spec.faults}
    return chosen


def _run_agent_over_catalog(agent: BuiltinAgent) -> dict[str, tuple[TrialPlan, TrialStatus]]:
    from itbench.execution.benchmark import run_trials

    plans = plan_trials(
        f"catalog-{agent.value}",
        catalog_scenarios(),
        [agent],
        trials=1,
        seed=42,
        allow_oracle=agent == BuiltinAgent.ORACLE,
    )
    statuses = run_trials(plans, store=None, workers=1)
    return {p.scenario.name: (p, statuses[p.name]) for p in plans}


@pytest.fixture(scope="module")
def oracle_results() -> dict[str, tuple[TrialPlan, TrialStatus]]:
    return _run_agent_over_catalog(BuiltinAgent.ORACLE)


@pytest.fixture(scope="module")
def null_results() -> dict[str, tuple[TrialPlan, TrialStatus]]:
    return _run_agent_over_catalog(BuiltinAgent.NULL)


def test_the_catalog_runs_inject_every_fault_the_catalog_injects() -> None:
    from itbench.catalog_files import load_catalog

    catalog, _ = load_catalog(ROOT / "scenarios")
    sample = catalog_scenarios()
    assert {f.id for s in sample for f in s.spec.faults} == {
        f.id for s in catalog for f in s.spec.faults
    }
    assert {s.spec.domain for s in sample} == {s.spec.domain for s in catalog}
    assert any(s.spec.control for s in sample)
    ciso = [s for s in catalog if s.spec.domain == Domain.CISO]
    assert "unknown" not in {answer_shape(s) for s in ciso}
    assert {(s.spec.scenario_class, answer_shape(s)) for s in sample if s in ciso} == {
        (s.spec.scenario_class, answer_shape(s)) for s in ciso
    }


@pytest.mark.slow
def test_oracle_scores_one_on_every_diagnosis_and_mitigation_metric_over_the_catalog(
    oracle_results: dict[str, tuple[TrialPlan, TrialStatus]],
) -> None:
    from itbench.core.scoring.aggregate import build_report
    from itbench.core.scoring.profile import DEFAULT_PROFILE
    from itbench.execution.embedded import trial_record

    problems = []
    for name, (plan, status) in sorted(oracle_results.items()):
        scores = status.scores
        if status.phase != TrialPhase.SUCCEEDED or scores is None:
            problems.append(f"{name}: {status.phase.value} {status.reason}: {status.message}")
            continue
        if plan.scenario.spec.control:
            if scores.false_alarm is None or not scores.false_alarm.passed:
                problems.append(f"{name}: false alarm {scores.false_alarm}")
            continue
        if plan.scenario.spec.domain == Domain.CISO:
            if scores.posture is None or not scores.posture.passed:
                problems.append(f"{name}: posture {scores.posture}")
            continue
        d, m = scores.diagnosis, scores.mitigation
        if d is None or not (d.passed and d.fl_ntam == 1.0 and d.fpc_ntam == 1.0):
            problems.append(f"{name}: diagnosis {d}")
        if scores.collateral:
            problems.append(f"{name}: collateral {scores.collateral}")
        if not mitigation_applies(plan.scenario):
            if m is not None:
                problems.append(f"{name}: an unreachable fault has a mitigation score")
        elif m is None or not m.passed or m.ttr_seconds is None:
            problems.append(f"{name}: mitigation {m}")
        if scores.finops is not None and not (
            scores.finops.diagnosis_passed and scores.finops.mitigation_passed
        ):
            problems.append(f"{name}: finops {scores.finops}")
    assert problems == []
    records = [trial_record(p, s) for p, s in oracle_results.values()]
    report = build_report(records, DEFAULT_PROFILE, agent="oracle", created_at=T0)
    assert report.errored.count == 0
    for task in report.tasks:
        assert task.pass_at_k[0].estimate.mean == 1.0, task.label
    for score in report.scores:
        if "ntam" in score.key:
            assert score.estimate.mean == 1.0, score.label


@pytest.mark.slow
def test_null_agent_scores_zero_and_raises_no_errored_trials(
    null_results: dict[str, tuple[TrialPlan, TrialStatus]],
) -> None:
    errored = [
        f"{n}: {s.reason}: {s.message}"
        for n, (_p, s) in null_results.items()
        if s.phase == TrialPhase.ERRORED
    ]
    assert errored == []
    for name, (plan, status) in null_results.items():
        assert status.phase == TrialPhase.FAILED, name
        scores = status.scores
        assert scores is not None, name
        if plan.scenario.spec.control:
            # Saying nothing is not saying that nothing is wrong.
            assert scores.false_alarm is not None and not scores.false_alarm.passed, name
            continue
        if plan.scenario.spec.domain == Domain.CISO:
            assert scores.posture is None or not scores.posture.passed, name
            continue
        assert scores.diagnosis is not None, name
        assert not scores.diagnosis.passed and scores.diagnosis.fl_ntam == 0.0, name
        assert scores.diagnosis.fpc_ntam == 0.0, name
        if mitigation_applies(plan.scenario):
            assert scores.mitigation is not None and not scores.mitigation.passed, name
        else:
            assert scores.mitigation is None, name


@pytest.mark.slow
def test_each_trial_runs_on_its_own_environment(
    oracle_results: dict[str, tuple[TrialPlan, TrialStatus]],
) -> None:
    for _name, (plan, status) in oracle_results.items():
        if plan.scenario.spec.control:
            continue
        assert status.injections == 1
        injecting = [e for e in status.timeline if e.phase == TrialPhase.INJECTING]
        assert len(injecting) == 1


@pytest.mark.slow
def test_itbench_run_writes_the_report_and_resumes(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from itbench.cli.run import run_command
    from itbench.core.models.report import Report

    runner = CliRunner()
    args = [
        "--scenario",
        "cart-flagd-failure",
        "--scenario",
        "checkout-nonexistent-image",
        "--agent",
        "heuristic-sre",
        "--trials",
        "2",
        "--workers",
        "2",
        "--output-dir",
        str(tmp_path),
        "--run-name",
        "t1",
        "--scenarios-dir",
        str(ROOT / "scenarios"),
    ]
    result = runner.invoke(run_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "t1"
    report = Report.model_validate_json((run_dir / "report.json").read_text())
    assert report.trials == 4 and report.agent == "heuristic-sre"
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 4
    assert (run_dir / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert "SRE" in result.output and "pass@1" in result.output
    assert "errored (not the agent's)" in result.output
    for line in lines:
        trial = json.loads(line)["trial"]
        assert (run_dir / "trials" / f"{trial}.json").exists()
        assert (run_dir / "trajectories" / f"{trial}.json").exists()

    # Interrupt one trial mid-way: its status file holds a non-final phase.
    store = RunStore(run_dir)
    victim = json.loads(lines[0])["trial"]
    kept = json.loads(lines[1])["trial"]
    before = store.load_status(kept)
    store.save_status(victim, new_status(T0).model_copy(update={"phase": TrialPhase.READY}))
    again = runner.invoke(
        run_command, ["--resume", str(run_dir), "--workers", "1"], catch_exceptions=False
    )
    assert again.exit_code == 0, again.output
    resumed = store.load_status(victim)
    assert resumed is not None and resumed.phase.final
    assert "restarted" in resumed.timeline[0].message
    assert store.load_status(kept) == before, "finished trials are not run again"
    assert len((run_dir / "trials.jsonl").read_text().splitlines()) == 4


def test_itbench_run_refuses_the_oracle_without_permission(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from itbench.cli.run import run_command

    result = CliRunner().invoke(
        run_command,
        [
            "--agent",
            "oracle",
            "--output-dir",
            str(tmp_path),
            "--scenarios-dir",
            str(ROOT / "scenarios"),
        ],
    )
    assert result.exit_code == 2
    assert "--allow-oracle" in result.output


def test_serve_publishes_one_ready_trial_and_scores_it(tmp_path: Path) -> None:
    from agents import BUILTIN_AGENTS
    from itbench.cli.serve import external_agent, practice_trial

    trial = practice_trial(cart_scenario(), seed=42, agent_seconds=900, allow_oracle=True)
    published: list[tuple[str, str]] = []

    def on_ready(trial_id: str, token: str) -> None:
        published.append((trial_id, token))
        client = ITBenchClient.in_process(trial.app, token)
        try:
            BUILTIN_AGENTS["oracle"](client)
        finally:
            client.close()

    def no_wait() -> None:
        raise AssertionError("the agent had finished; nothing to wait for")

    final = drive_trial(
        new_status(trial.executor.now()),
        trial.executor,
        persist=lambda _s: None,
        run_agent=external_agent(on_ready, wall_seconds=60, poll=no_wait),
        config=EMBEDDED_CONFIG,
    )
    assert [p[0] for p in published] == [trial.executor.ctx.session_id]
    assert "cart" not in published[0][0], "the id the agent sees does not name the scenario"
    assert final.phase == TrialPhase.SUCCEEDED, final.message
    assert trial.registry.sessions() == [], "the token stops working after the trial"


@pytest.mark.slow
def test_a_broken_trial_errors_without_losing_the_others_in_the_process_pool(
    tmp_path: Path,
) -> None:
    from itbench.execution.benchmark import run_trials

    good = cart_scenario()
    doc = good.model_dump(mode="json", by_alias=True)
    doc["metadata"]["name"] = "broken-fault"
    doc["spec"]["faults"] = [{"id": "flagd.no-such-fault"}]
    broken = Scenario.model_validate(doc)
    plans = plan_trials("pool", [good, broken], [BuiltinAgent.NULL], trials=2, seed=7)
    store = RunStore(tmp_path / "pool")
    finished: list[str] = []
    statuses = run_trials(
        plans, store=store, workers=2, on_done=lambda p, s: finished.append(p.name)
    )
    assert sorted(finished) == sorted(p.name for p in plans)
    for plan in plans:
        status = statuses[plan.name]
        if plan.scenario.name == "broken-fault":
            assert status.phase == TrialPhase.ERRORED
            assert status.reason == "PlatformError"
            assert "flagd.no-such-fault" in status.message
        else:
            assert status.phase == TrialPhase.FAILED, status.message
        assert store.load_status(plan.name) == statuses[plan.name]


@pytest.mark.slow
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize(
    "phase",
    [
        TrialPhase.PROVISIONING,
        TrialPhase.INJECTING,
        TrialPhase.AWAITING_ALERTS,
        TrialPhase.READY,
        TrialPhase.AGENT_RUNNING,
        TrialPhase.EVALUATING,
        TrialPhase.RECOVERING,
    ],
)
def test_simulated_trial_resumes_after_a_crash_in_any_phase_without_reinjecting(
    tmp_path: Path, phase: TrialPhase, offset: int
) -> None:
    """The driver dies `offset` steps after the step that entered `phase`, before persisting."""
    from agents import BUILTIN_AGENTS
    from itbench.environments.sim.environment import SimEnvironment

    plan = plan_trials(
        "crash", [cart_scenario()], [BuiltinAgent.ORACLE], trials=1, seed=3, allow_oracle=True
    )[0]
    env = SimEnvironment(seed=plan.seed, namespace="otel-demo")
    registry = SessionRegistry()
    executor = TrialExecutor(plan.context(), env, registry, MemoryEvidenceStore())
    app = create_app(registry)

    def oracle(ex: TrialExecutor) -> None:
        assert ex.token is not None
        client = ITBenchClient.in_process(app, ex.token)
        try:
            BUILTIN_AGENTS["oracle"](client)
        finally:
            client.close()

    saved: list[TrialStatus] = []
    since_entry: list[int] = []

    def persist(status: TrialStatus) -> None:
        if not since_entry and status.phase == phase:
            since_entry.append(0)
        elif since_entry:
            since_entry[0] += 1
        if since_entry and since_entry[0] == offset:
            raise DriverCrashError
        saved.append(status)

    with pytest.raises(DriverCrashError):
        drive_trial(
            new_status(env.now()),
            executor,
            persist=persist,
            run_agent=oracle,
            config=EMBEDDED_CONFIG,
        )
    final = drive_trial(
        saved[-1] if saved else new_status(env.now()),
        executor,
        persist=saved.append,
        run_agent=oracle,
        config=EMBEDDED_CONFIG,
    )
    assert final.phase == TrialPhase.SUCCEEDED, final.message
    assert env.injections() == executor.ctx.inject_keys(), "each injection once"
    assert [e.phase for e in final.timeline].count(TrialPhase.INJECTING) == 1
    assert final.injections == 1


@dataclass
class PoisonedShop(FakeShop):
    """A stand-in whose physics break for good once the agent has applied a change."""

    poisoned: bool = False

    def act(self, action: AgentAction) -> ActionResult:
        result = super().act(action)
        self.poisoned = self.poisoned or result.outcome == "applied"
        return result

    def snapshot(self) -> EnvironmentSnapshot:
        if self.poisoned:
            raise TypeError("'str' object cannot be interpreted as an integer")
        return super().snapshot()


def test_an_environment_broken_by_the_agent_fails_the_trial_as_the_agents_not_the_platform(
    tmp_path: Path,
) -> None:
    h = harness(tmp_path, env=PoisonedShop())
    final = drive(h, new_status(h.env.now()), h.saved.append)
    assert final.phase == TrialPhase.FAILED
    assert final.reason == "AgentInducedFailure"
    assert final.message.startswith("agent: the environment broke after the agent's changes")


def test_an_environment_that_breaks_before_the_agent_changes_anything_is_the_platforms(
    tmp_path: Path,
) -> None:
    shop = PoisonedShop()

    def idle(client: ITBenchClient) -> None:
        client.next_trial(timeout=0)
        client.started()
        shop.poisoned = True  # breaks on its own: the agent has changed nothing
        client.finished()

    h = harness(tmp_path, env=shop)
    final = drive(h, new_status(h.env.now()), h.saved.append, agent=idle)
    assert final.phase == TrialPhase.ERRORED
    assert final.reason == "PlatformError"


def test_an_agents_calls_wait_for_the_runner_on_a_virtual_clock() -> None:
    """The simulator is not thread-safe: an agent calling the gateway while the runner steps or
    waits the same trial must not run inside it."""
    from itbench.catalog_files import load_catalog
    from itbench.cli.serve import practice_trial
    from itbench.core.models.base import TelemetryToggles
    from itbench.core.runner.actions import OpenSession

    catalog, _ = load_catalog(Path(__file__).resolve().parents[2] / "scenarios")
    trial = practice_trial(
        catalog.get("cart-flagd-failure"), seed=1, agent_seconds=600, allow_oracle=False
    )
    executor = trial.executor
    executor.env.provision()
    executor.execute(
        [
            OpenSession(
                key="t/open",
                trial_id=executor.ctx.session_id,
                agent_name="a",
                telemetry=TelemetryToggles(),
                allow_oracle=False,
            )
        ]
    )
    session = executor.session()
    assert session is not None and session.lock is executor.lock
    trial.registry.mark_ready(session.trial_id, executor.now() + timedelta(hours=1))
    client = ITBenchClient.in_process(create_app(trial.registry), session.token)
    client.use_trial(session.trial_id)
    done = threading.Event()

    def call() -> None:
        client.alerts()
        done.set()

    with executor.lock:
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        assert not done.wait(0.5)  # held off while the runner holds the environment
    assert done.wait(60)
    caller.join(60)
    client.close()


def test_a_trial_ends_with_a_young_collection_and_every_32nd_with_a_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    generations: list[int] = []

    def collect(generation: int = 2) -> int:
        generations.append(generation)
        return 0

    monkeypatch.setattr(benchmark, "_trials_collected", [0])
    monkeypatch.setattr(gc, "collect", collect)
    for _ in range(2 * benchmark.FULL_COLLECTION_EVERY):
        benchmark.collect_after_trial()
    every = benchmark.FULL_COLLECTION_EVERY
    assert generations == ([1] * (every - 1) + [2]) * 2


def test_each_trial_of_a_run_leaves_no_garbage_behind() -> None:
    import gc

    from itbench.execution.benchmark import run_trials

    plans = plan_trials("garbage", [cart_scenario()], [BuiltinAgent.NULL], trials=2, seed=3)
    left: list[int] = []

    def count(plan: TrialPlan, status: TrialStatus) -> None:
        left.append(gc.collect())

    gc.collect()  # what earlier tests left is not these trials' garbage
    statuses = run_trials(plans, store=None, workers=1, on_done=count)
    assert all(s.phase.final for s in statuses.values())
    # The collector runs seldom while a trial runs and once when it ends (the generations a
    # trial's objects are in): what a finished trial left in reference cycles (thousands of
    # objects) is freed before the next trial starts.
    assert max(left) < 100, left
