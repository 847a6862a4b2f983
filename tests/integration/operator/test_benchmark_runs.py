"""A BenchmarkRun end to end: Trials appear, progress, finish; the summary reaches its status."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import kubernetes
import pytest
from operator_lab import (
    NS,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)

from itbench.operator.benchmark_runs import trial_name
from itbench.operator.bodies import ADMITTED
from itbench.operator.trials import TrialDriver

pytestmark = pytest.mark.asyncio

SCENARIOS = ["cart-flagd-failure", "payment-failure"]


async def test_run_with_the_oracle_completes_and_reports_through_client_and_kubectl(
    lab: Lab,
) -> None:
    await lab.start()
    await ready_scenarios(lab, *SCENARIOS)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    watched: list[tuple[str, str, str]] = []
    watch = kubernetes.watch.Watch()

    stopped = threading.Event()

    # The watch starts from the version the list had before the run was applied, so it sees
    # every change of every Trial in order however late its thread gets to the server.
    listed = lab.cluster.api.custom.list_namespaced_custom_object(
        "itbench.io", "v1alpha1", NS, "trials"
    )
    since = listed["metadata"]["resourceVersion"]

    def follow_trials() -> None:
        try:
            for event in watch.stream(
                lab.cluster.api.custom.list_namespaced_custom_object,
                "itbench.io",
                "v1alpha1",
                NS,
                "trials",
                resource_version=since,
                timeout_seconds=120,
            ):
                obj = event["object"]
                phase = (obj.get("status") or {}).get("phase", "")
                watched.append((event["type"], obj["metadata"]["name"], phase))
        except Exception:  # the loopback API going away ends the stream
            if not stopped.is_set():
                raise

    follower = threading.Thread(target=follow_trials, daemon=True)
    follower.start()
    lab.cluster.apply(
        benchmark_run(
            "oracle-run", "oracle", SCENARIOS, trialsPerScenario=2, concurrency=2, allowOracle=True
        )
    )
    phases_seen: set[str] = set()
    running_seen: list[int] = []

    def finished() -> bool:
        for trial in trials_of(lab, "oracle-run"):
            phases_seen.add((trial.get("status") or {}).get("phase", ""))
        status = status_of(lab, "benchmarkruns", "oracle-run")
        running_seen.append(status.get("runningTrials", 0))
        return status.get("phase") == "Succeeded"

    await until(finished, within=60, what="the run Succeeded")
    trials = trials_of(lab, "oracle-run")
    await until(
        lambda: sum(1 for e in watched if e[2] == "Succeeded") >= 4, what="watched to the end"
    )
    stopped.set()
    watch.stop()
    # The official watch saw each Trial appear, progress through the state machine and finish.
    added = {name for kind, name, _ in watched if kind == "ADDED"}
    assert added == {t["metadata"]["name"] for t in trials}
    for name in added:
        phases = [p for _, n, p in watched if n == name and p]
        assert phases[0] == "Queued" and phases[-1] == "Succeeded"
        assert set(phases) - {"Queued", "Succeeded"}, phases
    timeline = {entry["phase"] for entry in trials[0]["status"]["timeline"]}
    assert timeline >= {"Pending", "Provisioning", "Injecting", "AwaitingAlerts", "Ready"}
    assert timeline >= {"AgentRunning", "Evaluating", "Recovering", "Succeeded"}
    assert sorted(t["metadata"]["name"] for t in trials) == sorted(
        trial_name("oracle-run", s, a) for s in SCENARIOS for a in range(2)
    )
    run_uid = lab.cluster.get("benchmarkruns", "oracle-run")["metadata"]["uid"]  # type: ignore[index]
    assert all(t["metadata"]["ownerReferences"][0]["uid"] == run_uid for t in trials)
    assert {"Queued", "Succeeded"} <= phases_seen
    assert max(running_seen) <= 2
    assert all(t["status"]["phase"] == "Succeeded" for t in trials), [
        (t["metadata"]["name"], t["status"]["reason"], t["status"]["message"]) for t in trials
    ]
    assert all(t["status"]["injections"] == 1 for t in trials)

    # The official client reads the summary from status.
    run = lab.cluster.api.custom.get_namespaced_custom_object(
        "itbench.io", "v1alpha1", NS, "benchmarkruns", "oracle-run"
    )
    summary = run["status"]["summary"]
    assert run["status"]["progress"] == "4/4"
    assert summary["succeeded"] == 4 and summary["failed"] == 0 and summary["errored"] == 0
    assert summary["diagnosisPassAt1"] == 1.0 and summary["mitigationPassAt1"] == 1.0
    complete = next(c for c in run["status"]["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "True" and complete["reason"] == "AllTrialsFinished"

    # kubectl shows the printer columns.
    header, row = lab.cluster.kubectl("get", "benchmarkruns").splitlines()[:2]
    assert header.split()[:4] == ["NAME", "AGENT", "PHASE", "PROGRESS"]
    assert row.split()[:6] == ["oracle-run", "oracle", "Succeeded", "4/4", "1", "1"]
    trials_table = lab.cluster.kubectl("get", "trials")
    assert trials_table.count("Succeeded") == 4

    # The full report lives in a ConfigMap referenced from status, not in the status.
    assert run["status"]["reportRef"] == "configmap/oracle-run-report"
    config_map = lab.cluster.api.core.read_namespaced_config_map("oracle-run-report", NS)
    report: dict[str, Any] = json.loads(config_map.data["report.json"])
    assert report["trials"] == 4 and report["agent"] == "oracle"
    assert len(json.dumps(run)) < 20_000

    # Events on phase changes; the agent's status lists the run and its best scores.
    reasons = [e["reason"] for e in lab.cluster.events("oracle-run")]
    assert reasons[:1] == ["Running"] and reasons[-1] == "Succeeded"
    await until(
        lambda: status_of(lab, "agentsubmissions", "oracle").get("lastRuns"), what="lastRuns"
    )
    agent_status = status_of(lab, "agentsubmissions", "oracle")
    assert agent_status["lastRuns"][0]["run"] == "oracle-run"
    assert agent_status["bestDiagnosisPassAt1"] == 1.0


async def test_capacity_bounds_admission_and_queued_trials_say_why(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks: dict[str, int] = {}
    advance = TrialDriver.advance

    def counted(self: TrialDriver, body: Any) -> None:
        name = str(body["metadata"]["name"])
        ticks[name] = ticks.get(name, 0) + 1
        advance(self, body)

    monkeypatch.setattr(TrialDriver, "advance", counted)
    await lab.start()
    await ready_scenarios(lab, *SCENARIOS)
    await ready_agent(lab, agent("external", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "slow",
            "external",
            SCENARIOS,
            trialsPerScenario=2,
            concurrency=3,
            environment={"type": "simulator", "capacity": 1},
            timeouts={"agentSeconds": 3600},
        )
    )
    await until(
        lambda: (
            len(trials_of(lab, "slow")) == 4
            and status_of(lab, "benchmarkruns", "slow").get("runningTrials") == 1
        ),
        what="one admitted",
    )

    def waiting() -> list[dict[str, Any]]:
        # Queued and not admitted: the admitted trial is Queued too until its first tick.
        return [
            t
            for t in trials_of(lab, "slow")
            if (t.get("status") or {}).get("phase") == "Queued"
            and ADMITTED not in (t["metadata"].get("annotations") or {})
        ]

    def started() -> list[dict[str, Any]]:
        return [
            t
            for t in trials_of(lab, "slow")
            if (t.get("status") or {}).get("phase") not in (None, "Pending", "Queued")
        ]

    await until(lambda: len(waiting()) == 3 and len(started()) == 1, what="three Queued")
    queued = waiting()
    assert {t["status"]["reason"] for t in queued} == {"WaitingForCapacity"}
    assert "concurrency" in queued[0]["status"]["message"]
    status = status_of(lab, "benchmarkruns", "slow")
    assert status["queuedTrials"] == 3 and status["progress"] == "0/4"
    depth = lab.operators[0].runtime.metrics.registry.get_sample_value(
        "itbench_operator_queue_depth", {"namespace": NS, "run": "slow"}
    )
    assert depth == 3
    # A queued trial does not tick while it waits: its timer stops once the operator sees it
    # marked Queued (a tick may still be under way then) and starts again with the run's
    # annotation. The admitted trial ticks every 0.02 s meanwhile.
    names = [t["metadata"]["name"] for t in queued]
    loop = asyncio.get_running_loop()
    last: dict[str, int] = {}
    changed = [loop.time()]

    def settled() -> bool:
        now = {name: ticks.get(name, 0) for name in names}
        if now != last:
            last.update(now)
            changed[0] = loop.time()
        return loop.time() - changed[0] > 0.5

    await until(settled, within=10, what="queued trials no longer ticking")
    await asyncio.sleep(1.0)
    assert {name: ticks.get(name, 0) for name in names} == last
    assert ticks[started()[0]["metadata"]["name"]] > 10


async def test_runs_of_the_same_name_in_two_namespaces_keep_their_trials_apart(lab: Lab) -> None:
    """The gateway serves every namespace: same-named Trials must not share a session."""
    other = "team-b"
    lab.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    await lab.start()
    await ready_scenarios(lab, SCENARIOS[0])
    for namespace in (NS, other):
        manifest = agent("oracle", {"builtin": {"name": "oracle"}})
        manifest["metadata"]["namespace"] = namespace
        lab.cluster.apply(manifest)
    await until(
        lambda: all(
            ((lab.cluster.get("agentsubmissions", "oracle", ns) or {}).get("status") or {}).get(
                "ready"
            )
            for ns in (NS, other)
        ),
        what="both agents Ready",
    )
    for namespace in (NS, other):
        run = benchmark_run("twin", "oracle", [SCENARIOS[0]], trialsPerScenario=2, allowOracle=True)
        run["metadata"]["namespace"] = namespace
        run["spec"]["concurrency"] = 2
        lab.cluster.apply(run)

    def run_phase(namespace: str) -> str:
        run = lab.cluster.get("benchmarkruns", "twin", namespace) or {}
        return str((run.get("status") or {}).get("phase", ""))

    await until(
        lambda: all(run_phase(ns) == "Succeeded" for ns in (NS, other)),
        within=60,
        what="both runs Succeeded",
    )
    trials = [t for t in lab.cluster.objects("trials") if t["metadata"]["name"].startswith("twin-")]
    assert len(trials) == 4
    assert {t["metadata"]["namespace"] for t in trials} == {NS, other}
    assert all(t["status"]["phase"] == "Succeeded" for t in trials), [
        (t["metadata"]["namespace"], t["status"]["message"]) for t in trials
    ]
    assert lab.environments.created == 4
