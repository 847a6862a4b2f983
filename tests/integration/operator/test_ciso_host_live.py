"""The RHEL9 class on a live cluster, through the real client against the loopback API: the
platform creates an evidence ConfigMap, NetworkPolicy and Pod per variant in its evaluation
namespace, waits for each Pod, reads what it printed and removes everything it made.

No kubelet runs here: `Kubelet` plays its part. When an evidence Pod appears it rebuilds the
Pod's view from the ConfigMap the Pod mounts (the host state the shims read, the runner and the
collection at their mount paths), runs the Pod's command for real, the platform's runner
included, in the local evidence sandbox (real bash, Python and Ansible over the same rendered
files and shims), keeps the output as the Pod's log and marks the Pod Succeeded. Where it
differs from a node: the machine's `ansible-playbook` and Python stand in for the image's, and
a NetworkPolicy is not enforced (the sandbox has no network at all). The loopback API does not
serve `pods/log`, so the evaluator's log reader is injected and reads the stand-in's logs (the
real reader is exercised by the `e2e` test in tests/e2e/test_ciso_host_kind.py).
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from operator_lab import Cluster

from agents.ciso_reference import solutions
from agents.ciso_reference.agent import control_setting
from itbench.catalog_files import load_variants
from itbench.ciso import host_pod, sandbox
from itbench.ciso.cluster import COUNTERPART_PREFIX, LiveEvaluator, Rest
from itbench.core.ciso import host as host_model
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
)
from itbench.core.models.scenario import Scenario

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "otel-demo"
RHEL9 = sorted(
    p.parent.name for p in (ROOT / "scenarios" / "ciso").glob("ciso-rhel9-*/scenario.yaml")
)
CLUSTER_SAMPLE = (
    "ciso-rhel9-sshd-root-login",  # the Ansible playbook reference
    "ciso-rhel9-shadow-permissions",  # the script reference, a file only root may read
    "ciso-rhel9-auditd-service",  # the script reference, a command the host's shim answers
)
"""The RHEL9 references run through evidence Pods here: each collection kind, a root-only file
and a shimmed command (the references share one script and one playbook; every scenario's
reference is scored on both variants in tests/integration/agents/test_ciso_reference.py)."""
NEEDS_SANDBOX = pytest.mark.skipif(
    bool(sandbox.sandbox_problem()), reason=f"no evidence sandbox: {sandbox.sandbox_problem()}"
)
STAND_IN_DIR = "/tmp/itbench-kubelet"
SETTLE_SECONDS = 600.0
"""Real time the stand-in may take for one Pod before a test gives up on it (a hang guard)."""


def _heredoc(path: str, text: str) -> str:
    end = f"ITBENCH_EOF_{secrets.token_hex(6)}"
    return f"cat > {shlex.quote(path)} <<'{end}'\n{text}\n{end}\n"


@dataclass
class Kubelet:
    """A node's part for evidence Pods, in a thread: each new Pod is run once in the local
    sandbox, its output kept as its log, its status set to what the container's end was."""

    rest: Rest
    logs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    ran: list[dict[str, Any]] = field(default_factory=list)
    _done: set[tuple[str, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _pending(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.rest.items("/api/v1/pods")
            if (p["metadata"]["namespace"], p["metadata"]["name"]) not in self._done
        ]

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pod in self._pending():
                self._run(pod)
                with self._changed:
                    self._done.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
                    self._changed.notify_all()
            self._stop.wait(0.02)

    def settle(self, _seconds: float) -> None:
        """The evaluator's wait: returns once every Pod that exists has ended."""
        with self._changed:
            self._changed.wait_for(lambda: not self._pending(), timeout=SETTLE_SECONDS)

    def _run(self, pod: dict[str, Any]) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        spec = pod["spec"]
        (container,) = spec["containers"]
        volume = next(v for v in spec["volumes"] if "configMap" in v)
        cm = self.rest.call(
            "GET", f"/api/v1/namespaces/{ns}/configmaps/{volume['configMap']['name']}"
        )
        assert cm is not None
        mounted = {
            m["mountPath"]: cm["data"][m["subPath"]]
            for m in container["volumeMounts"]
            if m["name"] == volume["name"]
        }
        state = json.loads(mounted[f"{host_pod.TWIN_DIR}/state.json"])
        view = sandbox.EnvironmentView(state["namespace"], state["objects"], state["host"])
        env = {e["name"]: e["value"] for e in container["env"]}
        source = env["COLLECTION_SOURCE"]
        bash, runner, mark, limit, *argv = container["command"]
        assert (bash, runner) == ("/bin/bash", host_pod.RUNNER)
        if argv[0] == "ansible-playbook":
            # This machine's Ansible stands in for the image's (its virtual environment by its
            # real path, which the sandbox binds).
            venv = Path(sys.prefix).resolve() / "bin"
            argv = [str(venv / "python"), str(venv / "ansible-playbook"), *argv[1:]]
            env["ANSIBLE_PYTHON_INTERPRETER"] = str(venv / "python")
        env["COLLECTION_SOURCE"] = f"{STAND_IN_DIR}/{Path(source).name}"
        # One compound command, read whole before it runs: the runner copies the collection
        # over the sandbox's own /run/collection/collect.sh, which is this script.
        script = (
            "{\n"
            f"mkdir -p {STAND_IN_DIR}\n"
            + _heredoc(f"{STAND_IN_DIR}/run.sh", mounted[runner])
            + _heredoc(env["COLLECTION_SOURCE"], mounted[source])
            + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
            + f"bash {STAND_IN_DIR}/run.sh {shlex.join([mark, limit, *argv])}"
            + f" > {STAND_IN_DIR}/log 2>&1\n"
            # The log leaves the sandbox as its evidence (the collection's own evidence file
            # is in the log by then).
            + f"rm -f {sandbox.EVIDENCE}\n"
            + "python3 -I -S -c 'import json, sys; sys.stdout.write(json.dumps(open("
            + f'"{STAND_IN_DIR}/log", encoding="utf-8", errors="replace").read()))\''
            + f" > {sandbox.EVIDENCE}\n"
            + "exit $?\n}\n"
        )
        result = sandbox.run_collection(
            EvidenceCollection(kind=CollectionKind.SCRIPT, content=script),
            view,
            timeout_seconds=float(limit) + 120,
        )
        self.ran.append({"pod": pod, "mounted": mounted, "result": result})
        if result.ok and isinstance(result.evidence, str):
            self.logs[(ns, name)] = result.evidence.encode()
            phase, code = "Succeeded", 0
        else:
            self.logs[(ns, name)] = (result.problem + result.stdout + result.stderr).encode()
            phase, code = "Failed", 1
        self.rest.call(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            {
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {
                            "name": container["name"],
                            "state": {"terminated": {"exitCode": code, "reason": "Completed"}},
                        }
                    ],
                }
            },
        )

    def read_log(self, _rest: Rest, namespace: str, name: str, limit_bytes: int) -> bytes:
        """The evaluator's log reader: the stand-in's logs, first `limit_bytes`."""
        return self.logs.get((namespace, name), b"")[:limit_bytes]


@pytest.fixture
def rest(cluster: Cluster) -> Rest:
    api = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig))
    return Rest(api)


@pytest.fixture
def kubelet(rest: Rest) -> Iterator[Kubelet]:
    node = Kubelet(rest)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def _evaluator(rest: Rest, kubelet: Kubelet, timeout: float = 60.0) -> LiveEvaluator:
    return LiveEvaluator(
        rest,
        NAMESPACE,
        collection_timeout=timeout,
        sleep=kubelet.settle,
        salt="h",
        host_log=kubelet.read_log,
    )


def _leftovers(rest: Rest) -> list[str]:
    out = [
        f"Namespace/{n['metadata']['name']}"
        for n in rest.items("/api/v1/namespaces")
        if n["metadata"]["name"].startswith(COUNTERPART_PREFIX)
    ]
    for plural, base in (
        ("pods", "/api/v1"),
        ("configmaps", "/api/v1"),
        ("networkpolicies", "/apis/networking.k8s.io/v1"),
    ):
        out += [
            f"{plural}/{o['metadata']['name']}"
            for o in rest.items(f"{base}/{plural}")
            if o["metadata"]["name"].startswith(COUNTERPART_PREFIX)
        ]
    return out


def _scenario(name: str) -> Scenario:
    variants, problems = load_variants(ROOT / "scenarios" / "ciso" / name / "scenario.yaml")
    assert variants is not None, problems
    return variants.instances[0].scenario


def _reference(scenario: Scenario) -> ComplianceSubmission:
    setting = control_setting(scenario.spec.description)
    playbook = setting in solutions.PLAYBOOK_SETTINGS
    return ComplianceSubmission(
        rego=solutions.rego_module(solutions.REGO_HOST[setting]),
        collection=EvidenceCollection(
            kind=CollectionKind.PLAYBOOK if playbook else CollectionKind.SCRIPT,
            content=solutions.SSHD_PLAYBOOK if playbook else solutions.HOST_SCRIPT,
        ),
    )


def test_the_cluster_sample_covers_every_collection_the_rhel9_references_use() -> None:
    kinds = {_reference(_scenario(n)).collection.kind for n in RHEL9}  # type: ignore[union-attr]
    sampled = {_reference(_scenario(n)).collection.kind for n in CLUSTER_SAMPLE}  # type: ignore[union-attr]
    assert set(CLUSTER_SAMPLE) <= set(RHEL9) and sampled == kinds


@NEEDS_SANDBOX
@pytest.mark.parametrize("name", CLUSTER_SAMPLE)
def test_the_rhel9_references_pass_on_both_variants_in_evidence_pods(
    rest: Rest, kubelet: Kubelet, name: str
) -> None:
    scenario = _scenario(name)
    evaluation = _evaluator(rest, kubelet).evaluate(scenario, _reference(scenario))
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    assert [v.variant for v in evaluation.variants] == ["trial", "counterpart"]
    assert all(v.evidence_bytes > 0 and not v.problem for v in evaluation.variants)
    # Both variants ran in the cluster, in the evaluation's namespace, as the platform's Pods.
    pods = [r["pod"]["metadata"] for r in kubelet.ran]
    assert [p["name"] for p in pods] == [
        f"{p['namespace']}-{v}" for p, v in zip(pods, ("trial", "counterpart"), strict=True)
    ]
    assert all(p["namespace"].startswith(COUNTERPART_PREFIX) for p in pods)
    assert _leftovers(rest) == []


@NEEDS_SANDBOX
def test_the_evidence_pod_shows_each_variants_own_host(rest: Rest, kubelet: Kubelet) -> None:
    scenario = _scenario("ciso-rhel9-sshd-root-login")
    _evaluator(rest, kubelet).evaluate(scenario, _reference(scenario))
    configs = [r["mounted"]["/etc/ssh/sshd_config"] for r in kubelet.ran]
    assert len(configs) == 2 and configs[0] != configs[1]
    assert {"PermitRootLogin no" in c for c in configs} == {True, False}


def _script(content: str) -> ComplianceSubmission:
    return ComplianceSubmission(
        rego=solutions.rego_module(solutions.REGO_HOST["sshd-root-login"]),
        collection=EvidenceCollection(kind=CollectionKind.SCRIPT, content=content),
    )


FAILING = {
    "writes": (
        "echo 'PermitRootLogin no' >> /etc/ssh/sshd_config\necho '{}' > \"$ITBENCH_EVIDENCE\"\n",
        "tried to write to the environment",
        "Read-only file system",
    ),
    "reaches the network": (
        "python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), 3)\"\n"
        "echo '{}' > \"$ITBENCH_EVIDENCE\"\n",
        "tried to reach the network",
        "Network is unreachable",
    ),
    "never ends": ("sleep 600\n", "did not finish within 3 s", ""),
    "prints too much": (
        "while :; do echo 0123456789abcdef0123456789abcdef; done\n",
        "printed more than 1024 KiB",
        "",
    ),
    "leaves no evidence": ("true\n", "left no evidence", ""),
}


@NEEDS_SANDBOX
@pytest.mark.parametrize("case", sorted(FAILING))
def test_a_collection_that_breaks_the_rules_fails_with_its_reason_on_the_cluster(
    rest: Rest, kubelet: Kubelet, case: str
) -> None:
    content, reason, sign = FAILING[case]
    scenario = _scenario("ciso-rhel9-sshd-root-login")
    evaluation = _evaluator(rest, kubelet, timeout=3.0).evaluate(scenario, _script(content))
    assert not evaluation.platform_error
    assert len(evaluation.variants) == 2
    for variant in evaluation.variants:
        assert variant.problem.startswith("CollectionFailed: "), variant.problem
        assert reason in variant.problem
        assert sign in variant.problem
        assert variant.verdicts == []
    assert not score_compliance(evaluation, scenario, ttp=1.0).passed
    assert _leftovers(rest) == []


def test_an_evidence_pod_that_cannot_start_is_the_platforms_failure_and_cleans_up(
    rest: Rest,
) -> None:
    images: set[str] = set()

    def image_missing(_seconds: float) -> None:
        for pod in rest.items("/api/v1/pods"):
            meta = pod["metadata"]
            images.add(pod["spec"]["containers"][0]["image"])
            rest.call(
                "PATCH",
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                {
                    "status": {
                        "phase": "Pending",
                        "containerStatuses": [
                            {
                                "name": "collect",
                                "state": {
                                    "waiting": {
                                        "reason": "ImagePullBackOff",
                                        "message": "Back-off pulling image",
                                    }
                                },
                            }
                        ],
                    }
                },
            )

    scenario = _scenario("ciso-rhel9-sshd-root-login")
    evaluator = LiveEvaluator(
        rest, NAMESPACE, sleep=image_missing, salt="i", host_image="nowhere/x:1"
    )
    evaluation = evaluator.evaluate(scenario, _reference(scenario))
    assert evaluation.platform_error
    for variant in evaluation.variants:
        assert "ImagePullBackOff" in variant.problem
        assert "is the image available to the cluster" in variant.problem
    assert images == {"nowhere/x:1"}, "the evaluator's configured image"
    assert _leftovers(rest) == []


@NEEDS_SANDBOX
def test_a_cluster_trials_trial_collection_runs_in_an_evidence_pod_over_its_host(
    cluster: Cluster, rest: Rest, kubelet: Kubelet
) -> None:
    from itbench.ciso.evaluate import twin_of
    from itbench.environments.kube.environment import ClusterEnvironment
    from itbench.environments.sim.twins import twin_for

    scenario = _scenario("ciso-rhel9-sshd-root-login")
    collection = EvidenceCollection(
        kind=CollectionKind.SCRIPT,
        content="sshd -T | python3 -c 'import json, sys; print(json.dumps(dict("
        'line.split(" ", 1) for line in sys.stdin.read().splitlines())))\'\n',
    )
    env = ClusterEnvironment(kubeconfig=cluster.kubeconfig, namespace=NAMESPACE)
    try:
        result = host_pod.collect_on(
            env, scenario, collection, sleep=kubelet.settle, read_log=kubelet.read_log
        )
    finally:
        env.close()
    assert result is not None and result.ok, result
    expected = host_model.sshd_effective(twin_of(scenario).host_state())
    assert result.evidence["permitrootlogin"] == expected["permitrootlogin"]
    [ran] = kubelet.ran
    assert ran["pod"]["metadata"]["name"].endswith("-try")
    assert _leftovers(rest) == []
    # A twin's trial has no cluster: the gateway runs it in the local sandbox.
    assert host_pod.collect_on(twin_for(scenario), scenario, collection) is None


@pytest.mark.parametrize(
    ("submission", "problem"),
    [
        (ComplianceSubmission(rego="package x\nthis is not rego\n"), "MissingCollection"),
        (
            ComplianceSubmission(
                rego="package x\nthis is not rego\n",
                collection=EvidenceCollection(kind=CollectionKind.SCRIPT, content="true\n"),
            ),
            "RegoCompile",
        ),
    ],
    ids=["no-collection", "rego-does-not-compile"],
)
def test_a_broken_artefact_is_named_before_any_evidence_pod_is_made(
    rest: Rest, kubelet: Kubelet, submission: ComplianceSubmission, problem: str
) -> None:
    scenario = _scenario("ciso-rhel9-sshd-root-login")
    evaluation = _evaluator(rest, kubelet).evaluate(scenario, submission)
    assert evaluation.problem.startswith(problem), evaluation.problem
    assert not evaluation.platform_error
    assert kubelet.ran == []
    assert _leftovers(rest) == []
