"""The operator's metrics, liveness endpoint and JSON logs."""

from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest
from operator_lab import Lab, agent, ready_agent
from prometheus_client import generate_latest

from itbench.operator.logs import JsonFormatter
from itbench.operator.metrics import OperatorMetrics


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.asyncio
async def test_liveness_endpoint_and_metrics_report_the_running_operator(lab: Lab) -> None:
    port = _free_port()
    handle = await lab.start(liveness_endpoint=f"http://127.0.0.1:{port}/healthz")
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json()["trials-in-memory"] == 0
    text = generate_latest(handle.runtime.metrics.registry).decode()
    assert 'itbench_operator_reconcile_duration_seconds_count{kind="AgentSubmission"}' in text
    for name in (
        "itbench_operator_trials",
        "itbench_operator_injection_duration_seconds",
        "itbench_operator_recovery_duration_seconds",
        "itbench_operator_injection_failures_total",
        "itbench_operator_queue_depth",
    ):
        assert f"# TYPE {name}" in text


def test_trial_phase_gauge_moves_a_trial_between_phases() -> None:
    metrics = OperatorMetrics()
    metrics.trial_phase("uid-1", "Injecting")
    metrics.trial_phase("uid-2", "Injecting")
    metrics.trial_phase("uid-1", "Ready")
    metrics.trial_phase("uid-2", None)
    sample = metrics.registry.get_sample_value
    assert sample("itbench_operator_trials", {"phase": "Injecting"}) == 0
    assert sample("itbench_operator_trials", {"phase": "Ready"}) == 1


def test_json_log_lines_carry_identifiers_from_extra() -> None:
    record = logging.LogRecord(
        "itbench.operator", logging.WARNING, __file__, 1, "environment %s", ("lost",), None
    )
    record.trial = "run-a-0"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "environment lost"
    assert line["level"] == "WARNING" and line["trial"] == "run-a-0"
    assert line["logger"] == "itbench.operator"
