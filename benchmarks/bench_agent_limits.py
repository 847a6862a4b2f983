"""What an agent that asks the twin for thousands of pods costs a worker: one embedded trial of
`cart-flagd-failure` per agent, run in this process, against `wait_only`'s (the same calls and
waits without the actions).

Before the namespace limits (`itbench/environments/sim/limits.py`), scaling every Deployment to
1000 replicas had the twin model about 23,000 pods: its first tick after the scale ran for more
than 300 s (2-core machine, shared) and the trial never ended. Now `scale_everything` (every
Deployment to 1000 by the scale verb and to 2^31-1 by a patch, an HPA at 1000) is refused, and
`scale_to_the_bound` (every Deployment to 100, an HPA at 100) leaves the namespace at its pod
quota of 150 for the rest of the trial. The targets hold both within a small factor of the
baseline. `restart_everything` churns pods for its whole turn (900 s of trial time): each new
pod brings its series, so its trial's memory grows with the pods the namespace's quota lets it
make per rollout step, bounded by the turn's length (no target: the figure to watch).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path

import yaml

from benchmarks.harness import Figure
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialStatus
from itbench.execution.agents import from_callable
from itbench.execution.benchmark import run_trial
from itbench.execution.plan import plan_trials

ROOT = Path(__file__).resolve().parents[1]
REPEAT = 5
"""Timed trials per agent; the fastest is reported (the machine is shared: the others measure
what else ran)."""
TARGETS = {"scale_everything": 2.0, "scale_to_the_bound": 8.0}
"""Most a trial of each agent may cost, as a multiple of the baseline's wall time."""


def _scenario() -> Scenario:
    doc = yaml.safe_load((ROOT / "scenarios/sre/cart-flagd-failure/scenario.yaml").read_text())
    return Scenario.model_validate(doc)


def _trial(agent: str) -> tuple[float, TrialStatus]:
    info = from_callable(f"benchmarks.limit_agents:{agent}")
    (plan,) = plan_trials("limits", [_scenario()], [info], trials=1, seed=42)
    gc.collect()
    start = time.perf_counter()
    status = run_trial(plan, None)
    return time.perf_counter() - start, status


def _peak_mb(agent: str) -> float:
    tracemalloc.start()
    try:
        _trial(agent)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def run() -> list[Figure]:
    """Wall time and peak allocation of a trial per agent, and the ratios to the baseline's."""
    figures: list[Figure] = []
    walls: dict[str, float] = {}
    for agent in ("wait_only", *TARGETS, "restart_everything"):
        _trial(agent)  # warm-up: imports and caches
        walls[agent] = min(_trial(agent)[0] for _ in range(REPEAT))
        figures.append(Figure(f"limits.{agent}.trial_seconds", walls[agent], "s"))
        figures.append(Figure(f"limits.{agent}.peak_alloc", _peak_mb(agent), "MB"))
    for agent, target in TARGETS.items():
        figures.append(
            Figure(
                f"limits.{agent}.vs_wait_only_ratio", walls[agent] / walls["wait_only"], "x", target
            )
        )
    return figures
