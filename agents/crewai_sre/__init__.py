"""The paper's SRE baseline with CrewAI: a sequential crew, a diagnosis agent then a mitigation
agent, reasoning from alerts, metrics, logs, traces, events and object state through the SDK.

Registered as `crewai-sre`; `python -m agents.crewai_sre` runs it as a command or an image.
Importing this package does not import CrewAI.
"""

from __future__ import annotations

from agents.crew.config import check
from agents.crew.session import crew_runner
from agents.plugin import Agent
from itbench.client import Domain

run = crew_runner(Domain.SRE, "agents.crewai_sre.crew")
"""Work one SRE trial with the crew (see `crew_runner` for the arguments)."""

AGENT = Agent(
    run=run,
    domains=("SRE",),
    wall_seconds=1800.0,
    description="CrewAI SRE crew (diagnosis, then mitigation) over NL2* tools with reflection.",
    check=check,
)
"""The registry's entry (`itbench.agents`: crewai-sre)."""
