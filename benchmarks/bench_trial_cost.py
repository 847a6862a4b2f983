"""Where an embedded trial's CPU goes: a sample of the default benchmark's trials run in this
process, with the simulator's parts timed (CPU seconds of this process) and its 15-second ticks
counted by the trial phase they fall in.

The figures have no targets: they say which part `bench_benchmark`'s wall-time target depends
on. Physics is the control loop and the traffic model, telemetry is what the shop emits each tick
(log lines, the spans the collector counts) and the scrapes every 30 s, rules are the alert-rule
evaluations (every 30 s of virtual time, whoever asks), and the
rest is the trial runner, the grader, the gateway and the agent's own work. On the compiled
build (`itbench.compiled`) the parts cannot be instrumented (compiled classes call each other
directly), so only the cost per trial is given.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure
from itbench.catalog_files import load_catalog
from itbench.compiled import running_build
from itbench.environments.sim import alerts, cluster, environment, telemetry, traffic
from itbench.execution import benchmark, driver
from itbench.execution.plan import DEFAULT_AGENTS, plan_trials

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = 24
"""Trials in the sample: every n-th trial of one attempt per scenario and default agent."""

_PARTS: dict[str, list[tuple[type, str]]] = {
    "physics": [(cluster.Cluster, "reconcile"), (traffic.TrafficModel, "step")],
    "telemetry": [(telemetry.Scraper, "record"), (telemetry.Scraper, "scrape")],
    "rules": [(alerts.AlertEvaluator, "_evaluate")],
}


@contextlib.contextmanager
def _timed(spent: dict[str, float]) -> Iterator[None]:
    """Add each part's CPU seconds to `spent` while the block runs."""
    saved: list[tuple[type, str, Callable[..., Any]]] = []

    def wrap(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.process_time() - start

        return timed

    try:
        for part, methods in _PARTS.items():
            for owner, name in methods:
                fn = getattr(owner, name)
                saved.append((owner, name, fn))
                setattr(owner, name, wrap(part, fn))
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


@contextlib.contextmanager
def _ticks_by_phase(ticks: Counter[str]) -> Iterator[list[str]]:
    """Count the simulator's ticks by the phase of the trial they fall in (the yielded holder:
    set it to Provisioning before each trial, whose first step provisions)."""
    phase = ["Provisioning"]
    step, tick = driver.step_trial, environment.SimEnvironment._tick

    def stepped(*args: Any, **kwargs: Any) -> Any:
        decision = step(*args, **kwargs)
        phase[0] = decision.status.phase.value
        return decision

    def ticked(self: environment.SimEnvironment) -> None:
        ticks[phase[0]] += 1
        tick(self)

    driver.step_trial = stepped
    environment.SimEnvironment._tick = ticked  # type: ignore[method-assign]
    try:
        yield phase
    finally:
        driver.step_trial = step
        environment.SimEnvironment._tick = tick  # type: ignore[method-assign]


def run() -> list[Figure]:
    """Run the sample and return its breakdown."""
    catalog, _problems = load_catalog(ROOT / "scenarios")
    plans = plan_trials("cost", list(catalog), list(DEFAULT_AGENTS), trials=1, seed=42)
    plans = plans[:: max(1, len(plans) // SAMPLE)][:SAMPLE]
    # One trial first, untimed: a worker's gateway and the process-wide caches are built once.
    benchmark.run_trial(plans[-1], None)
    spent: dict[str, float] = dict.fromkeys(_PARTS, 0.0)
    ticks: Counter[str] = Counter()
    compiled = running_build()
    previous = gc.get_threshold()
    gc.set_threshold(*benchmark.GC_THRESHOLDS)
    try:
        with contextlib.ExitStack() as stack:
            phase = ["Provisioning"]
            if not compiled:
                stack.enter_context(_timed(spent))
                phase = stack.enter_context(_ticks_by_phase(ticks))
            start = time.process_time()
            for plan in plans:
                phase[0] = "Provisioning"
                benchmark.run_trial(plan, None)
                benchmark.collect_after_trial()  # as the benchmark's workers do
            total = time.process_time() - start
    finally:
        gc.set_threshold(*previous)
    n = len(plans)
    figures = [
        Figure("trial_cost.trials", float(n), "trials"),
        Figure("trial_cost.cpu_per_trial", total / n, "s"),
        Figure("trial_cost.compiled_modules", float(len(compiled)), "modules"),
    ]
    if compiled:
        return figures
    all_ticks = sum(ticks.values())
    figures += [
        Figure("trial_cost.ticks_per_trial", all_ticks / n, "ticks"),
        Figure(
            "trial_cost.cpu_per_tick",
            1000.0 * (spent["physics"] + spent["telemetry"]) / all_ticks,
            "ms",
        ),
    ]
    for part in (*_PARTS, "other"):
        seconds = spent.get(part, total - sum(spent.values()))
        figures.append(Figure(f"trial_cost.share.{part}", seconds / total, "ratio"))
    for name, count in sorted(ticks.items()):
        figures.append(Figure(f"trial_cost.ticks.{name}", count / n, "ticks"))
    return figures
