"""Safety: an operator restart resumes runs exactly once; deletion and cancel recover faults."""

from __future__ import annotations

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

pytestmark = pytest.mark.asyncio

SCENARIO = "cart-flagd-failure"
MID_TRIAL = {"Injecting", "AwaitingAlerts", "Ready", "AgentRunning", "Evaluating"}


def _phase(trial: dict[str, object]) -> str:
    return str(((trial.get("status") or {}) or {}).get("phase", ""))  # type: ignore[union-attr]


async def test_killed_operator_resumes_every_trial_once_without_double_injection(
    lab: Lab,
) -> None:
    first = await lab.start()
    await ready_scenarios(lab, SCENARIO, "payment-failure")
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run(
            "crashy",
            "oracle",
            [SCENARIO, "payment-failure"],
            trialsPerScenario=2,
            concurrency=2,
            allowOracle=True,
        )
    )
    await until(
        lambda: any(_phase(t) in MID_TRIAL for t in trials_of(lab, "crashy")),
        what="a trial mid-way",
    )
    await first.kill()
    mid = {t["metadata"]["name"]: _phase(t) for t in trials_of(lab, "crashy")}
    assert MID_TRIAL & set(mid.values())

    await lab.start()
    await until(
        lambda: status_of(lab, "benchmarkruns", "crashy").get("phase") == "Succeeded",
        within=60,
        what="the run Succeeded after the restart",
    )
    trials = trials_of(lab, "crashy")
    assert len(trials) == 4
    status = status_of(lab, "benchmarkruns", "crashy")
    summary = status["summary"]
    assert status["progress"] == "4/4"
    assert summary["succeeded"] + summary["failed"] + summary["errored"] == 4
    for trial in trials:
        uid = trial["metadata"]["uid"]
        keys = lab.environments.injections(uid)
        assert [k for k in keys if "/inject/" in k] == [f"{uid}/inject/0"], trial["metadata"][
            "name"
        ]
        assert len(keys) == len(set(keys))
        applied = lab.proxies[uid].applied
        assert applied[f"{uid}/inject/0"] == 1 and set(applied.values()) == {1}
        assert trial["status"]["injections"] == 1
        assert trial["status"]["phase"] == "Succeeded", trial["status"]["message"]


async def test_deleting_a_run_mid_trial_recovers_the_fault_and_removes_the_objects(
    lab: Lab,
) -> None:
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("external", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "doomed",
            "external",
            [SCENARIO],
            trialsPerScenario=2,
            concurrency=1,
            timeouts={"agentSeconds": 3600},
        )
    )
    trial = await until(
        lambda: next(
            (t for t in trials_of(lab, "doomed") if _phase(t) in {"Ready", "AgentRunning"}), None
        ),
        what="a trial with its fault live",
    )
    uid = trial["metadata"]["uid"]
    env = lab.proxies[uid].inner
    baseline = lab.evidence.snapshot(f"{uid}/baseline")
    assert baseline is not None and env.snapshot().flags != baseline.flags
    lab.cluster.kubectl("delete", "benchmarkrun", "doomed", "--wait=false")
    await until(
        lambda: lab.cluster.get("benchmarkruns", "doomed") is None and not trials_of(lab, "doomed"),
        what="the run and its trials gone",
    )
    env.advance(120)  # flagd serves the restored file once its rollout is done
    assert env.snapshot().flags == baseline.flags
    assert lab.environments.get(uid) is None
    assert lab.sessions.sessions() == []


async def test_force_release_lets_deletion_finish_when_the_environment_is_unreachable(
    lab: Lab,
) -> None:
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("external", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "stuck", "external", [SCENARIO], trialsPerScenario=1, timeouts={"agentSeconds": 3600}
        )
    )
    trial = await until(
        lambda: next(
            (t for t in trials_of(lab, "stuck") if _phase(t) in {"Ready", "AgentRunning"}), None
        ),
        what="a trial with its fault live",
    )
    name, uid = trial["metadata"]["name"], trial["metadata"]["uid"]
    lab.proxies[uid].reachable = False
    lab.cluster.kubectl("delete", "benchmarkrun", "stuck", "--wait=false")
    blocked = await until(
        lambda: [e for e in lab.cluster.events(name) if e["reason"] == "ReleaseBlocked"],
        what="ReleaseBlocked",
    )
    assert "itbench.io/force-release=true" in blocked[0]["message"]
    held = lab.cluster.get("trials", name)
    assert held is not None and held["metadata"].get("deletionTimestamp")
    assert lab.cluster.get("benchmarkruns", "stuck") is not None
    lab.cluster.kubectl("annotate", "trial", name, "itbench.io/force-release=true")
    await until(
        lambda: (
            lab.cluster.get("trials", name) is None
            and lab.cluster.get("benchmarkruns", "stuck") is None
        ),
        what="the trial and the run gone",
    )
    assert [e["reason"] for e in lab.cluster.events(name)][-1] == "ForceReleased"
    assert lab.environments.get(uid) is None


async def test_cancel_stops_new_trials_and_recovers_the_running_one(lab: Lab) -> None:
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("external", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "cancelled",
            "external",
            [SCENARIO],
            trialsPerScenario=3,
            concurrency=1,
            timeouts={"agentSeconds": 3600},
        )
    )
    trial = await until(
        lambda: next(
            (t for t in trials_of(lab, "cancelled") if _phase(t) in {"Ready", "AgentRunning"}), None
        ),
        what="the first trial running",
    )
    uid = trial["metadata"]["uid"]
    env = lab.proxies[uid].inner
    baseline = lab.evidence.snapshot(f"{uid}/baseline")
    lab.cluster.kubectl(
        "patch", "benchmarkrun", "cancelled", "--type=merge", "-p", '{"spec":{"cancel":true}}'
    )
    await until(
        lambda: status_of(lab, "benchmarkruns", "cancelled").get("phase") == "Cancelled",
        what="the run Cancelled",
    )
    by_name = {t["metadata"]["name"]: t for t in trials_of(lab, "cancelled")}
    stopped = by_name[trial["metadata"]["name"]]["status"]
    assert stopped["phase"] == "Errored" and stopped["reason"] == "Cancelled"
    assert "cancelled" in stopped["message"]
    others = [t for n, t in by_name.items() if n != trial["metadata"]["name"]]
    assert [t["status"]["phase"] for t in others] == ["Queued", "Queued"]
    assert lab.environments.created == 1
    env.advance(120)  # flagd serves the restored file once its rollout is done
    assert baseline is not None and env.snapshot().flags == baseline.flags
    assert [e["reason"] for e in lab.cluster.events("cancelled")][-1] == "Cancelled"
    assert NS == "default"
