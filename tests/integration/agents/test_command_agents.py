"""Agents given as commands: one process per trial against the gateway served on loopback, scored
like any agent; a crash or a hang ends only its own trial, Failed, with the agent's reason."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from itbench.catalog_files import load_catalog
from itbench.core.models.agent_record import AgentRuntimeKind
from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialPhase
from itbench.execution.agents import from_command
from itbench.execution.artefacts import RunStore
from itbench.execution.embedded import BenchmarkOptions, run_benchmark
from itbench.execution.runners import LOG_LIMIT_BYTES

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "agents"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCENARIOS = ("cart-flagd-failure", "checkout-nonexistent-image", "product-catalog-failure")


def command(script: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / script))}"


def scenarios(*names: str) -> list[Scenario]:
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert problems == []
    return [catalog.get(n) for n in names]


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """One run: the SDK agent over three scenarios, a crashing and a hanging command over one."""
    out = tmp_path_factory.mktemp("runs")
    agents = [
        from_command(command("sdk_agent.py"), wall_seconds=120, args={"model": "m-1"}),
        from_command(command("crashing_agent.py"), wall_seconds=120),
        from_command(command("hanging_agent.py"), wall_seconds=10),
    ]
    chosen = scenarios(*SCENARIOS)
    options = BenchmarkOptions(
        run="cmd", agents=agents, scenarios=chosen, trials=1, seed=42, workers=2
    )
    result = run_benchmark(options, out, created_at=T0)
    return result.root, result.report


def records(root: Path) -> dict[str, TrialRecord]:
    lines = (root / "trials.jsonl").read_text().splitlines()
    return {r.trial: r for r in (TrialRecord.model_validate_json(line) for line in lines)}


@pytest.mark.slow
def test_a_command_agent_is_benchmarked_over_several_scenarios_with_scored_records(
    mixed_run: tuple[Path, Report],
) -> None:
    root, _report = mixed_run
    mine = {n: r for n, r in records(root).items() if r.agent == "sdk-agent"}
    assert sorted(r.scenario for r in mine.values()) == sorted(SCENARIOS)
    for record in mine.values():
        assert record.phase in (TrialPhase.SUCCEEDED, TrialPhase.FAILED), record.reason
        assert record.reason in ("TasksPassed", "TasksFailed")
        assert record.scores is not None and record.scores.diagnosis is not None
        assert record.agent_info is not None
        assert record.agent_info.runtime == AgentRuntimeKind.COMMAND
        assert record.agent_info.target == command("sdk_agent.py")
        assert record.agent_info.version.startswith("sha256:")
        assert record.agent_info.args == {"model": "m-1"}
    cart = mine["sdk-agent--cart-flagd-failure--0"]
    assert cart.scores is not None and cart.scores.diagnosis is not None
    assert cart.scores.diagnosis.passed, "the alert names cart, the root cause"
    store = RunStore(root)
    files = store.agent_files("sdk-agent--cart-flagd-failure--0")
    stdout = files.stdout.read_text()
    assert stdout.startswith("working on trial-"), "the agent knows its trial by an opaque id"
    assert "cart" not in stdout
    assert files.stderr.read_text() == "a line on stderr\n"
    audit = store.load_trajectory("sdk-agent--cart-flagd-failure--0")
    assert "act.rollout-restart" in {e["action"] for e in audit}


@pytest.mark.slow
def test_a_command_agents_trajectory_is_stored_and_its_tokens_are_summed_in_the_report(
    mixed_run: tuple[Path, Report],
) -> None:
    root, report = mixed_run
    steps = RunStore(root).load_steps("sdk-agent--cart-flagd-failure--0")
    assert [s.kind.value for s in steps] == ["model-call", "tool-call", "tool-result"]
    assert steps[2].text.startswith("RequestErrorRate")
    record = records(root)["sdk-agent--cart-flagd-failure--0"]
    assert record.usage is not None
    assert (record.usage.prompt_tokens, record.usage.completion_tokens) == (100, 20)
    usage = {u.agent.name: u for u in report.agent_usage}
    assert sorted(usage) == ["crashing-agent", "hanging-agent", "sdk-agent"]
    sdk = usage["sdk-agent"]
    assert (sdk.trials, sdk.trials_with_trajectory) == (3, 3)
    assert (sdk.usage.prompt_tokens, sdk.usage.completion_tokens) == (300, 60)
    assert sdk.usage.cost_usd == pytest.approx(0.003)
    assert sdk.usage.models == ["fixture/model"] and sdk.usage.tool_calls == 3
    assert usage["crashing-agent"].usage.model_calls == 0
    on_disk = Report.model_validate_json((root / "report.json").read_text())
    assert on_disk.agent_usage == report.agent_usage


@pytest.mark.slow
def test_a_crashing_command_fails_only_its_own_trial_with_its_exit_status_and_bounded_stderr(
    mixed_run: tuple[Path, Report],
) -> None:
    root, report = mixed_run
    crashed = records(root)["crashing-agent--cart-flagd-failure--0"]
    assert crashed.phase == TrialPhase.FAILED and crashed.reason == "AgentCrashed"
    status = RunStore(root).load_status(crashed.trial)
    assert status is not None
    assert "exited with status 3: RuntimeError: the agent gave up" in status.message
    stderr = RunStore(root).agent_files(crashed.trial).stderr
    text = stderr.read_text()
    assert stderr.stat().st_size <= LOG_LIMIT_BYTES + 100
    assert text.startswith("noise line 000000")
    assert "bytes dropped ..." in text
    assert text.rstrip().endswith("RuntimeError: the agent gave up")
    assert report.errored.count == 0


@pytest.mark.slow
def test_a_hanging_command_is_stopped_at_its_wall_clock_limit_and_fails_only_its_trial(
    mixed_run: tuple[Path, Report],
) -> None:
    root, _report = mixed_run
    hung = records(root)["hanging-agent--cart-flagd-failure--0"]
    assert hung.phase == TrialPhase.FAILED and hung.reason == "AgentTimeout"
    status = RunStore(root).load_status(hung.trial)
    assert status is not None
    assert "did not exit within its 10 s wall-clock limit and was stopped" in status.message
    out = RunStore(root).agent_files(hung.trial).stdout.read_text()
    assert out == "started; now hanging\n"
    others = [r for r in records(root).values() if r.agent == "sdk-agent"]
    assert all(r.reason in ("TasksPassed", "TasksFailed") for r in others)


@pytest.mark.slow
def test_itbench_run_takes_an_agent_command_names_it_in_the_report_and_resumes_it(
    tmp_path: Path,
) -> None:
    from itbench.cli.run import run_command

    base = [
        "--output-dir",
        str(tmp_path),
        "--scenarios-dir",
        str(ROOT / "scenarios"),
        "--workers",
        "1",
    ]
    args = [
        "--agent-cmd",
        command("sdk_agent.py"),
        "--agent-name",
        "mine",
        "--agent-version",
        "1.2",
        "--scenario",
        "cart-flagd-failure",
        "--trials",
        "2",
        "--run-name",
        "c1",
        *base,
    ]
    result = CliRunner().invoke(run_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "c1"
    report = Report.model_validate_json((run_dir / "report.json").read_text())
    assert report.agent == "mine"
    [usage] = report.agent_usage
    assert (usage.agent.name, usage.agent.version) == ("mine", "1.2")
    assert usage.agent.target == command("sdk_agent.py")
    plan = json.loads((run_dir / "plan.json").read_text())
    assert {p["agent"]["target"] for p in plan} == {command("sdk_agent.py")}

    store = RunStore(run_dir)
    victim = "mine--cart-flagd-failure--1"
    done = store.load_status(victim)
    assert done is not None and done.phase.final
    store.save_status(victim, done.model_copy(update={"phase": TrialPhase.READY}))
    again = CliRunner().invoke(
        run_command,
        ["--resume", str(run_dir), "--agent-timeout", "90", "--workers", "1"],
        catch_exceptions=False,
    )
    assert again.exit_code == 0, again.output
    resumed = store.load_status(victim)
    assert resumed is not None and resumed.phase.final
    assert "restarted" in resumed.timeline[0].message
    plan = json.loads((run_dir / "plan.json").read_text())
    limits = {p["name"]: p["agent"]["wallSeconds"] for p in plan}
    assert limits == {"mine--cart-flagd-failure--0": 600.0, victim: 90.0}
    assert (store.agent_files(victim).stdout).read_text().startswith("working on")

    other = CliRunner().invoke(
        run_command,
        ["--resume", str(run_dir), "--agent-cmd", command("crashing_agent.py"), *base[4:]],
    )
    assert other.exit_code == 2
    assert "--resume keeps the run's agents" in other.output


def test_itbench_run_refuses_a_missing_program_and_an_argument_no_agent_takes(
    tmp_path: Path,
) -> None:
    from itbench.cli.run import run_command

    common = ["--output-dir", str(tmp_path), "--scenarios-dir", str(ROOT / "scenarios")]
    missing = CliRunner().invoke(
        run_command, ["--agent-cmd", "no-such-program-xyz --flag", *common]
    )
    assert missing.exit_code == 2
    assert "program 'no-such-program-xyz' is not found" in missing.output
    unused = CliRunner().invoke(run_command, ["--agent", "heuristic-sre", "--model", "x", *common])
    assert unused.exit_code == 2
    assert "no agent of this run takes model" in unused.output
    unknown = CliRunner().invoke(run_command, ["--agent", "no-such-agent", *common])
    assert unknown.exit_code == 2
    assert "no agent named 'no-such-agent' is registered" in unknown.output
    assert "heuristic-sre" in unknown.output


@pytest.mark.slow
def test_itbench_serve_works_its_trial_with_an_agent_command_and_stops(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("itbench")),
            "serve",
            "--scenario",
            "cart-flagd-failure",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--agent-cmd",
            command("sdk_agent.py"),
            "--scenarios-dir",
            str(ROOT / "scenarios"),
        ],
        env={**os.environ, "ITBENCH_OUTPUT_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "trial practice--cart-flagd-failure: Failed (TasksFailed)" in done.stdout, done.stdout
    assert '"passed": true' in done.stdout, "the diagnosis is scored"
    out = tmp_path / "serve-cart-flagd-failure" / "agent" / "stdout.log"
    assert out.read_text().startswith("working on trial-")
    assert "cart" not in out.read_text(), "the id the agent sees does not name the scenario"
