"""What every command shares: settings, output formats and the exit-code convention.

Exit codes: 0 success, 1 failure, 2 usage error or bad input (click's own usage errors included).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar

import click
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from itbench.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

pass_settings = click.make_pass_decorator(Settings, ensure=True)
"""Inject the Settings built by the root group (or built here when a command runs alone)."""


class BadInput(click.ClickException):
    """Bad input from the user (a file, a name, a value): exit code 2 with a clear message."""

    exit_code = 2


class OutputFormat(StrEnum):
    """How a command prints what it lists."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def output_option(default: OutputFormat = OutputFormat.TABLE) -> Callable[[F], F]:
    """The `--output/-o table|json|yaml` option, passed to the command as `output`.

    Args:
        default: The format used when the option is not given.

    Returns:
        A click decorator.
    """
    return click.option(
        "--output",
        "-o",
        "output",
        type=click.Choice([f.value for f in OutputFormat]),
        default=default.value,
        show_default=True,
        help="Output format.",
    )


def dump(data: Any, fmt: OutputFormat | str) -> str:
    """Render JSON-compatible data as JSON or YAML text.

    Args:
        data: JSON-compatible data.
        fmt: json or yaml.

    Returns:
        The text, ending in a newline.
    """
    if OutputFormat(fmt) == OutputFormat.JSON:
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    plain = json.loads(json.dumps(data))  # no YAML anchors for shared sub-objects
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=100)


def stdout_console() -> Console:
    """A rich console on the current stdout; 160 columns wide when stdout is not a terminal."""
    out = sys.stdout
    return Console(file=out, width=None if out.isatty() else 160)


def print_rows(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    fmt: OutputFormat | str,
    title: str | None = None,
) -> None:
    """Print rows as a rich table, or as JSON/YAML (all keys).

    Args:
        rows: The rows.
        columns: (key, header) pairs shown in the table.
        fmt: table, json or yaml.
        title: Optional table title.
    """
    if OutputFormat(fmt) != OutputFormat.TABLE:
        click.echo(dump(list(rows), fmt), nl=False)
        return
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold")
    for _, header in columns:
        table.add_column(header)
    for row in rows:
        table.add_row(*(cell(row.get(key)) for key, _ in columns))
    stdout_console().print(table)


def cell(value: Any) -> str:
    """Render one table cell: lists joined, None as '-', floats to 2 decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value) or "-"
    return str(value)


def warn(message: str) -> None:
    """Print a diagnostic to stderr."""
    click.echo(message, err=True)
