"""How a baseline declares itself to the agent registry (entry points `itbench.agents`).

The registry reads `run`, `domains`, `wall_seconds`, `description` and `check` from whatever an
entry point names; this dataclass is one way to provide them (any object with the same
attributes, or a bare `run(client, **args)` callable, works too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Agent:
    """An agent's declaration.

    Attributes:
        run: `run(client, **args)`: works one trial through the SDK client.
        domains: Domain names it is benchmarked on (empty: every domain).
        wall_seconds: Real seconds it may take per trial (None: the platform's default).
        description: One line about it.
        check: Given its arguments, the problems that stop a run before it starts.
    """

    run: Callable[..., None]
    domains: tuple[str, ...] = ()
    wall_seconds: float | None = None
    description: str = ""
    check: Callable[[Mapping[str, str]], list[str]] | None = None
