"""The CrewAI baselines as `itbench run` runs them, offline: registered (`--agent crewai-sre`,
in-process) and as a command (`--agent-cmd 'python -m agents.crewai_sre'`, its own process
against the gateway on loopback), replaying a recorded session (`--model replay/<file>`); the
report names the agent and sums its tokens."""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from itbench.cli.run import run_command
from itbench.core.models.report import Report
from itbench.execution.artefacts import RunStore
from tests.integration.agents.crew_harness import FIXTURES, ROOT, offline_crew, skip_without_crewai

skip_without_crewai()

__all__ = ["offline_crew"]

SCRIPT = FIXTURES / "crewai_sre_cart.yaml"


def _run(out: Path, name: str, *agent: str) -> Report:
    args = [
        *agent,
        "--model",
        f"replay/{SCRIPT}",
        "--scenario",
        "cart-flagd-failure",
        "--trials",
        "1",
        "--workers",
        "1",
        "--run-name",
        name,
        "--output-dir",
        str(out),
        "--scenarios-dir",
        str(ROOT / "scenarios"),
    ]
    result = CliRunner().invoke(run_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return Report.model_validate_json((out / name / "report.json").read_text())


def _trial(out: Path, name: str) -> dict[str, object]:
    [line] = (out / name / "trials.jsonl").read_text().splitlines()
    return dict(json.loads(line))


@pytest.mark.slow
def test_itbench_run_benchmarks_the_registered_crew_in_process(
    offline_crew: Path, tmp_path: Path
) -> None:
    report = _run(tmp_path, "reg", "--agent", "crewai-sre")
    trial = _trial(tmp_path, "reg")
    assert trial["phase"] == "Succeeded", trial
    [usage] = report.agent_usage
    assert (usage.agent.name, usage.agent.target) == ("crewai-sre", "agents.crewai_sre:AGENT")
    assert usage.agent.args == {"model": f"replay/{SCRIPT}"}
    assert usage.usage.model_calls == 16 and usage.usage.prompt_tokens > 10_000
    assert usage.usage.models == [f"replay/{SCRIPT}"]
    steps = RunStore(tmp_path / "reg").load_steps(str(trial["trial"]))
    assert any(s.kind.value == "thought" for s in steps)


@pytest.mark.slow
def test_itbench_run_benchmarks_the_crew_as_a_command_through_the_loopback_gateway(
    offline_crew: Path, tmp_path: Path
) -> None:
    command = f"{shlex.quote(sys.executable)} -m agents.crewai_sre"
    report = _run(tmp_path, "cmd", "--agent-cmd", command, "--agent-name", "crew-cmd")
    trial = _trial(tmp_path, "cmd")
    files = RunStore(tmp_path / "cmd").agent_files(str(trial["trial"]))
    assert trial["phase"] == "Succeeded", files.stderr.read_text()[-3000:]
    [usage] = report.agent_usage
    assert usage.agent.runtime.value == "command" and usage.agent.target == command
    assert usage.agent.version == importlib.metadata.version("itbench"), "the module's version"
    assert usage.usage.model_calls == 16 and usage.usage.tool_calls == 11
    audit = RunStore(tmp_path / "cmd").load_trajectory(str(trial["trial"]))
    assert "act.set-flag" in {e["action"] for e in audit}
