"""The crews' tools, over the SDK only: NL2Alerts, NL2Kubectl, NL2Metrics (PromQL), NL2Logs (LogQL),
NL2Traces, topology, wait, a feature flag switch, the mitigation plan and the report tools.

An NL2* tool asks the tool model to turn a request in words into a query or command; reflection
lints it before it runs and re-prompts the tool model with the error (and with an execution
error the same way), a bounded number of times. A guardrail refusal, by the linter or by the
gateway, goes back to the reasoning model as it is: a line not to cross, not a slip to fix.
Every output is fitted to the token budget; calls and results are recorded as the model saw them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from crewai.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.crew.budget import fit
from agents.crew.linters import (
    GuardrailError,
    KubectlCall,
    LintError,
    first_line,
    lint_logql,
    lint_promql,
    parse_kubectl,
)
from agents.crew.recorder import Trajectory
from itbench.client import (
    ActionVerb,
    AgentAction,
    AlertState,
    DiagnosisReport,
    FaultCategory,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PredictedEdge,
    PredictedEntity,
    TelemetryToggles,
)

METRIC_NAMES_QUERY = 'count by (__name__) ({__name__=~".+"})'
"""How NL2Metrics learns which metrics exist (once per trial)."""

CATEGORIES = ", ".join(c.value for c in FaultCategory)
"""What can be wrong at a root cause (the diagnosis report's closed list)."""


@dataclass
class Toolkit:
    """What every tool of one trial shares.

    Attributes:
        client: The SDK client of the trial.
        namespace: The trial's namespace.
        tool_model: The model that writes queries and commands.
        trajectory: Where calls and results are recorded.
        budget: Tokens of a tool output the model sees at most.
        retries: Re-prompts of the tool model after an error.
        telemetry: The signals available in the trial.
        actions: What the agent changed, in words (for the mitigation report).
        plans: The mitigation plans written.
        submitted: Reports accepted, by kind.
    """

    client: ITBenchClient
    namespace: str
    tool_model: Any
    trajectory: Trajectory
    budget: int = 2000
    retries: int = 3
    telemetry: TelemetryToggles = field(default_factory=TelemetryToggles)
    actions: list[str] = field(default_factory=list)
    plans: list[str] = field(default_factory=list)
    submitted: dict[str, str] = field(default_factory=dict)
    _metric_names: list[str] | None = field(default=None, init=False, repr=False)
    _services: list[str] | None = field(default=None, init=False, repr=False)

    def metric_names(self) -> list[str]:
        """The metric names the trial's Prometheus has (asked once)."""
        if self._metric_names is None:
            try:
                data = self.client.query(METRIC_NAMES_QUERY)
                self._metric_names = sorted(
                    {str(r["metric"].get("__name__", "")) for r in data.get("result", [])} - {""}
                )
            except ITBenchAPIError:
                self._metric_names = []
        return self._metric_names

    def services(self) -> list[str]:
        """The services that report traces (asked once)."""
        if self._services is None:
            try:
                self._services = sorted(self.client.trace_services())
            except ITBenchAPIError:
                self._services = []
        return self._services


def problem_text(exc: ITBenchAPIError) -> str:
    """A gateway problem in words for the model."""
    rule = exc.problem.get("rule")
    fields = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in exc.errors)
    detail = exc.detail + (f" ({fields})" if fields else "")
    if exc.status == 403:
        return (
            f"Refused by the guardrails ({rule or exc.slug}): {detail}. This is not allowed; "
            "choose another way."
        )
    if exc.status == 409:
        return f"The trial does not take this call now ({exc.slug}): {detail}."
    return f"Error {exc.status} ({exc.slug}): {detail}"


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")

    request: str = Field(
        default="", description="What you want to know or do, in words (one thing at a time)."
    )


class _ToolBase(BaseTool):
    """Records the call and the result as the model sees it (fitted to the budget)."""

    kit: Any = Field(default=None, exclude=True)
    actor: str = ""

    def _run(self, **kwargs: Any) -> str:
        kit: Toolkit = self.kit
        kit.trajectory.step(
            "tool-call",
            json.dumps(kwargs, ensure_ascii=False, default=str),
            actor=self.actor,
            tool=self.name,
        )
        try:
            out = self.work(**kwargs)
        except ITBenchAPIError as exc:
            out = problem_text(exc)
        shown, cut = fit(out, kit.budget)
        kit.trajectory.step(
            "tool-result",
            shown,
            actor=self.actor,
            tool=self.name,
            truncatedFrom=len(out) if cut else None,
        )
        return shown

    def work(self, **kwargs: Any) -> str:  # pragma: no cover - every tool overrides it
        """The tool's answer (before fitting)."""
        raise NotImplementedError


# ---- reflection ---------------------------------------------------------------------------


def reflect(
    kit: Toolkit,
    *,
    tool: str,
    actor: str,
    what: str,
    system: str,
    request: str,
    lint: Callable[[str], Any],
    execute: Callable[[Any], str],
    extract: Callable[[str], str] = first_line,
) -> str:
    """Generate with the tool model, lint, run; re-prompt with lint or execution errors.

    Args:
        kit: The trial's toolkit.
        tool: The tool's name (for the trajectory).
        actor: Who asked.
        what: What is generated ("kubectl command", "PromQL query", ...).
        system: The tool model's instructions.
        request: The request in words.
        lint: Checks the candidate; returns what `execute` takes (raises LintError).
        execute: Runs it; returns the result in words (raises ITBenchAPIError).
        extract: Takes the candidate out of the tool model's answer.

    Returns:
        The query or command and its result, a refusal, or why no valid one came.
    """
    messages: list[dict[str, str]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": request or "(no request given)"},
    ]
    last = ""
    for _attempt in range(kit.retries + 1):
        answer = kit.tool_model.call(messages, from_agent=None)
        candidate = extract(str(answer))
        try:
            checked = lint(candidate)
        except GuardrailError as exc:
            kit.trajectory.step("note", f"guardrail: {candidate}: {exc}", actor=actor, tool=tool)
            return (
                f"{what}: {candidate}\nRefused by the guardrails: {exc}. This is not allowed; "
                "choose another way."
            )
        except LintError as exc:
            last = str(exc)
            kit.trajectory.step("note", f"lint: {candidate}: {exc}", actor=actor, tool=tool)
            messages += [
                {"role": "assistant", "content": str(answer)},
                {
                    "role": "user",
                    "content": f"The {what} `{candidate}` is not valid: {exc}\n"
                    f"Reply with a corrected {what} only.",
                },
            ]
            continue
        try:
            result = execute(checked)
        except ITBenchAPIError as exc:
            if exc.status in (403, 409):
                return f"{what}: {candidate}\n{problem_text(exc)}"
            last = problem_text(exc)
            kit.trajectory.step("note", f"error: {candidate}: {last}", actor=actor, tool=tool)
            messages += [
                {"role": "assistant", "content": str(answer)},
                {
                    "role": "user",
                    "content": f"Running the {what} `{candidate}` failed: {last}\n"
                    f"Reply with a corrected {what} only.",
                },
            ]
            continue
        return f"{what}: {candidate}\n{result}"
    return (
        f"No valid {what} after {kit.retries + 1} attempts (last error: {last}). Rephrase the "
        "request more precisely."
    )


# ---- observation tools --------------------------------------------------------------------


class NL2Alerts(_ToolBase):
    """The alerts firing or pending now."""

    name: str = "nl2alerts"
    description: str = (
        "List the alerts firing or pending now (name, labels, since when, value, summary). "
        'Input: {"request": "which alerts fire"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The alerts, one per line."""
        alerts = self.kit.client.alerts()
        if not alerts:
            return "No alert is firing or pending."
        lines = []
        for a in sorted(alerts, key=lambda a: (a.state != AlertState.FIRING, a.alertname)):
            labels = ", ".join(f"{k}={v}" for k, v in sorted(a.labels.items()))
            summary = a.annotations.get("summary") or a.annotations.get("description") or ""
            lines.append(
                f"{a.state.value} {a.alertname} {{{labels}}} since {a.active_at:%H:%M:%S} "
                f"value={a.value:.4g} {summary}".rstrip()
            )
        return "\n".join(lines)


KUBECTL_SYSTEM = """You translate a request into exactly one kubectl command for namespace {ns}.
Reply with the command only, on one line, without code fences or explanations.
Reading: kubectl get <kind> [<name>] [-o yaml|json|wide]; kubectl describe <kind> <name>;
kubectl logs <pod> --tail=<n>; kubectl get events [--for <kind>/<name>].
{acting}No pipes, no shell, no other namespace, no label selectors.
Examples: kubectl get pods | kubectl describe deployment cart
| kubectl logs cart-6d9f7-abcde --tail=50 | kubectl get configmap flagd-config -o yaml
| kubectl get hpa -o yaml"""

KUBECTL_ACTING = """Changing: kubectl rollout restart|undo deployment/<name>;
kubectl scale deployment/<name> --replicas=<n>;
kubectl set image deployment/<name> <container>=<image>;
kubectl set resources deployment/<name> -c <container> --limits=cpu=..,memory=.. --requests=..;
kubectl set env deployment/<name> KEY=VALUE;
kubectl patch <kind> <name> --type merge -p '<json>';
kubectl delete <kind> <name>; kubectl apply -f '<one object as JSON>'.
"""


class NL2Kubectl(_ToolBase):
    """kubectl in words: the tool model writes it, reflection checks it, the SDK runs it."""

    name: str = "nl2kubectl"
    description: str = (
        "Run one kubectl command written from your request (get, describe, logs, events; the "
        "mitigation agent may also change objects). Input: "
        '{"request": "show the pods of the cart deployment"}.'
    )
    args_schema: type[BaseModel] = _Request
    allow_actions: bool = False

    def work(self, request: str = "") -> str:
        """The command and its output."""
        kit: Toolkit = self.kit
        system = KUBECTL_SYSTEM.format(
            ns=kit.namespace, acting=KUBECTL_ACTING if self.allow_actions else ""
        )
        return reflect(
            kit,
            tool=self.name,
            actor=self.actor,
            what="kubectl command",
            system=system,
            request=request,
            lint=lambda c: parse_kubectl(c, kit.namespace, allow_actions=self.allow_actions),
            execute=self._execute,
        )

    def _execute(self, call: KubectlCall) -> str:
        kit: Toolkit = self.kit
        client = kit.client
        if call.verb == "get":
            got = client.get(call.kind, call.name or None)
            if call.output in ("yaml", "json"):
                items = [_without_noise(o) for o in got.items]
                if call.output == "json":
                    return json.dumps(items, indent=1)
                return yaml.dump(items, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)
            if call.output == "name":
                return "\n".join(
                    f"{got.kind.lower()}/{(o.get('metadata') or {}).get('name', '')}"
                    for o in got.items
                )
            return got.text or f"No {call.kind} objects in {kit.namespace}."
        if call.verb == "describe":
            return client.describe(call.kind, call.name).text
        if call.verb == "logs":
            logs = client.pod_logs(call.name, tail=call.tail or 100)
            return logs.text or f"pod {call.name} logged nothing"
        if call.verb == "events":
            events = client.events(call.kind or None, call.name or None)
            return events.text or "No events."
        action = _action_of(call)
        result = client.act(action)
        kit.actions.append(
            f"{action.verb.value} {action.kind}/{action.name}: {result.outcome}: {result.message}"
        )
        return f"{result.outcome}: {result.message}"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, as `kubectl get -o yaml` prints them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def _without_noise(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    for key in ("managedFields", "uid", "resourceVersion", "generation"):
        meta.pop(key, None)
    return {**obj, "metadata": meta}


def _action_of(call: KubectlCall) -> AgentAction:
    verb = ActionVerb(call.verb)
    return AgentAction(
        verb=verb,
        kind=call.kind,
        name=call.name,
        container=call.container,
        image=call.image,
        replicas=call.replicas,
        limits=call.limits,
        requests=call.requests,
        env=call.env,
        patch=call.patch,
        manifest=call.manifest,
    )


PROMQL_SYSTEM = """You translate a request into exactly one PromQL query (Prometheus).
Reply with the query only, on one line, without code fences or explanations.
The workloads run in namespace {ns}. Metrics that exist: {names}.
Span metrics: traces_span_metrics_calls_total (labels service_name, span_name, status_code with
STATUS_CODE_ERROR for errors), traces_span_metrics_duration_milliseconds_bucket.
Example:
sum by (service_name) (rate(traces_span_metrics_calls_total{{status_code="STATUS_CODE_ERROR"}}[5m]))
"""


class NL2Metrics(_ToolBase):
    """Metrics in words: the tool model writes PromQL, the parser checks it, Prometheus answers."""

    name: str = "nl2metrics"
    description: str = (
        "Query metrics (Prometheus) with PromQL written from your request: error rates, "
        'latency, CPU, memory, restarts, replicas, cost. Input: {"request": "error rate per '
        'service over the last 5 minutes"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The query and its series."""
        kit: Toolkit = self.kit
        system = PROMQL_SYSTEM.format(
            ns=kit.namespace, names=", ".join(kit.metric_names()) or "unknown"
        )
        return reflect(
            kit,
            tool=self.name,
            actor=self.actor,
            what="PromQL query",
            system=system,
            request=request,
            lint=lambda q: lint_promql(q, kit.namespace),
            execute=lambda q: _series(kit.client.query(q)),
        )


def _series(data: dict[str, Any]) -> str:
    kind = data.get("resultType")
    result = data.get("result") or []
    if kind == "scalar":
        return f"scalar {result[1] if isinstance(result, list) and len(result) > 1 else result}"
    if not result:
        return "No series."
    rows = []
    for series in result:
        metric = series.get("metric") or {}
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()))
        if "value" in series:
            value = float(series["value"][1])
            rows.append((value, f"{{{labels}}} {value:.6g}"))
        else:
            values = [float(v[1]) for v in series.get("values") or []]
            if values:
                first, last, top = values[0], values[-1], max(values)
                rows.append((last, f"{{{labels}}} first {first:.6g} last {last:.6g} max {top:.6g}"))
    rows.sort(key=lambda r: -abs(r[0]) if r[0] == r[0] else 0.0)
    return "\n".join(text for _v, text in rows)


LOGQL_SYSTEM = """You translate a request into exactly one LogQL query (Loki).
Reply with the query only, on one line, without code fences or explanations.
Stream labels (the collector's resource attributes): k8s_namespace_name="{ns}", service_name,
k8s_deployment_name, k8s_pod_name. Line filters: |= "text", != "text", |~ "regex"; parsers:
| json, | logfmt.
Example: {{k8s_namespace_name="{ns}", service_name="checkout"}} |= "error" """


class NL2Logs(_ToolBase):
    """Logs in words: the tool model writes LogQL, the linter checks it, Loki answers."""

    name: str = "nl2logs"
    description: str = (
        "Search logs (Loki) with LogQL written from your request. Input: "
        '{"request": "errors logged by checkout"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The query and its lines."""
        kit: Toolkit = self.kit
        return reflect(
            kit,
            tool=self.name,
            actor=self.actor,
            what="LogQL query",
            system=LOGQL_SYSTEM.format(ns=kit.namespace),
            request=request,
            lint=lambda q: lint_logql(q, kit.namespace),
            execute=lambda q: _log_lines(kit.client.logs(q, limit=200)),
        )


def _log_lines(data: dict[str, Any]) -> str:
    lines: list[tuple[str, str]] = []
    for stream in data.get("result") or []:
        labels = stream.get("stream") or {}
        who = labels.get("pod") or labels.get("service_name") or ""
        for ts, line in stream.get("values") or []:
            lines.append((str(ts), f"{who}: {line}"))
    if not lines:
        return "No log lines."
    lines.sort()
    return "\n".join(text for _ts, text in lines)


TRACES_SYSTEM = """You translate a request into one Jaeger trace search, as a JSON object:
{{"service": "<service>", "operation": null, "tags": {{"error": "true"}}, "lookback": "15m",
"limit": 20}}. Reply with the JSON only. Services: {services}."""


class NL2Traces(_ToolBase):
    """Traces in words: the tool model writes a trace search, it is checked, Jaeger answers."""

    name: str = "nl2traces"
    description: str = (
        "Search traces (Jaeger) written from your request: which calls fail or are slow and "
        'where. Input: {"request": "failing traces through checkout"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The search and a summary of the traces found."""
        kit: Toolkit = self.kit
        if not kit.telemetry.traces:
            return "Traces are not available in this trial."
        return reflect(
            kit,
            tool=self.name,
            actor=self.actor,
            what="trace search",
            system=TRACES_SYSTEM.format(services=", ".join(kit.services())),
            request=request,
            lint=self._lint,
            execute=self._execute,
            extract=lambda a: first_line(a).strip(),
        )

    def _lint(self, text: str) -> dict[str, Any]:
        try:
            search = json.loads(text)
        except ValueError as exc:
            raise LintError(f"not a JSON object: {exc}") from None
        if not isinstance(search, dict) or not isinstance(search.get("service"), str):
            raise LintError('give a JSON object with "service"')
        services = self.kit.services()
        if services and search["service"] not in services:
            raise LintError(
                f"unknown service {search['service']!r}; services: {', '.join(services)}"
            )
        tags = search.get("tags") or {}
        if not isinstance(tags, dict):
            raise LintError('"tags" must be an object, e.g. {"error": "true"}')
        return search

    def _execute(self, search: dict[str, Any]) -> str:
        traces = self.kit.client.traces(
            search["service"],
            operation=search.get("operation") or None,
            tags={str(k): str(v) for k, v in (search.get("tags") or {}).items()} or None,
            lookback=str(search.get("lookback") or "15m"),
            limit=int(search.get("limit") or 20),
        )
        if not traces:
            return "No traces."
        out = []
        for trace in traces:
            processes = trace.get("processes") or {}
            spans = trace.get("spans") or []
            errors = []
            for span in spans:
                tags = {t.get("key"): t.get("value") for t in span.get("tags") or []}
                if (
                    str(tags.get("error", "")).lower() == "true"
                    or tags.get("otel.status_code") == "ERROR"
                ):
                    service = (processes.get(span.get("processID")) or {}).get("serviceName", "?")
                    errors.append(f"{service}:{span.get('operationName')}")
            longest = max((s.get("duration", 0) for s in spans), default=0)
            out.append(
                f"trace {str(trace.get('traceID', ''))[:16]}: {len(spans)} spans, longest "
                f"{longest / 1000:.1f} ms; errors at {', '.join(dict.fromkeys(errors)) or 'none'}"
            )
        return "\n".join(out)


class Topology(_ToolBase):
    """The system topology: who calls whom, what owns and selects what."""

    name: str = "topology"
    description: str = (
        "Show the system topology: service calls and the objects behind each workload "
        '(owns, selects, runs-on, ...). Input: {"request": "who calls checkout"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """Edges grouped by type, service calls first."""
        view = self.kit.client.topology()
        by_type: dict[str, list[str]] = {}
        for edge in view.edges:
            by_type.setdefault(str(edge.get("type")), []).append(
                f"{edge.get('source')} -> {edge.get('target')}"
            )
        order = ["calls", *sorted(t for t in by_type if t != "calls")]
        parts = [f"{t}:\n  " + "\n  ".join(by_type[t]) for t in order if t in by_type]
        return "\n".join(parts) or "No topology."


# ---- acting -------------------------------------------------------------------------------


class _Seconds(BaseModel):
    model_config = ConfigDict(extra="ignore")

    seconds: float = Field(description="Seconds to let pass (e.g. 60).", gt=0, le=3600)


class Wait(_ToolBase):
    """Let time pass in the trial (e.g. for a fix to take effect)."""

    name: str = "wait"
    description: str = (
        "Let time pass so a change takes effect or alerts can clear; says how many alerts fire "
        'afterwards. Input: {"seconds": 60}.'
    )
    args_schema: type[BaseModel] = _Seconds

    def work(self, seconds: float = 60.0) -> str:
        """How long it waited, alerts firing, time left."""
        result = self.kit.client.wait(seconds)
        left = (
            f"; {result.remaining_seconds:.0f} s left"
            if result.remaining_seconds is not None
            else ""
        )
        return f"waited {result.waited_seconds:.0f} s; {result.firing_alerts} alerts firing{left}"


class _Flag(BaseModel):
    model_config = ConfigDict(extra="ignore")

    flag: str = Field(description="The feature flag's key, e.g. cartFailure.")
    variant: str = Field(description="The variant to make the default, e.g. off.")


class SetFeatureFlag(_ToolBase):
    """Set a feature flag's default variant in the flag service's configuration."""

    name: str = "set_feature_flag"
    description: str = (
        "Set a feature flag's default variant (flagd), e.g. switch a failure flag off. "
        'Input: {"flag": "cartFailure", "variant": "off"}.'
    )
    args_schema: type[BaseModel] = _Flag

    def work(self, flag: str = "", variant: str = "") -> str:
        """The outcome."""
        kit: Toolkit = self.kit
        holder = _flag_configmap(kit.client, flag)
        if holder is None:
            return f"No flag {flag!r} in any ConfigMap of {kit.namespace}; read the flag config."
        action = AgentAction(
            verb=ActionVerb.SET_FLAG, kind="ConfigMap", name=holder, flag=flag, variant=variant
        )
        result = kit.client.act(action)
        kit.actions.append(f"set-flag {flag}={variant} in ConfigMap/{holder}: {result.message}")
        return f"{result.outcome}: {result.message}"


def _flag_configmap(client: ITBenchClient, flag: str) -> str | None:
    for cm in client.get("configmaps").items:
        for text in (cm.get("data") or {}).values():
            try:
                doc = json.loads(text)
            except (TypeError, ValueError):
                continue
            if isinstance(doc, dict) and flag in (doc.get("flags") or {}):
                return str((cm.get("metadata") or {}).get("name", ""))
    return None


class _Plan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    plan: str = Field(description="The steps, in words: what to change, why, how to check it.")


class MitigationPlan(_ToolBase):
    """Write the mitigation plan in words before acting."""

    name: str = "mitigation_plan"
    description: str = (
        "Write down the mitigation plan in words before changing anything: each step, why, and "
        'how you will check it worked. Input: {"plan": "1. ... 2. ..."}.'
    )
    args_schema: type[BaseModel] = _Plan

    def work(self, plan: str = "") -> str:
        """An acknowledgement."""
        self.kit.plans.append(plan)
        return (
            "Plan recorded. Carry it out one step at a time, then wait and check with nl2alerts "
            "that the alerts cleared and stay cleared before you submit the mitigation report."
        )


# ---- reports ------------------------------------------------------------------------------


class _Entity(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: str = Field(description="Deployment, Service, Pod, ConfigMap, Flag, ...")
    name: str = Field(description="The object's name.")
    root_cause: bool = Field(default=False, description="Whether it is a root cause.")
    category: str | None = Field(
        default=None, description=f"For a root cause, what is wrong there: one of {CATEGORIES}."
    )
    condition: str = Field(default="", description="What is wrong with it.")


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore")

    source: str = Field(description="Kind/name where the fault acts.")
    target: str = Field(description="Kind/name it affects.")
    condition: str = Field(default="", description="The condition at the source.")
    effect: str = Field(default="", description="The effect at the target.")


class _Diagnosis(BaseModel):
    model_config = ConfigDict(extra="ignore")

    entities: list[_Entity] = Field(description="Entities involved; mark root causes.")
    propagation_chain: list[_Edge] = Field(
        default_factory=list, description="How the fault spread, root cause first."
    )
    reasoning: str = Field(default="", description="The evidence, briefly.")


class SubmitDiagnosis(_ToolBase):
    """Submit the diagnosis report (JSON)."""

    name: str = "submit_diagnosis"
    description: str = (
        "Submit the diagnosis: the entities involved (mark the root cause with what is wrong "
        "there, its category), the propagation chain and your reasoning. Input: "
        '{"entities": [{"kind": "Deployment", "name": "cart", "root_cause": true, "category": '
        '"FeatureFlag", "condition": "..."}], "propagation_chain": [{"source": '
        '"Deployment/cart", "target": "Deployment/checkout", "condition": "...", "effect": '
        f'"..."}}], "reasoning": "..."}}. Categories: {CATEGORIES}.'
    )
    args_schema: type[BaseModel] = _Diagnosis

    def work(
        self,
        entities: list[Any] | None = None,
        propagation_chain: list[Any] | None = None,
        reasoning: str = "",
    ) -> str:
        """Accepted, or what is invalid."""
        try:
            report = DiagnosisReport(
                entities=[PredictedEntity.model_validate(_plain(e)) for e in entities or []],
                propagation_chain=[
                    PredictedEdge.model_validate(_plain(e)) for e in propagation_chain or []
                ],
                reasoning=reasoning[:20_000],
            )
        except ValidationError as exc:
            return f"The report is invalid: {_errors(exc)}. Fix it and submit again."
        receipt = self.kit.client.submit_diagnosis(report)
        self.kit.submitted["diagnosis"] = receipt.accepted_at.isoformat()
        roots = [e.ref() for e in report.entities if e.root_cause]
        return f"Diagnosis accepted (root cause: {', '.join(roots) or 'none named'})."


class _Mitigation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    actions: list[str] = Field(default_factory=list, description="What you changed, in words.")
    resolved: bool = Field(
        default=False, description="Whether the alerts cleared and stayed cleared."
    )
    reasoning: str = Field(default="", description="The plan and what you observed.")


class SubmitMitigation(_ToolBase):
    """Submit the mitigation report (JSON)."""

    name: str = "submit_mitigation"
    description: str = (
        "Submit the mitigation report after acting, waiting and checking the alerts: what you "
        'changed, whether the alerts stay cleared, and why. Input: {"actions": ["..."], '
        '"resolved": true, "reasoning": "..."}.'
    )
    args_schema: type[BaseModel] = _Mitigation

    def work(
        self, actions: list[str] | None = None, resolved: bool = False, reasoning: str = ""
    ) -> str:
        """Accepted, or what is invalid."""
        kit: Toolkit = self.kit
        done = list(actions or []) + [a for a in kit.actions if a not in (actions or [])]
        why = reasoning or "\n".join(kit.plans)
        try:
            report = MitigationReport(actions=done[:100], resolved=resolved, reasoning=why[:20_000])
        except ValidationError as exc:
            return f"The report is invalid: {_errors(exc)}. Fix it and submit again."
        kit.client.submit_mitigation(report)
        kit.submitted["mitigation"] = "accepted"
        return "Mitigation report accepted."


def _plain(value: Any) -> Any:
    return value.model_dump() if isinstance(value, BaseModel) else value


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])


def diagnosis_tools(kit: Toolkit, actor: str) -> list[BaseTool]:
    """The diagnosis agent's tools."""
    tools: list[BaseTool] = [
        NL2Alerts(kit=kit, actor=actor),
        NL2Kubectl(kit=kit, actor=actor, allow_actions=False),
    ]
    if kit.telemetry.metrics:
        tools.append(NL2Metrics(kit=kit, actor=actor))
    if kit.telemetry.logs:
        tools.append(NL2Logs(kit=kit, actor=actor))
    if kit.telemetry.traces:
        tools.append(NL2Traces(kit=kit, actor=actor))
    tools += [Topology(kit=kit, actor=actor), SubmitDiagnosis(kit=kit, actor=actor)]
    return tools


def mitigation_tools(kit: Toolkit, actor: str, *, metrics: bool = False) -> list[BaseTool]:
    """The mitigation agent's tools (with NL2Metrics for FinOps, to check the cost)."""
    tools: list[BaseTool] = [
        MitigationPlan(kit=kit, actor=actor),
        NL2Kubectl(kit=kit, actor=actor, allow_actions=True),
        SetFeatureFlag(kit=kit, actor=actor),
        NL2Alerts(kit=kit, actor=actor),
        Wait(kit=kit, actor=actor),
    ]
    if metrics and kit.telemetry.metrics:
        tools.append(NL2Metrics(kit=kit, actor=actor))
    tools.append(SubmitMitigation(kit=kit, actor=actor))
    return tools
