"""`itbench trial run`: run one Trial in this process and write its results to the Trial (what a
trial Job's pod runs for `environment.execution: job`)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from itbench.cli.context import BadInput, pass_settings
from itbench.settings import Settings


@click.group("trial")
def trial() -> None:
    """One Trial of a BenchmarkRun on the cluster."""


@trial.command("run")
@click.option(
    "--kubeconfig", envvar="KUBECONFIG", default=None, help="Kubeconfig (default: in-cluster)."
)
@click.option("--namespace", "-n", required=True, help="The Trial's namespace.")
@click.option("--name", required=True, help="The Trial's name.")
@click.option(
    "--credentials-dir",
    envvar="ITBENCH_TRIAL__CREDENTIALS_DIR",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the command agent's credentials Secret is mounted (one file a key; default: "
    "read through the API).",
)
@click.option(
    "--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True
)
@pass_settings
def run(
    settings: Settings,
    kubeconfig: str | None,
    namespace: str,
    name: str,
    credentials_dir: Path | None,
    log_format: str,
) -> None:
    """Run the Trial NAMESPACE/NAME and write its status, scores and trajectory to it.

    Exits 0 once the Trial has a final phase (Succeeded, Failed or Errored: the outcome is in
    the Trial), 1 when the Trial does not exist or the API refused a call, 2 for a kubeconfig
    that cannot be used.
    """
    from itbench.operator.jobs import TrialGoneError, run_trial
    from itbench.operator.kubeapi import WRITE_ERRORS, connect
    from itbench.operator.logs import configure_logging
    from itbench.operator.runtime import OperatorConfig

    level = logging.getLevelNamesMapping()[settings.operator.log_level.upper()]
    configure_logging(level, json_lines=log_format == "json")
    from kubernetes.config import ConfigException

    try:
        api = connect(kubeconfig)
    except (ConfigException, OSError) as exc:
        raise BadInput(
            f"--kubeconfig {kubeconfig or '(in-cluster)'}: cannot reach the API with it ({exc})"
        ) from None
    try:
        status = run_trial(
            api,
            namespace,
            name,
            config=OperatorConfig(trajectories_per_run=settings.operator.trajectories_per_run),
            credentials_dir=credentials_dir,
        )
    except TrialGoneError as exc:
        raise click.ClickException(str(exc)) from None
    except WRITE_ERRORS as exc:
        raise click.ClickException(
            f"Trial {namespace}/{name}: the Kubernetes API refused a call ({exc}); check the "
            "trial ServiceAccount's RoleBinding (docs/operator.md)"
        ) from None
    finally:
        api.api_client.close()
    click.echo(f"{namespace}/{name}: {status.phase.value} ({status.reason}) {status.message}")
