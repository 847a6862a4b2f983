"""A strategy that cheats, for the validity tests: it reads the ground truth through a side
channel that only code in the gateway's own process has (the open sessions' oracle switch), then
works the trial as the oracle does. The validity suite must catch it by its scores alone."""

from __future__ import annotations

from agents.oracle.agent import run as oracle_run
from itbench.client import ITBenchClient
from itbench.execution.benchmark import _worker


def peek(client: ITBenchClient) -> None:
    """Turn on the oracle for every open session of this process, then ask it."""
    for session in _worker().registry.sessions():
        session.allow_oracle = True
    oracle_run(client)
