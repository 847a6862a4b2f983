"""`itbench faults list|show`: the fault library and each fault's argument schema."""

from __future__ import annotations

from typing import Any

import click

from itbench.cli.context import BadInput, OutputFormat, dump, output_option, print_rows
from itbench.core.faults import FaultDefinition, UnknownFaultError, all_faults, get_fault


def fault_row(fault: FaultDefinition) -> dict[str, Any]:
    """A fault as JSON-compatible data, with its arguments' JSON schema."""
    schema = fault.args_model.model_json_schema()
    return {
        "id": fault.id,
        "mechanism": fault.mechanism.value,
        "description": fault.description,
        "playbook": fault.playbook,
        "args": sorted(schema.get("properties", {})),
        "argsSchema": schema,
    }


@click.group("faults")
def faults() -> None:
    """List the fault library and show a fault's arguments."""


@faults.command("list")
@output_option()
def list_faults(output: str) -> None:
    """List every fault id with its mechanism and description."""
    rows = [fault_row(f) for f in all_faults()]
    print_rows(
        rows,
        (
            ("id", "ID"),
            ("mechanism", "MECHANISM"),
            ("args", "ARGS"),
            ("description", "DESCRIPTION"),
        ),
        output,
        title=f"{len(rows)} faults",
    )


@faults.command("show")
@click.argument("fault_id")
@output_option(default=OutputFormat.YAML)
def show_fault(fault_id: str, output: str) -> None:
    """Show one fault and the JSON schema its arguments must satisfy."""
    try:
        fault = get_fault(fault_id)
    except UnknownFaultError:
        known = ", ".join(f.id for f in all_faults())
        raise BadInput(f"unknown fault id {fault_id!r}; known: {known}") from None
    row = fault_row(fault)
    if OutputFormat(output) == OutputFormat.TABLE:
        click.echo(f"{row['id']} ({row['mechanism']}): {row['description']}")
        click.echo(f"playbook: {row['playbook']}")
        click.echo("arguments (JSON schema):")
        click.echo(dump(row["argsSchema"], OutputFormat.YAML), nl=False)
    else:
        click.echo(dump(row, output), nl=False)
