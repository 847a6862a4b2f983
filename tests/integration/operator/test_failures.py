"""Failures have owners: a silent agent fails at its time limit; a broken injection is Errored."""

from __future__ import annotations

import asyncio

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

from agents import BUILTIN_AGENTS
from itbench.client import ITBenchClient
from itbench.core.runner.context import session_id_for
from itbench.operator.benchmark_runs import trial_name
from itbench.operator.workloads import workload_name

pytestmark = pytest.mark.asyncio

SCENARIO = "cart-flagd-failure"


async def test_agent_that_never_reports_fails_its_trial_at_the_time_limit(lab: Lab) -> None:
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("boxed", {"image": {"image": "example.org/agent:1"}}))
    lab.cluster.apply(
        benchmark_run(
            "silent", "boxed", [SCENARIO], trialsPerScenario=1, timeouts={"agentSeconds": 300}
        )
    )
    job_name = workload_name(trial_name("silent", SCENARIO, 0))
    job = await until(
        lambda: lab.cluster.server.get("batch", "jobs", NS, job_name), what="the agent's Job"
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "itbench-agent"
    assert pod["automountServiceAccountToken"] is False
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["ITBENCH_GATEWAY_URL"]["value"] == "http://gateway.test:8080"
    assert env["ITBENCH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == job_name
    trial = lab.cluster.get("trials", trial_name("silent", SCENARIO, 0))
    assert trial is not None
    assert env["ITBENCH_TRIAL_ID"]["value"] == session_id_for(trial["metadata"]["uid"])
    assert SCENARIO not in env["ITBENCH_TRIAL_ID"]["value"]
    secret = lab.cluster.server.get("", "secrets", NS, job_name)
    assert secret is not None and secret["stringData"]["token"]
    assert secret["stringData"]["trialId"] == env["ITBENCH_TRIAL_ID"]["value"]
    sa = lab.cluster.server.get("", "serviceaccounts", NS, "itbench-agent")
    assert sa is not None and sa["automountServiceAccountToken"] is False

    await until(
        lambda: status_of(lab, "benchmarkruns", "silent").get("phase") == "Failed",
        what="the run complete: the agent passed nothing",
    )
    (trial,) = trials_of(lab, "silent")
    assert trial["status"]["phase"] == "Failed"
    assert trial["status"]["reason"] == "AgentTimeout"
    assert status_of(lab, "benchmarkruns", "silent")["summary"]["failed"] == 1
    events = lab.cluster.events(trial["metadata"]["name"])
    timeout = [e for e in events if e["reason"] == "AgentTimeout"]
    assert timeout and {e["type"] for e in timeout} == {"Normal"}, "an agent failing is Normal"
    assert all(len(e["message"]) <= 240 for e in events)
    assert lab.cluster.server.get("batch", "jobs", NS, job_name) is None
    assert lab.cluster.server.get("", "secrets", NS, job_name) is None


async def test_environment_that_cannot_inject_errors_the_trial_and_the_run_completes(
    lab: Lab,
) -> None:
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.refuse_injection[0] = True
    lab.cluster.apply(
        benchmark_run(
            "noinject", "oracle", [SCENARIO], trialsPerScenario=2, concurrency=2, allowOracle=True
        )
    )
    await until(
        lambda: status_of(lab, "benchmarkruns", "noinject").get("phase") == "Errored",
        what="the run complete: the platform ran no trial",
    )
    trials = trials_of(lab, "noinject")
    assert [t["status"]["phase"] for t in trials] == ["Errored", "Errored"]
    assert {t["status"]["reason"] for t in trials} == {"InjectionFailed"}
    assert all(t["status"]["message"].startswith("fault injection:") for t in trials)
    summary = status_of(lab, "benchmarkruns", "noinject")["summary"]
    assert summary["errored"] == 2 and summary["failed"] == 0
    warnings = [
        e
        for t in trials
        for e in lab.cluster.events(t["metadata"]["name"])
        if e["type"] == "Warning"
    ]
    assert {e["reason"] for e in warnings} == {"InjectionFailed"}


async def test_external_agent_takes_its_token_and_finishes_through_the_gateway(lab: Lab) -> None:
    handle = await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("outside", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "remote",
            "outside",
            [SCENARIO],
            trialsPerScenario=1,
            allowOracle=True,
            timeouts={"agentSeconds": 86400},
        )
    )
    name = trial_name("remote", SCENARIO, 0)
    secret = await until(
        lambda: lab.cluster.server.get("", "secrets", NS, workload_name(name)), what="the token"
    )
    token = secret["stringData"]["token"]

    def external_agent() -> None:
        client = ITBenchClient.in_process(handle.runtime.gateway(), token)
        try:
            BUILTIN_AGENTS["oracle"](client)
        finally:
            client.close()

    await asyncio.to_thread(external_agent)
    await until(
        lambda: status_of(lab, "benchmarkruns", "remote").get("phase") == "Succeeded",
        what="the run complete",
    )
    (trial,) = trials_of(lab, "remote")
    assert trial["status"]["phase"] == "Succeeded", trial["status"]["message"]
    assert trial["status"]["agentStartedAt"] and trial["status"]["agentFinishedAt"]
    assert lab.cluster.server.get("", "secrets", NS, workload_name(name)) is None
