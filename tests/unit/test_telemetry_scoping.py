"""Telemetry scoping: every PromQL series selector and every LogQL stream selector of an agent's
query is held to the trial's namespace, whatever the query's shape."""

from __future__ import annotations

import promql_parser
import pytest

from itbench.environments.kube.scoping import scope_logql, scope_promql

NS = "otel-demo"
SCOPE = 'namespace=~"otel-demo|"'


def _selectors(query: str) -> list[str]:
    found: list[str] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(str(node))

    promql_parser.walk(promql_parser.parse(query), visit, None)
    return found


@pytest.mark.parametrize(
    "query",
    [
        "up",
        'kube_secret_info{secret=~".*-agent"}',
        '{__name__=~".+"}',
        "sum by (service_name) (rate(traces_span_metrics_calls_total[5m]))",
        "rate(container_cpu_usage_seconds_total[5m] offset 10m) / on (pod) kube_pod_info",
        "max_over_time(up[10m:1m])",
        'histogram_quantile(0.95, sum by (le) (rate(http_bucket{job="a"}[5m])))',
        "count(kube_pod_info) > bool 3",
        'absent(up{job="x"})',
    ],
)
def test_every_series_selector_of_a_query_is_held_to_the_namespace(query: str) -> None:
    scoped = scope_promql(query, NS)
    selectors = _selectors(scoped)
    assert selectors, scoped
    assert all(SCOPE in s for s in selectors), scoped
    assert len(selectors) == len(_selectors(query))


def test_a_query_naming_another_namespace_keeps_both_matchers_and_answers_nothing() -> None:
    scoped = scope_promql('kube_secret_info{namespace="itbench-system"}', NS)
    assert scoped == 'kube_secret_info{namespace=~"otel-demo|",namespace="itbench-system"}'


def test_queries_that_cannot_be_scoped_are_refused() -> None:
    with pytest.raises(ValueError):
        scope_promql("sum(rate(", NS)
    with pytest.raises(ValueError, match="not a namespace name"):
        scope_promql("up", 'x"} or up{a="')


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('{app="cart"}', '{k8s_namespace_name="otel-demo",app="cart"}'),
        (
            'sum(rate({service_name="cart"} |= "{not a selector}" | json [5m]))',
            'sum(rate({k8s_namespace_name="otel-demo",service_name="cart"} |= "{not a selector}"'
            " | json [5m]))",
        ),
        (
            '{a="1"} | line_format `{{.msg}}`',
            '{k8s_namespace_name="otel-demo",a="1"} | line_format `{{.msg}}`',
        ),
    ],
)
def test_every_stream_selector_of_a_log_query_is_held_to_the_namespace(
    query: str, expected: str
) -> None:
    assert scope_logql(query, NS) == expected


def test_log_queries_without_a_selector_or_with_an_open_string_are_refused() -> None:
    with pytest.raises(ValueError, match="no stream selector"):
        scope_logql('|= "x"', NS)
    with pytest.raises(ValueError, match="unterminated string"):
        scope_logql('{a="1"} |= "x', NS)
