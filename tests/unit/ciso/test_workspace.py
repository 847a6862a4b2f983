"""A CISO trial's workspace, without a cluster: its name from the Trial, the faults built into
it, its manifests, and what it shows of the instance outside its namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from itbench.catalog_files import load_catalog, load_variants
from itbench.ciso.cluster import COUNTERPART_PREFIX, HOLD_LABEL, variant_manifests
from itbench.ciso.evaluate import twin_of
from itbench.ciso.reports import evaluation_token
from itbench.ciso.workspace import (
    TRIAL_ANNOTATION,
    WORKSPACE_LABEL,
    Workspace,
    is_workspace,
    modelled,
    uses_workspace,
    workspace_namespace,
)
from itbench.core.models.scenario import Scenario

ROOT = Path(__file__).resolve().parents[3]


def ciso_instance(name: str, state: str) -> Scenario:
    """The instance of a catalog CISO scenario whose setting is in `state`."""
    variants, problems = load_variants(ROOT / "scenarios" / "ciso" / name / "scenario.yaml")
    assert variants is not None, problems
    return next(
        i.scenario
        for i in variants.instances
        if any(f.args.get("state") == state for f in i.scenario.spec.faults)
    )


def _workspace(instance: Scenario, uid: str = "uid-1") -> Workspace:
    keys = [f"{uid}/inject/{i}" for i in range(len(instance.spec.faults))]
    return Workspace.of_trial(instance, "team-a", "run-1-0", uid, keys)


def test_a_workspace_is_named_from_its_trial_and_never_like_a_counterpart() -> None:
    name = workspace_namespace("team-a", "run-1-0", "uid-1")
    assert name == workspace_namespace("team-a", "run-1-0", "uid-1"), "the same after a restart"
    assert name.startswith(COUNTERPART_PREFIX) and is_workspace(name)
    assert len(name) <= 63
    assert name != workspace_namespace("team-a", "run-1-0", "uid-2"), "a Trial made again"
    assert name != workspace_namespace("team-b", "run-1-0", "uid-1")
    counterpart = f"{COUNTERPART_PREFIX}{evaluation_token(name, 'salt')}"
    assert not is_workspace(counterpart)
    assert not is_workspace("otel-demo") and not is_workspace(f"{name}x")


def test_only_ciso_scenarios_run_in_a_workspace() -> None:
    catalog, _ = load_catalog(ROOT / "scenarios")
    assert not uses_workspace(catalog.get("checkout-memory-limit"))
    assert uses_workspace(ciso_instance("ciso-kyverno-host-network", "compliant"))


@pytest.mark.parametrize("name", ["ciso-kyverno-host-network", "ciso-update-net-raw"])
def test_the_ciso_faults_are_built_into_the_workspace(name: str) -> None:
    instance = ciso_instance(name, "noncompliant")
    workspace = _workspace(instance)
    assert workspace.built_in == {f"uid-1/inject/{i}" for i in range(len(instance.spec.faults))}
    assert workspace.key == "uid-1/ciso-workspace" and workspace.key not in workspace.built_in


def test_the_workspace_holds_the_variants_objects_labelled_with_its_trial() -> None:
    instance = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    workspace = _workspace(instance)
    manifests = workspace.manifests()
    plain = variant_manifests(instance, workspace.namespace)
    assert [(o["kind"], o["metadata"]["name"]) for o in manifests] == [
        (o["kind"], o["metadata"]["name"]) for o in plain
    ]
    [namespace] = [o for o in manifests if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == workspace.namespace
    assert namespace["metadata"]["labels"][WORKSPACE_LABEL] == workspace.token
    assert namespace["metadata"]["annotations"][TRIAL_ANNOTATION] == "team-a/run-1-0"
    deployments = [o for o in manifests if o["kind"] == "Deployment"]
    assert deployments and all(
        d["metadata"]["namespace"] == workspace.namespace
        and d["spec"]["template"]["spec"]["nodeSelector"][HOLD_LABEL] == "true"
        for d in deployments
    )
    assert any(d["spec"]["template"]["spec"].get("hostNetwork") for d in deployments)
    assert not any(o["kind"] in ("ClusterPolicy", "ValidatingPolicy") for o in manifests)


def test_what_lies_outside_the_namespace_is_shown_as_the_twin_shows_it() -> None:
    instance = ciso_instance("ciso-update-net-raw", "noncompliant")
    twin = twin_of(instance)
    installed = modelled(instance, "ClusterPolicy") + modelled(instance, "ValidatingPolicy")
    assert installed, "the update class's installed set"
    assert installed == twin.get_objects("ClusterPolicy") + twin.get_objects("ValidatingPolicy")
    assert [r["metadata"]["name"] for r in modelled(instance, "ClusterRole")] == [
        r["metadata"]["name"] for r in twin.get_objects("ClusterRole")
    ]


def test_the_agent_sees_the_workspaces_objects_as_the_twin_shows_them() -> None:
    instance = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    workspace = _workspace(instance)
    twin = twin_of(instance)
    shown = [workspace.as_scenarios(o) for o in workspace.manifests()]
    for obj in shown:
        [modelled_obj] = twin.get_objects(obj["kind"], obj["metadata"]["name"])
        assert obj["metadata"].get("namespace") == modelled_obj["metadata"].get("namespace")
        assert obj.get("spec") == modelled_obj.get("spec"), obj["metadata"]["name"]
    [namespace] = [o for o in shown if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "otel-demo"
    assert "itbench" not in str(shown)
