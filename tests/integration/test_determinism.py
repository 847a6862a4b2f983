"""A run is a function of its seed: the same seed gives the same baselines, decoys, telemetry and
scores; another seed gives other decoys and other variant parameters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from itbench.catalog_files import load_catalog
from itbench.core.decoys import decoys_for
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.execution.embedded import BenchmarkOptions, run_benchmark
from itbench.execution.plan import trial_seed

ROOT = Path(__file__).parents[2] / "scenarios"
SCENARIOS = ("cart-flagd-failure", "product-catalog-ingress-blocked", "unschedulable-pods")


def _run(tmp: Path, seed: int) -> dict[str, dict[str, Any]]:
    catalog, problems = load_catalog(ROOT)
    assert problems == []
    options = BenchmarkOptions(
        run=f"seed-{seed}",
        agents=[BuiltinAgent.HEURISTIC_SRE],
        scenarios=[catalog.get(n) for n in SCENARIOS],
        trials=1,
        seed=seed,
        workers=1,
        variants={n: catalog.variants(n) for n in catalog.names},
    )
    result = run_benchmark(options, tmp, created_at=datetime(2026, 1, 1, tzinfo=UTC))
    lines = (result.root / "trials.jsonl").read_text().splitlines()
    return {r["scenario"]: r for r in map(json.loads, lines)}


def test_the_same_seed_gives_the_same_scores_and_another_seed_other_decoys(
    tmp_path: Path,
) -> None:
    first = _run(tmp_path / "a", 42)
    again = _run(tmp_path / "b", 42)
    assert set(first) == set(SCENARIOS)
    for name in SCENARIOS:
        a, b = first[name], again[name]
        assert (a["phase"], a["reason"], a["scores"]) == (b["phase"], b["reason"], b["scores"])
        assert a.get("parameters") == b.get("parameters")
    other = _run(tmp_path / "c", 43)
    catalog, _ = load_catalog(ROOT)
    moved = [
        n
        for n in SCENARIOS
        if [d.ref for d in decoys_for(catalog.get(n), trial_seed(42, n, 0))]
        != [d.ref for d in decoys_for(catalog.get(n), trial_seed(43, n, 0))]
        or first[n].get("parameters") != other[n].get("parameters")
    ]
    assert moved, "seed 43 drew the decoys and parameters of seed 42"
