"""Scenario self-test: proves in the simulator that a scenario's fault, alerts and mitigation work.

Each run goes through the same lifecycle a trial does: provision, healthy baseline, inject, expected
alerts fire, the first accepted mitigation clears them, removal restores the baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta

from pydantic import Field

from itbench.core.faults import get_fault
from itbench.core.mitigations import mitigation_to_actions
from itbench.core.models.base import ApiModel
from itbench.core.models.observations import Alert, AlertState, EnvironmentSnapshot
from itbench.core.models.scenario import ExpectedAlert, Scenario
from itbench.core.tasks import mitigation_applies
from itbench.environments.port import Environment

STEP_SECONDS = 15.0
"""Virtual time between observations: one Prometheus scrape and rule evaluation interval."""

WARMUP_SECONDS = 120.0
"""Virtual time the application runs after provisioning before its baseline is checked."""

ENTRY_SERVICE = "frontend"
"""The service whose traces show whether tracing is on."""

SETTLE_SECONDS = 900.0
"""Longest virtual wait for alerts to clear after mitigation and for the baseline to return."""

EnvironmentFactory = Callable[[Scenario, int], Environment]
"""Builds a fresh, unprovisioned environment for a scenario and a seed."""


class SelftestCheck(ApiModel):
    """One named check of a self-test run."""

    name: str = Field(description="What was checked, e.g. alerts-fire.")
    passed: bool = Field(description="Whether the check held.")
    detail: str = Field(description="What was observed, in words.")
    at_seconds: float = Field(
        description="Virtual seconds after provisioning finished when it was decided."
    )


class SelftestResult(ApiModel):
    """The outcome of self-testing one scenario."""

    scenario: str = Field(description="The scenario's name.")
    seed: int = Field(description="The simulator seed.")
    passed: bool = Field(description="Whether every check passed.")
    checks: list[SelftestCheck] = Field(description="The checks, in the order they ran.")

    def failures(self) -> list[SelftestCheck]:
        """The checks that did not hold."""
        return [c for c in self.checks if not c.passed]


class _Run:
    """Book-keeping of one self-test: the environment, its start time and the checks so far."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.start = env.now()
        self.checks: list[SelftestCheck] = []

    def elapsed(self) -> float:
        return (self.env.now() - self.start).total_seconds()

    def check(self, name: str, passed: bool, detail: str) -> bool:
        self.checks.append(
            SelftestCheck(name=name, passed=passed, detail=detail, at_seconds=self.elapsed())
        )
        return passed

    def wait_until(self, done: Callable[[], bool], seconds: float) -> bool:
        """Advance the clock in scrape steps until done() holds; False if seconds pass first."""
        deadline = self.env.now() + timedelta(seconds=seconds)
        while True:
            if done():
                return True
            if self.env.now() >= deadline:
                return False
            self.env.advance(STEP_SECONDS)


_KEYS = frozenset(
    {"service_name", "deployment", "horizontalpodautoscaler", "consumer_group", "namespace"}
)
"""Labels that identify what an alert is about (others, like severity, are left out of details)."""


def _series(alertname: str, labels: dict[str, str], keys: frozenset[str] | None = None) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if keys is None or k in keys)
    return f"{alertname}{{{shown}}}"


def _describe(alerts: Iterable[Alert]) -> str:
    names = sorted(f"{_series(a.alertname, a.labels, _KEYS)}[{a.state.value}]" for a in alerts)
    return ", ".join(names) or "none"


def _expected(e: ExpectedAlert) -> str:
    return _series(e.alertname, e.labels)


def _firing(env: Environment, expected: ExpectedAlert) -> bool:
    return any(
        a.state == AlertState.FIRING and a.matches(expected.alertname, expected.labels)
        for a in env.alerts()
    )


def _unhealthy(snapshot: EnvironmentSnapshot) -> list[str]:
    return [
        f"{w.kind}/{w.name} {w.ready_replicas}/{w.desired_replicas} ready"
        for w in snapshot.workloads
        if w.ready_replicas < w.desired_replicas
    ]


def _differences(baseline: EnvironmentSnapshot, now: EnvironmentSnapshot) -> list[str]:
    """How the current state differs from the healthy baseline (empty when restored)."""
    out = _unhealthy(now)
    before = {w.name: w for w in baseline.workloads}
    after = {w.name: w for w in now.workloads}
    for name in sorted(before.keys() - after.keys()):
        out.append(f"workload {name} is gone")
    for name in sorted(after.keys() - before.keys()):
        out.append(f"workload {name} was added")
    for name in sorted(before.keys() & after.keys()):
        if before[name].desired_replicas != after[name].desired_replicas:
            out.append(
                f"{name} wants {after[name].desired_replicas} replicas "
                f"(baseline {before[name].desired_replicas})"
            )
    for flag, variant in sorted(baseline.flags.items()):
        if now.flags.get(flag) != variant:
            out.append(f"flag {flag} is {now.flags.get(flag)!r} (baseline {variant!r})")
    if now.alert_rules_fingerprint != baseline.alert_rules_fingerprint:
        out.append("the alert rules changed")
    if now.firing_alerts:
        out.append(f"alerts firing: {_describe(now.firing_alerts)}")
    return out


def simulator_environment(scenario: Scenario, seed: int) -> Environment:
    """The default environment factory: a fresh simulator with the scenario's telemetry (the
    compliance twin for a CISO scenario).

    Args:
        scenario: The scenario (its namespace and telemetry toggles are used).
        seed: Seed of the simulator's random source.

    Returns:
        An unprovisioned simulator.
    """
    from itbench.environments.sim.twins import twin_for

    return twin_for(scenario, seed=seed)


def run_selftest(
    scenario: Scenario, *, seed: int = 0, environment: EnvironmentFactory | None = None
) -> SelftestResult:
    """Self-test one scenario in a fresh environment (the simulator unless told otherwise).

    Checks, in order: the baseline is healthy and silent; traces exist exactly when the scenario
    has them; every fault injects; every expected alert fires within
    `spec.triggers.timeoutSeconds` (for a control: no alert at all in that window); the first
    accepted mitigation applies and clears the expected alerts, which stay cleared for the
    desired outcome's observation window; the mitigation alone brings back baseline health (no
    alert, every workload ready); removing the faults restores the baseline. The run stops at
    the first failed check.

    Args:
        scenario: The scenario to test.
        seed: Seed of the environment's random source.
        environment: Builds the environment; defaults to the simulator.

    Returns:
        The result with every check that ran.
    """
    env = (environment or simulator_environment)(scenario, seed)
    env.provision()
    run = _Run(env)
    _lifecycle(run, scenario)
    return SelftestResult(
        scenario=scenario.name,
        seed=seed,
        passed=all(c.passed for c in run.checks),
        checks=run.checks,
    )


def _lifecycle(run: _Run, scenario: Scenario) -> None:
    spec = scenario.spec
    env = run.env
    env.advance(WARMUP_SECONDS)
    baseline = env.snapshot()
    detail = _unhealthy(baseline) + (
        [f"alerts active: {_describe(env.alerts())}"] if env.alerts() else []
    )
    if not run.check(
        "baseline-healthy", not detail, "; ".join(detail) or "all workloads ready, no alert active"
    ):
        return
    if not _telemetry(run, scenario):
        return
    if spec.control:
        _control(run, scenario)
        return

    keys: list[str] = []
    for n, fault in enumerate(spec.faults):
        key = f"{scenario.name}/{n}/{fault.id}"
        changes = get_fault(fault.id).changes(fault.args, spec.environment.namespace)
        fresh = env.inject(key, changes)
        if not run.check(
            f"inject:{fault.id}", fresh, f"{len(changes)} object change(s) under key {key}"
        ):
            return
        keys.append(key)

    expected = spec.triggers.alerts
    injected_at = env.now()
    fired = run.wait_until(
        lambda: all(_firing(env, e) for e in expected), spec.triggers.timeout_seconds
    )
    took = (env.now() - injected_at).total_seconds()
    missing = [_expected(e) for e in expected if not _firing(env, e)]
    if not run.check(
        "alerts-fire",
        fired,
        f"all expected alerts firing after {took:g} s"
        if fired
        else f"still missing after {spec.triggers.timeout_seconds} s: {', '.join(missing)}; "
        f"active: {_describe(env.alerts())}",
    ):
        return

    if mitigation_applies(scenario):
        if not _mitigate(run, scenario, expected):
            return
        if not _healthy_again(run, baseline):
            return
    else:
        run.check(
            "mitigation-not-applicable",
            True,
            "the fault's cause is out of the agent's reach (its listed mitigations act on the "
            "injector, which only the platform can): scored on diagnosis only",
        )

    for key in reversed(keys):
        if not run.check(f"remove:{key}", env.remove(key), "injected changes undone"):
            return
    _restored(run, baseline, SETTLE_SECONDS)


def _telemetry(run: _Run, scenario: Scenario) -> bool:
    """Traces exist exactly when the scenario's environment says so (the traces ablation)."""
    env = run.env
    wanted = scenario.spec.environment.telemetry.traces
    end = env.now()
    traces = env.search_traces(
        ENTRY_SERVICE, None, {}, end - timedelta(seconds=WARMUP_SECONDS), end, 1
    )
    return run.check(
        "telemetry-traces",
        bool(traces) == wanted,
        f"traces {'on' if wanted else 'off'}: {len(traces)} trace(s) of {ENTRY_SERVICE} found",
    )


def _control(run: _Run, scenario: Scenario) -> None:
    env = run.env
    baseline = env.snapshot()
    window = float(scenario.spec.triggers.timeout_seconds)
    seen: list[Alert] = []

    def quiet_step() -> bool:
        seen.extend(env.alerts())
        return bool(seen)

    fired = run.wait_until(quiet_step, window)
    run.check(
        "control-silent",
        not fired,
        f"first alert: {_describe(seen[:1])}" if fired else f"no alert for {window:g} s",
    )
    if not fired:
        _restored(run, baseline, 0.0)


def _mitigate(run: _Run, scenario: Scenario, expected: list[ExpectedAlert]) -> bool:
    spec = scenario.spec
    env = run.env
    if not run.check(
        "mitigation-defined",
        bool(spec.ground_truth.mitigations),
        f"{len(spec.ground_truth.mitigations)} accepted mitigation(s)",
    ):
        return False
    mitigation = spec.ground_truth.mitigations[0]
    for action in mitigation_to_actions(mitigation, spec.environment.namespace):
        result = env.act(action)
        label = f"act:{action.verb.value} {action.kind}/{action.name}"
        if not run.check(label, result.ok, f"{result.outcome}: {result.message}"):
            return False

    mitigated_at = env.now()
    cleared = run.wait_until(lambda: not any(_firing(env, e) for e in expected), SETTLE_SECONDS)
    took = (env.now() - mitigated_at).total_seconds()
    if not run.check(
        "alerts-clear",
        cleared,
        f"expected alerts cleared {took:g} s after mitigation"
        if cleared
        else f"still firing after {SETTLE_SECONDS:g} s: {_describe(env.alerts())}",
    ):
        return False

    window = float(spec.desired_outcome.observation_window_seconds)
    relapsed: list[ExpectedAlert] = []

    def relapse() -> bool:
        relapsed.extend(e for e in expected if _firing(env, e))
        return bool(relapsed)

    came_back = run.wait_until(relapse, window)
    return run.check(
        "alerts-stay-clear",
        not came_back,
        f"fired again: {', '.join(_expected(e) for e in relapsed)}"
        if came_back
        else f"no expected alert for the {window:g} s observation window",
    )


def _healthy_again(run: _Run, baseline: EnvironmentSnapshot) -> bool:
    """The mitigation alone (faults still in place) brings back baseline health: nothing partial."""
    env = run.env
    last: list[str] = []

    def healthy() -> bool:
        last[:] = _differences(baseline, env.snapshot())
        return not last

    ok = run.wait_until(healthy, SETTLE_SECONDS)
    return run.check(
        "mitigated-healthy",
        ok,
        "every workload ready at its baseline replicas, flags and alert rules as at baseline, "
        "no alert firing"
        if ok
        else "; ".join(last),
    )


def _restored(run: _Run, baseline: EnvironmentSnapshot, seconds: float) -> None:
    env = run.env
    last: list[str] = []

    def same() -> bool:
        last[:] = _differences(baseline, env.snapshot())
        return not last and not env.alerts()

    back = run.wait_until(same, seconds)
    run.check(
        "baseline-restored",
        back,
        "workloads, flags and alert rules match the baseline; no alert active"
        if back
        else "; ".join(last) or f"alerts active: {_describe(env.alerts())}",
    )


def run_catalog_selftest(
    scenarios: Iterable[Scenario],
    seed: int = 0,
    *,
    environment: EnvironmentFactory | None = None,
    workers: int = 1,
) -> list[SelftestResult]:
    """Self-test every scenario, each in its own fresh environment.

    Args:
        scenarios: The scenarios, e.g. a loaded catalog.
        seed: Seed used for every scenario.
        environment: Builds each environment; defaults to the simulator.
        workers: Processes to spread the simulator runs over (only with the default
            environment); results do not depend on it.

    Returns:
        One result per scenario, in the given order.
    """
    todo = list(scenarios)
    if workers > 1 and environment is None and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            return list(pool.map(_selftest_in_worker, todo, [seed] * len(todo)))
    return [run_selftest(s, seed=seed, environment=environment) for s in todo]


def _selftest_in_worker(scenario: Scenario, seed: int) -> SelftestResult:
    return run_selftest(scenario, seed=seed)
