"""`python -m agents.crewai_sre`: the FinOps crew as a command or image (ITBENCH_* variables)."""

from __future__ import annotations

import sys

from agents.crew.session import main
from agents.crewai_finops.crew import build
from itbench.client import Domain

if __name__ == "__main__":
    sys.exit(main(Domain.FINOPS, build))
