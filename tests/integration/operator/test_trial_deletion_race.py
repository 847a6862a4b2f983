"""Deleting a Trial while one of its ticks is in flight: the finalizer waits for the tick, so a
fault injected by that tick is removed too (handler code driven directly, interleaving forced)."""

from __future__ import annotations

import threading
from typing import Any

import kopf
import pytest
from operator_lab import FAST, NS, Cluster, agent, benchmark_run, run_owner

from itbench.core.models.base import LocalObjectReference
from itbench.core.models.trial import TrialSpec
from itbench.operator.agent_submissions import reconcile_agent
from itbench.operator.bodies import ADMITTED
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, SCENARIOS, TRIALS
from itbench.operator.runtime import EnvironmentRegistry, OperatorRuntime, simulator_environment
from itbench.operator.scenarios import reconcile_scenario
from itbench.operator.trials import TrialDriver

SCENARIO = "cart-flagd-failure"


class SlowInjection:
    """An environment whose injection waits for a signal (so a deletion can arrive meanwhile)."""

    def __init__(self, inner: Any, entered: threading.Event, go: threading.Event) -> None:
        self.inner, self.entered, self.go = inner, entered, go

    def inject(self, key: str, changes: Any) -> bool:
        self.entered.set()
        assert self.go.wait(10)
        return bool(self.inner.inject(key, changes))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_deletion_during_an_injecting_tick_waits_and_then_removes_the_fault(
    cluster: Cluster,
) -> None:
    cluster.apply_scenarios(SCENARIO)
    setup = OperatorRuntime(api=cluster.api, config=FAST)
    reconcile_scenario(setup, cluster.api.get(SCENARIOS, None, SCENARIO))
    cluster.apply(agent("a", {"external": {"pollIntervalSeconds": 5}}))
    reconcile_agent(setup, cluster.api.get(AGENT_SUBMISSIONS, NS, "a"))
    entered, go = threading.Event(), threading.Event()
    envs: dict[str, SlowInjection] = {}

    def factory(ctx: Any) -> Any:
        envs[ctx.uid] = SlowInjection(simulator_environment(ctx), entered, go)
        return envs[ctx.uid]

    runtime = OperatorRuntime(
        api=cluster.api, config=FAST, environments=EnvironmentRegistry(factory)
    )
    driver = TrialDriver(runtime)
    spec = TrialSpec(
        run_ref=LocalObjectReference(name="r"),
        agent_ref=LocalObjectReference(name="a"),
        scenario=SCENARIO,
        attempt=0,
        seed=1,
    )
    cluster.apply(benchmark_run("r", "a", [SCENARIO]))
    cluster.api.create(
        TRIALS,
        NS,
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "Trial",
            "metadata": {
                "name": "r-t-0",
                "namespace": NS,
                "annotations": {ADMITTED: "true"},
                "ownerReferences": run_owner(cluster, "r"),
            },
            "spec": spec.wire(),
        },
    )

    def ticks() -> None:
        for _ in range(200):
            driver.advance(cluster.api.get(TRIALS, NS, "r-t-0"))
            if entered.is_set():
                return

    ticking = threading.Thread(target=ticks)
    ticking.start()
    assert entered.wait(20), "the trial reached its injection"
    body = cluster.api.get(TRIALS, NS, "r-t-0")
    uid = body["metadata"]["uid"]
    with pytest.raises(kopf.TemporaryError, match="tick is still running"):
        driver.finalize(body)
    go.set()
    ticking.join(10)
    twin = envs[uid].inner
    assert twin.snapshot().flags["cartFailure"] == "on", "the tick in flight did inject"
    driver.finalize(body)
    assert twin.snapshot().flags["cartFailure"] == "off", "the retried finalizer removed it"
    assert runtime.environments.get(uid) is None
    driver.advance(cluster.api.get(TRIALS, NS, "r-t-0"))
    assert runtime.environments.get(uid) is None, "no tick starts again after the deletion"
