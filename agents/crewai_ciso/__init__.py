"""A CISO baseline with CrewAI: a sequential crew, an analyst who reads the requirement and the
environment (the namespace's objects, or the RHEL9 host's files and commands), then an engineer
who writes the artefacts the requirement asks for (a Kyverno policy, the updated policy set, or
an evidence collection with a Rego policy), lints and tries them, and submits them.

Registered as `crewai-ciso`; `python -m agents.crewai_ciso` runs it as a command or an image.
Importing this package does not import CrewAI.
"""

from __future__ import annotations

from agents.crew.config import check
from agents.crew.session import crew_runner
from agents.plugin import Agent
from itbench.client import Domain

run = crew_runner(Domain.CISO, "agents.crewai_ciso.crew")
"""Work one CISO trial with the crew (see `crew_runner` for the arguments)."""

AGENT = Agent(
    run=run,
    domains=("CISO",),
    wall_seconds=1800.0,
    description="CrewAI CISO crew: writes, lints and submits CIS policies and collections.",
    check=check,
)
"""The registry's entry (`itbench.agents`: crewai-ciso)."""
