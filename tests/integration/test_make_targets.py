"""The kind, stack and e2e make targets, run here up to the step that needs a cluster: each
expands, the scripts and playbooks they call exist and parse (the stack playbooks through the
very command `make stack-up` runs, with `--syntax-check`), the host check says what to fix, and
the kind cluster is the one the docs describe."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from itbench.core.alert_rules import prometheus_rule
from itbench.stack import pins
from tests.kube_collection import kubernetes_core

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("kind-host", "kind-up", "kind-load", "kind-install", "kind-down")
TARGETS += ("stack-up", "stack-down", "e2e", "e2e-artefacts")


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def dry_run(target: str, *variables: str) -> list[str]:
    """The commands `make -n target` would run (the venv's bootstrap left out)."""
    done = make("-n", target, *variables)
    assert done.returncode == 0, done.stderr
    joined = re.sub(r"\\\n\s*", " ", done.stdout)  # a recipe's continued lines
    lines = [" ".join(line.split()) for line in joined.splitlines() if line.strip()]
    assert lines, f"make -n {target} runs nothing"
    return lines


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_expands_and_what_it_calls_exists(target: str) -> None:
    for line in dry_run(target):
        words = shlex.split(line.replace("$PATH", ""))
        while words and "=" in words[0] and not words[0].startswith("-"):
            words.pop(0)  # VAR=value prefixes
        program = words[0].lstrip("-@")
        if program in ("kind", "docker", "sudo", "helm"):
            # On the user's machine and in the kind workflow; not here (the chart tests fetch a
            # pinned helm of their own and lint and render the chart kind-install installs).
            continue
        if "/" in program:
            assert (ROOT / program).exists(), f"{target}: {program} does not exist"
        else:
            assert shutil.which(program), (target, line)
        for word in words[1:]:
            if word.startswith(("deploy/", "itbench/", "charts/", "tests/")) and "." in word:
                assert (ROOT / word.split("=")[-1]).exists(), f"{target}: {word} does not exist"


def test_kind_up_checks_the_host_then_creates_the_three_node_cluster() -> None:
    check, create = dry_run("kind-up")
    assert check == "deploy/kind/host.sh check"
    words = shlex.split(create)
    assert words[:3] == ["kind", "create", "cluster"]
    assert words[words.index("--config") + 1] == "deploy/kind/cluster.yaml"
    assert words[words.index("--name") + 1] == "itbench"
    assert "--image" not in words
    pinned = shlex.split(dry_run("kind-up", "KIND_IMAGE=kindest/node:v1.32.4")[1])
    assert pinned[pinned.index("--image") + 1] == "kindest/node:v1.32.4"
    assert dry_run("kind-down") == ["kind delete cluster --name itbench"]


def test_the_kind_cluster_has_one_control_plane_and_two_labelled_workers() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "kind" / "cluster.yaml").read_text("utf-8"))
    assert (config["apiVersion"], config["kind"]) == ("kind.x-k8s.io/v1alpha4", "Cluster")
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker"]
    for node in config["nodes"]:
        [patch] = [yaml.safe_load(p) for p in node["kubeadmConfigPatches"]]
        expected = "InitConfiguration" if node["role"] == "control-plane" else "JoinConfiguration"
        assert patch["kind"] == expected
        labels = patch["nodeRegistration"]["kubeletExtraArgs"]["node-labels"]
        assert labels == "itbench.io/role=benchmark"


def fake_host(tmp: Path, watches: int, instances: int, modules: tuple[str, ...]) -> dict[str, str]:
    inotify = tmp / "proc" / "fs" / "inotify"
    inotify.mkdir(parents=True)
    (inotify / "max_user_watches").write_text(f"{watches}\n")
    (inotify / "max_user_instances").write_text(f"{instances}\n")
    for module in modules:
        (tmp / "module" / module).mkdir(parents=True)
    (tmp / "module").mkdir(exist_ok=True)
    return {"PROC_SYS": str(tmp / "proc"), "SYS_MODULE": str(tmp / "module")}


def host_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "deploy" / "kind" / "host.sh"), "check"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
        timeout=30,
    )


def test_the_host_check_names_each_missing_setting_and_the_fix(tmp_path: Path) -> None:
    low = host_check(fake_host(tmp_path, 8192, 128, ("ip_set",)))
    assert low.returncode == 1
    assert "fs.inotify.max_user_watches is 8192, kind needs 524288" in low.stderr
    assert "fs.inotify.max_user_instances is 128, kind needs 512" in low.stderr
    assert "kernel module sch_netem is not loaded" in low.stderr
    assert "kernel module xt_set is not loaded" in low.stderr
    assert "ip_set" not in low.stderr
    assert "sudo deploy/kind/host.sh apply" in low.stderr
    assert dry_run("kind-host") == ["sudo deploy/kind/host.sh apply"]


def test_the_host_check_passes_a_prepared_host(tmp_path: Path) -> None:
    ready = host_check(fake_host(tmp_path, 1048576, 8192, ("sch_netem", "ip_set", "xt_set")))
    assert ready.returncode == 0, ready.stderr
    assert "host ready for kind: inotify 1048576 watches, 8192 instances" in ready.stdout
    # This machine's own answer is either; it never fails for another reason.
    assert host_check({}).returncode in (0, 1)


@pytest.fixture(scope="module")
def collections() -> str:
    return kubernetes_core()


@pytest.mark.parametrize(
    ("target", "playbook"),
    [
        ("stack-up", "itbench/environments/kube/playbooks/stack/install.yaml"),
        ("stack-down", "deploy/stack/uninstall.yaml"),
    ],
)
def test_the_stack_targets_run_their_playbooks_up_to_the_cluster(
    target: str, playbook: str, collections: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    stack_vars = tmp_path / "stack-vars.json"
    variables = (
        f"KUBECONFIG_FILE={kubeconfig}",
        f"COLLECTIONS_DIR={collections}",
        f"STACK_VARS={stack_vars}",
    )
    # The real recipe: the pinned collection (already there: nothing to fetch), the extra
    # variables written, the playbook parsed with every module it names resolved.
    done = make(target, "ANSIBLE_FLAGS=--syntax-check", *variables)
    assert done.returncode == 0, done.stdout + done.stderr
    version = pins()["ansible"]["collectionVersion"]
    commands = "\n".join(dry_run(target, *variables))
    assert f'collection install "kubernetes.core:=={version}" -p {collections}' in commands
    assert f"ansible-playbook {playbook} -e @{stack_vars}" in commands
    assert f"playbook: {playbook}" in done.stdout
    extravars = json.loads(stack_vars.read_text(encoding="utf-8"))
    assert extravars["kubeconfig"] == str(kubeconfig.resolve())
    assert extravars["alert_rules"] == prometheus_rule(
        "otel-demo", {"release": "kube-prometheus-stack"}
    )


def test_stack_vars_refuses_a_missing_kubeconfig(tmp_path: Path) -> None:
    done = make(
        "stack-vars", f"KUBECONFIG_FILE={tmp_path / 'none'}", f"STACK_VARS={tmp_path / 'v'}"
    )
    assert done.returncode != 0
    assert f"kubeconfig {tmp_path / 'none'} does not exist" in done.stderr
    assert not (tmp_path / "v").exists()


def test_the_uninstall_removes_every_release_the_install_made() -> None:
    install = yaml.safe_load(
        (ROOT / "itbench/environments/kube/playbooks/stack/install.yaml").read_text("utf-8")
    )[0]
    uninstall = yaml.safe_load((ROOT / "deploy/stack/uninstall.yaml").read_text("utf-8"))[0]
    assert uninstall["vars"]["remove_order"] == list(reversed(install["vars"]["install_order"]))
    helm = next(t for t in uninstall["tasks"] if "kubernetes.core.helm" in t)
    assert helm["kubernetes.core.helm"]["state"] == "absent"


def test_e2e_collects_the_kind_tests(tmp_path: Path) -> None:
    done = make("e2e", "ARGS=--collect-only", f"E2E_ARTEFACTS={tmp_path / 'artefacts'}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests/e2e/test_kind_benchmark.py::" in done.stdout
    assert (tmp_path / "artefacts").is_dir()
    summary = dry_run("e2e-artefacts", f"E2E_ARTEFACTS={tmp_path}")
    assert any("kubectl top pods -A" in line for line in summary)
    assert any("CPU_REQUESTS" in line for line in summary), "the stack's requests"
