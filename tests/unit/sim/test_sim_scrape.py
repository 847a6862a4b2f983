"""The twin's scrapes: what kube-state-metrics reports follows the objects scrape by scrape, and
series that stop being written end with a staleness marker."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from itbench.core.alert_rules import alert_rules
from itbench.core.faults import get_fault
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.environment import DEFAULT_START, SCRAPE_SECONDS
from itbench.environments.sim.promql import PromQLEngine
from itbench.environments.sim.telemetry.collector import _cdf_key
from itbench.environments.sim.telemetry.logs import _iso
from itbench.environments.sim.traffic import Latency


def values(env: SimEnvironment, query: str) -> dict[str, float]:
    """The instant vector now, as {pod: value}."""
    result = env.query_metrics(query, env.now())["result"]
    return {r["metric"].get("pod", ""): float(r["value"][1]) for r in result}


def ad_pods(env: SimEnvironment) -> list[dict[str, Any]]:
    return [
        p
        for p in env.get_objects("Pod")
        if p["metadata"]["labels"].get("opentelemetry.io/name") == "ad"
    ]


def test_resource_series_follow_the_quantities_of_new_and_changed_pods(
    env: SimEnvironment,
) -> None:
    query = 'kube_pod_container_resource_limits{resource="memory", container="ad"}'
    before = values(env, query)
    assert before and all(v > 0 for v in before.values())
    result = env.act(
        AgentAction(
            verb=ActionVerb.SET_RESOURCES,
            kind="deployment",
            name="ad",
            limits={"memory": "512Mi"},
            requests={"memory": "256Mi"},
        )
    )
    assert result.ok, result.message
    env.advance(180)
    pods = {p["metadata"]["name"] for p in ad_pods(env)}
    after = values(env, query)
    assert set(after) == pods and not pods & set(before)
    assert set(after.values()) == {512 * 2**20}
    # A pod whose quantity changes in place (same pod, same labels) reports the new one.
    name = sorted(pods)[0]
    pod = env._cluster.get("Pod", name)  # an in-place edit, which no API makes
    assert pod is not None
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "1Gi"
    env.advance(SCRAPE_SECONDS)
    assert values(env, query)[name] == 2**30
    requests = values(env, 'kube_pod_container_resource_requests{resource="memory"}')
    assert requests[name] == 256 * 2**20


def test_series_of_a_pod_that_went_away_end_with_a_staleness_marker(env: SimEnvironment) -> None:
    old = {p["metadata"]["name"] for p in ad_pods(env)}
    assert old
    result = env.act(AgentAction(verb=ActionVerb.SCALE, kind="deployment", name="ad", replicas=0))
    assert result.ok, result.message
    env.advance(120)
    assert not ad_pods(env)
    for pod in old:
        assert values(env, f'kube_pod_info{{pod="{pod}"}}') == {}
        assert values(env, f'count_over_time(kube_pod_info{{pod="{pod}"}}[5m])') != {}
    # Span series of the ad service stop at their last count: their rate falls to zero.
    rates = values(
        env,
        'sum(rate(traces_span_metrics_calls_total{service_name="ad", span_kind="SPAN_KIND_SERVER"}'
        "[1m]))",
    )
    assert rates == {"": 0.0}


def test_a_spans_duration_sum_is_its_own_latency_whatever_twins_ran_before() -> None:
    # Two latencies of one rounded shape (equal bucket counts) but different means: the sum
    # each interval adds is the count times its own mean, not that of whichever came first.
    first, second = Latency(100.02), Latency(100.04)
    twin = SimEnvironment(seed=3)
    scraper = twin._scraper  # the scraper's increments, which no API shows
    a = scraper._increments_for(40, first, _cdf_key(first), first.mean_ms())
    b = scraper._increments_for(40, second, _cdf_key(second), second.mean_ms())
    assert _cdf_key(first) == _cdf_key(second)
    assert a[:-1] == b[:-1]
    assert a[-1] == 40 * first.mean_ms() and b[-1] == 40 * second.mean_ms()
    assert a[-1] != b[-1]


GET_ROOT = 'traces_span_metrics_calls_total{service_name="frontend", span_name="GET /"}'
"""One server span's call counts, one series per status."""


def _frontend_rate(env: SimEnvironment) -> float:
    query = 'sum(rate(traces_span_metrics_calls_total{service_name="frontend"}[1m]))'
    return values(env, query)[""]


def _collector_out_of_service(env: SimEnvironment, monkeypatch: Any, restart: bool) -> float:
    """Take the collector out of its Service for one scrape (its pod not ready), restarting its
    container when asked; the frontend's count of one server span before the gap."""
    cluster = env._cluster
    (pod,) = [p for p in cluster.of_kind("Pod") if p["metadata"]["name"].startswith("otel-coll")]
    name = pod["metadata"]["name"]
    ready = cluster.pod_ready
    before = sum(values(env, GET_ROOT).values())
    monkeypatch.setattr(cluster, "pod_ready", lambda p: p["metadata"]["name"] != name and ready(p))
    env.advance(SCRAPE_SECONDS)
    assert values(env, GET_ROOT) == {}, "no scrape of the collector: its series went stale"
    if restart:
        cluster.runtime[name].restarts += 1
    monkeypatch.setattr(cluster, "pod_ready", ready)
    return before


@pytest.mark.interpreted
def test_span_series_go_on_counting_when_the_collector_is_back(
    env: SimEnvironment, monkeypatch: Any
) -> None:
    before = _collector_out_of_service(env, monkeypatch, restart=False)
    env.advance(90)
    assert sum(values(env, GET_ROOT).values()) > before
    assert 0 < _frontend_rate(env) < 1e6


@pytest.mark.interpreted
def test_span_series_of_a_restarted_collector_count_again_from_zero(
    env: SimEnvironment, monkeypatch: Any
) -> None:
    before = _collector_out_of_service(env, monkeypatch, restart=True)
    env.advance(30)
    after = sum(values(env, GET_ROOT).values())
    assert 0 < after < before, (before, after)
    resets = values(
        env, 'sum(resets(traces_span_metrics_calls_total{service_name="frontend"}[2m]))'
    )
    assert resets[""] > 0
    assert 0 < _frontend_rate(env) < 1e6


def test_a_restarted_containers_cgroup_counts_from_its_start_and_the_exited_one_stops() -> None:
    env = SimEnvironment(seed=3)
    env.provision()
    env.inject("leak", get_fault("flagd.email-memory-leak").changes({}, env.namespace))
    restarts = 'sum(kube_pod_container_status_restarts_total{container="email"})'
    while values(env, restarts).get("", 0.0) < 1:
        env.advance(15)
        assert env.now().timestamp() - DEFAULT_START.timestamp() < 3600, "email never restarted"
    env.advance(2 * SCRAPE_SECONDS)
    cpu = [
        s
        for s in env.series_store.series_named("container_cpu_usage_seconds_total")
        if s.labels.get("container") == "email"
    ]
    assert len(cpu) == 2, [s.labels["id"] for s in cpu]
    old, new = sorted(cpu, key=lambda s: s.timestamps[0])
    old_cpu = [v for v in old.values if v == v]  # without its staleness marker
    # The new container's usage starts near zero, not at the old one's total.
    assert new.values[0] < old_cpu[-1] / 2, (new.values[:3], old_cpu[-3:])
    # The exited container's counter stays where it was (cAdvisor lists it for a while after
    # it exited, and a scrape falls in that while); its cgroup holds no memory.
    assert old_cpu[-1] == old_cpu[-2]
    pod_rate = values(
        env, 'sum(rate(container_cpu_usage_seconds_total{container="", pod=~"email-.*"}[1m]))'
    )[""]
    containers_rate = values(
        env, 'sum(rate(container_cpu_usage_seconds_total{container="email"}[1m]))'
    )[""]
    assert containers_rate <= pod_rate * 1.05, (containers_rate, pod_rate)
    memory = {
        s.labels["id"]: [v for v in s.values if v == v][-1]
        for s in env.series_store.series_named("container_memory_working_set_bytes")
        if s.labels.get("container") == "email"
    }
    assert memory[old.labels["id"]] == 0.0 and memory[new.labels["id"]] > 0


def test_instant_queries_answered_again_equal_a_fresh_evaluation() -> None:
    # The engine answers an instant-selector query again when no series of its names changed
    # since it last evaluated it; an engine that evaluates every time must agree, through
    # rollouts, restarts, scaling and staleness.
    env = SimEnvironment(seed=9)
    env.provision()
    queries = [r.expr for r in alert_rules(env.namespace)] + [
        'sum by (deployment) (kube_deployment_status_replicas_ready{namespace="otel-demo"})',
        'count(kube_pod_info{namespace="otel-demo"})',
        'max by (container) (container_memory_working_set_bytes{container!=""})',
    ]
    reused = 0
    for minute in range(40):
        if minute == 5:
            assert env.inject(
                "limit",
                get_fault("kubernetes.memory-limit").changes(
                    {"workload": "ad", "memory": "16Mi"}, env.namespace
                ),
            )
        if minute == 20:
            result = env.act(
                AgentAction(verb=ActionVerb.SCALE, kind="deployment", name="cart", replicas=0)
            )
            assert result.ok, result.message
        env.advance(30 if minute % 3 else 15)
        t = env.now().timestamp()
        fresh = PromQLEngine(env.series_store)
        for query in queries:
            answered = env._engine.instant_vector(query, t)
            assert answered == fresh.instant_vector(query, t), (query, minute)
        reused += len(env._engine._answers)
    assert reused, "some answers were kept for answering again"


def test_the_store_knows_when_a_name_changed() -> None:
    env = SimEnvironment(seed=9)
    env.provision()
    store = env.series_store
    t = env.now().timestamp()
    assert store.changed("kube_pod_info", t - 60, t)  # the first samples of the shop
    env.advance(120)
    later = env.now().timestamp()
    assert not store.changed("kube_deployment_spec_replicas", t, later)
    env.act(AgentAction(verb=ActionVerb.SCALE, kind="deployment", name="ad", replicas=2))
    env.advance(SCRAPE_SECONDS)
    assert store.changed("kube_deployment_spec_replicas", later, env.now().timestamp())
    assert not store.changed("no_such_metric", 0, env.now().timestamp())


def test_log_timestamps_read_as_datetime_writes_them_to_the_millisecond() -> None:
    def written(t: float) -> str:
        return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    rng = random.Random(7)
    start = DEFAULT_START.timestamp()
    edges = (0.0, 1e-7, 5e-7, 1.5e-6, 2.5e-6, 0.001, 0.0015, 0.5, 0.999, 0.9995, 0.9999995)
    times = [start + rng.random() * 86_400 for _ in range(20_000)]
    times += [start + k + f for k in range(0, 600, 13) for f in edges]
    times += [start + i / 1e6 for i in range(0, 2_000_000, 997)]
    assert [_iso(t) for t in times] == [written(t) for t in times]


def test_a_names_selection_is_the_same_list_until_a_series_of_it_is_made_or_first_written() -> None:
    from itbench.environments.sim.telemetry.store import TelemetryStore, _put

    store = TelemetryStore()
    a = store.handle((("__name__", "m"), ("pod", "a")))
    _put(a, 1.0, 1.0)
    first = store.select("m")
    assert first == [a] and store.select("m") is first
    b = store.handle((("__name__", "m"), ("pod", "b")))  # made, no sample yet
    second = store.select("m")
    assert second == [a] and store.select("m") is second
    c, d = (store.handle((("__name__", "m"), ("pod", p))) for p in "cd")
    assert store.share_timestamps([c, d])
    grouped = store.select("m")
    _put(b, 2.0, 1.0)  # b's first sample
    assert store.select("m") == [a, b]
    with_b = store.select("m")
    c.timestamps.append(3.0)  # c and d share their timestamps: both have samples now
    c.values.append(1.0)
    d.values.append(1.0)
    assert store.select("m") == [a, b, c, d] and grouped == [a]
    assert store.select("none") == [] and store.select(None) == [a, b, c, d]
    assert with_b == [a, b]  # a selection handed out is never changed afterwards


def test_an_unchanged_sample_is_the_series_last_float_object_and_reads_the_same() -> None:
    import struct

    from itbench.environments.sim.telemetry.store import TelemetryStore, _append_count, _put

    def bits(values: list[float]) -> list[bytes]:
        return [struct.pack("<d", v) for v in values]

    store = TelemetryStore()
    s = store.handle((("__name__", "m"), ("pod", "a")))
    written = [2.5, 2.5, 2.5, 0.0, 0.0, -0.0, -0.0, 0.0, 3.0, 3.0]
    for i, value in enumerate(written):
        _put(s, float(i), value * 1.0)  # a new float object every time
    assert bits(s.values) == bits(written)  # zeros keep their sign
    v = s.values
    assert v[1] is v[0] and v[2] is v[0] and v[4] is v[3] and v[6] is v[5] and v[9] is v[8]
    assert v[5] is not v[4] and v[7] is not v[6]  # a zero of the other sign is a change
    assert store.changed("m", 4.0, 5.0) is False  # -0.0 == 0.0: no change for PromQL
    # A counter's zero increment keeps its count's object; anything else adds.
    for start, increment in [(1e6 + 0.5, 0.0), (1e6 + 0.5, -0.0), (0.0, -0.0), (0.0, 0.0)]:
        counts = [start * 1.0]
        assert _append_count(counts, False, increment) == start
        assert counts[1] is counts[0]
    for start, increment in [(1e6 + 0.5, 1.0), (-0.0, 0.0), (-0.0, -0.0), (math.nan, 0.0)]:
        counts = [start * 1.0]
        _append_count(counts, False, increment)
        assert counts[1] is not counts[0]
        expected = start + increment if start == start else 0.0 + increment
        assert bits(counts[1:]) == bits([expected])
    counts = [5.0]
    assert _append_count(counts, True, 0.0) == 0.0 and bits(counts) == bits([5.0, 0.0])
    assert _append_count([], False, 2.0) == 2.0


def test_a_steady_twins_series_hold_one_float_object_per_run_of_equal_samples() -> None:
    env = SimEnvironment(seed=4)
    env.provision()
    env.advance(600)
    repeats = shared = 0
    for series in env.series_store._index.values():
        for before, after in zip(series.values, series.values[1:], strict=False):
            if before == after and math.copysign(1.0, before) == math.copysign(1.0, after):
                repeats += 1
                shared += after is before
    assert repeats > 1000 and shared == repeats


def test_every_stored_series_is_keyed_by_its_labels_in_store_order() -> None:
    from itbench.environments.sim.telemetry.store import _sorted

    env = SimEnvironment(seed=4)
    env.provision()
    env.advance(120)
    keys = list(env.series_store._index)
    assert any(k[0][1].endswith("_bucket") for k in keys)
    assert all(key == _sorted(key) for key in keys)


def test_every_span_series_is_one_span_keys_and_its_key_knows_it_was_written() -> None:
    # The collector keeps the counts pending export by span key, one key per label set, and
    # tells whether a span's series exist from its key rather than from the store: both hold
    # only if each calls series in the store is exactly one written key's.
    env = SimEnvironment(seed=5)
    env.provision()
    env.inject("f", get_fault("flagd.payment-failure").changes({"percent": 50}, env.namespace))
    env.advance(300)
    env.remove("f")
    env.advance(120)
    keys = [key for spans in env._scraper._span_keys.values() for key in spans.values()]
    labels = [key.labels for key in keys]
    assert len(set(labels)) == len(labels)
    calls = ("__name__", "traces_span_metrics_calls_total")
    written = {
        key.labels if key.labels[0] == calls else (calls, *key.labels)
        for key in keys
        if key.handles is not None
    }
    stored = {key for key in env.series_store._index if key[0] == calls}
    assert written == stored
    errors = {key for key in keys if dict(key.labels)["status_code"] == "STATUS_CODE_ERROR"}
    # Error series exist for the spans that failed, and only for those.
    assert any(key.handles is not None for key in errors)
    assert any(key.handles is None for key in errors)


def test_a_latencys_shape_is_its_rounded_values_whether_or_not_seen_before() -> None:
    first = _cdf_key(Latency(12.3456, 0.01234, 456.789))
    again = _cdf_key(Latency(12.3456, 0.01234, 456.789))
    assert first == again == (12.3, 0.012, 456.8)
    assert _cdf_key(Latency(0.04, 0.0, 0.0)) == (0.0, 0.0, 0.0)


def test_each_loki_stream_carries_the_labels_of_its_pod() -> None:
    # A stream keeps the labels of its first line, so the scraper builds them only for a pod
    # whose log is new.
    from itbench.environments.sim.telemetry.logs import LogBook

    book = LogBook()
    assert not book.has("p")
    book.write("p", {"k8s_pod_name": "p"}, 1.0, "first")
    book.write("p", None, 2.0, "second")  # later lines keep the stream's labels
    assert book.has("p")
    assert [(labels, [x.line for x in lines]) for labels, lines in book.streams()] == [
        ({"k8s_pod_name": "p"}, ["first", "second"])
    ]
    env = SimEnvironment(seed=6)
    env.provision()
    env.advance(300)
    pods = {p["metadata"]["name"]: p for p in env.get_objects("Pod")}
    streams = list(env.log_book.streams())
    assert len(streams) > 10
    for labels, lines in streams:
        pod = pods.get(labels["k8s_pod_name"])
        if pod is None:
            continue  # a pod replaced since
        assert labels["service_instance_id"] == pod["metadata"]["uid"]
        assert labels["k8s_replicaset_name"] == pod["metadata"]["ownerReferences"][0]["name"]
        assert lines


def test_a_deferred_log_line_reads_as_the_line_written_at_once() -> None:
    from itbench.environments.sim.logql import LogLine
    from itbench.environments.sim.telemetry.logs import LogBook, info_line, info_text
    from itbench.environments.sim.traffic import OpStats

    calls: list[tuple[object, ...]] = []

    def render(*args: object) -> str:
        calls.append(args)
        return info_text(*args)  # type: ignore[arg-type]

    stats = OpStats(rate=12.345, error=0.0, latency=Latency(41.6, 0.1, 300.0))
    op, t = "oteldemo.CartService/GetCart", 1_767_225_600.25
    line = info_line(5.0, "cart", op, stats, t)
    args = ("cart", op, stats.rate, stats.latency.median_ms, t)
    book = LogBook()
    book.append("p", {"k8s_pod_name": "p"}, LogLine.deferred(5.0, render, args))
    book.write("p", None, 6.0, info_text(*args))
    assert line == LogLine(5.0, info_text(*args))  # the scraper's line: the same text
    assert not calls  # nothing is formatted until read
    (_, (deferred, eager)), *_ = book.streams()
    assert deferred.line == eager.line
    assert deferred.line.endswith("GetCart served at 12.35/s, median 42 ms")
    assert deferred == LogLine(5.0, eager.line) and deferred != LogLine(6.0, eager.line)
    assert book.tail("p", 2) == [eager.line, eager.line]
    assert len(calls) == 1  # formatted once, then kept
    assert repr(deferred) == f"LogLine(t=5.0, line={eager.line!r})"
