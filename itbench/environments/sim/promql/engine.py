"""The PromQL engine: evaluates a parsed query's tree (operators, aggregations, functions) over
the series its selectors read, and answers as Prometheus' HTTP API does."""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from itertools import pairwise
from operator import itemgetter
from typing import Any

import promql_parser as pp

from itbench.environments.sim.promql import limits as query_limits
from itbench.environments.sim.promql.limits import _AGGREGATION_WORDS, PromQLError, QueryLimitError
from itbench.environments.sim.promql.selection import _SeriesSelector
from itbench.environments.sim.promql.syntax import _instant_names, _parse_cached, _regex
from itbench.environments.sim.promql.values import (
    _ARITHMETIC,
    _COMPARISONS,
    _ELEMENTWISE,
    _OVER_TIME,
    _SET_OPS,
    NAME,
    LabelKey,
    Labels,
    _arith,
    _bucket_of,
    _bucket_quantile,
    _Context,
    _drop_name,
    _expand,
    _extrapolated_rate,
    _instant_delta,
    _key,
    _linear_regression,
    _Matrix,
    _quantile,
    _reduce,
    _round,
    _Scalar,
    _set_label,
    _String,
    _Value,
    _Vector,
    format_value,
)
from itbench.environments.sim.series import SeriesStore

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

_AGGREGATIONS = _AGGREGATION_WORDS - {"limitk", "limit_ratio"}
"""The aggregations the engine evaluates: every PromQL aggregation but the experimental ones."""
_MAX_LAYOUTS = 512
"""The most histogram layouts (see `PromQLEngine._histogram_layout`) an engine keeps."""


class _Layout:
    """How the groups of a `sum by (..., le)` plan make histograms (see
    `PromQLEngine._histogram_layout`)."""

    histogram_of: list[int]
    """Per group: the index of its histogram, -1 when its `le` is not a number."""
    uppers: list[float]
    """Per group: its bucket's upper bound."""
    labels: list[Labels]
    """Per histogram: its labels (the group's without `le`)."""
    buckets: list[list[int]]
    """Per histogram: its groups by ascending bound."""

    def __init__(
        self,
        histogram_of: list[int],
        uppers: list[float],
        labels: list[Labels],
        buckets: list[list[int]],
    ) -> None:
        self.histogram_of = histogram_of
        self.uppers = uppers
        self.labels = labels
        self.buckets = buckets


def _layout_quantiles(
    q: float, layout: _Layout, first_seen: list[int], sums: list[float]
) -> _Vector:
    """histogram_quantile over laid-out group sums: the histograms in the order of their first
    bucket with a value, each from its buckets with a value, as the general path has them."""
    histogram_of = layout.histogram_of
    value_of: list[float | None] = [None] * len(histogram_of)
    order: list[int] = []
    seen = [False] * len(layout.labels)
    for i, v in zip(first_seen, sums, strict=True):
        h = histogram_of[i]
        if h < 0:
            continue
        value_of[i] = v
        if not seen[h]:
            seen[h] = True
            order.append(h)
    uppers = layout.uppers
    out: list[tuple[Labels, float]] = []
    for h in order:
        buckets: list[tuple[float, float]] = []
        for i in layout.buckets[h]:
            count = value_of[i]
            if count is not None:
                buckets.append((uppers[i], count))
        out.append((layout.labels[h], _bucket_quantile(q, buckets, ordered=True)))
    return _Vector(out)


class PromQLEngine(_SeriesSelector):
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
        super().__init__(store, lookback_seconds)
        # Answers of instant-only queries (see `_instant_names`) by query: (time, samples).
        self._answers: dict[str, tuple[float, list[tuple[Labels, float]]]] = {}
        # histogram_quantile's reading of an interned label set: (labels, upper bound or None,
        # labels without le and name, their key), by identity.
        self._buckets: dict[int, tuple[Labels, float | None, Labels, LabelKey]] = {}
        # histogram_quantile's layout of a group plan by the plan's selector: the plan's groups,
        # the selector (kept alive here) and the layout.
        self._layouts: dict[int, tuple[list[Labels], Any, _Layout | None]] = {}

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
        limits = query_limits.DEFAULT_LIMITS
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
        if not isinstance(value, _Vector) or len(value.samples) < 2 or value.unique:
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
        # One-to-one results are unique: a result's labels are its match signature (with the
        # metric name where it was kept, under a signature seen once), unless the signature has
        # the metric name (`on (__name__, ...)`) and the result dropped it.
        return _Vector(out, unique=one_to_one and not (on and NAME in names))

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
        inner = args[1]
        while isinstance(inner, pp.ParenExpr):
            inner = inner.expr
        grouped = (
            self._grouped_rates("sum", inner, ctx)
            if isinstance(inner, pp.AggregateExpr) and str(inner.op) == "sum"
            else None
        )
        if grouped is None:
            vector = self._vector_arg(args[1], ctx, "the buckets of histogram_quantile")
        else:
            # `sum by (..., le) (rate(buckets[range]))`, as alerting rules write it: the sums
            # are those `_aggregate_rates` gives, and the histograms are laid out once per
            # group plan.
            plan, groupings, first_seen, members = grouped
            sums = [_reduce("sum", members[i], None) for i in first_seen]
            layout = self._histogram_layout(plan, groupings)
            if layout is not None:
                return _layout_quantiles(q, layout, first_seen, sums)
            vector = _Vector(
                [(groupings[i], v) for i, v in zip(first_seen, sums, strict=True)], interned=True
            )
        groups: dict[LabelKey, tuple[Labels, list[tuple[float, float]]]] = {}
        interned = vector.interned
        for labels, v in vector.samples:
            upper, rest, key = self._bucket_reading(labels) if interned else _bucket_of(labels)
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

    def _bucket_reading(self, labels: Labels) -> tuple[float | None, Labels, LabelKey]:
        """`_bucket_of` an interned label set, read once per label set (see `_buckets`)."""
        entry = self._buckets.get(id(labels))
        if entry is None or entry[0] is not labels:
            entry = (labels, *_bucket_of(labels))
            self._buckets[id(labels)] = entry
        return entry[1], entry[2], entry[3]

    def _histogram_layout(self, plan: Any, groupings: list[Labels]) -> _Layout | None:
        """Where each group of a plan goes in histogram_quantile: its histogram (the group's
        labels without `le`) and upper bound, and each histogram's buckets by bound (kept while
        the plan is). None when two buckets of one histogram have the same bound, or one is NaN
        (the general path sorts those in the order their series come)."""
        # By the plan's selector (one per query text): a rebuilt plan replaces the last layout.
        # The plan's list of groups tells its plan (a new list for a new plan; the plan tuple
        # itself may be a new object each time on the compiled build).
        selector = plan[0]
        entry = self._layouts.get(id(selector))
        if entry is not None and entry[0] is groupings:
            return entry[2]
        histogram_of: list[int] = []
        uppers: list[float] = []
        labels_of: list[Labels] = []
        indexes: dict[LabelKey, int] = {}
        buckets: list[list[int]] = []
        for i, grouping in enumerate(groupings):
            upper, rest, key = self._bucket_reading(grouping)  # groups' label sets are interned
            if upper is None:
                histogram_of.append(-1)
                uppers.append(math.nan)
                continue
            h = indexes.get(key)
            if h is None:
                h = indexes[key] = len(labels_of)
                labels_of.append(rest)
                buckets.append([])
            histogram_of.append(h)
            uppers.append(upper)
            buckets[h].append(i)
        layout: _Layout | None = _Layout(histogram_of, uppers, labels_of, [])
        for members in buckets:
            members.sort(key=uppers.__getitem__)
            bounds = [uppers[i] for i in members]
            if any(a == b for a, b in pairwise(bounds)) or any(b != b for b in bounds):
                layout = None  # tied or NaN bounds: their order is the series' order
                break
            assert layout is not None
            layout.buckets.append(members)
        if len(self._layouts) >= _MAX_LAYOUTS:
            self._layouts.clear()
        self._layouts[id(selector)] = (groupings, selector, layout)
        return layout

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
