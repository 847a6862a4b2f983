"""The chart with the real Helm (the kind workflow's version) on a real kube-apiserver: install
waits for the operator to roll out (KWOK runs its Pod), upgrade changes it in place, uninstall
removes everything it made; cluster-wide and namespaced modes grant what the docs say."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

from tests.kube_controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "itbench"


def _json(plane: ControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl(*args, "-o", "json").stdout)


def _ensure_namespaces(plane: ControlPlane, *names: str) -> None:
    for name in names:
        plane.kubectl("create", "namespace", name, check=False)


def test_install_upgrade_and_uninstall_cluster_wide(control_plane: ControlPlane) -> None:
    release, ns = "cw", "itbench-cw"
    _ensure_namespaces(control_plane, "otel-demo", "monitoring")
    installed = control_plane.helm(
        "install",
        release,
        str(CHART),
        "-n",
        ns,
        "--create-namespace",
        "--wait",
        "--timeout",
        "3m",
    )
    assert "STATUS: deployed" in installed.stdout
    deployment = _json(control_plane, "get", "deployment", f"{release}-itbench", "-n", ns)
    assert deployment["status"].get("readyReplicas") == 1
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--namespace=") for a in args)  # every namespace
    assert "--log-level=info" in args
    role = _json(control_plane, "get", "clusterrole", f"{release}-itbench")
    resources = {r for rule in role["rules"] for r in rule.get("resources", [])}
    assert {"benchmarkruns", "trials", "scenarios", "agentsubmissions"} <= resources
    # The operator's account can do what the operator does, and not what it must not.
    account = f"system:serviceaccount:{ns}:{release}-itbench"
    for verb, what, where, allowed in (
        ("patch", "benchmarkruns.itbench.io/status", "default", "yes"),
        ("create", "trials.itbench.io", "default", "yes"),
        ("create", "events", "default", "yes"),
        ("delete", "nodes", "", "no"),
        ("create", "clusterrolebindings", "", "no"),
        ("create", "pods/exec", "otel-demo", "no"),
    ):
        flags = ["-n", where] if where else []
        answer = control_plane.kubectl(
            "auth", "can-i", verb, what, "--as", account, *flags, check=False
        )
        assert answer.stdout.strip() == allowed, (verb, what, where, answer.stdout)

    upgraded = control_plane.helm(
        "upgrade",
        release,
        str(CHART),
        "-n",
        ns,
        "--reuse-values",
        "--set",
        "operator.logLevel=debug",
        "--wait",
        "--timeout",
        "3m",
    )
    assert "has been upgraded" in upgraded.stdout
    history = json.loads(control_plane.helm("history", release, "-n", ns, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2]
    args = _json(control_plane, "get", "deployment", f"{release}-itbench", "-n", ns)["spec"][
        "template"
    ]["spec"]["containers"][0]["args"]
    assert "--log-level=debug" in args

    control_plane.helm("uninstall", release, "-n", ns, "--wait", "--timeout", "2m")
    gone = control_plane.kubectl("get", "deployment", f"{release}-itbench", "-n", ns, check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr
    assert (
        control_plane.kubectl("get", "clusterrole", f"{release}-itbench", check=False).returncode
        == 1
    )
    # Helm keeps what it installed from crds/ (its documented rule): the CRDs stay.
    assert control_plane.kubectl("get", "crd", "benchmarkruns.itbench.io").returncode == 0


def test_namespaced_mode_grants_runs_only_in_the_watched_namespaces(
    control_plane: ControlPlane,
) -> None:
    release, ns = "nsd", "itbench-nsd"
    _ensure_namespaces(control_plane, "otel-demo", "monitoring", "team-a", "team-b")
    control_plane.helm(
        "install",
        release,
        str(CHART),
        "-n",
        ns,
        "--create-namespace",
        "--wait",
        "--timeout",
        "3m",
        "--set",
        "watchNamespaces={team-a}",
    )
    try:
        args = _json(control_plane, "get", "deployment", f"{release}-itbench", "-n", ns)["spec"][
            "template"
        ]["spec"]["containers"][0]["args"]
        assert "--namespace=team-a" in args
        account = f"system:serviceaccount:{ns}:{release}-itbench"
        for where, allowed in (("team-a", "yes"), ("team-b", "no")):
            answer = control_plane.kubectl(
                "auth",
                "can-i",
                "patch",
                "benchmarkruns.itbench.io/status",
                "--as",
                account,
                "-n",
                where,
                check=False,
            )
            assert answer.stdout.strip() == allowed, (where, answer.stdout)
    finally:
        control_plane.helm("uninstall", release, "-n", ns, "--wait", "--timeout", "2m")


def test_the_docs_command_registers_a_cluster_as_a_secret(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    install = (ROOT / "docs" / "install.md").read_text()
    command = next(
        line for line in install.splitlines() if "create secret generic lab-east" in line
    )
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    kubeconfig = control_plane.kubeconfig.read_text()
    (home / ".kube" / "lab-east.yaml").write_text(kubeconfig)
    _ensure_namespaces(control_plane, "team-a")
    env = {**control_plane.env(), "HOME": str(home)}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "secret/lab-east created" in done.stdout
    secret = _json(control_plane, "get", "secret", "lab-east", "-n", "team-a")
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == kubeconfig
