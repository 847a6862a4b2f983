"""The values a PromQL evaluation passes around (scalars, strings, instant and range vectors,
its context) and the pure functions over them: arithmetic, quantiles, rate extrapolation,
reducers, regression, label edits, value formatting and the element-wise math functions."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from itertools import compress, islice
from operator import gt
from typing import Any

Labels = dict[str, str]
LabelKey = tuple[tuple[str, str], ...]

NAME = "__name__"


@dataclass(slots=True)
class _Scalar:
    value: float

    def __init__(self, value: float) -> None:
        # Written out: see "Compiled build" in docs/architecture.md.
        self.value = value


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
    unique: bool = False
    """Whether no two label sets are equal by construction (no check needed)."""

    def __init__(
        self,
        samples: list[tuple[Labels, float]],
        keys: list[frozenset[tuple[str, str]]] | None = None,
        interned: bool = False,
        unique: bool = False,
    ) -> None:
        self.samples = samples
        self.keys = keys
        self.interned = interned
        self.unique = unique


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


@dataclass(slots=True)
class _Context:
    """What an evaluation is of: the query, the evaluation time and the range (never changed)."""

    query: str
    t: float
    start: float
    end: float

    def __init__(self, query: str, t: float, start: float, end: float) -> None:
        self.query = query
        self.t = t
        self.start = start
        self.end = end


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


def _bucket_quantile(
    q: float, buckets: list[tuple[float, float]], *, ordered: bool = False
) -> float:
    """Prometheus' histogram_quantile over (upper bound, cumulative count) buckets (`ordered`:
    already by ascending bound)."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if not ordered:
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
    if count == 0:
        # Only a rank of zero (q = 0) lands in an empty bucket: 0/0, which is NaN to Prometheus.
        return math.nan
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


def _reduce(op: str, values: list[float], param: float | None) -> float:
    """One group's value of an aggregation other than topk and bottomk (param: quantile's)."""
    if op == "sum":
        # Most groups hold one or two values (a rate per series): their exact sum is one
        # rounded addition, as fsum would give it (`+ 0.0`: fsum's and sum's zero is never
        # negative). A sum that is not finite goes the general way (fsum raises on overflow).
        n = len(values)
        if n == 1:
            return values[0] + 0.0
        if n == 2:
            total = values[0] + values[1]
            if total - total == 0.0:
                return total + 0.0
        return math.fsum(values) if _all_finite(values) else sum(values)
    if op == "avg":
        return _mean(values) if _all_finite(values) else (sum(values) / len(values))
    if op == "min":
        return values[0] if len(values) == 1 else _nan_min(values)
    if op == "max":
        return values[0] if len(values) == 1 else _nan_max(values)
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


def _all_finite(values: list[float]) -> bool:
    return all(v - v == 0.0 for v in values)  # inf - inf and NaN - NaN are NaN


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
