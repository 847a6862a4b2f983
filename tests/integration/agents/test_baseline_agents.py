"""The baseline agents on the shipped catalog in the simulator, through the gateway and the SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_harness import Attempt, FaultDidNotManifestError, Harness, catalog

from agents import BUILTIN_AGENTS
from itbench.core.models.base import Domain
from itbench.core.models.scenario import FaultCategory, Scenario
from itbench.core.scoring.diagnosis import graded_truth, localization, predicted_root_causes
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.core.scoring.trial import fault_categories
from itbench.core.tasks import mitigation_applies
from tests.integration.ciso_sample import ciso_sample

SCENARIOS = catalog()
ORACLE_SCENARIOS = ciso_sample(SCENARIOS)
"""Every SRE, FinOps and control scenario, and one CISO scenario of each class and answer shape:
the oracle submits a CISO scenario's reference answer, which test_ciso_reference.py scores on
both variants of every CISO scenario."""
SRE = [s for s in SCENARIOS if s.spec.domain == Domain.SRE]
FINOPS = [s for s in SCENARIOS if s.spec.domain == Domain.FINOPS]
FAULTY = [s for s in SCENARIOS if not s.spec.control]


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    yield Harness()


def _ids(scenarios: list[Scenario]) -> list[str]:
    return [s.name for s in scenarios]


def _localized(attempt: Attempt) -> bool:
    report = attempt.session.diagnosis
    assert report is not None, f"{attempt.scenario.name}: no diagnosis submitted"
    scenario = attempt.scenario
    graded = graded_truth(scenario.spec.ground_truth, DEFAULT_PROFILE, fault_categories(scenario))
    return localization([e for e in report.entities if e.root_cause], graded)[0]


@pytest.mark.parametrize("scenario", ORACLE_SCENARIOS, ids=_ids(ORACLE_SCENARIOS))
def test_the_oracle_localizes_and_clears_every_scenario(
    harness: Harness, scenario: Scenario
) -> None:
    attempt = harness.attempt_or_skip(scenario, BUILTIN_AGENTS["oracle"], allow_oracle=True)
    if scenario.spec.domain == Domain.CISO:
        assert attempt.session.posture is not None
        return
    assert _localized(attempt)
    assert attempt.session.mitigation is not None
    if mitigation_applies(scenario):
        assert attempt.expected_alerts_firing() == []
        assert attempt.session.mitigation.resolved is True
    else:  # the cause is out of the agent's reach: nothing to mitigate
        assert attempt.expected_alerts_firing() != []
    assert attempt.session.state.value == "Closed"
    assert attempt.session.rejected_submissions == 0


def test_the_oracle_without_permission_learns_nothing(harness: Harness) -> None:
    scenario = FAULTY[0]
    attempt = harness.attempt_or_skip(scenario, BUILTIN_AGENTS["oracle"], allow_oracle=False)
    assert attempt.session.diagnosis is None
    assert [e.action for e in attempt.session.audit if e.outcome == "refused"] == ["oracle"]
    assert attempt.expected_alerts_firing() != []


@pytest.mark.parametrize("scenario", FAULTY[:4], ids=_ids(FAULTY[:4]))
def test_the_null_agent_reports_nothing_and_changes_nothing(
    harness: Harness, scenario: Scenario
) -> None:
    attempt = harness.attempt_or_skip(scenario, BUILTIN_AGENTS["null"])
    assert attempt.session.diagnosis is None
    assert attempt.session.mitigation is None
    assert [e.action for e in attempt.session.audit] == [
        "protocol.list",
        "protocol.started",
        "protocol.finished",
    ]
    assert attempt.expected_alerts_firing() != []


def test_the_random_agent_is_deterministic_per_trial(harness: Harness) -> None:
    scenario = SRE[0]
    first = harness.attempt_or_skip(scenario, BUILTIN_AGENTS["random"])
    assert first.session.diagnosis is not None
    guesses = predicted_root_causes(first.session.diagnosis)
    assert len(guesses) == 1
    assert guesses[0].startswith("Deployment/")
    acts = [e for e in first.session.audit if e.action.startswith("act.")]
    assert [e.action for e in acts] == ["act.rollout-restart"]


SRE_FAULTY = [s for s in SRE if not s.spec.control]
SRE_MITIGABLE = [s for s in SRE_FAULTY if mitigation_applies(s)]
CONTROLS = [s for s in SCENARIOS if s.spec.control]

# Measured on this harness (seed 7, the lived-in pinned shop, no decoys): heuristic-sre
# localized 73 of the 75 SRE scenarios and cleared the expected alerts of 47 of the 48 fault
# scenarios whose cause an agent can reach. It misses product-catalog-and-recommendation-cache-
# failure, where it names a service the failing calls reach first, and
# valkey-cart-delay-under-stress, where it names cart, a victim. It does not clear
# checkout-quota-under-flood, where it switches the flood off but leaves the quota that refuses
# checkout's pods. The bars sit at the measured figures.
LOCALIZED_AT_LEAST = (73, 75)
CLEARED_AT_LEAST = (47, 48)


@pytest.fixture(scope="module")
def heuristic_sre(harness: Harness) -> dict[str, Attempt]:
    attempts = {}
    for scenario in SRE:
        try:
            attempts[scenario.name] = harness.attempt(scenario, BUILTIN_AGENTS["heuristic-sre"])
        except FaultDidNotManifestError:
            continue
    return attempts


def _acts(attempt: Attempt) -> list[str]:
    return [e.action for e in attempt.session.audit if e.action.startswith("act.")]


def test_heuristic_sre_localizes_most_sre_faults(heuristic_sre: dict[str, Attempt]) -> None:
    localized = sorted(n for n, a in heuristic_sre.items() if _localized(a))
    missed = sorted(set(heuristic_sre) - set(localized))
    num, den = LOCALIZED_AT_LEAST
    assert len(localized) * den >= num * len(heuristic_sre), f"missed: {missed}"


def test_heuristic_sre_clears_the_alerts_of_most_sre_faults(
    heuristic_sre: dict[str, Attempt],
) -> None:
    reachable = {s.name for s in SRE_MITIGABLE} & set(heuristic_sre)
    cleared = sorted(n for n in reachable if not heuristic_sre[n].expected_alerts_firing())
    missed = sorted(reachable - set(cleared))
    num, den = CLEARED_AT_LEAST
    assert len(cleared) * den >= num * len(reachable), f"still firing: {missed}"


def test_heuristic_sre_names_a_chain_back_to_the_entry_service(
    heuristic_sre: dict[str, Attempt],
) -> None:
    attempt = heuristic_sre["product-catalog-ingress-blocked"]
    report = attempt.session.diagnosis
    assert report is not None
    roots = {e.ref(): e.category for e in report.entities if e.root_cause}
    assert roots == {"NetworkPolicy/product-catalog-ingress": FaultCategory.TRAFFIC_BLOCKED}
    assert _localized(attempt)
    edges = {(edge.source, edge.target) for edge in report.propagation_chain}
    assert ("NetworkPolicy/product-catalog-ingress", "Deployment/product-catalog") in edges
    assert "Deployment/frontend" in {target for _, target in edges}
    assert _acts(attempt) == ["act.patch"], "the blocking policy is fixed, not deleted"
    assert attempt.expected_alerts_firing() == []


def test_heuristic_sre_names_no_cause_and_changes_nothing_on_a_quiet_shop(
    heuristic_sre: dict[str, Attempt],
) -> None:
    for scenario in (s for s in CONTROLS if s.spec.domain == Domain.SRE):
        attempt = heuristic_sre[scenario.name]
        report = attempt.session.diagnosis
        assert report is not None, scenario.name
        assert predicted_root_causes(report) == [], scenario.name
        assert _acts(attempt) == [], scenario.name


def test_heuristic_sre_changes_nothing_when_no_object_shows_the_cause(
    heuristic_sre: dict[str, Attempt],
) -> None:
    injector_only = [
        s.name
        for s in SRE_FAULTY
        if all(f.id.startswith("chaos.") for f in s.spec.faults) and s.name in heuristic_sre
    ]
    assert len(injector_only) >= 10
    acted = {n: _acts(heuristic_sre[n]) for n in injector_only if _acts(heuristic_sre[n])}
    assert acted == {}
    for name in injector_only:
        report = heuristic_sre[name].session.diagnosis
        assert report is not None and predicted_root_causes(report), name


def test_heuristic_sre_never_trips_a_guardrail(heuristic_sre: dict[str, Attempt]) -> None:
    refused = [
        (name, e.action, e.reason)
        for name, a in heuristic_sre.items()
        for e in a.session.audit
        if e.outcome in ("refused", "rejected")
    ]
    assert refused == []


@pytest.mark.skipif(not FINOPS, reason="the catalog has no FinOps scenarios yet")
@pytest.mark.parametrize("scenario", FINOPS, ids=_ids(FINOPS))
def test_heuristic_finops_fixes_the_cost_problem(harness: Harness, scenario: Scenario) -> None:
    attempt = harness.attempt_or_skip(scenario, BUILTIN_AGENTS["heuristic-finops"])
    assert _localized(attempt)
    assert attempt.expected_alerts_firing() == []
    acts = _acts(attempt)
    if scenario.spec.control:
        assert acts == []
        return
    hpas = [
        e
        for e in scenario.spec.ground_truth.entities
        if e.root_cause and e.kind == "HorizontalPodAutoscaler"
    ]
    assert acts == ["act.patch"] * max(1, len(hpas)), "one patch per misconfigured object"
    report = attempt.session.diagnosis
    assert report is not None
    roots = [e for e in report.entities if e.root_cause]
    truth = {
        f"{e.kind.value}/{e.name}" for e in scenario.spec.ground_truth.entities if e.root_cause
    }
    assert len(roots) == max(1, len(hpas))
    for root in roots:
        assert root.ref() in truth
        assert root.category in (FaultCategory.AUTOSCALING, FaultCategory.ALERTING_THRESHOLD)
