"""The scenario catalog: validating the whole catalog, refusing hostile files, self-testing it.

Validation and refusals are measured in this process (wall time, median of repeats, and peak
traced memory); the self-test of every scenario instance runs in the simulator, in one process
and on two cores.
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import Figure, median_seconds, peak_children_rss_mb, peak_rss_mb
from itbench.bounded_yaml import YamlError, parse_one
from itbench.catalog_files import load_catalog, load_tree
from itbench.environments.sim.selftest import run_catalog_selftest

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "scenarios"
CORPUS = ROOT / "tests/fixtures/hostile_scenarios"


def _peak_mb(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    with contextlib.suppress(YamlError):
        fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def _refuse(text: str) -> Callable[[], object]:
    def parse() -> object:
        try:
            return parse_one(text)
        except YamlError as exc:
            return exc

    return parse


def _bomb(levels: int) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def validation_figures() -> list[Figure]:
    """Whole-catalog validation and the refusal of hostile inputs: time and peak memory."""
    catalog, problems = load_catalog(CATALOG)
    if problems:
        raise SystemExit("catalog has problems:\n" + "\n".join(str(p) for p in problems))
    instances = sum(len(catalog.variants(n).instances) for n in catalog.names)
    cases = {
        "alias bomb (9**12 nodes)": _refuse(_bomb(12)),
        "5,000-deep nesting": _refuse("a: " + "[" * 5000 + "]" * 5000),
        "parse the largest text allowed (128 KiB, 12k keys)": _refuse(
            "".join(f"k{n}: {n}\n" for n in range(12_000))[: 128 * 1024 - 64]
        ),
    }
    figures = [
        Figure("catalog validate: scenarios", float(len(catalog)), "count"),
        Figure("catalog validate: instances", float(instances), "count"),
        Figure(
            "catalog validate: wall time",
            median_seconds(lambda: load_catalog(CATALOG), repeat=5),
            "s",
            2.0,
        ),
        Figure("catalog validate: peak memory", _peak_mb(lambda: load_catalog(CATALOG)), "MB", 64),
        Figure(
            "hostile corpus: wall time",
            median_seconds(lambda: load_tree([CORPUS]), repeat=3),
            "s",
            3.0,
        ),
        Figure("hostile corpus: peak memory", _peak_mb(lambda: load_tree([CORPUS])), "MB", 32),
    ]
    for name, parse in cases.items():
        label = name if name.startswith("parse") else f"refuse {name}"
        target_s = 3.0 if name.startswith("parse") else 0.1
        figures.append(Figure(f"{label}: wall time", median_seconds(parse), "s", target_s))
        figures.append(Figure(f"{label}: peak memory", _peak_mb(parse), "MB", 32))
    return figures


def run() -> list[Figure]:
    """Validation figures, then a self-test of every instance of the catalog (seed 0)."""
    figures = validation_figures()
    catalog, _ = load_catalog(CATALOG)
    scenarios = [i.scenario for n in catalog.names for i in catalog.variants(n).instances]
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
        *figures,
        Figure("catalog selftest: instances", float(len(scenarios)), "count"),
        Figure("catalog selftest: failed instances", float(len(failed)), "count", 1.0),
        Figure("catalog selftest: 2-worker results differ", float(not same), "bool", 1.0),
        Figure("catalog selftest: wall time, 2 workers", parallel, "s", 45.0),
        Figure("catalog selftest: wall time, 1 process", single, "s"),
        Figure("catalog selftest: CPU time, 1 process", cpu, "s", 45.0),
        Figure("catalog selftest: per instance, 1 process", single / max(len(scenarios), 1), "s"),
        Figure(
            "catalog selftest: peak memory per process",
            max(peak_rss_mb(), peak_children_rss_mb()),
            "MB",
            500.0,
        ),
    ]
