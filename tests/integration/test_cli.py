"""Every `itbench` verb through click's runner: output formats, streams and exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from itbench import __version__
from itbench.cli.main import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests/fixtures/broken_scenarios"
EXAMPLES = ["cart-flagd-failure", "checkout-nonexistent-image", "product-catalog-ingress-blocked"]


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A copy of the three example scenarios."""
    root = tmp_path / "scenarios"
    for name in EXAMPLES:
        shutil.copytree(ROOT / "scenarios/sre" / name, root / "sre" / name)
    return root


def test_main_registers_one_group_per_noun() -> None:
    assert {c.name for c in COMMANDS} >= {
        "version",
        "scenarios",
        "faults",
        "crds",
        "report",
        "run",
        "serve",
    }
    assert set(cli.commands) >= {"version", "scenarios", "faults", "crds"}


def test_version_prints_package_and_api_version() -> None:
    result = run("version")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"itbench {__version__} (API itbench.io/v1alpha1")
    data = json.loads(run("version", "-o", "json").stdout)
    assert (data["version"], data["apiVersion"]) == (__version__, "itbench.io/v1alpha1")


def test_scenarios_list_table_and_json(catalog: Path) -> None:
    table = run("scenarios", "list", "--scenarios-dir", str(catalog))
    assert table.exit_code == 0
    assert "3 scenarios" in table.stdout
    for name in EXAMPLES:
        assert name in table.stdout
    rows = json.loads(
        run("scenarios", "list", "--scenarios-dir", str(catalog), "-o", "json").stdout
    )
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == set(EXAMPLES)
    assert by_name["checkout-nonexistent-image"]["complexity"] == "Easy"
    assert by_name["checkout-nonexistent-image"]["score"] == pytest.approx(1.5874)
    assert by_name["cart-flagd-failure"]["faults"] == ["flagd.cart-failure"]


def test_scenarios_list_filters_and_yaml(catalog: Path) -> None:
    result = run(
        "scenarios", "list", "--scenarios-dir", str(catalog), "--complexity", "easy", "-o", "yaml"
    )
    assert result.exit_code == 0
    assert [r["name"] for r in yaml.safe_load(result.stdout)] == ["checkout-nonexistent-image"]


def test_scenarios_dir_comes_from_the_environment(catalog: Path) -> None:
    for var in ("ITBENCH_SCENARIOS_DIR", "ITBENCH_CATALOG__SCENARIOS_DIR"):
        result = run("scenarios", "list", "-o", "json", env={var: str(catalog)})
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.stdout)) == 3


def test_scenarios_list_warns_on_stderr_and_lists_the_valid_ones(catalog: Path) -> None:
    shutil.copytree(BROKEN / "wrong-enum", catalog / "sre" / "wrong-enum")
    result = run("scenarios", "list", "--scenarios-dir", str(catalog), "-o", "json")
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)) == 3
    assert "1 problem(s)" in result.stderr and "itbench scenarios validate" in result.stderr


def test_missing_scenarios_dir_is_bad_input(tmp_path: Path) -> None:
    result = run("scenarios", "list", "--scenarios-dir", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_scenarios_show_yaml_json_and_table(catalog: Path) -> None:
    name = "checkout-nonexistent-image"
    shown = yaml.safe_load(run("scenarios", "show", name, "--scenarios-dir", str(catalog)).stdout)
    source = yaml.safe_load((catalog / "sre" / name / "scenario.yaml").read_text())
    assert shown["metadata"]["name"] == name
    assert shown["spec"]["faults"] == source["spec"]["faults"]
    as_json = json.loads(
        run("scenarios", "show", name, "--scenarios-dir", str(catalog), "-o", "json").stdout
    )
    assert as_json == shown
    table = run("scenarios", "show", name, "--scenarios-dir", str(catalog), "-o", "table")
    assert "Complexity: Easy (Eq. 6 score 1.59)" in table.stdout
    assert "Root causes: Deployment/checkout" in table.stdout


def test_scenarios_show_unknown_name_exits_2_naming_known_ones(catalog: Path) -> None:
    result = run("scenarios", "show", "nope", "--scenarios-dir", str(catalog))
    assert result.exit_code == 2
    assert "unknown scenario: nope" in result.stderr
    assert "cart-flagd-failure" in result.stderr
    assert result.stdout == ""


def test_validate_passes_on_the_repository_catalog() -> None:
    result = run("scenarios", "validate", str(ROOT / "scenarios"))
    assert result.exit_code == 0, result.stderr
    assert "scenario(s) valid" in result.stdout
    assert result.stderr == ""


def test_validate_defaults_to_the_catalog_directory(catalog: Path) -> None:
    result = run("scenarios", "validate", env={"ITBENCH_CATALOG__SCENARIOS_DIR": str(catalog)})
    assert result.exit_code == 0
    assert result.stdout.startswith("3 scenario(s) valid")


CASES = {
    "yaml-syntax": ("<document>", "YAML syntax error at line 10, column 8"),
    "missing-field": ("spec.description", "required field is missing"),
    "wrong-enum": ("spec.domain", "Input should be 'SRE', 'CISO' or 'FinOps', got 'Finance'"),
    "unknown-fault": ("spec.faults[0].id", "unknown fault id 'kubernetes.no-such-fault'"),
    "bad-fault-args": ("spec.faults[0].args.port", "less than or equal to 65535"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_broken_file_exits_2_naming_file_path_and_reason(case: str) -> None:
    path = BROKEN / case / "scenario.yaml"
    result = run("scenarios", "validate", str(path))
    field, reason = CASES[case]
    assert result.exit_code == 2
    line = next(ln for ln in result.stderr.splitlines() if ln.startswith(str(path)))
    assert line.startswith(f"{path}: {field}: ")
    assert reason in line
    assert "1 problem(s) in 1 file(s)" in result.stderr


def test_validate_reports_duplicate_names_across_files() -> None:
    result = run("scenarios", "validate", str(BROKEN / "duplicate-a"), str(BROKEN / "duplicate-b"))
    assert result.exit_code == 2
    second = BROKEN / "duplicate-b" / "scenario.yaml"
    first = BROKEN / "duplicate-a" / "scenario.yaml"
    expected = f"{second}: metadata.name: duplicate scenario name 'duplicate-name'"
    assert f"{expected} (also defined in {first})" in result.stderr


def test_validate_a_directory_reports_every_problem_and_json_report() -> None:
    result = run("scenarios", "validate", str(BROKEN), "-o", "json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    found = {(Path(p["file"]).parent.name, p["path"]) for p in report["problems"]}
    assert found == {
        ("yaml-syntax", ""),
        ("missing-field", "spec.description"),
        ("wrong-enum", "spec.domain"),
        ("unknown-fault", "spec.faults[0].id"),
        ("bad-fault-args", "spec.faults[0].args.port"),
        ("duplicate-b", "metadata.name"),
    }
    assert report["valid"] == ["duplicate-name"]


def test_validate_checks_the_directory_layout(tmp_path: Path) -> None:
    target = tmp_path / "finops" / "renamed"
    shutil.copytree(ROOT / "scenarios/sre/cart-flagd-failure", target)
    result = run("scenarios", "validate", str(tmp_path))
    assert result.exit_code == 2
    path = target / "scenario.yaml"
    assert f"{path}: metadata.name: name 'cart-flagd-failure' differs from its directory" in (
        result.stderr
    )
    assert f"{path}: spec.domain: domain SRE in a finops/ directory" in result.stderr


def test_validate_refuses_a_file_with_two_documents(tmp_path: Path) -> None:
    text = (ROOT / "scenarios/sre/cart-flagd-failure/scenario.yaml").read_text()
    path = tmp_path / "two.yaml"
    path.write_text(text + "---\n" + text)
    result = run("scenarios", "validate", str(path))
    assert result.exit_code == 2
    assert f"{path}: <document>: expected one YAML document, found 2" in result.stderr


def test_validate_nonexistent_path_is_a_usage_error(tmp_path: Path) -> None:
    result = run("scenarios", "validate", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_faults_list_table_and_json() -> None:
    table = run("faults", "list")
    assert table.exit_code == 0
    assert "kubernetes.block-ingress" in table.stdout
    rows = {r["id"]: r for r in json.loads(run("faults", "list", "-o", "json").stdout)}
    assert {"flagd.cart-failure", "kubernetes.nonexistent-image"} <= set(rows)
    assert rows["kubernetes.block-ingress"]["argsSchema"]["required"] == ["workload", "port"]


def test_faults_show_prints_the_args_schema_and_rejects_unknown_ids() -> None:
    shown = yaml.safe_load(run("faults", "show", "kubernetes.block-ingress").stdout)
    assert shown["mechanism"] == "kubernetes"
    assert shown["argsSchema"]["properties"]["port"]["maximum"] == 65535
    table = run("faults", "show", "kubernetes.block-ingress", "-o", "table")
    assert table.stdout.startswith("kubernetes.block-ingress (kubernetes):")
    unknown = run("faults", "show", "nope")
    assert unknown.exit_code == 2
    assert "unknown fault id 'nope'" in unknown.stderr


def test_crds_generate_writes_every_file(tmp_path: Path) -> None:
    result = run(
        "crds",
        "generate",
        "--output-dir",
        str(tmp_path / "c"),
        "--chart-dir",
        str(tmp_path / "h"),
        "--schema-dir",
        str(tmp_path / "s"),
    )
    assert result.exit_code == 0
    assert "15 files generated (15 changed)" in result.stdout
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted(
        p.name for p in (tmp_path / "h").iterdir()
    )
    assert (tmp_path / "s" / "scenario.schema.json").is_file()


def test_invalid_settings_exit_2_naming_the_variable() -> None:
    result = run("version", env={"ITBENCH_GATEWAY__PORT": "not-a-port"})
    assert result.exit_code == 2
    assert "ITBENCH_GATEWAY__PORT" in result.stderr


def test_unknown_output_format_is_a_usage_error() -> None:
    result = run("scenarios", "list", "-o", "xml")
    assert result.exit_code == 2
    assert "Invalid value for '--output'" in result.stderr


def test_scenarios_selftest_runs_named_scenarios_in_the_simulator() -> None:
    result = run("scenarios", "selftest", "cart-flagd-failure", "--output", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows == [
        {
            "scenario": "cart-flagd-failure",
            "parameters": {},
            "instance": "-",
            "passed": True,
            "checks": rows[0]["checks"],
            "failed": "",
        }
    ]
    assert rows[0]["checks"] >= 8


def test_scenarios_selftest_unknown_name_is_bad_input() -> None:
    result = run("scenarios", "selftest", "no-such-scenario")
    assert result.exit_code == 2
    assert "no-such-scenario" in result.stderr
