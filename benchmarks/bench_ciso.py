"""CISO: Rego evaluation per scenario (regorus in the engine process, on the evidence the
reference collection gathers), CEL evaluation per Kyverno scenario, and the whole CISO catalog
at 8 trials per scenario on the compliance twin with the reference agent.

Targets: one Rego evaluation under 50 ms, one CEL policy evaluation over the namespace under
250 ms (both medians, engine process warm); the catalog run has no target (its wall time is
dominated by the evidence collections, each a sandbox of its own).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from agents.ciso_reference import solutions
from benchmarks.harness import Figure
from itbench.catalog_files import load_catalog
from itbench.ciso.engines import EngineSandbox
from itbench.ciso.evaluate import _assessed, _namespace_object, twin_of
from itbench.ciso.sandbox import EnvironmentView, run_collection, sandbox_problem
from itbench.core.ciso.classes import CisoClass
from itbench.core.ciso.posture import setting_faults
from itbench.core.models.base import Domain
from itbench.core.models.compliance import CollectionKind, EvidenceCollection
from itbench.core.models.scenario import Scenario
from itbench.execution.agents import resolve
from itbench.execution.benchmark import default_workers
from itbench.execution.embedded import BenchmarkOptions, run_benchmark

ROOT = Path(__file__).resolve().parents[1]
TRIALS = int(os.environ.get("ITBENCH_BENCH_CISO_TRIALS", "8"))
REPEAT = 15


def _ciso() -> list[Scenario]:
    catalog, _problems = load_catalog(ROOT / "scenarios")
    return sorted((s for s in catalog if s.spec.domain == Domain.CISO), key=lambda s: s.name)


def _setting(scenario: Scenario) -> str:
    return setting_faults(scenario)[0][1]


def _median_ms(call: object, box: EngineSandbox, request: dict[str, object]) -> float:
    assert callable(call)
    box.call(request)
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        answer = box.call(request)
        samples.append(time.perf_counter() - start)
        assert answer.get("ok"), answer
    return statistics.median(samples) * 1000


def _engine_figures(scenarios: list[Scenario]) -> list[Figure]:
    box = EngineSandbox(timeout_seconds=30.0)
    rego: list[float] = []
    cel: list[float] = []
    figures: list[Figure] = []
    try:
        for scenario in scenarios:
            cls = scenario.spec.scenario_class
            setting = _setting(scenario)
            env = twin_of(scenario)
            if cls == CisoClass.KYVERNO.value:
                policy = solutions.validating_policy("cis", solutions.CEL[setting], "x")
                request = {
                    "op": "cel-eval",
                    "docs": [yaml.safe_load(yaml.safe_dump(policy))],
                    "objects": _assessed(env),
                    "namespace": _namespace_object(env),
                }
                ms = _median_ms(box.call, box, request)
                cel.append(ms)
                figures.append(Figure(f"ciso.cel_eval.{scenario.name}", ms, "ms"))
                continue
            if cls == CisoClass.K8S_OPA.value:
                rules = solutions.REGO_K8S[setting]
                content = solutions.k8s_collection(env.namespace)
            elif cls == CisoClass.RHEL9_OPA.value:
                rules, content = solutions.REGO_HOST[setting], solutions.HOST_SCRIPT
            else:
                continue
            view = EnvironmentView(env.namespace, env.objects(), env.host_state())
            collected = run_collection(
                EvidenceCollection(kind=CollectionKind.SCRIPT, content=content), view
            )
            assert collected.ok, collected.problem
            request = {
                "op": "rego-eval",
                "module": solutions.rego_module(rules),
                "input": collected.evidence,
            }
            ms = _median_ms(box.call, box, request)
            rego.append(ms)
            figures.append(Figure(f"ciso.rego_eval.{scenario.name}", ms, "ms"))
    finally:
        box.close()
    return [
        Figure("ciso.rego_eval.p50", statistics.median(rego), "ms", target=50.0),
        Figure("ciso.rego_eval.max", max(rego), "ms"),
        Figure("ciso.cel_eval.p50", statistics.median(cel), "ms", target=250.0),
        Figure("ciso.cel_eval.max", max(cel), "ms"),
        *figures,
    ]


def _catalog_figures(scenarios: list[Scenario]) -> list[Figure]:
    workers = default_workers()
    options = BenchmarkOptions(
        run="bench-ciso",
        agents=[resolve("ciso-reference", wall_seconds=600.0)],
        scenarios=scenarios,
        trials=TRIALS,
        seed=42,
        workers=workers,
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_benchmark(options, Path(tmp), created_at=datetime.now(UTC))
        wall = time.perf_counter() - start
    trials = len(result.plans)
    figures = [
        Figure("ciso.catalog.trials", float(trials), "trials"),
        Figure("ciso.catalog.wall_time", wall, "s"),
        Figure("ciso.catalog.seconds_per_trial", wall / trials if trials else 0.0, "s"),
        Figure("ciso.catalog.errored", float(result.report.errored.count), "trials"),
    ]
    for agent in result.report.agents:
        for task in agent.tasks:
            if task.pass_at_k:
                mean = task.pass_at_k[0].estimate.mean or 0.0
                figures.append(
                    Figure(f"ciso.reference.{task.key}.pass_at_1", mean, "ratio", 0.999, ">")
                )
    return figures


def run() -> list[Figure]:
    """Measure the engines per scenario, then the catalog run."""
    problem = sandbox_problem()
    if problem:
        return [Figure("ciso.sandbox_unavailable", 1.0, "flag", target=0.5)]
    scenarios = _ciso()
    return [*_engine_figures(scenarios), *_catalog_figures(scenarios)]
