"""What a cluster user sees with the real kubectl: rounded columns, watches, explain, wait.

The loopback API answers as kube-apiserver does where kubectl looks (Tables for lists, named GETs
and watches with number cells as stored, OpenAPI v3 from the served CRDs, discovery categories),
so these tests would read the same on a real cluster.
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import threading
from typing import Any

import pytest
from operator_lab import (
    FAST,
    KUBECTL,
    NS,
    Cluster,
    Lab,
    agent,
    benchmark_run,
    new_lab,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)

from itbench.operator.agent_submissions import reconcile_agent
from itbench.operator.benchmark_runs import _Reconciler
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, BENCHMARK_RUNS, SCENARIOS, TRIALS
from itbench.operator.runtime import OperatorRuntime
from itbench.operator.scenarios import reconcile_scenario

SCENARIO = "cart-flagd-failure"
FINOPS = "finops-frontend-hpa-misconfiguration"


def _scored(passed: bool, ntam: float) -> dict[str, Any]:
    return {
        "phase": "Succeeded" if passed else "Failed",
        "reason": "TasksPassed" if passed else "TasksFailed",
        "timeline": [{"phase": "Succeeded", "time": "2026-01-01T00:00:00Z"}],
        "scores": {
            "profile": "default@2",
            "diagnosis": {"passed": passed, "flNtam": ntam, "fpcNtam": ntam},
            "mitigation": {"passed": False, "reason": "alerts still firing"},
        },
    }


def _finished_run(cluster: Cluster) -> dict[str, Any]:
    """A run of three trials, one diagnosis right: pass@1 1/3, NTAM with long fractions."""
    runtime = OperatorRuntime(api=cluster.api, config=FAST)
    cluster.apply_scenarios(SCENARIO)
    reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, SCENARIO))
    cluster.apply(agent("a", {"builtin": {"name": "oracle"}}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "a"))
    cluster.apply(benchmark_run("thirds", "a", [SCENARIO], trialsPerScenario=3))
    _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, "thirds")).run()
    for index, trial in enumerate(cluster.api.list_objects(TRIALS, NS)):
        status = _scored(index == 0, 0.9690449467545591 / (index + 1))
        cluster.api.patch_status(TRIALS, NS, trial["metadata"]["name"], status, {})
    _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, "thirds")).run()
    run: dict[str, Any] = cluster.api.get(BENCHMARK_RUNS, NS, "thirds")
    return run


def test_kubectl_get_br_shows_rounded_numbers_and_status_stores_them_rounded(
    cluster: Cluster,
) -> None:
    run = _finished_run(cluster)
    summary = run["status"]["summary"]
    assert summary["diagnosisPassAt1"] == 0.3333 and summary["mitigationPassAt1"] == 0.0
    assert summary["flNtam"] == round((0.9690449467545591 * (1 + 1 / 2 + 1 / 3)) / 3, 4)
    assert run["status"]["phase"] == "Succeeded", "the agent passed one trial"
    header, row = cluster.kubectl("get", "br").splitlines()[:2]
    assert header.split()[:6] == ["NAME", "AGENT", "PHASE", "PROGRESS", "DIAGNOSIS", "PASS@1"]
    assert row.split()[:6] == ["thirds", "a", "Succeeded", "3/3", "0.3333", "0"]
    wide = cluster.kubectl("get", "br", "thirds", "-o", "wide").splitlines()
    # An absent value (no FinOps cost for an SRE run) is a null cell, printed empty.
    assert wide[1].split()[-3:] == ["SRE", "0", str(summary["flNtam"])]
    # The full precision stays in the report.
    report = json.loads(
        cluster.api.core.read_namespaced_config_map("thirds-report", NS).data["report.json"]
    )
    diagnosis = next(t for t in report["tasks"] if t["key"] == "sre.diagnosis")
    assert diagnosis["passAtK"][0]["estimate"]["mean"] == pytest.approx(1 / 3, abs=1e-12)
    # Trials show their reason and task outcomes.
    trials = cluster.kubectl("get", "trials").splitlines()
    assert trials[0].split()[3:6] == ["PHASE", "REASON", "DIAGNOSIS"]
    assert sorted(line.split()[3:7] for line in trials[1:]) == [
        ["Failed", "TasksFailed", "false", "false"],
        ["Failed", "TasksFailed", "false", "false"],
        ["Succeeded", "TasksPassed", "true", "false"],
    ]
    assert "thirds" in cluster.kubectl("get", "itbench"), "the itbench category lists our kinds"


def test_kubectl_get_br_name_watch_prints_rows_as_the_run_changes(cluster: Cluster) -> None:
    cluster.apply(benchmark_run("watched", "a", [SCENARIO]))
    cluster.kubectl(
        "patch",
        "br",
        "watched",
        "--type=merge",
        "--subresource=status",
        "-p",
        json.dumps({"status": {"phase": "Running", "progress": "0/3"}}),
    )
    lines: queue.Queue[str] = queue.Queue()
    proc = subprocess.Popen(
        [KUBECTL, "get", "br", "watched", "-w", "--kubeconfig", str(cluster.kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in iter(proc.stdout.readline, "")],  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    try:
        header = lines.get(timeout=30)
        first = lines.get(timeout=30)
        assert header.split()[:4] == ["NAME", "AGENT", "PHASE", "PROGRESS"], header
        assert first.split()[:4] == ["watched", "a", "Running", "0/3"], first
        cluster.kubectl(
            "patch",
            "br",
            "watched",
            "--type=merge",
            "--subresource=status",
            "-p",
            json.dumps({"status": {"progress": "2/3", "summary": {"diagnosisPassAt1": 0.5}}}),
        )
        changed = lines.get(timeout=30)
        assert changed.split()[:5] == ["watched", "a", "Running", "2/3", "0.5"], changed
    finally:
        proc.kill()
        proc.wait(10)


def test_kubectl_explain_reads_the_descriptions_of_the_served_crd(cluster: Cluster) -> None:
    spec = cluster.kubectl("explain", "benchmarkrun.spec")
    assert "What to benchmark and how." in spec or "What to benchmark." in spec
    assert "agentRef" in spec and "trialsPerScenario" in spec
    field = cluster.kubectl("explain", "benchmarkrun.spec.environment.capacity")
    assert "the simulator hosts as many" in " ".join(field.split())
    trial = cluster.kubectl("explain", "trial.status.clock")
    assert "virtual" in trial


def test_dry_run_answers_without_storing(cluster: Cluster) -> None:
    out = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        input=json.dumps(benchmark_run("dry", "a", [SCENARIO])),
    )
    assert "(server dry run)" in out
    assert cluster.get("benchmarkruns", "dry") is None
    cluster.apply(benchmark_run("wet", "a", [SCENARIO]))
    cluster.kubectl("delete", "br", "wet", "--dry-run=server")
    assert cluster.get("benchmarkruns", "wet") is not None


def test_rbac_kinds_are_served(cluster: Cluster) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": ["itbench.io"], "resources": ["*"], "verbs": ["get"]}],
    }
    assert "created" in cluster.apply(role)
    assert "reader" in cluster.kubectl("get", "clusterroles")


def test_where_the_loopback_api_still_differs_from_kube_apiserver(cluster: Cluster) -> None:
    """It checks no schema (a real server refuses this body) and has no server-side apply."""
    body = benchmark_run("unchecked", "a", [SCENARIO], trialsPerScenario="many")
    cluster.api.custom.create_namespaced_custom_object(
        "itbench.io", "v1alpha1", NS, "benchmarkruns", body
    )
    assert cluster.get("benchmarkruns", "unchecked")["spec"]["trialsPerScenario"] == "many"  # type: ignore[index]
    refused = cluster.kubectl(
        "apply", "--server-side", "-f", "-", input=json.dumps(body), check=False
    )
    assert "server-side apply is not supported" in refused


@pytest.mark.asyncio
async def test_kubectl_waits_for_a_complete_trial_and_finops_columns_are_filled(lab: Lab) -> None:
    await lab.start()
    await ready_scenarios(lab, FINOPS)
    await ready_agent(lab, agent("fin", {"builtin": {"name": "oracle"}}, "FinOps"))
    lab.cluster.apply(
        benchmark_run("fin-run", "fin", [FINOPS], trialsPerScenario=1, allowOracle=True)
    )
    (trial,) = await until(lambda: trials_of(lab, "fin-run"), what="the Trial")
    name = trial["metadata"]["name"]
    waited = await asyncio.to_thread(
        lab.cluster.kubectl, "wait", "--for=condition=Complete", f"trial/{name}", "--timeout=60s"
    )
    assert "condition met" in waited
    status = status_of(lab, "trials", name)
    assert status["phase"] == "Succeeded" and status["clock"] == "virtual"
    types = {c["type"]: c["status"] for c in status["conditions"]}
    assert types == {
        "Valid": "True",
        "Ready": "False",
        "Complete": "True",
        "TrajectoryStored": "True",
    }
    await until(
        lambda: status_of(lab, "benchmarkruns", "fin-run").get("phase") == "Succeeded",
        what="the run Succeeded",
    )
    summary = status_of(lab, "benchmarkruns", "fin-run")["summary"]
    assert summary["domain"] == "FinOps"
    assert summary["diagnosisPassAt1"] == 1.0 and summary["mitigationPassAt1"] == 1.0
    row = lab.cluster.kubectl("get", "br", "fin-run", "-o", "wide").splitlines()[1].split()
    assert row[4:6] == ["1", "1"] and "FinOps" in row
    agent_status = await until(
        lambda: status_of(lab, "agentsubmissions", "fin").get("bestDiagnosisPassAt1"),
        what="the agent's best scores",
    )
    assert agent_status == 1.0


def test_a_cluster_environment_without_capacity_runs_one_trial_at_a_time(
    cluster: Cluster,
) -> None:
    runtime = OperatorRuntime(
        api=cluster.api, config=FAST, environments=new_lab(cluster).environments
    )
    cluster.apply_scenarios(SCENARIO, "payment-failure")
    for name in (SCENARIO, "payment-failure"):
        reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, name))
    cluster.apply(agent("a", {"builtin": {"name": "oracle"}}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "a"))
    for run, env in (("sim", "simulator"), ("live", "cluster")):
        cluster.apply(
            benchmark_run(
                run, "a", [SCENARIO, "payment-failure"], concurrency=3, environment={"type": env}
            )
        )
        _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, run)).run()
    running = {
        run: cluster.api.get(BENCHMARK_RUNS, NS, run)["status"]["runningTrials"]
        for run in ("sim", "live")
    }
    assert running == {"sim": 3, "live": 1}
