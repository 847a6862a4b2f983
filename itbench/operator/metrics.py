"""Prometheus metrics of the operator, in a registry of their own (built per operator instance)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class OperatorMetrics:
    """Trials by phase and outcome, reconcile, injection and recovery durations, queue depth."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Create the metrics in `registry` (a fresh one by default, so instances never clash).

        Args:
            registry: Where the metrics are registered.
        """
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.trials = Gauge(
            "itbench_operator_trials",
            "Trials this operator drives, by phase.",
            ["phase"],
            registry=r,
        )
        self.trial_outcomes = Counter(
            "itbench_operator_trial_outcomes_total",
            "Trials that reached a final phase, by phase and reason.",
            ["phase", "reason"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "itbench_operator_reconcile_duration_seconds",
            "Time spent in one reconcile, by kind.",
            ["kind"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.reconcile_errors = Counter(
            "itbench_operator_reconcile_errors_total",
            "Reconciles that raised, by kind.",
            ["kind"],
            registry=r,
        )
        self.injection_seconds = Histogram(
            "itbench_operator_injection_duration_seconds",
            "Time to apply one fault injection.",
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.injection_failures = Counter(
            "itbench_operator_injection_failures_total", "Fault injections that raised.", registry=r
        )
        self.recovery_seconds = Histogram(
            "itbench_operator_recovery_duration_seconds",
            "Time to remove one injected fault.",
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.recovery_failures = Counter(
            "itbench_operator_recovery_failures_total", "Fault removals that raised.", registry=r
        )
        self.queue_depth = Gauge(
            "itbench_operator_queue_depth",
            "Trials waiting for capacity, by BenchmarkRun.",
            ["namespace", "run"],
            registry=r,
        )
        self._phases: dict[str, str] = {}
        self._lock = threading.Lock()

    def trial_phase(self, uid: str, phase: str | None) -> None:
        """Record a trial's current phase (None: the trial is gone)."""
        with self._lock:
            old = self._phases.pop(uid, None)
            if old is not None:
                self.trials.labels(phase=old).dec()
            if phase is not None:
                self._phases[uid] = phase
                self.trials.labels(phase=phase).inc()

    @contextmanager
    def reconcile(self, kind: str) -> Iterator[None]:
        """Time a reconcile of one object and count it as an error when it raises."""
        start = perf_counter()
        try:
            yield
        except Exception:
            self.reconcile_errors.labels(kind=kind).inc()
            raise
        finally:
            self.reconcile_seconds.labels(kind=kind).observe(perf_counter() - start)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Serve `/metrics` over HTTP from a background thread."""
        start_http_server(port, addr=addr, registry=self.registry)
