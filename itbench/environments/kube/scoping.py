"""Telemetry queries scoped to a trial's namespace, as prom-label-proxy scopes them: every
series selector of a PromQL query gets a matcher on the `namespace` label, so a query answers
only the shop's series and cluster-level series that belong to no namespace (a node's), never
the platform's or another trial's; every stream selector of a LogQL query gets one on
`k8s_namespace_name`, the label Loki indexes from the OTLP resource attribute
k8s.namespace.name of the logs the shop's collector ships (itbench/stack/values/loki.yaml).

Prometheus Operator labels every series it scrapes through a ServiceMonitor or PodMonitor with
the namespace of the scraped target, and kube-state-metrics and cAdvisor label theirs with the
object's namespace, so a series about the operator (its Trials, its Secrets) carries the
platform's namespace and does not answer. The matcher is ANDed with the query's own matchers: a
query naming another namespace answers nothing.
"""

from __future__ import annotations

import re

import promql_parser

LABEL = "namespace"
LOG_LABEL = "k8s_namespace_name"


def _checked(namespace: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace):
        raise ValueError(f"not a namespace name: {namespace!r}")
    return namespace


def _scoped_selector(text: str, matcher: str) -> str:
    brace = text.index("{")
    return f"{text[: brace + 1]}{matcher},{text[brace + 1 :]}"


def scope_promql(query: str, namespace: str) -> str:
    """The query with every series selector held to `namespace`.

    Raises:
        ValueError: The query does not parse, or uses `or` inside a selector (which a scoping
            matcher could not hold).
    """
    # The namespace, or no namespace label at all (a node's series).
    matcher = f'{LABEL}=~"{_checked(namespace)}|"'
    expr = promql_parser.parse(query)

    def scoped(node: promql_parser.Expr) -> promql_parser.Expr | None:
        if not isinstance(node, promql_parser.VectorSelector):
            return None
        if node.matchers.or_matchers:
            raise ValueError(
                "a series selector with `or` matchers cannot be scoped to the trial's namespace; "
                "write the alternatives as separate selectors"
            )
        return promql_parser.parse(_scoped_selector(str(node), matcher))

    out = str(promql_parser.transform(expr, None, scoped))
    promql_parser.parse(out)  # what goes to Prometheus must parse as what was checked
    return out


def scope_logql(query: str, namespace: str) -> str:
    """The query with every stream selector (`{...}` outside string literals) held to
    `namespace`.

    Raises:
        ValueError: The query has no stream selector, or an unterminated string.
    """
    matcher = f'{LOG_LABEL}="{_checked(namespace)}"'
    out: list[str] = []
    selectors = 0
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        if char in '"`':
            end = i + 1
            while end < n and query[end] != char:
                end += 2 if query[end] == "\\" and char == '"' else 1
            if end >= n:
                raise ValueError("the LogQL query has an unterminated string")
            out.append(query[i : end + 1])
            i = end + 1
            continue
        if char == "{":
            out.append("{" + matcher + ",")
            selectors += 1
            i += 1
            continue
        out.append(char)
        i += 1
    if not selectors:
        raise ValueError("the LogQL query has no stream selector")
    return "".join(out)
