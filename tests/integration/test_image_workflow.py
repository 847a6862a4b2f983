"""The image-publishing workflow: it builds the Dockerfile whose image the chart installs by
default, on tags and on main, for amd64 and arm64, and pushes it with the workflow's own token."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from itbench.stack import pins

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "image.yaml"


def _workflow() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def _job() -> dict[str, Any]:
    jobs = _workflow()["jobs"]
    assert len(jobs) == 1
    job: dict[str, Any] = next(iter(jobs.values()))
    return job


def _step(uses: str) -> dict[str, Any]:
    found = [s for s in _job()["steps"] if str(s.get("uses", "")).startswith(uses + "@")]
    assert len(found) == 1, uses
    return found[0]


def _published(dockerfile: str, repository: str) -> str:
    """The image the workflow pushes for a Dockerfile when it runs in GitHub repo `repository`."""
    [entry] = [e for e in _job()["strategy"]["matrix"]["include"] if e["dockerfile"] == dockerfile]
    [name] = [s for s in _job()["steps"] if s.get("id") == "name"]
    command = name["run"].replace("${GITHUB_REPOSITORY,,}", repository.lower())
    command = command.replace("${{ matrix.suffix }}", entry["suffix"])
    match = re.search(r'image=([^"\s]+)', command)
    assert match, command
    return match.group(1)


def test_it_runs_on_tags_and_main_with_permission_to_push_packages() -> None:
    doc = _workflow()
    push = doc["on"]["push"]
    assert push["tags"] and all(t.startswith("v") for t in push["tags"])
    assert push["branches"] == ["main"]
    assert set(doc["on"]) == {"push"}, "never from pull requests, whose code is untrusted"
    assert doc["permissions"] == {"contents": "read", "packages": "write"}


def test_it_publishes_the_image_the_chart_installs_by_default() -> None:
    values = yaml.safe_load((ROOT / "charts" / "itbench" / "values.yaml").read_text("utf-8"))
    chart = yaml.safe_load((ROOT / "charts" / "itbench" / "Chart.yaml").read_text("utf-8"))
    repository = values["image"]["repository"]
    assert repository.startswith("ghcr.io/")
    owner_repo = repository.removeprefix("ghcr.io/")
    assert _published("Dockerfile", owner_repo) == repository
    assert _published("agents/Dockerfile", owner_repo) == repository + "-crewai"
    assert _published("Dockerfile", "Some-Org/ITBench") == "ghcr.io/some-org/itbench"
    # The chart runs `operator run ...` as the container's arguments: the image's entry point.
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert 'ENTRYPOINT ["itbench"]' in dockerfile
    # Tag v<appVersion> publishes <appVersion>, the chart's default tag.
    tags = _step("docker/metadata-action")["with"]["tags"].split()
    assert "type=semver,pattern={{version}}" in tags
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["appVersion"])


def test_it_builds_both_architectures_with_buildx_and_qemu() -> None:
    steps = [str(s.get("uses", "")).split("@")[0] for s in _job()["steps"]]
    assert steps.index("docker/setup-qemu-action") < steps.index("docker/build-push-action")
    assert steps.index("docker/setup-buildx-action") < steps.index("docker/build-push-action")
    build = _step("docker/build-push-action")["with"]
    assert build["file"] == "${{ matrix.dockerfile }}" and build["context"] == "."
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["push"] is True
    assert build["tags"] == "${{ steps.meta.outputs.tags }}"
    files = {e["dockerfile"] for e in _job()["strategy"]["matrix"]["include"]}
    assert files == {"Dockerfile", "agents/Dockerfile"}
    assert all((ROOT / f).is_file() for f in files)


def test_it_uses_only_the_workflow_token() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert set(re.findall(r"secrets\.(\w+)", text)) == {"GITHUB_TOKEN"}
    login = _step("docker/login-action")["with"]
    assert login["registry"] == "ghcr.io"
    assert login["password"] == "${{ secrets.GITHUB_TOKEN }}"


def _dockerfile_args() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    return dict(re.findall(r"^ARG ([A-Z_]+)=(\S+)$", text, re.M))


def _final_stage() -> list[str]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    stages = re.split(r"^FROM ", text, flags=re.M)
    return [line for line in stages[-1].splitlines() if line.strip()]


def test_the_operator_image_pins_what_the_playbooks_call() -> None:
    args = _dockerfile_args()
    stack = pins()
    assert args["KUBERNETES_CORE_VERSION"] == stack["ansible"]["collectionVersion"]
    assert args["KUBECTL_VERSION"] == stack["kubernetes"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["ANSIBLE_CORE_VERSION"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["ANSIBLE_RUNNER_VERSION"])
    # The kind workflow runs the stack playbooks with the same helm and kubectl.
    kind = yaml.safe_load((ROOT / ".github" / "workflows" / "kind.yaml").read_text("utf-8"))
    versions = {
        str(s["uses"]).split("@")[0]: s.get("with", {}).get("version")
        for job in kind["jobs"].values()
        for s in job["steps"]
        if "uses" in s
    }
    assert versions["azure/setup-helm"] == args["HELM_VERSION"]
    assert versions["azure/setup-kubectl"] == args["KUBECTL_VERSION"]
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "sha256sum -c" in text and text.count("sha256") >= 4, "both binaries are verified"
    assert '"kubernetes.core:==${KUBERNETES_CORE_VERSION}"' in text
    assert '"ansible-core==${ANSIBLE_CORE_VERSION}"' in text


def test_the_operator_image_runs_as_non_root_on_a_read_only_root() -> None:
    final = _final_stage()
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users == ["10001:10001"], "the last stage's only user, numeric (runAsNonRoot checks)"
    env = " ".join(line for line in final if not line.startswith(("RUN", "COPY")))
    for variable in ("HOME", "ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "HELM_CACHE_HOME"):
        assert re.search(rf"{variable}=/tmp(\s|/)", env), f"{variable} is under /tmp"
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert any("compileall" in line for line in final), "bytecode is written at build time"
    values = yaml.safe_load((ROOT / "charts" / "itbench" / "values.yaml").read_text("utf-8"))
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert values["podSecurityContext"]["runAsUser"] == 10001
    deployment = (ROOT / "charts" / "itbench" / "templates" / "deployment.yaml").read_text("utf-8")
    assert "mountPath: /tmp" in deployment and "emptyDir: {}" in deployment
