"""Custom resources the API server let through (or never checked) stay contained.

The loopback API, like an API server whose CRDs were installed without their schemas, stores any
JSON. Each malformed object gets a condition of its own naming the field, in a bounded message;
the reconciles of every other object go on as before. Trials count for a run only through their
owner reference, and a spec change after a run started is refused whole.
"""

from __future__ import annotations

from typing import Any

import pytest
from operator_lab import FAST, NS, Cluster, agent, benchmark_run, new_lab

from itbench.operator.agent_submissions import reconcile_agent
from itbench.operator.benchmark_runs import RUN_LABEL, _Reconciler, delete_trials, trial_name
from itbench.operator.bodies import ADMITTED, MESSAGE_CHARS
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, BENCHMARK_RUNS, SCENARIOS, TRIALS
from itbench.operator.runtime import OperatorRuntime
from itbench.operator.scenarios import reconcile_scenario
from itbench.operator.trials import TrialDriver

SCENARIO = "cart-flagd-failure"
OTHER = "payment-failure"
GROUP, VERSION = "itbench.io", "v1alpha1"


def _runtime(cluster: Cluster) -> OperatorRuntime:
    lab = new_lab(cluster)
    return OperatorRuntime(
        api=cluster.api,
        config=FAST,
        environments=lab.environments,
        sessions=lab.sessions,
        evidence=lab.evidence,
    )


def _ready(cluster: Cluster, runtime: OperatorRuntime, *scenarios: str) -> None:
    cluster.apply_scenarios(*scenarios)
    for name in scenarios:
        reconcile_scenario(runtime, cluster.api.get(SCENARIOS, None, name))
    cluster.apply(agent("oracle", {"builtin": {"name": "oracle"}}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "oracle"))


def _create(cluster: Cluster, plural: str, body: dict[str, Any]) -> None:
    """Store a body as is (no schema on the loopback API, as on a server that skips it)."""
    cluster.api.custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural, body)


def _reconcile(runtime: OperatorRuntime, cluster: Cluster, name: str) -> dict[str, Any]:
    _Reconciler(runtime, cluster.api.get(BENCHMARK_RUNS, NS, name)).run()
    status: dict[str, Any] = cluster.api.get(BENCHMARK_RUNS, NS, name)["status"]
    return status


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_a_run_whose_spec_is_a_string_is_invalid_and_agents_still_reconcile(
    cluster: Cluster,
) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO)
    _create(
        cluster,
        BENCHMARK_RUNS,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "metadata": {"name": "s"}},
    )
    cluster.api.custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, BENCHMARK_RUNS, "s", {"spec": "oops"}
    )
    cluster.apply(agent("later", {"builtin": {"name": "null"}}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "later"))
    assert cluster.api.get(AGENT_SUBMISSIONS, NS, "later")["status"]["ready"] is True
    status = _reconcile(runtime, cluster, "s")
    assert status["phase"] == "Invalid"
    valid = _condition(status, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert "spec:" in valid["message"] and "dictionary" in valid["message"]


def test_a_malformed_and_a_foreign_trial_with_the_runs_label_are_not_counted(
    cluster: Cluster,
) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO)
    cluster.apply(benchmark_run("r", "oracle", [SCENARIO], trialsPerScenario=2, allowOracle=True))
    labels = {RUN_LABEL: "r"}
    _create(
        cluster,
        TRIALS,
        {"kind": "Trial", "metadata": {"name": "broken", "labels": labels}, "spec": "x"},
    )
    well_formed = {
        "runRef": {"name": "r"},
        "agentRef": {"name": "oracle"},
        "scenario": SCENARIO,
        "attempt": 0,
        "seed": 1,
    }
    foreign = {"kind": "Trial", "metadata": {"name": "foreign", "labels": labels}}
    _create(cluster, TRIALS, {**foreign, "spec": well_formed})
    # A foreign Trial that took the name the run will want, finished and "succeeded".
    squatter = trial_name("r", SCENARIO, 1)
    _create(
        cluster,
        TRIALS,
        {"kind": "Trial", "metadata": {"name": squatter, "labels": labels}, "spec": well_formed},
    )
    status = _reconcile(runtime, cluster, "r")
    assert status["phase"] == "Invalid"
    taken = _condition(status, "Valid")
    assert taken["reason"] == "TrialNameTaken" and squatter in taken["message"]
    cluster.api.delete(TRIALS, NS, squatter)
    status = _reconcile(runtime, cluster, "r")
    assert (status["phase"], status["totalTrials"], status["progress"]) == ("Running", 2, "0/2")
    for name in ("broken", "foreign"):
        trial = cluster.api.get(TRIALS, NS, name)
        assert ADMITTED not in (trial["metadata"].get("annotations") or {}), name
    # Deleting the run deletes its own Trials only.
    left = delete_trials(runtime, cluster.api.get(BENCHMARK_RUNS, NS, "r"))
    assert left == 2
    assert cluster.api.get(TRIALS, NS, "foreign") is not None
    assert cluster.api.get(TRIALS, NS, "broken") is not None


def test_an_orphan_trial_says_so_and_never_takes_an_environment(cluster: Cluster) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO)
    driver = TrialDriver(runtime)
    spec = {
        "runRef": {"name": "ghost"},
        "agentRef": {"name": "oracle"},
        "scenario": SCENARIO,
        "attempt": 0,
        "seed": 1,
    }
    # Hand-made, and even marked admitted: still no run owns it.
    meta = {"name": "orphan", "annotations": {ADMITTED: "true"}}
    _create(cluster, TRIALS, {"kind": "Trial", "metadata": meta, "spec": spec})
    cluster.apply(benchmark_run("real", "oracle", [SCENARIO]))
    run_uid = cluster.api.get(BENCHMARK_RUNS, NS, "real")["metadata"]["uid"]
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "controller": True}
    _create(
        cluster,
        TRIALS,
        {
            "kind": "Trial",
            "metadata": {
                "name": "ghost-owner",
                "ownerReferences": [{**owner, "name": "ghost", "uid": "u-1"}],
            },
            "spec": spec,
        },
    )
    _create(
        cluster,
        TRIALS,
        {
            "kind": "Trial",
            "metadata": {
                "name": "misowned",
                "ownerReferences": [{**owner, "name": "real", "uid": "not-" + run_uid}],
            },
            "spec": {**spec, "runRef": {"name": "real"}},
        },
    )
    expected = {
        "orphan": "no BenchmarkRun owns this Trial",
        "ghost-owner": "BenchmarkRun default/ghost (spec.runRef) does not exist",
        "misowned": "BenchmarkRun default/real (spec.runRef) does not own this Trial",
    }
    for name, words in expected.items():
        driver.advance(cluster.api.get(TRIALS, NS, name))
        status = cluster.api.get(TRIALS, NS, name)["status"]
        assert (status["phase"], status["reason"]) == ("Errored", "Orphaned"), name
        assert words in status["message"], status["message"]
        valid = _condition(status, "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "Orphaned")
        assert _condition(status, "Complete")["status"] == "True"
        assert "waiting for capacity" not in status["message"]
    assert len(runtime.environments) == 0 and runtime.environments.created == 0


def test_a_malformed_trial_is_errored_with_the_field_path_and_its_run_goes_on(
    cluster: Cluster,
) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO)
    driver = TrialDriver(runtime)
    _create(
        cluster,
        TRIALS,
        {"kind": "Trial", "metadata": {"name": "bad"}, "spec": {"attempt": "first"}},
    )
    cluster.api.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, TRIALS, "bad", {"status": "not a status"}
    )
    driver.advance(cluster.api.get(TRIALS, NS, "bad"))
    status = cluster.api.get(TRIALS, NS, "bad")["status"]
    assert (status["phase"], status["reason"]) == ("Errored", "InvalidSpec")
    assert "spec.attempt" in status["message"] and "spec.runRef" in status["message"]
    assert _condition(status, "Valid")["status"] == "False"


def test_a_spec_change_mid_run_is_refused_whole_and_cancel_still_goes_through(
    cluster: Cluster,
) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO, OTHER)
    cluster.apply(benchmark_run("frozen", "oracle", [SCENARIO], trialsPerScenario=2))
    status = _reconcile(runtime, cluster, "frozen")
    assert (status["phase"], status["totalTrials"]) == ("Running", 2)
    accepted = _condition(status, "SpecAccepted")
    assert accepted["status"] == "True"
    # Where the API server does not enforce the CRD's transition rule, the operator does.
    cluster.kubectl(
        "patch",
        "benchmarkrun",
        "frozen",
        "--type=merge",
        "-p",
        '{"spec":{"trialsPerScenario":5,"scenarios":{"names":["payment-failure"]}}}',
    )
    status = _reconcile(runtime, cluster, "frozen")
    assert (status["totalTrials"], status["scenarios"]) == (2, [SCENARIO])
    assert status["acceptedSpec"]["trialsPerScenario"] == 2
    refused = _condition(status, "SpecAccepted")
    assert (refused["status"], refused["reason"]) == ("False", "SpecFrozen")
    assert "spec.scenarios, spec.trialsPerScenario" in refused["message"]
    assert "refused whole" in refused["message"]
    names = {t["metadata"]["name"] for t in cluster.api.list_objects(TRIALS, NS)}
    assert names == {trial_name("frozen", SCENARIO, a) for a in range(2)}
    events = [e for e in cluster.events("frozen") if e["reason"] == "SpecFrozen"]
    assert len(events) == 1 and events[0]["type"] == "Warning"
    _reconcile(runtime, cluster, "frozen")
    assert len([e for e in cluster.events("frozen") if e["reason"] == "SpecFrozen"]) == 1
    # An invalid new spec is refused the same way; the run keeps going.
    cluster.kubectl(
        "patch", "benchmarkrun", "frozen", "--type=merge", "-p", '{"spec":{"concurrency":"x"}}'
    )
    status = _reconcile(runtime, cluster, "frozen")
    refused = _condition(status, "SpecAccepted")
    assert (refused["reason"], status["phase"]) == ("InvalidSpec", "Running")
    assert "spec.concurrency" in refused["message"]
    # Putting the spec back clears the refusal; cancel is applied.
    cluster.kubectl(
        "patch",
        "benchmarkrun",
        "frozen",
        "--type=merge",
        "-p",
        '{"spec":{"concurrency":1,"trialsPerScenario":2,'
        '"scenarios":{"names":["cart-flagd-failure"]},"cancel":true}}',
    )
    status = _reconcile(runtime, cluster, "frozen")
    assert _condition(status, "SpecAccepted")["status"] == "True"
    assert status["acceptedSpec"]["cancel"] is True
    cancelled = [
        t["metadata"]["name"]
        for t in cluster.api.list_objects(TRIALS, NS)
        if (t["metadata"].get("annotations") or {}).get("itbench.io/cancel") == "true"
    ]
    assert cancelled == [trial_name("frozen", SCENARIO, 0)], "the running trial is told to stop"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("image", "Example.org/UPPER CASE", "spec.runtime.image.image"),
        ("image", "ghcr.io/org/agent:", "spec.runtime.image.image"),
        ("cpu", "1.5.5", "spec.runtime.image.resources.requests.cpu"),
        ("memory", "-1Gi", "spec.runtime.image.resources.requests.memory"),
        ("memory", "3Gi>1Gi", "spec.runtime.image.resources.requests.memory"),
        ("order", "", "spec.runtime.image.resources.requests.memory"),
    ],
    ids=["uppercase-path", "empty-tag", "bad-cpu", "negative-memory", "junk-memory", "above-limit"],
)
def test_agent_images_and_quantities_are_checked_by_the_grammar(
    cluster: Cluster, field: str, value: str, path: str
) -> None:
    runtime = _runtime(cluster)
    image: dict[str, Any] = {"image": "ghcr.io/org/agent:1.0", "resources": {}}
    if field == "image":
        image["image"] = value
    elif field == "order":
        image["resources"] = {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}
    else:
        image["resources"] = {"requests": {field: value}}
    cluster.apply(agent("boxed", {"image": image}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "boxed"))
    status = cluster.api.get(AGENT_SUBMISSIONS, NS, "boxed")["status"]
    assert (status["phase"], status["ready"]) == ("Invalid", False)
    valid = _condition(status, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert f"{path}:" in valid["message"], valid["message"]


def test_good_images_and_quantities_are_ready(cluster: Cluster) -> None:
    runtime = _runtime(cluster)
    image = {
        "image": "registry.example.org:5000/team/agent_v2@sha256:" + "a" * 64,
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}},
    }
    cluster.apply(agent("boxed", {"image": image}))
    reconcile_agent(runtime, cluster.api.get(AGENT_SUBMISSIONS, NS, "boxed"))
    status = cluster.api.get(AGENT_SUBMISSIONS, NS, "boxed")["status"]
    assert status["ready"] is True and _condition(status, "Valid")["status"] == "True"


def test_a_huge_bad_value_reaches_conditions_and_events_only_as_an_excerpt(
    cluster: Cluster,
) -> None:
    runtime = _runtime(cluster)
    _ready(cluster, runtime, SCENARIO)
    huge = "Z" * 1_048_576
    body = benchmark_run("big", "oracle", [SCENARIO], environment={"type": huge})
    body["spec"][huge[:300]] = 1  # and an unknown key of 300 characters
    _create(cluster, BENCHMARK_RUNS, body)
    status = _reconcile(runtime, cluster, "big")
    message = _condition(status, "Valid")["message"]
    assert len(message) <= MESSAGE_CHARS
    assert "spec.environment.type" in message and "(1048576 characters)" in message
    (event,) = [e for e in cluster.events("big") if e["reason"] == "InvalidSpec"]
    assert len(event["message"]) <= MESSAGE_CHARS and "ZZZZ" in event["message"]
    assert len(str(cluster.api.get(BENCHMARK_RUNS, NS, "big")["status"])) < 8_000
