"""A command agent that measures the platform's side of its tool calls (no model): it calls a mix
of observation tools through the SDK over HTTP and writes each call's seconds to a JSON file.

Run by `bench_agent_calls.py` through `--agent-cmd`'s runner; `ITBENCH_AGENT__CALLS` sets how
many calls, `ITBENCH_AGENT__OUT` where the timings go.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from itbench.client import ITBenchClient


def main() -> int:
    client = ITBenchClient(os.environ["ITBENCH_GATEWAY_URL"], os.environ["ITBENCH_TOKEN"])
    client.use_trial(os.environ["ITBENCH_TRIAL"])
    calls = int(os.environ.get("ITBENCH_AGENT__CALLS", "1000"))
    task = client.task()
    client.started()
    pod = str(client.get("pods").items[0]["metadata"]["name"])
    tools: list[tuple[str, Callable[[], Any]]] = [
        ("alerts", client.alerts),
        (
            "promql",
            lambda: client.query(
                "sum by (service_name) (rate(traces_span_metrics_calls_total[5m]))"
            ),
        ),
        ("kubectl-get", lambda: client.get("pods")),
        ("kubectl-describe", lambda: client.describe("deployment", "cart")),
        ("kubectl-logs", lambda: client.pod_logs(pod, tail=50)),
        ("logql", lambda: client.logs(f'{{namespace="{task.namespace}"}} |= "error"', limit=50)),
        ("topology", client.topology),
    ]
    for _name, fn in tools:  # warm up every route once
        fn()
    walls: dict[str, list[float]] = {name: [] for name, _ in tools}
    cpu: list[float] = []
    order: list[str] = []
    for i in range(calls):
        name, fn = tools[i % len(tools)]
        order.append(name)
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - start_cpu)
        walls[name].append(time.perf_counter() - start)
    Path(os.environ["ITBENCH_AGENT__OUT"]).write_text(
        json.dumps({"wall": walls, "cpu": cpu, "order": order})
    )
    client.finished()
    return 0


if __name__ == "__main__":
    sys.exit(main())
