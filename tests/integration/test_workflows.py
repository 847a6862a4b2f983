"""The GitHub workflows: every file parses, and every command a step runs is a make target that
exists and expands (`make -n`), or one of a few plain commands named here; the kind workflow runs
the kind, stack and e2e targets in order and keeps its artefacts whatever happens."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
PLAIN_COMMANDS = {
    "bash .ci/run",  # ci.yaml: the test suite as .ci/run defines it
    'echo "image=ghcr.io/${GITHUB_REPOSITORY,,}${{ matrix.suffix }}" >> "$GITHUB_OUTPUT"',
}
"""Commands that are not make targets, each allowed by its exact text."""
PLAIN_PROGRAMS = {"kubectl", "helm"}
"""Programs a step may call directly (read-only inspection of a cluster, or a chart command)."""


def workflow(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in doc["jobs"].values() for step in job["steps"]]


def commands(run: str) -> list[str]:
    """The shell commands of a `run:` block: continued lines joined, blanks and comments out."""
    joined = re.sub(r"\\\n\s*", " ", run)
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def make_targets() -> set[str]:
    """The targets the Makefile defines (rules, not variable assignments)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = set()
    for match in re.finditer(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", text, re.M):
        found |= {t for t in match.group(1).split() if not t.startswith(".")}
    return found


def make_goals(command: str) -> list[str] | None:
    """The goals of a `make ...` command (None when the command is not make)."""
    words = shlex.split(command)
    if not words or words[0] != "make":
        return None
    return [w for w in words[1:] if "=" not in w and not w.startswith("-")]


def all_runs() -> list[tuple[str, str]]:
    return [
        (path.name, command)
        for path in WORKFLOWS
        for step in steps(workflow(path))
        if "run" in step
        for command in commands(str(step["run"]))
    ]


def test_there_are_workflows_and_each_has_jobs_with_steps() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yaml", "image.yaml", "kind.yaml"}
    for path in WORKFLOWS:
        doc = workflow(path)
        assert doc["name"] and doc["on"], path.name
        for name, job in doc["jobs"].items():
            assert job["runs-on"] and job["steps"], (path.name, name)
            assert job.get("timeout-minutes"), f"{path.name} job {name} has no time limit"
            for step in job["steps"]:
                assert ("run" in step) != ("uses" in step), (path.name, step)
                if "uses" in step:
                    assert re.search(r"@v\d+$", step["uses"]), f"{step['uses']}: pin a version"


def test_every_command_is_a_make_target_or_a_named_plain_command() -> None:
    targets = make_targets()
    assert {"kind-up", "stack-up", "stack-down", "kind-down", "e2e"} <= targets
    runs = all_runs()
    assert len(runs) >= 10
    for name, command in runs:
        goals = make_goals(command)
        if goals is None:
            program = shlex.split(command)[0]
            assert command in PLAIN_COMMANDS or program in PLAIN_PROGRAMS, (name, command)
            continue
        assert goals, f"{name}: `{command}` names no target"
        unknown = [g for g in goals if g not in targets]
        assert not unknown, f"{name}: `{command}` runs targets the Makefile lacks: {unknown}"


@pytest.mark.parametrize(
    "goal",
    sorted({g for _, c in all_runs() for g in make_goals(c) or []}),
)
def test_every_make_target_a_workflow_runs_expands(goal: str) -> None:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), goal],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"make -n {goal} runs nothing"


def test_the_kind_workflow_runs_cluster_stack_platform_and_tests_in_order() -> None:
    doc = workflow(ROOT / ".github" / "workflows" / "kind.yaml")
    [job] = doc["jobs"].values()
    order = [g for s in job["steps"] if "run" in s for g in make_goals(str(s["run"])) or []]
    for earlier, later in [
        ("kind-host", "kind-up"),
        ("kind-up", "kind-load"),
        ("kind-up", "stack-up"),
        ("stack-up", "kind-install"),
        ("kind-load", "kind-install"),
        ("kind-install", "e2e"),
        ("e2e", "e2e-artefacts"),
        ("e2e-artefacts", "kind-down"),
    ]:
        assert order.index(earlier) < order.index(later), (earlier, later, order)
    by_goal = {g: s for s in job["steps"] if "run" in s for g in make_goals(str(s["run"])) or []}
    for goal in ("e2e-artefacts", "kind-down"):
        assert by_goal[goal].get("if") == "always()", f"{goal} runs after a failure too"
    [upload] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-")]
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "build/e2e", "what make e2e and make e2e-artefacts write"
    assert job["steps"].index(upload) > job["steps"].index(by_goal["e2e-artefacts"])
    # kind itself is installed only: the cluster is the Makefile's (deploy/kind/cluster.yaml).
    [kind] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("helm/kind-action@")]
    assert kind["with"]["install_only"] is True
    assert doc["permissions"] == {"contents": "read"}
