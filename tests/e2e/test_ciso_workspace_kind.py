"""End to end on kind: a CISO trial's workspace on a real cluster with the pinned stack
(`make stack-up`). The workspace is built with the instance's objects, its Pods stay Pending
(held off every node), the real Kyverno judges the reference policy on it, and removing its record
deletes it (the namespace controller then removes all it held). The shop's `otel-demo` keeps its
spec.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agents.ciso_reference import solutions
from itbench.ciso.cluster import Rest, evaluate_on
from itbench.ciso.workspace import Workspace, WorkspaceEnvironment
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import ComplianceSubmission
from tests.integration.ciso_sample import ciso_instance

TIMEOUT_SECONDS = 240.0


@pytest.fixture
def environment() -> Iterator[WorkspaceEnvironment]:
    pytest.importorskip("kubernetes")
    kubeconfig = Path(os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")))
    scenario = ciso_instance("ciso-kyverno-host-network", "noncompliant")
    uid = uuid.uuid4().hex
    keys = [f"{uid}/inject/{i}" for i in range(len(scenario.spec.faults))]
    workspace = Workspace.of_trial(scenario, "e2e", "workspace", uid, keys)
    env = WorkspaceEnvironment(kubeconfig, namespace=workspace.namespace, workspace=workspace)
    try:
        yield env
    finally:
        if workspace.key in env.records():
            env.remove(workspace.key)
        env.close()


@pytest.mark.e2e
def test_a_workspace_on_kind_is_judged_by_kyverno_and_deleted_whole(
    environment: WorkspaceEnvironment,
) -> None:
    env = environment
    assert env.workspace is not None
    scenario = env.workspace.instance
    rest = Rest(env._api)
    shop = rest.items("/apis/apps/v1/namespaces/otel-demo/deployments")
    env.provision()
    for key in sorted(env.workspace.built_in):
        assert env.inject(key, [])
    pods = rest.items(f"/api/v1/namespaces/{env.namespace}/pods")
    assert all((p.get("status") or {}).get("phase") == "Pending" for p in pods)
    policy = solutions.validating_policy("cis-host-network", solutions.CEL["host-network"], "no")
    submission = ComplianceSubmission(kyverno=yaml.safe_dump(policy))
    evaluation = evaluate_on(env, scenario, submission, timeout_seconds=TIMEOUT_SECONDS)
    scores = score_compliance(evaluation, scenario, ttp=1.0)
    assert scores.passed, scores.reason
    for key in reversed(env.injections()):
        env.remove(key)
    gone = rest.call("GET", f"/api/v1/namespaces/{env.namespace}")
    assert gone is None or gone["metadata"].get("deletionTimestamp"), "the workspace is kept"
    # The shop's Deployments keep their spec (status moves on by itself on a live cluster).
    after = rest.items("/apis/apps/v1/namespaces/otel-demo/deployments")
    assert {d["metadata"]["name"]: d["metadata"]["generation"] for d in after} == {
        d["metadata"]["name"]: d["metadata"]["generation"] for d in shop
    }
