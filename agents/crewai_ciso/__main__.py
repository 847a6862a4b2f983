"""`python -m agents.crewai_ciso`: the crew as a command or image (ITBENCH_* variables)."""

from __future__ import annotations

import sys

from agents.crew.session import main
from itbench.client import Domain

if __name__ == "__main__":
    sys.exit(main(Domain.CISO, "agents.crewai_ciso.crew"))
