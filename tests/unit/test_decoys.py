"""Decoys: drawn from the trial's seed, benign, and never on what the scenario involves."""

from __future__ import annotations

from pathlib import Path

import pytest

from itbench.catalog_files import load_catalog
from itbench.core.decoys import QUIET_WORKLOADS, decoys_for, involved_names
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario

ROOT = Path(__file__).parents[2] / "scenarios"


@pytest.fixture(scope="module")
def catalog() -> list[Scenario]:
    loaded, problems = load_catalog(ROOT)
    assert problems == []
    # Decoys belong to incidents (SRE, FinOps); a CISO assessment's environment has none.
    return sorted((s for s in loaded if s.spec.domain != Domain.CISO), key=lambda s: s.name)


def _key(scenario: Scenario, seed: int) -> list[tuple[str, str, bool, str]]:
    return [
        (d.ref, d.description, d.before_fault, repr(d.changes)) for d in decoys_for(scenario, seed)
    ]


def test_the_same_seed_gives_the_same_decoys_and_other_seeds_other_decoys(
    catalog: list[Scenario],
) -> None:
    for scenario in catalog:
        assert _key(scenario, 42) == _key(scenario, 42), scenario.name
        drawn = {tuple(_key(scenario, seed)) for seed in range(12)}
        assert len(drawn) > 1, f"{scenario.name}: twelve seeds drew one set of decoys"


def test_decoys_never_touch_what_the_scenario_involves_and_stay_off_the_entry_path(
    catalog: list[Scenario],
) -> None:
    for scenario in catalog:
        involved = involved_names(scenario)
        for seed in range(8):
            decoys = decoys_for(scenario, seed)
            assert 1 <= len(decoys) <= 4, (scenario.name, seed)
            for d in decoys:
                if d.kind == "Deployment":
                    assert d.name not in involved, (scenario.name, seed, d.ref)
                    assert d.name not in QUIET_WORKLOADS, (scenario.name, seed, d.ref)
                for change in d.changes:
                    assert change.op != "delete", "a decoy never deletes"


def test_finops_decoys_never_scale_so_the_cost_is_the_faults_alone(
    catalog: list[Scenario],
) -> None:
    finops = [s for s in catalog if s.spec.domain == Domain.FINOPS]
    assert finops
    for scenario in finops:
        for seed in range(16):
            assert not [d for d in decoys_for(scenario, seed) if "scaled" in d.description]


def test_a_compliance_assessment_gets_no_decoys() -> None:
    loaded, _ = load_catalog(ROOT)
    ciso = [s for s in loaded if s.spec.domain == Domain.CISO]
    assert ciso
    assert all(decoys_for(s, seed) == [] for s in ciso for seed in range(4))


def test_where_new_pods_may_not_run_decoys_create_no_pods(catalog: list[Scenario]) -> None:
    """Cordoning the only worker or a namespace quota refuses any new pod: a decoy rollout or
    scale-up would be a second, unfixable incident."""
    from itbench.core.decoys import blocks_new_pods

    blocking = [s for s in catalog if blocks_new_pods(s)]
    assert {"payment-cordoned-node", "kafka-priority-preemption"} <= {s.name for s in blocking}
    for scenario in blocking:
        for seed in range(16):
            for d in decoys_for(scenario, seed):
                for change in d.changes:
                    assert "spec" not in change.body, (scenario.name, seed, d.description)
    free = next(s for s in catalog if s.name == "cart-flagd-failure")
    assert not blocks_new_pods(free)
    assert any("rollout" in d.description for seed in range(8) for d in decoys_for(free, seed))
