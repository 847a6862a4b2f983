"""The CISO catalog: written from the control table, in the four classes, each scenario a
template whose seed draws the compliant or the non-compliant variant."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from itbench.catalog_files import load_variants
from itbench.ciso.catalog import render
from itbench.core.ciso.classes import CisoClass
from itbench.core.ciso.controls import CONTROLS, control_of
from itbench.core.ciso.posture import counterpart, expected_posture, fault_posture
from itbench.core.models.scenario import PostureResult

ROOT = Path(__file__).resolve().parents[3] / "scenarios" / "ciso"


def test_the_files_are_what_the_control_table_writes() -> None:
    on_disk = sorted(p.name for p in ROOT.iterdir() if p.is_dir())
    assert on_disk == sorted(c.name for c in CONTROLS)
    for control in CONTROLS:
        assert (ROOT / control.name / "scenario.yaml").read_text() == render(control), (
            f"{control.name}: run python -m itbench.ciso.catalog"
        )


def test_at_least_thirty_scenarios_in_the_four_classes() -> None:
    classes = Counter(c.cls for c in CONTROLS)
    assert len(CONTROLS) >= 30
    assert set(classes) == set(CisoClass)
    assert all(n >= 5 for n in classes.values()), classes


def test_each_template_has_both_variants_and_the_counterpart_flips_them() -> None:
    for control in CONTROLS:
        variants, problems = load_variants(ROOT / control.name / "scenario.yaml")
        assert variants is not None, problems
        results = {e.result for i in variants.instances for e in fault_posture(i.scenario)}
        assert results == {PostureResult.PASS, PostureResult.FAIL}, control.name
        scenario = variants.instances[0].scenario
        here, there = expected_posture(scenario), expected_posture(counterpart(scenario))
        assert here.keys() == there.keys()
        flipped = [t for t in here if here[t] != there[t]]
        assert len(flipped) == 1, (control.name, flipped)


def test_the_requirement_names_the_control_but_not_the_variant() -> None:
    for control in CONTROLS:
        variants, _ = load_variants(ROOT / control.name / "scenario.yaml")
        assert variants is not None
        texts = {i.scenario.spec.description for i in variants.instances}
        assert len(texts) == 1, f"{control.name}: the requirement differs between variants"
        (text,) = texts
        assert control_of(text) == control
        for workload in control.workloads:
            assert f"Deployment/{workload}" not in text
