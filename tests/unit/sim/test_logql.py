"""LogQL subset: stream selectors, line filters, time range, limit and direction."""

from __future__ import annotations

import pytest

from itbench.environments.sim.logql import (
    LabelMatcher,
    LineFilter,
    LogQLError,
    MemoryLogStore,
    parse_logql,
    query_logs,
)


@pytest.fixture
def store() -> MemoryLogStore:
    """Three services' logs; cart has two pods."""
    logs = MemoryLogStore()
    lines = [
        ({"service_name": "cart", "pod": "cart-0"}, 10.0, "INFO GetCart user=1"),
        ({"service_name": "cart", "pod": "cart-0"}, 20.0, "ERROR wasn't able to connect to redis"),
        ({"service_name": "cart", "pod": "cart-1"}, 25.0, "ERROR connection timeout retrying"),
        ({"service_name": "cart", "pod": "cart-0"}, 30.0, "INFO GetCart user=2"),
        ({"service_name": "cartservice-old", "pod": "old-0"}, 15.0, "ERROR legacy"),
        ({"service_name": "frontend", "pod": "fe-0"}, 12.0, "GET /api/cart 500"),
        ({"service_name": "frontend", "pod": "fe-0"}, 40.0, "GET /api/cart 200"),
    ]
    for labels, t, line in lines:
        logs.append(labels, t, line)
    return logs


def lines_of(data: dict[str, object]) -> list[str]:
    """All lines of a result, stream by stream."""
    result = data["result"]
    assert isinstance(result, list)
    return [line for stream in result for _, line in stream["values"]]


def test_selector_with_equality_returns_stream_newest_first(store: MemoryLogStore) -> None:
    data = query_logs(store, '{service_name="frontend"}', 0, 100, 100)
    assert data == {
        "resultType": "streams",
        "result": [
            {
                "stream": {"service_name": "frontend", "pod": "fe-0"},
                "values": [
                    ["40000000000", "GET /api/cart 200"],
                    ["12000000000", "GET /api/cart 500"],
                ],
            }
        ],
    }


def test_forward_direction_returns_oldest_first(store: MemoryLogStore) -> None:
    data = query_logs(store, '{service_name="frontend"}', 0, 100, 100, direction="forward")
    assert lines_of(data) == ["GET /api/cart 500", "GET /api/cart 200"]


def test_regex_matchers_are_anchored_and_negatable(store: MemoryLogStore) -> None:
    exact = query_logs(store, '{service_name=~"cart"}', 0, 100, 100)
    assert {s["stream"]["service_name"] for s in exact["result"]} == {"cart"}
    assert len(exact["result"]) == 2
    prefix = query_logs(store, '{service_name=~"cart.*", pod!~"cart-1"}', 0, 100, 100)
    assert sorted(s["stream"]["pod"] for s in prefix["result"]) == ["cart-0", "old-0"]
    other = query_logs(store, '{service_name!="cart", pod=~".+"}', 0, 100, 100)
    assert sorted(s["stream"]["service_name"] for s in other["result"]) == [
        "cartservice-old",
        "frontend",
    ]


def test_line_filters_chain(store: MemoryLogStore) -> None:
    errors = query_logs(store, '{service_name="cart"} |= "ERROR" != "timeout"', 0, 100, 100)
    assert lines_of(errors) == ["ERROR wasn't able to connect to redis"]
    regex = query_logs(store, '{service_name="cart"} |~ "user=[12]$" !~ "user=2"', 0, 100, 100)
    assert lines_of(regex) == ["INFO GetCart user=1"]
    raw = query_logs(store, "{service_name=`frontend`} |= `500`", 0, 100, 100)
    assert lines_of(raw) == ["GET /api/cart 500"]


def test_time_range_includes_start_and_excludes_end(store: MemoryLogStore) -> None:
    data = query_logs(store, '{pod="cart-0"}', 20, 30, 100)
    assert lines_of(data) == ["ERROR wasn't able to connect to redis"]


def test_limit_applies_across_streams_in_direction_order(store: MemoryLogStore) -> None:
    newest = query_logs(store, '{service_name=~"cart|frontend"}', 0, 100, 2)
    assert sorted(lines_of(newest)) == ["GET /api/cart 200", "INFO GetCart user=2"]
    oldest = query_logs(store, '{service_name=~"cart|frontend"}', 0, 100, 2, direction="forward")
    assert sorted(lines_of(oldest)) == ["GET /api/cart 500", "INFO GetCart user=1"]


def test_no_matching_stream_gives_empty_result(store: MemoryLogStore) -> None:
    assert query_logs(store, '{service_name="nope"}', 0, 100, 10) == {
        "resultType": "streams",
        "result": [],
    }


def test_parse_produces_matchers_and_filters_with_escapes() -> None:
    parsed = parse_logql('{app="a\\"b", env!~"dev|test"} |= "x\\ty" !~ "\\\\d+"')
    assert parsed.matchers == (
        LabelMatcher("app", "=", 'a"b'),
        LabelMatcher("env", "!~", "dev|test"),
    )
    assert parsed.filters == (LineFilter("|=", "x\ty"), LineFilter("!~", "\\d+"))


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ('{app="a"} | json', "pipeline stage '| json'"),
        ('{app="a"} | logfmt | level="error"', "pipeline stage '| logfmt'"),
        ('{app="a"} | line_format "{{.msg}}"', "pipeline stage '| line_format'"),
        ('rate({app="a"}[5m])', "metric query rate"),
        ('count_over_time({app="a"}[5m])', "metric query count_over_time"),
        ('sum by (app) (rate({app="a"}[5m]))', "metric query sum"),
        ('{app="a"}[5m]', "range vectors"),
        ('{app="a"} |= "x" or "y"', "'or' in line filters"),
        ('{app="a"} |= ip("10.0.0.1")', "ip\\(\\) line filters"),
        ('{app=""}', "at least one regexp or equality matcher"),
        ('{app=~".*"}', "at least one regexp or equality matcher"),
        ("{}", "at least one matcher"),
        ('{app="a"', "expected"),
        ('{app~"a"}', "matcher operator"),
        ('{app="a"} |= "unterminated', "unterminated string"),
        ('{app=~"("}', "invalid regular expression"),
        ('{app="a"} |~ "(?<=x)y"', "invalid regular expression"),
        ('app="a"', "stream selector"),
    ],
)
def test_unsupported_or_malformed_queries_raise_named_errors(
    store: MemoryLogStore, query: str, fragment: str
) -> None:
    with pytest.raises(LogQLError, match=fragment):
        query_logs(store, query, 0, 100, 10)


def test_bad_limit_and_direction_are_rejected(store: MemoryLogStore) -> None:
    with pytest.raises(LogQLError, match="limit"):
        query_logs(store, '{app="a"}', 0, 100, 0)
    with pytest.raises(LogQLError, match="direction"):
        query_logs(store, '{app="a"}', 0, 100, 10, direction="sideways")


def test_store_rejects_out_of_order_lines() -> None:
    logs = MemoryLogStore()
    logs.append({"app": "a"}, 5.0, "one")
    with pytest.raises(ValueError, match="out-of-order"):
        logs.append({"app": "a"}, 4.0, "two")
    assert [(labels, [e.line for e in lines]) for labels, lines in logs.streams()] == [
        ({"app": "a"}, ["one"])
    ]


def test_a_pathological_line_filter_runs_in_linear_time() -> None:
    logs = MemoryLogStore()
    logs.append({"service_name": "cart", "pod": "cart-0"}, 10.0, "a" * 20_000)
    result = query_logs(logs, '{service_name="cart"} |~ "(.*)*(.*)*Q"', 0, 100, 10)
    assert result["result"] == []
