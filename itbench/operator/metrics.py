"""Prometheus metrics of the operator, in a registry of their own (built per operator instance)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from itbench.core.models.trial import TrialPhase, TrialScores, TrialStatus
from itbench.core.runner.context import OUTCOMES

_FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
KINDS = ("Scenario", "AgentSubmission", "BenchmarkRun", "Trial")
TASKS = ("diagnosis", "mitigation", "posture", "finops_diagnosis", "finops_mitigation")
EXTRA_OUTCOMES = (("Errored", "InvalidSpec"), ("Errored", "Orphaned"))
"""Final (phase, reason) pairs the operator itself sets, beside the state machine's."""


class OperatorMetrics:
    """Trials by phase and outcome, reconcile, injection and recovery durations, queue depth."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Create the metrics in `registry` (a fresh one by default, so instances never clash).

        Args:
            registry: Where the metrics are registered.
        """
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # The process (memory, CPU, open files), the interpreter and its garbage collector: the
        # operator's memory is what the chart limits.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
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
        self.task_results = Counter(
            "itbench_operator_trial_task_results_total",
            "Scored tasks of finished trials, by task and result (passed or failed).",
            ["task", "result"],
            registry=r,
        )
        self.ntam = Histogram(
            "itbench_operator_trial_ntam_ratio",
            "NTAM of scored SRE diagnoses, by kind (fl: fault localization, fpc: propagation).",
            ["kind"],
            buckets=_RATIO_BUCKETS,
            registry=r,
        )
        self.proximity = Histogram(
            "itbench_operator_trial_cost_proximity_ratio",
            "FinOps cost proximity of scored trials (1 = optimal).",
            buckets=_RATIO_BUCKETS,
            registry=r,
        )
        # Every known label value starts at zero, so rates and alerts see a series from the start.
        for kind in KINDS:
            self.reconcile_errors.labels(kind=kind)
            self.reconcile_seconds.labels(kind=kind)
        outcomes = {(phase.value, str(reason)) for reason, (phase, _) in OUTCOMES.items()}
        for phase, reason in sorted(outcomes | set(EXTRA_OUTCOMES)):
            self.trial_outcomes.labels(phase=phase, reason=reason)
        for task in TASKS:
            for result in ("passed", "failed"):
                self.task_results.labels(task=task, result=result)
        for kind in ("fl", "fpc"):
            self.ntam.labels(kind=kind)
        self._phases: dict[str, str] = {}
        self._lock = threading.Lock()

    def trial_scored(self, scores: TrialScores) -> None:
        """Count a finished trial's scored tasks and observe its NTAM and proximity."""
        results: list[tuple[str, bool]] = []
        if scores.diagnosis is not None:
            results.append(("diagnosis", scores.diagnosis.passed))
            self.ntam.labels(kind="fl").observe(scores.diagnosis.fl_ntam)
            self.ntam.labels(kind="fpc").observe(scores.diagnosis.fpc_ntam)
        if scores.mitigation is not None:
            results.append(("mitigation", scores.mitigation.passed))
        if scores.posture is not None:
            results.append(("posture", scores.posture.passed))
        if scores.finops is not None:
            results.append(("finops_diagnosis", scores.finops.diagnosis_passed))
            results.append(("finops_mitigation", scores.finops.mitigation_passed))
            self.proximity.observe(scores.finops.cost_proximity)
        for task, passed in results:
            self.task_results.labels(task=task, result="passed" if passed else "failed").inc()

    def trial_phase(self, uid: str, phase: str | None) -> None:
        """Record a trial's current phase (None: the trial is gone)."""
        with self._lock:
            old = self._phases.pop(uid, None)
            if old is not None:
                self.trials.labels(phase=old).dec()
            if phase is not None:
                self._phases[uid] = phase
                self.trials.labels(phase=phase).inc()

    def trial_seen(self, uid: str, status: TrialStatus) -> None:
        """Follow a trial whose status another process writes (a trial Job's pod).

        The phase gauge takes the status' phase; the outcome and the scores are counted once,
        when the trial is first seen final after this operator saw it unfinished (a trial that
        ended before this process started is not counted, as for trials run in process). A
        status this operator wrote itself is already recorded, and changes nothing here.
        """
        with self._lock:
            old = self._phases.get(uid)
        phase = status.phase
        if old == phase.value or (phase.final and old is None):
            return
        if old is not None and TrialPhase(old).final:
            return  # a final phase is never left
        self.trial_phase(uid, phase.value)
        if phase.final:
            self.trial_outcomes.labels(phase=phase.value, reason=status.reason).inc()
            if status.scores is not None:
                self.trial_scored(status.scores)

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

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve `/metrics` over HTTP from a background thread."""
        start_http_server(port, addr=addr, registry=self.registry)
