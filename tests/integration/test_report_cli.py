"""`itbench report recompute` and `itbench report compare` through click's runner, and the report
files they read and write."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from itbench.cli.report import report_group
from itbench.core.models.base import Complexity, Domain
from itbench.core.models.report import Report, RunComparison, TrialRecord
from itbench.core.models.trial import DiagnosisScores, MitigationScores, TrialPhase, TrialScores
from itbench.core.scoring import DEFAULT_PROFILE, build_report
from itbench.reports import (
    TrialRecordError,
    load_trial_records,
    render_markdown,
    save_trial_records,
    write_report_json,
)

STAMP = "2026-01-01T00:00:00+00:00"


def record(
    scenario: str, attempt: int, passed: bool, *, phase: TrialPhase | None = None
) -> TrialRecord:
    final = phase or (TrialPhase.SUCCEEDED if passed else TrialPhase.FAILED)
    return TrialRecord(
        trial=f"{scenario}-{attempt}",
        run="run-1",
        scenario=scenario,
        attempt=attempt,
        domain=Domain.SRE,
        scenario_class="ServiceFailure",
        complexity=Complexity.MEDIUM,
        traces_enabled=scenario != "checkout-nonexistent-image",
        phase=final,
        reason="FaultDidNotManifest" if final == TrialPhase.ERRORED else "",
        scores=None
        if final == TrialPhase.ERRORED
        else TrialScores(
            profile="default@1",
            diagnosis=DiagnosisScores(
                passed=passed, fl_ntam=1.0 if passed else 0.0, fpc_ntam=0.5, ttd_seconds=72.0
            ),
            mitigation=MitigationScores(passed=passed, ttr_seconds=282.0 if passed else None),
        ),
        agent="sre-baseline",
    )


@pytest.fixture
def trials_file(tmp_path: Path) -> Path:
    records = [
        record("cart-flagd-failure", 0, True),
        record("cart-flagd-failure", 1, False),
        record("checkout-nonexistent-image", 0, False),
        record("checkout-nonexistent-image", 1, False, phase=TrialPhase.ERRORED),
    ]
    path = tmp_path / "run-1" / "trials.jsonl"
    save_trial_records(records, path)
    return path


def test_trial_records_round_trip_through_json_lines(trials_file: Path) -> None:
    records = load_trial_records(trials_file.parent)  # a directory finds trials.jsonl
    assert [r.trial for r in records] == [
        "cart-flagd-failure-0",
        "cart-flagd-failure-1",
        "checkout-nonexistent-image-0",
        "checkout-nonexistent-image-1",
    ]
    assert json.loads(trials_file.read_text().splitlines()[0])["scenarioClass"] == "ServiceFailure"


def test_bad_trial_records_are_reported_with_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    good = record("a", 0, True).wire()
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "attempt": -1}) + "\n")
    with pytest.raises(TrialRecordError, match=r"trials.jsonl:3: attempt: "):
        load_trial_records(path)
    with pytest.raises(TrialRecordError, match="cannot read"):
        load_trial_records(tmp_path / "missing.jsonl")


def test_recompute_prints_a_json_report_with_profile_and_errored_bucket(trials_file: Path) -> None:
    result = CliRunner().invoke(
        report_group,
        ["recompute", "--trials", str(trials_file), "--output", "json", "--created-at", STAMP],
    )
    assert result.exit_code == 0, result.output
    report = Report.model_validate_json(result.output)
    assert report.profile == "default@1"
    assert report.agent == "sre-baseline"
    assert report.errored.count == 1
    diagnosis = report.task("sre.diagnosis")
    assert diagnosis is not None
    assert diagnosis.pass_at_k[0].estimate.mean == 0.25  # (1/2 + 0/1) / 2 scenarios


def test_recompute_is_reproducible_and_can_write_the_json_file(
    trials_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    args = ["recompute", "--trials", str(trials_file), "--output", "json", "--created-at", STAMP]
    first = CliRunner().invoke(report_group, [*args, "--write", str(out)])
    second = CliRunner().invoke(report_group, args)
    assert first.exit_code == second.exit_code == 0
    assert first.output == second.output
    assert json.loads(out.read_text()) == json.loads(first.output)


def test_recompute_markdown_labels_every_number(trials_file: Path) -> None:
    result = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(trials_file), "--created-at", STAMP]
    )
    assert result.exit_code == 0, result.output
    text = result.output
    assert "evaluation profile: `default@1`" in text
    assert "| sre-baseline | 4 (1 succeeded, 2 failed, 1 errored) | 25.0 % ± 25.0 (≥ 25.0 %) |" in (
        text
    )
    assert "| SRE diagnosis pass@1 (root cause named) |" in text
    assert "SRE end-to-end resolution rate (diagnosis and mitigation both passed" in text
    assert "| sre-baseline | 1 | 2 | Unknown 2 | FaultDidNotManifest 1 |" in text
    assert "| sre-baseline | checkout-nonexistent-image-1 | checkout-nonexistent-image | " in text
    assert "## Breakdown: Traces on / off" in text and "| traces-off | sre-baseline |" in text


def test_unknown_profile_is_a_usage_error(trials_file: Path) -> None:
    result = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(trials_file), "--profile", "nope@9"]
    )
    assert result.exit_code == 2
    assert "unknown evaluation profile 'nope@9'; known: default@1, default@2" in result.output


def test_missing_trials_file_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(tmp_path / "none.jsonl")]
    )
    assert result.exit_code == 2
    assert "cannot read trial records" in result.output


def test_write_report_json_and_markdown_render_the_same_report(tmp_path: Path) -> None:
    report = build_report(
        [record("a", 0, True)],
        DEFAULT_PROFILE,
        agent="sre-baseline",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    path = tmp_path / "out" / "report.json"
    write_report_json(report, path)
    assert Report.model_validate_json(path.read_text()) == report
    markdown = render_markdown(report)
    assert markdown.startswith("# ITBench report: sre-baseline\n")
    assert "| SRE mean time to diagnosis, seconds (correct diagnoses only) |" in markdown
    assert "| sre-baseline | 100.0 % (≥ 100.0 %) | 1.000 | 0.500 | 72 s (1/1) | 282 s (1/1) |" in (
        markdown
    )
    assert "None." in markdown  # no errored trials


def test_records_scored_under_another_profile_are_refused(tmp_path: Path) -> None:
    other = record("a", 0, True)
    assert other.scores is not None
    other = other.model_copy(
        update={"scores": other.scores.model_copy(update={"profile": "strict@2"})}
    )
    path = tmp_path / "trials.jsonl"
    save_trial_records([other], path)
    result = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(path), "--profile", "default"]
    )
    assert result.exit_code == 2
    assert "trials were scored with strict@2, not default@5" in result.output
    by_default = CliRunner().invoke(report_group, ["recompute", "--trials", str(path)])
    assert by_default.exit_code == 2, "an unknown profile of the records is named, not guessed"
    assert "unknown evaluation profile 'strict@2'" in by_default.output


def test_records_of_several_agents_get_one_row_each_and_agent_selects(tmp_path: Path) -> None:
    mine = record("a", 0, True)
    theirs = record("a", 1, False).model_copy(update={"agent": "other-agent"})
    path = tmp_path / "trials.jsonl"
    save_trial_records([mine, theirs], path)
    both = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(path), "--output", "json"]
    )
    assert both.exit_code == 0, both.output
    report = Report.model_validate_json(both.output)
    assert [a.agent for a in report.agents] == ["sre-baseline", "other-agent"]
    assert report.tasks == [], "agents are not pooled unless asked"
    assert len(report.comparisons) == 2, "one per task both agents have"
    pooled = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(path), "--output", "json", "--pooled"]
    )
    pooled_report = Report.model_validate_json(pooled.output)
    assert pooled_report.pooled and pooled_report.task("sre.diagnosis") is not None
    chosen = CliRunner().invoke(
        report_group,
        ["recompute", "--trials", str(path), "--agent", "other-agent", "--output", "json"],
    )
    assert chosen.exit_code == 0, chosen.output
    report = Report.model_validate_json(chosen.output)
    assert (report.agent, report.trials, report.failed) == ("other-agent", 1, 1)
    unknown = CliRunner().invoke(report_group, ["recompute", "--trials", str(path), "--agent", "x"])
    assert unknown.exit_code == 2
    assert "no trials of agent(s) x (agents: other-agent, sre-baseline)" in unknown.output


def test_recompute_reads_records_written_before_tasks_and_split_controls(tmp_path: Path) -> None:
    """A trials.jsonl line of the earlier format: no `tasks`, no collateral, no false alarm."""
    old = {
        "trial": "heuristic-sre--cart-flagd-failure--0",
        "run": "run-old",
        "scenario": "cart-flagd-failure",
        "attempt": 0,
        "domain": "SRE",
        "scenarioClass": "ServiceFailure",
        "complexity": "Easy",
        "tracesEnabled": True,
        "phase": "Succeeded",
        "reason": "TasksPassed",
        "agent": "heuristic-sre",
        "scores": {
            "profile": "default@1",
            "diagnosis": {"passed": True, "flNtam": 1.0, "fpcNtam": 1.0, "ttdSeconds": 30.0},
            "mitigation": {"passed": True, "ttrSeconds": 90.0},
        },
    }
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(old) + "\n")
    result = CliRunner().invoke(
        report_group,
        ["recompute", "--trials", str(path), "--output", "json", "--created-at", STAMP],
    )
    assert result.exit_code == 0, result.output
    report = Report.model_validate_json(result.output)
    assert report.profile == "default@1"
    assert [t.key for t in report.tasks] == ["sre.diagnosis", "sre.mitigation"]
    assert all(t.pass_at_k[0].estimate.mean == 1.0 for t in report.tasks)


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    names = ["cart-flagd-failure", "checkout-nonexistent-image", "ad-high-cpu"]
    first = [record(n, i, True) for n in names for i in range(2)]
    second = [record(n, i, n == names[0]) for n in names for i in range(2)]
    second += [record(n, 0, False).model_copy(update={"agent": "null"}) for n in names]
    save_trial_records(first, tmp_path / "a" / "trials.jsonl")
    save_trial_records(second, tmp_path / "b" / "trials.jsonl")
    return tmp_path / "a", tmp_path / "b"


def test_compare_pairs_the_same_agent_across_two_runs(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    result = CliRunner().invoke(
        report_group,
        ["compare", str(a), str(b), "--output", "json", "--created-at", STAMP],
    )
    assert result.exit_code == 0, result.output
    comparison = RunComparison.model_validate_json(result.output)
    assert [x.agent for x in comparison.a.agents] == ["sre-baseline"]
    assert [x.agent for x in comparison.b.agents] == ["sre-baseline", "null"]
    diagnosis = next(c for c in comparison.comparisons if c.task == "sre.diagnosis")
    assert (diagnosis.a, diagnosis.b, diagnosis.scenarios) == (
        "A:sre-baseline",
        "B:sre-baseline",
        3,
    )
    assert diagnosis.difference == pytest.approx(2 / 3)
    markdown = CliRunner().invoke(report_group, ["compare", str(a), str(b), "--created-at", STAMP])
    assert markdown.exit_code == 0, markdown.output
    assert "## Run A: Agents by task (pass@1)" in markdown.output
    assert "## Run B: Agents by task (pass@1)" in markdown.output
    assert "| SRE diagnosis pass@1 | A:sre-baseline | B:sre-baseline | 3 | 100.0 % | 33.3 % |" in (
        markdown.output
    )


def test_compare_names_the_agents_of_each_side(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_runs
    out = tmp_path / "comparison.json"
    result = CliRunner().invoke(
        report_group,
        [
            "compare",
            str(a),
            str(b),
            "--agent-a",
            "sre-baseline",
            "--agent-b",
            "null",
            "--output",
            "json",
            "--write",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    comparison = RunComparison.model_validate_json(out.read_text())
    assert {(c.a, c.b) for c in comparison.comparisons} == {("A:sre-baseline", "B:null")}
    half = CliRunner().invoke(report_group, ["compare", str(a), str(b), "--agent-a", "x"])
    assert half.exit_code == 2 and "name both --agent-a and --agent-b" in half.output
    missing = CliRunner().invoke(
        report_group, ["compare", str(a), str(b), "--agent-a", "x", "--agent-b", "null"]
    )
    assert missing.exit_code == 2 and "no trials of agent 'x'" in missing.output


def test_a_run_whose_errored_trials_change_pass_at_1_is_flagged(tmp_path: Path) -> None:
    records = [record("a", 0, True), record("a", 1, False, phase=TrialPhase.ERRORED)]
    path = tmp_path / "trials.jsonl"
    save_trial_records(records, path)
    markdown = CliRunner().invoke(report_group, ["recompute", "--trials", str(path)])
    assert markdown.exit_code == 0, markdown.output
    assert "- **Flagged:** ⚑: Errored trials change this number" in markdown.output
    assert "| 100.0 % (≥ 50.0 %) ⚑ |" in markdown.output
    wire = json.loads(
        CliRunner()
        .invoke(report_group, ["recompute", "--trials", str(path), "--output", "json"])
        .output
    )
    assert wire["lowerBoundDiffers"] is True
    assert wire["agents"][0]["tasks"][0]["lowerBound"]["mean"] == 0.5


def test_a_cluster_runs_errored_trials_name_the_cluster_they_ran_on(tmp_path: Path) -> None:
    east = "team-a/lab-east (https://10.0.0.1:6443)"
    west = "team-a/lab-west (https://10.0.0.2:6443)"
    records = [
        record("cart-flagd-failure", 0, True).model_copy(update={"cluster": east}),
        record("cart-flagd-failure", 1, False, phase=TrialPhase.ERRORED).model_copy(
            update={"cluster": west, "reason": "EnvironmentFailure"}
        ),
    ]
    path = tmp_path / "trials.jsonl"
    save_trial_records(records, path)
    assert [r.cluster for r in load_trial_records(path)] == [east, west], "kept in the records"
    result = CliRunner().invoke(
        report_group, ["recompute", "--trials", str(path), "--created-at", STAMP]
    )
    assert result.exit_code == 0, result.output
    assert "| Agent | Trial | Scenario | Cluster | Reason |" in result.output
    assert (
        f"| sre-baseline | cart-flagd-failure-1 | cart-flagd-failure | {west} | "
        "EnvironmentFailure |"
    ) in result.output
    at = datetime.fromisoformat(STAMP)
    report = build_report(records, DEFAULT_PROFILE, agent="sre-baseline", created_at=at)
    [errored] = report.agents[0].errored.trials
    assert errored.cluster == west
    # Simulator runs keep the table they had.
    simulated = [r.model_copy(update={"cluster": ""}) for r in records]
    plain = render_markdown(
        build_report(simulated, DEFAULT_PROFILE, agent="sre-baseline", created_at=at)
    )
    assert "| Agent | Trial | Scenario | Reason |" in plain and "Cluster" not in plain
