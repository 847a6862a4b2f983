"""`itbench operator run` as a process: it reconciles, serves metrics and liveness, logs JSON."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from operator_lab import Cluster


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate: object, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_operator_run_reconciles_and_serves_metrics_and_liveness(cluster: Cluster) -> None:
    metrics, liveness, gateway = _free_port(), _free_port(), _free_port()
    code = "from itbench.cli.operator import operator; operator()"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "run",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--metrics-port",
            str(metrics),
            "--liveness-port",
            str(liveness),
            "--gateway-port",
            str(gateway),
            "--tick-seconds",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ITBENCH_GATEWAY__HOST": "127.0.0.1"},
    )
    try:
        cluster.apply_scenarios("cart-flagd-failure")
        ready = _wait(
            lambda: (
                ((cluster.get("scenarios", "cart-flagd-failure") or {}).get("status") or {}).get(
                    "phase"
                )
                == "Ready"
            )
        )
        assert ready, "the operator process did not reconcile the Scenario"
        health = httpx.get(f"http://127.0.0.1:{liveness}/healthz", timeout=5)
        assert health.status_code == 200
        exposition = httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=5).text
        assert 'itbench_operator_reconcile_duration_seconds_count{kind="Scenario"}' in exposition
        openapi = httpx.get(f"http://127.0.0.1:{gateway}/openapi.json", timeout=5)
        assert openapi.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(line["message"] == "operator starting" for line in lines)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)


def test_an_injector_account_without_its_namespace_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from itbench.cli.main import cli

    for value in ("itbench-injector", "/itbench-injector", "itbench-system/", "a/b/c"):
        result = CliRunner().invoke(cli, ["operator", "run", "--injector-service-account", value])
        assert result.exit_code == 2, (value, result.output)
        assert "is not NAMESPACE/NAME" in result.output and "--injector-service-account" in (
            result.output
        )


def test_a_ciso_evaluator_account_without_its_namespace_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from itbench.cli.main import cli

    option = "--ciso-evaluator-service-account"
    for value in ("itbench-ciso-evaluator", "/itbench-ciso-evaluator", "itbench-system/", "a/b/c"):
        result = CliRunner().invoke(cli, ["operator", "run", option, value])
        assert result.exit_code == 2, (value, result.output)
        assert "is not NAMESPACE/NAME" in result.output and option in result.output


def test_the_environment_cap_comes_from_the_flag_or_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from itbench.cli.main import cli
    from itbench.operator import app, kubeapi

    caps: list[int] = []

    async def serve(runtime: object, **_: object) -> None:
        caps.append(runtime.config.max_environments)  # type: ignore[attr-defined]

    monkeypatch.setattr(app, "serve", serve)
    monkeypatch.setattr(app, "connection_info", lambda api: None)
    monkeypatch.setattr(kubeapi, "connect", lambda kubeconfig: object())
    monkeypatch.delenv("ITBENCH_OPERATOR__MAX_ENVIRONMENTS", raising=False)
    for args, env, cap in (
        ([], {}, 20),
        ([], {"ITBENCH_OPERATOR__MAX_ENVIRONMENTS": "6"}, 6),
        (["--max-environments", "3"], {"ITBENCH_OPERATOR__MAX_ENVIRONMENTS": "6"}, 3),
    ):
        result = CliRunner().invoke(cli, ["operator", "run", *args], env=env)
        assert result.exit_code == 0, result.output
        assert caps.pop() == cap
    refused = CliRunner().invoke(cli, ["operator", "run", "--max-environments", "0"])
    assert refused.exit_code == 2 and "--max-environments" in refused.output
