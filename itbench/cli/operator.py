"""`itbench operator run`: the Kopf operator with its metrics, liveness probe and agent gateway."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import click

from itbench.cli.context import pass_settings
from itbench.settings import Settings


@click.group("operator")
def operator() -> None:
    """Run the Kubernetes operator that reconciles ITBench resources."""


@operator.command("run")
@click.option(
    "--kubeconfig", envvar="KUBECONFIG", default=None, help="Kubeconfig (default: in-cluster)."
)
@click.option(
    "--namespace",
    "-n",
    "namespaces",
    multiple=True,
    help="Namespace to serve (repeat; default: all).",
)
@click.option("--metrics-port", type=int, default=None, help="Port of /metrics [settings].")
@click.option(
    "--liveness-port", type=int, default=8081, show_default=True, help="Port of /healthz."
)
@click.option(
    "--gateway-port", type=int, default=None, help="Port of the agent gateway [settings]."
)
@click.option("--gateway-url", default=None, help="Gateway URL given to agent Jobs.")
@click.option(
    "--tick-seconds", type=float, default=1.0, show_default=True, help="Trial timer interval."
)
@click.option(
    "--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True
)
@pass_settings
def run(
    settings: Settings,
    kubeconfig: str | None,
    namespaces: tuple[str, ...],
    metrics_port: int | None,
    liveness_port: int,
    gateway_port: int | None,
    gateway_url: str | None,
    tick_seconds: float,
    log_format: str,
) -> None:
    """Reconcile Scenarios, AgentSubmissions, BenchmarkRuns and Trials until interrupted."""
    from itbench.operator.app import connection_info, serve
    from itbench.operator.kubeapi import connect
    from itbench.operator.logs import configure_logging
    from itbench.operator.runtime import OperatorConfig, OperatorRuntime

    configure_logging(logging.INFO, json_lines=log_format == "json")
    config = OperatorConfig(trial_tick_seconds=tick_seconds)
    if gateway_url is not None:
        config = replace(config, gateway_url=gateway_url)
    api = connect(kubeconfig)
    runtime = OperatorRuntime(api=api, config=config)
    try:
        asyncio.run(
            serve(
                runtime,
                namespaces=namespaces,
                liveness_port=liveness_port,
                metrics_port=metrics_port or settings.operator.metrics_port,
                gateway_host=settings.gateway.host,
                gateway_port=gateway_port or settings.gateway.port,
                connection=connection_info(api),
            )
        )
    except KeyboardInterrupt:
        click.echo("operator stopped", err=True)
