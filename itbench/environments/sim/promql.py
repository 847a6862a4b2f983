"""A PromQL engine over in-memory series, following Prometheus 2.x evaluation semantics.

Queries are parsed by ``promql-parser``; the common subset is evaluated and anything else raises
:class:`PromQLError` naming the construct, so an answer is either Prometheus' answer or an error.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import compress, islice, pairwise
from operator import gt, is_, itemgetter
from typing import Any

import promql_parser as pp

from itbench.environments.sim.regex import RegexError, compile_regex
from itbench.environments.sim.series import Series, SeriesStore, is_stale

Labels = dict[str, str]
LabelKey = tuple[tuple[str, str], ...]

NAME = "__name__"


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


@dataclass(slots=True)
class _Scalar:
    value: float


@dataclass(slots=True)
class _String:
    value: str


@dataclass(slots=True)
class _Vector:
    samples: list[tuple[Labels, float]]
    keys: list[frozenset[tuple[str, str]]] | None = None
    """The samples' label sets as frozensets, when known, so uniqueness is cheap to check."""
    interned: bool = False
    """Whether every label set is an object the engine keeps for its label values (the same
    object whenever those values recur), so caches may key on its identity."""


@dataclass(slots=True)
class _RangeSeries:
    labels: Labels
    timestamps: list[float]
    values: list[float]


@dataclass(slots=True)
class _Matrix:
    series: list[_RangeSeries]
    range_start: float
    range_end: float
    range_seconds: float


_Value = _Scalar | _String | _Vector | _Matrix


@dataclass(frozen=True, slots=True)
class _Context:
    query: str
    t: float
    start: float
    end: float


def _key(labels: Labels) -> LabelKey:
    return tuple(sorted(labels.items()))


def _drop_name(labels: Labels) -> Labels:
    if NAME not in labels:
        return labels
    return {k: v for k, v in labels.items() if k != NAME}


def format_value(value: float) -> str:
    """Format a sample value the way the Prometheus HTTP API does.

    Args:
        value: A float sample value.

    Returns:
        The shortest exact decimal without exponent, or ``+Inf``, ``-Inf``, ``NaN``.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


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


def _arith(op: str, lhs: float, rhs: float) -> float:
    """IEEE-754 arithmetic as Go computes it: division by zero gives Inf or NaN, never an error."""
    if op == "+":
        return lhs + rhs
    if op == "-":
        return lhs - rhs
    if op == "*":
        return lhs * rhs
    if op == "/":
        if rhs == 0.0:
            if lhs == 0.0 or math.isnan(lhs):
                return math.nan
            return math.copysign(math.inf, lhs) * math.copysign(1.0, rhs)
        return lhs / rhs
    if op == "%":
        if rhs == 0.0 or math.isinf(lhs) or math.isnan(lhs) or math.isnan(rhs):
            return math.nan
        return math.fmod(lhs, rhs)
    if op == "^":
        try:
            return math.pow(lhs, rhs)
        except OverflowError:
            return math.inf
        except ValueError:
            if lhs == 0.0 and rhs < 0:
                return math.inf
            return math.nan
    raise ValueError(op)


_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
}
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
_SET_OPS = frozenset({"and", "or", "unless"})


def _quantile(q: float, values: list[float]) -> float:
    """Prometheus' quantile: linear interpolation between the closest ranks."""
    if not values:
        return math.nan
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    lower = max(0, math.floor(rank))
    upper = min(len(ordered) - 1, lower + 1)
    weight = rank - math.floor(rank)
    return ordered[lower] * (1 - weight) + ordered[upper] * weight


def _bucket_of(labels: Labels) -> tuple[float | None, Labels, LabelKey]:
    """A bucket sample's upper bound (None: no valid `le`), its labels without `le` and the
    metric name, and their key."""
    le = labels.get("le")
    if le is None:
        return None, labels, ()
    try:
        upper = float(le)
    except ValueError:
        return None, labels, ()
    rest = dict(labels)
    del rest["le"]
    rest.pop(NAME, None)
    return upper, rest, _key(rest)


def _bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over (upper bound, cumulative count) buckets."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    buckets = sorted(buckets, key=lambda b: b[0])
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    coalesced: list[list[float]] = []
    for upper, count in buckets:
        if coalesced and coalesced[-1][0] == upper:
            coalesced[-1][1] += count
        else:
            coalesced.append([upper, count])
    highest = -math.inf
    for bucket in coalesced:
        if bucket[1] > highest:
            highest = bucket[1]
        elif bucket[1] < highest:
            bucket[1] = highest
    if len(coalesced) < 2:
        return math.nan
    observations = coalesced[-1][1]
    if observations == 0 or math.isnan(observations):
        return math.nan
    rank = q * observations
    index = len(coalesced) - 1
    for i in range(len(coalesced) - 1):
        if coalesced[i][1] >= rank:
            index = i
            break
    if index == len(coalesced) - 1:
        return coalesced[-2][0]
    if index == 0 and coalesced[0][0] <= 0:
        return coalesced[0][0]
    bucket_start = 0.0
    bucket_end = coalesced[index][0]
    count = coalesced[index][1]
    if index > 0:
        bucket_start = coalesced[index - 1][0]
        count -= coalesced[index - 1][1]
        rank -= coalesced[index - 1][1]
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


def _extrapolated_rate(
    series: _RangeSeries, matrix: _Matrix, is_counter: bool, is_rate: bool
) -> float | None:
    """rate, increase and delta with Prometheus' extrapolation to the range boundaries."""
    ts = series.timestamps
    if len(ts) < 2:
        return None
    return _extrapolate(
        ts[0],
        ts[-1],
        series.values,
        matrix.range_start,
        matrix.range_end,
        matrix.range_seconds,
        is_counter,
        is_rate,
    )


def _extrapolate(
    first_t: float,
    last_t: float,
    vs: list[float],
    range_start: float,
    range_end: float,
    range_seconds: float,
    is_counter: bool,
    is_rate: bool,
) -> float:
    """The extrapolated rate of at least two samples ``vs`` taken from first_t to last_t."""
    result = vs[-1] - vs[0]
    if is_counter:
        # The values just before each counter reset, summed in order.
        result += sum(compress(vs, map(gt, vs, islice(vs, 1, None))))
    return _extrapolate_change(
        first_t, last_t, vs[0], result, len(vs), range_start, range_end, range_seconds,
        is_counter, is_rate,
    )  # fmt: skip


def _extrapolate_change(
    first_t: float,
    last_t: float,
    first_v: float,
    result: float,
    count: int,
    range_start: float,
    range_end: float,
    range_seconds: float,
    is_counter: bool,
    is_rate: bool,
) -> float:
    """The extrapolated rate of a change ``result`` (resets accounted for) over ``count`` >= 2
    samples from first_t (value first_v) to last_t."""
    duration_to_start = first_t - range_start
    duration_to_end = range_end - last_t
    sampled = last_t - first_t
    if sampled <= 0:
        return 0.0  # samples at one instant carry no rate (a store keeps one per instant)
    average_gap = sampled / (count - 1)
    if is_counter and result > 0 and first_v >= 0:
        duration_to_zero = sampled * (first_v / result)
        duration_to_start = min(duration_to_start, duration_to_zero)
    threshold = average_gap * 1.1
    interval = sampled
    interval += duration_to_start if duration_to_start < threshold else average_gap / 2
    interval += duration_to_end if duration_to_end < threshold else average_gap / 2
    factor = interval / sampled
    if is_rate:
        factor /= range_seconds
    return result * factor


def _instant_delta(series: _RangeSeries, is_rate: bool) -> float | None:
    """irate and idelta: the last two samples of the range."""
    ts = series.timestamps
    vs = series.values
    if len(ts) < 2:
        return None
    last, previous = vs[-1], vs[-2]
    value = last if is_rate and last < previous else last - previous
    gap = ts[-1] - ts[-2]
    if gap == 0:
        return None
    return value / gap if is_rate else value


_MAX_PLANS = 512
"""The most group plans (see `PromQLEngine._aggregate_rates`) an engine keeps."""
_FUSED_AGGREGATIONS = frozenset({"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar"})
"""Aggregations without a parameter, which `_aggregate_rates` may compute from the rates."""


def _reduce(op: str, values: list[float], param: float | None) -> float:
    """One group's value of an aggregation other than topk and bottomk (param: quantile's)."""
    if op == "sum":
        return math.fsum(values) if all(map(math.isfinite, values)) else sum(values)
    if op == "avg":
        return _mean(values) if all(map(math.isfinite, values)) else (sum(values) / len(values))
    if op == "min":
        return _nan_min(values)
    if op == "max":
        return _nan_max(values)
    if op == "count":
        return float(len(values))
    if op == "group":
        return 1.0
    if op == "stddev":
        return math.sqrt(_variance(values))
    if op == "stdvar":
        return _variance(values)
    assert param is not None
    return _quantile(param, values)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _variance(values: list[float]) -> float:
    mean = _mean(values)
    return math.fsum((v - mean) ** 2 for v in values) / len(values)


def _nan_min(values: Iterable[float]) -> float:
    result = math.nan
    for v in values:
        if math.isnan(result) or v < result:
            result = v
    return result


def _nan_max(values: Iterable[float]) -> float:
    result = math.nan
    for v in values:
        if math.isnan(result) or v > result:
            result = v
    return result


def _linear_regression(series: _RangeSeries, intercept_time: float) -> tuple[float, float]:
    """Least-squares slope per second and the value at ``intercept_time``, as Prometheus fits."""
    values = series.values
    first = values[0]
    if all(v == first for v in values):
        if math.isinf(first):
            return math.nan, math.nan
        return 0.0, first
    n = float(len(values))
    xs = [t - intercept_time for t in series.timestamps]
    sum_x = math.fsum(xs)
    sum_y = math.fsum(values)
    sum_xy = math.fsum(x * y for x, y in zip(xs, values, strict=True))
    sum_x2 = math.fsum(x * x for x in xs)
    cov_xy = sum_xy - sum_x * sum_y / n
    var_x = sum_x2 - sum_x * sum_x / n
    slope = cov_xy / var_x
    return slope, sum_y / n - slope * sum_x / n


def _set_label(labels: Labels, name: str, value: str) -> Labels:
    """A copy of labels with one label set; an empty value removes it, as in Prometheus."""
    result = {k: v for k, v in labels.items() if k != name}
    if value:
        result[name] = value
    return result


def _expand(template: str, match: Any) -> str:
    """Go's regexp.Expand: $1, ${1}, $name, ${name} and $$; unknown groups expand to nothing."""
    out: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char != "$" or i + 1 == len(template):
            out.append(char)
            i += 1
            continue
        following = template[i + 1]
        if following == "$":
            out.append("$")
            i += 2
            continue
        if following == "{":
            end = template.find("}", i + 2)
            name = template[i + 2 : end] if end > 0 else ""
            if not name or not re.fullmatch(r"\w+", name):
                out.append("$")
                i += 1
                continue
            i = end + 1
        else:
            found = re.match(r"\w+", template[i + 1 :])
            if found is None:
                out.append("$")
                i += 1
                continue
            name = found.group()
            i += 1 + len(name)
        if name.isdigit():
            index = int(name)
            group = match.group(index) if index <= (match.re.groups or 0) else None
        else:
            group = match.groupdict().get(name)
        out.append(group or "")
    return "".join(out)


_OVER_TIME: dict[str, Callable[[list[float]], float]] = {
    "avg_over_time": _mean,
    "min_over_time": _nan_min,
    "max_over_time": _nan_max,
    "sum_over_time": math.fsum,
    "count_over_time": lambda vs: float(len(vs)),
    "last_over_time": lambda vs: vs[-1],
    "present_over_time": lambda vs: 1.0,
    "stddev_over_time": lambda vs: math.sqrt(_variance(vs)),
    "stdvar_over_time": _variance,
}


def _round(value: float, to_nearest: float) -> float:
    if to_nearest == 0 or math.isnan(value) or math.isinf(value):
        return value if to_nearest != 0 else math.nan
    inverse = 1.0 / to_nearest
    return math.floor(value * inverse + 0.5) / inverse


def _log(base_fn: Callable[[float], float]) -> Callable[[float], float]:
    def apply(value: float) -> float:
        if math.isnan(value) or value < 0:
            return math.nan
        if value == 0:
            return -math.inf
        if math.isinf(value):
            return math.inf
        return base_fn(value)

    return apply


def _sgn(value: float) -> float:
    if math.isnan(value):
        return value
    return 1.0 if value > 0 else -1.0 if value < 0 else 0.0


def _ceil(value: float) -> float:
    return value if math.isnan(value) or math.isinf(value) else float(math.ceil(value))


def _floor(value: float) -> float:
    return value if math.isnan(value) or math.isinf(value) else float(math.floor(value))


def _sqrt(value: float) -> float:
    return math.nan if math.isnan(value) or value < 0 else math.sqrt(value)


def _exp(value: float) -> float:
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf


_ELEMENTWISE: dict[str, Callable[[float], float]] = {
    "abs": abs,
    "ceil": _ceil,
    "floor": _floor,
    "exp": _exp,
    "sqrt": _sqrt,
    "ln": _log(math.log),
    "log2": _log(math.log2),
    "log10": _log(math.log10),
    "sgn": _sgn,
}

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

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


_AGGREGATIONS = frozenset(
    {
        "count_values",
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
    }
)


class PromQLEngine:
    """Evaluates PromQL instant and range queries over a :class:`SeriesStore`.

    Supported: selectors with ``= != =~ !~`` matchers, ``offset`` and ``@``; range vectors;
    rate, irate, increase, delta, idelta, deriv, predict_linear, changes, resets and the
    ``*_over_time`` family; histogram_quantile; sum, avg, min, max, count, group, stddev, stdvar,
    quantile, topk, bottomk and count_values with ``by``/``without``; arithmetic, comparison
    (with ``bool``) and set operators with ``on``/``ignoring`` and ``group_left``/``group_right``;
    abs, ceil, floor, round, clamp*, exp, ln, log2, log10, sqrt, sgn, label_replace, label_join,
    absent, absent_over_time, scalar, vector, time, sort, sort_desc. Everything else (subqueries,
    other functions, native histograms) raises :class:`PromQLError`.

    Sample windows are closed on both ends as in Prometheus 2.x: an instant selector sees the
    newest sample in ``[t - lookback, t]``, a range selector ``x[d]`` the samples in ``[t - d, t]``.
    """

    def __init__(self, store: SeriesStore, lookback_seconds: float = 300.0) -> None:
        """Create an engine.

        Args:
            store: Where the series come from.
            lookback_seconds: How far back an instant selector looks for a sample (staleness).
        """
        self._store = store
        self._lookback = lookback_seconds
        # Selector matches by (name, matchers): the candidates they were computed from, and
        # the matching series. Reused while the store hands out the same candidates.
        self._matches: dict[tuple[Any, ...], tuple[list[Series], list[Series]]] = {}
        # A store series' labels without the metric name, and that label set as a frozenset,
        # by the identity of the series' labels (kept alive here so identities stay unique).
        self._unnamed: dict[int, tuple[Labels, Labels, frozenset[tuple[str, str]]]] = {}
        # Per series (by identity, kept alive here): how many samples were scanned, and the
        # index of the last NaN and of the last decrease among them (see `_irregularities`).
        self._scanned: dict[int, list[Any]] = {}
        # Per (selector, `by` label list), kept alive here: the selection it was made for, each
        # selected series' group and the groups' labels; and the one labels object of each
        # (labels, key), see `_Vector.interned`.
        self._plans: dict[
            tuple[int, tuple[str, ...]], tuple[Any, list[Series], list[int], list[Labels]]
        ] = {}
        self._groupings: dict[tuple[tuple[str, ...], Any], Labels] = {}
        # Answers of instant-only queries (see `_instant_names`) by query: (time, samples).
        self._answers: dict[str, tuple[float, list[tuple[Labels, float]]]] = {}
        # histogram_quantile's reading of an interned label set: (labels, upper bound or None,
        # labels without le and name, their key), by identity.
        self._buckets: dict[int, tuple[Labels, float | None, Labels, LabelKey]] = {}

    # Public API -----------------------------------------------------------------------------

    def instant(self, query: str, t: float) -> dict[str, Any]:
        """Evaluate an instant query, answering like Prometheus' ``/api/v1/query``.

        Args:
            query: A PromQL expression.
            t: Evaluation time in epoch seconds.

        Returns:
            The API's ``data`` object: ``resultType`` and ``result``, values as ``[t, "value"]``.

        Raises:
            PromQLError: The query does not parse, is unsupported, or fails to evaluate.
        """
        t = float(t)
        expr = self._parse(query)
        ctx = _Context(query, t, t, t)
        self._check_budget(expr, ctx)
        value = self._eval(expr, ctx)
        if isinstance(value, _Scalar):
            return {"resultType": "scalar", "result": [t, format_value(value.value)]}
        if isinstance(value, _String):
            return {"resultType": "string", "result": [t, value.value]}
        if isinstance(value, _Matrix):
            rows = sorted(value.series, key=lambda s: _key(s.labels))
            return {
                "resultType": "matrix",
                "result": [
                    {
                        "metric": s.labels,
                        "values": [
                            [ts, format_value(v)]
                            for ts, v in zip(s.timestamps, s.values, strict=True)
                        ],
                    }
                    for s in rows
                ],
            }
        samples = self._finish_vector(value, expr, ctx)
        return {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [t, format_value(v)]} for labels, v in samples],
        }

    def instant_vector(self, query: str, t: float) -> list[tuple[dict[str, str], float]]:
        """Evaluate an instant query to (labels, value) pairs, for the alert rule evaluator.

        A scalar result becomes one sample with no labels.

        Args:
            query: A PromQL expression of vector or scalar type.
            t: Evaluation time in epoch seconds.

        Returns:
            The samples, ordered by label set.

        Raises:
            PromQLError: The query fails, or its result is a string or range vector.
        """
        expr = self._parse(query)
        names = _instant_names(expr)
        changed = getattr(self._store, "changed", None)
        if names is not None and changed is not None:
            # A query of instant selectors alone reads each series' latest value: when no
            # series of its names changed since an evaluation at an earlier time, it answers
            # what that evaluation answered.
            last = self._answers.get(query)
            if last is not None and last[0] <= t and not any(changed(n, last[0], t) for n in names):
                return list(last[1])
        ctx = _Context(query, t, t, t)
        value = self._eval(expr, ctx)
        if isinstance(value, _Scalar):
            samples: list[tuple[dict[str, str], float]] = [({}, value.value)]
        elif not isinstance(value, _Vector):
            raise PromQLError(
                f"query {query!r} returns a {self._type_name(value)}, not an instant vector"
            )
        else:
            samples = self._finish_vector(value, expr, ctx)
        if names is not None and changed is not None:
            self._answers[query] = (t, list(samples))
        return samples

    def range(self, query: str, start: float, end: float, step: float) -> dict[str, Any]:
        """Evaluate a range query, answering like Prometheus' ``/api/v1/query_range``.

        The instant query is evaluated at ``start``, ``start + step``, ... up to ``end``.

        Args:
            query: A PromQL expression of scalar or instant-vector type.
            start: First evaluation time in epoch seconds.
            end: Last evaluation time in epoch seconds (inclusive).
            step: Seconds between evaluations; positive.

        Returns:
            The API's ``data`` object with ``resultType`` ``matrix``.

        Raises:
            PromQLError: Bad range parameters, or the query fails at any step.
        """
        if step <= 0:
            raise PromQLError(f"step must be positive for query {query!r}, got {step}")
        if end < start:
            raise PromQLError(f"end {end} is before start {start} for query {query!r}")
        expr = self._parse(query)
        steps = math.floor((end - start) / step + 1e-9) + 1
        rows: dict[LabelKey, tuple[Labels, list[list[Any]]]] = {}
        for i in range(steps):
            t = float(start + i * step)
            ctx = _Context(query, t, start, end)
            if i == 0:
                self._check_budget(expr, ctx)
            value = self._eval(expr, ctx)
            if isinstance(value, _Scalar):
                samples: list[tuple[Labels, float]] = [({}, value.value)]
            elif isinstance(value, _Vector):
                samples = self._finish_vector(value, expr, ctx)
            else:
                raise PromQLError(
                    f"invalid expression type {self._type_name(value)!r} for range query "
                    f"{query!r}, must be scalar or instant vector"
                )
            for labels, v in samples:
                key = _key(labels)
                row = rows.get(key)
                if row is None:
                    row = (labels, [])
                    rows[key] = row
                row[1].append([t, format_value(v)])
        return {
            "resultType": "matrix",
            "result": [
                {"metric": labels, "values": values}
                for _, (labels, values) in sorted(rows.items(), key=lambda kv: kv[0])
            ],
        }

    # Parsing and dispatch ----------------------------------------------------------------------

    @staticmethod
    def _parse(query: str) -> Any:
        try:
            return _parse_cached(query)
        except QueryLimitError:
            raise
        except ValueError as exc:
            raise PromQLError(f"cannot parse query {query!r}: {exc}") from exc

    def _check_budget(self, expr: Any, ctx: _Context) -> None:
        """Refuse an evaluation whose selectors would select more series, or load more samples,
        than the limits allow (Prometheus' `query.max-samples`, and a series bound)."""
        series = 0
        samples = 0
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, pp.VectorSelector | pp.MatrixSelector):
                selector = node if isinstance(node, pp.VectorSelector) else node.vector_selector
                found = self._select(selector, ctx)
                series += len(found)
                if isinstance(node, pp.VectorSelector):
                    samples += len(found)
                else:
                    ref = self._reference_time(selector, ctx)
                    start = ref - node.range.total_seconds()
                    for s in found:
                        ts = s.timestamps
                        samples += bisect_right(ts, ref) - bisect_left(ts, start)
            elif isinstance(node, pp.BinaryExpr):
                stack.extend((node.lhs, node.rhs))
            elif isinstance(node, pp.UnaryExpr | pp.ParenExpr | pp.SubqueryExpr | pp.AggregateExpr):
                stack.append(node.expr)
            elif isinstance(node, pp.Call):
                stack.extend(node.args)
        limits = DEFAULT_LIMITS
        if series > limits.max_series:
            raise QueryLimitError(
                "series", limits.max_series, series, f"selectors that select {series} series"
            )
        if samples > limits.max_samples:
            raise QueryLimitError(
                "samples", limits.max_samples, samples, f"selectors that load {samples} samples"
            )

    @staticmethod
    def _type_name(value: _Value) -> str:
        if isinstance(value, _Scalar):
            return "scalar"
        if isinstance(value, _String):
            return "string"
        if isinstance(value, _Vector):
            return "instant vector"
        return "range vector"

    @staticmethod
    def _unique(value: _Value, ctx: _Context) -> _Value:
        """Reject a vector in which dropping metric names left two equal label sets."""
        if not isinstance(value, _Vector) or len(value.samples) < 2:
            return value
        if value.keys is not None and len(set(value.keys)) == len(value.samples):
            return value
        seen = {frozenset(labels.items()) for labels, _ in value.samples}
        if len(seen) < len(value.samples):
            counted: set[frozenset[tuple[str, str]]] = set()
            for labels, _ in value.samples:
                key = frozenset(labels.items())
                if key in counted:
                    raise PromQLError(
                        f"vector cannot contain metrics with the same labelset {labels} "
                        f"in query {ctx.query!r}"
                    )
                counted.add(key)
        return value

    def _finish_vector(
        self, value: _Vector, expr: Any, ctx: _Context
    ) -> list[tuple[dict[str, str], float]]:
        while isinstance(expr, pp.ParenExpr):
            expr = expr.expr
        ordered_by_query = isinstance(expr, pp.AggregateExpr) and str(expr.op) in (
            "topk",
            "bottomk",
        )
        ordered_by_query |= isinstance(expr, pp.Call) and expr.func.name in ("sort", "sort_desc")
        if ordered_by_query:
            return list(value.samples)
        return sorted(value.samples, key=lambda s: _key(s[0]))

    def _eval(self, expr: Any, ctx: _Context) -> _Value:
        if isinstance(expr, pp.NumberLiteral):
            return _Scalar(float(expr.val))
        if isinstance(expr, pp.StringLiteral):
            return _String(expr.val)
        if isinstance(expr, pp.ParenExpr):
            return self._eval(expr.expr, ctx)
        if isinstance(expr, pp.VectorSelector):
            return self._vector_selector(expr, ctx)
        if isinstance(expr, pp.MatrixSelector):
            return self._matrix_selector(expr, ctx)
        if isinstance(expr, pp.UnaryExpr):
            return self._unique(self._unary(expr, ctx), ctx)
        if isinstance(expr, pp.BinaryExpr):
            return self._unique(self._binary(expr, ctx), ctx)
        if isinstance(expr, pp.AggregateExpr):
            return self._aggregate(expr, ctx)
        if isinstance(expr, pp.Call):
            return self._unique(self._call(expr, ctx), ctx)
        if isinstance(expr, pp.SubqueryExpr):
            raise PromQLError(f"subqueries ({expr}) are not supported in query {ctx.query!r}")
        raise PromQLError(f"unsupported expression {expr} in query {ctx.query!r}")

    def _scalar_arg(self, expr: Any, ctx: _Context, what: str) -> float:
        value = self._eval(expr, ctx)
        if not isinstance(value, _Scalar):
            raise PromQLError(
                f"{what} must be a scalar, got {self._type_name(value)} in query {ctx.query!r}"
            )
        return value.value

    def _vector_arg(self, expr: Any, ctx: _Context, what: str) -> _Vector:
        value = self._eval(expr, ctx)
        if not isinstance(value, _Vector):
            raise PromQLError(
                f"{what} must be an instant vector, got {self._type_name(value)} "
                f"in query {ctx.query!r}"
            )
        return value

    def _matrix_arg(self, expr: Any, ctx: _Context, what: str) -> _Matrix:
        value = self._eval(expr, ctx)
        if not isinstance(value, _Matrix):
            raise PromQLError(
                f"{what} must be a range vector, got {self._type_name(value)} "
                f"in query {ctx.query!r}"
            )
        return value

    # Selectors --------------------------------------------------------------------------------

    def _reference_time(self, selector: Any, ctx: _Context) -> float:
        ref = ctx.t
        at = selector.at
        if at is not None:
            if at.type == pp.AtModifierType.Start:
                ref = ctx.start
            elif at.type == pp.AtModifierType.End:
                ref = ctx.end
            else:
                ref = at.at.timestamp()
        if selector.offset is not None:
            ref -= selector.offset.total_seconds()
        # Prometheus works in whole milliseconds.
        return round(ref * 1000.0) / 1000.0

    def _select(self, selector: Any, ctx: _Context) -> list[Series]:
        """The series a selector selects, in store order. The list may be shared with later
        calls (the same object while the selection is unchanged): callers must not modify it."""
        matchers = selector.matchers
        if matchers.or_matchers:
            raise PromQLError(
                f"'or' inside a selector ({selector}) is not supported in query {ctx.query!r}"
            )
        name = selector.name
        for matcher in matchers.matchers:
            if name is None and matcher.name == NAME and matcher.op == pp.MatchOp.Equal:
                name = matcher.value
        candidates = self._store.select(name)
        if not isinstance(candidates, list):
            candidates = list(candidates)
        if not matchers.matchers:
            return candidates
        cache_key = (name, *((m.name, str(m.op), m.value) for m in matchers.matchers))
        cached = self._matches.get(cache_key)
        if (
            cached is not None
            and len(cached[0]) == len(candidates)
            and all(map(is_, cached[0], candidates))
        ):
            return cached[1]
        predicates = [
            (matcher.name, _matcher_predicate(matcher, ctx.query)) for matcher in matchers.matchers
        ]
        out: list[Series] = []
        for series in candidates:
            labels = series.labels
            if all(pred(labels.get(label, "")) for label, pred in predicates):
                out.append(series)
        self._matches[cache_key] = (candidates, out)
        return out

    def _irregularities(self, series: Series) -> tuple[int, int]:
        """The index of a series' last NaN sample and of its last decrease (a value below the
        one before it), -1 when none; kept up to date as samples are appended."""
        values = series.values
        entry = self._scanned.get(id(series))
        if entry is None or entry[0] is not series:
            entry = [series, 0, -1, -1, None]
            self._scanned[id(series)] = entry
        _, scanned, last_nan, last_drop, _ = entry
        n = len(values)
        if n:
            # Re-read the last sample seen before: a store may replace a series' last value.
            begin = max(scanned - 1, 0)
            previous = values[begin - 1] if begin else math.nan
            for i in range(begin, n):
                v = values[i]
                if v != v:
                    last_nan = i
                elif v < previous:
                    last_drop = i
                previous = v
            entry[1], entry[2], entry[3], entry[4] = n, last_nan, last_drop, values[-1]
        return last_nan, last_drop

    def _without_name(self, labels: Labels) -> tuple[Labels, frozenset[tuple[str, str]]]:
        """A store series' labels without ``__name__``, and that label set as a frozenset.

        The result is shared between evaluations: callers must not modify it.
        """
        entry = self._unnamed.get(id(labels))
        if entry is None or entry[0] is not labels:
            unnamed = _drop_name(labels)
            entry = (labels, unnamed, frozenset(unnamed.items()))
            self._unnamed[id(labels)] = entry
        return entry[1], entry[2]

    def _vector_selector(self, selector: Any, ctx: _Context) -> _Vector:
        ref = self._reference_time(selector, ctx)
        oldest = ref - self._lookback
        samples: list[tuple[Labels, float]] = []
        shared: list[float] | None = None
        i = -1
        for series in self._select(selector, ctx):
            ts = series.timestamps
            if ts is not shared:
                shared = ts
                i = bisect_right(ts, ref) - 1
            if i >= 0 and ts[i] >= oldest:
                value = series.values[i]
                if value == value or not is_stale(value):
                    samples.append((series.labels, value))
        return _Vector(samples)

    def _matrix_selector(self, matrix: Any, ctx: _Context) -> _Matrix:
        selector = matrix.vector_selector
        ref = self._reference_time(selector, ctx)
        seconds = matrix.range.total_seconds()
        start = ref - seconds
        rows: list[_RangeSeries] = []
        for series in self._select(selector, ctx):
            ts = series.timestamps
            lo = bisect_left(ts, start)
            hi = bisect_right(ts, ref)
            if hi <= lo:
                continue
            values = series.values[lo:hi]
            window = ts[lo:hi]
            if math.isnan(sum(values)):
                # Staleness markers are not samples; drop them from the window.
                kept = [j for j, v in enumerate(values) if v == v or not is_stale(v)]
                if not kept:
                    continue
                window = [window[j] for j in kept]
                values = [values[j] for j in kept]
            rows.append(_RangeSeries(series.labels, window, values))
        return _Matrix(rows, start, ref, seconds)

    # Operators --------------------------------------------------------------------------------

    def _unary(self, expr: Any, ctx: _Context) -> _Value:
        value = self._eval(expr.expr, ctx)
        if isinstance(value, _Scalar):
            return _Scalar(-value.value)
        if isinstance(value, _Vector):
            return _Vector([(_drop_name(labels), -v) for labels, v in value.samples])
        raise PromQLError(
            f"unary minus is not defined on a {self._type_name(value)} in query {ctx.query!r}"
        )

    def _binary(self, expr: Any, ctx: _Context) -> _Value:
        op = str(expr.op)
        modifier = expr.modifier
        lhs = self._eval(expr.lhs, ctx)
        rhs = self._eval(expr.rhs, ctx)
        return_bool = bool(modifier is not None and modifier.return_bool)
        for side in (lhs, rhs):
            if not isinstance(side, _Scalar | _Vector):
                raise PromQLError(
                    f"binary operator {op!r} is not defined on a {self._type_name(side)} "
                    f"in query {ctx.query!r}"
                )
        if op in _SET_OPS:
            if not (isinstance(lhs, _Vector) and isinstance(rhs, _Vector)):
                raise PromQLError(
                    f"set operator {op!r} needs instant vectors on both sides in query "
                    f"{ctx.query!r}"
                )
            return self._set_op(op, lhs, rhs, modifier)
        if op not in _ARITHMETIC and op not in _COMPARISONS:
            raise PromQLError(f"binary operator {op!r} is not supported in query {ctx.query!r}")
        if isinstance(lhs, _Scalar) and isinstance(rhs, _Scalar):
            if op in _ARITHMETIC:
                return _Scalar(_arith(op, lhs.value, rhs.value))
            if not return_bool:
                raise PromQLError(
                    f"comparisons between scalars must use the bool modifier in query {ctx.query!r}"
                )
            return _Scalar(1.0 if _COMPARISONS[op](lhs.value, rhs.value) else 0.0)
        if isinstance(lhs, _Vector) and isinstance(rhs, _Scalar):
            return self._vector_scalar(op, lhs, rhs.value, False, return_bool)
        if isinstance(lhs, _Scalar) and isinstance(rhs, _Vector):
            return self._vector_scalar(op, rhs, lhs.value, True, return_bool)
        assert isinstance(lhs, _Vector) and isinstance(rhs, _Vector)
        return self._vector_vector(op, lhs, rhs, modifier, return_bool, ctx)

    @staticmethod
    def _vector_scalar(
        op: str, vector: _Vector, scalar: float, swap: bool, return_bool: bool
    ) -> _Vector:
        out: list[tuple[Labels, float]] = []
        if op in _ARITHMETIC:
            for labels, v in vector.samples:
                result = _arith(op, scalar, v) if swap else _arith(op, v, scalar)
                out.append((_drop_name(labels), result))
            return _Vector(out)
        compare = _COMPARISONS[op]
        for labels, v in vector.samples:
            keep = compare(scalar, v) if swap else compare(v, scalar)
            if return_bool:
                out.append((_drop_name(labels), 1.0 if keep else 0.0))
            elif keep:
                out.append((labels, v))
        return _Vector(out)

    @staticmethod
    def _signature(labels: Labels, on: bool, names: frozenset[str]) -> LabelKey:
        if on:
            return tuple(sorted((k, v) for k, v in labels.items() if k in names))
        return tuple(sorted((k, v) for k, v in labels.items() if k not in names and k != NAME))

    @staticmethod
    def _matching(modifier: Any) -> tuple[bool, frozenset[str]]:
        if modifier is None or modifier.matching is None:
            return False, frozenset()
        matching = modifier.matching
        return matching.type == pp.LabelModifierType.Include, frozenset(matching.labels)

    def _set_op(self, op: str, lhs: _Vector, rhs: _Vector, modifier: Any) -> _Vector:
        on, names = self._matching(modifier)
        if op == "and":
            right = {self._signature(labels, on, names) for labels, _ in rhs.samples}
            return _Vector([s for s in lhs.samples if self._signature(s[0], on, names) in right])
        if op == "unless":
            right = {self._signature(labels, on, names) for labels, _ in rhs.samples}
            return _Vector(
                [s for s in lhs.samples if self._signature(s[0], on, names) not in right]
            )
        left = {self._signature(labels, on, names) for labels, _ in lhs.samples}
        extra = [s for s in rhs.samples if self._signature(s[0], on, names) not in left]
        return _Vector(list(lhs.samples) + extra)

    def _vector_vector(
        self,
        op: str,
        lhs: _Vector,
        rhs: _Vector,
        modifier: Any,
        return_bool: bool,
        ctx: _Context,
    ) -> _Vector:
        card = pp.VectorMatchCardinality.OneToOne if modifier is None else modifier.card
        one_to_one = card == pp.VectorMatchCardinality.OneToOne
        swapped = card == pp.VectorMatchCardinality.OneToMany
        include: list[str] = []
        if not one_to_one and modifier.group_labels:
            include = list(modifier.group_labels)
        if swapped:
            lhs, rhs = rhs, lhs
        on, names = self._matching(modifier)
        right: dict[LabelKey, tuple[Labels, float]] = {}
        for labels, v in rhs.samples:
            sig = self._signature(labels, on, names)
            if sig in right:
                side = "left" if swapped else "right"
                raise PromQLError(
                    f"found duplicate series for the match group {dict(sig)} on the {side} hand "
                    f"side of the operation: many-to-many matching not allowed: matching labels "
                    f"must be unique on one side (query {ctx.query!r})"
                )
            right[sig] = (labels, v)
        matched: dict[LabelKey, set[LabelKey]] = {}
        out: list[tuple[Labels, float]] = []
        arithmetic = op in _ARITHMETIC
        for labels, many_value in lhs.samples:
            sig = self._signature(labels, on, names)
            partner = right.get(sig)
            if partner is None:
                continue
            one_labels, one_value = partner
            lv, rv = (one_value, many_value) if swapped else (many_value, one_value)
            if arithmetic:
                value = _arith(op, lv, rv)
            else:
                keep = _COMPARISONS[op](lv, rv)
                if return_bool:
                    value = 1.0 if keep else 0.0
                elif keep:
                    value = lv
                else:
                    continue
            result = _drop_name(labels) if arithmetic else dict(labels)
            if include and result is labels:
                result = dict(labels)
            if one_to_one:
                if on:
                    result = {k: v for k, v in result.items() if k in names}
                else:
                    result = {k: v for k, v in result.items() if k not in names}
            for label in include:
                one = one_labels.get(label, "")
                if one:
                    result[label] = one
                else:
                    result.pop(label, None)
            if return_bool:
                result = _drop_name(result)
            inserted = matched.get(sig)
            if one_to_one:
                if inserted is not None:
                    raise PromQLError(
                        f"multiple matches for labels {dict(sig)}: many-to-one matching must be "
                        f"explicit (group_left/group_right) (query {ctx.query!r})"
                    )
                matched[sig] = set()
            else:
                if inserted is None:
                    inserted = set()
                    matched[sig] = inserted
                result_key = _key(result)
                if result_key in inserted:
                    raise PromQLError(
                        f"multiple matches for labels {dict(sig)}: grouping labels must ensure "
                        f"unique matches (query {ctx.query!r})"
                    )
                inserted.add(result_key)
            out.append((result, value))
        return _Vector(out)

    # Aggregations -----------------------------------------------------------------------------

    def _aggregate(self, expr: Any, ctx: _Context) -> _Vector:
        op = str(expr.op)
        if op not in _AGGREGATIONS:
            raise PromQLError(f"aggregation {op!r} is not supported in query {ctx.query!r}")
        param: float | None = None
        if op in ("topk", "bottomk", "quantile"):
            param = self._scalar_arg(expr.param, ctx, f"the parameter of {op}")
        fused = self._aggregate_rates(op, expr, ctx)
        if fused is not None:
            return fused
        vector = self._vector_arg(expr.expr, ctx, f"the argument of {op}")
        if op == "count_values":
            label = self._eval(expr.param, ctx)
            if not isinstance(label, _String) or not _LABEL_NAME.fullmatch(label.value):
                raise PromQLError(
                    f"count_values needs a valid label name as its parameter in query {ctx.query!r}"
                )
            vector = _Vector(
                [({**labels, label.value: format_value(v)}, v) for labels, v in vector.samples]
            )
            op = "count"
        modifier = expr.modifier
        by = True
        names: frozenset[str] = frozenset()
        if modifier is not None:
            by = modifier.type == pp.AggModifierType.By
            names = frozenset(modifier.labels)

        if str(expr.op) == "count_values":
            added = self._eval(expr.param, ctx)
            assert isinstance(added, _String)
            names = names | {added.value} if by else names - {added.value}

        groups: dict[Any, tuple[Labels, list[tuple[Labels, float]], list[float]]] = {}
        order = sorted(names)
        ranked = op in ("topk", "bottomk")
        pick = itemgetter(*order) if order else None
        lone = len(order) == 1
        for labels, v in vector.samples:
            if by:
                # Keyed by the listed labels' values (None when absent), without building a dict;
                # a lone label keys by its bare value, which cannot collide with a tuple key.
                key: Any
                complete = True
                try:
                    key = pick(labels) if pick is not None else ()
                except KeyError:
                    key = tuple(map(labels.get, order))
                    complete = False
                group = groups.get(key)
                if group is None:
                    if not complete:
                        grouping = {n: labels[n] for n in order if n in labels}
                    elif lone:
                        grouping = {order[0]: key}
                    else:
                        grouping = dict(zip(order, key, strict=True))
                    group = (grouping, [], [])
                    groups[key] = group
            else:
                grouping = {k: val for k, val in labels.items() if k not in names and k != NAME}
                key = _key(grouping)
                group = groups.get(key)
                if group is None:
                    group = (grouping, [], [])
                    groups[key] = group
            if ranked:
                group[1].append((labels, v))
            group[2].append(v)

        out: list[tuple[Labels, float]] = []
        for grouping, members, values in groups.values():
            if ranked:
                assert param is not None
                k = int(param)
                if k < 1:
                    continue
                descending = op == "topk"

                def rank(sample: tuple[Labels, float], desc: bool = descending) -> float:
                    v = sample[1]
                    if math.isnan(v):
                        return math.inf
                    return -v if desc else v

                out.extend(sorted(members, key=rank)[:k])
                continue
            out.append((grouping, _reduce(op, values, param)))
        return _Vector(out)

    def _aggregate_rates(self, op: str, expr: Any, ctx: _Context) -> _Vector | None:
        """`op [by (labels)] (rate|increase|delta(selector[range]))` straight from the rates,
        without building the intermediate vector; None for any other aggregation.

        The same groups, values and order as aggregating the evaluated rates: the groups come
        in the order of their first series, with the grouping of the generic path, and each
        group's values are reduced in selection order.
        """
        modifier = expr.modifier
        if op not in _FUSED_AGGREGATIONS:
            return None
        if modifier is not None and modifier.type != pp.AggModifierType.By:
            return None
        inner = expr.expr
        while isinstance(inner, pp.ParenExpr):
            inner = inner.expr
        if not (
            isinstance(inner, pp.Call)
            and inner.func.name in ("rate", "increase", "delta")
            and isinstance(inner.args[0], pp.MatrixSelector)
        ):
            return None
        selector = inner.args[0].vector_selector
        if selector.name is None:
            # A selector of several names could select series that only their names set
            # apart: the generic path refuses those.
            return None
        name = inner.func.name
        order = tuple(sorted(frozenset(modifier.labels))) if modifier is not None else ()
        selection, picked, results = self._selector_rates(
            inner.args[0], ctx, name != "delta", name == "rate"
        )
        # Each selected series' group, found once per selection (the same list object while
        # the selection is unchanged), numbered in selection order.
        plan = self._plans.get((id(selector), order))
        if plan is None or plan[0] is not selector or plan[1] is not selection:
            indexes: dict[Any, int] = {}
            groupings: list[Labels] = []
            of_series: list[int] = []
            # Grouping by labels other than __name__ reads the same values with the name kept.
            named = NAME not in order
            for series in selection:
                labels = series.labels if named else self._without_name(series.labels)[0]
                key, grouping = self._group_of(labels, order)
                index = indexes.get(key)
                if index is None:
                    index = indexes[key] = len(groupings)
                    groupings.append(grouping)
                of_series.append(index)
            plan = (selector, selection, of_series, groupings)
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()  # an agent's endless distinct queries keep no memory
            self._plans[(id(selector), order)] = plan
        of_series, groupings = plan[2], plan[3]
        members: list[list[float]] = [[] for _ in groupings]
        first_seen: list[int] = []
        for position, value in zip(picked, results, strict=True):
            index = of_series[position]
            values = members[index]
            if not values:
                first_seen.append(index)
            values.append(value)
        # Groups in the order of their first series with a rate, as the generic path has them.
        return _Vector(
            [(groupings[i], _reduce(op, members[i], None)) for i in first_seen],
            interned=True,
        )

    def _group_of(self, labels: Labels, order: tuple[str, ...]) -> tuple[Any, Labels]:
        """The group key of a sample's labels under `by (order)` and the group's labels (one
        object per key: see `_Vector.interned`), as the generic aggregation keys them."""
        if all(n in labels for n in order):
            values = tuple(labels[n] for n in order)
            key: Any = values[0] if len(order) == 1 else values
            grouping = dict(zip(order, values, strict=True))
        else:
            key = tuple(map(labels.get, order))
            grouping = {n: labels[n] for n in order if n in labels}
        interned = self._groupings.setdefault((order, key), grouping)
        return key, interned

    # Functions --------------------------------------------------------------------------------

    def _call(self, expr: Any, ctx: _Context) -> _Value:
        name = expr.func.name
        args = expr.args
        if name in ("rate", "increase", "delta") and isinstance(args[0], pp.MatrixSelector):
            return self._rate_of_selector(args[0], ctx, name != "delta", name == "rate")
        if name in ("rate", "increase", "delta", "irate", "idelta"):
            matrix = self._matrix_arg(args[0], ctx, f"the argument of {name}")
            out: list[tuple[Labels, float]] = []
            keys: list[frozenset[tuple[str, str]]] = []
            instant = name in ("irate", "idelta")
            is_counter = name != "delta"
            is_rate = name == "rate"
            for series in matrix.series:
                if instant:
                    result = _instant_delta(series, is_rate=name == "irate")
                else:
                    result = _extrapolated_rate(series, matrix, is_counter, is_rate)
                if result is not None:
                    labels, key = self._without_name(series.labels)
                    out.append((labels, result))
                    keys.append(key)
            return _Vector(out, keys)
        if name in _OVER_TIME or name == "quantile_over_time":
            q = 0.0
            if name == "quantile_over_time":
                q = self._scalar_arg(args[0], ctx, "the quantile of quantile_over_time")
                args = args[1:]
            matrix = self._matrix_arg(args[0], ctx, f"the argument of {name}")
            out = []
            for series in matrix.series:
                if name == "quantile_over_time":
                    result = _quantile(q, series.values)
                else:
                    result = _OVER_TIME[name](series.values)
                labels = series.labels if name == "last_over_time" else _drop_name(series.labels)
                out.append((labels, result))
            return _Vector(out)
        if name in ("changes", "resets"):
            matrix = self._matrix_arg(args[0], ctx, f"the argument of {name}")
            out = []
            for series in matrix.series:
                vs = series.values
                if name == "changes":
                    count = sum(
                        1
                        for a, b in pairwise(vs)
                        if a != b and not (math.isnan(a) and math.isnan(b))
                    )
                else:
                    count = sum(1 for a, b in pairwise(vs) if b < a)
                out.append((_drop_name(series.labels), float(count)))
            return _Vector(out)
        if name in _ELEMENTWISE:
            fn = _ELEMENTWISE[name]
            vector = self._vector_arg(args[0], ctx, f"the argument of {name}")
            return _Vector([(_drop_name(labels), fn(v)) for labels, v in vector.samples])
        if name in ("round", "clamp", "clamp_min", "clamp_max"):
            return self._clamp_round(name, args, ctx)
        if name in ("deriv", "predict_linear"):
            matrix = self._matrix_arg(args[0], ctx, f"the first argument of {name}")
            horizon = 0.0
            if name == "predict_linear":
                horizon = self._scalar_arg(args[1], ctx, "the duration of predict_linear")
            out = []
            for series in matrix.series:
                if len(series.timestamps) < 2:
                    continue
                if name == "deriv":
                    slope, _ = _linear_regression(series, series.timestamps[0])
                    out.append((_drop_name(series.labels), slope))
                else:
                    slope, intercept = _linear_regression(series, matrix.range_end)
                    out.append((_drop_name(series.labels), intercept + slope * horizon))
            return _Vector(out)
        if name in ("label_replace", "label_join"):
            return self._relabel(name, args, ctx)
        if name == "histogram_quantile":
            return self._histogram_quantile(args, ctx)
        if name in ("absent", "absent_over_time"):
            return self._absent(name, args[0], ctx)
        if name == "scalar":
            vector = self._vector_arg(args[0], ctx, "the argument of scalar")
            if len(vector.samples) != 1:
                return _Scalar(math.nan)
            return _Scalar(vector.samples[0][1])
        if name == "vector":
            return _Vector([({}, self._scalar_arg(args[0], ctx, "the argument of vector"))])
        if name == "time":
            return _Scalar(ctx.t)
        if name in ("sort", "sort_desc"):
            vector = self._vector_arg(args[0], ctx, f"the argument of {name}")

            def order(sample: tuple[Labels, float], desc: bool = name == "sort_desc") -> float:
                v = sample[1]
                if math.isnan(v):
                    return math.inf
                return -v if desc else v

            return _Vector(sorted(vector.samples, key=order))
        raise PromQLError(f"function {name}() is not supported in query {ctx.query!r}")

    def _rate_of_selector(
        self, matrix: Any, ctx: _Context, is_counter: bool, is_rate: bool
    ) -> _Vector:
        """rate, increase or delta straight over the stored samples of a range selector.

        The same computation as building the range vector first, without copying windows that
        hold no staleness markers.
        """
        selection, picked, results = self._selector_rates(matrix, ctx, is_counter, is_rate)
        out: list[tuple[Labels, float]] = []
        keys: list[frozenset[tuple[str, str]]] = []
        unnamed = self._unnamed
        for position, result in zip(picked, results, strict=True):
            series = selection[position]
            named = unnamed.get(id(series.labels))
            if named is not None and named[0] is series.labels:
                out.append((named[1], result))
                keys.append(named[2])
            else:
                labels, key = self._without_name(series.labels)
                out.append((labels, result))
                keys.append(key)
        return _Vector(out, keys)

    def _selector_rates(
        self, matrix: Any, ctx: _Context, is_counter: bool, is_rate: bool
    ) -> tuple[list[Series], list[int], list[float]]:
        """The series a range selector selects, the positions among them of those that have a
        rate (increase, delta), and those rates, in selection order."""
        selector = matrix.vector_selector
        ref = self._reference_time(selector, ctx)
        seconds = matrix.range.total_seconds()
        start = ref - seconds
        selection = self._select(selector, ctx)
        picked: list[int] = []
        results: list[float] = []
        # Series written in the same scrapes may share one timestamps list (a store's choice):
        # their window bounds, and the extrapolation they share, are found once.
        shared: list[float] | None = None
        lo = hi = 0
        spread = False
        to_start = threshold = factor = 0.0
        scanned = self._scanned
        for position, series in enumerate(selection):
            ts = series.timestamps
            if ts is not shared:
                shared = ts
                lo = bisect_left(ts, start)
                hi = bisect_right(ts, ref)
                # Samples spread over time over a positive range: the extrapolation factor is
                # positive and finite, so an unchanged series' rate is its zero change itself.
                spread = hi - lo >= 2 and ts[hi - 1] > ts[lo] and seconds > 0
                if spread:
                    # `_extrapolate_change` up to the series' own counter clamp, in its order.
                    sampled = ts[hi - 1] - ts[lo]
                    average_gap = sampled / (hi - lo - 1)
                    threshold = average_gap * 1.1
                    to_start = ts[lo] - start
                    to_end = ref - ts[hi - 1]
                    end_part = to_end if to_end < threshold else average_gap / 2
                    interval = sampled
                    interval += to_start if to_start < threshold else average_gap / 2
                    interval += end_part
                    factor = interval / sampled
                    if is_rate:
                        factor /= seconds
            if hi - lo < 2:
                continue
            last_nan = series.last_nan
            if last_nan is not None:
                # The store keeps the marks as it writes (see `note_sample`).
                last_drop: int = series.last_drop  # type: ignore[assignment]
            else:
                entry = scanned.get(id(series))
                if (
                    entry is not None
                    and entry[0] is series
                    and entry[1] == len(series.values)
                    and entry[4] is series.values[-1]
                ):
                    # Nothing appended or replaced since the last scan.
                    last_nan, last_drop = entry[2], entry[3]
                else:
                    last_nan, last_drop = self._irregularities(series)
            if last_nan < lo and (last_drop <= lo or not is_counter):
                # No staleness marker and no counter reset inside the window: the change is
                # last minus first, without copying the window.
                values = series.values
                first_v = values[lo]
                change = values[hi - 1] - first_v
                if not spread:
                    result = _extrapolate_change(
                        ts[lo], ts[hi - 1], first_v, change, hi - lo,
                        start, ref, seconds, is_counter, is_rate,
                    )  # fmt: skip
                elif change == 0.0:
                    result = change
                elif is_counter and change > 0 and first_v >= 0:
                    to_zero = (ts[hi - 1] - ts[lo]) * (first_v / change)
                    if to_zero < to_start:
                        # The counter started inside the range: extrapolate no further back
                        # than its zero.
                        result = _extrapolate_change(
                            ts[lo], ts[hi - 1], first_v, change, hi - lo,
                            start, ref, seconds, is_counter, is_rate,
                        )  # fmt: skip
                    else:
                        result = change * factor
                else:
                    result = change * factor
                picked.append(position)
                results.append(result)
                continue
            values = series.values[lo:hi]
            if math.isnan(sum(values)):
                window = ts[lo:hi]
                kept = [j for j, v in enumerate(values) if v == v or not is_stale(v)]
                if len(kept) < 2:
                    continue
                first_t, last_t = window[kept[0]], window[kept[-1]]
                values = [values[j] for j in kept]
            else:
                first_t, last_t = ts[lo], ts[hi - 1]
            picked.append(position)
            results.append(
                _extrapolate(first_t, last_t, values, start, ref, seconds, is_counter, is_rate)
            )
        return selection, picked, results

    def _relabel(self, name: str, args: list[Any], ctx: _Context) -> _Vector:
        vector = self._vector_arg(args[0], ctx, f"the first argument of {name}")
        texts: list[str] = []
        for arg in args[1:]:
            value = self._eval(arg, ctx)
            if not isinstance(value, _String):
                raise PromQLError(f"{name} needs string arguments in query {ctx.query!r}")
            texts.append(value.value)
        destination = texts[0]
        if not _LABEL_NAME.fullmatch(destination):
            raise PromQLError(
                f"invalid destination label name {destination!r} in {name} in query {ctx.query!r}"
            )
        out: list[tuple[Labels, float]] = []
        if name == "label_join":
            separator, sources = texts[1], texts[2:]
            for labels, v in vector.samples:
                joined = separator.join(labels.get(src, "") for src in sources)
                out.append((_set_label(labels, destination, joined), v))
            return _Vector(out)
        replacement, source, pattern = texts[1], texts[2], texts[3]
        regex = _regex(pattern, ctx.query)
        for labels, v in vector.samples:
            match = regex.fullmatch(labels.get(source, ""))
            if match is None:
                out.append((labels, v))
            else:
                out.append((_set_label(labels, destination, _expand(replacement, match)), v))
        return _Vector(out)

    def _clamp_round(self, name: str, args: list[Any], ctx: _Context) -> _Vector:
        vector = self._vector_arg(args[0], ctx, f"the first argument of {name}")
        params = [self._scalar_arg(a, ctx, f"a parameter of {name}") for a in args[1:]]
        out: list[tuple[Labels, float]] = []
        for labels, v in vector.samples:
            if name == "round":
                result = _round(v, params[0] if params else 1.0)
            elif name == "clamp_min":
                result = v if math.isnan(v) else max(v, params[0])
            elif name == "clamp_max":
                result = v if math.isnan(v) else min(v, params[0])
            else:
                low, high = params
                if high < low:
                    return _Vector([])
                result = v if math.isnan(v) else max(low, min(high, v))
            out.append((_drop_name(labels), result))
        return _Vector(out)

    def _histogram_quantile(self, args: list[Any], ctx: _Context) -> _Vector:
        q = self._scalar_arg(args[0], ctx, "the quantile of histogram_quantile")
        vector = self._vector_arg(args[1], ctx, "the buckets of histogram_quantile")
        groups: dict[LabelKey, tuple[Labels, list[tuple[float, float]]]] = {}
        cache = self._buckets if vector.interned else None
        for labels, v in vector.samples:
            entry = cache.get(id(labels)) if cache is not None else None
            if entry is None or entry[0] is not labels:
                entry = (labels, *_bucket_of(labels))
                if cache is not None:
                    cache[id(labels)] = entry
            _, upper, rest, key = entry
            if upper is None:
                continue
            group = groups.get(key)
            if group is None:
                group = (rest, [])
                groups[key] = group
            group[1].append((upper, v))
        return _Vector(
            [(labels, _bucket_quantile(q, buckets)) for labels, buckets in groups.values()]
        )

    def _absent(self, name: str, arg: Any, ctx: _Context) -> _Vector:
        inner = arg
        while isinstance(inner, pp.ParenExpr):
            inner = inner.expr
        if name == "absent":
            present = bool(self._vector_arg(arg, ctx, "the argument of absent").samples)
            selector = inner if isinstance(inner, pp.VectorSelector) else None
        else:
            present = bool(self._matrix_arg(arg, ctx, "the argument of absent_over_time").series)
            selector = inner.vector_selector if isinstance(inner, pp.MatrixSelector) else None
        if present:
            return _Vector([])
        labels: Labels = {}
        if selector is not None:
            ambiguous: set[str] = set()
            for matcher in selector.matchers.matchers:
                if matcher.name == NAME:
                    continue
                if matcher.op == pp.MatchOp.Equal and matcher.name not in labels:
                    labels[matcher.name] = matcher.value
                else:
                    ambiguous.add(matcher.name)
            # A label that is not pinned to one value by a single equality matcher is omitted.
            for label in ambiguous:
                labels.pop(label, None)
        return _Vector([(labels, 1.0)])
