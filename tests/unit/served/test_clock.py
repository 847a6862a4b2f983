"""A cluster's clock and PromQL durations on a twin that runs faster than the wall clock."""

from __future__ import annotations

import pytest

from itbench.environments.kube.clock import (
    ClusterClock,
    duration_seconds,
    format_duration,
    scale_duration,
    scale_promql,
)


def test_the_clock_maps_both_ways_at_its_speed() -> None:
    clock = ClusterClock(speed=30, cluster_origin=1000.0, wall_origin=10.0, wall=lambda: 12.0)
    assert clock.now() == 1060.0
    assert clock.to_wall(1060.0) == 12.0
    assert clock.wall_seconds(120) == 4.0
    with pytest.raises(ValueError, match="positive"):
        ClusterClock(speed=0)


def test_durations_parse_format_and_scale() -> None:
    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("500ms") == 0.5
    assert format_duration(4) == "4s" and format_duration(1.5) == "1500ms"
    assert format_duration(0) == "1ms"
    assert scale_duration("2m", 30) == "4s"
    assert scale_duration("2m", 1) == "2m"
    for bad in ("", "5", "5 m", "m5"):
        with pytest.raises(ValueError, match="not a Prometheus duration"):
            duration_seconds(bad)


def test_promql_ranges_subqueries_and_offsets_scale_and_strings_do_not() -> None:
    expr = 'rate(x{a="[2m]"}[2m]) + max_over_time(y[10m:1m]) - z offset 1h + w[5m:]'
    assert scale_promql(expr, 30) == (
        'rate(x{a="[2m]"}[4s]) + max_over_time(y[20s:2s]) - z offset 120s + w[10s:]'
    )
    assert scale_promql(expr, 1) == expr
    assert scale_promql("x[$__interval]", 30) == "x[$__interval]"
