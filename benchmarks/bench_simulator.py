"""Simulator speed: one scenario for 30 virtual minutes at 15-second scrapes, and peak memory."""

from __future__ import annotations

from benchmarks.harness import Figure, median_seconds, peak_rss_mb
from itbench.core.faults import get_fault
from itbench.environments.sim import SimEnvironment

VIRTUAL_SECONDS = 1800.0


def _scenario(evaluate_alerts: bool) -> SimEnvironment:
    env = SimEnvironment(seed=42)
    env.provision()
    env.inject("fault", get_fault("flagd.cart-failure").changes({}, env.namespace))
    env.advance(VIRTUAL_SECONDS)
    if evaluate_alerts:
        env.alerts()
    return env


def _polled() -> SimEnvironment:
    """The way a trial runner drives it: advance 15 s, look at the alerts, repeat."""
    env = SimEnvironment(seed=42)
    env.provision()
    env.inject("fault", get_fault("flagd.cart-failure").changes({}, env.namespace))
    for _ in range(int(VIRTUAL_SECONDS // 15)):
        env.advance(15)
        env.alerts()
    return env


def run() -> list[Figure]:
    """Measure the simulator."""
    simulate = median_seconds(lambda: _scenario(False), repeat=5)
    with_alerts = median_seconds(lambda: _scenario(True), repeat=5)
    polled = median_seconds(_polled, repeat=3)
    series = _scenario(False).series_count()
    return [
        Figure("simulator: 30 virtual min, 15-s scrapes", simulate, "s", target=0.5),
        Figure("simulator: 30 virtual min + alert rules", with_alerts, "s", target=1.0),
        Figure("simulator: 30 virtual min polled every 15 s", polled, "s", target=1.0),
        Figure("simulator: series after 30 virtual min", float(series), "series"),
        Figure("simulator: peak memory", peak_rss_mb(), "MB", target=500.0),
    ]
