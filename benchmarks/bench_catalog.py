"""Full-catalog self-test in the simulator: wall time and peak memory against the targets."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.harness import Figure, peak_children_rss_mb, peak_rss_mb
from itbench.catalog_files import load_catalog
from itbench.environments.sim.selftest import run_catalog_selftest

CATALOG = Path(__file__).resolve().parents[1] / "scenarios"


def run() -> list[Figure]:
    """Self-test every scenario of the catalog (seed 0), in one process and on two cores."""
    catalog, problems = load_catalog(CATALOG)
    if problems:
        raise SystemExit("catalog has problems:\n" + "\n".join(str(p) for p in problems))
    scenarios = list(catalog)
    start, cpu_start = time.perf_counter(), time.process_time()
    results = run_catalog_selftest(scenarios, seed=0)
    single = time.perf_counter() - start
    # CPU time stays meaningful when other work shares the machine; wall time does not.
    cpu = time.process_time() - cpu_start
    start = time.perf_counter()
    parallel_results = run_catalog_selftest(scenarios, seed=0, workers=2)
    parallel = time.perf_counter() - start
    failed = [r.scenario for r in results if not r.passed]
    same = [r.model_dump() for r in results] == [r.model_dump() for r in parallel_results]
    return [
        Figure("catalog selftest: scenarios", float(len(scenarios)), "count"),
        Figure("catalog selftest: failed scenarios", float(len(failed)), "count", 1.0),
        Figure("catalog selftest: 2-worker results differ", float(not same), "bool", 1.0),
        Figure("catalog selftest: wall time, 2 workers", parallel, "s", 30.0),
        Figure("catalog selftest: wall time, 1 process", single, "s"),
        Figure("catalog selftest: CPU time, 1 process", cpu, "s", 30.0),
        Figure("catalog selftest: per scenario, 1 process", single / max(len(scenarios), 1), "s"),
        Figure(
            "catalog selftest: peak memory per process",
            max(peak_rss_mb(), peak_children_rss_mb()),
            "MB",
            500.0,
        ),
    ]
