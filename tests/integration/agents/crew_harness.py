"""Runs a CrewAI baseline offline on one catalog scenario: scripted models (CrewAI LLM subclasses
replaying recorded answers), the real gateway in-process, the trial's state machine scoring it.

`offline_crew` (a fixture) switches telemetry off, gives CrewAI a temporary HOME and refuses
every network connection, so nothing leaves the machine.

CrewAI (with LiteLLM) takes seconds of CPU to import, and every test worker collects every test
module, so nothing here or in the crew test modules imports it at collection: a crew is named by
its module and imported when a test runs it (`skip_without_crewai` skips a module when CrewAI is
not installed, without importing it).
"""

from __future__ import annotations

import importlib
import importlib.util
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from itbench.catalog_files import load_catalog
from itbench.cli.serve import PracticeTrial, practice_trial
from itbench.client import Domain, ITBenchClient
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import new_status
from itbench.execution.artefacts import read_steps
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial

if TYPE_CHECKING:
    from agents.crew.models import CrewLLM

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "agents"
NO_CREWAI = "CrewAI is not installed: pip install -e '.[agents]' (make venv installs it)"


def skip_without_crewai() -> None:
    """Skip the calling test module when CrewAI is not installed (found, not imported)."""
    if importlib.util.find_spec("crewai") is None:
        pytest.skip(NO_CREWAI, allow_module_level=True)


def recorded(name: str) -> tuple[list[str], list[str]]:
    """A recorded session from the fixtures: the reasoning and the tool model's answers."""
    from agents.crew.models import load_script

    return load_script(FIXTURES / name)


@pytest.fixture
def offline_crew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No telemetry, a temporary HOME, and no network beyond loopback."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key, value in {
        "CREWAI_DISABLE_TELEMETRY": "true",
        "CREWAI_DISABLE_TRACKING": "true",
        "CREWAI_TRACING_ENABLED": "false",
        "CREWAI_TESTING": "true",
        "OTEL_SDK_DISABLED": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }.items():
        monkeypatch.setenv(key, value)
    real_connect = socket.socket.connect
    real_resolve = socket.getaddrinfo
    local = ("127.0.0.1", "::1", "localhost")

    def loopback_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in local:
            raise OSError(f"network access refused in offline tests: {address!r}")
        return real_connect(self, address)

    def resolve_loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (*local, None):
            raise OSError(f"name resolution refused in offline tests: {host!r}")
        return real_resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr(socket, "getaddrinfo", resolve_loopback_only)
    yield home


@dataclass
class CrewRun:
    """What a scripted crew left behind on one trial."""

    status: TrialStatus
    reasoning: CrewLLM
    tool: CrewLLM
    steps: list[Any]
    audit: list[dict[str, Any]]
    trial: PracticeTrial

    def actions(self) -> list[str]:
        """The audit trail's actions, in order."""
        return [str(e["action"]) for e in self.audit]


def run_crew(
    scenario: str | Scenario,
    reasoning: list[str],
    tool: list[str],
    *,
    crew: str,
    domain: Domain,
    steps_path: Path,
    seed: int = 42,
    agent_seconds: int = 1800,
    args: dict[str, str] | None = None,
) -> CrewRun:
    """Run a crew (its module, e.g. `agents.crewai_sre.crew`) with scripted models on a fresh
    simulated trial of `scenario` (a catalog name, or one instance of a scenario) and score it."""
    from agents.crew.models import scripted_model
    from agents.crew.session import work_trial

    build = importlib.import_module(crew).build
    if isinstance(scenario, str):
        catalog, problems = load_catalog(ROOT / "scenarios")
        assert problems == []
        scenario = catalog.get(scenario)
    trial = practice_trial(scenario, seed=seed, agent_seconds=agent_seconds, allow_oracle=False)
    thinking = scripted_model(reasoning, model="scripted/reasoning")
    writing = scripted_model(tool, model="scripted/tool", actor="tool-model", reasoning=False)
    audit: list[dict[str, Any]] = []

    def agent(executor: Any) -> None:
        client = ITBenchClient.in_process(trial.app, executor.token)
        try:
            work_trial(
                client,
                domain=domain,
                build=build,
                args=args or {},
                trajectory=str(steps_path),
                models=(thinking, writing),
            )
        finally:
            audit.extend(executor.trajectory())
            client.close()

    status = drive_trial(
        new_status(trial.executor.now()),
        trial.executor,
        persist=lambda _s: None,
        run_agent=agent,
        config=EMBEDDED_CONFIG,
    )
    return CrewRun(
        status=status,
        reasoning=thinking,
        tool=writing,
        steps=read_steps(steps_path),
        audit=audit,
        trial=trial,
    )


def action(tool: str, **inputs: Any) -> str:
    """A scripted ReAct step calling a tool."""
    import json

    return f"Thought: next, {tool}.\nAction: {tool}\nAction Input: {json.dumps(inputs)}"


def final(text: str) -> str:
    """A scripted final answer."""
    return f"Thought: I now know the final answer\nFinal Answer: {text}"
