"""PromQL engine: every supported construct checked against values computed by hand."""

from __future__ import annotations

import itertools
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from itbench.environments.sim.promql import PromQLEngine, PromQLError, format_value
from itbench.environments.sim.promql.syntax import _MEMO_VALUES, _regex_matcher
from itbench.environments.sim.promql.values import _reduce
from itbench.environments.sim.regex import compile_regex
from itbench.environments.sim.series import STALE_NAN, MemorySeriesStore, Series, is_stale


def vector(engine: PromQLEngine, query: str, t: float) -> dict[tuple[tuple[str, str], ...], float]:
    """The instant vector as {sorted label items: value}."""
    return {tuple(sorted(labels.items())): v for labels, v in engine.instant_vector(query, t)}


def single(engine: PromQLEngine, query: str, t: float) -> float:
    """The value of a query that must return exactly one sample."""
    samples = engine.instant_vector(query, t)
    assert len(samples) == 1, samples
    return samples[0][1]


@pytest.fixture
def counter_engine() -> PromQLEngine:
    """http_requests_total rising 1/s (job=api) and 2/s (job=web), scraped every 15 s for 10 min."""
    store = MemorySeriesStore()
    for i in range(41):
        t = 15.0 * i
        store.append({"__name__": "http_requests_total", "job": "api", "instance": "a"}, t, t)
        store.append({"__name__": "http_requests_total", "job": "web", "instance": "b"}, t, 2 * t)
    return PromQLEngine(store)


@pytest.fixture
def shop() -> PromQLEngine:
    """A small shop: per-service gauges, a reset counter, a gauge and latency histograms."""
    store = MemorySeriesStore()
    for service, value in (("frontend", 5.0), ("cart", 3.0), ("cartservice", 4.0), ("ad", 1.0)):
        for pod in ("p0", "p1"):
            labels = {
                "__name__": "up_pods",
                "service_name": service,
                "pod": f"{service}-{pod}",
                "namespace": "otel-demo",
            }
            store.append(labels, 60.0, value + (1.0 if pod == "p1" else 0.0))
    # A counter that resets between t=30 and t=45.
    for t, v in ((0.0, 10.0), (15.0, 20.0), (30.0, 30.0), (45.0, 5.0), (60.0, 15.0)):
        store.append({"__name__": "resets_total", "job": "x"}, t, v)
    # A gauge.
    for t, v in ((0.0, 10.0), (15.0, 4.0), (30.0, 7.0), (45.0, 1.0), (60.0, 3.0)):
        store.append({"__name__": "queue_depth", "job": "x"}, t, v)
    # Cumulative latency buckets for two services.
    for service, scale in (("frontend", 1.0), ("cart", 2.0)):
        for le, count in (("0.1", 10.0), ("0.5", 30.0), ("1", 40.0), ("+Inf", 50.0)):
            labels = {"__name__": "latency_bucket", "service_name": service, "le": le}
            store.append(labels, 60.0, count * scale)
    return PromQLEngine(store)


# Rates -------------------------------------------------------------------------------------------


def test_rate_of_counter_rising_one_per_second_is_one(counter_engine: PromQLEngine) -> None:
    result = vector(counter_engine, "rate(http_requests_total[1m])", 600)
    assert result == {
        (("instance", "a"), ("job", "api")): 1.0,
        (("instance", "b"), ("job", "web")): 2.0,
    }


def test_rate_between_scrapes_extrapolates_to_the_window(counter_engine: PromQLEngine) -> None:
    # [550, 610] holds samples 555..600: 45 s sampled, extrapolated by 5 s and 10 s to 60 s.
    assert single(counter_engine, 'increase(http_requests_total{job="api"}[1m])', 610) == 60.0
    assert single(counter_engine, 'rate(http_requests_total{job="api"}[1m])', 610) == pytest.approx(
        1.0
    )


def test_increase_extrapolates_half_a_gap_when_series_starts_inside_window() -> None:
    store = MemorySeriesStore()
    for t, v in ((630.0, 100.0), (645.0, 115.0), (660.0, 130.0)):
        store.append({"__name__": "c_total"}, t, v)
    engine = PromQLEngine(store)
    # 30 sampled + 7.5 (half the 15 s gap; start is 30 s away, beyond 1.1 gaps) + 0 at the end.
    assert single(engine, "increase(c_total[1m])", 660) == 37.5


def test_increase_extrapolation_stops_at_counter_zero_point() -> None:
    store = MemorySeriesStore()
    for t, v in ((630.0, 5.0), (645.0, 20.0), (660.0, 35.0)):
        store.append({"__name__": "c_total"}, t, v)
    engine = PromQLEngine(store)
    # The counter would reach zero 5 s before the first sample: extrapolate only 5 s back.
    assert single(engine, "increase(c_total[1m])", 660) == 35.0
    assert single(engine, "rate(c_total[1m])", 660) == pytest.approx(35.0 / 60.0)


def test_increase_adds_the_value_before_a_counter_reset(shop: PromQLEngine) -> None:
    # 10 -> 30 (+20), reset to 5 (+5), -> 15 (+10): 35 over exactly the 60 s window.
    assert single(shop, "increase(resets_total[1m])", 60) == 35.0
    assert single(shop, "rate(resets_total[1m])", 60) == pytest.approx(35.0 / 60.0)
    assert single(shop, "resets(resets_total[1m])", 60) == 1.0


def test_irate_uses_last_two_samples_and_handles_reset(shop: PromQLEngine) -> None:
    assert single(shop, "irate(resets_total[1m])", 60) == pytest.approx(10.0 / 15.0)
    assert single(shop, "irate(resets_total[1m])", 45) == pytest.approx(5.0 / 15.0)


def test_delta_and_idelta_of_gauge(shop: PromQLEngine) -> None:
    assert single(shop, "delta(queue_depth[1m])", 60) == -7.0
    assert single(shop, "idelta(queue_depth[1m])", 60) == 2.0
    assert single(shop, "changes(queue_depth[1m])", 60) == 4.0


def test_rate_needs_two_samples() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "c_total"}, 60.0, 5.0)
    assert PromQLEngine(store).instant_vector("rate(c_total[1m])", 60) == []


def test_rate_drops_metric_name(counter_engine: PromQLEngine) -> None:
    for labels, _ in counter_engine.instant_vector("rate(http_requests_total[1m])", 600):
        assert "__name__" not in labels


# Over time ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("avg_over_time", 5.0),
        ("min_over_time", 1.0),
        ("max_over_time", 10.0),
        ("sum_over_time", 25.0),
        ("count_over_time", 5.0),
        ("last_over_time", 3.0),
    ],
)
def test_over_time_functions(shop: PromQLEngine, function: str, expected: float) -> None:
    assert single(shop, f"{function}(queue_depth[1m])", 60) == expected


def test_quantile_over_time_interpolates(shop: PromQLEngine) -> None:
    # Sorted window: 1, 3, 4, 7, 10.
    assert single(shop, "quantile_over_time(0.5, queue_depth[1m])", 60) == 4.0
    assert single(shop, "quantile_over_time(0.3, queue_depth[1m])", 60) == pytest.approx(3.2)


def test_range_window_is_closed_at_both_ends(shop: PromQLEngine) -> None:
    assert single(shop, "count_over_time(queue_depth[30s])", 60) == 3.0


def test_last_over_time_keeps_metric_name_others_drop_it(shop: PromQLEngine) -> None:
    last = shop.instant_vector("last_over_time(queue_depth[1m])", 60)
    avg = shop.instant_vector("avg_over_time(queue_depth[1m])", 60)
    assert last[0][0]["__name__"] == "queue_depth"
    assert "__name__" not in avg[0][0]


# Selectors ---------------------------------------------------------------------------------------


def test_equality_and_inequality_matchers(shop: PromQLEngine) -> None:
    cart = vector(shop, 'up_pods{service_name="cart"}', 60)
    assert sorted(dict(k)["pod"] for k in cart) == ["cart-p0", "cart-p1"]
    not_cart = vector(shop, 'up_pods{service_name!="cart"}', 60)
    assert len(not_cart) == 6
    assert all(dict(k)["service_name"] != "cart" for k in not_cart)


def test_regex_matchers_are_anchored(shop: PromQLEngine) -> None:
    exact = vector(shop, 'up_pods{service_name=~"cart"}', 60)
    assert {dict(k)["service_name"] for k in exact} == {"cart"}
    prefix = vector(shop, 'up_pods{service_name=~"cart.*"}', 60)
    assert {dict(k)["service_name"] for k in prefix} == {"cart", "cartservice"}
    negated = vector(shop, 'up_pods{service_name!~"cart.*|ad"}', 60)
    assert {dict(k)["service_name"] for k in negated} == {"frontend"}


def test_regexes_follow_go_re2_linear_time_and_no_lookaround() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "info", "pod": "a" * 20_000}, 60.0, 1.0)
    engine = PromQLEngine(store)
    # Backtracking would take ages on this pattern; RE2 answers at once.
    assert engine.instant_vector('info{pod=~"(.*)*(.*)*x"}', 60) == []
    assert len(engine.instant_vector('info{pod=~"(a*)*"}', 60)) == 1
    with pytest.raises(PromQLError, match="regex"):
        engine.instant_vector('info{pod=~"(?=a)a"}', 60)  # Prometheus refuses lookahead too
    with pytest.raises(PromQLError, match="invalid regular expression"):
        # label_replace's pattern is a string argument, compiled by the engine itself.
        engine.instant_vector('label_replace(info, "x", "$1", "pod", "(?=a)(a)")', 60)


def test_name_matcher_and_missing_label_match_empty(shop: PromQLEngine) -> None:
    by_name = vector(shop, '{__name__="queue_depth"}', 60)
    assert list(by_name.values()) == [3.0]
    by_regex = vector(shop, '{__name__=~"queue_.*|resets_total", job="x"}', 60)
    assert sorted(by_regex.values()) == [3.0, 15.0]
    missing = vector(shop, 'queue_depth{zone=""}', 60)
    assert list(missing.values()) == [3.0]


def test_lookback_keeps_sample_five_minutes_then_goes_stale(shop: PromQLEngine) -> None:
    assert single(shop, "queue_depth", 360) == 3.0
    assert shop.instant_vector("queue_depth", 360.5) == []
    assert shop.instant_vector("queue_depth", -1) == []


def test_staleness_marker_hides_series_until_next_sample() -> None:
    store = MemorySeriesStore()
    labels = {"__name__": "kube_pod_status_ready", "pod": "cart-0"}
    for t in (0.0, 15.0, 30.0):
        store.append(labels, t, 1.0)
    store.mark_stale(labels, 45.0)
    store.mark_stale(labels, 50.0)
    store.mark_stale({"__name__": "unknown"}, 50.0)
    engine = PromQLEngine(store)
    assert single(engine, "kube_pod_status_ready", 44) == 1.0
    assert engine.instant_vector("kube_pod_status_ready", 45) == []
    assert engine.instant_vector("kube_pod_status_ready", 200) == []
    assert single(engine, "count_over_time(kube_pod_status_ready[1m])", 60) == 3.0
    assert engine.instant_vector("count_over_time(kube_pod_status_ready[10s])", 60) == []
    store.append(labels, 90.0, 0.0)
    assert single(engine, "kube_pod_status_ready", 100) == 0.0
    assert [len(s.values) for s in store.select("kube_pod_status_ready")] == [5]
    assert len(store) == 1


def test_custom_lookback() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "g"}, 0.0, 1.0)
    engine = PromQLEngine(store, lookback_seconds=30.0)
    assert single(engine, "g", 30) == 1.0
    assert engine.instant_vector("g", 31) == []


def test_offset_shifts_evaluation_back(shop: PromQLEngine) -> None:
    assert single(shop, "queue_depth offset 30s", 60) == 7.0
    assert single(shop, "delta(queue_depth[30s] offset 30s)", 60) == -3.0


def test_at_modifier_pins_evaluation_time(shop: PromQLEngine) -> None:
    assert single(shop, "queue_depth @ 15", 60) == 4.0
    data = shop.range("queue_depth @ end()", 0, 60, 30)
    assert [v for _, v in data["result"][0]["values"]] == ["3", "3", "3"]


# Aggregations ------------------------------------------------------------------------------------


def test_sum_by_and_without(shop: PromQLEngine) -> None:
    by = vector(shop, "sum by (service_name) (up_pods)", 60)
    assert by == {
        (("service_name", "frontend"),): 11.0,
        (("service_name", "cart"),): 7.0,
        (("service_name", "cartservice"),): 9.0,
        (("service_name", "ad"),): 3.0,
    }
    without = vector(shop, "sum without (pod) (up_pods)", 60)
    assert without[(("namespace", "otel-demo"), ("service_name", "cart"))] == 7.0
    assert len(without) == 4
    assert single(shop, "sum(up_pods)", 60) == 30.0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('avg(up_pods{service_name="cart"})', 3.5),
        ('min(up_pods{service_name=~"cart|ad"})', 1.0),
        ('max(up_pods{service_name=~"cart|ad"})', 4.0),
        ("count(up_pods)", 8.0),
        ('group(up_pods{service_name="ad"})', 1.0),
        ('stddev(up_pods{service_name="cart"})', 0.5),
        ('stdvar(up_pods{service_name="cart"})', 0.25),
        ('quantile(0.5, up_pods{service_name=~"cart|ad"})', 2.5),
    ],
)
def test_aggregations(shop: PromQLEngine, query: str, expected: float) -> None:
    assert single(shop, query, 60) == pytest.approx(expected)


def _reference_sum(values: list[float]) -> float:
    return math.fsum(values) if all(map(math.isfinite, values)) else sum(values)


@pytest.mark.parametrize(
    "values",
    [
        [-0.0],
        [0.0],
        [-0.0, -0.0],
        [-0.0, 2.5],
        [0.1, 0.2],
        [1e16, 1.0],
        [1.5, -1.5],
        [math.inf],
        [math.nan],
        [math.inf, -math.inf],
        [math.inf, 1.0],
        [math.nan, 1.0],
        [0.1, 0.2, 0.3],
        [1e16, 1.0, -1e16],
        [1.0, math.inf, 2.0],
    ],
)
def test_sums_of_one_or_two_values_are_fsums(values: list[float]) -> None:
    # A group's sum is fsum over finite values (sum otherwise): the short path for one or two
    # values gives the same float, down to the sign of zero.
    got = _reduce("sum", values, None)
    want = _reference_sum(values)
    assert repr(got) == repr(want)
    for op, reference in (("min", min), ("max", max)):
        if len(values) == 1:
            assert repr(_reduce(op, values, None)) == repr(reference(values))


def test_a_sum_that_overflows_fails_as_fsum_does() -> None:
    with pytest.raises(OverflowError):
        _reduce("sum", [1e308, 1e308], None)
    with pytest.raises(OverflowError):
        _reference_sum([1e308, 1e308])


def test_topk_and_bottomk_keep_series_labels_sorted(shop: PromQLEngine) -> None:
    top = shop.instant_vector("topk(2, up_pods)", 60)
    assert [(labels["pod"], v) for labels, v in top] == [("frontend-p1", 6.0), ("frontend-p0", 5.0)]
    assert top[0][0]["__name__"] == "up_pods"
    bottom = shop.instant_vector("bottomk by (service_name) (1, up_pods)", 60)
    assert sorted(labels["pod"] for labels, _ in bottom) == [
        "ad-p0",
        "cart-p0",
        "cartservice-p0",
        "frontend-p0",
    ]


def test_count_by_on_rate_result(counter_engine: PromQLEngine) -> None:
    assert vector(counter_engine, "count by (job) (rate(http_requests_total[5m]) > 1.5)", 600) == {
        (("job", "web"),): 1.0
    }


# Histograms --------------------------------------------------------------------------------------


def test_histogram_quantile_interpolates_within_bucket(shop: PromQLEngine) -> None:
    # frontend buckets: <=0.1: 10, <=0.5: 30, <=1: 40, +Inf: 50.
    result = vector(shop, "histogram_quantile(0.5, latency_bucket)", 60)
    assert result[(("service_name", "frontend"),)] == pytest.approx(0.4)
    assert result[(("service_name", "cart"),)] == pytest.approx(0.4)
    low = 'histogram_quantile(0.1, latency_bucket{service_name="frontend"})'
    assert single(shop, low, 60) == pytest.approx(0.05)


def test_histogram_quantile_in_inf_bucket_returns_highest_finite_bound(shop: PromQLEngine) -> None:
    query = 'histogram_quantile(0.9, latency_bucket{service_name="frontend"})'
    assert single(shop, query, 60) == 1.0


def test_histogram_quantile_aggregated_by_le(shop: PromQLEngine) -> None:
    # Summed buckets: 30, 90, 120, 150; rank 0.75*150 = 112.5 in (0.5, 1]: 0.5 + 0.5 * 22.5/30.
    query = "histogram_quantile(0.75, sum by (le) (latency_bucket))"
    assert single(shop, query, 60) == pytest.approx(0.875)


def _rated_histograms(seed: int) -> MemorySeriesStore:
    """Latency buckets of three services and two routes, counted up at random every 15 s; some
    series start late, one service has a bucket that is not a number and one lacks +Inf; with
    an odd seed, one also has two buckets with the same bound written differently, and with
    every third seed one has a bucket bounded by NaN."""
    rng = random.Random(seed)
    store = MemorySeriesStore()
    bounds = ["0.1", "0.5", "1", "5", "+Inf"]
    layout = {
        ("frontend", "r1"): bounds,
        ("frontend", "r2"): [*bounds, "NaN"] if seed % 3 == 2 else bounds,
        ("cart", "r1"): [*bounds, "fast"],
        ("ad", "r1"): bounds[:-1],
        ("ad", "r2"): [*bounds, "1.0"] if seed % 2 else bounds,
    }
    counts: dict[tuple[str, str, str], float] = {}
    starts = {key: rng.choice([0, 0, 0, 4, 9]) for key in layout}
    for i in range(24):
        t = 15.0 * i
        for (service, route), les in layout.items():
            if i < starts[(service, route)]:
                continue
            total = 0.0
            for le in les:
                total += rng.choice([0.0, 0.0, 1.0, 2.5, 7.0])
                key = (service, route, le)
                counts[key] = max(counts.get(key, 0.0), total) + rng.choice([0.0, 1.0])
                if service == "cart" and i == 14:
                    counts[key] = 0.0  # a counter reset
                labels = {"__name__": "lat_bucket", "service": service, "route": route, "le": le}
                store.append(labels, t, counts[key])
    return store


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "grouping", ["le, service", "service, le", "le", "le, route", "route, le, service"]
)
def test_histogram_quantile_of_summed_rates_matches_the_general_path(
    seed: int, grouping: str
) -> None:
    # `sum by (..., le) (rate(...))` under histogram_quantile has its own path; `* 1` (which
    # changes no value) sends the same query down the general one.
    engine = PromQLEngine(_rated_histograms(seed))
    for q in (0.5, 0.95, 0.0, 1.0):
        planned = f"histogram_quantile({q}, sum by ({grouping}) (rate(lat_bucket[2m])))"
        general = f"histogram_quantile({q}, sum by ({grouping}) (rate(lat_bucket[2m])) * 1)"
        for t in (30.0, 90.0, 150.0, 210.0, 240.0, 345.0):
            got = engine.instant_vector(planned, t)
            want = engine.instant_vector(general, t)
            assert repr(got) == repr(want), (planned, t)


@pytest.mark.parametrize(
    "query",
    [
        'sum by (service) (rate(lat_bucket{le="+Inf"}[2m])) / on (service) '
        'sum by (service) (rate(lat_bucket{le="1"}[2m]))',
        'rate(lat_bucket{le="0.5"}[2m]) / ignoring (le) rate(lat_bucket{le="5"}[2m])',
        'rate(lat_bucket{le="1"}[2m]) > 0.01 and on (service, route) '
        'rate(lat_bucket{le="+Inf"}[2m]) > 0.05',
        'lat_bucket{le="1"} unless on (service) lat_bucket{le="fast"}',
        'lat_bucket{le="0.1"} > 5 or lat_bucket{le="0.5"} > 5',
        'lat_bucket{le="1"} * on (service, route) group_left (le) '
        'max by (service, route, le) (lat_bucket{le="+Inf"})',
    ],
)
def test_vector_matching_is_the_same_at_every_evaluation(query: str) -> None:
    # An engine keeps plans and selections between evaluations; a fresh engine has none.
    store = _rated_histograms(0)
    engine = PromQLEngine(store)
    for t in (60.0, 120.0, 195.0, 300.0, 345.0):
        assert repr(engine.instant_vector(query, t)) == repr(
            PromQLEngine(store).instant_vector(query, t)
        )


@pytest.mark.interpreted
def test_histograms_are_laid_out_unless_two_buckets_share_a_bound() -> None:
    for seed, laid_out in ((0, True), (1, False)):
        engine = PromQLEngine(_rated_histograms(seed))
        query = "histogram_quantile(0.9, sum by (service, le) (rate(lat_bucket[2m])))"
        engine.instant_vector(query, 300.0)
        engine.instant_vector(query, 315.0)  # a rebuilt plan's layout replaces the last one
        layouts = list(engine._layouts.values())
        assert len(layouts) == 1
        assert (layouts[0][2] is not None) is laid_out


def test_histogram_quantile_zero_with_an_empty_lowest_bucket_is_nan() -> None:
    # Prometheus divides 0 by 0 there (NaN); the query neither fails nor invents a bound.
    store = MemorySeriesStore()
    for le, count in (("0.1", 0.0), ("1", 4.0), ("+Inf", 6.0)):
        store.append({"__name__": "h_bucket", "le": le}, 0.0, count)
    engine = PromQLEngine(store)
    assert math.isnan(single(engine, "histogram_quantile(0, h_bucket)", 0))
    assert single(engine, "histogram_quantile(0.5, h_bucket)", 0) == pytest.approx(0.775)


def test_histogram_quantile_without_inf_bucket_is_nan() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "h_bucket", "le": "1"}, 0.0, 5.0)
    store.append({"__name__": "h_bucket", "le": "2"}, 0.0, 10.0)
    assert math.isnan(single(PromQLEngine(store), "histogram_quantile(0.5, h_bucket)", 0))


def test_histogram_quantile_out_of_range_q(shop: PromQLEngine) -> None:
    sel = 'latency_bucket{service_name="cart"}'
    assert single(shop, f"histogram_quantile(1.5, {sel})", 60) == math.inf
    assert single(shop, f"histogram_quantile(-1, {sel})", 60) == -math.inf


# Binary operators --------------------------------------------------------------------------------


def test_vector_scalar_arithmetic_drops_name(shop: PromQLEngine) -> None:
    assert shop.instant_vector("queue_depth * 2 + 1", 60) == [({"job": "x"}, 7.0)]
    assert shop.instant_vector("10 - queue_depth", 60) == [({"job": "x"}, 7.0)]
    assert single(shop, "queue_depth % 2", 60) == 1.0
    assert single(shop, "queue_depth ^ 2", 60) == 9.0
    assert single(shop, "2 ^ 3 ^ 2", 60) == 512.0
    assert single(shop, "queue_depth / 0", 60) == math.inf
    assert math.isnan(single(shop, "(queue_depth - 3) / 0", 60))


def test_comparison_filters_and_keeps_name(shop: PromQLEngine) -> None:
    result = shop.instant_vector('up_pods{service_name="cart"} > 3', 60)
    assert result == [
        (
            {
                "__name__": "up_pods",
                "service_name": "cart",
                "pod": "cart-p1",
                "namespace": "otel-demo",
            },
            4.0,
        )
    ]
    # Scalar on the left: the vector's value is kept.
    assert single(shop, "5 > queue_depth", 60) == 3.0
    assert shop.instant_vector("queue_depth >= 4", 60) == []


@pytest.mark.parametrize(
    ("op", "expected"),
    [("==", 0.0), ("!=", 1.0), (">", 0.0), ("<", 1.0), (">=", 0.0), ("<=", 1.0)],
)
def test_bool_comparisons(shop: PromQLEngine, op: str, expected: float) -> None:
    assert shop.instant_vector(f"queue_depth {op} bool 4", 60) == [({"job": "x"}, expected)]


def test_scalar_scalar_operations() -> None:
    engine = PromQLEngine(MemorySeriesStore())
    assert engine.instant("1 + 2 * 3", 0) == {"resultType": "scalar", "result": [0.0, "7"]}
    assert engine.instant("(1 + 2) * 3", 0)["result"] == [0.0, "9"]
    assert engine.instant("2 > bool 1", 0)["result"] == [0.0, "1"]
    assert engine.instant("-(2 - 5)", 0)["result"] == [0.0, "3"]
    assert engine.instant("7 % 4", 0)["result"] == [0.0, "3"]
    assert engine.instant("1 / 0", 0)["result"] == [0.0, "+Inf"]


def test_vector_vector_one_to_one_matching(counter_engine: PromQLEngine) -> None:
    ratio = vector(counter_engine, "http_requests_total / http_requests_total", 600)
    assert ratio == {
        (("instance", "a"), ("job", "api")): 1.0,
        (("instance", "b"), ("job", "web")): 1.0,
    }
    on_job = counter_engine.instant_vector(
        "rate(http_requests_total[1m]) / on(job) sum by (job) (rate(http_requests_total[1m]))",
        600,
    )
    assert on_job == [({"job": "api"}, 1.0), ({"job": "web"}, 1.0)]
    ignoring = counter_engine.instant_vector(
        'http_requests_total{job="api"} - ignoring(instance, job) http_requests_total{job="web"}',
        600,
    )
    assert ignoring == [({}, -600.0)]


def test_vector_vector_comparison_filters_on_left_values(shop: PromQLEngine) -> None:
    carts = 'up_pods{service_name=~"cart.*"}'
    result = shop.instant_vector(f"{carts} > ({carts} * 0 + 3.5)", 60)
    assert [(labels["pod"], v) for labels, v in result] == [
        ("cart-p1", 4.0),
        ("cartservice-p0", 4.0),
        ("cartservice-p1", 5.0),
    ]
    assert all(labels["__name__"] == "up_pods" for labels, _ in result)
    flags = shop.instant_vector(f"{carts} > bool ({carts} * 0 + 3.5)", 60)
    assert [(labels["pod"], v) for labels, v in flags] == [
        ("cart-p0", 0.0),
        ("cart-p1", 1.0),
        ("cartservice-p0", 1.0),
        ("cartservice-p1", 1.0),
    ]
    assert all("__name__" not in labels for labels, _ in flags)


def test_group_left_and_group_right_match_many_to_one(shop: PromQLEngine) -> None:
    share = shop.instant_vector(
        'up_pods{service_name="cart"} / on(service_name) group_left '
        "sum by (service_name) (up_pods)",
        60,
    )
    assert [(labels["pod"], v) for labels, v in share] == [
        ("cart-p0", pytest.approx(3.0 / 7.0)),
        ("cart-p1", pytest.approx(4.0 / 7.0)),
    ]
    assert "__name__" not in share[0][0]
    assert share[0][0]["namespace"] == "otel-demo"
    right = shop.instant_vector(
        "sum by (service_name) (up_pods) / on(service_name) group_right "
        'up_pods{service_name="cart"}',
        60,
    )
    assert [(labels["pod"], v) for labels, v in right] == [
        ("cart-p0", pytest.approx(7.0 / 3.0)),
        ("cart-p1", pytest.approx(7.0 / 4.0)),
    ]
    copied = shop.instant_vector(
        'up_pods{pod="cart-p0"} * on(service_name) group_left(pod) up_pods{pod="cart-p1"}', 60
    )
    assert copied == [({"service_name": "cart", "pod": "cart-p1", "namespace": "otel-demo"}, 12.0)]


def test_unmatched_series_are_dropped(counter_engine: PromQLEngine) -> None:
    query = 'http_requests_total{job="api"} + http_requests_total{job="web"}'
    assert counter_engine.instant_vector(query, 600) == []


def test_set_operators(shop: PromQLEngine) -> None:
    carts = 'up_pods{service_name=~"cart.*"}'
    big = "up_pods > 3.5"
    anded = shop.instant_vector(f"{carts} and {big}", 60)
    assert sorted(labels["pod"] for labels, _ in anded) == [
        "cart-p1",
        "cartservice-p0",
        "cartservice-p1",
    ]
    unless = shop.instant_vector(f"{carts} unless {big}", 60)
    assert [labels["pod"] for labels, _ in unless] == ["cart-p0"]
    ored = shop.instant_vector(f'{carts} or up_pods{{service_name="ad"}}', 60)
    assert len(ored) == 6
    on_service = shop.instant_vector(
        'up_pods and on(service_name) (up_pods{pod="ad-p1"})',
        60,
    )
    assert sorted(labels["pod"] for labels, _ in on_service) == ["ad-p0", "ad-p1"]


def test_unary_minus_drops_name(shop: PromQLEngine) -> None:
    assert shop.instant_vector("-queue_depth", 60) == [({"job": "x"}, -3.0)]


# Functions ---------------------------------------------------------------------------------------


def test_elementwise_functions() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "g", "k": "neg"}, 0.0, -2.5)
    store.append({"__name__": "g", "k": "pos"}, 0.0, 7.26)
    engine = PromQLEngine(store)

    def values(query: str) -> dict[str, float]:
        return {labels["k"]: v for labels, v in engine.instant_vector(query, 0)}

    assert values("abs(g)") == {"neg": 2.5, "pos": 7.26}
    assert values("ceil(g)") == {"neg": -2.0, "pos": 8.0}
    assert values("floor(g)") == {"neg": -3.0, "pos": 7.0}
    assert values("round(g)") == {"neg": -2.0, "pos": 7.0}
    assert values("round(g, 0.5)") == {"neg": -2.5, "pos": 7.5}
    assert values("clamp_min(g, 0)") == {"neg": 0.0, "pos": 7.26}
    assert values("clamp_max(g, 5)") == {"neg": -2.5, "pos": 5.0}
    assert values("clamp(g, -1, 1)") == {"neg": -1.0, "pos": 1.0}
    assert values("sgn(g)") == {"neg": -1.0, "pos": 1.0}
    assert all("__name__" not in labels for labels, _ in engine.instant_vector("abs(g)", 0))


def test_absent_returns_equality_labels_only_when_missing(shop: PromQLEngine) -> None:
    assert shop.instant_vector('absent(nope{job="x", env=~"p.*"})', 60) == [({"job": "x"}, 1.0)]
    assert shop.instant_vector("absent(queue_depth)", 60) == []
    assert shop.instant_vector("absent(sum(nope))", 60) == [({}, 1.0)]
    assert shop.instant_vector('absent_over_time(nope{a="b"}[1m])', 60) == [({"a": "b"}, 1.0)]
    assert shop.instant_vector("absent_over_time(queue_depth[1m])", 60) == []


def test_scalar_vector_and_time(shop: PromQLEngine) -> None:
    assert shop.instant("scalar(queue_depth)", 60)["result"] == [60.0, "3"]
    assert shop.instant("scalar(up_pods)", 60)["result"] == [60.0, "NaN"]
    assert shop.instant_vector("vector(2) * 3", 60) == [({}, 6.0)]
    assert shop.instant("time()", 60) == {"resultType": "scalar", "result": [60.0, "60"]}
    assert single(shop, "queue_depth * scalar(queue_depth)", 60) == 9.0


def test_sort_desc_orders_the_result(shop: PromQLEngine) -> None:
    result = shop.instant_vector('sort_desc(up_pods{service_name=~"cart|ad"})', 60)
    assert [v for _, v in result] == [4.0, 3.0, 2.0, 1.0]


def test_label_replace_and_label_join(shop: PromQLEngine) -> None:
    replaced = shop.instant_vector(
        'label_replace(up_pods{pod="cart-p0"}, "svc", "${1}-x$$", "pod", "(.*)-p0")', 60
    )
    assert replaced[0][0]["svc"] == "cart-x$"
    assert replaced[0][0]["__name__"] == "up_pods"
    untouched = shop.instant_vector('label_replace(queue_depth, "job", "y", "job", "nomatch")', 60)
    assert untouched == [({"__name__": "queue_depth", "job": "x"}, 3.0)]
    removed = shop.instant_vector('label_replace(queue_depth, "job", "$2", "job", "(x)")', 60)
    assert removed == [({"__name__": "queue_depth"}, 3.0)]
    named = shop.instant_vector(
        'label_replace(queue_depth, "j", "$first-$1x", "job", "(?P<first>.)")', 60
    )
    assert named[0][0]["j"] == "x-"
    joined = shop.instant_vector('label_join(queue_depth, "both", "/", "job", "__name__")', 60)
    assert joined[0][0]["both"] == "x/queue_depth"


def test_count_values_counts_each_value(shop: PromQLEngine) -> None:
    result = shop.instant_vector('count_values("value", up_pods{service_name=~"cart.*"})', 60)
    assert sorted((labels["value"], v) for labels, v in result) == [
        ("3", 1.0),
        ("4", 2.0),
        ("5", 1.0),
    ]
    by = vector(shop, 'count_values by (service_name) ("v", up_pods{service_name="cart"})', 60)
    assert by == {
        (("service_name", "cart"), ("v", "3")): 1.0,
        (("service_name", "cart"), ("v", "4")): 1.0,
    }


def test_deriv_and_predict_linear_fit_least_squares(shop: PromQLEngine) -> None:
    # Points (0,10) (15,4) (30,7) (45,1) (60,3): slope = -255 / 2250.
    assert single(shop, "deriv(queue_depth[1m])", 60) == pytest.approx(-255.0 / 2250.0)
    # Fitted value at t=60 is 1.6; 60 s further: 1.6 - 6.8.
    assert single(shop, "predict_linear(queue_depth[1m], 60)", 60) == pytest.approx(-5.2)
    assert single(shop, "deriv(resets_total[15s])", 60) == pytest.approx(10.0 / 15.0)


# Result shapes -----------------------------------------------------------------------------------


def test_instant_result_matches_prometheus_api_shape(shop: PromQLEngine) -> None:
    assert shop.instant("queue_depth", 60) == {
        "resultType": "vector",
        "result": [{"metric": {"__name__": "queue_depth", "job": "x"}, "value": [60.0, "3"]}],
    }
    assert shop.instant('"hello"', 60) == {"resultType": "string", "result": [60.0, "hello"]}
    matrix = shop.instant("queue_depth[30s]", 60)
    assert matrix == {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "queue_depth", "job": "x"},
                "values": [[30.0, "7"], [45.0, "1"], [60.0, "3"]],
            }
        ],
    }


def test_range_query_evaluates_each_step(counter_engine: PromQLEngine) -> None:
    data = counter_engine.range('rate(http_requests_total{job="web"}[1m])', 300, 420, 60)
    assert data == {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"instance": "b", "job": "web"},
                "values": [[300.0, "2"], [360.0, "2"], [420.0, "2"]],
            }
        ],
    }
    scalar = counter_engine.range("time()", 0, 30, 15)
    assert scalar["result"] == [{"metric": {}, "values": [[0.0, "0"], [15.0, "15"], [30.0, "30"]]}]


def test_range_query_omits_steps_without_data(shop: PromQLEngine) -> None:
    data = shop.range("queue_depth", 300, 420, 60)
    assert data["result"][0]["values"] == [[300.0, "3"], [360.0, "3"]]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.25, "0.25"),
        (1e-05, "0.00001"),
        (1e21, "1000000000000000000000"),
        (-3.5, "-3.5"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_values_are_formatted_like_prometheus(value: float, text: str) -> None:
    assert format_value(value) == text


# Errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("rate(x[5m]", "cannot parse"),
        ("max_over_time(rate(x[1m])[5m:1m])", "subqueries"),
        ("timestamp(x)", "timestamp"),
        ('label_replace(x, "1a", "$1", "b", "(.*)")', "destination label"),
        ('count_values("1v", x)', "count_values"),
        ("holt_winters(x[5m], 0.5, 0.5)", "holt_winters"),
        ('{a="b" or c="d"}', "'or' inside a selector"),
        ("rate(x)", "cannot parse"),
        ('x{a=~"("}', "cannot parse"),
        ("day_of_week()", "day_of_week"),
    ],
)
def test_unsupported_or_invalid_queries_raise_named_errors(
    shop: PromQLEngine, query: str, fragment: str
) -> None:
    with pytest.raises(PromQLError, match=fragment.replace("(", r"\(")) as info:
        shop.instant(query, 60)
    assert query in str(info.value) or repr(query) in str(info.value)


def test_many_to_many_matching_is_an_error(shop: PromQLEngine) -> None:
    with pytest.raises(PromQLError, match="many-to-many"):
        shop.instant("queue_depth + ignoring(pod) up_pods", 60)
    with pytest.raises(PromQLError, match="group_left"):
        shop.instant("up_pods + ignoring(pod) group by (service_name, namespace) (up_pods)", 60)


def test_duplicate_label_sets_after_dropping_name_are_an_error(shop: PromQLEngine) -> None:
    with pytest.raises(PromQLError, match="same labelset"):
        shop.instant('abs({__name__=~"queue_depth|resets_total"})', 60)
    with pytest.raises(PromQLError, match="same labelset"):
        shop.instant('sum(rate({__name__=~"queue_depth|resets_total"}[1m]))', 60)
    assert single(shop, 'sum(last_over_time({__name__=~"queue_depth|resets_total"}[1m]))', 60) == 18


def test_matching_on_the_name_then_dropping_it_can_leave_equal_label_sets() -> None:
    store = MemorySeriesStore()
    for name in ("m1", "m2"):
        store.append({"__name__": name, "job": "x"}, 0.0, 2.0)
    engine = PromQLEngine(store)
    both = '{__name__=~"m1|m2"}'
    with pytest.raises(PromQLError, match="same labelset"):
        engine.instant(f"{both} * on (__name__, job) {both}", 0)
    with pytest.raises(PromQLError, match="same labelset"):
        engine.instant(f"{both} > bool on (__name__, job) {both}", 0)
    # Kept names keep them apart; ignoring the name matches each series with itself.
    assert len(engine.instant_vector(f"{both} >= on (__name__, job) {both}", 0)) == 2
    with pytest.raises(PromQLError, match="duplicate series"):
        engine.instant(f"{both} * ignoring (__name__) {both}", 0)


def test_range_query_rejects_range_vector_and_bad_step(shop: PromQLEngine) -> None:
    with pytest.raises(PromQLError, match="range vector"):
        shop.range("queue_depth[1m]", 0, 60, 15)
    with pytest.raises(PromQLError, match="step"):
        shop.range("queue_depth", 0, 60, 0)
    with pytest.raises(PromQLError, match="not an instant vector"):
        shop.instant_vector('"text"', 60)


def test_store_rejects_out_of_order_samples_and_replaces_same_time() -> None:
    store = MemorySeriesStore()
    store.append({"__name__": "g"}, 10.0, 1.0)
    store.append({"__name__": "g"}, 10.0, 2.0)
    with pytest.raises(ValueError, match="out-of-order"):
        store.append({"__name__": "g"}, 5.0, 3.0)
    with pytest.raises(ValueError, match="__name__"):
        store.append({"job": "x"}, 5.0, 3.0)
    assert [s.values for s in store.select("g")] == [[2.0]]
    assert len(store) == 1


# Cross-check against Prometheus itself ------------------------------------------------------------

ORACLE_QUERIES = [
    "rate(req_total[1m])",
    "rate(req_total[5m])",
    "irate(req_total[1m])",
    "increase(req_total[2m])",
    "delta(mem[2m])",
    "idelta(mem[1m])",
    "resets(req_total[5m])",
    "changes(mem[3m])",
    "sum by (service) (rate(req_total[5m]))",
    "sum without (code) (rate(req_total[5m]))",
    'sum by (service) (rate(req_total{code=~"5.."}[5m])) / sum by (service) (rate(req_total[5m]))',
    "min_over_time(mem[2m])",
    "max_over_time(mem[2m])",
    "sum_over_time(mem[2m])",
    "count_over_time(mem[2m])",
    "last_over_time(mem[2m])",
    "quantile_over_time(0.3, mem[2m])",
    "histogram_quantile(0.95, sum by (le, service) (rate(lat_bucket[5m])))",
    "histogram_quantile(0.5, rate(lat_bucket[2m]))",
    "mem offset 1m",
    "mem > 3",
    "3 < mem",
    "mem != bool 4",
    "mem * 2 - 1",
    "-mem",
    "mem % 3",
    "round(mem, 3)",
    "clamp(mem, 1, 4)",
    "avg by (service) (mem)",
    "topk(2, mem)",
    "bottomk(1, mem)",
    "quantile(0.5, mem)",
    'mem and on(service) req_total{code="200"}',
    "mem unless mem > 4",
    "mem or vector(1)",
    "req_total > on(service) group_left max by (service) (mem)",
    'req_total * on(service) group_left(pod) mem{pod=~"f1|c1"}',
    "max by (service) (mem) < bool on(service) group_right req_total",
    'absent(mem{service="x"})',
    'req_total{service!~"fr.*"}',
    "rate(req_total[90s] offset 30s)",
    "mem @ 300",
    "increase(req_total[3m] @ 600)",
    'absent_over_time(mem{pod="a1"}[20s])',
    'max_over_time(mem{pod="a1"}[1m])',
    "sum by (service) (mem) * on(service) group_left count by (service) (mem)",
    "mem * scalar(count(mem))",
    "vector(time()) - 100",
    "sgn(mem - 4) + abs(-mem)",
    "count by (code) (req_total > bool 50)",
    "sum(req_total) without (service)",
    "1 - mem / ignoring(pod) group_left max without (pod) (mem)",
    'label_replace(mem, "tier", "t-$1", "pod", "([a-z])[0-9]")',
    'label_join(req_total, "id", ":", "service", "code")',
    'count_values by (service) ("v", floor(mem / 3))',
    "deriv(req_total[2m])",
    "predict_linear(mem[2m], 60)",
]


def oracle_series() -> dict[str, list[float | None]]:
    """Series at 15 s slots from t=0 (None = no sample): counters with resets, gaps, buckets."""
    series: dict[str, list[float | None]] = {
        'req_total{service="frontend",code="200"}': [3.0 * i for i in range(60)],
        'req_total{service="frontend",code="500"}': [float(i // 4) for i in range(60)],
        'req_total{service="cart",code="200"}': [float((7 * i) % 100) for i in range(60)],
        'req_total{service="cart",code="500"}': [None] * 20 + [5.0 + 2 * i for i in range(40)],
        'mem{service="frontend",pod="f1"}': [float((i * 37) % 11) for i in range(60)],
        'mem{service="frontend",pod="f2"}': [float((i * 13) % 7) - 2 for i in range(30)],
        'mem{service="cart",pod="c1"}': [None if i % 5 == 0 else 1.5 * i for i in range(60)],
        'mem{service="ad",pod="a1"}': [
            STALE_NAN if i in (12, 13, 40) else 2.0 * i for i in range(60)
        ],
    }
    for service, k in (("frontend", 1), ("cart", 3)):
        for le, share in (("0.05", 0.2), ("0.1", 0.5), ("0.5", 0.9), ("1", 0.95), ("+Inf", 1.0)):
            key = f'lat_bucket{{service="{service}",le="{le}"}}'
            series[key] = [float(math.floor(k * i * 10 * share)) for i in range(60)]
    return series


def promtool_value(value: float | None) -> str:
    """One slot of promtool's input-series notation."""
    if value is None:
        return "_"
    return "stale" if is_stale(value) else repr(value)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (apt prometheus) absent")
def test_answers_match_prometheus_promtool(tmp_path: Path) -> None:
    """Every answer of the engine is fed to `promtool test rules` as the expected result."""
    from promql_parser import parse

    series = oracle_series()
    store = MemorySeriesStore()
    for text, values in series.items():
        selector = parse(text)
        labels = {m.name: m.value for m in selector.matchers.matchers}
        labels["__name__"] = selector.name
        for i, v in enumerate(values):
            if v is not None and is_stale(v):
                store.mark_stale(labels, 15.0 * i)
            elif v is not None:
                store.append(labels, 15.0 * i, v)
    engine = PromQLEngine(store)
    cases = []
    for query in ORACLE_QUERIES:
        for t in (0, 60, 290, 300, 437, 600, 885, 900, 1200):
            samples = engine.instant_vector(query, t)
            if any(math.isnan(v) for _, v in samples):
                continue  # NaN never equals NaN in promtool's comparison.
            expected = []
            for labels, v in samples:
                rest = ",".join(f'{k}="{x}"' for k, x in sorted(labels.items()) if k != "__name__")
                expected.append({"labels": f"{labels.get('__name__', '')}{{{rest}}}", "value": v})
            cases.append({"expr": query, "eval_time": f"{t}s", "exp_samples": expected})
    document = {
        "rule_files": [],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [
                    {"series": text, "values": " ".join(promtool_value(v) for v in vs)}
                    for text, vs in series.items()
                ],
                "promql_expr_test": cases,
            }
        ],
    }
    path = tmp_path / "oracle.yml"
    path.write_text(yaml.safe_dump(document))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert len(cases) > 300
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _reference_increase(
    samples: list[tuple[float, float]], t: float, seconds: float, is_counter: bool
) -> float | None:
    """increase()/delta() written out from Prometheus' extrapolatedRate, for one series."""
    start = t - seconds
    window = [(ts, v) for ts, v in samples if start <= ts <= t and not is_stale(v)]
    if len(window) < 2:
        return None
    values = [v for _, v in window]
    result = values[-1] - values[0]
    if is_counter:
        result += sum(a for a, b in itertools.pairwise(values) if b < a)
    first_t, last_t = window[0][0], window[-1][0]
    to_start, to_end = first_t - start, t - last_t
    sampled = last_t - first_t
    gap = sampled / (len(values) - 1)
    if is_counter and result > 0 and values[0] >= 0:
        to_start = min(to_start, sampled * (values[0] / result))
    interval = sampled
    interval += to_start if to_start < gap * 1.1 else gap / 2
    interval += to_end if to_end < gap * 1.1 else gap / 2
    return result * interval / sampled


def test_increase_over_a_growing_series_with_resets_and_markers_matches_the_definition() -> None:
    """The engine keeps per-series bookkeeping across queries while samples are appended; every
    answer must still equal the definition, whether or not a reset or a staleness marker falls
    inside the window."""
    rng = random.Random(7)
    store = MemorySeriesStore()
    engine = PromQLEngine(store)
    labels = {"__name__": "jobs_total", "job": "x"}
    gauge = {"__name__": "depth", "job": "x"}
    samples: list[tuple[float, float]] = []
    gauge_samples: list[tuple[float, float]] = []
    value = 0.0
    for i in range(120):
        t = 15.0 * i
        roll = rng.random()
        if roll < 0.08:
            store.mark_stale(labels, t)
            store.mark_stale(gauge, t)
            samples.append((t, STALE_NAN))
            gauge_samples.append((t, STALE_NAN))
        else:
            value = rng.uniform(0, 5) if roll < 0.16 else value + rng.uniform(0, 10)
            level = rng.uniform(0, 100)
            store.append(labels, t, value)
            store.append(gauge, t, level)
            samples.append((t, value))
            gauge_samples.append((t, level))
        for window in (60.0, 120.0):
            span = f"{int(window)}s"
            got = engine.instant_vector(f"increase(jobs_total[{span}])", t)
            expected = _reference_increase(samples, t, window, is_counter=True)
            assert (got[0][1] if got else None) == pytest.approx(expected), (t, window)
            got = engine.instant_vector(f"delta(depth[{span}])", t)
            expected = _reference_increase(gauge_samples, t, window, is_counter=False)
            assert (got[0][1] if got else None) == pytest.approx(expected), (t, window)


def test_rate_of_unchanged_series_is_its_zero_change_and_later_changes_count() -> None:
    store = MemorySeriesStore()
    for i in range(9):
        t = 15.0 * i
        store.append({"__name__": "flat_total", "job": "api"}, t, 5.0)
        # A gauge going from zero to negative zero: its change is negative zero.
        store.append({"__name__": "level", "job": "api"}, t, 0.0 if i < 5 else -0.0)
    engine = PromQLEngine(store)
    assert single(engine, "rate(flat_total[1m])", 120.0) == 0.0
    assert single(engine, "increase(flat_total[2m])", 120.0) == 0.0
    zero = single(engine, "delta(level[2m])", 120.0)
    assert zero == 0.0 and math.copysign(1.0, zero) == -1.0  # as the extrapolation gives it
    # The series moves after being read: the next evaluation sees the new sample.
    store.append({"__name__": "flat_total", "job": "api"}, 135.0, 35.0)
    assert single(engine, "increase(flat_total[30s])", 135.0) == 30.0


def _irregular_store(seed: int) -> MemorySeriesStore:
    """Counters over three jobs and pods, scraped every 30 s with gaps, staleness markers,
    counter resets and replaced samples; one pod has no `job` label."""
    rng = random.Random(seed)
    store = MemorySeriesStore()
    pods = [("api", "a"), ("api", "b"), ("web", "c"), ("", "d")]
    counts = dict.fromkeys(pods, 0.0)
    for i in range(60):
        t = 30.0 * i
        for job, pod in pods:
            labels = {"__name__": "reqs_total", "pod": pod, "le": str(rng.choice((1, 5)))}
            if job:
                labels["job"] = job
            roll = rng.random()
            if roll < 0.05:
                store.mark_stale(labels, t)
                continue
            if roll < 0.08:
                counts[(job, pod)] = 0.0  # a restart
            if roll < 0.12 and i > 20:
                continue  # not scraped
            counts[(job, pod)] += rng.choice((0.0, 1.0, 2.5, 7.0))
            store.append(labels, t, counts[(job, pod)])
            if roll > 0.97:
                counts[(job, pod)] += 1.0
                store.append(labels, t, counts[(job, pod)])  # replaces the sample
    return store


class _Untracked:
    """The same series as plain Series objects, whose irregularities nobody keeps."""

    def __init__(self, store: MemorySeriesStore) -> None:
        self._series = [
            Series(dict(s.labels), list(s.timestamps), list(s.values)) for s in store.select(None)
        ]

    def select(self, name: str | None) -> list[Series]:
        return [s for s in self._series if name is None or s.labels["__name__"] == name]


@pytest.mark.parametrize("seed", range(6))
def test_rates_from_tracked_series_equal_those_the_engine_scans_itself(seed: int) -> None:
    store = _irregular_store(seed)
    tracked, untracked = PromQLEngine(store), PromQLEngine(_Untracked(store))
    assert all(s.last_nan is not None for s in store.select(None))
    for function in ("rate", "increase", "delta"):
        for window in ("1m", "2m", "5m"):
            query = f"{function}(reqs_total[{window}])"
            for t in range(0, 1800, 45):
                assert tracked.instant_vector(query, t) == untracked.instant_vector(query, t)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "aggregation",
    [
        "sum by (job)",
        "sum by (job, le)",
        "sum by ()",
        "sum",
        "max by (pod)",
        "min by (job)",
        "avg by (le)",
        "count by (job)",
        "stddev by (job)",
        "stdvar",
        "group by (job)",
        "sum by (__name__)",
        "count by (__name__, job)",
    ],
)
def test_aggregations_of_rates_equal_aggregating_the_rate_vector(
    seed: int, aggregation: str
) -> None:
    # `* 1` keeps every rate as it is but makes the engine aggregate the evaluated vector.
    engine = PromQLEngine(_irregular_store(seed))
    for function in ("rate", "increase", "delta"):
        fused = f"{aggregation} ({function}(reqs_total[2m]))"
        generic = f"{aggregation} ({function}(reqs_total[2m]) * 1)"
        for t in range(0, 1800, 45):
            assert engine.instant_vector(fused, t) == engine.instant_vector(generic, t), (fused, t)
            quantile = f"histogram_quantile(0.9, {fused})"
            expected = f"histogram_quantile(0.9, {generic})"
            got, want = engine.instant_vector(quantile, t), engine.instant_vector(expected, t)
            assert [labels for labels, _ in got] == [labels for labels, _ in want]
            assert all(
                a == b or (math.isnan(a) and math.isnan(b))
                for (_, a), (_, b) in zip(got, want, strict=True)
            )
    assert engine._plans, "the aggregations were computed straight from the rates"


def test_endless_distinct_aggregations_keep_a_bounded_plan_table() -> None:
    engine = PromQLEngine(_irregular_store(0))
    for i in range(1500):
        query = f'sum by (job) (rate(reqs_total{{pod!="p{i}"}}[2m]))'
        assert engine.instant_vector(query, 900) == engine.instant_vector(
            f'sum by (job) (rate(reqs_total{{pod!="p{i}"}}[2m]) * 1)', 900
        )
    assert 0 < len(engine._plans) <= 512


def test_regex_matchers_answer_each_label_value_alike_however_many_values_they_have_seen() -> None:
    values = [f"svc-{i}" for i in range(_MEMO_VALUES + 500)] + ["", "svc-", "x-svc-1"]
    pattern = "svc-[0-9]*[02468]"
    anchored = compile_regex(f"(?:{pattern})")
    matching, excluding = _regex_matcher(pattern, True), _regex_matcher(pattern, False)
    # Twice over: the second pass reads what the first remembered, and matches the rest anew.
    for _ in range(2):
        expected = [anchored.fullmatch(v) is not None for v in values]
        assert [matching(v) for v in values] == expected
        assert [excluding(v) for v in values] == [not e for e in expected]
    assert matching("svc-10") and not matching("svc-1") and not matching("x-svc-10")
