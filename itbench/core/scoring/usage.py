"""Model usage per agent: the tokens, model seconds and estimated cost of each agent's trials."""

from __future__ import annotations

from collections.abc import Sequence

from itbench.core.models.agent_record import AgentInfo, AgentUsage, ModelUsage
from itbench.core.models.report import TrialRecord


def agent_usage(records: Sequence[TrialRecord]) -> list[AgentUsage]:
    """Sum the model usage of each agent's trials.

    Trials are grouped by the agent they record (name, version and what ran); records without
    agent information (older records) are left out. Errored trials count too: their model
    calls were made and paid for.

    Args:
        records: Trial records.

    Returns:
        One entry per agent, sorted by name: trials, trials that reported a trajectory, and
        calls, prompt and completion tokens, model seconds and estimated cost (USD, priced
        calls only; `unpriced_calls` counts the others), summed.
    """
    groups: dict[tuple[str, str, str], tuple[AgentInfo, list[TrialRecord]]] = {}
    for record in records:
        info = record.agent_info
        if info is None:
            continue
        key = (info.name, info.version, info.target)
        groups.setdefault(key, (info, []))[1].append(record)
    result: list[AgentUsage] = []
    for key in sorted(groups):
        info, members = groups[key]
        total = ModelUsage()
        reported = 0
        for record in members:
            if record.usage is not None:
                total = total.plus(record.usage)
                reported += 1
        result.append(
            AgentUsage(
                agent=info, trials=len(members), trials_with_trajectory=reported, usage=total
            )
        )
    return result
