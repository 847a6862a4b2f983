"""Choosing what `itbench run` and `itbench serve` work on: mistyped scenario, class and agent names
get the closest known ones, `--class` and `--complexity` narrow a run, `serve --output-dir` is
taken, and a paired interval from fewer than four scenarios carries a small-sample warning."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

from click.testing import CliRunner

from itbench.cli.run import run_command
from itbench.cli.serve import serve_command
from itbench.core.models.report import Report
from itbench.core.scoring.compare import paired_comparison
from itbench.reports.tables import comparisons_table

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["--scenarios-dir", str(ROOT / "scenarios")]

AGENT = """
import os
from itbench.client import ITBenchClient

client = ITBenchClient(os.environ["ITBENCH_GATEWAY_URL"], os.environ["ITBENCH_TOKEN"])
client.use_trial(os.environ["ITBENCH_TRIAL"])
client.started()
print("worked", client.trial_id)
client.finished()
"""


def run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(run_command, [*args, *SCENARIOS])
    return result.exit_code, result.output


def test_a_mistyped_scenario_gets_the_closest_names() -> None:
    code, output = run(["--agent", "null", "--scenario", "cart-flagd-failur"])
    assert code == 2
    assert "unknown scenario(s): cart-flagd-failur; did you mean cart-flagd-failure" in output


def test_a_mistyped_agent_gets_the_closest_registered_names() -> None:
    code, output = run(["--agent", "heuristic-sr", "--scenario", "cart-flagd-failure"])
    assert code == 2
    assert "no agent named 'heuristic-sr' is registered; did you mean heuristic-sre" in output


def test_serve_suggests_the_scenario_it_does_not_know() -> None:
    result = CliRunner().invoke(serve_command, ["--scenario", "cart-flag-failure", *SCENARIOS])
    assert result.exit_code == 2
    assert "did you mean cart-flagd-failure" in result.output


def test_a_mistyped_class_names_the_known_ones() -> None:
    code, output = run(["--agent", "null", "--class", "CorruptImages"])
    assert code == 2
    assert "unknown scenario class(es): CorruptImages; did you mean CorruptImage" in output


def test_class_and_complexity_narrow_the_run(tmp_path: Path) -> None:
    two = ["--scenario", "cart-flagd-failure", "--scenario", "checkout-nonexistent-image"]
    common = ["--agent", "null", *two, "--trials", "1", "--workers", "1"]
    out = ["--output-dir", str(tmp_path)]
    code, output = run([*common, "--class", "corruptimage", *out, "--run-name", "by-class"])
    assert code == 0, output
    by_class = Report.model_validate_json((tmp_path / "by-class" / "report.json").read_text())
    lines = (tmp_path / "by-class" / "trials.jsonl").read_text().splitlines()
    assert by_class.trials == 1 and "checkout-nonexistent-image" in lines[0]
    code, output = run([*common, "--complexity", "medium", *out, "--run-name", "by-level"])
    assert code == 0, output
    lines = (tmp_path / "by-level" / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "cart-flagd-failure" in lines[0]
    code, output = run([*common, "--class", "CorruptImage", "--complexity", "Hard"])
    assert code == 2 and "no scenario selected" in output and "--complexity" in output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_serve_takes_output_dir_for_its_agent_commands_output(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    args = ["--scenario", "cart-flagd-failure", "--agent-cmd", command]
    args += ["--output-dir", str(tmp_path / "served"), "--port", str(_free_port()), *SCENARIOS]
    result = CliRunner().invoke(serve_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    stdout = tmp_path / "served" / "serve-cart-flagd-failure" / "agent" / "stdout.log"
    assert stdout.read_text().startswith("worked trial-")
    assert f"agent output: {stdout.parent}" in result.output


def test_a_paired_interval_from_two_or_three_scenarios_is_marked_a_rough_guide() -> None:
    a = {"s1": 1.0, "s2": 0.5, "s3": 1.0, "s4": 0.0}
    b = {"s1": 0.0, "s2": 0.5, "s3": 0.0, "s4": 0.0}
    three = paired_comparison("sre.diagnosis", "SRE diagnosis pass@1", "x", "y", a, {**b})
    few = paired_comparison(
        "sre.diagnosis",
        "SRE diagnosis pass@1",
        "x",
        "y",
        {k: a[k] for k in ("s1", "s2", "s3")},
        {k: b[k] for k in ("s1", "s2", "s3")},
    )
    one = paired_comparison("sre.diagnosis", "SRE diagnosis pass@1", "x", "y", {"s1": 1.0}, b)
    assert three.scenarios == 4 and not three.small_sample
    assert few.scenarios == 3 and few.small_sample and few.ci_low is not None
    assert one.scenarios == 1 and not one.small_sample, "no interval: nothing to warn about"
    table = comparisons_table([three, few])
    assert "⚠" not in table.rows[0][7]
    assert table.rows[1][7].endswith("⚠ only 3 scenarios: a rough guide")
    assert "fewer than 4 scenarios" in table.note
