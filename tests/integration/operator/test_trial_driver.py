"""The Trial driver tolerates bodies that lag behind its own writes (Kopf's watch is async)."""

from __future__ import annotations

import copy
from typing import Any

from operator_lab import FAST, NS, Cluster, agent, benchmark_run, new_lab, run_owner

from itbench.gateway.sessions import SessionRegistry
from itbench.operator import workloads
from itbench.operator.bodies import ADMITTED
from itbench.operator.runtime import OperatorRuntime
from itbench.operator.trials import TrialDriver

SCENARIO = "cart-flagd-failure"


def _trial(cluster: Cluster, runtime: dict[str, Any] | None = None) -> dict[str, Any]:
    cluster.apply_scenarios(SCENARIO)
    scenario = cluster.get("scenarios", SCENARIO)
    assert scenario is not None
    cluster.api.patch_status("scenarios", None, SCENARIO, {"phase": "Ready"}, {})
    cluster.apply(agent("oracle", runtime or {"builtin": {"name": "oracle"}}))
    run = benchmark_run("r", "oracle", [SCENARIO], allowOracle=True)
    cluster.apply(run)
    body = {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "Trial",
        "metadata": {
            "name": "r-trial",
            "namespace": NS,
            "annotations": {ADMITTED: "true"},
            "labels": {"itbench.io/run": "r"},
            "ownerReferences": run_owner(cluster, "r"),
        },
        "spec": {
            "runRef": {"name": "r"},
            "agentRef": {"name": "oracle"},
            "scenario": SCENARIO,
            "attempt": 0,
            "seed": 7,
            "allowOracle": True,
        },
    }
    cluster.api.create("trials", NS, body)
    stored = cluster.get("trials", "r-trial")
    assert stored is not None
    return stored


def test_stale_bodies_neither_restart_nor_error_a_trial(cluster: Cluster) -> None:
    lab = new_lab(cluster)
    runtime = OperatorRuntime(
        api=cluster.api,
        config=FAST,
        environments=lab.environments,
        sessions=lab.sessions,
        evidence=lab.evidence,
    )
    driver = TrialDriver(runtime)
    first = _trial(cluster)
    stale = copy.deepcopy(first)
    driver.advance(first)
    for _ in range(200):
        driver.advance(stale)  # the watch has not delivered any of the driver's writes
        phase = cluster.get("trials", "r-trial")["status"]["phase"]  # type: ignore[index]
        if phase in ("Succeeded", "Failed", "Errored"):
            break
    status = cluster.get("trials", "r-trial")["status"]  # type: ignore[index]
    assert status["phase"] == "Succeeded", status["message"]
    uid = first["metadata"]["uid"]
    applied = lab.proxies[uid].applied
    assert applied[f"{uid}/inject/0"] == 1 and set(applied.values()) == {1}
    phases = [entry["phase"] for entry in status["timeline"]]
    assert phases.count("Provisioning") == 1 and phases[-1] == "Succeeded"
    driver.advance(stale)  # after the end, an old body changes nothing
    assert cluster.get("trials", "r-trial")["status"] == status  # type: ignore[index]


def test_a_session_reopened_by_a_new_operator_keeps_the_token_its_agent_holds(
    cluster: Cluster,
) -> None:
    lab = new_lab(cluster)

    def driver(sessions: SessionRegistry) -> TrialDriver:
        return TrialDriver(
            OperatorRuntime(
                api=cluster.api,
                config=FAST,
                environments=lab.environments,
                sessions=sessions,
                evidence=lab.evidence,
            )
        )

    first = driver(lab.sessions)
    _trial(cluster, {"external": {"pollIntervalSeconds": 5}})
    for _ in range(200):
        first.advance(cluster.get("trials", "r-trial"))  # type: ignore[arg-type]
        if cluster.get("trials", "r-trial")["status"]["phase"] == "Ready":  # type: ignore[index]
            break
    secret = workloads.workload_name("r-trial")
    held = cluster.api.secret_data(NS, secret)["token"]
    assert [s.token for s in lab.sessions.sessions()] == [held]
    # A new operator process: its gateway has no sessions; the agent still holds its token.
    fresh = SessionRegistry()
    second = driver(fresh)
    second.advance(cluster.get("trials", "r-trial"))  # type: ignore[arg-type]
    assert [s.token for s in fresh.sessions()] == [held]
    assert cluster.api.secret_data(NS, secret)["token"] == held
    assert cluster.get("trials", "r-trial")["status"]["phase"] == "Ready"  # type: ignore[index]
