"""Determinism: the same seed and the same scenario give byte-identical telemetry and alerts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from waiting import inject

from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.cluster import Cluster
from itbench.environments.sim.traffic import TrafficModel, TrafficState


def run(seed: int) -> tuple[str, str, str]:
    env = SimEnvironment(seed=seed)
    env.provision()
    env.advance(120)
    inject(env, "kubernetes.memory-limit", workload="ad", memory="16Mi")
    inject(env, "flagd.cart-failure", key="flag")
    env.advance(600)
    env.remove("flag")
    env.advance(300)
    history = "|".join(
        f"{i.alertname}{sorted(i.labels.items())}{i.start}{i.end}" for i in env.alert_history()
    )
    traces = env.search_traces("cart", None, {}, env.now() - timedelta(minutes=10), env.now(), 20)
    return env.telemetry_digest(), history, repr(traces)


def test_same_seed_gives_identical_telemetry_alerts_and_traces() -> None:
    first = run(11)
    second = run(11)
    assert first == second
    assert first[1]  # something fired, so the timeline comparison is meaningful


def test_another_seed_gives_other_pod_names_and_samples() -> None:
    assert run(11)[0] != run(12)[0]


def test_telemetry_does_not_depend_on_the_process_hash_seed() -> None:
    import subprocess
    import sys

    script = (
        "from itbench.environments.sim import SimEnvironment\n"
        "from itbench.core.faults import get_fault\n"
        "env = SimEnvironment(seed=5); env.provision(); env.advance(60)\n"
        "env.inject('a', get_fault('chaos.network-partition').changes("
        "{'workload': 'checkout', 'target': 'payment'}, 'otel-demo'))\n"
        "env.advance(300)\n"
        "print(env.telemetry_digest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(digests) == 1
    assert len(next(iter(digests))) == 64


_FAULT_MIXES = {
    "limits-flags-scaling": [
        ("kubernetes.memory-limit", {"workload": "ad", "memory": "16Mi"}),
        ("flagd.cart-failure", {}),
    ],
    "kafka-lag": [("flagd.kafka-queue-problems", {})],
    "memory-leak": [("flagd.email-memory-leak", {})],
    "cache-leak": [("flagd.recommendation-cache-failure", {})],
    "cpu-stress": [("chaos.cpu-stress", {"workload": "recommendation"})],
}


@pytest.mark.parametrize("mix", sorted(_FAULT_MIXES))
def test_skipped_controller_passes_and_repeated_intervals_change_nothing(
    monkeypatch: pytest.MonkeyPatch, mix: str
) -> None:
    # The twin skips a controller pass whose inputs are those of a pass that changed nothing,
    # and reuses the last interval's traffic when its inputs recur: a twin that computes both
    # every time must produce the same telemetry, alerts, events and objects.
    def everything(seed: int) -> tuple[str, str, str, str]:
        env = SimEnvironment(seed=seed)
        env.provision()
        env.advance(120)
        for i, (fault, args) in enumerate(_FAULT_MIXES[mix]):
            inject(env, fault, key=f"f{i}", **args)
        env.advance(450)
        result = env.act(
            AgentAction(verb=ActionVerb.SCALE, kind="deployment", name="checkout", replicas=2)
        )
        assert result.ok, result.message
        env.remove("f0")
        env.advance(300)
        objects = env.snapshot().model_dump_json(exclude={"time"})
        return env.telemetry_digest(), run_history(env), objects, repr(env.events())

    shortcut = everything(21)
    monkeypatch.setattr(Cluster, "_unsettled", lambda self, group: self._controller_inputs())
    monkeypatch.setattr(Cluster, "_settle", lambda self, group, before: None)
    real_step = TrafficModel.step

    def fresh(self: TrafficModel, dt: float) -> TrafficState:
        self._last = None
        return real_step(self, dt)

    monkeypatch.setattr(TrafficModel, "step", fresh)
    assert everything(21) == shortcut


def run_history(env: SimEnvironment) -> str:
    return "|".join(
        f"{i.alertname}{sorted(i.labels.items())}{i.start}{i.end}" for i in env.alert_history()
    )
