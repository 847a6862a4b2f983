"""Every scenario in scenarios/ validates and passes its self-test in the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from itbench.catalog_files import load_catalog, load_file, load_variants
from itbench.core.complexity import TABLE_12, effective_complexity
from itbench.core.faults import get_fault
from itbench.core.models import Complexity, Domain, Scenario
from itbench.core.models.scenario import ExpectedAlert, Mitigation, MitigationStep
from itbench.core.tasks import mitigation_applies
from itbench.environments.port import Environment
from itbench.environments.sim.selftest import (
    run_catalog_selftest,
    run_selftest,
    simulator_environment,
)

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(ROOT.glob("*/*/scenario.yaml"))


def _load(path: Path) -> Scenario:
    scenario, problems = load_file(path)
    assert problems == [], [str(p) for p in problems]
    assert scenario is not None
    return scenario


def _by_name(name: str) -> Scenario:
    return _load(ROOT / ("finops" if name.startswith("finops") else "sre") / name / "scenario.yaml")


def _instances() -> list[tuple[Path, int]]:
    """Every instance of every file: a template contributes each of its instances."""
    out: list[tuple[Path, int]] = []
    for path in FILES:
        variants, _ = load_variants(path)
        out.extend((path, n) for n in range(len(variants.instances) if variants else 1))
    return out


def _instance_id(case: tuple[Path, int]) -> str:
    path, n = case
    return f"{path.parent.parent.name}/{path.parent.name}#{n}"


@pytest.mark.parametrize("case", _instances(), ids=_instance_id)
def test_scenario_instance_validates_and_passes_selftest(case: tuple[Path, int]) -> None:
    path, n = case
    variants, problems = load_variants(path)
    assert problems == [], [str(p) for p in problems]
    assert variants is not None
    scenario = variants.instances[n].scenario
    result = run_selftest(scenario, seed=0)
    failed = [f"{c.name}: {c.detail}" for c in result.failures()]
    assert result.passed, failed
    names = [c.name for c in result.checks]
    assert names[0] == "baseline-healthy"
    assert names[-1] == "baseline-restored"
    if scenario.spec.control:
        assert "control-silent" in names
    elif mitigation_applies(scenario):
        assert {"alerts-fire", "alerts-clear", "alerts-stay-clear"} <= set(names)
    else:
        assert {"alerts-fire", "mitigation-not-applicable"} <= set(names)


def test_catalog_loads_without_problems_and_is_large_enough() -> None:
    catalog, problems = load_catalog(ROOT)
    assert problems == []
    specs = [s.spec for s in catalog]
    sre = [s for s in specs if s.domain == Domain.SRE and not s.control]
    finops = [s for s in specs if s.domain == Domain.FINOPS and not s.control]
    controls = [s for s in specs if s.control]
    assert len(sre) >= 24
    # The cost-alert scenarios are gone: no real exporter writes a budget an agent may change
    # (scenarios/sre/README.md, "Dropped").
    assert len(finops) >= 3
    assert {s.scenario_class for s in finops} == {"AutoscalerMisconfiguration"}
    assert all(s.ground_truth.finops is not None for s in finops)
    assert len(controls) >= 2
    assert {s.scenario_class for s in controls} == {"NoFault"}


def test_sre_catalog_covers_every_table_12_row_with_its_numbers() -> None:
    catalog, _ = load_catalog(ROOT)
    seen = {
        (
            s.spec.scenario_class,
            s.spec.ground_truth.propagation_length(),
            s.spec.ground_truth.resolution_steps(),
            len({t.lower() for t in s.spec.environment.technologies}),
        )
        for s in catalog
        if s.spec.domain == Domain.SRE and not s.spec.control
    }
    missing = [
        row.pattern
        for row in TABLE_12
        if (row.pattern, row.propagation_length, row.resolution_steps, len(row.technologies))
        not in seen
    ]
    assert missing == []


def test_sre_catalog_spreads_over_complexities_and_telemetry() -> None:
    catalog, _ = load_catalog(ROOT)
    sre = [s for s in catalog if s.spec.domain == Domain.SRE and not s.spec.control]
    levels = {effective_complexity(s.spec)[0] for s in sre}
    assert levels == {Complexity.EASY, Complexity.MEDIUM, Complexity.HARD}
    assert all(s.spec.complexity is None for s in sre)
    without_traces = [s for s in sre if not s.spec.environment.telemetry.traces]
    assert len(without_traces) >= 5
    assert len(sre) - len(without_traces) >= 5


def test_every_sre_fault_scenario_chains_to_a_root_cause_with_a_condition() -> None:
    catalog, _ = load_catalog(ROOT)
    for s in catalog:
        if s.spec.control or s.spec.domain != Domain.SRE:
            continue
        roots = s.spec.ground_truth.root_causes()
        assert roots, s.name
        assert all(r.condition for r in roots), s.name
        assert all(e.condition and e.effect for e in s.spec.ground_truth.propagation), s.name
        assert all(m.steps for m in s.spec.ground_truth.mitigations), s.name


def test_control_scenario_raises_no_alert() -> None:
    result = run_selftest(_by_name("no-fault-control"), seed=3)
    silent = next(c for c in result.checks if c.name == "control-silent")
    assert silent.passed, silent.detail
    assert result.passed


@pytest.mark.interpreted
def test_control_selftest_fails_when_an_alert_fires() -> None:
    control = _by_name("no-fault-control")
    fault = get_fault("flagd.payment-failure")

    def broken(scenario: Scenario, seed: int) -> Environment:
        env = simulator_environment(scenario, seed)
        real_provision = env.provision

        def provision_then_break() -> None:
            real_provision()
            env.inject("sabotage", fault.changes({"percent": 100}, "otel-demo"))

        env.provision = provision_then_break  # type: ignore[method-assign]
        return env

    result = run_selftest(control, seed=0, environment=broken)
    assert not result.passed
    assert result.failures()[0].name in {"baseline-healthy", "control-silent"}


def test_selftest_fails_when_an_expected_alert_never_fires() -> None:
    scenario = _by_name("payment-failure")
    wrong = scenario.model_copy(deep=True)
    wrong.spec.triggers.alerts = [
        ExpectedAlert(alertname="PodCrashLooping", labels={"deployment": "payment"})
    ]
    wrong.spec.triggers.timeout_seconds = 300
    result = run_selftest(wrong, seed=0)
    assert not result.passed
    failed = result.failures()[0]
    assert failed.name == "alerts-fire"
    assert "PodCrashLooping{deployment=payment}" in failed.detail


def test_selftest_fails_when_the_mitigation_does_not_clear_the_alerts() -> None:
    scenario = _by_name("payment-failure")
    useless = scenario.model_copy(deep=True)
    useless.spec.ground_truth.mitigations = [
        Mitigation(
            description="Restart an unrelated service.",
            steps=[MitigationStep(action="rollout-restart", kind="Deployment", name="quote")],
        )
    ]
    result = run_selftest(useless, seed=0)
    assert not result.passed
    assert result.failures()[0].name == "alerts-clear"


def test_selftest_fails_when_the_mitigation_leaves_part_of_the_fault() -> None:
    scenario = _by_name("corrupt-release-multi-service")
    partial = scenario.model_copy(deep=True)
    steps = partial.spec.ground_truth.mitigations[0].steps
    partial.spec.ground_truth.mitigations[0].steps = [
        s for s in steps if not (s.kind == "Deployment" and s.name == "product-catalog")
    ]
    result = run_selftest(partial, seed=0)
    assert not result.passed
    failed = result.failures()[0]
    assert failed.name == "mitigated-healthy"
    assert "PodNotReady{deployment=product-catalog" in failed.detail


def test_traces_off_scenario_has_no_traces_and_traces_on_has_some() -> None:
    off = run_selftest(_by_name("quote-http-abort-no-traces"), seed=0)
    on = run_selftest(_by_name("quote-http-abort"), seed=0)
    off_check = next(c for c in off.checks if c.name == "telemetry-traces")
    on_check = next(c for c in on.checks if c.name == "telemetry-traces")
    assert off_check.passed and "0 trace(s)" in off_check.detail
    assert on_check.passed and "1 trace(s)" in on_check.detail


def test_catalog_selftest_is_deterministic_per_seed() -> None:
    scenarios = [_by_name("payment-failure"), _by_name("checkout-memory-limit")]
    first = run_catalog_selftest(scenarios, seed=7)
    second = run_catalog_selftest(scenarios, seed=7)
    spread = run_catalog_selftest(scenarios, seed=7, workers=2)
    assert [r.model_dump() for r in first] == [r.model_dump() for r in second]
    assert [r.model_dump() for r in first] == [r.model_dump() for r in spread]
    assert [r.scenario for r in first] == ["payment-failure", "checkout-memory-limit"]
