"""`itbench operator run`: the Kopf operator with its metrics, liveness probe and agent gateway."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import click

from itbench.cli.context import pass_settings
from itbench.settings import Settings


def _account(value: str | None, option: str) -> tuple[str, str] | None:
    """A NAMESPACE/NAME option's ServiceAccount (None: not given).

    Raises:
        click.BadParameter: It is not NAMESPACE/NAME (exit 2, naming the option).
    """
    if value is None:
        return None
    namespace, _, name = value.partition("/")
    if not namespace or not name or "/" in name:
        raise click.BadParameter(f"{value!r} is not NAMESPACE/NAME", param_hint=option)
    return namespace, name


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
@click.option(
    "--bind-address",
    default=None,
    help="Address of /metrics and /healthz [settings: operator.bind_address, 0.0.0.0].",
)
@click.option("--metrics-port", type=int, default=None, help="Port of /metrics [settings].")
@click.option("--liveness-port", type=int, default=None, help="Port of /healthz [settings].")
@click.option(
    "--gateway-host", default=None, help="Address the agent gateway listens on [settings]."
)
@click.option(
    "--gateway-port", type=int, default=None, help="Port of the agent gateway [settings]."
)
@click.option("--gateway-url", default=None, help="Gateway URL given to agent Jobs.")
@click.option(
    "--agent-service-account",
    default=None,
    help="ServiceAccount of image agents' Jobs [settings: itbench-agent].",
)
@click.option(
    "--cluster-agent-service-account",
    default=None,
    help="ServiceAccount, with its token, of image agents' Jobs in cluster runs on the "
    "operator's own cluster (its Role limits it to the scenarios' namespaces) "
    "[default: the --agent-service-account, without a token].",
)
@click.option(
    "--injector-service-account",
    default=None,
    metavar="NAMESPACE/NAME",
    help="ServiceAccount the fault playbooks run as in cluster runs on the operator's own "
    "cluster, with a short-lived token per playbook run (its Roles hold what faults change) "
    "[default: the operator's own identity].",
)
@click.option(
    "--ciso-evaluator-service-account",
    default=None,
    metavar="NAMESPACE/NAME",
    help="ServiceAccount the live CISO evaluation runs as in cluster runs on the operator's own "
    "cluster, with a short-lived token per evaluation (its rights install and remove the "
    "evaluation's audit policies and counterpart namespace) [default: the operator's own "
    "identity].",
)
@click.option(
    "--ciso-host-image",
    default=None,
    help="Image of the RHEL9 class's evidence Pods in live CISO evaluations "
    "[settings: operator.ciso_host_image].",
)
@click.option(
    "--trial-image",
    default=None,
    help="Image of the Jobs running `environment.execution: job` trials (the operator's "
    "own) [settings: operator.trial_image].",
)
@click.option(
    "--trial-service-account",
    default=None,
    help="ServiceAccount of trial Jobs [settings: itbench-trial].",
)
@click.option(
    "--tick-seconds", type=float, default=1.0, show_default=True, help="Trial timer interval."
)
@click.option(
    "--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default=None,
    help="Lowest level written [settings: info]; debug adds Kopf's routine lines.",
)
@click.option(
    "--trajectories-per-run",
    type=click.IntRange(0, 100_000),
    default=None,
    help="Most Trials of one run whose trajectories are kept in ConfigMaps, the first to "
    "finish [settings: 500; 0: none].",
)
@click.option(
    "--max-environments",
    type=click.IntRange(1, 1000),
    default=None,
    help="Simulated trials hosted at once, each a twin in this process's memory (10-15 MB); "
    "more wait [settings: 20].",
)
@pass_settings
def run(
    settings: Settings,
    kubeconfig: str | None,
    namespaces: tuple[str, ...],
    bind_address: str | None,
    metrics_port: int | None,
    liveness_port: int | None,
    gateway_host: str | None,
    gateway_port: int | None,
    gateway_url: str | None,
    agent_service_account: str | None,
    cluster_agent_service_account: str | None,
    injector_service_account: str | None,
    ciso_evaluator_service_account: str | None,
    ciso_host_image: str | None,
    trial_image: str | None,
    trial_service_account: str | None,
    tick_seconds: float,
    log_format: str,
    log_level: str | None,
    trajectories_per_run: int | None,
    max_environments: int | None,
) -> None:
    """Reconcile Scenarios, AgentSubmissions, BenchmarkRuns and Trials until interrupted."""
    from itbench.operator.app import connection_info, serve
    from itbench.operator.kubeapi import connect
    from itbench.operator.logs import configure_logging
    from itbench.operator.runtime import (
        EnvironmentRegistry,
        OperatorConfig,
        OperatorRuntime,
        operator_environments,
    )

    injector = _account(injector_service_account, "--injector-service-account")
    ciso_evaluator = _account(ciso_evaluator_service_account, "--ciso-evaluator-service-account")
    ops = settings.operator
    level = (log_level or ops.log_level).upper()
    configure_logging(logging.getLevelNamesMapping()[level], json_lines=log_format == "json")
    config = OperatorConfig(
        trial_tick_seconds=tick_seconds,
        agent_service_account=agent_service_account or ops.agent_service_account,
        cluster_agent_service_account=cluster_agent_service_account,
        injector_service_account=injector,
        ciso_evaluator_service_account=ciso_evaluator,
        trajectories_per_run=(
            ops.trajectories_per_run if trajectories_per_run is None else trajectories_per_run
        ),
        max_environments=ops.max_environments if max_environments is None else max_environments,
        own_kubeconfig=kubeconfig,
        trial_image=trial_image or ops.trial_image,
        ciso_host_image=ciso_host_image or ops.ciso_host_image,
        trial_service_account=trial_service_account or ops.trial_service_account,
    )
    if gateway_url is not None:
        config = replace(config, gateway_url=gateway_url)
    api = connect(kubeconfig)
    runtime = OperatorRuntime(
        api=api, config=config, environments=EnvironmentRegistry(operator_environments(api, config))
    )
    try:
        asyncio.run(
            serve(
                runtime,
                namespaces=namespaces,
                bind_address=bind_address or ops.bind_address,
                liveness_port=liveness_port or ops.liveness_port,
                metrics_port=metrics_port or ops.metrics_port,
                gateway_host=gateway_host or settings.gateway.host,
                gateway_port=gateway_port or settings.gateway.port,
                connection=connection_info(api),
            )
        )
    except KeyboardInterrupt:
        click.echo("operator stopped", err=True)
