"""The operator entry: a Kopf registry with every kind's handlers, its settings, and `run`."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading
from typing import Any

import kopf

from itbench.operator import agent_submissions, benchmark_runs, scenarios, trials
from itbench.operator.kubeapi import KubeApi
from itbench.operator.runtime import OperatorRuntime

log = logging.getLogger(__name__)

ANNOTATION_PREFIX = "itbench.io"
FINALIZER = "itbench.io/release"


def build_registry(
    runtime: OperatorRuntime, connection: kopf.ConnectionInfo | None = None
) -> kopf.OperatorRegistry:
    """A Kopf registry with the handlers of every ITBench kind, bound to one runtime.

    Args:
        runtime: What the handlers share.
        connection: How Kopf reaches the API; None uses the kubeconfig or in-cluster config.

    Returns:
        The registry to run an operator with.
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="login", registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if connection is not None:
            return connection
        return kopf.login_via_client(**kwargs)

    @kopf.on.probe(id="trials-in-memory", registry=registry)
    def trials_in_memory(**_: Any) -> int:
        return len(runtime.environments)

    scenarios.register(registry, runtime)
    agent_submissions.register(registry, runtime)
    benchmark_runs.register(registry, runtime)
    trials.register(registry, runtime)
    return registry


def operator_settings() -> kopf.OperatorSettings:
    """Kopf settings: bookkeeping in `itbench.io/` annotations, never in the public status."""
    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.scanning.disabled = True
    # A Trial deleted while its tick runs (a thread Kopf cannot cancel) is finalized once the
    # tick returns: look again every second, not Kopf's default minute.
    settings.background.cancellation_polling = 1.0
    return settings


MALLOC_ARENAS = 2
"""glibc malloc arenas the operator's process keeps (`M_ARENA_MAX`). Each trial's agent runs in
a thread of its own, and glibc gives threads arenas of their own, up to eight per core, which
keep what they freed: with a twin's memory freed in one arena and allocated in another, the
process grows with every trial. Two arenas hold the same twins in less memory."""
_M_ARENA_MAX = -8
"""`mallopt`'s parameter number for the arena cap (glibc's malloc.h)."""


def limit_malloc_arenas(libc: Any = None) -> bool:
    """Cap glibc's malloc arenas at `MALLOC_ARENAS` unless `MALLOC_ARENA_MAX` already sets them.

    Args:
        libc: The C library to tune (None: this process's).

    Returns:
        Whether the cap was set (False: set by the environment, or no glibc `mallopt`).
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        lib = libc if libc is not None else ctypes.CDLL(None)
        mallopt = lib.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl, macOS): nothing to tune
    return bool(mallopt(_M_ARENA_MAX, MALLOC_ARENAS))


async def run_operator(
    runtime: OperatorRuntime,
    *,
    connection: kopf.ConnectionInfo | None = None,
    namespaces: tuple[str, ...] = (),
    liveness_endpoint: str | None = None,
    ready_flag: asyncio.Event | None = None,
    stop_flag: asyncio.Event | None = None,
) -> None:
    """Run the operator until cancelled or stopped.

    Args:
        runtime: What the handlers share.
        connection: How to reach the API (None: kubeconfig or in-cluster).
        namespaces: Namespaces to serve (empty: cluster-wide).
        liveness_endpoint: e.g. `http://0.0.0.0:8081/healthz` (None: no endpoint).
        ready_flag: Set once the operator is running.
        stop_flag: Set to stop the operator gracefully.
    """
    limit_malloc_arenas()
    await kopf.operator(
        registry=build_registry(runtime, connection),
        settings=operator_settings(),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=list(namespaces),
        liveness_endpoint=liveness_endpoint,
        ready_flag=ready_flag,
        stop_flag=stop_flag,
    )


def connection_info(api: KubeApi) -> kopf.ConnectionInfo:
    """Kopf's connection settings taken from the official client's configuration.

    Both then reach the same server with the same credentials (e.g. from `--kubeconfig`).
    """
    cfg = api.api_client.configuration
    header = str(cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken") or "")
    prefix = str(cfg.api_key_prefix.get("authorization") or "")
    scheme, _, token = f"{prefix} {header}".strip().rpartition(" ")
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


async def serve(
    runtime: OperatorRuntime,
    *,
    namespaces: tuple[str, ...] = (),
    bind_address: str = "127.0.0.1",
    liveness_port: int | None = 8081,
    metrics_port: int | None = 9090,
    gateway_host: str = "127.0.0.1",
    gateway_port: int | None = 8080,
    connection: kopf.ConnectionInfo | None = None,
) -> None:
    """Run the operator with its metrics, liveness endpoint and the agent gateway (`operator run`).

    Args:
        runtime: What the handlers share.
        namespaces: Namespaces to serve (empty: cluster-wide).
        bind_address: Address of the metrics and liveness endpoints.
        liveness_port: Port of `/healthz` (None: none).
        metrics_port: Port of `/metrics` (None: none).
        gateway_host: Address the gateway listens on.
        gateway_port: Port of the agent gateway (None: no gateway in this process).
        connection: How Kopf reaches the API (None: in-cluster config or default kubeconfig).
    """
    if metrics_port is not None:
        runtime.metrics.serve(metrics_port, bind_address)
    gateway: Any = None
    thread: threading.Thread | None = None
    if gateway_port is not None:
        import uvicorn

        gateway = uvicorn.Server(
            uvicorn.Config(
                runtime.gateway(),
                host=gateway_host,
                port=gateway_port,
                log_config=None,
                use_colors=False,
            )
        )
        # Its own thread and loop: the operator's shutdown never cancels the gateway's tasks.
        gateway.install_signal_handlers = lambda: None
        thread = threading.Thread(target=gateway.run, name="gateway", daemon=True)
        thread.start()
    host = f"[{bind_address}]" if ":" in bind_address else bind_address
    liveness = f"http://{host}:{liveness_port}/healthz" if liveness_port is not None else None
    log.info("operator starting", extra={"namespaces": ",".join(namespaces) or "*"})
    try:
        await run_operator(
            runtime, connection=connection, namespaces=namespaces, liveness_endpoint=liveness
        )
    finally:
        if gateway is not None and thread is not None:
            gateway.should_exit = True
            await asyncio.to_thread(thread.join, 10)
