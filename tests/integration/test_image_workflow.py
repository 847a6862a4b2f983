"""The image-publishing workflow: it builds the Dockerfile whose image the chart installs by
default, on tags and on main, for amd64 and arm64, and pushes it with the workflow's own token."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

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
