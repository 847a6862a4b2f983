"""Templates, invalid files and splits through the CLI: expand, show, selftest and run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from itbench.cli.main import cli
from itbench.core.models.report import Report, TrialRecord
from itbench.execution.plan import TrialPlan

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "consumer-pod-failure"
SECRET = "a-secret-nobody-publishes-0123"


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A catalog of one template and one plain scenario."""
    root = tmp_path / "scenarios"
    for name in (TEMPLATE, "cart-flagd-failure"):
        shutil.copytree(ROOT / "scenarios/sre" / name, root / "sre" / name)
    return root


def test_expand_prints_the_instance_a_seed_draws_and_the_same_seed_gives_the_same(
    catalog: Path,
) -> None:
    first = run("scenarios", "expand", TEMPLATE, "--seed", "3", "--scenarios-dir", str(catalog))
    again = run("scenarios", "expand", TEMPLATE, "--seed", "3", "--scenarios-dir", str(catalog))
    assert first.exit_code == 0, first.output
    assert first.stdout == again.stdout
    doc = yaml.safe_load(first.stdout)
    assert doc["kind"] == "Scenario" and "parameters" not in doc["spec"]
    workload = doc["spec"]["faults"][0]["args"]["workload"]
    assert workload in {"fraud-detection", "accounting"}
    assert json.loads(doc["metadata"]["annotations"]["itbench.io/parameters"]) == {
        "target": workload
    }
    assert "${" not in first.stdout


def test_expand_count_shows_every_choice_over_seeds(catalog: Path) -> None:
    result = run(
        "scenarios", "expand", TEMPLATE, "--count", "16", "-o", "json",
        "--scenarios-dir", str(catalog),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    drawn = json.loads(result.stdout)
    assert [d["seed"] for d in drawn] == list(range(16))
    assert {d["parameters"]["target"] for d in drawn} == {"fraud-detection", "accounting"}
    docs = list(yaml.safe_load_all(run(
        "scenarios", "expand", TEMPLATE, "--count", "2", "--scenarios-dir", str(catalog)
    ).stdout))  # fmt: skip
    assert len(docs) == 2


def test_a_plain_scenario_expands_to_itself(catalog: Path) -> None:
    shown = run("scenarios", "expand", "cart-flagd-failure", "--seed", "9", "-o", "json",
                "--scenarios-dir", str(catalog))  # fmt: skip
    assert shown.exit_code == 0, shown.output
    (drawn,) = json.loads(shown.stdout)
    assert drawn["parameters"] == {}
    assert drawn["scenario"]["metadata"]["name"] == "cart-flagd-failure"


def test_show_prints_a_template_as_written_with_its_parameters(catalog: Path) -> None:
    result = run("scenarios", "show", TEMPLATE, "--scenarios-dir", str(catalog))
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["spec"]["parameters"]["target"]["choices"] == [
        "fraud-detection",
        "accounting",
    ]
    table = run("scenarios", "show", TEMPLATE, "-o", "table", "--scenarios-dir", str(catalog))
    assert "target in fraud-detection | accounting (2 instances)" in table.stdout


def test_show_and_run_of_an_invalid_file_name_the_file_and_field(
    catalog: Path, tmp_path: Path
) -> None:
    path = catalog / "sre" / "cart-flagd-failure" / "scenario.yaml"
    path.write_text(path.read_text().replace("alertname: RequestErrorRate", "alertname: Nope"))
    shown = run("scenarios", "show", "cart-flagd-failure", "--scenarios-dir", str(catalog))
    assert shown.exit_code == 2
    assert "unknown scenario" not in shown.stderr
    assert f"{path}: spec.triggers.alerts[0].alertname: no alert rule defines 'Nope'" in (
        shown.stderr
    )
    ran = run("run", "--scenario", TEMPLATE, "--agent", "null", "--output-dir", str(tmp_path),
              "--scenarios-dir", str(catalog))  # fmt: skip
    assert ran.exit_code == 2
    assert "cannot run the benchmark" in ran.stderr
    assert f"{path}: spec.triggers.alerts[0].alertname" in ran.stderr


def test_run_refuses_two_files_with_the_same_scenario_name(catalog: Path, tmp_path: Path) -> None:
    # Outside <domain>/<id>/ the layout is not enforced, so only the name repeats.
    twin = catalog / "extra" / "copy"
    shutil.copytree(catalog / "sre" / "cart-flagd-failure", twin)
    ran = run("run", "--agent", "null", "--output-dir", str(tmp_path),
              "--scenarios-dir", str(catalog))  # fmt: skip
    assert ran.exit_code == 2
    assert "duplicate scenario name 'cart-flagd-failure'" in ran.stderr
    shown = run("scenarios", "show", "cart-flagd-failure", "--scenarios-dir", str(catalog))
    assert shown.exit_code == 2 and "duplicate scenario name" in shown.stderr


def test_selftest_all_instances_runs_every_instance(catalog: Path) -> None:
    result = run("scenarios", "selftest", TEMPLATE, "--all-instances", "-o", "json",
                 "--scenarios-dir", str(catalog))  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["parameters"] for r in rows] == [
        {"target": "fraud-detection"},
        {"target": "accounting"},
    ]
    assert all(r["passed"] for r in rows)


def _run_split(catalog: Path, out: Path, name: str, *extra: str, env: dict[str, str] | None = None
               ) -> Result:  # fmt: skip
    return run("run", "--scenario", TEMPLATE, "--agent", "null", "--trials", "3", "--workers",
               "1", "--output-dir", str(out), "--run-name", name, "--scenarios-dir", str(catalog),
               *extra, env=env)  # fmt: skip


def test_test_split_needs_a_long_enough_secret(catalog: Path, tmp_path: Path) -> None:
    missing = _run_split(catalog, tmp_path, "a", "--split", "test")
    assert missing.exit_code == 2 and "needs --seed-secret" in missing.stderr
    short = _run_split(catalog, tmp_path, "b", "--split", "test", "--seed-secret", "hunter2")
    assert short.exit_code == 2 and "at least 16 characters" in short.stderr
    assert "hunter2" not in short.output


def test_the_test_split_draws_from_the_secret_and_never_writes_it(
    catalog: Path, tmp_path: Path
) -> None:
    result = _run_split(catalog, tmp_path, "hidden", "--split", "test",
                        env={"ITBENCH_SEED_SECRET": SECRET})  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "hidden"
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    assert SECRET not in result.output
    records = [
        TrialRecord.model_validate_json(line)
        for line in (run_dir / "trials.jsonl").read_text().splitlines()
    ]
    assert {r.split.value for r in records} == {"test"}
    assert all(r.parameters["target"] in {"fraud-detection", "accounting"} for r in records)
    assert all(r.catalog_digest.startswith("sha256:") for r in records)
    report = Report.model_validate_json((run_dir / "report.json").read_text())
    assert report.split is not None and report.split.value == "test"
    assert report.catalog_digest == records[0].catalog_digest
    plans = [TrialPlan.model_validate(p) for p in json.loads((run_dir / "plan.json").read_text())]
    for plan, record in zip(plans, records, strict=True):
        target = record.parameters["target"]
        assert plan.scenario.spec.faults[0].args["workload"] == target

    again = _run_split(catalog, tmp_path, "hidden-again", "--split", "test",
                       "--seed-secret", SECRET)  # fmt: skip
    assert again.exit_code == 0, again.output
    same = (tmp_path / "hidden-again" / "trials.jsonl").read_text().splitlines()
    assert [TrialRecord.model_validate_json(x).parameters for x in same] == [
        r.parameters for r in records
    ]


def test_the_dev_split_is_what_expand_shows_for_the_run_seed(catalog: Path, tmp_path: Path) -> None:
    result = _run_split(catalog, tmp_path, "public", "--seed", "5",
                        env={"ITBENCH_SEED_SECRET": SECRET})  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [
        TrialRecord.model_validate_json(line)
        for line in (tmp_path / "public" / "trials.jsonl").read_text().splitlines()
    ]
    shown = run("scenarios", "expand", TEMPLATE, "--seed", "5", "-o", "json",
                "--scenarios-dir", str(catalog))  # fmt: skip
    expected = json.loads(shown.stdout)[0]["parameters"]
    assert {r.split.value for r in records} == {"dev"}
    assert [r.parameters for r in records] == [expected] * 3
