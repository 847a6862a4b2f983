"""End to end on kind: the RHEL9 class's evidence collected in evidence Pods of the real image
(`make kind-load` builds deploy/rhel9-host and loads it): a reference script and a reference
Ansible playbook scored on both variants, a collection that writes refused, a connection to the
API server dropped by the deny-all NetworkPolicy, and nothing of the evaluation left afterwards.
The log is read through the API's `pods/log` with its byte limit (the loopback tests inject it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from agents.ciso_reference import solutions
from itbench.ciso import host_pod
from itbench.ciso.cluster import COUNTERPART_PREFIX, LiveEvaluator, Rest
from itbench.core.ciso.posture import score_compliance
from itbench.core.models.compliance import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
)
from tests.integration.ciso_sample import ciso_instance

IMAGE = os.environ.get("HOST_IMAGE", host_pod.DEFAULT_IMAGE)
"""The image `make kind-load` loaded (its HOST_IMAGE)."""
NAMESPACE = "otel-demo"


@pytest.fixture(scope="module")
def rest() -> Iterator[Rest]:
    kubernetes = pytest.importorskip("kubernetes")
    kubernetes.config.load_kube_config()
    client = kubernetes.client.ApiClient()
    try:
        yield Rest(client)
    finally:
        client.close()


def _evaluate(rest: Rest, scenario_name: str, submission: ComplianceSubmission) -> Any:
    scenario = ciso_instance(scenario_name, "noncompliant")
    evaluator = LiveEvaluator(rest, NAMESPACE, collection_timeout=120.0, host_image=IMAGE)
    evaluation = evaluator.evaluate(scenario, submission)
    ns = evaluator.counterpart_namespace
    assert ns.startswith(COUNTERPART_PREFIX)
    gone = rest.call("GET", f"/api/v1/namespaces/{ns}")
    assert gone is None or gone["metadata"].get("deletionTimestamp"), "evaluation namespace kept"
    left = [p["metadata"]["name"] for p in rest.items(f"/api/v1/namespaces/{ns}/pods")]
    assert all(
        (p.get("metadata") or {}).get("deletionTimestamp")
        for p in rest.items(f"/api/v1/namespaces/{ns}/pods")
    ), f"evidence pods kept: {left}"
    return evaluation, score_compliance(evaluation, scenario, ttp=1.0)


def _reference(setting: str) -> ComplianceSubmission:
    playbook = setting in solutions.PLAYBOOK_SETTINGS
    return ComplianceSubmission(
        rego=solutions.rego_module(solutions.REGO_HOST[setting]),
        collection=EvidenceCollection(
            kind=CollectionKind.PLAYBOOK if playbook else CollectionKind.SCRIPT,
            content=solutions.SSHD_PLAYBOOK if playbook else solutions.HOST_SCRIPT,
        ),
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("scenario", "setting"),
    [
        ("ciso-rhel9-shadow-permissions", "shadow-permissions"),  # a script; a mode-0000 file
        ("ciso-rhel9-sshd-root-login", "sshd-root-login"),  # an Ansible playbook
    ],
)
def test_a_rhel9_reference_passes_on_both_variants_in_evidence_pods_on_ubi9(
    rest: Rest, scenario: str, setting: str
) -> None:
    evaluation, scores = _evaluate(rest, scenario, _reference(setting))
    assert scores.passed, scores.reason
    assert [v.variant for v in evaluation.variants] == ["trial", "counterpart"]
    assert all(v.evidence_bytes > 0 for v in evaluation.variants)


@pytest.mark.e2e
def test_a_collection_that_writes_is_refused_by_the_read_only_pod(rest: Rest) -> None:
    submission = ComplianceSubmission(
        rego=solutions.rego_module(solutions.REGO_HOST["sshd-root-login"]),
        collection=EvidenceCollection(
            kind=CollectionKind.SCRIPT,
            content="echo x >> /etc/ssh/sshd_config\necho '{}' > \"$ITBENCH_EVIDENCE\"\n",
        ),
    )
    evaluation, scores = _evaluate(rest, "ciso-rhel9-sshd-root-login", submission)
    assert not scores.passed and not evaluation.platform_error
    for variant in evaluation.variants:
        assert "tried to write to the environment" in variant.problem, variant.problem


@pytest.mark.e2e
def test_the_deny_all_policy_keeps_the_evidence_pod_off_the_network(rest: Rest) -> None:
    from itbench.ciso.cluster import apply_manifests
    from itbench.ciso.evaluate import twin_of

    service = rest.call("GET", "/api/v1/namespaces/default/services/kubernetes")
    assert service is not None
    address = str(service["spec"]["clusterIP"])
    probe = (
        "python3 - <<'PY' > \"$ITBENCH_EVIDENCE\"\n"
        "import json, socket\n"
        "try:\n"
        f"    socket.create_connection(({address!r}, 443), 5).close()\n"
        "    reached = True\n"
        "except OSError:\n"
        "    reached = False\n"
        "print(json.dumps({'reached': reached}))\n"
        "PY\n"
    )
    namespace = f"{COUNTERPART_PREFIX}e2e-{os.urandom(3).hex()}"
    apply_manifests(rest, [host_pod.namespace_manifest(namespace)])
    try:
        result = host_pod.run_on_cluster(
            rest,
            namespace,
            EvidenceCollection(kind=CollectionKind.SCRIPT, content=probe),
            twin_of(ciso_instance("ciso-rhel9-sshd-root-login", "compliant")).host_state(),
            image=IMAGE,
            timeout=60.0,
        )
    finally:
        rest.call("DELETE", f"/api/v1/namespaces/{namespace}")
    assert result.ok, result.problem
    assert result.evidence == {"reached": False}, "the API server answered the evidence pod"
