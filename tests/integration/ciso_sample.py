"""A sample of the CISO catalog for the catalog-wide runs: one scenario for every kind of
reference answer (each class, and within a class each artefact shape the reference submits:
a CEL policy, a Kubernetes evidence script with Rego, a host script or an Ansible playbook with
Rego, an updated policy set). Every CISO scenario's own reference answer, which is what the
oracle submits, is scored on both variants in tests/integration/agents/test_ciso_reference.py;
the runs that take this sample check the runner's and the oracle's CISO path, which is the same
for every scenario of a shape."""

from __future__ import annotations

from pathlib import Path

from agents.ciso_reference import solutions
from agents.ciso_reference.agent import concerned_policy, control_setting
from itbench.catalog_files import load_variants
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]


def answer_shape(scenario: Scenario) -> str:
    """The kind of artefacts the reference answer to a CISO scenario submits."""
    requirement = scenario.spec.description
    setting = control_setting(requirement)
    if concerned_policy(requirement) and setting in solutions.UPDATES:
        return "policy-set-update"
    if setting in solutions.CEL:
        return "cel-policy"
    if setting in solutions.REGO_K8S:
        return "kubernetes-evidence-rego"
    if setting in solutions.PLAYBOOK_SETTINGS:
        return "host-playbook-rego"
    if setting in solutions.REGO_HOST:
        return "host-script-rego"
    return "unknown"


def ciso_sample(scenarios: list[Scenario]) -> list[Scenario]:
    """The first CISO scenario by name of every (class, answer shape); other scenarios kept."""
    seen: set[tuple[str, str]] = set()
    out = []
    for scenario in sorted(scenarios, key=lambda s: s.name):
        if scenario.spec.domain != Domain.CISO:
            out.append(scenario)
            continue
        key = (str(scenario.spec.scenario_class), answer_shape(scenario))
        if key not in seen:
            seen.add(key)
            out.append(scenario)
    return out


def ciso_instance(name: str, state: str) -> Scenario:
    """The instance of a CISO scenario whose setting is in `state` (compliant or noncompliant)."""
    variants, problems = load_variants(ROOT / "scenarios" / "ciso" / name / "scenario.yaml")
    assert variants is not None, problems
    for instance in variants.instances:
        if any(f.args.get("state") == state for f in instance.scenario.spec.faults):
            return instance.scenario
    raise AssertionError(f"{name} has no {state} instance")
