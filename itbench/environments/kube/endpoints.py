"""Where the pinned stack serves its telemetry: the Services of Prometheus, Loki, Jaeger and flagd,
reached through the API server's Service proxy (only a kubeconfig needed) unless a URL is given."""

from __future__ import annotations

from dataclasses import dataclass

from itbench import stack
from itbench.core.shop import FLAGD_DEPLOYMENT

FLAGD_OFREP_PORT = 8016
"""flagd's OFREP port (the pinned chart's `ofrep` Service port)."""


@dataclass(frozen=True)
class ServiceRef:
    """A Service port of the stack."""

    namespace: str
    name: str
    port: int

    def proxy_path(self) -> str:
        """The API server's proxy path to it.

        `/api/v1/namespaces/<ns>/services/<name>:<port>/proxy`.
        """
        return f"/api/v1/namespaces/{self.namespace}/services/{self.name}:{self.port}/proxy"


def prometheus_service() -> ServiceRef:
    """kube-prometheus-stack's Prometheus (`<release>-prometheus:9090`)."""
    pin = stack.chart_pin("kube-prometheus-stack")
    return ServiceRef(str(pin["namespace"]), f"{pin['release']}-prometheus", 9090)


def loki_service() -> ServiceRef:
    """Loki's gateway (`<release>-gateway:80`)."""
    pin = stack.chart_pin("loki")
    return ServiceRef(str(pin["namespace"]), f"{pin['release']}-gateway", 80)


def jaeger_service() -> ServiceRef:
    """Jaeger's query API (the values' `fullnameOverride: jaeger`, port 16686)."""
    pin = stack.chart_pin("jaeger")
    return ServiceRef(str(pin["namespace"]), "jaeger", 16686)


def flagd_service(namespace: str) -> ServiceRef:
    """flagd's OFREP endpoint in the shop's namespace."""
    return ServiceRef(namespace, FLAGD_DEPLOYMENT, FLAGD_OFREP_PORT)


@dataclass(frozen=True)
class TelemetryUrls:
    """Base URLs of the telemetry APIs (None: through the API server's Service proxy).

    Attributes:
        prometheus: Prometheus' HTTP API base (`http://host:9090`).
        loki: Loki's base (`http://host:3100`).
        jaeger: Jaeger query's base (`http://host:16686`).
        flagd: flagd's OFREP base (`http://host:8016`).
    """

    prometheus: str | None = None
    loki: str | None = None
    jaeger: str | None = None
    flagd: str | None = None
