"""The `itbench` command: `itbench <noun> <verb>`, one module per noun under itbench/cli/."""

from __future__ import annotations

import click
from pydantic import ValidationError

from itbench.cli.agents import agents
from itbench.cli.context import BadInput
from itbench.cli.crds import crds
from itbench.cli.faults import faults
from itbench.cli.mcp import mcp_command
from itbench.cli.operator import operator
from itbench.cli.report import report_group
from itbench.cli.run import run_command
from itbench.cli.scenarios import scenarios
from itbench.cli.serve import serve_command
from itbench.cli.trial import trial
from itbench.cli.twin import twin
from itbench.cli.validity import validity_command
from itbench.cli.version import version
from itbench.settings import Settings, load_settings

COMMANDS: list[click.Command] = [
    version,
    scenarios,
    faults,
    crds,
    report_group,
    run_command,
    validity_command,
    agents,
    operator,
    serve_command,
    mcp_command,
    twin,
    trial,
]
"""Every top-level command or group; a new noun adds its module's group here."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """ITBench: benchmark AI agents on IT operations (SRE, CISO, FinOps).

    Settings come from ITBENCH_<GROUP>__<FIELD> environment variables, e.g.
    ITBENCH_CATALOG__SCENARIOS_DIR or ITBENCH_GATEWAY__PORT.
    """
    try:
        ctx.obj = load_settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"ITBENCH_{'__'.join(str(p).upper() for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        )
        raise BadInput(f"invalid settings: {problems}") from None


for _command in COMMANDS:
    cli.add_command(_command)


def main() -> None:
    """Entry point of the `itbench` console script."""
    cli(prog_name="itbench")


__all__ = ["COMMANDS", "Settings", "cli", "main"]
