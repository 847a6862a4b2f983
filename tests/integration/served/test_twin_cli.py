"""`itbench twin serve`: a served twin from the command line, its kubeconfig for real kubectl."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from served_lab import Kubectl, eventually

from itbench.cli.main import cli

ITBENCH = str(Path(sys.executable).with_name("itbench"))


def test_twin_serve_writes_a_kubeconfig_kubectl_uses_and_removes_it_on_stop(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "twin.kubeconfig"
    process = subprocess.Popen(
        [
            ITBENCH,
            "twin",
            "serve",
            "--kubeconfig",
            str(kubeconfig),
            "--speed",
            "10",
            "--no-prometheus",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: kubeconfig.exists() or process.poll() is not None, "the kubeconfig")
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        kubectl = Kubectl(kubeconfig)
        assert (
            kubectl(
                "config", "view", "--minify", "-o", "jsonpath={.contexts[0].context.namespace}"
            ).stdout
            == "otel-demo"
        )
        deployments = json.loads(kubectl("get", "deployments", "-o", "json").stdout)["items"]
        assert "cart" in {d["metadata"]["name"] for d in deployments}
        kubectl(
            "apply",
            "-f",
            "-",
            stdin='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}}',
        )
        assert kubectl("get", "configmap", "x", "-o", "jsonpath={.data.a}").stdout == "b"
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "export KUBECONFIG=" in out and "kubernetes: https://127.0.0.1:" in out
    assert not kubeconfig.exists(), "a stopped twin leaves no kubeconfig that points nowhere"


def test_twin_serve_refuses_to_overwrite_a_kubeconfig_and_an_unknown_scenario(
    tmp_path: Path,
) -> None:
    existing = tmp_path / "config"
    existing.write_text("mine")
    runner = CliRunner()
    taken = runner.invoke(cli, ["twin", "serve", "--kubeconfig", str(existing), "--no-prometheus"])
    assert taken.exit_code == 2 and "exists" in taken.output
    assert existing.read_text() == "mine"
    unknown = runner.invoke(
        cli,
        [
            "twin",
            "serve",
            "--kubeconfig",
            str(tmp_path / "new"),
            "--scenario",
            "no-such-scenario",
            "--no-prometheus",
        ],
    )
    assert unknown.exit_code == 2 and "unknown scenario 'no-such-scenario'" in unknown.output
    assert not (tmp_path / "new").exists()
