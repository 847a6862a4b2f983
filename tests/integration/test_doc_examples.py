"""Examples are tests: every Python and shell block of the README and docs/ either runs here exactly
as printed, against the embedded twin, and scores on the scenario it names, or is marked as not run
with a reason (an HTML comment before its fence); a block that is neither fails.

Markers, on the line before a fence:

* `<!-- example: agent scenario=NAME passes=TASK,... -->`: a Python agent, run as `--agent-cmd`
  of `itbench run` over NAME; each TASK must pass.
* `<!-- example: mcp scenario=NAME passes=TASK,... -->`: a Python MCP client, run as a script
  (it starts `itbench mcp` itself); its `REPORT` must pass each TASK on NAME.
* `<!-- example: sh -->`: shell commands, run with bash (errors stop it) in a directory holding
  `.venv` and `scenarios`, as the repository's root does.
* `<!-- not run: REASON -->`.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from itbench.cli.run import run_command
from itbench.core.models.agent_io import DiagnosisReport
from itbench.core.models.report import Report
from itbench.gateway.mcp import build_server

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"python", "py", "sh", "bash", "shell", "console"}
"""Fence languages a reader may run: each block needs an example or a not-run marker."""

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(example|not run):\s*(.*?)\s*-->\s*$")
KINDS = {"agent", "mcp", "sh"}

SCORING_AGENT = """
import json
import os

from itbench.client import DiagnosisReport, ITBenchClient

client = ITBenchClient(os.environ["ITBENCH_GATEWAY_URL"], os.environ["ITBENCH_TOKEN"])
client.use_trial(os.environ["ITBENCH_TRIAL"])
client.started()
report = DiagnosisReport.model_validate(json.loads(os.environ["ITBENCH_AGENT__REPORT"]))
client.submit_diagnosis(report)
client.finished()
"""


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file and the marker before it."""

    doc: str
    line: int
    lang: str
    code: str
    marker: str
    args: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    def options(self) -> tuple[str, dict[str, str]]:
        kind, *rest = self.args.split()
        return kind, dict(part.split("=", 1) for part in rest)


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, dedented, with the marker on the line before."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, lang = opening.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(previous)
        found.append(
            Block(
                doc=str(path.relative_to(ROOT)),
                line=i + 1,
                lang=lang.lower(),
                code="\n".join(body) + "\n",
                marker=marker.group(1) if marker else "",
                args=marker.group(2) if marker else "",
            )
        )
        i = end + 1
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]
EXAMPLES = [b for b in ALL if b.marker == "example"]


def test_every_runnable_block_is_run_or_marked_with_a_reason() -> None:
    unmarked = [b.id for b in ALL if b.lang in RUNNABLE and not b.marker]
    assert unmarked == [], "mark each with <!-- example: ... --> or <!-- not run: reason -->"
    reasonless = [b.id for b in ALL if b.marker == "not run" and len(b.args) < 10]
    assert reasonless == []
    unknown = [b.id for b in EXAMPLES if b.options()[0] not in KINDS]
    assert unknown == []
    assert {b.doc for b in EXAMPLES} >= {"README.md", "docs/agent-api.md", "docs/validity.md"}


def test_the_readme_and_agent_api_sdk_examples_are_among_those_run() -> None:
    agents = [b for b in EXAMPLES if b.options()[0] == "agent"]
    assert sum(b.doc == "README.md" for b in agents) == 2
    assert sum(b.doc == "docs/agent-api.md" for b in agents) == 1
    assert any(b.options()[0] == "mcp" for b in EXAMPLES)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A directory that looks like the repository's root to an example: `.venv`, `scenarios`."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    return tmp_path


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ITBENCH_")}


def run_agent(
    sandbox: Path, script: str, scenario: str, args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Run a Python agent as `itbench run --agent-cmd` over one scenario; its task metrics."""
    path = sandbox / f"agent-{len(list(sandbox.glob('agent-*.py')))}.py"
    path.write_text(script, encoding="utf-8")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"
    result = CliRunner().invoke(
        run_command,
        [
            "--agent-cmd",
            command,
            *args,
            "--scenario",
            scenario,
            "--trials",
            "1",
            "--workers",
            "1",
            "--output-dir",
            str(sandbox / "out"),
            "--run-name",
            path.stem,
            "--scenarios-dir",
            str(ROOT / "scenarios"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    report = Report.model_validate_json((sandbox / "out" / path.stem / "report.json").read_text())
    (agent,) = report.agents
    assert agent.errored.count == 0, agent.errored
    return {t.key: t for t in agent.tasks}


def assert_passes(tasks: dict[str, Any], passes: str, where: str) -> None:
    for key in passes.split(","):
        task = tasks.get(key)
        assert task is not None and task.trials > 0, f"{where}: no trial scored on {key}"
        assert task.passed == task.trials, f"{where}: {key} failed: {task.failures}"


def score_diagnosis(sandbox: Path, report: dict[str, Any], scenario: str) -> dict[str, Any]:
    """Submit a diagnosis body (as an MCP client would send it) on a scenario; task metrics."""
    DiagnosisReport.model_validate(report)
    return run_agent(
        sandbox,
        SCORING_AGENT,
        scenario,
        ("--agent-arg", f"report={json.dumps(report)}"),
    )


@pytest.mark.parametrize("block", EXAMPLES, ids=[b.id for b in EXAMPLES])
def test_documented_example_runs_as_printed_and_scores(block: Block, sandbox: Path) -> None:
    kind, options = block.options()
    if kind == "agent":
        assert block.lang == "python"
        tasks = run_agent(sandbox, block.code, options["scenario"])
        assert_passes(tasks, options["passes"], block.id)
    elif kind == "mcp":
        script = sandbox / "mcp_example.py"
        script.write_text(block.code, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=sandbox,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert '"report":"diagnosis"' in done.stdout, done.stdout[-2000:]
        assert options["scenario"] in done.stderr, "the server worked the named scenario"
        report = _literal(block.code, "REPORT")
        tasks = score_diagnosis(sandbox, report, options["scenario"])
        assert_passes(tasks, options["passes"], block.id)
    else:
        assert block.lang in ("sh", "bash")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=sandbox,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
        for path in sandbox.glob("out/*/report.json"):
            report = Report.model_validate_json(path.read_text())
            assert report.errored.count == 0, (path, report.errored)
            assert report.succeeded == report.trials, (path, report.failures)


def _literal(code: str, name: str) -> Any:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"the example defines no {name}")


def _braced(text: str) -> str:
    """The balanced `{...}` that `text` starts with."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return text[: i + 1]
    raise AssertionError(f"unbalanced braces in {text[:200]!r}")


def test_the_mcp_submit_diagnosis_tool_example_scores(sandbox: Path) -> None:
    def refuse(_ctx: Any) -> Any:
        raise AssertionError("listing tools reaches no trial")

    async def describe() -> str:
        async with Client(build_server(refuse)) as client:
            listed = await client.list_tools()
        return next(t.description or "" for t in listed.tools if t.name == "submit_diagnosis")

    description = asyncio.run(describe())
    text = description.split("report_body=", 1)[1]
    body = ast.literal_eval(_braced(text).replace("true", "True").replace("false", "False"))
    roots = [e for e in body["entities"] if e.get("rootCause")]
    assert roots and all(e.get("category") for e in roots)
    tasks = score_diagnosis(sandbox, body, "checkout-nonexistent-image")
    assert_passes(tasks, "sre.diagnosis", "submit_diagnosis's example")
