"""The operator on a real control plane, as the chart's ServiceAccount with the chart's RBAC:
a BenchmarkRun of simulator trials reaches Complete with its status, conditions, printer columns
and Events, meeting no Forbidden; deleting it lets the real garbage collector remove its Trials,
report and trajectories."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube_controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "itbench"
RELEASE, RELEASE_NS, RUNS_NS = "op", "itbench-op", "runs-op"
SCENARIO = "ad-high-cpu"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _json(plane: ControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl(*args, "-o", "json").stdout)


def _wait(what: str, check: Any, timeout: float = 240, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    tail = log.read_text()[-4000:] if log and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The chart installed in namespaced mode, and the operator running as its ServiceAccount."""
    for name in ("otel-demo", "monitoring", RUNS_NS):
        control_plane.kubectl("create", "namespace", name, check=False)
    control_plane.helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        RELEASE_NS,
        "--create-namespace",
        "--wait",
        "--timeout",
        "3m",
        "--set",
        f"watchNamespaces={{{RUNS_NS}}}",
    )
    workdir = tmp_path_factory.mktemp("operator")
    token = control_plane.kubectl(
        "create", "token", f"{RELEASE}-itbench", "-n", RELEASE_NS, "--duration=2h"
    ).stdout.strip()
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority": str(control_plane.ca),
                        },
                    }
                ],
                "users": [{"name": "operator", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "operator"}}],
                "current-context": "c",
            }
        )
    )
    log = workdir / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "itbench"),
                "operator",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                RUNS_NS,
                "--bind-address",
                "127.0.0.1",
                "--gateway-host",
                "127.0.0.1",
                "--metrics-port",
                str(_free_port()),
                "--liveness-port",
                str(_free_port()),
                "--gateway-port",
                str(_free_port()),
                "--tick-seconds",
                "0.1",
                "--log-format",
                "text",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        yield log
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        control_plane.helm("uninstall", RELEASE, "-n", RELEASE_NS, "--wait", "--timeout", "2m")


def test_a_run_completes_as_the_charts_account_and_deleting_it_collects_everything(
    control_plane: ControlPlane, operator: Path
) -> None:
    control_plane.kubectl(
        "apply", "-n", RUNS_NS, "-f", str(ROOT / "scenarios" / "sre" / SCENARIO / "scenario.yaml")
    )
    manifests = [
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "AgentSubmission",
            "metadata": {"name": "heuristic", "namespace": RUNS_NS},
            "spec": {
                "agentName": "heuristic-sre",
                "type": "SRE",
                "runtime": {"builtin": {"name": "heuristic-sre"}},
            },
        },
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "BenchmarkRun",
            "metadata": {"name": "first", "namespace": RUNS_NS},
            "spec": {
                "agentRef": {"name": "heuristic"},
                "scenarios": {"names": [SCENARIO]},
                "trialsPerScenario": 3,
                "environment": {"type": "simulator"},
            },
        },
    ]
    control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    def complete() -> dict[str, Any] | None:
        run = _json(control_plane, "get", "benchmarkrun", "first", "-n", RUNS_NS)
        phase = run.get("status", {}).get("phase")
        return run if phase in ("Succeeded", "Failed", "Errored", "Cancelled") else None

    run = _wait("the run to finish", complete, log=operator)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["observedGeneration"] == run["metadata"]["generation"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Complete"]["status"] == "True"
    assert conditions["Complete"]["reason"] == "AllTrialsFinished"
    assert status["summary"]["succeeded"] + status["summary"]["failed"] == 3
    assert status["progress"] == "3/3"
    trials = _json(control_plane, "get", "trials", "-n", RUNS_NS)["items"]
    assert len(trials) == 3
    assert all(t["status"]["phase"] in ("Succeeded", "Failed") for t in trials)
    assert all(t["metadata"]["ownerReferences"][0]["uid"] == run["metadata"]["uid"] for t in trials)
    row = control_plane.kubectl("get", "benchmarkrun", "first", "-n", RUNS_NS).stdout
    assert "heuristic" in row and "Succeeded" in row and "3/3" in row
    events = _json(
        control_plane,
        "get",
        "events",
        "-n",
        RUNS_NS,
        "--field-selector",
        "involvedObject.kind=Trial",
    )["items"]
    assert {"FaultInjected", "AgentFinished"} <= {e["reason"] for e in events}
    report = status["reportRef"].removeprefix("configmap/")
    stored = _json(control_plane, "get", "configmap", report, "-n", RUNS_NS)
    assert "report.json" in stored["data"]
    text = operator.read_text()
    assert "Forbidden" not in text and " 403" not in text, text[-4000:]

    control_plane.kubectl("delete", "benchmarkrun", "first", "-n", RUNS_NS, "--wait=true")

    def collected() -> bool:
        left = _json(control_plane, "get", "trials,configmaps", "-n", RUNS_NS)["items"]
        return not [o for o in left if o["metadata"]["name"] != "kube-root-ca.crt"]

    _wait("the garbage collector to remove the run's Trials and ConfigMaps", collected, 120)
