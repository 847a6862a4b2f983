"""The paper's FinOps baseline with CrewAI: a sequential crew that explains a cost alert (cost
series, autoscalers, resource settings), then removes the waste without breaking the service.

Registered as `crewai-finops`; `python -m agents.crewai_finops` runs it as a command or an image.
Importing this package does not import CrewAI.
"""

from __future__ import annotations

from agents.crew.config import check
from agents.crew.session import crew_runner
from agents.plugin import Agent
from itbench.client import Domain

run = crew_runner(Domain.FINOPS, "agents.crewai_finops.crew")
"""Work one FinOps trial with the crew (see `crew_runner` for the arguments)."""

AGENT = Agent(
    run=run,
    domains=("FinOps",),
    wall_seconds=1800.0,
    description="CrewAI FinOps crew: explains a cost alert, then removes the waste.",
    check=check,
)
"""The registry's entry (`itbench.agents`: crewai-finops)."""
