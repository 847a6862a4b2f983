"""The PromQL engine's errors, and the limits a query must stay within: its length and depth
checked from its tokens before the parser runs, the data it may touch before it is evaluated."""

from __future__ import annotations

import re
from dataclasses import dataclass


class PromQLError(ValueError):
    """A query that cannot be parsed, is not supported, or fails to evaluate."""


class QueryLimitError(PromQLError):
    """A query beyond one of the limits, refused before the parser runs (or, for series and
    samples, before it is evaluated).

    Attributes:
        limit: The limit's name (`length`, `nesting`, `aggregation-nesting`,
            `binary-operators`, `series`, `samples`).
        maximum: The limit.
        actual: What the query has (at least).
    """

    def __init__(self, limit: str, maximum: int, actual: int, what: str) -> None:
        """Name the limit and what the query has."""
        super().__init__(f"the query has {what}; the limit is {maximum} ({limit})")
        self.limit = limit
        self.maximum = maximum
        self.actual = actual


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """How large and how deep a PromQL query may be, and how much data one evaluation may touch.

    Chained binary operators and nested parentheses, calls and aggregations make the parser and
    the evaluator recurse once per level; bounding them keeps both within their stacks (the
    native parser overflows its own stack, killing the process, past a few thousand chained
    additions).

    Attributes:
        max_length: Characters.
        max_nesting: Open parentheses, brackets and braces at once.
        max_aggregation_nesting: Aggregations inside aggregations.
        max_binary_operators: Binary operators (arithmetic, comparison, set) in the query.
        max_series: Series the selectors of one evaluation may select.
        max_samples: Samples one evaluation may load (an instant selector loads one per series,
            a range selector every sample in its window).
    """

    max_length: int = 16_384
    max_nesting: int = 64
    max_aggregation_nesting: int = 8
    max_binary_operators: int = 128
    max_series: int = 20_000
    max_samples: int = 5_000_000


DEFAULT_LIMITS = QueryLimits()

_AGGREGATION_WORDS = frozenset(
    {
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "quantile",
        "topk",
        "bottomk",
        "count_values",
        "limitk",
        "limit_ratio",
    }
)
_SET_WORDS = frozenset({"and", "or", "unless", "atan2"})
_GROUPING_WORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|`[^`]*`?)"""
    r"|(?P<word>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<number>(?:0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))"
    r"|(?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>=(){}\[\],])"
    r"|(?P<other>\S)"
)

_BINARY_TOKENS = frozenset({"+", "-", "*", "/", "%", "^", "==", "!=", ">=", "<=", ">", "<"})


def check_query_limits(query: str, limits: QueryLimits = DEFAULT_LIMITS) -> None:
    """Refuse a query beyond the length and depth limits, by reading its tokens (no parser).

    Strings, label matchers and durations are skipped; each binary operator, open parenthesis
    and aggregation is counted, so a query within the limits is one the parser and the
    evaluator handle within their stacks.

    Raises:
        QueryLimitError: Naming the first limit the query exceeds.
    """
    if len(query) > limits.max_length:
        raise QueryLimitError("length", limits.max_length, len(query), f"{len(query)} characters")
    depth = 0
    # One entry per open bracket: whether it is an aggregation's argument list.
    opened: list[bool] = []
    aggregations = 0
    operators = 0
    pending_aggregation = False  # an aggregation word seen, its argument list not yet open
    grouping = False  # the next "(" is a by/without/on/ignoring label list
    in_braces = 0
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup
        text = match.group()
        if kind == "string":
            continue
        if kind == "word":
            if in_braces:
                continue
            lowered = text.lower()
            if lowered in _AGGREGATION_WORDS:
                pending_aggregation = True
            elif lowered in _GROUPING_WORDS:
                grouping = True
            elif lowered in _SET_WORDS:
                operators += 1
                _check_operators(operators, limits)
            continue
        if kind != "op":
            continue
        if text in ("(", "[", "{"):
            is_aggregation = text == "(" and pending_aggregation and not grouping
            if text == "(" and not grouping:
                pending_aggregation = False
            grouping = False
            if text == "{":
                in_braces += 1
            opened.append(is_aggregation)
            depth += 1
            aggregations += is_aggregation
            if depth > limits.max_nesting:
                raise QueryLimitError(
                    "nesting",
                    limits.max_nesting,
                    depth,
                    f"more than {limits.max_nesting} nested parentheses, calls or selectors",
                )
            if aggregations > limits.max_aggregation_nesting:
                raise QueryLimitError(
                    "aggregation-nesting",
                    limits.max_aggregation_nesting,
                    aggregations,
                    f"more than {limits.max_aggregation_nesting} nested aggregations",
                )
        elif text in (")", "]", "}"):
            if opened:
                aggregations -= opened.pop()
                depth -= 1
            if text == "}" and in_braces:
                in_braces -= 1
        elif not in_braces and text in _BINARY_TOKENS:
            operators += 1
            _check_operators(operators, limits)


def _check_operators(operators: int, limits: QueryLimits) -> None:
    if operators > limits.max_binary_operators:
        raise QueryLimitError(
            "binary-operators",
            limits.max_binary_operators,
            operators,
            f"more than {limits.max_binary_operators} binary operators",
        )
