"""Two runs side by side: each run's agents, and the same agent (or two named ones) compared A
minus B per task on the scenarios both runs have."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from itbench.core.models.report import ComparedRun, RunComparison, TrialRecord
from itbench.core.scoring.aggregate import AgentSide, agent_sides, pairwise, table_columns
from itbench.core.scoring.profile import EvaluationProfile


class NothingToCompareError(ValueError):
    """Two runs have no pair of agents to compare; the message says how to pick one."""


def compare_runs(
    a: Sequence[TrialRecord],
    b: Sequence[TrialRecord],
    profile: EvaluationProfile,
    *,
    created_at: datetime,
    sources: tuple[str, str] = ("A", "B"),
    agents: tuple[str, str] | None = None,
) -> RunComparison:
    """Compare two runs: one result per (run, agent) and, per compared pair, A minus B per task.

    The pairs are `agents` when given (an agent of A, one of B); otherwise every agent both
    runs have; otherwise, when each run has one agent, those two. Scenarios pair by name and
    traces on/off, as within a report.

    Args:
        a: Trial records of run A.
        b: Trial records of run B.
        profile: The evaluation profile both are aggregated under.
        created_at: When the comparison is computed.
        sources: Where each side's records came from (for labels).
        agents: The agent of A and the agent of B to compare.

    Raises:
        NothingToCompareError: A named agent has no trials, or no pair can be chosen.
    """
    side_a = {side.name: side for side in agent_sides(a)}
    side_b = {side.name: side for side in agent_sides(b)}
    if agents is not None:
        for name, side, label in ((agents[0], side_a, sources[0]), (agents[1], side_b, sources[1])):
            if name not in side:
                known = ", ".join(side) or "none"
                raise NothingToCompareError(
                    f"{label}: no trials of agent {name!r} (agents: {known})"
                )
        chosen = [agents]
    else:
        chosen = [(n, n) for n in side_a if n in side_b]
        if not chosen and len(side_a) == 1 and len(side_b) == 1:
            chosen = [(next(iter(side_a)), next(iter(side_b)))]
    if not chosen:
        raise NothingToCompareError(
            f"no agent is in both runs ({sources[0]}: {', '.join(side_a) or 'none'}; "
            f"{sources[1]}: {', '.join(side_b) or 'none'}); name one of each with --agent-a "
            "and --agent-b"
        )
    sides: list[AgentSide] = []
    pairs: list[tuple[int, int]] = []
    for name_a, name_b in chosen:
        sides += [side_a[name_a].renamed(f"A:{name_a}"), side_b[name_b].renamed(f"B:{name_b}")]
        pairs.append((len(sides) - 2, len(sides) - 1))
    results_a = [side.result for side in side_a.values()]
    results_b = [side.result for side in side_b.values()]
    return RunComparison(
        profile=profile.id,
        created_at=created_at,
        columns=table_columns([*results_a, *results_b]),
        a=ComparedRun(
            label="A", source=sources[0], runs=sorted({r.run for r in a}), agents=results_a
        ),
        b=ComparedRun(
            label="B", source=sources[1], runs=sorted({r.run for r in b}), agents=results_b
        ),
        comparisons=pairwise(sides, pairs),
    )
