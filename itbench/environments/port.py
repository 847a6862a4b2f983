"""The Environment port: one isolated copy of the application that a trial runs in.

Implementations: the simulator (`itbench.environments.sim`); the live cluster comes next
(`itbench.environments.kube`). The trial runner, the gateway and the operator see only this.
All methods are synchronous; the live implementation blocks on I/O, the simulator computes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from itbench.core.faults import ObjectChange
from itbench.core.models.observations import (
    ActionResult,
    AgentAction,
    Alert,
    AlertInterval,
    EnvironmentSnapshot,
)


class EnvironmentFailure(Exception):  # noqa: N818 - a failure of the environment, not a bug
    """The environment failed (unreachable, broken); trials it hosts end Errored, not Failed."""


@runtime_checkable
class Environment(Protocol):
    """A trial's environment: lifecycle, fault injection, observation and action."""

    # ---- time ---------------------------------------------------------------------------
    def now(self) -> datetime:
        """The environment's current time (virtual in the simulator)."""
        ...

    def advance(self, seconds: float) -> None:
        """Let time pass: the simulator steps its physics; a live cluster waits for real."""
        ...

    # ---- lifecycle ----------------------------------------------------------------------
    def provision(self) -> None:
        """Bring the application to its healthy baseline (idempotent)."""
        ...

    def snapshot(self) -> EnvironmentSnapshot:
        """Health, alerting configuration and footprint now."""
        ...

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        """Apply a fault's changes once per key; return False when the key was already applied."""
        ...

    def remove(self, key: str) -> bool:
        """Undo the changes injected under key (restore what they touched); False if none."""
        ...

    def injections(self) -> list[str]:
        """Keys of every injection ever applied, in order (repeated keys appear once)."""
        ...

    # ---- observe ------------------------------------------------------------------------
    def alerts(self) -> list[Alert]:
        """Active alerts (pending and firing)."""
        ...

    def alert_history(self) -> list[AlertInterval]:
        """Every firing interval since provisioning."""
        ...

    def query_metrics(self, query: str, time: datetime) -> dict[str, Any]:
        """Instant PromQL query; the Prometheus HTTP API `data` object."""
        ...

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> dict[str, Any]:
        """Range PromQL query; the Prometheus HTTP API `data` object."""
        ...

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> dict[str, Any]:
        """LogQL stream selector with line filters; Loki's `data` object."""
        ...

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Jaeger-style trace search; a list of Jaeger trace objects."""
        ...

    def get_objects(
        self, kind: str, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        """Kubernetes objects of a kind in the application namespace (all, or one by name).

        With `copy=False` an environment may hand out its own objects: the caller only reads
        them, and only until its next call into the environment.
        """
        ...

    def service_calls(self) -> list[tuple[str, str]]:
        """The application's service call graph as (caller, callee) service names."""
        ...

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        """Kubernetes Events in the application namespace, oldest first; given `kind` and
        `name`, only those whose involved object is that one. With `copy=False` they may be
        the environment's own, to be read (never changed) before it changes again."""
        ...

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        """The last log lines of a pod."""
        ...

    # ---- act ----------------------------------------------------------------------------
    def act(self, action: AgentAction) -> ActionResult:
        """Carry out an agent action (guardrails are the gateway's job, not this)."""
        ...
