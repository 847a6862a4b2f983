"""A BenchmarkRun on the test split: each Trial's instance of a template is drawn from a secret
in a Secret; the values are recorded with the Trial and its record, the secret nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from operator_lab import (
    NS,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    status_of,
    trials_of,
    until,
)

from itbench.core.catalog import validate_template
from itbench.core.models.scenario import Split
from itbench.core.variants import instance_seed

pytestmark = pytest.mark.asyncio

TEMPLATE = "unschedulable-pods"
SECRET = "a-secret-no-agent-ever-sees-42"


def _secret(name: str, value: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "stringData": {"seed": value},
    }


def _conditions(lab: Lab, run: str) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c.get("reason", ""), c.get("message", ""))
        for c in status_of(lab, "benchmarkruns", run).get("conditions", [])
    }


def _expected(attempt: int) -> dict[str, object]:
    path = Path(__file__).parents[3] / "scenarios" / "sre" / TEMPLATE / "scenario.yaml"
    variants, problems = validate_template(yaml.safe_load(path.read_text()), str(path))
    assert variants is not None, problems
    draw = instance_seed(Split.TEST, seed=42, scenario=TEMPLATE, attempt=attempt, secret=SECRET)
    return dict(variants.instance(draw).values)


async def test_a_test_split_run_draws_each_instance_from_the_secret_and_never_writes_it(
    lab: Lab,
) -> None:
    await lab.start()
    lab.cluster.apply_scenarios(TEMPLATE)
    await until(
        lambda: status_of(lab, "scenarios", TEMPLATE).get("phase"),
        within=90,
        what="the template validated",
    )
    assert status_of(lab, "scenarios", TEMPLATE)["phase"] == "Ready", status_of(
        lab, "scenarios", TEMPLATE
    )
    await ready_agent(lab, agent("null", {"builtin": {"name": "null"}}))
    lab.cluster.apply(_secret("split-seed", SECRET))
    lab.cluster.apply(
        benchmark_run(
            "hidden",
            "null",
            [TEMPLATE],
            trialsPerScenario=3,
            concurrency=3,
            split="test",
            seedSecretRef={"name": "split-seed"},
        )
    )
    await until(
        lambda: (
            status_of(lab, "benchmarkruns", "hidden").get("phase")
            in ("Succeeded", "Failed", "Errored")
        ),
        within=120,
        what="the test-split run finished",
    )
    trials = sorted(trials_of(lab, "hidden"), key=lambda t: t["spec"]["attempt"])
    assert len(trials) == 3
    for trial in trials:
        spec = trial["spec"]
        assert spec["split"] == "test"
        assert spec["parameters"] == _expected(spec["attempt"]), "drawn from the secret"
        assert trial["status"]["phase"] in ("Succeeded", "Failed")
    everything = json.dumps(
        [lab.cluster.get("benchmarkruns", "hidden"), *trials, *lab.cluster.events("hidden")]
    )
    assert SECRET not in everything, "the secret is never written to the API"


async def test_a_test_split_run_waits_for_its_secret_and_refuses_a_short_one(lab: Lab) -> None:
    await lab.start()
    lab.cluster.apply_scenarios(TEMPLATE)
    await until(
        lambda: status_of(lab, "scenarios", TEMPLATE).get("phase"),
        within=90,
        what="the template validated",
    )
    assert status_of(lab, "scenarios", TEMPLATE)["phase"] == "Ready", status_of(
        lab, "scenarios", TEMPLATE
    )
    await ready_agent(lab, agent("null", {"builtin": {"name": "null"}}))
    lab.cluster.apply(
        benchmark_run(
            "no-secret", "null", [TEMPLATE], split="test", seedSecretRef={"name": "missing"}
        )
    )
    await until(
        lambda: _conditions(lab, "no-secret").get("Valid", ("", ""))[0] == "SeedSecretNotFound",
        what="the run waits for its Secret",
    )
    assert f"Secret {NS}/missing" in _conditions(lab, "no-secret")["Valid"][1]
    assert trials_of(lab, "no-secret") == [], "no Trial starts without the secret"
    lab.cluster.apply(_secret("short", "too-short"))
    lab.cluster.apply(
        benchmark_run("short", "null", [TEMPLATE], split="test", seedSecretRef={"name": "short"})
    )
    await until(
        lambda: _conditions(lab, "short").get("Valid", ("", ""))[0] == "SeedSecretInvalid",
        what="a short secret is refused",
    )
    assert "spec.seedSecretRef" in _conditions(lab, "short")["Valid"][1]
    assert "too-short" not in json.dumps(lab.cluster.get("benchmarkruns", "short"))
