"""The null agent: proves that doing nothing scores 0 without breaking a trial."""

from __future__ import annotations

from agents.routines import finish
from itbench.client import ITBenchClient


def run(client: ITBenchClient) -> None:
    """Take the ready trial, report STARTED, then FINISHED.

    Args:
        client: The SDK client holding the trial's token.
    """
    client.next_trial()
    client.started()
    finish(client)
