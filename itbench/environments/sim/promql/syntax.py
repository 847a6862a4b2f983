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
    _regex(value, query)
    if op == pp.MatchOp.Re:
        return _regex_matcher(value, True)
    if op == pp.MatchOp.NotRe:
        return _regex_matcher(value, False)
    raise PromQLError(f"unsupported matcher operator {op} in query {query!r}")


_MEMO_VALUES = 4096
"""Label values whose answer a regex matcher remembers (the rest are matched each time)."""


@lru_cache(maxsize=256)
def _regex_matcher(pattern_text: str, matching: bool) -> Callable[[str], bool]:
    """A `=~` (matching) or `!~` matcher of a valid pattern, shared by every query that has it.

    Scrapes and rules select the same label values over and over (a service name in each of
    its series): each value's answer is matched once, then remembered.
    """
    pattern = _compile(pattern_text)
    memo: dict[str, bool] = {}

    def predicate(v: str) -> bool:
        answer = memo.get(v)
        if answer is None:
            answer = (pattern.fullmatch(v) is not None) is matching
            if len(memo) < _MEMO_VALUES:
                memo[v] = answer
        return answer

    return predicate


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
