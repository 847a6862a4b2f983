"""Process settings from `ITBENCH_<GROUP>__<FIELD>` environment variables, built by entry points."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CatalogSettings(BaseModel):
    """Where scenario files live."""

    scenarios_dir: Path = Field(
        default=Path("scenarios"),
        description="Root of the scenario catalog (<dir>/<domain>/<id>/scenario.yaml).",
    )


class GatewaySettings(BaseModel):
    """The agent API server."""

    host: str = Field(default="127.0.0.1", description="Address the gateway listens on.")
    port: int = Field(default=8080, ge=1, le=65535, description="Port the gateway listens on.")


class OperatorSettings(BaseModel):
    """The Kubernetes operator."""

    bind_address: str = Field(
        default="0.0.0.0",
        description="Address the metrics and liveness endpoints listen on (in a pod: all).",
    )
    metrics_port: int = Field(
        default=9090, ge=1, le=65535, description="Port of the Prometheus metrics endpoint."
    )
    liveness_port: int = Field(default=8081, ge=1, le=65535, description="Port of /healthz.")
    agent_service_account: str = Field(
        default="itbench-agent",
        min_length=1,
        max_length=253,
        description="ServiceAccount image agents' Jobs run as (in the Trial's namespace).",
    )
    trial_image: str | None = Field(
        default=None,
        max_length=1000,
        description="Image of the Jobs that run `environment.execution: job` trials (the "
        "operator's own image; unset: such trials end Errored, reason TrialImageNotSet).",
    )
    ciso_host_image: str = Field(
        default="ghcr.io/itbench/rhel9-host:9.6",
        min_length=1,
        max_length=1000,
        description="Image of the RHEL9 class's evidence Pods on live clusters (UBI 9 with bash, "
        "Python 3 and ansible-core; deploy/rhel9-host/Dockerfile).",
    )
    trial_service_account: str = Field(
        default="itbench-trial",
        min_length=1,
        max_length=253,
        description="ServiceAccount trial Jobs run as (in the Trial's namespace).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level of log records written."
    )
    max_environments: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="Simulated trials the operator hosts at once (`environment.execution: "
        "process`); each holds a twin of the shop in the operator's memory, 10-15 MB, so the "
        "default fits the chart's 512Mi limit; more admitted trials wait (WaitingForEnvironment).",
    )
    trajectories_per_run: int = Field(
        default=500,
        ge=0,
        le=100_000,
        description="Most Trials of one BenchmarkRun whose trajectories are kept in ConfigMaps "
        "(the first to finish; 0: none).",
    )


class Settings(BaseSettings):
    """All settings, in groups; e.g. ITBENCH_GATEWAY__PORT=9000 sets `gateway.port`."""

    model_config = SettingsConfigDict(
        env_prefix="ITBENCH_", env_nested_delimiter="__", extra="ignore"
    )

    catalog: CatalogSettings = Field(default_factory=CatalogSettings, description="Catalog.")
    gateway: GatewaySettings = Field(default_factory=GatewaySettings, description="Gateway.")
    operator: OperatorSettings = Field(default_factory=OperatorSettings, description="Operator.")
    output_dir: Path = Field(
        default=Path("out"), description="Where runs write reports and trial records."
    )


def load_settings() -> Settings:
    """Read settings from the environment (call once per entry point and pass the result down).

    Returns:
        The settings.

    Raises:
        pydantic.ValidationError: If an ITBENCH_* variable holds an invalid value.
    """
    return Settings()
