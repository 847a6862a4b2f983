"""The gateway's operations: plain functions over a trial session, one per thing an agent can do.

Every transport (the HTTP routers in `itbench.gateway.routes`, the MCP tools in
`itbench.gateway.mcp`) calls these, so each guardrail, limit, audit entry and cost exists once.
Each takes the session, the call's `Origin` and typed arguments, and raises the domain errors of
`itbench.gateway.errors`.
"""

from itbench.gateway.operations.act import act
from itbench.gateway.operations.calls import Origin
from itbench.gateway.operations.objects import (
    describe,
    events,
    events_json,
    get,
    get_json,
    pod_logs,
)
from itbench.gateway.operations.observe import (
    alerts,
    instant_query,
    logs,
    range_query,
    topology,
    trace_services,
    traces,
)
from itbench.gateway.operations.payloads import Oversized, Payload
from itbench.gateway.operations.protocol import finished, list_trials, started, task, wait
from itbench.gateway.operations.submit import oracle, submit

__all__ = [
    "Origin",
    "Oversized",
    "Payload",
    "act",
    "alerts",
    "describe",
    "events",
    "events_json",
    "finished",
    "get",
    "get_json",
    "instant_query",
    "list_trials",
    "logs",
    "oracle",
    "pod_logs",
    "range_query",
    "started",
    "submit",
    "task",
    "topology",
    "trace_services",
    "traces",
    "wait",
]
