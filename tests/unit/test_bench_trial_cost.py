"""The trial-cost benchmark's instruments time the simulator's parts and put them back."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.bench_trial_cost import _PARTS, _ticks_by_phase, _timed
from itbench.core.faults import get_fault
from itbench.environments.sim import SimEnvironment


@pytest.mark.interpreted
def test_the_parts_are_timed_ticks_counted_by_phase_and_the_originals_restored() -> None:
    originals = {(owner, name): getattr(owner, name) for m in _PARTS.values() for owner, name in m}
    tick = SimEnvironment._tick
    spent = dict.fromkeys(_PARTS, 0.0)
    ticks: Counter[str] = Counter()
    with _timed(spent), _ticks_by_phase(ticks) as phase:
        env = SimEnvironment(seed=1)
        env.provision()
        phase[0] = "AwaitingAlerts"
        env.inject("f", get_fault("flagd.cart-failure").changes({}, env.namespace))
        env.advance(90)
        env.alerts()
    assert ticks == {"Provisioning": 4, "AwaitingAlerts": 6}
    assert all(spent[part] > 0 for part in _PARTS), spent
    assert SimEnvironment._tick is tick
    assert all(getattr(owner, name) is fn for (owner, name), fn in originals.items())
