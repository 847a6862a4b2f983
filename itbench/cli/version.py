"""`itbench version`: the package and API versions."""

from __future__ import annotations

import platform

import click

from itbench import __version__
from itbench.cli.context import OutputFormat, dump, output_option
from itbench.core.models.base import API_VERSION


@click.command("version")
@output_option()
def version(output: str) -> None:
    """Print the ITBench version and the API version it serves."""
    info = {"version": __version__, "apiVersion": API_VERSION, "python": platform.python_version()}
    if OutputFormat(output) == OutputFormat.TABLE:
        click.echo(f"itbench {__version__} (API {API_VERSION}, Python {info['python']})")
    else:
        click.echo(dump(info, output), nl=False)
