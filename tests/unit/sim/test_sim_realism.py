"""Realism of the twin: propagation along the request path, Kafka isolation, live-stack telemetry
names, Jaeger-shaped traces, logs and events, and masking."""

from __future__ import annotations

from datetime import timedelta

from waiting import firing, inject, wait_for_alert

from itbench.core.models.base import TelemetryToggles
from itbench.environments.sim import SimEnvironment


def test_backend_fault_on_request_path_reaches_the_frontend(env: SimEnvironment) -> None:
    inject(env, "flagd.payment-failure", percent=100)
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "frontend"}, 400) is not None
    assert firing(env, "RequestErrorRate", {"service_name": "checkout"})
    snap = env.snapshot()
    assert snap.workload("frontend").error_ratio > 0.02  # type: ignore[union-attr]
    # Services off the failing path stay clean.
    assert snap.workload("ad").error_ratio == 0  # type: ignore[union-attr]
    assert snap.workload("currency").error_ratio == 0  # type: ignore[union-attr]


def test_checkout_drops_empty_cart_errors(env: SimEnvironment) -> None:
    # checkout ignores EmptyCart's error (`_ = cs.emptyUserCart(...)`): only cart fails.
    inject(env, "flagd.cart-failure")
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "cart"}, 400) is not None
    env.advance(120)
    assert not firing(env, "RequestErrorRate", {"service_name": "checkout"})
    assert env.snapshot().workload("checkout").error_ratio == 0  # type: ignore[union-attr]


def test_kafka_consumer_fault_does_not_raise_frontend_errors(env: SimEnvironment) -> None:
    inject(env, "kubernetes.scale-to-zero", workload="fraud-detection")
    fired = wait_for_alert(env, "KafkaConsumerLag", {"consumer_group": "fraud-detection"}, 1500)
    assert fired is not None
    assert firing(env, "NoRequests", {"service_name": "fraud-detection"})
    snap = env.snapshot()
    assert snap.workload("frontend").error_ratio == 0  # type: ignore[union-attr]
    assert snap.workload("checkout").error_ratio == 0  # type: ignore[union-attr]
    names = {a.alertname for a in env.alerts() if a.labels.get("service_name") == "frontend"}
    assert names == set()
    lag = env.query_metrics('kafka_consumer_group_lag_sum_ratio{group="accounting"}', env.now())
    assert float(lag["result"][0]["value"][1]) == 0.0


def test_kafka_queue_problems_grow_lag_only_where_a_consumer_sleeps(env: SimEnvironment) -> None:
    # Only fraud-detection evaluates kafkaQueueProblems (it sleeps a second per record).
    inject(env, "flagd.kafka-queue-problems")
    fired = wait_for_alert(env, "KafkaConsumerLag", {"consumer_group": "fraud-detection"}, 600)
    assert fired is not None
    assert not firing(env, "KafkaConsumerLag", {"consumer_group": "accounting"})
    assert not firing(env, "RequestErrorRate", {"service_name": "frontend"})


def test_span_metrics_carry_the_collector_names_and_labels(env: SimEnvironment) -> None:
    data = env.query_metrics(
        "sum by (service_name, span_kind, status_code) (rate(traces_span_metrics_calls_total"
        '{service_name="checkout", span_kind="SPAN_KIND_SERVER"}[2m]))',
        env.now(),
    )
    rows = data["result"]
    assert [r["metric"] for r in rows] == [
        {
            "service_name": "checkout",
            "span_kind": "SPAN_KIND_SERVER",
            "status_code": "STATUS_CODE_UNSET",
        }
    ]
    assert 0.05 < float(rows[0]["value"][1]) < 0.3
    p95 = env.query_metrics(
        "histogram_quantile(0.95, sum by (le) (rate(traces_span_metrics_duration_milliseconds_"
        'bucket{service_name="frontend", span_kind="SPAN_KIND_SERVER"}[5m])))',
        env.now(),
    )
    assert 5 < float(p95["result"][0]["value"][1]) < 1000


def test_kube_state_and_cadvisor_series_exist_per_workload(env: SimEnvironment) -> None:
    for query, expected in (
        ('kube_deployment_spec_replicas{deployment="cart"}', 1.0),
        ('kube_deployment_status_replicas_available{deployment="cart"}', 1.0),
        ('sum(kube_pod_status_ready{condition="true", pod=~"cart-.*"})', 1.0),
        ('sum(kube_pod_container_status_restarts_total{container="cart"})', 0.0),
        ('kube_horizontalpodautoscaler_spec_max_replicas{horizontalpodautoscaler="cart"}', 3.0),
    ):
        data = env.query_metrics(query, env.now())
        assert float(data["result"][0]["value"][1]) == expected, query
    memory = env.query_metrics('container_memory_working_set_bytes{container="cart"}', env.now())
    assert float(memory["result"][0]["value"][1]) == 90 * 2**20
    cpu = env.query_metrics(
        'rate(container_cpu_usage_seconds_total{container="frontend"}[2m])', env.now()
    )
    assert 0.005 < float(cpu["result"][0]["value"][1]) < 0.1


def test_replaced_pods_series_go_stale(env: SimEnvironment) -> None:
    old = {
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("cart-")
    }
    inject(env, "kubernetes.memory-limit", workload="cart", memory="200Mi")
    env.advance(120)
    data = env.query_metrics('kube_pod_status_ready{condition="true", pod=~"cart-.*"}', env.now())
    pods = {r["metric"]["pod"] for r in data["result"]}
    assert pods and pods.isdisjoint(old)


def test_traces_span_services_in_jaeger_shape(env: SimEnvironment) -> None:
    traces = env.search_traces("checkout", None, {}, env.now() - timedelta(minutes=2), env.now(), 5)
    assert 1 <= len(traces) <= 5
    trace = traces[0]
    services = {p["serviceName"] for p in trace["processes"].values()}
    assert {"frontend-proxy", "frontend", "checkout", "cart", "payment"} <= services
    span = trace["spans"][0]
    assert set(span) >= {
        "traceID",
        "spanID",
        "operationName",
        "references",
        "startTime",
        "duration",
        "tags",
        "processID",
    }
    ids = {s["spanID"] for s in trace["spans"]}
    refs = [r["spanID"] for s in trace["spans"] for r in s["references"]]
    assert refs and set(refs) <= ids
    assert all(s["startTime"] >= 1767225600 * 10**6 for s in trace["spans"])


def test_error_traces_name_the_failing_call(env: SimEnvironment) -> None:
    inject(env, "flagd.cart-failure")
    env.advance(120)
    traces = env.search_traces(
        "cart",
        "POST /oteldemo.CartService/EmptyCart",
        {"error": "true"},
        env.now() - timedelta(minutes=2),
        env.now(),
        3,
    )
    assert traces
    messages = [
        t["value"]
        for s in traces[0]["spans"]
        for t in s["tags"]
        if t["key"] == "otel.status_description"
    ]
    assert any("cart storage" in m for m in messages)


def test_logs_hold_realistic_error_lines(env: SimEnvironment) -> None:
    inject(env, "flagd.cart-failure")
    env.advance(120)
    data = env.query_logs(
        '{service_name="cart"} |= "EmptyCart"', env.now() - timedelta(minutes=2), env.now(), 50
    )
    lines = [v[1] for stream in data["result"] for v in stream["values"]]
    assert any("Wasn't able to connect to redis" in line for line in lines)
    (stream,) = data["result"]
    assert stream["stream"]["service_namespace"] == "otel-demo"
    assert stream["stream"]["k8s_deployment_name"] == "cart"
    # Uninstrumented programs ship no logs to Loki (kubectl logs still shows them).
    valkey = env.query_logs(
        '{service_name="valkey-cart"}', env.now() - timedelta(minutes=2), env.now(), 5
    )
    assert valkey["result"] == []


def test_events_record_image_pull_failures(env: SimEnvironment) -> None:
    inject(env, "kubernetes.nonexistent-image", workload="checkout", image="ghcr.io/x/y:nope")
    env.advance(60)
    reasons = {(e["reason"], e["type"]) for e in env.events()}
    assert ("Failed", "Warning") in reasons
    assert ("BackOff", "Normal") in reasons
    assert ("ScalingReplicaSet", "Normal") in reasons


def test_masked_signals_return_nothing() -> None:
    env = SimEnvironment(
        seed=1, telemetry=TelemetryToggles(traces=False, logs=False, metrics=False)
    )
    env.provision()
    env.advance(120)
    start, now = env.now() - timedelta(minutes=2), env.now()
    assert env.search_traces("frontend", None, {}, start, now, 10) == []
    assert env.query_logs('{service_name="frontend"}', start, now, 10)["result"] == []
    assert env.query_metrics("up", now)["result"] == []
    assert env.query_metrics_range("up", start, now, 15)["result"] == []
    pod = env.get_objects("Pod")[0]["metadata"]["name"]
    assert env.pod_logs(pod, 10) == []


def test_traces_off_keeps_alerts_working() -> None:
    env = SimEnvironment(seed=1, telemetry=TelemetryToggles(traces=False))
    env.provision()
    env.advance(60)
    inject(env, "flagd.cart-failure")
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "cart"}, 300) is not None
    assert env.search_traces("cart", None, {}, env.now() - timedelta(minutes=5), env.now(), 5) == []


def test_range_query_returns_a_matrix(env: SimEnvironment) -> None:
    data = env.query_metrics_range(
        'kube_deployment_status_replicas_ready{deployment="cart"}',
        env.now() - timedelta(minutes=1),
        env.now(),
        15,
    )
    assert data["resultType"] == "matrix"
    assert [v[1] for v in data["result"][0]["values"]] == ["1"] * 5
