"""Operator at scale: 20 BenchmarkRuns x 50 trials of the oracle agent on the simulator.

The loopback Kubernetes API (tests/integration/operator/loopback.py) runs in its own process and
the operator in another, so the peak memory measured is the operator's alone. Figures: trials per
second, status-update latency (p95 of the operator's status writes), peak memory, and the volume
of the operator's JSON logs at the default level (INFO), per 50 trials.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("ITBENCH_BENCH_OPERATOR_RUNS", "20"))
SCENARIOS = 10
TRIALS_PER_SCENARIO = 5
CONCURRENCY = 5
MAX_ENVIRONMENTS = 12
"""Simulators live at once across all runs (the operator's cap), which bounds memory."""
TIMEOUT_SECONDS = 1800.0
MEMORY_TARGET_MB = 300.0
LOG_TARGET_MB = 1.0
"""Most log output of a 50-trial run at the default level."""


class _Counter:
    """A text stream that counts what is written to it (the operator's log lines)."""

    def __init__(self) -> None:
        self.chars = 0
        self.lines = 0

    def write(self, text: str) -> int:
        self.chars += len(text.encode())
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


LOGS = _Counter()


def run() -> list[Figure]:
    """Run the scale benchmark in a child process and return its figures."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_operator"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS + 120,
    )
    if done.returncode != 0:
        print(done.stderr[-4000:], file=sys.stderr)
        raise RuntimeError("the operator benchmark failed")
    return [Figure(**f) for f in json.loads(done.stdout.strip().splitlines()[-1])]


def _start_api(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    crds = sorted((ROOT / "crds").glob("*.yaml"))
    args = [sys.executable, str(ROOT / "tests/integration/operator/loopback.py")]
    for crd in crds:
        args += ["--crd", str(crd)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=workdir)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise RuntimeError("the loopback API did not start")
    return proc, url


def _scenarios() -> list[dict[str, Any]]:
    import yaml

    docs = []
    for path in sorted((ROOT / "scenarios" / "sre").glob("*/scenario.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not doc["spec"].get("control"):
            docs.append(doc)
    return docs[:SCENARIOS]


async def _measure(url: str, workdir: Path) -> list[Figure]:
    import kopf
    from kubernetes import config

    from itbench.core.runner.context import RunnerConfig
    from itbench.operator.app import run_operator
    from itbench.operator.kubeapi import KubeApi
    from itbench.operator.runtime import OperatorConfig, OperatorRuntime

    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "l", "cluster": {"server": url}}],
                "users": [{"name": "l", "user": {"token": "l"}}],
                "contexts": [{"name": "l", "context": {"cluster": "l", "user": "l"}}],
                "current-context": "l",
            }
        ),
        encoding="utf-8",
    )
    api = KubeApi(config.new_client_from_config(config_file=str(kubeconfig)))
    latencies: list[float] = []
    write = api.custom.patch_namespaced_custom_object_status

    def timed_write(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return write(*args, **kwargs)
        finally:
            latencies.append(time.perf_counter() - start)

    api.custom.patch_namespaced_custom_object_status = timed_write  # type: ignore[method-assign]
    runtime = OperatorRuntime(
        api=api,
        config=OperatorConfig(
            trial_tick_seconds=0.05,
            run_tick_seconds=1.0,
            agent_tick_seconds=2.0,
            steps_per_tick=32,
            waits_per_tick=8,
            max_environments=MAX_ENVIRONMENTS,
            runner=RunnerConfig(),
        ),
    )
    ready = asyncio.Event()
    task = asyncio.create_task(
        run_operator(
            runtime, connection=kopf.ConnectionInfo(server=url, insecure=True), ready_flag=ready
        )
    )
    await asyncio.wait_for(ready.wait(), 30)
    custom = api.custom
    names = []
    for doc in _scenarios():
        custom.create_cluster_custom_object("itbench.io", "v1alpha1", "scenarios", doc)
        names.append(doc["metadata"]["name"])
    custom.create_namespaced_custom_object(
        "itbench.io",
        "v1alpha1",
        "default",
        "agentsubmissions",
        {
            "apiVersion": "itbench.io/v1alpha1",
            "kind": "AgentSubmission",
            "metadata": {"name": "oracle"},
            "spec": {
                "agentName": "oracle",
                "type": "SRE",
                "runtime": {"builtin": {"name": "oracle"}},
            },
        },
    )
    start = time.perf_counter()
    for i in range(RUNS):
        custom.create_namespaced_custom_object(
            "itbench.io",
            "v1alpha1",
            "default",
            "benchmarkruns",
            {
                "apiVersion": "itbench.io/v1alpha1",
                "kind": "BenchmarkRun",
                "metadata": {"name": f"scale-{i:02d}"},
                "spec": {
                    "agentRef": {"name": "oracle"},
                    "scenarios": {"names": names},
                    "trialsPerScenario": TRIALS_PER_SCENARIO,
                    "concurrency": CONCURRENCY,
                    "environment": {"type": "simulator", "capacity": CONCURRENCY},
                    "allowOracle": True,
                    "seed": i,
                },
            },
        )
    finished = succeeded = failed = errored = 0
    while time.perf_counter() - start < TIMEOUT_SECONDS:
        await asyncio.sleep(1.0)
        runs = await asyncio.to_thread(
            custom.list_namespaced_custom_object,
            "itbench.io",
            "v1alpha1",
            "default",
            "benchmarkruns",
        )
        statuses = [r.get("status") or {} for r in runs["items"]]
        finished = sum(s.get("finishedTrials", 0) for s in statuses)
        succeeded = sum((s.get("summary") or {}).get("succeeded", 0) for s in statuses)
        failed = sum((s.get("summary") or {}).get("failed", 0) for s in statuses)
        errored = sum((s.get("summary") or {}).get("errored", 0) for s in statuses)
        if all(s.get("phase") in ("Succeeded", "Failed", "Errored") for s in statuses):
            break
    elapsed = time.perf_counter() - start
    trials = await asyncio.to_thread(
        custom.list_namespaced_custom_object, "itbench.io", "v1alpha1", "default", "trials"
    )
    for trial in trials["items"]:
        status = trial.get("status") or {}
        if status.get("phase") != "Succeeded":
            print(
                f"{trial['metadata']['name']}: {status.get('phase')} {status.get('reason')}: "
                f"{status.get('message')}",
                file=sys.stderr,
            )
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else float("nan")
    p95 = latencies[int(len(latencies) * 0.95)] if latencies else float("nan")
    total = RUNS * SCENARIOS * TRIALS_PER_SCENARIO
    return [
        Figure(
            f"operator: trials finished (of {total})", float(finished), "trials", total - 0.5, ">"
        ),
        Figure(f"operator: trials succeeded (of {total})", float(succeeded), "trials"),
        Figure("operator: trials failed (agent)", float(failed), "trials"),
        Figure("operator: trials errored (platform/environment)", float(errored), "trials"),
        Figure("operator: throughput", finished / elapsed, "trials/s"),
        Figure("operator: status write latency p50", p50 * 1000, "ms"),
        Figure("operator: status write latency p95", p95 * 1000, "ms"),
        Figure("operator: peak memory", peak_rss_mb(), "MB", MEMORY_TARGET_MB),
        Figure(
            "operator: log volume per 50 trials (INFO, JSON)",
            LOGS.chars / max(finished, 1) * 50 / 1e6,
            "MB",
            LOG_TARGET_MB,
        ),
        Figure("operator: log lines per trial (INFO)", LOGS.lines / max(finished, 1), "lines"),
        *[
            Figure(f"operator: {kind} reconcile time per trial", seconds / max(finished, 1), "s")
            for kind in ("Trial", "BenchmarkRun")
            if (
                seconds := runtime.metrics.registry.get_sample_value(
                    "itbench_operator_reconcile_duration_seconds_sum", {"kind": kind}
                )
                or 0.0
            )
        ],
    ]


def _child() -> None:
    import logging

    from itbench.operator.logs import configure_logging

    configure_logging(logging.INFO, json_lines=True)  # the default of `itbench operator run`
    logging.getLogger().handlers[0].setStream(LOGS)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        proc, url = _start_api(workdir)
        try:
            figures = asyncio.run(_measure(url, workdir))
        finally:
            proc.terminate()
            proc.wait(10)
    print(json.dumps([dataclasses.asdict(f) for f in figures]))


if __name__ == "__main__":
    _child()
