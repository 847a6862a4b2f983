"""`itbench validity` through click's runner: the reference strategies stay at or below their
ceilings, a strategy that reads the ground truth is caught and named, bad flags are refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from itbench.catalog_files import load_catalog
from itbench.cli.main import cli
from itbench.core.catalog import Catalog
from itbench.core.models.base import Domain
from itbench.core.tasks import mitigation_applies
from itbench.execution.validity import reference_strategies

ROOT = Path(__file__).resolve().parents[2]
SECRET = "validity-test-secret-0123456789"
CHEAT = "tests.integration.validity_cheats:peek"
FULL = os.environ.get("ITBENCH_VALIDITY_FULL") == "1"
"""The whole catalog takes minutes per split on two cores, so `make test` runs a representative
subset and the whole catalog runs when asked for (ITBENCH_VALIDITY_FULL=1, see docs/validity.md)."""


def validity(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["validity", *args], env=env)


def catalog() -> Catalog:
    loaded, problems = load_catalog(ROOT / "scenarios")
    assert problems == []
    return loaded


def representative(cat: Catalog) -> list[str]:
    """One scenario of each kind the catalog has, per domain: a control, a fault whose cause
    the agent can reach, one it cannot, and a template with variants."""
    chosen: dict[str, None] = {}
    for domain in Domain:
        scenarios = [s for s in cat if s.spec.domain == domain]
        kinds = [
            [s for s in scenarios if s.spec.control],
            [s for s in scenarios if not s.spec.control and mitigation_applies(s)],
            [s for s in scenarios if not s.spec.control and not mitigation_applies(s)],
            [s for s in scenarios if len(cat.variants(s.name).instances) > 1],
        ]
        for kind in kinds:
            if kind:
                chosen.setdefault(kind[0].name, None)
    return list(chosen)


def result_of(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "validity.json").read_text())
    return data


def rates(data: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (s["strategy"], t["task"]): (t["passed"], t["trials"])
        for s in data["report"]["strategies"]
        for t in s["tasks"]
    }


def test_a_strategy_that_reads_the_ground_truth_fails_the_check_and_is_named(
    tmp_path: Path,
) -> None:
    cat = catalog()
    fault = next(s.name for s in cat if not s.spec.control and mitigation_applies(s))
    out = tmp_path / "cheat"
    result = validity("--strategy", CHEAT, "--scenario", fault, "--workers", "1", "--out", str(out))
    assert result.exit_code == 1, result.output
    domain = cat.get(fault).spec.domain.value.lower()
    assert f"peek: {domain}.diagnosis 100.0% > ceiling 5% (1/1: {fault})" in result.stderr
    assert f"peek: {domain}.mitigation 100.0% > ceiling 5% (1/1: {fault})" in result.stderr
    data = result_of(out)
    assert [s["strategy"] for s in data["report"]["strategies"]] == ["oracle", "null", "peek"]
    assert rates(data)[("peek", f"{domain}.diagnosis")] == (1, 1)
    assert rates(data)[("null", f"{domain}.diagnosis")] == (0, 1)
    assert data["report"]["problems"] and all(
        p.startswith("peek: ") for p in data["report"]["problems"]
    )
    assert "above ceiling" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--split", "test"], "--split test needs --seed-secret"),
        (["--split", "test", "--seed-secret", "short"], "the seed secret is too short"),
        (["--split", "staging"], "'staging' is not one of 'dev', 'test'"),
        (["--trials", "0"], "0 is not in the range 1<=x<=100"),
        (["--seed", "-1"], "-1 is not in the range x>=0"),
        (["--strategy", "psychic"], "--strategy 'psychic' is neither a reference strategy"),
        (["--strategy", "no_such_module:run"], "cannot import 'no_such_module'"),
        (
            ["--strategy", "agents.validity.strategies:null"],
            "its name 'null' is a reference strategy's or the oracle's",
        ),
        (["--strategy", "agents.oracle.agent:run"], "is a reference strategy's or the oracle's"),
        (["--scenario", "no-such-scenario"], "unknown scenario(s): no-such-scenario"),
        (["--scenarios-dir", "/nonexistent/scenarios"], "/nonexistent/scenarios"),
    ],
)
def test_bad_flags_are_refused_with_exit_2_naming_the_flag(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    result = validity(*args, "--out", str(out), env={"ITBENCH_SEED_SECRET": ""})
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not out.exists()


def assert_holds(data: dict[str, Any], scenarios: list[str], split: str) -> None:
    report = data["report"]
    assert report["problems"] == []
    assert report["splits"] == [split]
    assert data["scenarios"] == sorted(scenarios)
    names = [s["strategy"] for s in report["strategies"]]
    assert names == ["oracle", *reference_strategies().targets]
    got = rates(data)
    oracle_tasks = {t for (s, t) in got if s == "oracle"}
    for (strategy, task), (passed, trials) in got.items():
        assert trials > 0, (strategy, task)
        if strategy == "oracle":
            assert passed == trials, task
        elif strategy == "null":
            assert passed == 0, task
    for strategy in names:
        assert {t for (s, t) in got if s == strategy} == oracle_tasks, strategy


@pytest.mark.slow
def test_every_reference_strategy_stays_within_its_ceilings_on_a_representative_subset(
    tmp_path: Path,
) -> None:
    scenarios = representative(catalog())
    assert {catalog().get(n).spec.domain for n in scenarios} >= {Domain.SRE, Domain.FINOPS}
    out = tmp_path / "subset"
    args = [a for name in scenarios for a in ("--scenario", name)]
    result = validity(*args, "--workers", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "holds: every strategy is at or below its ceilings" in result.stdout
    assert_holds(result_of(out), scenarios, "dev")
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert len(lines) == len(scenarios) * (len(reference_strategies().targets) + 1)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="the whole catalog: set ITBENCH_VALIDITY_FULL=1")
@pytest.mark.parametrize("split", ["dev", "test"])
def test_every_reference_strategy_stays_within_its_ceilings_over_the_whole_catalog(
    tmp_path: Path, split: str
) -> None:
    out = tmp_path / split
    result = validity(
        "--split", split, "--seed", "42", "--out", str(out), env={"ITBENCH_SEED_SECRET": SECRET}
    )
    assert result.exit_code == 0, result.output
    assert_holds(result_of(out), catalog().names, split)
    assert SECRET not in (out / "validity.json").read_text() + (out / "trials.jsonl").read_text()


def test_json_prints_the_result_it_writes_and_the_test_split_secret_is_never_written(
    tmp_path: Path,
) -> None:
    cat = catalog()
    template = next(s.name for s in cat if len(cat.variants(s.name).instances) > 1)
    out = tmp_path / "json"
    result = validity(
        "--json",
        "--split",
        "test",
        "--strategy",
        "claim-only",
        "--scenario",
        template,
        "--workers",
        "1",
        "--out",
        str(out),
        env={"ITBENCH_SEED_SECRET": SECRET},
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == result_of(out)
    assert printed["split"] == "test" and printed["report"]["splits"] == ["test"]
    assert [a["name"] for a in printed["agents"]] == ["null", "claim-only", "oracle"]
    records = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["parameters"] for r in records)
    assert len({json.dumps(r["parameters"], sort_keys=True) for r in records}) == 1
    assert SECRET not in (out / "validity.json").read_text() + (out / "trials.jsonl").read_text()
