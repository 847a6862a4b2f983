"""The heuristic agents through the embedded benchmark, graded as a run grades them: the lived-in
shop with the trial's decoys, the specific cause and its category, the whole environment after
the observation window. A decoy is never named, nothing outside the fault's scope is changed,
and a cause no object shows is named without being acted on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from itbench.catalog_files import load_catalog
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.execution.embedded import BenchmarkOptions, run_benchmark

ROOT = Path(__file__).parents[3]
_GAP = pytest.mark.xfail(
    strict=False,
    reason="the heuristic does not yet explain this scenario on the pinned stack",
)
SCENARIOS = [
    "checkout-payment-address",  # a rollout broke a dependency address: restore the template
    "product-catalog-wrong-target-port",  # a Service targets a port nothing listens on
    "payment-unreachable",  # a flag flagd serves: switch it off
    "checkout-shipping-partition",  # an injector-side partition: named, nothing changed
    "no-fault-control",  # nothing wrong: nothing named, nothing changed
    "finops-recommendation-hpa-misconfiguration",  # an autoscaler's bounds and target
    "finops-frontend-hpa-misconfiguration",  # a tuning change for a load test left in place
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert problems == []
    options = BenchmarkOptions(
        run="heuristics",
        agents=[BuiltinAgent.HEURISTIC_SRE, BuiltinAgent.HEURISTIC_FINOPS],
        scenarios=[catalog.get(n) for n in SCENARIOS],
        trials=1,
        seed=42,
        workers=2,
    )
    result = run_benchmark(
        options, tmp_path_factory.mktemp("runs"), created_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    return result.root


@pytest.fixture(scope="module")
def records(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "trials.jsonl").read_text().splitlines()
    return {r["scenario"]: r for r in map(json.loads, lines)}


def _actions(run_dir: Path, record: dict[str, Any]) -> list[str]:
    calls = json.loads((run_dir / "trajectories" / f"{record['trial']}.json").read_text())
    return [str(c.get("action", "")) for c in calls if str(c.get("action", "")).startswith("act.")]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=_GAP)
        if n in ("checkout-payment-address", "checkout-shipping-partition")
        else n
        for n in SCENARIOS
    ],
)
def test_the_heuristic_passes_every_task_without_collateral(
    records: dict[str, dict[str, Any]], name: str
) -> None:
    record = records[name]
    scores = record["scores"]
    assert record["phase"] == "Succeeded", (record["reason"], scores)
    assert scores.get("collateral") in (None, []), scores["collateral"]
    diagnosis = scores.get("diagnosis") or {}
    assert diagnosis.get("decoysNamed") in (None, []), diagnosis


@_GAP
def test_a_partition_no_object_shows_is_named_but_not_acted_on(
    run_dir: Path, records: dict[str, dict[str, Any]]
) -> None:
    record = records["checkout-shipping-partition"]
    assert record["tasks"] == ["sre.diagnosis"]
    assert record["scores"]["diagnosis"]["passed"] is True
    assert _actions(run_dir, record) == []


@_GAP
def test_each_fix_is_one_change_on_the_object_at_fault(
    run_dir: Path, records: dict[str, dict[str, Any]]
) -> None:
    actions = {n: _actions(run_dir, records[n]) for n in SCENARIOS}
    assert actions["checkout-payment-address"] == ["act.patch"]
    assert actions["product-catalog-wrong-target-port"] == ["act.patch"]
    assert actions["payment-unreachable"] == ["act.set-flag"]
    assert actions["no-fault-control"] == []
    assert actions["finops-recommendation-hpa-misconfiguration"] == ["act.patch"]
    assert actions["finops-frontend-hpa-misconfiguration"] == ["act.patch"]
