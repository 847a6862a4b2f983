"""The operator's metrics, liveness endpoint and JSON logs."""

from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest
from operator_lab import Lab, agent, ready_agent
from prometheus_client import generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from itbench.core.models.trial import TrialScores
from itbench.operator.logs import JsonFormatter, RoutineToDebug
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


@pytest.mark.asyncio
async def test_the_operator_metrics_endpoint_counts_the_gateway_it_serves(lab: Lab) -> None:
    handle = await lab.start()
    port = _free_port()
    server, thread = start_http_server(
        port, addr="127.0.0.1", registry=handle.runtime.metrics.registry
    )
    try:
        transport = httpx.ASGITransport(app=handle.runtime.gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gateway:
            assert (await gateway.get("/v1/trials/run-a-0/task")).status_code == 401
            assert (await gateway.get("/v1/trials/run-a-0/nothing")).status_code == 404
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text
    finally:
        server.shutdown()
        thread.join()
    counts = {
        (s.labels["route"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "itbench_gateway_requests"
        for s in family.samples
        if s.name == "itbench_gateway_requests_total"
    }
    assert counts[("/v1/trials/{trial_id}/task", "client_error")] == 1
    assert counts[("unmatched", "client_error")] == 1
    assert counts[("/v1/trials/{trial_id}/actions", "refused")] == 0
    assert "itbench_operator_reconcile_errors_total" in text, "one endpoint serves both"


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


def _kopf_record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    record = logging.LogRecord("kopf.objects", level, __file__, 1, message, (), None)
    record.settings = object()  # Kopf's OperatorSettings ride along on every object record
    record.k8s_skip = False
    record.k8s_ref = {"kind": "Trial", "namespace": "default", "name": "t-1"}
    return record


def test_routine_kopf_lines_go_to_debug_and_records_carry_no_settings() -> None:
    at_info = RoutineToDebug(logging.INFO)
    routine = _kopf_record("Timer 'advance' succeeded.")
    assert not at_info.filter(routine) and routine.levelname == "DEBUG"
    assert RoutineToDebug(logging.DEBUG).filter(_kopf_record("Timer 'advance' succeeded."))
    waiting = _kopf_record(
        "Handler 'release-trials' failed temporarily: waiting for 3 trials to release their "
        "environments",
        logging.ERROR,
    )
    assert at_info.filter(waiting) and waiting.levelname == "INFO", "a deletion is no error"
    failure = _kopf_record("Timer 'advance' failed with an exception. Will retry.", logging.ERROR)
    assert at_info.filter(failure)
    line = json.loads(JsonFormatter().format(failure))
    assert line["object"] == "Trial default/t-1"
    assert not {"settings", "k8s_skip", "k8s_ref"} & set(line)
    uvicorn = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started", (), None)
    uvicorn.color_message = "\x1b[32mStarted\x1b[0m"
    assert "color_message" not in json.loads(JsonFormatter().format(uvicorn))


def test_counters_have_series_at_zero_and_the_process_is_measured() -> None:
    metrics = OperatorMetrics()
    sample = metrics.registry.get_sample_value
    for kind in ("Scenario", "AgentSubmission", "BenchmarkRun", "Trial"):
        assert sample("itbench_operator_reconcile_errors_total", {"kind": kind}) == 0
    assert (
        sample(
            "itbench_operator_trial_outcomes_total",
            {"phase": "Errored", "reason": "InjectionFailed"},
        )
        == 0
    )
    assert (
        sample(
            "itbench_operator_trial_task_results_total", {"task": "diagnosis", "result": "passed"}
        )
        == 0
    )
    assert (sample("process_resident_memory_bytes") or 0) > 0
    text = generate_latest(metrics.registry).decode()
    assert "python_gc_collections_total" in text and "python_info" in text


def test_a_scored_trial_counts_its_tasks() -> None:
    metrics = OperatorMetrics()
    metrics.trial_scored(
        TrialScores.model_validate(
            {
                "profile": "default@2",
                "diagnosis": {"passed": True, "flNtam": 0.75, "fpcNtam": 0.5},
                "mitigation": {"passed": False},
            }
        )
    )
    sample = metrics.registry.get_sample_value
    passed = {"task": "diagnosis", "result": "passed"}
    assert sample("itbench_operator_trial_task_results_total", passed) == 1
    failed = {"task": "mitigation", "result": "failed"}
    assert sample("itbench_operator_trial_task_results_total", failed) == 1
    assert sample("itbench_operator_trial_ntam_ratio_sum", {"kind": "fl"}) == 0.75


def test_trials_that_first_need_the_gateway_at_once_share_one_app_and_its_metrics() -> None:
    """Built-in agents of trials ticking side by side build the gateway once (its metrics can
    be registered only once in the operator's registry)."""
    import threading

    from itbench.operator.runtime import OperatorRuntime

    runtime = OperatorRuntime(api=None)  # type: ignore[arg-type]
    apps: list[object] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def build() -> None:
        start.wait()
        try:
            apps.append(runtime.gateway())
        except BaseException as exc:  # any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(apps) == 8 and all(a is apps[0] for a in apps)
