"""`itbench agents list|show`: the agent registry (entry points `itbench.agents`), each agent's
version, domains, arguments and the problems that would stop it (e.g. no model configured)."""

from __future__ import annotations

from typing import Any

import click

from itbench.cli.context import BadInput, OutputFormat, dump, output_option, print_rows
from itbench.execution.agents import (
    TRAJECTORY_PARAMETER,
    AgentNotFoundError,
    AgentProblemError,
    RegisteredAgent,
    load_definition,
    preflight,
    registered,
    resolve,
)


def agent_row(entry: RegisteredAgent) -> dict[str, Any]:
    """A registered agent as JSON-compatible data."""
    try:
        definition = load_definition(entry.target)
    except (AgentNotFoundError, AgentProblemError) as exc:
        return {
            "name": entry.name,
            "version": entry.version,
            "distribution": entry.distribution,
            "target": entry.target,
            "problems": [str(exc)],
        }
    params = definition.parameters
    return {
        "name": entry.name,
        "version": entry.version,
        "distribution": entry.distribution,
        "target": entry.target,
        "domains": [d.value for d in definition.domains] or ["all"],
        "arguments": (
            [p for p in params if p != TRAJECTORY_PARAMETER] if params is not None else ["any"]
        ),
        "reportsTrajectory": definition.takes_trajectory(),
        "wallSeconds": definition.wall_seconds,
        "description": definition.description,
    }


@click.group("agents")
def agents() -> None:
    """The agent registry: what `itbench run --agent <name>` finds."""


@agents.command("list")
@output_option()
def list_agents(output: str) -> None:
    """List the registered agents (the baselines and any installed package's)."""
    rows = [agent_row(e) for e in registered().values()]
    print_rows(
        rows,
        (
            ("name", "NAME"),
            ("version", "VERSION"),
            ("domains", "DOMAINS"),
            ("arguments", "ARGUMENTS"),
            ("description", "DESCRIPTION"),
        ),
        output,
        title=f"{len(rows)} agents",
    )


@agents.command("show")
@click.argument("name")
@output_option(default=OutputFormat.YAML)
def show_agent(name: str, output: str) -> None:
    """Show one agent (a registered name or module:function) and what would stop it running."""
    try:
        info = resolve(name, strict=False)
    except (AgentNotFoundError, AgentProblemError) as exc:
        raise BadInput(str(exc)) from None
    entry = registered().get(info.name)
    row = agent_row(entry) if entry is not None and info.registered else {}
    row.update({"agent": info.wire(), "problems": preflight(info) + list(row.get("problems", []))})
    click.echo(dump(row, output if output != OutputFormat.TABLE else OutputFormat.YAML), nl=False)
