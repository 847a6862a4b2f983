"""The agent API as Model Context Protocol tools (the official `mcp` SDK), over the same operations
layer as HTTP: the same guardrails, limits, virtual costs and audit trail (entries say `MCP` and
the tool's name). A call error arrives as a tool error whose text is the problem, never a crash.

`build_server(resolve)` makes the server; `resolve` finds the caller's trial session (one fixed
session over stdio, the bearer token's over streamable HTTP). A tool refuses arguments it does not
declare (the SDK would drop them silently) with an `unknown-argument` problem.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.context import LifespanContextT, RequestT
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel, Field

from itbench import __version__
from itbench.core.models.agent_io import DiagnosisReport, MitigationReport, PostureReport
from itbench.core.models.compliance import ComplianceSubmission
from itbench.core.models.observations import AgentAction
from itbench.gateway import operations
from itbench.gateway.errors import CallError, FieldError, InvalidError, bounded, excerpt
from itbench.gateway.operations import Origin
from itbench.gateway.operations import host as host_ops
from itbench.gateway.operations.protocol import ReportName
from itbench.gateway.sessions import TrialSession

Resolver = Callable[[Context], TrialSession]
"""Finds the trial session a tool call is for."""

INSTRUCTIONS = (
    "You are working one ITBench trial: an incident (SRE), a cost problem (FinOps) or a "
    "compliance check (CISO) in a Kubernetes namespace. Call `task` first, then `started`; "
    "observe (alerts, metrics, logs, traces, topology, kubectl_*), act, `wait` for effects, "
    "submit the reports the task lists, and call `finished`. Every call costs virtual seconds; "
    "errors come back as tool errors holding a problem (type, detail, errors[field])."
)


def tool_error(exc: CallError) -> ToolError:
    """A call error as the MCP tool error a model reads: the problem, as JSON text."""
    problem: dict[str, Any] = {"type": exc.slug, "title": exc.title, "detail": exc.detail}
    if exc.errors:
        problem["errors"] = [e.model_dump() for e in exc.errors]
    problem.update({k: v for k, v in exc.extra.items() if isinstance(v, str | int | float)})
    return ToolError(json.dumps(problem, default=str))


def _plain(value: Any) -> Any:
    return value.wire() if hasattr(value, "wire") else value


class _Tools:
    """The tool functions, each one operation on the resolved session."""

    def __init__(self, resolve: Resolver) -> None:
        self.resolve = resolve

    def call(self, ctx: Context, tool: str, op: Callable[..., Any], *args: Any) -> str:
        """Run an operation for a tool; its answer as compact JSON text (what a model reads)."""
        session = self.resolve(ctx)
        try:
            result = op(session, Origin("MCP", tool), *args)
        except CallError as exc:
            raise tool_error(exc) from None
        if isinstance(result, BaseModel):
            return result.model_dump_json(by_alias=True)
        return json.dumps(_plain(result), separators=(",", ":"), default=str)

    def reject(
        self, ctx: Context[Any, Any], tool: str, unknown: list[str], declared: list[str]
    ) -> ToolError:
        """The tool error for arguments a tool does not declare, recorded on the trial's audit
        trail as a rejected request (as HTTP records a request refused before its route)."""
        session = self.resolve(ctx)
        names = ", ".join(excerpt(a, 60) for a in unknown[:10])
        error = InvalidError(
            "unknown-argument",
            "Unknown argument",
            bounded(
                f"{tool} has no argument {names}; its arguments are "
                f"{', '.join(declared) or 'none'}. Nothing was done"
            ),
            errors=[
                FieldError(field=bounded(a, 100), message=f"not an argument of {tool}")
                for a in unknown[:10]
            ],
        )
        session.record(
            method="MCP",
            path=tool,
            action="request",
            outcome="rejected",
            reason=error.detail,
            detail={"arguments": [bounded(a, 100) for a in unknown[:10]]},
        )
        return tool_error(error)


class _StrictTool(Tool):
    """A tool that refuses arguments it does not declare: the SDK's argument model ignores them,
    so `kubectl_get(kind='pods', namespace='kube-system')` would read the trial's namespace
    without a word."""

    reject: Callable[[Context[Any, Any], str, list[str], list[str]], ToolError] = Field(
        exclude=True
    )

    async def run(
        self,
        arguments: dict[str, Any],
        context: Context[LifespanContextT, RequestT],
        convert_result: bool = False,
    ) -> Any:
        """Refuse undeclared arguments, then run the tool as the SDK does."""
        declared = sorted(self.parameters.get("properties") or {})
        unknown = sorted(set(arguments) - set(declared))
        if unknown:
            raise await anyio.to_thread.run_sync(
                functools.partial(self.reject, context, self.name, unknown, declared)
            )
        return await super().run(arguments, context, convert_result=convert_result)


def _strict(tool: Tool, tools: _Tools) -> _StrictTool:
    fields = {name: getattr(tool, name) for name in Tool.model_fields}
    fields["parameters"] = {**tool.parameters, "additionalProperties": False}
    return _StrictTool(**fields, reject=tools.reject)


def _object_schema(name: str, model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    defs = schema.pop("$defs", {})
    out: dict[str, Any] = {"type": "object", "properties": {name: schema}, "required": [name]}
    if defs:
        out["$defs"] = defs
    return out


def build_server(resolve: Resolver, *, name: str = "itbench") -> MCPServer:
    """The MCP server of the agent API.

    Args:
        resolve: Finds the caller's trial session (may raise ToolError).
        name: The server's name.
    """
    # Tools are declared on a catalog server, then served as strict tools by the real one.
    server: MCPServer = MCPServer(name)
    tools = _Tools(resolve)

    @server.tool(
        description="The task: firing alerts (or the CISO requirement), namespace, "
        "deadline, telemetry, the reports to submit with their JSON Schemas. No "
        "arguments. Example: task()"
    )
    def task(ctx: Context) -> str:
        return tools.call(ctx, "task", operations.task)

    @server.tool(description="Report STARTED (call once, after task). Example: started()")
    def started(ctx: Context) -> str:
        return tools.call(ctx, "started", operations.started)

    @server.tool(
        description="Report FINISHED: you are done; later calls are refused. Example: finished()"
    )
    def finished(ctx: Context) -> str:
        return tools.call(ctx, "finished", operations.finished)

    @server.tool(
        description="Let time pass (0 < seconds <= 3600, up to the deadline), e.g. "
        "until alerts clear after a fix. Example: wait(seconds=60)"
    )
    def wait(ctx: Context, seconds: float) -> str:
        payload = {"seconds": seconds}
        return tools.call(ctx, "wait", operations.wait, payload)

    @server.tool(description="Active alerts (Prometheus /api/v1/alerts shape). Example: alerts()")
    def alerts(ctx: Context) -> str:
        return tools.call(ctx, "alerts", operations.alerts)

    @server.tool(
        description="Instant PromQL query at `time` (RFC 3339 or Unix seconds; default "
        "now). Example: query_metrics(query='sum by (service_name) "
        '(rate(traces_span_metrics_calls_total{status_code="STATUS_CODE_ERROR"}[5m]))\')'
    )
    def query_metrics(ctx: Context, query: str, time: str | None = None) -> str:
        return tools.call(ctx, "query_metrics", operations.instant_query, query, time)

    @server.tool(
        description="Range PromQL query (default: the last 30 min at step 15s). "
        "Example: query_metrics_range(query='rate(traces_span_metrics_calls_total[5m])',"
        " step='1m')"
    )
    def query_metrics_range(
        ctx: Context,
        query: str,
        start: str | None = None,
        end: str | None = None,
        step: str | None = None,
    ) -> str:
        return tools.call(
            ctx, "query_metrics_range", operations.range_query, query, start, end, step
        )

    @server.tool(
        description="LogQL log query: a stream selector and line filters (default: "
        'the last hour, 100 lines). Example: query_logs(query=\'{service_name="cart"} '
        '|= "error"\', limit=50)'
    )
    def query_logs(
        ctx: Context,
        query: str,
        start: str | None = None,
        end: str | None = None,
        limit: int = 100,
    ) -> str:
        return tools.call(ctx, "query_logs", operations.logs, query, start, end, limit)

    @server.tool(
        description="Trace search for a service (Jaeger shape); tags is an object of "
        "span tags. Example: search_traces(service='checkout', tags={'error': 'true'})"
    )
    def search_traces(
        ctx: Context,
        service: str,
        operation: str | None = None,
        tags: dict[str, str] | None = None,
        lookback: str = "1h",
        limit: int = 20,
    ) -> str:
        return tools.call(
            ctx,
            "search_traces",
            operations.traces,
            service,
            operation,
            tags,
            None,
            None,
            lookback,
            limit,
        )

    @server.tool(description="Services that report traces. Example: trace_services()")
    def trace_services(ctx: Context) -> str:
        return tools.call(ctx, "trace_services", operations.trace_services)

    @server.tool(
        description="The system topology: entities {id, kind, name} and typed edges "
        "(owns, selects, calls, ...). Example: topology()"
    )
    def topology(ctx: Context) -> str:
        return tools.call(ctx, "topology", operations.topology)

    @server.tool(
        description="kubectl get: objects of a kind (any spelling: po, pods, Pod), or "
        "one by name, in the trial's namespace (the only one in scope; `namespace` defaults "
        "to it); JSON items and the kubectl table. Example: kubectl_get(kind='pods')"
    )
    def kubectl_get(
        ctx: Context, kind: str, name: str | None = None, namespace: str | None = None
    ) -> str:
        return tools.call(ctx, "kubectl_get", operations.get, kind, name, namespace)

    @server.tool(
        description="kubectl describe: one object with its events. Example: "
        "kubectl_describe(kind='deployment', name='checkout')"
    )
    def kubectl_describe(ctx: Context, kind: str, name: str, namespace: str | None = None) -> str:
        return tools.call(ctx, "kubectl_describe", operations.describe, kind, name, namespace)

    @server.tool(
        description="kubectl logs --tail: the last lines of a pod's log (1-5000). "
        "Example: kubectl_logs(pod='cart-7d4b9c-abcde', tail=100)"
    )
    def kubectl_logs(ctx: Context, pod: str, tail: int = 100) -> str:
        return tools.call(ctx, "kubectl_logs", operations.pod_logs, pod, tail)

    @server.tool(
        description="kubectl get events, optionally of one object (kind and name). "
        "Example: kubectl_events(kind='Pod', name='cart-7d4b9c-abcde')"
    )
    def kubectl_events(ctx: Context, kind: str | None = None, name: str | None = None) -> str:
        return tools.call(ctx, "kubectl_events", operations.events, kind, name)

    @server.tool(
        description="Carry out one typed action (verb: patch, set-image, "
        "set-resources, set-env, scale, rollout-restart, rollout-undo, delete, apply, "
        "set-flag) after the guardrails. Example: act(action={'verb': 'rollout-undo', "
        "'kind': 'Deployment', 'name': 'checkout'})"
    )
    def act(ctx: Context, action: dict[str, Any]) -> str:
        return tools.call(ctx, "act", operations.act, action)

    @server.tool(
        description="CISO: the RHEL9 host's files (every path with mode and owners, or one "
        "file's text). Example: host_files(path='/etc/ssh/sshd_config')"
    )
    def host_files(ctx: Context, path: str | None = None) -> str:
        return tools.call(ctx, "host_files", host_ops.host_files, path)

    @server.tool(
        description="CISO: one of the RHEL9 host's read-only commands (sshd -T, systemctl, "
        "rpm -q, sysctl, getenforce, ...). Example: host_command(argv=['sshd', '-T'])"
    )
    def host_command(ctx: Context, argv: list[str]) -> str:
        return tools.call(ctx, "host_command", host_ops.host_command, {"argv": argv})

    @server.tool(
        description="CISO: try an evidence collection (kind script or playbook) in the "
        "sandbox against a read-only copy of the trial's environment; answers the evidence "
        "it wrote to $ITBENCH_EVIDENCE or why none. Example: try_collection(collection="
        "{'kind': 'script', 'content': 'sshd -T > /tmp/t; ...'})"
    )
    def try_collection(ctx: Context, collection: dict[str, Any]) -> str:
        return tools.call(ctx, "try_collection", host_ops.try_collection, collection)

    def report_tool(report: ReportName, model: type[BaseModel], example: str) -> None:
        def submit(ctx: Context, report_body: dict[str, Any]) -> str:
            return tools.call(ctx, f"submit_{report}", _submitter(report), report_body)

        server.add_tool(
            submit,
            name=f"submit_{report}",
            description=f"Submit the {report} report (validated; the last valid one counts). "
            f"Example: submit_{report}(report_body={example})",
        )
        tool = server._tool_manager.get_tool(f"submit_{report}")
        if tool is not None:
            tool.parameters = _object_schema("report_body", model)

    report_tool(
        "diagnosis",
        DiagnosisReport,
        "{'entities': [{'kind': 'Deployment', 'name': 'checkout', 'rootCause': true, "
        "'category': 'BadImage'}], 'reasoning': '...'} (a root cause counts only with its "
        "category)",
    )
    report_tool("mitigation", MitigationReport, "{'actions': ['rolled back checkout']}")
    report_tool(
        "compliance",
        ComplianceSubmission,
        "{'kyverno': 'apiVersion: policies.kyverno.io/v1\\nkind: ValidatingPolicy\\n...'} or "
        "{'rego': 'package cis ...', 'collection': {'kind': 'script', 'content': '...'}}",
    )
    report_tool(
        "posture",
        PostureReport,
        "{'assessments': [{'controlId': 'host-network', 'target': 'Deployment/cart', "
        "'result': 'pass'}]}",
    )

    act_tool = server._tool_manager.get_tool("act")
    if act_tool is not None:
        act_tool.parameters = _object_schema("action", AgentAction)
    return MCPServer(
        name,
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=[_strict(tool, tools) for tool in server._tool_manager.list_tools()],
    )


def _submitter(report: ReportName) -> Callable[..., Any]:
    def submit(session: TrialSession, origin: Origin, body: dict[str, Any]) -> Any:
        return operations.submit(session, origin, report, body)

    return submit
