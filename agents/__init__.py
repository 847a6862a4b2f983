"""The baseline agents that ship with ITBench; each works one trial through the SDK alone.

`BUILTIN_AGENTS` maps each `BuiltinAgent` value to its `run(client)`.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.heuristic_finops.agent import run as heuristic_finops
from agents.heuristic_sre.agent import run as heuristic_sre
from agents.null.agent import run as null
from agents.oracle.agent import run as oracle
from agents.random.agent import run as random_agent
from itbench.client import ITBenchClient

AgentFn = Callable[[ITBenchClient], None]

BUILTIN_AGENTS: dict[str, AgentFn] = {
    "oracle": oracle,
    "null": null,
    "random": random_agent,
    "heuristic-sre": heuristic_sre,
    "heuristic-finops": heuristic_finops,
}
"""Built-in agents by `itbench.core.models.agent_submission.BuiltinAgent` value."""

__all__ = ["BUILTIN_AGENTS", "AgentFn"]
