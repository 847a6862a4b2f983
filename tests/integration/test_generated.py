"""The checked-in crds/, chart CRD copy and schemas/ equal what the models generate today."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from itbench.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {
    "crds": ROOT / "crds",
    "chart": ROOT / "charts/itbench/crds",
    "schemas": ROOT / "schemas",
}


def _generate(tmp: Path) -> dict[str, Path]:
    out = {k: tmp / k for k in TARGETS}
    result = CliRunner().invoke(
        cli,
        [
            "crds",
            "generate",
            "--output-dir",
            str(out["crds"]),
            "--chart-dir",
            str(out["chart"]),
            "--schema-dir",
            str(out["schemas"]),
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def _files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())}


def test_checked_in_generated_files_are_up_to_date(tmp_path: Path) -> None:
    fresh = _generate(tmp_path)
    for key, checked_in in TARGETS.items():
        expected = _files(fresh[key])
        assert expected, key
        assert _files(checked_in) == expected, f"{checked_in} is stale: run `make generate`"


def test_check_flag_fails_on_a_stale_or_leftover_file(tmp_path: Path) -> None:
    out = _generate(tmp_path)
    args = [
        "crds",
        "generate",
        "--check",
        "--output-dir",
        str(out["crds"]),
        "--chart-dir",
        str(out["chart"]),
        "--schema-dir",
        str(out["schemas"]),
    ]
    assert CliRunner().invoke(cli, args).exit_code == 0
    scenario_crd = out["crds"] / "itbench.io_scenarios.yaml"
    scenario_crd.write_text(scenario_crd.read_text() + "# edited by hand\n")
    (out["schemas"] / "old.schema.json").write_text("{}")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert f"stale: {scenario_crd}" in result.output
    assert "left over: " in result.output and "old.schema.json" in result.output


def test_generate_rewrites_stale_files_and_removes_leftovers(tmp_path: Path) -> None:
    out = _generate(tmp_path)
    leftover = out["crds"] / "itbench.io_oldkinds.yaml"
    leftover.write_text("kind: CustomResourceDefinition\n")
    (out["crds"] / "itbench.io_trials.yaml").write_text("broken")
    _generate(tmp_path)
    assert not leftover.exists()
    trial = yaml.safe_load((out["crds"] / "itbench.io_trials.yaml").read_text())
    assert trial["metadata"]["name"] == "trials.itbench.io"


def test_generated_yaml_has_no_anchors_and_a_do_not_edit_header(tmp_path: Path) -> None:
    out = _generate(tmp_path)
    for path in out["crds"].iterdir():
        text = path.read_text()
        assert text.startswith("# Generated from itbench/core/models by `make generate`")
        assert "&id" not in text and "*id" not in text


def test_the_charts_catalog_bundle_is_up_to_date_and_holds_every_scenario(tmp_path: Path) -> None:
    bundle = ROOT / "charts/itbench/files/catalog.yaml"
    result = CliRunner().invoke(
        cli,
        [
            "scenarios",
            "bundle",
            "--scenarios-dir",
            str(ROOT / "scenarios"),
            "-o",
            str(bundle),
            "--check",
        ],
    )
    assert result.exit_code == 0, f"{result.output}: run `make generate`"
    docs = [d for d in yaml.safe_load_all(bundle.read_text(encoding="utf-8")) if d]
    on_disk = sorted((ROOT / "scenarios").rglob("scenario.yaml"))
    assert len(docs) == len(on_disk)
    assert {d["metadata"]["name"] for d in docs} == {p.parent.name for p in on_disk}
    assert all(d["kind"] == "Scenario" for d in docs)


def test_bundle_refuses_an_invalid_catalog_and_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "scenarios" / "sre" / "broken"
    broken.mkdir(parents=True)
    (broken / "scenario.yaml").write_text(
        "apiVersion: itbench.io/v1alpha1\nkind: Scenario\nmetadata: {name: broken}\nspec: {}\n",
        encoding="utf-8",
    )
    out = tmp_path / "bundle.yaml"
    result = CliRunner().invoke(
        cli, ["scenarios", "bundle", "--scenarios-dir", str(tmp_path / "scenarios"), "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "broken/scenario.yaml" in result.output and "spec" in result.output
    assert not out.exists(), "nothing is written when the catalog is invalid"
