"""The CrewAI baselines fail fast without a model, saying which variables to set, whether run
in-process (`itbench run --agent crewai-sre`) or as a command; credentials are checked per
provider. None of this needs CrewAI imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agents.crew.config import check, settings_from

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("ITBENCH_AGENT__"):
            monkeypatch.delenv(key)


def test_without_a_model_the_check_names_the_option_and_the_variables_to_set() -> None:
    problems = check({}, env={})
    assert any("no model configured" in p for p in problems)
    text = " ".join(problems)
    assert "--model" in text and "ITBENCH_AGENT__MODEL" in text and "--base-url" in text


@pytest.mark.parametrize(
    ("args", "env", "missing"),
    [
        ({"model": "openai/gpt-4o"}, {}, ["OPENAI_API_KEY"]),
        ({"model": "openai/gpt-4o"}, {"OPENAI_API_KEY": "k"}, []),
        ({"model": "openai/local", "base_url": "http://127.0.0.1:8000/v1"}, {}, []),
        ({"model": "hosted_vllm/llama"}, {}, []),
        (
            {"model": "azure/gpt4o"},
            {"AZURE_API_KEY": "k"},
            ["AZURE_API_BASE", "AZURE_API_VERSION"],
        ),
        (
            {"model": "watsonx/ibm/granite-3-8b-instruct"},
            {"WATSONX_URL": "u"},
            ["WATSONX_APIKEY or WATSONX_TOKEN", "WATSONX_PROJECT_ID"],
        ),
        ({"model": "openai/gpt-4o"}, {"ITBENCH_AGENT__API_KEY": "k"}, []),
    ],
)
def test_credentials_are_checked_per_provider(
    args: dict[str, str], env: dict[str, str], missing: list[str]
) -> None:
    problems = [p for p in check(args, env=env) if "installed" not in p]
    if not missing:
        assert problems == []
    else:
        [problem] = problems
        assert all(m in problem for m in missing), problem


def test_the_tool_model_and_other_settings_fall_back_to_the_variables() -> None:
    env = {
        "ITBENCH_AGENT__MODEL": "openai/gpt-4o",
        "ITBENCH_AGENT__TOOL_MODEL": "hosted_vllm/coder",
        "ITBENCH_AGENT__TOKEN_BUDGET": "500",
        "ITBENCH_AGENT__API_KEY": "secret",
    }
    settings = settings_from({"base_url": "http://127.0.0.1:8000/v1"}, env=env)
    assert (settings.model, settings.tool_model) == ("openai/gpt-4o", "hosted_vllm/coder")
    assert (settings.temperature, settings.seed, settings.token_budget) == (0.0, 42, 500)
    assert settings.tool_base_url == "http://127.0.0.1:8000/v1" and settings.api_key == "secret"


def test_itbench_run_refuses_the_crew_without_a_model_before_any_trial(
    tmp_path: Path, no_model: None
) -> None:
    from itbench.cli.run import run_command

    result = CliRunner().invoke(
        run_command,
        [
            "--agent",
            "crewai-sre",
            "--output-dir",
            str(tmp_path),
            "--scenarios-dir",
            str(ROOT / "scenarios"),
        ],
    )
    assert result.exit_code == 2
    assert "agent 'crewai-sre': no model configured" in result.output
    assert "ITBENCH_AGENT__MODEL" in result.output
    assert list(tmp_path.iterdir()) == [], "nothing ran"


def test_the_crew_as_a_command_exits_at_once_saying_what_to_set(no_model: None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITBENCH_AGENT__")}
    env.update(ITBENCH_GATEWAY_URL="http://127.0.0.1:9", ITBENCH_TOKEN="t", ITBENCH_TRIAL="x")
    done = subprocess.run(
        [sys.executable, "-m", "agents.crewai_finops"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "no model configured" in done.stderr and "ITBENCH_AGENT__MODEL" in done.stderr
