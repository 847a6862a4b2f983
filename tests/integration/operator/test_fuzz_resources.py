"""Fuzzing the operator's door: custom resources drawn from the models, valid and broken.

One operator runs against the loopback API (which, like a server without the CRD schemas, stores
any JSON) for the whole module. Each example creates one object and checks the invariant: the
object gets a `Valid` condition, and when it is False the message names a field path and is
bounded; the operator is alive with no failed reconcile; sentinel objects of every kind keep being
reconciled. Budget: EXAMPLES examples per kind (4 kinds), about 40 s on a 2-core machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_lab import FAST, NS, Cluster, agent, benchmark_run, start_cluster
from pydantic import BaseModel
from resource_strategies import hostile_spec, valid_spec

from itbench.core.models import AgentSubmission, BenchmarkRun, Scenario, Trial
from itbench.operator.app import run_operator
from itbench.operator.bodies import MESSAGE_CHARS
from itbench.operator.runtime import OperatorRuntime

EXAMPLES = 25
GROUP, VERSION = "itbench.io", "v1alpha1"
KINDS: dict[str, tuple[type[BaseModel], str, bool]] = {
    "AgentSubmission": (AgentSubmission, "agentsubmissions", True),
    "BenchmarkRun": (BenchmarkRun, "benchmarkruns", True),
    "Trial": (Trial, "trials", True),
    "Scenario": (Scenario, "scenarios", False),
}
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
FIELD_PATH = re.compile(r"(^|[\s(])spec([.\[:]|\s|$)")
_names = itertools.count()


class RunningOperator:
    """The operator in a thread of its own (Hypothesis examples are synchronous)."""

    def __init__(self, cluster: Cluster) -> None:
        self.runtime = OperatorRuntime(api=cluster.api, config=FAST)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, args=(cluster,), daemon=True)
        self._thread.start()
        assert self._ready.wait(20), "the operator did not start"

    def _run(self, cluster: Cluster) -> None:
        asyncio.set_event_loop(self._loop)
        ready = asyncio.Event()

        async def main() -> None:
            self._task = asyncio.create_task(
                run_operator(
                    self.runtime,
                    connection=kopf.ConnectionInfo(server=cluster.server.url, insecure=True),
                    ready_flag=ready,
                )
            )
            await ready.wait()
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

        self._loop.run_until_complete(main())

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    def errors(self) -> float:
        registry = self.runtime.metrics.registry
        return sum(
            registry.get_sample_value("itbench_operator_reconcile_errors_total", {"kind": k}) or 0
            for k in KINDS
        )

    def stop(self) -> None:
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)


def _wait(predicate: Callable[[], Any], within: float = 15.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    return predicate()


@pytest.fixture(scope="module")
def fuzz_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, RunningOperator]]:
    cluster = start_cluster(Path(tmp_path_factory.mktemp("fuzz")))
    handle = RunningOperator(cluster)
    try:
        cluster.apply_scenarios("cart-flagd-failure")
        cluster.apply(agent("sentinel", {"builtin": {"name": "null"}}))
        # A run that stays Invalid (its agent does not exist) is reconciled on every tick.
        cluster.apply(benchmark_run("sentinel-run", "nobody", ["cart-flagd-failure"]))
        yield cluster, handle
    finally:
        handle.stop()
        cluster.api.api_client.close()
        cluster.server.stop()


def _valid_condition(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    status = (obj or {}).get("status")
    if not isinstance(status, dict):
        return None
    return next((c for c in status.get("conditions", []) if c.get("type") == "Valid"), None)


def _sentinels_reconciled(cluster: Cluster) -> None:
    """Bump every sentinel's generation and wait until the operator has observed it."""
    sentinels = [
        ("agentsubmissions", "sentinel", NS, {"spec": {"agentName": f"s{next(_names)}"}}),
        ("benchmarkruns", "sentinel-run", NS, {"spec": {"seed": next(_names)}}),
    ]
    for plural, name, namespace, patch in sentinels:
        cluster.api.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name, patch
        )
    for plural, name, namespace, _ in sentinels:

        def observed(plural: str = plural, name: str = name, namespace: str = namespace) -> bool:
            obj = cluster.get(plural, name, namespace) or {}
            generation = obj.get("metadata", {}).get("generation")
            return (obj.get("status") or {}).get("observedGeneration") == generation

        assert _wait(observed), f"{plural}/{name} is no longer reconciled"
    scenario = cluster.get("scenarios", "cart-flagd-failure") or {}
    assert (scenario.get("status") or {}).get("phase") == "Ready"


def _exercise(cluster: Cluster, handle: RunningOperator, kind: str, spec: Any, how: str) -> None:
    _, plural, namespaced = KINDS[kind]
    name = f"fuzz-{kind.lower()}-{next(_names)}"
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }
    custom = cluster.api.custom
    if namespaced:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural, body)
    else:
        custom.create_cluster_custom_object(GROUP, VERSION, plural, body)
    try:
        namespace = NS if namespaced else None
        valid = _wait(lambda: _valid_condition(cluster.get(plural, name, namespace)))
        assert valid is not None, f"{kind} ({how}) got no Valid condition"
        message = str(valid.get("message", ""))
        assert len(message) <= MESSAGE_CHARS, f"{kind} ({how}): message of {len(message)}"
        if valid["status"] == "False" and valid.get("reason") != "Orphaned":
            assert FIELD_PATH.search(message), f"{kind} ({how}): no field path in {message!r}"
        obj = cluster.get(plural, name, namespace) or {}
        assert len(json.dumps(obj.get("status"))) < 16_000, f"{kind} ({how}): status too large"
        for event in cluster.events(name, NS):
            assert len(event["message"]) <= MESSAGE_CHARS
        assert handle.alive, "the operator stopped"
        assert handle.errors() == 0, "a reconcile raised"
        _sentinels_reconciled(cluster)
    finally:
        with contextlib.suppress(Exception):
            if namespaced:
                custom.delete_namespaced_custom_object(GROUP, VERSION, NS, plural, name)
            else:
                custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)


def _specs(model: type[BaseModel]) -> st.SearchStrategy[tuple[Any, str]]:
    valid = valid_spec(model).map(lambda spec: (spec, "schema-valid"))
    return st.one_of(valid, hostile_spec(model))


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_any_custom_resource_gets_a_bounded_condition_and_harms_no_other(
    fuzz_lab: tuple[Cluster, RunningOperator], kind: str
) -> None:
    cluster, handle = fuzz_lab

    @FUZZ
    @given(_specs(KINDS[kind][0]))
    def check(case: tuple[Any, str]) -> None:
        spec, how = case
        _exercise(cluster, handle, kind, spec, how)

    check()
    assert handle.alive and handle.errors() == 0
