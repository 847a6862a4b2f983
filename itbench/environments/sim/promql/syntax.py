"""A PromQL query before evaluation: parsing (cached, limits checked once per query), label
matchers as predicates, and which metric names an expression reads."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import promql_parser as pp

from itbench.environments.sim.promql.limits import PromQLError, check_query_limits
from itbench.environments.sim.promql.values import _ELEMENTWISE, NAME
from itbench.environments.sim.regex import RegexError, compile_regex


def _compile(pattern: str) -> Any:
    # Prometheus 2.x anchors matchers as ^(?:pattern)$ without the s flag (RE2, as in Go).
    return compile_regex(f"(?:{pattern})")


@lru_cache(maxsize=1024)
def _parse_cached(query: str) -> Any:
    # The engine never mutates a parsed expression, so one tree serves every evaluation; the
    # limits are checked once per query too (alert rules are evaluated every tick).
    check_query_limits(query)
    return pp.parse(query)


def _regex(pattern: str, query: str) -> Any:
    try:
        return _compile(pattern)
    except RegexError as exc:
        raise PromQLError(
            f"invalid regular expression {pattern!r} in query {query!r}: {exc}"
        ) from exc


def _matcher_predicate(matcher: Any, query: str) -> Callable[[str], bool]:
    op = matcher.op
    value = matcher.value
    if op == pp.MatchOp.Equal:
        return lambda v: v == value
    if op == pp.MatchOp.NotEqual:
        return lambda v: v != value
    pattern = _regex(value, query)
    if op == pp.MatchOp.Re:
        return lambda v: pattern.fullmatch(v) is not None
    if op == pp.MatchOp.NotRe:
        return lambda v: pattern.fullmatch(v) is None
    raise PromQLError(f"unsupported matcher operator {op} in query {query!r}")


_TIMELESS_FUNCTIONS = frozenset(
    {
        *_ELEMENTWISE,
        "round",
        "clamp",
        "clamp_min",
        "clamp_max",
        "label_replace",
        "label_join",
        "histogram_quantile",
        "absent",
        "scalar",
        "vector",
        "sort",
        "sort_desc",
    }
)
"""Functions whose value at a time depends only on their arguments' values at that time."""


@lru_cache(maxsize=1024)
def _instant_names(expr: Any) -> tuple[str, ...] | None:
    """The metric names an expression reads, when it reads nothing but the latest sample of
    each series of those names (instant selectors without offset or @, literals, operators,
    aggregations and functions of the current values); None for any other expression."""
    names: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, pp.VectorSelector):
            if node.offset is not None or node.at is not None:
                return None
            name = node.name
            for matcher in node.matchers.matchers:
                if matcher.name == NAME:
                    if matcher.op != pp.MatchOp.Equal or (
                        name is not None and name != matcher.value
                    ):
                        return None
                    name = matcher.value
            if name is None or node.matchers.or_matchers:
                return None
            names.add(name)
        elif isinstance(node, pp.NumberLiteral | pp.StringLiteral):
            continue
        elif isinstance(node, pp.ParenExpr | pp.UnaryExpr):
            stack.append(node.expr)
        elif isinstance(node, pp.BinaryExpr):
            stack.extend((node.lhs, node.rhs))
        elif isinstance(node, pp.AggregateExpr):
            stack.append(node.expr)
            if node.param is not None:
                stack.append(node.param)
        elif isinstance(node, pp.Call) and node.func.name in _TIMELESS_FUNCTIONS:
            stack.extend(node.args)
        else:
            return None
    return tuple(sorted(names))
