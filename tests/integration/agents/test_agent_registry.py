"""The agent registry: built-ins are entry points like any package's agents; a callable path or a
command resolves to the same record (name, version, what runs, arguments) and the same runner."""

from __future__ import annotations

import importlib.metadata
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from itbench.core.models.agent_record import AgentRuntimeKind
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import Domain
from itbench.core.models.report import Report
from itbench.execution.agents import (
    AgentNotFoundError,
    AgentProblemError,
    from_callable,
    from_command,
    from_registry,
    load_definition,
    preflight,
    registered,
)
from itbench.execution.plan import TrialPlan

ROOT = Path(__file__).resolve().parents[3]

AGENT_MODULE = '''
"""A user's agent, given to itbench run as a callable path."""
import json
from pathlib import Path

from itbench.client import DiagnosisReport, PredictedEntity


class _Agent:
    domains = ("SRE",)
    wall_seconds = 45

    def run(self, client, *, model: str = "", trajectory: str | None = None) -> None:
        client.next_trial()
        client.started()
        cart = PredictedEntity(
            kind="Deployment", name="cart", root_cause=True, category="FeatureFlag"
        )
        client.submit_diagnosis(DiagnosisReport(entities=[cart]))
        if trajectory:
            step = {"kind": "model-call", "model": model, "promptTokens": 7, "completionTokens": 3}
            Path(trajectory).write_text(json.dumps(step) + "\\n")
        client.finished()

    def check(self, args):
        return [] if args.get("model") else ["no model configured: pass --model"]


AGENT = _Agent()
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "my_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text(textwrap.dedent(AGENT_MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_builtin_agents_are_found_in_the_registry_with_their_distribution_version() -> None:
    entries = registered()
    for agent in BuiltinAgent:
        assert entries[agent.value].distribution == "itbench"
    info = from_registry("heuristic-sre")
    assert (info.name, info.runtime, info.registered) == (
        "heuristic-sre",
        AgentRuntimeKind.CALLABLE,
        True,
    )
    assert info.version == importlib.metadata.version("itbench")
    assert info.target == "agents.heuristic_sre.agent:AGENT"
    assert info.domains == [Domain.SRE]
    assert from_registry("oracle").domains == []


def test_a_registered_agent_refuses_an_argument_it_does_not_take() -> None:
    with pytest.raises(AgentProblemError, match="takes no argument 'model'"):
        from_registry("null", args={"model": "x"})
    assert from_registry("null", args={"model": "x"}, strict=False).args == {}
    with pytest.raises(AgentNotFoundError, match=r"registered: .*heuristic-sre"):
        from_registry("nobody")


def test_a_callable_path_resolves_with_its_declared_domains_limit_and_preflight(
    user_module: Path,
) -> None:
    info = from_callable("my_pkg.agent:AGENT", args={"model": "m"})
    assert (info.name, info.runtime, info.registered) == (
        "my-pkg",
        AgentRuntimeKind.CALLABLE,
        False,
    )
    assert info.version.startswith("sha256:"), "no distribution: a digest of the module"
    assert (info.domains, info.wall_seconds, info.args) == ([Domain.SRE], 45.0, {"model": "m"})
    assert preflight(info) == []
    bare = from_callable("my_pkg.agent:AGENT")
    assert preflight(bare) == ["agent 'my-pkg': no model configured: pass --model"]
    assert load_definition("my_pkg.agent:AGENT").takes_trajectory()
    with pytest.raises(AgentNotFoundError, match=r"cannot import 'my_pkg\.nothing'"):
        from_callable("my_pkg.nothing:run")
    with pytest.raises(AgentProblemError, match="module:function"):
        from_callable("not a path")


def test_a_command_is_named_after_its_script_and_versioned_by_its_content(tmp_path: Path) -> None:
    script = tmp_path / "my_agent.py"
    script.write_text("print('v1')\n")
    first = from_command(f"python3 {script}")
    script.write_text("print('v2')\n")
    second = from_command(f"python3 {script}")
    assert first.name == second.name == "my-agent"
    assert first.version != second.version
    assert from_command("python3 -m my_pkg.agent --fast").name == "agent"
    with pytest.raises(AgentProblemError, match="quotation"):
        from_command("python3 'unclosed")
    with pytest.raises(AgentProblemError, match="empty"):
        from_command("   ")


def test_plans_that_name_a_builtin_agent_by_string_still_load() -> None:
    from itbench.catalog_files import load_catalog

    catalog, _ = load_catalog(ROOT / "scenarios")
    doc = {
        "name": "heuristic-sre--cart-flagd-failure--0",
        "uid": "u",
        "run": "old",
        "agent": "heuristic-sre",
        "scenario": catalog.get("cart-flagd-failure").model_dump(mode="json", by_alias=True),
        "attempt": 0,
        "seed": 1,
    }
    plan = TrialPlan.model_validate(doc)
    assert plan.agent.name == "heuristic-sre" and plan.agent.domains == [Domain.SRE]


@pytest.mark.slow
def test_itbench_run_runs_a_callable_path_in_process_with_its_trajectory(user_module: Path) -> None:
    from itbench.cli.run import run_command

    out = user_module / "out"
    common = ["--output-dir", str(out), "--scenarios-dir", str(ROOT / "scenarios")]
    refused = CliRunner().invoke(run_command, ["--agent", "my_pkg.agent:AGENT", *common])
    assert refused.exit_code == 2
    assert "no model configured: pass --model" in refused.output
    args = [
        "--agent",
        "my_pkg.agent:AGENT",
        "--model",
        "scripted/none",
        "--scenario",
        "cart-flagd-failure",
        "--scenario",
        "finops-frontend-hpa-misconfiguration",
        "--trials",
        "1",
        "--workers",
        "1",
        "--run-name",
        "u1",
        *common,
    ]
    result = CliRunner().invoke(run_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = Report.model_validate_json((out / "u1" / "report.json").read_text())
    assert report.trials == 1, "the agent declares SRE only"
    [usage] = report.agent_usage
    assert usage.agent.args == {"model": "scripted/none"}
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens) == (7, 3)
    assert usage.usage.models == ["scripted/none"]
    [line] = (out / "u1" / "trials.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["scores"]["diagnosis"]["passed"] is True
    assert record["agentInfo"]["target"] == "my_pkg.agent:AGENT"


def test_itbench_agents_lists_the_registry_and_shows_what_would_stop_an_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from itbench.cli.agents import agents

    monkeypatch.delenv("ITBENCH_AGENT__MODEL", raising=False)
    listed = CliRunner().invoke(agents, ["list", "-o", "json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.output)}
    assert {a.value for a in BuiltinAgent} | {"crewai-sre", "crewai-finops"} <= set(rows)
    assert rows["crewai-sre"]["domains"] == ["SRE"]
    assert {"model", "tool_model", "base_url"} <= set(rows["crewai-sre"]["arguments"])
    assert rows["oracle"]["arguments"] == [] and rows["oracle"]["domains"] == ["all"]
    shown = CliRunner().invoke(agents, ["show", "crewai-finops", "-o", "json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["agent"]["target"] == "agents.crewai_finops:AGENT"
    assert any("no model configured" in p for p in doc["problems"])
    missing = CliRunner().invoke(agents, ["show", "nobody"])
    assert missing.exit_code == 2 and "no agent named 'nobody'" in missing.output


def test_a_run_without_agents_benchmarks_a_spread_from_the_floor_to_the_baselines() -> None:
    from itbench.cli.run import DEFAULT_RUN_AGENTS, choose_agents

    chosen = choose_agents([], [], args={}, wall_seconds=None, name=None, version=None)
    assert [a.name for a in chosen] == list(DEFAULT_RUN_AGENTS)
    assert {"null", "alert-echo", "heuristic-sre", "heuristic-finops"} <= set(DEFAULT_RUN_AGENTS)
    assert all(a.registered for a in chosen), "every default is a registered agent"
    with_oracle = choose_agents(
        [],
        [],
        defaults=(*DEFAULT_RUN_AGENTS, "oracle"),
        args={},
        wall_seconds=None,
        name=None,
        version=None,
    )
    assert with_oracle[-1].name == "oracle"
    given = choose_agents(["null"], [], args={}, wall_seconds=None, name=None, version=None)
    assert [a.name for a in given] == ["null"], "agents given replace the defaults"
