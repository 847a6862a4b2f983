"""How an agent says that its turn failed for a reason that is not its own: its model endpoint
failed. The trial then ends Errored (ModelUnavailable), kept apart from the agent's failures."""

from __future__ import annotations

MODEL_UNAVAILABLE_EXIT = 75
"""The exit status (EX_TEMPFAIL) with which an agent command says its model endpoint failed."""


class ModelUnavailableError(RuntimeError):
    """Raised by an in-process agent whose model endpoint failed (connection refused, 5xx,
    authentication refused, timeout): the trial ends Errored (ModelUnavailable), not Failed."""
