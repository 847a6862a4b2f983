"""The generated CRDs on a real kube-apiserver: accepted by client-side and server-side apply,
explained with their descriptions, their CEL rules enforced with the field path in the message,
and their printer columns shown by kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.kube_controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))
CHART_CRDS = sorted((ROOT / "charts" / "itbench" / "crds").glob("*.yaml"))


def _namespace(plane: ControlPlane, name: str) -> str:
    plane.kubectl("create", "namespace", name, check=False)
    return name


@pytest.mark.parametrize("path", CRDS, ids=[p.stem for p in CRDS])
def test_every_crd_is_accepted_by_client_side_and_server_side_apply(
    control_plane: ControlPlane, path: Path
) -> None:
    crd = yaml.safe_load(path.read_text())
    client_side = control_plane.kubectl("apply", "-f", str(path))
    assert crd["metadata"]["name"] in client_side.stdout
    server_side = control_plane.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(path)
    )
    assert "serverside-applied" in server_side.stdout
    stored = json.loads(
        control_plane.kubectl("get", "crd", crd["metadata"]["name"], "-o", "json").stdout
    )
    conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions.get("NonStructuralSchema", "False") == "False"


def test_the_charts_crds_are_the_same_files_as_crds() -> None:
    assert [p.name for p in CHART_CRDS] == [p.name for p in CRDS]
    for chart, plain in zip(CHART_CRDS, CRDS, strict=True):
        assert chart.read_text() == plain.read_text()


def test_kubectl_explain_shows_the_models_descriptions(control_plane: ControlPlane) -> None:
    explained = control_plane.kubectl("explain", "benchmarkrun.spec.trialsPerScenario").stdout
    assert "KIND:       BenchmarkRun" in explained
    assert "trialsPerScenario" in explained
    assert "<integer>" in explained
    spec = control_plane.kubectl("explain", "trials.status").stdout
    assert "phase" in spec and "conditions" in spec


def test_a_cel_rule_refuses_a_run_naming_the_field(control_plane: ControlPlane) -> None:
    ns = _namespace(control_plane, "crd-cel")
    both = {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": "both", "namespace": ns},
        "spec": {
            "agentRef": {"name": "a"},
            "scenarios": {"names": ["x"], "selector": {"domains": ["SRE"]}},
        },
    }
    refused = control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(both), check=False)
    assert refused.returncode == 1
    assert 'The BenchmarkRun "both" is invalid: spec.scenarios: Invalid value' in refused.stderr
    assert "spec.scenarios" in refused.stderr
    assert "set exactly one of names or selector" in refused.stderr
    assert control_plane.kubectl("get", "benchmarkrun", "both", "-n", ns, check=False).returncode


def test_cancel_cannot_go_back_to_false_on_the_real_server(control_plane: ControlPlane) -> None:
    ns = _namespace(control_plane, "crd-cancel")
    run = {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": "r", "namespace": ns},
        "spec": {"agentRef": {"name": "a"}, "scenarios": {"names": ["x"]}, "cancel": True},
    }
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(run))
    refused = control_plane.kubectl(
        "patch",
        "benchmarkrun",
        "r",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec": {"cancel": false}}',
        check=False,
    )
    assert refused.returncode == 1
    assert "spec.cancel" in refused.stderr
    assert "a cancelled run cannot be resumed" in refused.stderr


def test_defaults_and_printer_columns_come_from_the_schema(control_plane: ControlPlane) -> None:
    ns = _namespace(control_plane, "crd-columns")
    run = {
        "apiVersion": "itbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": "cols", "namespace": ns},
        "spec": {"agentRef": {"name": "a"}, "scenarios": {"names": ["x"]}},
    }
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(run))
    stored = json.loads(
        control_plane.kubectl("get", "benchmarkrun", "cols", "-n", ns, "-o", "json").stdout
    )
    assert stored["spec"]["trialsPerScenario"] == 3
    assert stored["spec"]["timeouts"] == {"agentSeconds": 900, "recoverySeconds": 600}
    header = control_plane.kubectl("get", "benchmarkruns", "-n", ns).stdout.splitlines()[0]
    for column in ("AGENT", "PHASE", "PROGRESS", "DIAGNOSIS PASS@1", "MITIGATION PASS@1", "AGE"):
        assert column in header
    status = control_plane.kubectl(
        "patch",
        "benchmarkrun",
        "cols",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"phase": "Running"}}',
    )
    assert "patched" in status.stdout
    row = control_plane.kubectl("get", "benchmarkrun", "cols", "-n", ns).stdout.splitlines()[1]
    assert "Running" in row.split()
