"""Runs stay apart and keep their outcome: Trials of two runs never share a name, whatever the run
and scenario names, and a finished run is never reopened by a later spec edit."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from operator_lab import FAST, NS, Cluster, agent, benchmark_run

from itbench.operator.agent_submissions import reconcile_agent
from itbench.operator.benchmark_runs import RUN_LABEL, _Reconciler
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, BENCHMARK_RUNS, SCENARIOS, TRIALS
from itbench.operator.runtime import EnvironmentRegistry, OperatorRuntime
from itbench.operator.scenarios import reconcile_scenario

ADMITTED = "itbench.io/admitted"


def test_runs_whose_names_join_alike_keep_their_own_trials(cluster: Cluster) -> None:
    # "r-finops" + "no-fault-control" and "r" + "finops-no-fault-control" join to the same text.
    cluster.apply_scenarios("no-fault-control", "finops-no-fault-control")
    runtime = OperatorRuntime(api=cluster.api, config=FAST)
    for name in ("no-fault-control", "finops-no-fault-control"):
        reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, name))
    cluster.apply(agent("sre", {"builtin": {"name": "oracle"}}, "SRE"))
    cluster.apply(agent("fin", {"builtin": {"name": "oracle"}}, "FinOps"))
    for name in ("sre", "fin"):
        reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, name))
    cluster.apply(benchmark_run("r-finops", "sre", ["no-fault-control"], trialsPerScenario=2))
    cluster.apply(
        benchmark_run(
            "r",
            "fin",
            ["finops-no-fault-control"],
            trialsPerScenario=2,
            concurrency=2,
            environment={"type": "simulator", "capacity": 2},
        )
    )

    def reconcile(name: str) -> None:
        _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, name)).run()

    reconcile("r-finops")
    reconcile("r")
    trials = cluster.api.list_objects(TRIALS, NS)
    by_run: dict[str, list[dict[str, object]]] = {}
    for trial in trials:
        by_run.setdefault(trial["metadata"]["labels"][RUN_LABEL], []).append(trial)
    assert {run: len(ts) for run, ts in by_run.items()} == {"r-finops": 2, "r": 2}
    admitted = {
        run: sum(1 for t in ts if (t["metadata"].get("annotations") or {}).get(ADMITTED))
        for run, ts in by_run.items()
    }
    assert admitted == {"r-finops": 1, "r": 2}, "each run admits up to its own concurrency"
    for trial in trials:
        cluster.api.patch_status(
            TRIALS,
            NS,
            trial["metadata"]["name"],
            {
                "phase": "Succeeded",
                "reason": "TasksPassed",
                "timeline": [{"phase": "Succeeded", "time": "2026-01-01T00:00:00Z"}],
            },
            {},
        )
    for _ in range(2):
        reconcile("r-finops")
        reconcile("r")
    for name in ("r-finops", "r"):
        status = cluster.api.get(BENCHMARK_RUNS, NS, name)["status"]
        assert (status["phase"], status["progress"]) == ("Succeeded", "2/2"), name

    # Cancelling a finished run is acknowledged and changes nothing else.
    before = cluster.api.get(BENCHMARK_RUNS, NS, "r")
    events = len(cluster.server.objects("", "events", NS))
    cluster.kubectl("patch", "benchmarkrun", "r", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    reconcile("r")
    after = cluster.api.get(BENCHMARK_RUNS, NS, "r")
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"]
    assert after["status"]["phase"] == "Succeeded"
    assert {k: v for k, v in after["status"].items() if k != "observedGeneration"} == {
        k: v for k, v in before["status"].items() if k != "observedGeneration"
    }
    assert len(cluster.server.objects("", "events", NS)) == events, "no new Event"


def test_a_reconcile_on_a_stale_body_neither_repeats_events_nor_moves_timestamps(
    cluster: Cluster,
) -> None:
    cluster.apply_scenarios("cart-flagd-failure")
    runtime = OperatorRuntime(api=cluster.api, config=FAST)
    reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, "cart-flagd-failure"))
    cluster.apply(agent("sre", {"builtin": {"name": "oracle"}}, "SRE"))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "sre"))
    cluster.apply(benchmark_run("stale", "sre", ["cart-flagd-failure"], trialsPerScenario=1))
    first_seen = cluster.api.get(BENCHMARK_RUNS, NS, "stale")  # what Kopf saw: no status yet
    _Reconciler(runtime, first_seen).run()
    written = cluster.api.get(BENCHMARK_RUNS, NS, "stale")["status"]
    assert written["phase"] == "Running" and written["startedAt"]

    def run_events() -> list[str]:
        return [
            e["reason"]
            for e in cluster.server.objects("", "events", NS)
            if e["involvedObject"]["name"] == "stale"
        ]

    assert run_events() == ["Running"]
    _Reconciler(runtime, first_seen).run()  # Kopf has not caught up with that write yet
    assert cluster.api.get(BENCHMARK_RUNS, NS, "stale")["status"] == written
    assert run_events() == ["Running"]


def test_a_selector_waits_until_every_scenario_is_validated(cluster: Cluster) -> None:
    cluster.apply_scenarios("cart-flagd-failure", "payment-failure")
    runtime = OperatorRuntime(api=cluster.api, config=FAST)
    reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, "cart-flagd-failure"))
    cluster.apply(agent("a", {"builtin": {"name": "oracle"}}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "a"))
    run = benchmark_run("sel", "a", [])
    run["spec"]["scenarios"] = {"selector": {"domains": ["SRE"]}}
    cluster.apply(run)
    _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, "sel")).run()
    status = cluster.api.get(BENCHMARK_RUNS, NS, "sel")["status"]
    assert status["phase"] == "Pending"
    assert "payment-failure" in status["conditions"][0]["message"]
    reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, "payment-failure"))
    _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, "sel")).run()
    status = cluster.api.get(BENCHMARK_RUNS, NS, "sel")["status"]
    assert sorted(status["scenarios"]) == ["cart-flagd-failure", "payment-failure"]


def test_the_environment_limit_holds_when_ticks_build_at_the_same_time() -> None:
    built: list[str] = []
    gate = threading.Barrier(8)

    def factory(ctx: Any) -> Any:
        time.sleep(0.05)  # building takes a while; the other ticks arrive meanwhile
        built.append(ctx.uid)
        return object()

    registry = EnvironmentRegistry(factory)
    results: dict[str, object] = {}

    def tick(uid: str) -> None:
        gate.wait()
        results[uid] = registry.create(SimpleNamespace(uid=uid), limit=3)  # type: ignore[arg-type]

    threads = [threading.Thread(target=tick, args=(f"uid-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 3 and len(registry) == 3
    assert sum(1 for env in results.values() if env is not None) == 3
    assert registry.create(SimpleNamespace(uid=built[0]), limit=3) is not None  # type: ignore[arg-type]
