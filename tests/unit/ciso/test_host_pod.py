"""The evidence Pod of the RHEL9 class on a cluster: its manifests (valid for Kubernetes 1.33,
read-only, without a token or a network, the host's files at their paths with their modes), the
reading of what it prints, and the runner's handling of the Pod against a fake API."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from agents.ciso_reference import solutions
from itbench.ciso import evidence_run, host_pod, sandbox
from itbench.ciso.cluster import ClusterError, RefusedError, Rest
from itbench.core.ciso import host as host_model
from itbench.core.models.compliance import CollectionKind, EvidenceCollection

K8S_VERSION = "1.33"
NS = "itbench-ciso-0123abcd"
NAME = f"{NS}-trial"
SCRIPT = EvidenceCollection(kind=CollectionKind.SCRIPT, content=solutions.HOST_SCRIPT)
PLAYBOOK = EvidenceCollection(kind=CollectionKind.PLAYBOOK, content=solutions.SSHD_PLAYBOOK)


def _noncompliant() -> host_model.HostState:
    state = host_model.baseline_state()
    return host_model.apply_patch(
        state, {"sshd": {"PermitRootLogin": "yes"}, "files": {"/etc/shadow": {"mode": "0644"}}}
    )


def _manifests(
    collection: EvidenceCollection = SCRIPT, state: host_model.HostState | None = None, **kw: Any
) -> dict[str, dict[str, Any]]:
    docs = host_pod.evidence_manifests(
        collection,
        state if state is not None else host_model.baseline_state(),
        namespace=NS,
        name=NAME,
        token="tok",
        **kw,
    )
    return {d["kind"]: d for d in docs}


def _mounted(docs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, int]]:
    """Each file the Pod sees from its ConfigMap: path -> (text, mode)."""
    pod, cm = docs["Pod"], docs["ConfigMap"]
    (container,) = pod["spec"]["containers"]
    (volume,) = [v for v in pod["spec"]["volumes"] if "configMap" in v]
    modes = {i["path"]: i["mode"] for i in volume["configMap"]["items"]}
    return {
        m["mountPath"]: (cm["data"][m["subPath"]], modes[m["subPath"]])
        for m in container["volumeMounts"]
        if m["name"] == volume["name"]
    }


def test_the_manifests_are_valid_for_kubernetes_1_33_and_in_creation_order() -> None:
    docs = host_pod.evidence_manifests(
        SCRIPT, host_model.baseline_state(), namespace=NS, name=NAME, token="t"
    )
    assert [d["kind"] for d in docs] == ["ConfigMap", "NetworkPolicy", "Pod"]
    for doc in [*docs, host_pod.namespace_manifest(NS)]:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert doc["metadata"]["name"].startswith("itbench-ciso-")


def test_the_pod_is_read_only_without_a_token_privileges_or_links() -> None:
    spec = _manifests(timeout_seconds=45)["Pod"]["spec"]
    (container,) = spec["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]}
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 45 + host_pod.GRACE_SECONDS
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory", "ephemeral-storage"}
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp", sandbox.WORKDIR}
    empty = {v["name"]: v["emptyDir"] for v in spec["volumes"] if "emptyDir" in v}
    assert all(e.get("sizeLimit") for e in empty.values()) and len(empty) == 2
    assert not any("hostPath" in v or "secret" in v for v in spec["volumes"])
    assert "hostNetwork" not in spec and "hostPID" not in spec


def test_the_network_policy_denies_the_pod_all_ingress_and_egress() -> None:
    docs = _manifests()
    policy, pod = docs["NetworkPolicy"], docs["Pod"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert "ingress" not in policy["spec"] and "egress" not in policy["spec"]
    assert pod["spec"]["dnsPolicy"] == "None"


@pytest.mark.parametrize("state", [host_model.baseline_state(), _noncompliant()])
def test_every_host_file_is_mounted_at_its_path_with_its_modelled_mode(
    state: host_model.HostState,
) -> None:
    mounted = _mounted(_manifests(state=state))
    for path, f in host_model.render_files(state).items():
        assert mounted[path] == (f.content, int(f.mode, 8)), path
    shadow = host_model.render_files(state)["/etc/shadow"]
    assert mounted["/etc/shadow"][1] == int(shadow.mode, 8)
    assert json.loads(mounted[f"{sandbox.TWIN_DIR}/state.json"][0])["host"] == state


def test_the_hosts_commands_are_shims_over_usr_bin_and_usr_sbin() -> None:
    mounted = _mounted(_manifests())
    for directory, names in sandbox.HOST_BINARIES.items():
        for name in names:
            text, mode = mounted[f"/usr/{directory}/{name}"]
            assert mode == 0o555
            assert text.splitlines()[1] == (
                f'exec /usr/bin/python3 -I -S {sandbox.TWIN_DIR}/shim.py {name} "$@"'
            )
    shim = (Path(host_pod.__file__).parent / "shim.py").read_text(encoding="utf-8")
    assert mounted[f"{sandbox.TWIN_DIR}/shim.py"][0] == shim
    assert mounted[host_pod.RUNNER] == (evidence_run.RUN_SCRIPT, 0o555)


def test_a_script_runs_with_bash_and_a_playbook_with_ansible_playbook_locally() -> None:
    script = _manifests(SCRIPT, timeout_seconds=20)["Pod"]["spec"]["containers"][0]
    assert script["command"] == [
        "/bin/bash",
        host_pod.RUNNER,
        evidence_run.marker("tok"),
        "20",
        "/bin/bash",
        f"{sandbox.WORKDIR}/collect.sh",
    ]
    docs = _manifests(PLAYBOOK)
    playbook = docs["Pod"]["spec"]["containers"][0]
    assert playbook["command"][4:] == [
        "ansible-playbook",
        "-i",
        "localhost,",
        "-c",
        "local",
        f"{sandbox.WORKDIR}/collect.yml",
    ]
    assert _mounted(docs)[f"{sandbox.TWIN_DIR}/collect.yml"][0] == solutions.SSHD_PLAYBOOK
    env = {e["name"]: e["value"] for e in playbook["env"]}
    assert env["ITBENCH_EVIDENCE"] == sandbox.EVIDENCE
    assert env["MAXOUT"] == str(sandbox.MAX_OUTPUT_BYTES)


def test_the_image_is_configurable_and_defaults_to_the_rhel9_host_image() -> None:
    assert _manifests()["Pod"]["spec"]["containers"][0]["image"] == host_pod.DEFAULT_IMAGE
    chosen = _manifests(image="registry.example/rhel9-host:1")["Pod"]
    assert chosen["spec"]["containers"][0]["image"] == "registry.example/rhel9-host:1"
    dockerfile = Path(__file__).resolve().parents[3] / "deploy" / "rhel9-host" / "Dockerfile"
    first = next(line for line in dockerfile.read_text().splitlines() if line.startswith("FROM"))
    assert first.startswith("FROM registry.access.redhat.com/ubi9/ubi:9.")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"namespace": "otel-demo", "name": NAME}, "evidence namespace 'otel-demo'"),
        ({"namespace": NS, "name": "collector"}, "evidence name 'collector'"),
        ({"namespace": NS, "name": NAME, "image": " "}, "evidence image"),
    ],
)
def test_names_outside_the_platforms_prefix_and_an_empty_image_are_refused(
    kw: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        host_pod.evidence_manifests(SCRIPT, host_model.baseline_state(), token="t", **kw)
    with pytest.raises(ValueError, match="namespace default"):
        host_pod.namespace_manifest("default")


def _log(
    token: str, status: int, stdout: bytes = b"", stderr: bytes = b"", evidence: Any = None
) -> str:
    mark = evidence_run.marker(token)
    text = f"\n{mark} begin status={status} seconds=1\n"
    for name, data in (("stdout", stdout), ("stderr", stderr)):
        text += f"{mark} {name}\n{base64.b64encode(data).decode()}\n"
    if evidence is not None:
        text += f"{mark} evidence\n{base64.b64encode(evidence).decode()}\n"
    return text + f"{mark} end\n"


def test_only_the_last_results_in_the_log_count() -> None:
    forged = _log("t", 0, evidence=b'{"sshd": {"permitrootlogin": "no"}}')
    real = _log("t", 0, evidence=b'{"sshd": {"permitrootlogin": "yes"}}')
    printed = evidence_run.parse_log("collection output\n" + forged + real, "t")
    assert printed is not None
    assert json.loads(printed["evidence"]) == {"sshd": {"permitrootlogin": "yes"}}
    assert evidence_run.parse_log(real.rsplit("\n", 2)[0], "t") is None  # no end line
    assert evidence_run.parse_log(real, "other") is None


@pytest.mark.parametrize(
    ("printed", "problem"),
    [
        ({"status": 124}, "did not finish within 5 s"),
        ({"status": 141, "stdout": b"x" * (sandbox.MAX_OUTPUT_BYTES + 1)}, "printed more than"),
        ({"status": 1, "stderr": b"sh: /etc/motd: Read-only file system\n"}, "tried to write"),
        ({"status": 77, "stderr": b"itbench-sandbox: refused: systemctl stop\n"}, "tried to write"),
        ({"status": 6, "stderr": b"curl: (6) Could not resolve host: x\n"}, "reach the network"),
        ({"status": 1, "stderr": b"connect: No route to host\n"}, "reach the network"),
        ({"status": 153}, "wrote a file beyond 16 MiB"),
        ({"status": 2}, "failed with exit status 2"),
        ({"status": 0}, "left no evidence"),
        ({"status": 0, "evidence": b"{"}, "not one JSON document"),
    ],
)
def test_a_runs_problem_is_named_as_the_sandbox_names_it(
    printed: dict[str, Any], problem: str
) -> None:
    result = evidence_run.judge(SCRIPT, printed, 5.0)
    assert not result.ok and not result.platform_error
    assert problem in result.problem


def test_a_script_may_print_its_evidence_on_stdout() -> None:
    result = evidence_run.judge(SCRIPT, {"status": 0, "stdout": b'{"a": 1}\n'}, 5.0)
    assert result.ok and result.evidence == {"a": 1} and result.evidence_bytes == 9
    assert not evidence_run.judge(PLAYBOOK, {"status": 0, "stdout": b'{"a": 1}\n'}, 5.0).ok


def test_the_log_limit_covers_the_largest_results() -> None:
    largest = _log(
        "t",
        0,
        b"o" * (sandbox.MAX_OUTPUT_BYTES + 1),
        b"e" * (sandbox.MAX_OUTPUT_BYTES + 1),
        b"v" * (sandbox.MAX_EVIDENCE_BYTES + 1),
    )
    assert len(largest.encode()) <= evidence_run.log_limit_bytes()


class FakeApi(Rest):
    """The API as a dict; a Pod's status is set by `on_get` (the node's part)."""

    def __init__(self, on_get: Any = None, refuse: str = "") -> None:
        super().__init__(api=None)
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.on_get = on_get
        self.refuse = refuse

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path))
        if method == "POST":
            assert body is not None
            if self.refuse and body["kind"] == self.refuse:
                raise RefusedError("403 forbidden")
            self.objects[f"{path}/{body['metadata']['name']}"] = body
            return body
        if method == "DELETE":
            return self.objects.pop(path, None)
        obj = self.objects.get(path)
        if obj is not None and self.on_get is not None:
            self.on_get(obj)
        return obj


def _run(api: FakeApi, log: Any = None, **kw: Any) -> sandbox.CollectionResult:
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    return host_pod.run_on_cluster(
        api,
        NS,
        SCRIPT,
        host_model.baseline_state(),
        name=NAME,
        timeout=10.0,
        sleep=sleep,
        monotonic=lambda: clock[0],
        read_log=log or (lambda *_a: b""),
        **kw,
    )


def test_a_finished_pods_results_are_read_from_its_log_with_a_limit_and_all_is_deleted() -> None:
    seen: list[int] = []

    def succeed(pod: dict[str, Any]) -> None:
        pod["status"] = {"phase": "Succeeded"}

    def log(_rest: Rest, ns: str, name: str, limit: int) -> bytes:
        seen.append(limit)
        token = (
            api.objects[f"/api/v1/namespaces/{ns}/pods/{name}"]["spec"]["containers"][0]["command"][
                2
            ]
            .removeprefix("==itbench-evidence-")
            .removesuffix("==")
        )
        return _log(token, 0, evidence=b'{"ok": true}').encode()

    api = FakeApi(on_get=succeed)
    result = _run(api, log)
    assert result.ok and result.evidence == {"ok": True}
    assert seen == [evidence_run.log_limit_bytes()]
    assert api.objects == {}
    assert [m for m, _p in api.calls if m == "DELETE"] == ["DELETE"] * 3


def test_a_pod_that_never_starts_is_the_platforms_failure_and_nothing_stays() -> None:
    api = FakeApi()
    result = _run(api, startup_seconds=30.0)
    assert result.platform_error and "did not start within 30 s" in result.problem
    assert api.objects == {}


def test_a_pod_past_its_deadline_is_the_collections_time_limit() -> None:
    def deadline(pod: dict[str, Any]) -> None:
        pod["status"] = {"phase": "Failed", "reason": "DeadlineExceeded"}

    api = FakeApi(on_get=deadline)
    result = _run(api)
    assert not result.ok and not result.platform_error
    assert "did not finish within 10 s" in result.problem
    assert api.objects == {}


def test_a_refused_pod_deletes_what_was_made_before_it() -> None:
    api = FakeApi(refuse="Pod")
    result = _run(api)
    assert result.platform_error and "creating Pod/" in result.problem
    assert api.objects == {}
    assert sorted(p.rsplit("/", 2)[-2] for m, p in api.calls if m == "DELETE") == [
        "configmaps",
        "networkpolicies",
    ]


def test_a_pod_that_ends_without_results_is_the_platforms_failure() -> None:
    def fail(pod: dict[str, Any]) -> None:
        pod["status"] = {"phase": "Failed"}

    result = _run(FakeApi(on_get=fail), lambda *_a: b"exec /bin/bash: no such file")
    assert result.platform_error and "without printing its results" in result.problem


def test_a_cluster_failure_while_waiting_is_the_platforms_and_cleans_up() -> None:
    def down(_pod: dict[str, Any]) -> None:
        raise ClusterError("GET pods: the cluster is unreachable")

    api = FakeApi(on_get=down)
    result = _run(api)
    assert result.platform_error and "unreachable" in result.problem
    assert api.objects == {}


def _python39() -> str | None:
    versions = Path.home() / ".pyenv" / "versions"
    candidates = sorted(str(p) for p in versions.glob("3.9*/bin/python3.9"))
    found = shutil.which("python3.9")
    for candidate in [*candidates, *([found] if found else [])]:
        done = subprocess.run([candidate, "--version"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.startswith("Python 3.9"):
            return candidate
    return None


PYTHON39 = _python39()


@pytest.mark.skipif(PYTHON39 is None, reason="no python3.9 (UBI 9's python3) on this machine")
@pytest.mark.parametrize(
    "argv",
    [
        ["sshd", "-T"],
        ["systemctl", "is-enabled", "auditd"],
        ["systemctl", "is-active", "telnet.socket"],
        ["rpm", "-q", "telnet-server"],
        ["sysctl", "-n", "net.ipv4.ip_forward"],
        ["getenforce"],
        ["auditctl", "-l"],
        ["systemctl", "stop", "auditd"],
        ["kubectl", "get", "pods", "-o", "json"],
        ["curl", "https://example.com"],
    ],
)
def test_the_shims_answer_the_same_on_ubi9s_python_3_9(tmp_path: Path, argv: list[str]) -> None:
    assert PYTHON39 is not None
    state = _noncompliant()
    for path, (text, _mode) in _mounted(_manifests(state=state)).items():
        if path.startswith(sandbox.TWIN_DIR):
            (tmp_path / Path(path).name).write_text(text, encoding="utf-8")
    done = subprocess.run(
        [PYTHON39, "-I", "-S", str(tmp_path / "shim.py"), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if argv[0] in ("kubectl", "curl"):
        assert done.returncode == (0 if argv[0] == "kubectl" else 78), done.stderr
        return
    answer = host_model.command_answer(state, argv)
    assert (done.returncode, done.stdout) == (answer.status, answer.stdout), done.stderr
