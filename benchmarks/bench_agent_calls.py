"""The platform's overhead per agent tool call through `--agent-cmd`: an agent process calls the
gateway served on loopback over HTTP (SDK, gateway, guardrails, audit trail, simulator), no
model involved. Targets: p50 under 5 ms and p99 under 50 ms of wall time per call, so that the
model dominates a trial's time. The CPU figures (the agent's SDK side plus the gateway's side of
each call) do not depend on what else the machine runs: they are what a call costs on idle cores.
"""

from __future__ import annotations

import json
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure
from itbench.catalog_files import load_catalog
from itbench.cli.serve import practice_trial
from itbench.core.runner.machine import new_status
from itbench.execution.agents import from_command
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial
from itbench.execution.runners import AgentFiles, LoopbackGateway, command_runner
from itbench.gateway.app import create_app

ROOT = Path(__file__).resolve().parents[1]
CALLS = 2100

Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cpu_timed(app: Asgi, samples: list[float]) -> Asgi:
    # Endpoints run on the server's event loop (inline), so the thread's CPU time between the
    # request's start and its end is the gateway's own work for that call.
    async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        start = time.thread_time()
        await app(scope, receive, send)
        if scope.get("type") == "http":
            samples.append(time.thread_time() - start)

    return timed


def run() -> list[Figure]:
    """Run one trial with the measuring agent command and return the call figures."""
    catalog, _problems = load_catalog(ROOT / "scenarios")
    trial = practice_trial(
        catalog.get("cart-flagd-failure"), seed=42, agent_seconds=86_400, allow_oracle=False
    )
    server_cpu: list[float] = []
    gateway = LoopbackGateway(_cpu_timed(create_app(trial.registry, inline=True), server_cpu))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "timings.json"
        script = ROOT / "benchmarks" / "agent_calls.py"
        agent = from_command(
            f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}",
            args={"calls": str(CALLS), "out": str(out)},
            wall_seconds=600,
        )
        files = AgentFiles(
            stdout=Path(tmp) / "out.log", stderr=Path(tmp) / "err.log", steps=Path(tmp) / "s"
        )
        try:
            final = drive_trial(
                new_status(trial.executor.now()),
                trial.executor,
                persist=lambda _s: None,
                run_agent=command_runner(agent, lambda: gateway.url, files),
                config=EMBEDDED_CONFIG,
            )
        finally:
            gateway.close()
        if not out.exists():
            raise RuntimeError(
                f"the measuring agent did not finish: {final.reason} {final.message}; "
                f"{files.stderr.read_text()[-2000:]}"
            )
        timings: dict[str, Any] = json.loads(out.read_text())
    by_tool: dict[str, list[float]] = timings["wall"]
    walls = [t for ts in by_tool.values() for t in ts]
    client_cpu: list[float] = timings["cpu"]
    order: list[str] = timings["order"]
    # The loop's calls are the last ones before FINISHED.
    measured = server_cpu[-(len(client_cpu) + 1) : -1]
    cpu = [a + b for a, b in zip(client_cpu, measured, strict=True)]
    figures = [
        Figure("agent_cmd.call.p50", _quantile(walls, 0.50) * 1000, "ms", target=5.0),
        Figure("agent_cmd.call.p99", _quantile(walls, 0.99) * 1000, "ms", target=50.0),
        Figure("agent_cmd.call.mean", statistics.fmean(walls) * 1000, "ms"),
        Figure("agent_cmd.call.cpu.p50", _quantile(cpu, 0.50) * 1000, "ms"),
        Figure("agent_cmd.call.cpu.p99", _quantile(cpu, 0.99) * 1000, "ms"),
        Figure("agent_cmd.call.gateway_cpu.p50", _quantile(measured, 0.50) * 1000, "ms"),
        Figure("agent_cmd.call.sdk_cpu.p50", _quantile(client_cpu, 0.50) * 1000, "ms"),
        Figure("agent_cmd.calls", float(len(walls)), "calls"),
    ]
    for tool in sorted(by_tool):
        tool_cpu = [c for c, name in zip(cpu, order, strict=True) if name == tool]
        figures.append(Figure(f"agent_cmd.{tool}.p50", _quantile(by_tool[tool], 0.5) * 1000, "ms"))
        figures.append(Figure(f"agent_cmd.{tool}.cpu.p50", _quantile(tool_cpu, 0.5) * 1000, "ms"))
    return figures
