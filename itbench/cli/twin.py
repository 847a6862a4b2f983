"""`itbench twin serve`: the twin served as a cluster, with a kubeconfig for kubectl, Ansible,
the cluster environment and agents that expect a Kubernetes API and Prometheus."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from itbench.cli.context import BadInput, pass_settings, stdout_console, warn
from itbench.cli.scenarios import open_catalog, scenarios_dir_option
from itbench.core.catalog import did_you_mean
from itbench.environments.served.prometheus import find_prometheus
from itbench.environments.served.server import ServedCluster
from itbench.environments.sim.environment import SimEnvironment
from itbench.settings import Settings

DEFAULT_KUBECONFIG = Path("itbench-twin.kubeconfig")


@click.group("twin")
def twin() -> None:
    """The simulated twin served behind real protocols."""


@twin.command("serve")
@click.option(
    "--kubeconfig",
    "kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    default=DEFAULT_KUBECONFIG,
    show_default=True,
    help="Where to write the kubeconfig (removed when the twin stops).",
)
@click.option(
    "--scenario",
    "scenario_name",
    help="Serve the twin a scenario runs on (its "
    "namespace, telemetry and lived-in past); no fault is injected.",
)
@scenarios_dir_option
@click.option("--seed", type=int, default=0, show_default=True, help="The twin's seed.")
@click.option(
    "--speed",
    type=click.FloatRange(min=0.1, max=120),
    default=1.0,
    show_default=True,
    help="Twin seconds per wall second (Prometheus' intervals and rule durations scale too).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--api-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Kubernetes API port [default: any free port].",
)
@click.option(
    "--prometheus/--no-prometheus",
    "with_prometheus",
    default=None,
    help="Run a real Prometheus scraping the twin and evaluating its PrometheusRules "
    "[default: when one is on PATH].",
)
@click.option(
    "--prometheus-binary",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="The prometheus executable [default: the one on PATH].",
)
@pass_settings
def serve(
    settings: Settings,
    kubeconfig: Path,
    scenario_name: str | None,
    scenarios_dir: Path | None,
    seed: int,
    speed: float,
    host: str,
    api_port: int,
    with_prometheus: bool | None,
    prometheus_binary: Path | None,
) -> None:
    """Serve the twin as a cluster until interrupted, and write its kubeconfig.

    The Kubernetes API (TLS, a bearer token) holds the Astronomy Shop, the stack's namespaces and
    CRDs; /metrics, Loki, Jaeger and flagd answer on their own ports and through the API
    server's Service proxy. kubectl, kubernetes.core and the cluster environment use the
    kubeconfig as they would a cluster's.
    """
    if kubeconfig.exists():
        raise BadInput(f"{kubeconfig} exists; remove it or pass another --kubeconfig")
    if with_prometheus and prometheus_binary is None and find_prometheus() is None:
        raise BadInput("--prometheus: no prometheus on PATH (apt-get install prometheus)")
    if with_prometheus is None:
        with_prometheus = prometheus_binary is not None or find_prometheus() is not None
    if scenario_name is not None:
        catalog = open_catalog(settings, scenarios_dir)
        if scenario_name not in catalog:
            raise BadInput(
                f"unknown scenario {scenario_name!r}{did_you_mean(scenario_name, catalog.names)}; "
                "see `itbench scenarios list`"
            )
        env = SimEnvironment.for_scenario(catalog.get(scenario_name), seed=seed)
    else:
        env = SimEnvironment(seed=seed)
    prometheus = (str(prometheus_binary) if prometheus_binary else "") if with_prometheus else None
    served = ServedCluster(env, speed=speed, host=host, api_port=api_port, prometheus=prometheus)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            served.start()
        except RuntimeError as exc:
            served.stop()
            raise click.ClickException(str(exc)) from None
        try:
            partial = kubeconfig.with_name(kubeconfig.name + ".partial")
            served.kubeconfig(partial)
            partial.replace(kubeconfig)  # appears whole: a waiting client never reads half
            console = stdout_console()
            console.print(f"kubernetes: {served.api_url}  (namespace {env.namespace})")
            if served.prometheus_url is not None:
                console.print(f"prometheus: {served.prometheus_url}")
            console.print(f"metrics:    {served.telemetry_url}/metrics")
            console.print(f"jaeger:     {served.jaeger_url}")
            console.print(f"export KUBECONFIG={kubeconfig.resolve()}")
            warn(f"serving the twin at {speed:g}x; Ctrl-C stops it")
            stop.wait()
        finally:
            served.stop()
            kubeconfig.unlink(missing_ok=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
