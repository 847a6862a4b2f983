"""The default embedded benchmark at full size: whole catalog, 10 trials per scenario, the
heuristic agents, every core. Targets: under 60 s wall time and under 1 GB peak memory.

`make bench` runs it on the compiled build (`itbench.compiled`) where a C compiler is at hand;
`benchmark.compiled_modules` says which it ran on (0: the sources)."""

from __future__ import annotations

import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import Figure, peak_children_rss_mb, peak_rss_mb, reference_seconds
from itbench.catalog_files import load_catalog
from itbench.compiled import running_build
from itbench.core.models.base import Domain
from itbench.execution.benchmark import default_workers
from itbench.execution.embedded import BenchmarkOptions, run_benchmark
from itbench.execution.plan import DEFAULT_AGENTS

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 10


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run() -> list[Figure]:
    """Run the benchmark once and return its figures."""
    catalog, _problems = load_catalog(ROOT / "scenarios")
    workers = default_workers()
    options = BenchmarkOptions(
        run="bench",
        agents=list(DEFAULT_AGENTS),
        scenarios=list(catalog),
        trials=TRIALS,
        seed=42,
        workers=workers,
    )
    reference_before = reference_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        cpu_before = _cpu_seconds()
        start = time.perf_counter()
        result = run_benchmark(options, Path(tmp), created_at=datetime.now(UTC))
        wall = time.perf_counter() - start
        cpu = _cpu_seconds() - cpu_before
    reference_after = reference_seconds()
    trials = len(result.plans)
    # Workers run side by side: the peak is at most the parent's plus each worker's peak.
    peak = peak_rss_mb() + workers * peak_children_rss_mb()
    report = result.report
    figures = [
        Figure("benchmark.wall_time", wall, "s", target=60.0),
        Figure("benchmark.peak_memory", peak, "MB", target=1024.0),
        Figure("benchmark.trials", float(trials), "trials"),
        Figure("benchmark.throughput", trials / wall if wall else 0.0, "trials/s"),
        # CPU time does not depend on what else the machine runs; spread over the workers it
        # is the wall time the run would take on otherwise idle cores.
        Figure("benchmark.cpu_time", cpu, "s"),
        Figure("benchmark.cpu_per_trial", cpu / trials if trials else 0.0, "s"),
        Figure("benchmark.idle_core_wall_estimate", cpu / workers, "s"),
        Figure("benchmark.errored", float(report.errored.count), "trials"),
        Figure("benchmark.compiled_modules", float(len(running_build())), "modules"),
        # The machine's speed just before and just after the run (`reference_seconds`): on a
        # VM whose speed drifts, they tell a slow phase from a slower build.
        Figure("machine.reference_loop_before", reference_before, "s"),
        Figure("machine.reference_loop_after", reference_after, "s"),
    ]
    # One result per agent; the heuristic agents cover different personas, so task keys are
    # unique across them.
    for result in report.agents:
        for task in result.tasks:
            if task.pass_at_k:
                mean = task.pass_at_k[0].estimate.mean
                figures.append(Figure(f"heuristic.{task.key}.pass_at_1", mean or 0.0, "ratio"))
        for rate in result.resolution:
            key = rate.domain.value.lower() if rate.domain != Domain.FINOPS else "finops"
            figures.append(
                Figure(f"heuristic.{key}.resolution", rate.estimate.mean or 0.0, "ratio")
            )
        for timing in result.timings:
            if timing.mean_seconds is not None:
                figures.append(Figure(f"heuristic.{timing.key}", timing.mean_seconds, "s"))
    return figures
