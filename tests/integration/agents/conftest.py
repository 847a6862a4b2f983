"""CrewAI reads its telemetry switches when it is imported, so they are off before any test
module imports it (the crews switch them off the same way when `agents.crew` is imported)."""

from __future__ import annotations

from agents.crew.config import telemetry_off

telemetry_off()
