"""Linters behind reflection: generated PromQL is parsed, LogQL checked, kubectl arguments parsed
and checked against the agent API's guardrails (docs/agent-api.md) before anything runs, so the
tool model can be re-prompted with the error instead of the gateway refusing it.

The gateway stays the authority: a refusal the linter does not foresee still arrives as a 403 and
is fed back the same way.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

# ---- kinds --------------------------------------------------------------------------------

KIND_ALIASES: dict[str, str] = {
    "po": "Pod",
    "pod": "Pod",
    "pods": "Pod",
    "deploy": "Deployment",
    "deployment": "Deployment",
    "deployments": "Deployment",
    "rs": "ReplicaSet",
    "replicaset": "ReplicaSet",
    "replicasets": "ReplicaSet",
    "sts": "StatefulSet",
    "statefulset": "StatefulSet",
    "statefulsets": "StatefulSet",
    "ds": "DaemonSet",
    "daemonset": "DaemonSet",
    "daemonsets": "DaemonSet",
    "svc": "Service",
    "service": "Service",
    "services": "Service",
    "ep": "Endpoints",
    "endpoints": "Endpoints",
    "cm": "ConfigMap",
    "configmap": "ConfigMap",
    "configmaps": "ConfigMap",
    "secret": "Secret",
    "secrets": "Secret",
    "hpa": "HorizontalPodAutoscaler",
    "horizontalpodautoscaler": "HorizontalPodAutoscaler",
    "horizontalpodautoscalers": "HorizontalPodAutoscaler",
    "netpol": "NetworkPolicy",
    "networkpolicy": "NetworkPolicy",
    "networkpolicies": "NetworkPolicy",
    "no": "Node",
    "node": "Node",
    "nodes": "Node",
    "ns": "Namespace",
    "namespace": "Namespace",
    "namespaces": "Namespace",
    "ev": "Event",
    "event": "Event",
    "events": "Event",
    "pvc": "PersistentVolumeClaim",
    "persistentvolumeclaim": "PersistentVolumeClaim",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "job": "Job",
    "jobs": "Job",
    "cronjob": "CronJob",
    "cronjobs": "CronJob",
    "pv": "PersistentVolume",
    "persistentvolume": "PersistentVolume",
    "persistentvolumes": "PersistentVolume",
    "ing": "Ingress",
    "ingress": "Ingress",
    "ingresses": "Ingress",
    "sa": "ServiceAccount",
    "serviceaccount": "ServiceAccount",
    "serviceaccounts": "ServiceAccount",
    "role": "Role",
    "roles": "Role",
    "rolebinding": "RoleBinding",
    "rolebindings": "RoleBinding",
    "clusterrole": "ClusterRole",
    "clusterroles": "ClusterRole",
    "clusterrolebinding": "ClusterRoleBinding",
    "clusterrolebindings": "ClusterRoleBinding",
    "prometheusrule": "PrometheusRule",
    "prometheusrules": "PrometheusRule",
    "servicemonitor": "ServiceMonitor",
    "servicemonitors": "ServiceMonitor",
    "podmonitor": "PodMonitor",
    "podmonitors": "PodMonitor",
    "scenario": "Scenario",
    "scenarios": "Scenario",
    "benchmarkrun": "BenchmarkRun",
    "benchmarkruns": "BenchmarkRun",
    "trial": "Trial",
    "trials": "Trial",
    "agentsubmission": "AgentSubmission",
    "agentsubmissions": "AgentSubmission",
}
"""kubectl's spellings of the kinds an SRE reads, to their kind."""

PLATFORM_KINDS = frozenset({"Scenario", "BenchmarkRun", "Trial", "AgentSubmission"})
PLATFORM_NAMESPACES = frozenset({"itbench", "itbench-system"})
ALERTING_KINDS = frozenset(
    {"PrometheusRule", "ServiceMonitor", "PodMonitor", "AlertmanagerConfig", "Alertmanager"}
)
PRIVILEGE_KINDS = frozenset({"Role", "RoleBinding", "ServiceAccount", "ClusterRole"})
CLUSTER_KINDS = frozenset({"Node", "Namespace", "ClusterRole", "ClusterRoleBinding"})
OBSERVABILITY = re.compile(
    r"(^|-)(prometheus|grafana|loki|jaeger|otel-?collector|otelcol|alertmanager|opensearch"
    r"|kube-state-metrics)(-|$)"
)
ALERT_RULES = re.compile(r"(alert.*rule|rule.*alert|prometheus)")

READ_VERBS = ("get", "describe", "logs", "events")
ACT_VERBS = ("rollout", "scale", "set", "patch", "delete", "apply")
REFUSED_VERBS = {
    "exec": "running commands in containers is not available; read logs and describe instead",
    "port-forward": "port-forwarding is not available; query metrics, logs and traces instead",
    "proxy": "the API proxy is not available",
    "cp": "copying files is not available",
    "attach": "attaching to containers is not available",
    "run": "starting new pods is not available",
    "edit": "interactive editing is not available; use patch",
    "create": "create is not available; use apply with a manifest",
    "replace": "replace is not available; use patch",
    "cordon": "node operations are not allowed",
    "uncordon": "node operations are not allowed",
    "drain": "node operations are not allowed",
    "taint": "node operations are not allowed",
    "auth": "permissions are not available",
    "config": "the kubeconfig is not available",
    "label": "labels are changed with patch",
    "annotate": "annotations are changed with patch",
    "autoscale": "autoscalers are changed with patch",
    "expose": "new services are not available",
    "top": "use metrics (PromQL) for resource usage",
}
SHELL = re.compile(r"(\|\||&&|[|;`<>]|\$\()")


def canonical_kind(text: str) -> str:
    """A kind from any kubectl spelling (`po`, `pods`, `Pod`, `deployment.apps`); a kind of the
    platform's own group (`trials.itbench.io`) comes back as that kind."""
    base, _, group = text.partition(".")
    kind = KIND_ALIASES.get(base.lower(), base[:1].upper() + base[1:])
    if group.endswith("itbench.io") and kind not in PLATFORM_KINDS:
        return "Trial"
    return kind


# ---- kubectl ------------------------------------------------------------------------------


@dataclass
class KubectlCall:
    """A parsed kubectl command.

    Attributes:
        verb: get, describe, logs, events, rollout-restart, rollout-undo, scale, set-image,
            set-resources, set-env, patch, delete or apply.
        kind: The kind (canonical).
        name: The object's name ("" for all of a kind).
        output: -o json|yaml|wide|name ("" for the table).
        tail: --tail for logs.
        replicas: --replicas for scale.
        container: -c / the container of set image.
        image: The image of set image.
        limits: --limits of set resources.
        requests: --requests of set resources.
        env: KEY=VALUE pairs of set env.
        patch: The merge patch of patch.
        manifest: The object of apply.
    """

    verb: str
    kind: str = ""
    name: str = ""
    output: str = ""
    tail: int | None = None
    replicas: int | None = None
    container: str | None = None
    image: str | None = None
    limits: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    patch: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def mutating(self) -> bool:
        """Whether it changes anything."""
        return self.verb not in READ_VERBS


class LintError(ValueError):
    """A generated query or command that must not run; the message says why and what to do."""


class GuardrailError(LintError):
    """A command the agent API's guardrails refuse: not a slip to correct, a line not to cross."""


def first_line(text: str) -> str:
    """The command or query in a model's answer: without code fences, quotes or prose."""
    body = text.strip()
    fence = re.search(r"```[a-zA-Z]*\n(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1).strip()
    for prefix in ("$ ", "Command:", "Query:", "PromQL:", "LogQL:"):
        if body.startswith(prefix):
            body = body[len(prefix) :].strip()
    if body.startswith("`") and body.endswith("`"):
        body = body.strip("`").strip()
    return body


def _pairs(text: str, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise LintError(f"{flag} takes name=value pairs separated by commas, got {text!r}")
        out[key.strip()] = value.strip()
    return out


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise LintError(f"{what} is neither JSON nor YAML: {exc}") from None
    if not isinstance(value, dict):
        raise LintError(f'{what} must be an object, e.g. \'{{"spec": {{"replicas": 1}}}}\'')
    return value


def parse_kubectl(command: str, namespace: str, *, allow_actions: bool) -> KubectlCall:
    """Parse one kubectl command and check it against the guardrails.

    Args:
        command: e.g. `kubectl get pods -n otel-demo`.
        namespace: The trial's namespace (the only one in scope).
        allow_actions: Whether changing verbs may be used (the mitigation agent).

    Raises:
        LintError: Naming what is wrong and what to write instead.
    """
    text = command.strip()
    if "\n" in text:
        raise LintError("write exactly one kubectl command on one line")
    if SHELL.search(text.replace("'{", "").replace("}'", "")) and not re.search(
        r"-p\s*['\"]", text
    ):
        raise LintError("write one kubectl command without pipes, redirects or shell operators")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise LintError(f"the command does not parse: {exc}") from None
    if not words or words[0] != "kubectl":
        raise LintError("the command must start with `kubectl`")
    words = words[1:]
    if words and words[0] in REFUSED_VERBS:
        raise LintError(f"`kubectl {words[0]}`: {REFUSED_VERBS[words[0]]}")
    flags: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    takes_value = {
        "-n": "namespace",
        "--namespace": "namespace",
        "-o": "output",
        "--output": "output",
        "--tail": "tail",
        "-c": "container",
        "--container": "container",
        "--replicas": "replicas",
        "-p": "patch",
        "--patch": "patch",
        "--type": "type",
        "--limits": "limits",
        "--requests": "requests",
        "-f": "filename",
        "--filename": "filename",
        "--for": "for",
        "-l": "selector",
        "--selector": "selector",
        "--field-selector": "field-selector",
        "--to-revision": "to-revision",
        "--since": "since",
    }
    while i < len(words):
        word = words[i]
        if word in ("-A", "--all-namespaces") or word.startswith("--all-namespaces="):
            raise GuardrailError(f"only namespace {namespace!r} is in scope; drop --all-namespaces")
        if word.startswith("-"):
            key, sep, value = word.partition("=")
            if key not in takes_value:
                if key in ("--previous", "-p", "--timestamps", "--show-labels", "-w"):
                    i += 1
                    continue
                raise LintError(f"flag {key} is not supported here")
            if not sep:
                if i + 1 >= len(words):
                    raise LintError(f"flag {key} needs a value")
                value = words[i + 1]
                i += 1
            flags[takes_value[key]] = value
        else:
            positional.append(word)
        i += 1
    if not positional:
        raise LintError("name a kubectl verb, e.g. `kubectl get pods`")
    ns = flags.get("namespace", namespace)
    if ns in PLATFORM_NAMESPACES:
        raise GuardrailError(
            f"namespace {ns!r} belongs to the benchmark platform; use {namespace!r}"
        )
    if ns != namespace:
        raise GuardrailError(
            f"namespace {ns!r} is outside this trial; only {namespace!r} is in scope"
        )
    for unsupported in ("selector", "field-selector", "to-revision", "since"):
        if unsupported in flags:
            raise LintError(
                f"--{unsupported} is not supported; get the kind and read the objects instead"
            )
    verb, rest = positional[0], positional[1:]
    if verb in REFUSED_VERBS:
        raise LintError(f"`kubectl {verb}`: {REFUSED_VERBS[verb]}")
    if verb not in READ_VERBS + ACT_VERBS:
        raise LintError(f"`kubectl {verb}` is not supported; use one of {', '.join(READ_VERBS)}")
    if verb in ACT_VERBS and not allow_actions:
        raise LintError(
            f"`kubectl {verb}` changes the system; this agent only reads (get, describe, logs, "
            "events)"
        )
    call = _call(verb, rest, flags)
    _guard(call, namespace)
    return call


def _target(rest: list[str], verb: str) -> tuple[str, str, list[str]]:
    if not rest:
        raise LintError(f"`kubectl {verb}` needs a kind and a name, e.g. deployment/cart")
    if "/" in rest[0]:
        kind, _, name = rest[0].partition("/")
        return canonical_kind(kind), name, rest[1:]
    if len(rest) >= 2:
        return canonical_kind(rest[0]), rest[1], rest[2:]
    return canonical_kind(rest[0]), "", rest[1:]


def _call(verb: str, rest: list[str], flags: dict[str, str]) -> KubectlCall:
    output = flags.get("output", "")
    if output and output not in ("json", "yaml", "wide", "name"):
        raise LintError(f"-o {output}: use json, yaml, wide or name")
    if verb == "get" and rest and canonical_kind(rest[0]) == "Event":
        verb, rest = "events", rest[1:]
    if verb == "events":
        kind, name = "", ""
        if "for" in flags:
            kind, _, name = flags["for"].partition("/")
            kind = canonical_kind(kind)
        return KubectlCall(verb="events", kind=kind, name=name)
    if verb == "logs":
        if not rest:
            raise LintError("`kubectl logs` needs a pod name (get the pods first)")
        target = rest[0]
        if "/" in target:
            kind, _, target = target.partition("/")
            if canonical_kind(kind) != "Pod":
                raise LintError("`kubectl logs` takes a pod name; get the deployment's pods first")
        tail = flags.get("tail", "100")
        try:
            lines = int(tail)
        except ValueError:
            raise LintError(f"--tail {tail}: give a number of lines") from None
        return KubectlCall(verb="logs", kind="Pod", name=target, tail=max(1, min(lines, 2000)))
    if verb in ("get", "describe"):
        kind, name, extra = _target(rest, verb)
        if extra:
            raise LintError(f"`kubectl {verb}` takes one kind and at most one name")
        if verb == "describe" and not name:
            raise LintError("`kubectl describe` needs a name, e.g. deployment/cart")
        return KubectlCall(verb=verb, kind=kind, name=name, output=output)
    if verb == "rollout":
        if not rest or rest[0] not in ("restart", "undo"):
            raise LintError("use `kubectl rollout restart <kind>/<name>` or `rollout undo`")
        kind, name, _ = _target(rest[1:], f"rollout {rest[0]}")
        return KubectlCall(verb=f"rollout-{rest[0]}", kind=kind, name=name)
    if verb == "scale":
        kind, name, _ = _target(rest, "scale")
        if "replicas" not in flags:
            raise LintError("`kubectl scale` needs --replicas=<n>")
        try:
            replicas = int(flags["replicas"])
        except ValueError:
            raise LintError(f"--replicas {flags['replicas']}: give a number") from None
        return KubectlCall(verb="scale", kind=kind, name=name, replicas=replicas)
    if verb == "set":
        if not rest or rest[0] not in ("image", "resources", "env"):
            raise LintError("use `kubectl set image`, `set resources` or `set env`")
        what = rest[0]
        kind, name, extra = _target(rest[1:], f"set {what}")
        if what == "image":
            if len(extra) != 1 or "=" not in extra[0]:
                raise LintError("`kubectl set image <kind>/<name> <container>=<image>`")
            container, _, image = extra[0].partition("=")
            return KubectlCall(
                verb="set-image", kind=kind, name=name, container=container, image=image
            )
        if what == "env":
            env = _pairs(",".join(extra), "set env") if extra else {}
            if not env:
                raise LintError("`kubectl set env <kind>/<name> KEY=VALUE ...`")
            return KubectlCall(verb="set-env", kind=kind, name=name, env=env)
        limits = _pairs(flags["limits"], "--limits") if "limits" in flags else {}
        requests = _pairs(flags["requests"], "--requests") if "requests" in flags else {}
        if not limits and not requests:
            raise LintError("`kubectl set resources` needs --limits and/or --requests")
        return KubectlCall(
            verb="set-resources",
            kind=kind,
            name=name,
            container=flags.get("container"),
            limits=limits,
            requests=requests,
        )
    if verb == "patch":
        kind, name, _ = _target(rest, "patch")
        if not name:
            raise LintError("`kubectl patch <kind> <name> -p '<json merge patch>'`")
        if flags.get("type", "merge") not in ("merge", "strategic"):
            raise LintError("only merge patches are supported: use --type merge")
        if "patch" not in flags:
            raise LintError("`kubectl patch` needs -p '<json merge patch>'")
        return KubectlCall(verb="patch", kind=kind, name=name, patch=_object(flags["patch"], "-p"))
    if verb == "delete":
        kind, name, _ = _target(rest, "delete")
        if not name:
            raise LintError("`kubectl delete` needs one object, e.g. `delete pod <name>`")
        return KubectlCall(verb="delete", kind=kind, name=name)
    # apply: the manifest comes inline, -f '<json or yaml>'
    manifest = _object(flags.get("filename", ""), "apply -f") if "filename" in flags else {}
    if not manifest:
        raise LintError("`kubectl apply -f '<one object as JSON>'` (inline, not a file name)")
    meta = manifest.get("metadata") or {}
    return KubectlCall(
        verb="apply",
        kind=canonical_kind(str(manifest.get("kind", ""))),
        name=str(meta.get("name", "")),
        manifest=manifest,
    )


def _guard(call: KubectlCall, namespace: str) -> None:
    kind, name = call.kind, call.name
    ref = f"{kind}/{name}" if name else kind
    if kind in PLATFORM_KINDS or kind.lower().endswith("itbench.io"):
        raise GuardrailError(
            f"{kind} objects belong to the benchmark platform (they hold the ground truth); "
            "agents may not read or change them"
        )
    if call.manifest:
        if str(call.manifest.get("apiVersion", "")).startswith("itbench.io/"):
            raise GuardrailError("objects of group itbench.io belong to the platform")
        if "items" in call.manifest or str(call.manifest.get("kind", "")).endswith("List"):
            raise GuardrailError("apply takes one object; apply the items one by one")
        meta_ns = (call.manifest.get("metadata") or {}).get("namespace")
        if meta_ns not in (None, namespace):
            raise GuardrailError(f"the manifest's namespace {meta_ns!r} is outside the trial")
    if not call.mutating:
        return
    if call.verb == "delete" and kind in ("Node", "Namespace"):
        raise GuardrailError(f"deleting {ref} is destructive and never allowed; fix the workloads")
    if kind in CLUSTER_KINDS:
        raise GuardrailError(f"{ref} is cluster-scoped; changes stay in namespace {namespace!r}")
    if kind in ALERTING_KINDS or (kind == "ConfigMap" and ALERT_RULES.search(name)):
        raise GuardrailError(f"{ref} configures alerting; alert rules are off limits")
    if OBSERVABILITY.search(name):
        raise GuardrailError(
            f"{ref} is part of the observability stack, which agents may not change"
        )
    if kind in PRIVILEGE_KINDS:
        raise GuardrailError(f"{ref} grants access; agents may not change permissions")
    if call.patch:
        moved = [k for k in ("kind", "apiVersion") if k in call.patch]
        meta = call.patch.get("metadata") or {}
        moved += [f"metadata.{k}" for k in ("name", "namespace") if k in meta]
        if moved:
            raise GuardrailError(
                f"a patch may not change {', '.join(moved)}; patch the object's fields"
            )


# ---- PromQL and LogQL ---------------------------------------------------------------------

_NS_MATCHER = re.compile(r"\b(namespace|k8s_namespace_name)\s*(=~|!=|!~|=)\s*\"([^\"]*)\"")


def _scope(query: str, namespace: str) -> None:
    for label, op, value in _NS_MATCHER.findall(query):
        if op == "=" and value != namespace:
            raise LintError(
                f'{label}="{value}" is outside this trial; use {label}="{namespace}" or none'
            )


def lint_promql(query: str, namespace: str) -> str:
    """Parse a PromQL query (Prometheus' grammar) and check its namespace scope.

    Returns:
        The query.

    Raises:
        LintError: With the parser's message.
    """
    import promql_parser

    text = query.strip()
    if not text:
        raise LintError("the query is empty; write one PromQL expression")
    if text.startswith("kubectl") or (text.startswith("{") and "|" in text):
        raise LintError("write PromQL (a metric expression), not a command or a LogQL query")
    try:
        promql_parser.parse(text)
    except ValueError as exc:
        raise LintError(f"PromQL does not parse: {exc}") from None
    _scope(text, namespace)
    return text


_MATCHER = re.compile(
    r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*$'
)
_STAGE = re.compile(
    r"^(json|logfmt|pattern|regexp|line_format|label_format|unwrap|drop|keep|decolorize|unpack)"
    r"\b|^[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|==|=|>=|<=|>|<)\s*\S"
)
_LINE_FILTERS = ("|=", "!=", "|~", "!~")
_KEYWORD_STAGE = re.compile(
    r"^(json|logfmt|pattern|regexp|line_format|label_format|unwrap|drop|keep|decolorize|unpack)"
    r"\b"
)


def _string_end(text: str, i: int) -> int:
    """The index after the quoted string starting at `i`."""
    quote = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and quote == '"':
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    raise LintError(f"a string opened with {quote} is not closed")


def _pipeline(rest: str) -> None:
    i = 0
    while True:
        while i < len(rest) and rest[i].isspace():
            i += 1
        if i >= len(rest):
            return
        if rest[i : i + 2] in _LINE_FILTERS:
            op = rest[i : i + 2]
            i += 2
            while i < len(rest) and rest[i].isspace():
                i += 1
            if i >= len(rest) or rest[i] not in ('"', "`"):
                raise LintError(f'line filter {op} needs a quoted string, e.g. {op} "error"')
            i = _string_end(rest, i)
            continue
        if rest[i] == "|":
            j = i + 1
            while j < len(rest):
                if rest[j] in ('"', "`"):
                    j = _string_end(rest, j)
                    continue
                if rest[j] == "|":
                    break
                # After a parser stage (| json), != and !~ start a line filter; after a label
                # name (| level != "info") they are the label filter's operator.
                if rest[j : j + 2] in ("!=", "!~") and _KEYWORD_STAGE.match(
                    rest[i + 1 : j].strip()
                ):
                    break
                j += 1
            stage = rest[i + 1 : j].strip()
            if not stage:
                raise LintError("an empty pipeline stage (`| |`)")
            if not _STAGE.match(stage):
                raise LintError(
                    f"pipeline stage | {stage!r} is not a LogQL stage (| json, | logfmt, "
                    '| line_format "...", | label op value, ...)'
                )
            i = j
            continue
        raise LintError(
            f"unexpected {rest[i : i + 20]!r} after the stream selector; write line filters "
            '(|= "text", != "text", |~ "regex") or stages (| json, | logfmt, ...)'
        )


def _balanced(text: str) -> None:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in ('"', "`"):
            quote = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            if not stack or stack[-1] != pairs[ch]:
                raise LintError(f"unbalanced {ch!r}")
            stack.pop()
    if quote:
        raise LintError(f"a string opened with {quote} is not closed")
    if stack:
        raise LintError(f"{stack[-1]!r} is not closed")


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, quote, current = [], 0, None, ""
    for ch in text:
        if quote:
            current += ch
            if ch == quote:
                quote = None
            continue
        if ch in ('"', "`"):
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def lint_logql(query: str, namespace: str) -> str:
    """Check a LogQL query: balanced, a stream selector with label matchers, known stages.

    Returns:
        The query.

    Raises:
        LintError: Naming what is wrong.
    """
    text = query.strip()
    if not text:
        raise LintError(
            'the query is empty; start with a stream selector, e.g. {k8s_namespace_name="x"}'
        )
    _balanced(text)
    start = text.find("{")
    if start < 0:
        raise LintError(
            f'a LogQL query needs a stream selector, e.g. {{k8s_namespace_name="{namespace}"}} '
            '|= "error"'
        )
    end = text.find("}", start)
    selector = text[start + 1 : end]
    matchers = [m for m in _split_top(selector, ",") if m.strip()]
    if not matchers:
        raise LintError(
            f"the stream selector needs at least one matcher, e.g. "
            f'{{k8s_namespace_name="{namespace}"}}'
        )
    for matcher in matchers:
        if not _MATCHER.match(matcher):
            raise LintError(
                f'stream selector matcher {matcher.strip()!r} is not label="value" (or !=, =~, '
                "!~ with a quoted value)"
            )
    if start == 0:
        _pipeline(text[end + 1 :])
    _scope(text, namespace)
    return text
