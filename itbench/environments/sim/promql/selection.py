"""The store side of the PromQL engine: the series a selector selects, their sample windows, and
rate, increase and delta (alone or aggregated) straight over the stored samples, with the
caches by identity that keep re-reading an unchanged store cheap."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from operator import is_
from typing import Any

import promql_parser as pp

from itbench.environments.sim.promql.limits import PromQLError
from itbench.environments.sim.promql.syntax import _matcher_predicate
from itbench.environments.sim.promql.values import (
    NAME,
    Labels,
    _Context,
    _drop_name,
    _extrapolate,
    _extrapolate_change,
    _Matrix,
    _RangeSeries,
    _reduce,
    _Vector,
)
from itbench.environments.sim.series import Series, SeriesStore, is_stale

_MAX_PLANS = 512
"""The most group plans (see `_SeriesSelector._aggregate_rates`) an engine keeps."""
_FUSED_AGGREGATIONS = frozenset({"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar"})
"""Aggregations without a parameter, which `_aggregate_rates` may compute from the rates."""


class _SeriesSelector:
    """Selects a store's series and reads their samples for :class:`PromQLEngine`, keeping what
    it found by identity so that an unchanged store is not read twice."""

    def __init__(self, store: SeriesStore, lookback_seconds: float = 300.0) -> None:
        """Read series from a store.

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
        # Per selector (by identity, kept alive here): its metric name, the key of its matchers
        # in `_matches` (None without matchers) and its matchers, read from the syntax tree once.
        self._selectors: dict[int, tuple[Any, str | None, tuple[Any, ...] | None, list[Any]]] = {}

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
        entry = self._selectors.get(id(selector))
        if entry is None or entry[0] is not selector:
            matchers = selector.matchers
            if matchers.or_matchers:
                raise PromQLError(
                    f"'or' inside a selector ({selector}) is not supported in query {ctx.query!r}"
                )
            listed = list(matchers.matchers)
            name = selector.name
            for matcher in listed:
                if name is None and matcher.name == NAME and matcher.op == pp.MatchOp.Equal:
                    name = matcher.value
            key = (name, *((m.name, str(m.op), m.value) for m in listed)) if listed else None
            entry = (selector, name, key, listed)
            if len(self._selectors) >= _MAX_PLANS:
                self._selectors.clear()  # as the plans: an agent's queries keep no memory
            self._selectors[id(selector)] = entry
        _, name, cache_key, listed = entry
        candidates = self._store.select(name)
        if not isinstance(candidates, list):
            candidates = list(candidates)
        if cache_key is None:
            return candidates
        cached = self._matches.get(cache_key)
        if cached is not None and (
            cached[0] is candidates  # a store that hands out an unchanged selection as such
            or (len(cached[0]) == len(candidates) and all(map(is_, cached[0], candidates)))
        ):
            return cached[1]
        predicates = [(matcher.name, _matcher_predicate(matcher, ctx.query)) for matcher in listed]
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

    # Rates straight over the stored samples ---------------------------------------------------

    def _aggregate_rates(self, op: str, expr: Any, ctx: _Context) -> _Vector | None:
        """`op [by (labels)] (rate|increase|delta(selector[range]))` straight from the rates,
        without building the intermediate vector; None for any other aggregation.

        The same groups, values and order as aggregating the evaluated rates: the groups come
        in the order of their first series, with the grouping of the generic path, and each
        group's values are reduced in selection order.
        """
        grouped = self._grouped_rates(op, expr, ctx)
        if grouped is None:
            return None
        _, groupings, first_seen, members = grouped
        return _Vector(
            [(groupings[i], _reduce(op, members[i], None)) for i in first_seen],
            interned=True,
        )

    def _grouped_rates(
        self, op: str, expr: Any, ctx: _Context
    ) -> tuple[Any, list[Labels], list[int], list[list[float]]] | None:
        """What `_aggregate_rates` aggregates: the group plan (the same object while the
        selection is unchanged), every group's labels, the groups that have rates in the order
        of their first series with one, and each group's rates; None for any other
        aggregation."""
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
        return plan, groupings, first_seen, members

    def _group_of(self, labels: Labels, order: tuple[str, ...]) -> tuple[Any, Labels]:
        """The group key of a sample's labels under `by (order)` and the group's labels (one
        object per key: see `_Vector.interned`), as the generic aggregation keys them."""
        found: list[str | None] = []
        grouping: Labels = {}
        complete = True
        for n in order:
            value = labels.get(n)
            found.append(value)
            if value is None:
                complete = False
            else:
                grouping[n] = value
        key: Any = found[0] if complete and len(order) == 1 else tuple(found)
        interned = self._groupings.setdefault((order, key), grouping)
        return key, interned

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
