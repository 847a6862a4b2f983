"""A corpus of known-bad requests to the agent API: each crashed, hung, flooded or was wrongly
accepted by an earlier gateway. The invariant for all of them: a 4xx problem, bounded output,
the gateway still answering, and nothing changed in the trial's environment."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_PROBLEM_BYTES = 4096
"""The most bytes a problem answer to any of these may have."""


@dataclass(frozen=True)
class HostileRequest:
    """One bad request and the status it must get.

    Attributes:
        name: What it is.
        method: HTTP method.
        path: Path below /v1/trials/{trial}/.
        status: The expected status.
        params: Query parameters.
        content: The raw body.
        content_type: Its content type.
    """

    name: str
    method: str
    path: str
    status: int
    params: dict[str, str] = field(default_factory=dict)
    content: bytes = b""
    content_type: str = "application/json"


def _chain(operator: str, n: int, term: str = "up") -> str:
    return f" {operator} ".join([term] * n)


NESTED_JSON_3000 = "[" * 3000 + "]" * 3000
ADDITIONS_5000 = "+".join(["1"] * 5000)

CORPUS: list[HostileRequest] = [
    HostileRequest(
        "promql-66kb",
        "GET",
        "metrics/query",
        400,
        {"query": _chain("+", 11_000, "up")},
    ),
    HostileRequest("promql-5000-additions", "GET", "metrics/query", 400, {"query": ADDITIONS_5000}),
    HostileRequest("promql-500-ors", "GET", "metrics/query", 400, {"query": _chain("or", 500)}),
    HostileRequest(
        "promql-3000-parentheses",
        "GET",
        "metrics/query",
        400,
        {"query": "(" * 3000 + "up" + ")" * 3000},
    ),
    HostileRequest(
        "promql-1000-nested-sums",
        "GET",
        "metrics/query",
        400,
        {"query": "sum(" * 1000 + "up" + ")" * 1000},
    ),
    HostileRequest(
        "promql-range-500-ors",
        "GET",
        "metrics/query_range",
        400,
        {"query": _chain("or", 500)},
    ),
    HostileRequest(
        "promql-200kb-echo", "GET", "metrics/query", 400, {"query": 'up{a="' + "x" * 200_000 + '"}'}
    ),
    HostileRequest(
        "logql-200kb", "GET", "logs/query_range", 400, {"query": '{a="' + "x" * 200_000 + '"}'}
    ),
    HostileRequest(
        "logql-500-filters",
        "GET",
        "logs/query_range",
        400,
        {"query": '{service_name="cart"}' + ' |= "x"' * 500},
    ),
    HostileRequest(
        "tags-nested-3000", "GET", "traces", 400, {"service": "cart", "tags": NESTED_JSON_3000}
    ),
    HostileRequest(
        "tags-200kb",
        "GET",
        "traces",
        400,
        {"service": "cart", "tags": json.dumps({"a": "x" * 200_000})},
    ),
    HostileRequest(
        "query-post-json-not-utf8",
        "POST",
        "metrics/query",
        400,
        content=b'{"query": "up\xff\xfe"}',
    ),
    HostileRequest(
        "query-range-post-json-not-utf8",
        "POST",
        "metrics/query_range",
        400,
        content=b'{"query": "\xc3\x28"}',
    ),
    HostileRequest(
        "query-post-form-not-utf8",
        "POST",
        "metrics/query",
        400,
        content=b"query=up\xff",
        content_type="application/x-www-form-urlencoded",
    ),
    HostileRequest(
        "query-post-json-nested-3000",
        "POST",
        "metrics/query",
        400,
        content=b'{"query": ' + NESTED_JSON_3000.encode() + b"}",
    ),
    HostileRequest(
        "query-post-66kb-promql",
        "POST",
        "metrics/query",
        400,
        content=json.dumps({"query": _chain("+", 11_000, "up")}).encode(),
    ),
    HostileRequest(
        "wait-20mb",
        "POST",
        "wait",
        413,
        content=b'{"seconds": 1, "x": "' + b"x" * 20_000_000 + b'"}',
    ),
    HostileRequest("wait-not-utf8", "POST", "wait", 400, content=b'{"seconds": 1\xff}'),
    HostileRequest(
        "action-not-utf8", "POST", "actions", 400, content=b'{"verb": "scale\xff", "kind": "x"}'
    ),
    HostileRequest(
        "action-nested-3000",
        "POST",
        "actions",
        400,
        content=b'{"verb": "patch", "kind": "Deployment", "name": "cart", "patch": '
        + b'{"a":' * 3000
        + b"1"
        + b"}" * 3000
        + b"}",
    ),
    HostileRequest(
        "networkpolicy-wrong-types",
        "POST",
        "actions",
        422,
        content=json.dumps(
            {
                "verb": "apply",
                "kind": "NetworkPolicy",
                "name": "cart-ingress",
                "manifest": {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": {"name": "cart-ingress"},
                    "spec": {
                        "podSelector": "everything",
                        "ingress": [{"ports": [{"port": {"n": 1}, "protocol": 6}]}],
                    },
                },
            }
        ).encode(),
    ),
    HostileRequest(
        "patch-replicas-string",
        "POST",
        "actions",
        422,
        content=json.dumps(
            {
                "verb": "patch",
                "kind": "Deployment",
                "name": "cart",
                "patch": {"spec": {"replicas": "many", "template": {"spec": {"containers": 5}}}},
            }
        ).encode(),
    ),
    HostileRequest(
        "action-5000-unknown-fields",
        "POST",
        "actions",
        422,
        content=json.dumps(
            {"verb": "scale", "kind": "Deployment", "name": "cart"}
            | {f"field{i}": i for i in range(5000)}
        ).encode(),
    ),
    HostileRequest(
        "action-100kb-name",
        "POST",
        "actions",
        422,
        content=json.dumps(
            {"verb": "delete", "kind": "Deployment", "name": "x" * 100_000, "namespace": "other"}
        ).encode(),
    ),
    HostileRequest("kubectl-100kb-kind", "GET", "kubectl/get", 400, {"kind": "k" * 100_000}),
    HostileRequest(
        "diagnosis-not-utf8",
        "POST",
        "diagnosis",
        400,
        content=b'{"entities": [], "reasoning": "\xff"}',
    ),
]
"""Every known-bad request, by name."""
