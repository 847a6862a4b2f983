"""Fuzzing the scenario-file door: hostile files never crash, hang or flood the CLI.

The invariant, for the corpus of known-bad files and for generated ones: `itbench scenarios
validate` exits 2 naming the file and the field path (or the line and column for a YAML-level
refusal), its output stays under 16 KiB, and no traceback escapes. Budget: the hypothesis
properties draw 300 documents and 200 texts (derandomized, so CI sees the same inputs every
run); the module takes about 25 s of CPU (under 60 s of wall time on the shared two-core
development machine), and its subprocess guard gives the whole corpus 120 s before calling it a
hang (it needs under 3 s).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings

from itbench.catalog_files import load_tree
from itbench.cli.main import cli
from itbench.core.catalog import MAX_PROBLEMS, validate_template
from tests.integration.scenario_strategies import hostile_documents, hostile_texts

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/fixtures/hostile_scenarios"
MAX_OUTPUT = 16 * 1024
"""Bytes of output one refusal may print."""
MAX_PROBLEM_CHARS = 1200
"""Characters of one printed problem (file, path and reason)."""

DOCUMENT = "<document>"
EXPECTED: dict[str, tuple[str, str]] = {
    "alias-bomb": (DOCUMENT, "the document expands to more than 50000 nodes"),
    "deep-nesting": (DOCUMENT, "nesting deeper than 64 levels"),
    "duplicate-keys": (DOCUMENT, "line 16, column 3: duplicate key 'domain' (first at line 14)"),
    "infinite-cost": ("spec.groundTruth.finops.costPerHour", "inf is not a finite number"),
    "nan-cost": ("spec.groundTruth.finops.cpuCores", "nan is not a finite number"),
    "bidi-control-name": ("spec.groundTruth.entities[1].name", "character U+202E at offset 5"),
    "zero-width-name": ("metadata.name", "character U+200B at offset 10"),
    "missing-kind": ("kind", "required field is missing (kubectl apply needs it)"),
    "missing-api-version": ("apiVersion", "required field is missing (kubectl apply needs it)"),
    "unknown-entity": ("spec.groundTruth.entities[2].name", "no Deployment 'storefront'"),
    "unknown-mitigation-target": (
        "spec.groundTruth.mitigations[0].steps[0].name",
        "the shop has no flag 'cartFailures'",
    ),
    "undefined-alert": ("spec.triggers.alerts[0].alertname", "no alert rule defines 'CartOnFire'"),
    "alert-label-no-rule-gives": (
        "spec.triggers.alerts[0].labels.deployment",
        "RequestErrorRate alerts carry no label 'deployment'",
    ),
    "long-value": ("spec.domain", "(100000 characters)"),
    "megabyte-value": (DOCUMENT, "the file is 1050738 bytes, more than the 131072 allowed"),
    "non-string-key": (DOCUMENT, "mapping key 7 is a int, not a string"),
    "recursive-alias": (DOCUMENT, "alias 't' refers to a node that contains it"),
    "malformed-placeholder": ("spec.title", "malformed placeholder"),
    "unknown-parameter": ("spec.title", "${nobody} names no parameter"),
    "unused-parameter": ("spec.parameters.target", "declared but never used"),
    "duplicate-names": ("metadata.name", "duplicate scenario name 'cart-flagd-failure'"),
}


DOCUMENT_LEVEL = (
    "YAML ",
    "expected one YAML document",
    "expected a Scenario object",
    "more problem(s) not listed",
)
"""How a problem about the whole document (which has no field path) begins."""


def validate(path: Path) -> Result:
    return CliRunner().invoke(cli, ["scenarios", "validate", str(path)])


def assert_contained(result: Result) -> None:
    """Exit 0 or 2 with bounded output and no traceback (a crash is a failure)."""
    assert result.exit_code in (0, 2), result.output[-2000:]
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert len(result.output.encode()) < MAX_OUTPUT
    assert "Traceback" not in result.output


def test_every_corpus_case_is_expected() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_known_bad_file_exits_2_naming_the_file_and_the_field(case: str) -> None:
    path, fragment = EXPECTED[case]
    result = validate(CORPUS / case)
    assert_contained(result)
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(str(CORPUS / case))]
    assert any(ln.split(": ", 2)[1] == path and fragment in ln for ln in lines), lines
    assert all(len(ln) < MAX_PROBLEM_CHARS for ln in lines)


def test_show_of_a_known_bad_file_names_its_file_and_field() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "scenarios",
            "show",
            "finops-cost-alert-threshold-low",
            "--scenarios-dir",
            str(CORPUS / "nan-cost"),
        ],
    )
    assert result.exit_code == 2
    assert "spec.groundTruth.finops.cpuCores: nan is not a finite number" in result.stderr
    assert "unknown scenario" not in result.stderr


def test_the_whole_corpus_is_refused_in_one_process_without_hanging() -> None:
    # The timeout is a hang guard, not a speed target (see benchmarks/bench_catalog.py).
    done = subprocess.run(
        [str(Path(sys.executable).parent / "itbench"), "scenarios", "validate", str(CORPUS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stdout) + len(done.stderr) < 4 * MAX_OUTPUT
    assert f"{len(EXPECTED)} file(s)" in done.stderr


def _outcome(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz" / "scenario.yaml"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        loaded = load_tree([path])
        assert len(loaded.problems) <= MAX_PROBLEMS + 1
        assert loaded.problems or len(loaded.catalog) == 1
        for problem in loaded.problems:
            assert problem.source == str(path)
            assert len(str(problem)) < MAX_PROBLEM_CHARS
            assert problem.path or problem.reason.startswith(DOCUMENT_LEVEL), problem
        result = validate(path)
        assert_contained(result)
        assert result.exit_code == (2 if loaded.problems else 0)


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FUZZ, max_examples=300)
@given(hostile_documents())
def test_hostile_documents_are_refused_with_field_paths_and_small_output(doc: Any) -> None:
    variants, problems = validate_template(doc, "fuzz")
    assert (variants is None) == bool(problems)
    _outcome(yaml.safe_dump(doc, allow_unicode=False, width=1000))


@settings(FUZZ, max_examples=200)
@given(hostile_texts())
def test_hostile_texts_are_refused_with_line_and_column_and_small_output(text: str) -> None:
    _outcome(text)
