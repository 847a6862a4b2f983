"""An agent's telemetry queries on a cluster answer only its trial's namespace: a real Prometheus
scrapes the shop, a node, the platform's operator and kube-state-metrics (labelled as
kube-prometheus-stack's Prometheus Operator labels them: the namespace of each target, and
kube-state-metrics' own labels honoured), and the cluster environment's queries, with the
kubeconfig of the real control plane, never answer a series of the platform's namespace.

The exporters are small HTTP servers serving fixed expositions (the operator's metric names, a
Trial name that names its scenario, a Secret of an agent), standing in for the operator and
kube-state-metrics, whose pods cannot run here."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from itbench.environments.kube.endpoints import TelemetryUrls
from itbench.environments.kube.environment import ClusterEnvironment
from tests.kube_controlplane import ControlPlane

EXPOSITIONS = {
    "shop": 'traces_span_metrics_calls_total{service_name="cart",status_code="ERROR"} 7\n',
    "node": 'node_cpu_seconds_total{cpu="0",mode="idle"} 100\n',
    "operator": (
        'itbench_trial_phase{trial="first-checkout-memory-limit-e8b39b-0",phase="Running"} 1\n'
    ),
    "ksm": (
        'kube_secret_info{namespace="itbench-system",secret="first-checkout-0-agent"} 1\n'
        'kube_secret_info{namespace="otel-demo",secret="valkey-credentials"} 1\n'
        'kube_pod_info{namespace="otel-demo",pod="cart-1"} 1\n'
    ),
}
TARGET_NAMESPACE = {"shop": "otel-demo", "operator": "itbench-system", "ksm": "monitoring"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _exporter(text: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (apt-get install prometheus; .ci/run installs it)"
    workdir = tmp_path_factory.mktemp("prometheus")
    servers = {name: _exporter(text) for name, text in EXPOSITIONS.items()}
    jobs = []
    for name, server in servers.items():
        job: dict[str, Any] = {
            "job_name": name,
            "scrape_interval": "1s",
            "static_configs": [{"targets": [f"127.0.0.1:{server.server_address[1]}"]}],
        }
        if name in TARGET_NAMESPACE:
            job["relabel_configs"] = [
                {"target_label": "namespace", "replacement": TARGET_NAMESPACE[name]}
            ]
        if name == "ksm":
            job["honor_labels"] = True
        jobs.append(job)
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs}))
    port = _free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(f"{url}/api/v1/query", params={"query": "count(up == 1)"})
                result = answer.json()["data"]["result"]
                if result and result[0]["value"][1] == str(len(servers)):
                    break
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        else:
            raise AssertionError("Prometheus did not scrape every exporter in time")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        for server in servers.values():
            server.shutdown()


def _series(answer: dict[str, Any]) -> list[dict[str, str]]:
    return [row["metric"] for row in answer["result"]]


def test_queries_answer_only_the_trials_namespace_and_namespaceless_series(
    control_plane: ControlPlane, prometheus: str, tmp_path: Path
) -> None:
    env = ClusterEnvironment(
        kubeconfig=control_plane.kubeconfig,
        namespace="otel-demo",
        urls=TelemetryUrls(prometheus=prometheus),
    )
    now = datetime.now(UTC)
    try:
        unscoped = httpx.get(f"{prometheus}/api/v1/query", params={"query": '{__name__=~".+"}'})
        namespaces = {m.get("namespace") for m in _series(unscoped.json()["data"])}
        assert "itbench-system" in namespaces  # the platform's series are there to leak

        everything = _series(env.query_metrics('{__name__=~".+"}', now))
        assert {m.get("namespace") for m in everything} <= {"otel-demo", None}
        names = {m["__name__"] for m in everything}
        assert "traces_span_metrics_calls_total" in names  # the shop's
        assert "node_cpu_seconds_total" in names  # a node's (no namespace)
        assert "itbench_trial_phase" not in names  # the operator's: names the scenario
        secrets = _series(env.query_metrics('kube_secret_info{secret=~".*-agent"}', now))
        assert secrets == []
        asked = env.query_metrics('kube_secret_info{namespace="itbench-system"}', now)
        assert _series(asked) == []
        shop_secrets = _series(env.query_metrics("kube_secret_info", now))
        assert [m["secret"] for m in shop_secrets] == ["valkey-credentials"]
        ranged = env.query_metrics_range(
            '{__name__=~".+"}',
            now.replace(microsecond=0),
            now.replace(microsecond=0),
            15,
        )
        assert {m.get("namespace") for m in _series(ranged)} <= {"otel-demo", None}
        with pytest.raises(ValueError):
            env.query_metrics("sum(rate(", now)
    finally:
        env.close()
