"""Simulator trials as Kubernetes Jobs (`environment.execution: job`) against the loopback API.

The operator creates one Job per Trial; the test plays the Job controller and the kubelet: it
runs the Job's command (`itbench trial run`) in a subprocess with a kubeconfig for the loopback
API, then writes the Job's status as the Job controller would. The results land in the Trials,
with the same scores as a run in the operator's process; a failed Job errors only its Trial,
naming it; a restarted operator creates no second Job.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_lab import (
    FAST,
    NS,
    Cluster,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)

from itbench.core.models.benchmark_run import Timeouts
from itbench.operator.jobs import (
    COMPONENT_LABEL,
    CREDENTIALS_DIR,
    JOB_FAILED,
    NO_TRIAL_IMAGE,
    deadline_seconds,
    job_name,
)

pytestmark = pytest.mark.asyncio

SCENARIO = "cart-flagd-failure"
IMAGE = "ghcr.io/itbench/itbench:test"
JOBS = replace(FAST, trial_image=IMAGE)
ITBENCH = str(Path(sys.executable).with_name("itbench"))
FINAL = ("Succeeded", "Failed", "Errored")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agents"


def _jobs(lab: Lab) -> list[dict[str, Any]]:
    return sorted(
        lab.cluster.server.objects("batch", "jobs", NS), key=lambda j: j["metadata"]["name"]
    )


def _phases(lab: Lab, run: str) -> list[str]:
    return [(t.get("status") or {}).get("phase", "") for t in trials_of(lab, run)]


def _set_job_status(lab: Lab, name: str, status: dict[str, Any]) -> None:
    lab.cluster.api.batch.patch_namespaced_job_status(name, NS, {"status": status})


def _run_pod_command(
    lab: Lab, job: dict[str, Any], kubeconfig: Path | None = None, mounts: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the Job's container command as its pod would, against the loopback API."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = [ITBENCH, *container["command"][1:], "--log-format", "text"]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(lab.cluster.kubeconfig.parent),
        "KUBECONFIG": str(kubeconfig or lab.cluster.kubeconfig),
    }
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    if mounts is not None:  # where this test put the files the kubelet would mount
        env["ITBENCH_TRIAL__CREDENTIALS_DIR"] = str(mounts)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


async def _play(
    lab: Lab, job: dict[str, Any], kubeconfig: Path | None = None, mounts: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Play a Job's pod to its end, then write the Job's status as the Job controller does."""
    done = await asyncio.to_thread(_run_pod_command, lab, job, kubeconfig, mounts)
    name = job["metadata"]["name"]
    if done.returncode == 0:
        _set_job_status(
            lab, name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        )
    else:
        _set_job_status(
            lab,
            name,
            {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            },
        )
    return done


def _ticks(handle: Any) -> float:
    """How many Trial reconciles an operator instance has finished."""
    for family in handle.runtime.metrics.registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_count") and sample.labels.get("kind") == "Trial":
                return float(sample.value)
    return 0.0


def _sample(handle: Any, name: str, **labels: str) -> float:
    """A sample of an operator instance's metrics (0 when absent)."""
    for family in handle.runtime.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def _scores(lab: Lab, run: str) -> dict[int, Any]:
    return {t["spec"]["attempt"]: t["status"]["scores"] for t in trials_of(lab, run)}


async def _oracle(lab: Lab) -> None:
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))


def _job_run(name: str, trials: int = 2, **spec: Any) -> dict[str, Any]:
    return benchmark_run(
        name,
        "oracle",
        [SCENARIO],
        allowOracle=True,
        trialsPerScenario=trials,
        seed=11,
        environment={"type": "simulator", "execution": "job"},
        concurrency=trials,
        **spec,
    )


async def test_trials_run_as_jobs_and_score_as_in_process(lab: Lab) -> None:
    operator = await lab.start(JOBS)
    await _oracle(lab)
    lab.cluster.apply(_job_run("in-jobs"))
    await until(lambda: len(_jobs(lab)) == 2, what="one Job per Trial")
    # The operator creates a Trial's Job, then writes the Trial's status saying it waits for it.
    await until(
        lambda: (
            [(t.get("status") or {}).get("reason") for t in trials_of(lab, "in-jobs")]
            == ["WaitingForJob"] * 2
        ),
        what="both Trials waiting for their Jobs",
    )
    trials = {t["metadata"]["name"]: t for t in trials_of(lab, "in-jobs")}
    jobs = _jobs(lab)
    assert lab.environments.created == 0, "no trial ran in the operator's process"
    for job in jobs:
        trial = trials[job["metadata"]["name"].removesuffix("-run")]
        assert job["metadata"]["name"] == job_name(trial["metadata"]["name"])
        [owner] = job["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "Trial",
            trial["metadata"]["uid"],
            True,
        )
        assert job["metadata"]["labels"]["itbench.io/run"] == "in-jobs"
        # What the chart's NetworkPolicy for trial pods selects.
        assert job["spec"]["template"]["metadata"]["labels"][COMPONENT_LABEL] == "trial"
        spec = job["spec"]
        assert spec["backoffLimit"] == 0
        assert spec["activeDeadlineSeconds"] == deadline_seconds(Timeouts()) == 2400
        pod = spec["template"]["spec"]
        assert pod["serviceAccountName"] == "itbench-trial"
        assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"]
        [container] = pod["containers"]
        assert container["image"] == IMAGE
        assert container["command"] == [
            *("itbench", "trial", "run"),
            *("--namespace", NS, "--name", trial["metadata"]["name"]),
        ]
        assert container["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
        assert container["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    sa = lab.cluster.server.get("", "serviceaccounts", NS, "itbench-trial")
    assert sa is not None, "the operator ensures the trial ServiceAccount"

    for done in await asyncio.gather(*(_play(lab, job) for job in jobs)):  # pods run side by side
        assert done.returncode == 0, done.stderr
        assert "Succeeded (TasksPassed)" in done.stdout
    await until(
        lambda: status_of(lab, "benchmarkruns", "in-jobs").get("phase") == "Succeeded",
        what="the job-executed run to finish",
    )
    run = status_of(lab, "benchmarkruns", "in-jobs")
    assert (run["finishedTrials"], run["summary"]["succeeded"], run["summary"]["errored"]) == (
        2,
        2,
        0,
    )
    assert run["reportRef"].startswith("configmap/")
    for trial in trials_of(lab, "in-jobs"):
        status = trial["status"]
        assert status["phase"] == "Succeeded", status["message"]
        assert "Provisioning" in [e["phase"] for e in status["timeline"]]
        cm = status["trajectoryRef"].removeprefix("configmap/")
        data = lab.cluster.api.config_map(NS, cm)
        assert data is not None and '"calls"' in data["trajectory.json"]

    # The operator's metrics count the trials its Jobs' pods ran, as they count its own.
    outcomes = "itbench_operator_trial_outcomes_total"
    succeeded = {"phase": "Succeeded", "reason": "TasksPassed"}
    await until(
        lambda: _sample(operator, outcomes, **succeeded) == 2,
        what="the operator to count both Job trials' outcomes",
    )
    assert _sample(operator, "itbench_operator_trials", phase="Succeeded") == 2
    assert _sample(operator, "itbench_operator_trials", phase="Queued") == 0
    passed = _sample(
        operator, "itbench_operator_trial_task_results_total", task="mitigation", result="passed"
    )
    assert passed == 2

    # The same seed in the operator's process: the same scores, trial by trial.
    process = _job_run("in-process")
    process["spec"]["environment"] = {"type": "simulator", "execution": "process"}
    lab.cluster.apply(process)
    await until(
        lambda: status_of(lab, "benchmarkruns", "in-process").get("phase") in FINAL,
        what="the in-process run to finish",
    )
    assert len(_jobs(lab)) == 2, "an in-process run creates no Job"
    assert _scores(lab, "in-process") == _scores(lab, "in-jobs")
    await until(
        lambda: _sample(operator, outcomes, **succeeded) == 4,
        what="the in-process trials counted beside the Job trials",
    )
    assert _sample(operator, "itbench_operator_trials", phase="Succeeded") == 4, "each once"
    assert [t["spec"]["seed"] for t in trials_of(lab, "in-process")] == [
        t["spec"]["seed"] for t in trials_of(lab, "in-jobs")
    ]


async def test_a_command_agent_in_a_job_gets_its_credentials_as_mounted_files(
    lab: Lab, tmp_path: Path
) -> None:
    await lab.start(JOBS)
    await ready_scenarios(lab, SCENARIO)
    lab.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm", "namespace": NS},
            "stringData": {"MODEL_API_KEY": "s3cret"},
        }
    )
    runtime = {
        "command": {
            "command": [sys.executable, str(FIXTURES / "sdk_agent.py")],
            "env": [{"name": "ITBENCH_AGENT__REQUIRE_ENV", "value": "MODEL_API_KEY"}],
            "credentialsSecretRef": {"name": "llm"},
            "wallSeconds": 120,
        }
    }
    await ready_agent(lab, agent("cmd", runtime))
    run = _job_run("with-cmd", trials=1)
    run["spec"]["agentRef"] = {"name": "cmd"}
    lab.cluster.apply(run)
    await until(lambda: len(_jobs(lab)) == 1, what="the Trial's Job")
    [job] = _jobs(lab)
    pod = job["spec"]["template"]["spec"]
    assert {"name": "credentials", "secret": {"secretName": "llm"}} in pod["volumes"]
    mount = {"name": "credentials", "mountPath": f"{CREDENTIALS_DIR}/llm", "readOnly": True}
    assert mount in pod["containers"][0]["volumeMounts"]
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "MODEL_API_KEY").write_text("s3cret", encoding="utf-8")
    done = await _play(lab, job, mounts=tmp_path)
    assert done.returncode == 0, done.stderr
    [trial] = trials_of(lab, "with-cmd")
    status = trial["status"]
    assert status["reason"] in ("TasksPassed", "TasksFailed"), status["message"]
    assert status["scores"]["diagnosis"]["passed"] is True, "the command ran with its key"


async def test_a_failed_job_errors_its_trial_naming_the_job(lab: Lab) -> None:
    await lab.start(JOBS)
    await _oracle(lab)
    lab.cluster.apply(_job_run("dies"))
    await until(lambda: len(_jobs(lab)) == 2, what="one Job per Trial")
    crashed, late = _jobs(lab)
    name = crashed["metadata"]["name"]
    pod = f"{name}-x7k2p"  # the pod the Job controller made, as the kubelet left it
    lab.cluster.api.core.create_namespaced_pod(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": NS, "labels": {"job-name": name}},
            "spec": {"containers": [{"name": "trial", "image": IMAGE}]},
        },
    )
    terminated = {"exitCode": 137, "reason": "OOMKilled", "message": ""}
    lab.cluster.api.core.patch_namespaced_pod_status(
        pod,
        NS,
        {
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "trial",
                        "image": IMAGE,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": terminated},
                    }
                ],
            }
        },
    )
    _set_job_status(
        lab,
        name,
        {
            "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        },
    )
    _set_job_status(
        lab,
        late["metadata"]["name"],
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        },
    )
    await until(lambda: _phases(lab, "dies") == ["Errored", "Errored"], what="both Errored")
    by_job = {job_name(t["metadata"]["name"]): t["status"] for t in trials_of(lab, "dies")}
    oom = by_job[name]
    assert oom["reason"] == JOB_FAILED
    assert f"Job {NS}/{name} failed before the trial ended" in oom["message"]
    assert f"pod {name}-x7k2p exited 137 (OOMKilled)" in oom["message"]
    deadline = by_job[late["metadata"]["name"]]
    assert deadline["reason"] == JOB_FAILED
    assert f"Job {NS}/{late['metadata']['name']}" in deadline["message"]
    assert "DeadlineExceeded" in deadline["message"]
    await until(
        lambda: status_of(lab, "benchmarkruns", "dies").get("phase") == "Errored",
        what="the run to end rather than hang",
    )
    assert status_of(lab, "benchmarkruns", "dies")["summary"]["errored"] == 2


async def test_a_restarted_operator_neither_repeats_a_job_nor_loses_its_result(lab: Lab) -> None:
    first = await lab.start(JOBS)
    await _oracle(lab)
    lab.cluster.apply(_job_run("restart", trials=1))
    await until(lambda: len(_jobs(lab)) == 1, what="the Trial's Job")
    [job] = _jobs(lab)
    await first.kill()
    done = await _play(lab, job)  # the pod runs the trial while no operator runs
    assert done.returncode == 0, done.stderr
    [written] = trials_of(lab, "restart")
    assert written["status"]["phase"] == "Succeeded"
    await lab.start(JOBS)
    await until(
        lambda: status_of(lab, "benchmarkruns", "restart").get("phase") == "Succeeded",
        what="the run to finish after the restart",
    )
    [again] = _jobs(lab)
    assert again["metadata"]["uid"] == job["metadata"]["uid"], "no second Job"
    [trial] = trials_of(lab, "restart")
    assert trial["status"]["scores"] == written["status"]["scores"]
    assert trial["status"]["timeline"] == written["status"]["timeline"]


async def test_a_restart_before_the_pod_runs_keeps_the_one_job(lab: Lab) -> None:
    first = await lab.start(JOBS)
    await _oracle(lab)
    lab.cluster.apply(_job_run("early", trials=1))
    await until(lambda: len(_jobs(lab)) == 1, what="the Trial's Job")
    [job] = _jobs(lab)
    await first.kill()
    second = await lab.start(JOBS)
    await until(
        lambda: _ticks(second) >= 5,
        what="the new operator to tick the waiting Trial",
    )
    [again] = _jobs(lab)
    assert again["metadata"]["uid"] == job["metadata"]["uid"], "no second Job"
    done = await _play(lab, again)
    assert done.returncode == 0, done.stderr
    await until(
        lambda: status_of(lab, "benchmarkruns", "early").get("phase") == "Succeeded",
        what="the run to finish",
    )


async def test_jobs_refuse_what_a_trial_pod_cannot_run(lab: Lab) -> None:
    await lab.start(FAST)  # no --trial-image
    await _oracle(lab)
    image = {"image": {"image": "registry.example/agent:1"}}
    await ready_agent(lab, agent("boxed", image))
    boxed = _job_run("boxed")
    boxed["spec"]["agentRef"] = {"name": "boxed"}
    lab.cluster.apply(boxed)
    on_cluster = _job_run("on-cluster")
    on_cluster["spec"]["environment"] = {"type": "cluster", "execution": "job"}
    lab.cluster.apply(on_cluster)
    lab.cluster.apply(_job_run("no-image", trials=1))
    await until(
        lambda: (
            status_of(lab, "benchmarkruns", "boxed").get("phase") == "Invalid"
            and status_of(lab, "benchmarkruns", "on-cluster").get("phase") == "Invalid"
            and _phases(lab, "no-image") == ["Errored"]
        ),
        what="the refusals",
    )
    [valid] = [
        c for c in status_of(lab, "benchmarkruns", "boxed")["conditions"] if c["type"] == "Valid"
    ]
    assert valid["reason"] == "ExecutionUnsupported"
    assert "AgentSubmission default/boxed is an image agent" in valid["message"]
    [valid] = [
        c
        for c in status_of(lab, "benchmarkruns", "on-cluster")["conditions"]
        if c["type"] == "Valid"
    ]
    assert "execution: job runs simulator trials only" in valid["message"]
    [trial] = trials_of(lab, "no-image")
    assert trial["status"]["reason"] == NO_TRIAL_IMAGE
    assert "--trial-image" in trial["status"]["message"]
    assert _jobs(lab) == []


CHART = Path(__file__).resolve().parents[3] / "charts" / "itbench"
HELM_CACHE = Path.home() / ".cache" / "itbench" / "tools" / "helm-4.1.4" / "helm"
POD_TOKEN = "trial-pod"


def _helm() -> str:
    found = shutil.which("helm") or (str(HELM_CACHE) if HELM_CACHE.is_file() else None)
    if found is None:
        pytest.skip("helm is not on PATH (tests/integration/test_chart.py fetches it)")
    return found


def _calls(lab: Lab) -> list[tuple[str, str, str, str, bool]]:
    """Record the requests made with the pod's token: (method, group, resource, sub, namespaced)."""
    server = lab.cluster.server
    seen: list[tuple[str, str, str, str, bool]] = []
    route = server._route

    async def recording(request: Any) -> Any:
        if request.headers.get("Authorization") == f"Bearer {POD_TOKEN}":
            parts = [p for p in request.path.split("/") if p]
            group = "" if parts[0] == "api" else parts[1]
            rest = parts[2:] if parts[0] == "api" else parts[3:]
            namespaced = len(rest) >= 2 and rest[0] == "namespaces"
            rest = rest[2:] if namespaced else rest
            method = request.method
            if method == "GET":
                method = "LIST" if len(rest) == 1 else "GET"
            sub = rest[2] if len(rest) > 2 else ""
            seen.append((method, group, rest[0], sub, namespaced))
        return await route(request)

    server._route = recording  # type: ignore[method-assign]
    return seen


VERBS = {"GET": "get", "LIST": "list", "POST": "create", "PUT": "update", "PATCH": "patch"}


async def test_the_chart_grants_a_trial_pod_what_it_calls_and_no_more(
    lab: Lab, tmp_path: Path
) -> None:
    helm = _helm()
    await lab.start(JOBS)
    await _oracle(lab)
    lab.cluster.apply(_job_run("audited", trials=1))
    await until(lambda: len(_jobs(lab)) == 1, what="the Trial's Job")
    config = json.loads(lab.cluster.kubeconfig.read_text(encoding="utf-8"))
    config["users"][0]["user"]["token"] = POD_TOKEN
    pod_config = tmp_path / "pod-kubeconfig"
    pod_config.write_text(json.dumps(config), encoding="utf-8")
    calls = _calls(lab)
    done = await _play(lab, _jobs(lab)[0], kubeconfig=pod_config)
    assert done.returncode == 0, done.stderr
    used = {(VERBS[m], g, f"{r}/{s}" if s else r, ns) for m, g, r, s, ns in calls}
    assert ("patch", "itbench.io", "trials/status", True) in used
    assert ("create", "", "configmaps", True) in used, "the pod stores the trajectory"

    show = ["--show-only", "templates/trial-jobs.yaml"]
    rendered = await asyncio.to_thread(
        subprocess.run,
        [helm, "template", "bench", str(CHART), "--namespace", NS, *show],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    role = by_kind[("Role", "bench-itbench-trial")]
    cluster_role = by_kind[("ClusterRole", "bench-itbench-trial-scenarios")]
    binding = by_kind[("RoleBinding", "bench-itbench-trial")]
    account = {"kind": "ServiceAccount", "name": "itbench-trial", "namespace": NS}
    assert binding["subjects"] == [account]
    assert by_kind[("ClusterRoleBinding", "bench-itbench-trial-scenarios")]["subjects"] == [account]
    granted = {
        (verb, group, resource, True)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    } | {
        (verb, group, resource, False)
        for rule in cluster_role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert used <= granted, f"calls the chart does not allow: {sorted(used - granted)}"
    unused = granted - used
    assert not unused - {("update", "", "configmaps", True)}, (
        "every right is used (update: a trajectory stored again after a retry)"
    )
    assert not any(r == "secrets" for _, _, r, _ in granted), "no Secret, not even its own"


async def test_trial_run_names_a_missing_trial_and_a_bad_kubeconfig(cluster: Cluster) -> None:
    def trial_run(kubeconfig: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ITBENCH, "trial", "run", "--namespace", NS, "--name", "nope", "--log-format", "text"],
            env={"PATH": os.environ.get("PATH", ""), "KUBECONFIG": kubeconfig},
            capture_output=True,
            text=True,
            timeout=120,
        )

    missing, unusable = await asyncio.gather(
        asyncio.to_thread(trial_run, str(cluster.kubeconfig)),
        asyncio.to_thread(trial_run, "/nonexistent/kubeconfig"),
    )
    assert missing.returncode == 1
    assert f"Trial {NS}/nope does not exist" in missing.stderr
    assert unusable.returncode == 2
    assert "--kubeconfig /nonexistent/kubeconfig: cannot reach the API" in unusable.stderr
