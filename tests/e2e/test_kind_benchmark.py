"""End to end on kind with the Helm-installed operator on the simulator (see the Makefile)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def kubectl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", *args], input=stdin, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def wait_for_jsonpath(kind: str, name: str, ns: str, path: str, want: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        seen = kubectl("get", kind, name, "-n", ns, "-o", f"jsonpath={path}")
        if seen == want:
            return
        time.sleep(2)
    raise AssertionError(f"{kind}/{name} {path} is {seen!r}, wanted {want!r} within {timeout}s")


@pytest.fixture(scope="module")
def namespace() -> Iterator[str]:
    ns = f"itbench-e2e-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    kubectl("apply", "-R", "-f", str(ROOT / "scenarios"))
    yield ns
    kubectl("delete", "namespace", ns, "--wait=false")


def test_crds_are_established() -> None:
    for plural in ("scenarios", "agentsubmissions", "benchmarkruns", "trials"):
        out = kubectl(
            "get",
            "crd",
            f"{plural}.itbench.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        )
        assert out == "True"


def test_oracle_run_on_simulator_scores_full_marks(namespace: str) -> None:
    manifest = f"""
apiVersion: itbench.io/v1alpha1
kind: AgentSubmission
metadata: {{name: oracle, namespace: {namespace}}}
spec:
  agentName: oracle
  type: SRE
  runtime: {{builtin: {{name: oracle}}}}
---
apiVersion: itbench.io/v1alpha1
kind: BenchmarkRun
metadata: {{name: oracle-e2e, namespace: {namespace}}}
spec:
  agentRef: {{name: oracle}}
  allowOracle: true
  scenarios: {{names: [cart-flagd-failure]}}
  trialsPerScenario: 2
  environment: {{type: simulator}}
"""
    kubectl("apply", "-f", "-", stdin=manifest)
    wait_for_jsonpath("benchmarkrun", "oracle-e2e", namespace, "{.status.phase}", "Succeeded", 600)
    assert (
        kubectl(
            "get",
            "benchmarkrun",
            "oracle-e2e",
            "-n",
            namespace,
            "-o",
            "jsonpath={.status.summary.diagnosisPassAt1}",
        )
        == "1"
    )
    table = kubectl("get", "benchmarkruns", "-n", namespace)
    assert "PROGRESS" in table and "2/2" in table


def test_rejected_spec_reports_the_field(namespace: str) -> None:
    bad = f"""
apiVersion: itbench.io/v1alpha1
kind: BenchmarkRun
metadata: {{name: bad-trials, namespace: {namespace}}}
spec:
  agentRef: {{name: oracle}}
  scenarios: {{names: [cart-flagd-failure]}}
  trialsPerScenario: 1000
"""
    done = subprocess.run(
        ["kubectl", "apply", "-f", "-"], input=bad, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "spec.trialsPerScenario" in done.stderr
