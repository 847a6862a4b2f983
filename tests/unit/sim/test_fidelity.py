"""The twin and the fault contracts against the upstream snapshot of the pinned stack.

The snapshot (`itbench/stack/upstream/<chart>-<version>/`) is the rendered chart and the facts
read from the pinned upstream releases (see its provenance.yaml). Here the twin's objects, call
graph, span names, flags, load and series are compared with it, every fault's contract is checked
against it, and every point of the fidelity review has a test that would have caught it
(REVIEW_POINTS at the end).
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from waiting import inject, wait_for_alert

from itbench.catalog_files import load_catalog
from itbench.core.alert_rules import (
    EVALUATION_INTERVAL_SECONDS,
    QUIET_SERVICES,
    alert_rules,
    parse_duration,
)
from itbench.core.ciso.faults import BACKGROUND_FAULT, POLICY_SET_FAULT, SETTING_FAULT
from itbench.core.faults import Mechanism, ObjectChange, all_faults, get_fault
from itbench.core.shop import (
    COLLECTOR_KAFKA_BROKER,
    FLAG_BY_KEY,
    FLAG_EVALUATION,
    FLAGS,
    JVM_METHODS,
    KAFKA_CONSUMERS,
    LOAD_PATHS,
    LOAD_TASKS,
    LOAD_USERS,
    LOAD_WAIT_SECONDS,
    OPERATIONS,
    SERVICE_BY_NAME,
    Call,
    Operation,
    flag_variants,
    proxy_request_rates,
)
from itbench.environments.sim import SimEnvironment
from itbench.environments.sim.actions import BUILTIN_GROUPS
from itbench.environments.sim.chaosmesh import SCHEDULE_FIELDS
from itbench.environments.sim.environment import SCRAPE_SECONDS
from itbench.environments.sim.objects import (
    MergePatchError,
    address_of,
    api_defaults,
    baseline_objects,
    merge_patch,
    resolve_env,
)
from itbench.environments.sim.registry import DEMO_REPOSITORY, SINGLE_ARCH_IMAGES
from itbench.environments.sim.telemetry.cluster_metrics import KSM_TARGET, KUBELET_TARGET
from itbench.environments.sim.telemetry.traces import SERVICE_NAMESPACE
from itbench.stack import (
    STACK_DIR,
    chart_objects,
    chart_pin,
    demo_version,
    pins,
    release,
    snapshot,
    snapshot_dir,
    stack_manifests,
)
from tests.unit.test_fault_library import SAMPLE_ARGS

ROOT = Path(__file__).resolve().parents[3]
NS = release()["namespace"]
CHART = chart_objects()
SPANS = snapshot("spans.yaml")
SERIES = snapshot("series.yaml")
BEHAVIOUR = snapshot("behaviour.yaml")
CHAOS = snapshot("chaos-mesh.yaml")["kinds"]
README = ROOT / "scenarios" / "sre" / "README.md"
PLAYBOOKS = ROOT / "itbench" / "environments" / "kube" / "playbooks"


def _of(kind: str, objects: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in (objects or CHART) if o["kind"] == kind}


def _pod(deployment: str) -> dict[str, Any]:
    spec: dict[str, Any] = _of("Deployment")[deployment]["spec"]["template"]["spec"]
    return spec


def _container(name: str) -> dict[str, Any]:
    for deployment in _of("Deployment").values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if container["name"] == name:
                out: dict[str, Any] = container
                return out
    raise KeyError(name)


def _catalog_faults() -> list[tuple[str, str, dict[str, Any]]]:
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert not problems
    return [(s.metadata.name, f.id, dict(f.args)) for s in catalog for f in s.spec.faults]


CISO_FAULTS = frozenset({SETTING_FAULT, POLICY_SET_FAULT, BACKGROUND_FAULT})


def _fault_cases() -> list[tuple[str, dict[str, Any]]]:
    """Every fault with sample arguments, and every fault reference of the catalog."""
    cases = {f.id: {} for f in all_faults()} | {k: dict(v) for k, v in SAMPLE_ARGS.items()}
    out = {(fid, repr(sorted(args.items()))): (fid, args) for fid, args in cases.items()}
    for _, fid, args in _catalog_faults():
        out[(fid, repr(sorted(args.items())))] = (fid, args)
    # The CISO faults change the compliance twin's own objects and host, not the Astronomy Shop:
    # their contracts are checked by the CISO tests, not against the shop's snapshot.
    return [out[k] for k in sorted(out) if out[k][0] not in CISO_FAULTS]


FAULT_CASES = _fault_cases()


# ---- the pin and the snapshot ---------------------------------------------------------------


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_snapshot_is_of_the_pinned_chart_rendered_with_the_stack_values() -> None:
    provenance = snapshot("provenance.yaml")
    demo = chart_pin("opentelemetry-demo")
    assert snapshot_dir().name == f"opentelemetry-demo-{demo['version']}"
    assert provenance["pins"] == _sha256(STACK_DIR / "pins.yaml"), "regenerate the snapshot"
    chart = provenance["files"]["chart.yaml"]
    assert chart["tag"] == demo["source"]["tag"] and chart["commit"] == demo["source"]["commit"]
    assert chart["values_sha256"] == _sha256(STACK_DIR / demo["values"])
    collector = chart_pin("opentelemetry-collector")
    assert chart["subchart"]["commit"] == collector["source"]["commit"]


def test_every_chart_object_is_of_the_pinned_release() -> None:
    version = demo_version()
    for obj in CHART:
        labels = obj["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/part-of") == "opentelemetry-demo":
            assert labels.get("app.kubernetes.io/version") == version, obj["metadata"]["name"]
    for deployment in _of("Deployment").values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            image = container["image"]
            if image.startswith(DEMO_REPOSITORY + ":"):
                assert image.endswith(f":{version}-{container['name']}"), image


_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+\.\d+)(?![\w.])")


def test_versions_are_named_only_in_the_pin_file() -> None:
    stack = pins()
    pinned = {str(c["version"]) for c in stack["charts"].values()}
    pinned |= {demo_version(), str(chart_pin("opentelemetry-collector")["appVersion"])}
    offenders = []
    for path in [
        *(ROOT / "itbench").rglob("*.py"),
        *PLAYBOOKS.rglob("*.yaml"),
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "README.md",
    ]:
        if STACK_DIR in path.parents:
            continue
        found = set(_VERSION.findall(path.read_text(encoding="utf-8"))) & pinned
        if found:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(found)}")
    assert offenders == []


# ---- objects ---------------------------------------------------------------------------------


def test_baseline_objects_are_the_rendered_chart_as_the_api_server_stores_it() -> None:
    twin = baseline_objects(NS)
    keyed = {(o["kind"], o["metadata"]["name"]): o for o in twin}
    for obj in CHART:
        assert keyed[(obj["kind"], obj["metadata"]["name"])] == api_defaults(obj)
    extra = {k for k in keyed} - {(o["kind"], o["metadata"]["name"]) for o in CHART}
    manifests = {(o["kind"], o["metadata"]["name"]) for o in stack_manifests("autoscaling.yaml")}
    assert {k for k in extra if k[0] not in ("Namespace", "Node", "PrometheusRule")} == manifests


def test_each_call_hands_out_its_own_baseline_objects() -> None:
    # Environments change their objects in place: one environment's edits never reach the next.
    first = baseline_objects(NS)
    pristine = baseline_objects(NS)
    deployment = next(o for o in first if o["kind"] == "Deployment")
    deployment["spec"]["replicas"] = 7
    deployment["spec"]["template"]["metadata"].setdefault("labels", {})["edited"] = "yes"
    first[0]["metadata"]["labels"]["edited"] = "yes"
    again = baseline_objects(NS)
    assert again == pristine
    assert all(a is not b for a, b in zip(again, pristine, strict=True))


def test_service_ports_are_named_as_the_chart_names_them() -> None:
    twin = _of("Service", baseline_objects(NS))
    for name, service in _of("Service").items():
        ports = [(p.get("name"), p["port"]) for p in service["spec"]["ports"]]
        assert [(p.get("name"), p["port"]) for p in twin[name]["spec"]["ports"]] == ports
    assert [p["name"] for p in twin["kafka"]["spec"]["ports"]] == ["plaintext", "controller"]
    assert [p["name"] for p in twin["valkey-cart"]["spec"]["ports"]] == ["valkey-cart"]
    assert [p["name"] for p in twin["flagd"]["spec"]["ports"]] == ["rpc", "ofrep", "tcp-service-0"]


def test_flagd_runs_the_ui_sidecar_and_copies_its_config_at_start() -> None:
    pod = _pod("flagd")
    assert [c["name"] for c in pod["containers"]] == ["flagd", "flagd-ui"]
    assert [c["name"] for c in pod["initContainers"]] == ["init-config"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    config = next(n for n, v in volumes.items() if "configMap" in v)
    assert volumes[config]["configMap"]["name"] == "flagd-config"
    init_mounts = {m["name"] for m in pod["initContainers"][0]["volumeMounts"]}
    flagd_mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert config in init_mounts and config not in flagd_mounts
    assert all("emptyDir" in volumes[n] for n in flagd_mounts)
    uri = next(a for a in pod["containers"][0]["command"] if a.startswith("file:"))
    assert any(uri[len("file:") :].lstrip(".").startswith(p) for p in flagd_mounts.values())


def test_every_container_requests_cpu_so_autoscalers_cost_and_cfs_series_work() -> None:
    # Every component's container; the chart's flagd-ui sidecar keeps its own (memory) limits.
    for name, deployment in _of("Deployment").items():
        for container in deployment["spec"]["template"]["spec"]["containers"][:1]:
            resources = container.get("resources") or {}
            assert "cpu" in (resources.get("requests") or {}), (name, container["name"])
            assert "cpu" in (resources.get("limits") or {}), (name, container["name"])
    for hpa in stack_manifests("autoscaling.yaml"):
        target = hpa["spec"]["scaleTargetRef"]["name"]
        assert target in _of("Deployment")
    assert "metrics-server" in pins()["charts"]


def test_the_baseline_holds_no_object_the_stack_does_not_install() -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in baseline_objects(NS)}
    assert ("ConfigMap", "cost-alert-config") not in names
    assert ("Secret", "opentelemetry-demo-credentials") not in names


# ---- flags -----------------------------------------------------------------------------------


def test_the_twin_knows_exactly_the_pinned_flags_and_their_variants() -> None:
    flags = snapshot("flags.yaml")["flags"]
    assert {f.key for f in FLAGS} == set(flags)
    config = _of("ConfigMap")["flagd-config"]["data"]["demo.flagd.json"]
    assert flag_variants(config) == {k: v["variants"] for k, v in flags.items()}


def _flag_callers() -> set[str]:
    return {op.service for op in OPERATIONS for c in op.calls if c.operation == FLAG_EVALUATION} | {
        "load-generator"
    }


def test_the_services_that_evaluate_flags_are_the_ones_that_call_flagd() -> None:
    flags = snapshot("flags.yaml")["flags"]
    evaluating = {s for f in flags.values() for s in f["services"]}
    # flagd-ui edits flags; the frontend's only flag (imageSlowLoad) is read in the browser.
    assert _flag_callers() == evaluating - {"flagd-ui", "frontend"}
    for flag in FLAGS:
        services = set(flags[flag.key]["services"])
        assert services & {flag.service, flag.caller, "checkout"}, flag.key


def _operation(service: str, name: str) -> Operation:
    return next(o for o in OPERATIONS if o.service == service and o.name == name)


@pytest.mark.parametrize("fact", sorted(BEHAVIOUR["facts"]))
def test_the_twin_behaves_as_the_pinned_programs(fact: str) -> None:
    entry = BEHAVIOUR["facts"][fact]
    assert entry["evidence"] in BEHAVIOUR["sources"]["demo"]["files"]
    twin = entry["twin"]
    for key, value in twin.items():
        if key == "startup_dependency":
            spec = SERVICE_BY_NAME[value["service"]]
            assert spec.startup_dependency == (value["env"], value["protocol"])
        elif key == "call":
            op = _operation(value["service"], value["operation"])
            calls = [
                c
                for c in op.calls
                if c.service == value["callee"] and c.operation == value["callee_operation"]
            ]
            assert calls and {c.mode for c in calls} == {value["mode"]}
        elif key in ("flag", "flags"):
            for item in value if key == "flags" else [value]:
                flag = FLAG_BY_KEY[item["key"]]
                for field in ("service", "effect", "caller", "operation"):
                    if field in item:
                        assert getattr(flag, field) == item[field], (fact, field)
        elif key == "consumer":
            consumer = next(k for k in KAFKA_CONSUMERS if k.service == value["service"])
            assert consumer.flag_delay_seconds == value["flag_delay_seconds"]
        elif key == "jvm_methods":
            for service, methods in value.items():
                assert set(JVM_METHODS[service]) == set(methods)
        else:
            raise AssertionError(f"{fact}: unknown twin datum {key}")


def test_every_flag_fault_rolls_flagd_out_after_changing_the_configmap() -> None:
    for fault in all_faults():
        if fault.mechanism != Mechanism.FLAGD:
            continue
        contract = fault.contract({}, NS)
        ops = [(c.op, c.kind, c.name) for c in contract.changes]
        assert ops[-1] == ("rollout", "Deployment", "flagd"), fault.id
        assert contract.activation == "rollout Deployment/flagd"
    text = (PLAYBOOKS / "faults" / "flagd.yaml").read_text(encoding="utf-8")
    assert "hot reload" not in text and "without a restart" not in text


def test_a_configmap_edit_alone_does_not_reach_flagd_in_the_twin() -> None:
    env = SimEnvironment(seed=3)
    env.provision()
    env.advance(60)
    changes = get_fault("flagd.payment-failure").changes({"percent": 100}, NS)
    assert env.inject("cm-only", [c for c in changes if c.op != "rollout"])
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "payment"}, 300) is None
    assert env.inject("rollout", [c for c in changes if c.op == "rollout"])
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "payment"}, 400) is not None


# ---- load ------------------------------------------------------------------------------------


def test_the_load_is_the_locustfiles_http_user() -> None:
    load = snapshot("load.yaml")["users"]
    http = next(u for u in load.values() if u["base"] == "HttpUser")
    assert {t["name"]: t["weight"] for t in http["tasks"]} == {t.name: t.weight for t in LOAD_TASKS}
    low, high = http["waitTime"]["args"]
    assert (low + high) / 2 == LOAD_WAIT_SECONDS
    for task in http["tasks"]:
        ours = next(t for t in LOAD_TASKS if t.name == task["name"])
        routes = []
        for request in task["requests"]:
            route = LOAD_PATHS[request["path"]]
            routes.append(route if " " in route else f"{request['method']} {route}")
        assert [r for r, _ in ours.requests] == routes, task["name"]
    env = {e["name"]: e.get("value") for e in _container("load-generator")["env"]}
    assert int(env["LOCUST_USERS"]) == LOAD_USERS
    assert env["LOCUST_BROWSER_TRAFFIC_ENABLED"] == "false"
    assert not any("image" in r for t in LOAD_TASKS for r, _ in t.requests)


def test_browser_only_flags_have_no_effect_and_no_fault() -> None:
    assert FLAG_BY_KEY["imageSlowLoad"].effect == "none"
    assert "flagd.image-slow-load" not in {f.id for f in all_faults()}


def test_frontend_routes_call_what_the_pages_call() -> None:
    assert _operation("frontend", "GET /").calls == ()
    product = _operation("frontend", "GET /api/products/{productId}")
    assert [c.operation for c in product.calls] == ["oteldemo.ProductCatalogService/GetProduct"]
    cart = _operation("frontend", "POST /api/cart")
    assert [c.operation for c in cart.calls] == [
        "POST /oteldemo.CartService/AddItem",
        "POST /oteldemo.CartService/GetCart",
    ]
    base, flood = proxy_request_rates(0), proxy_request_rates(100)
    assert {r for r in flood if flood[r] != base[r]} == {"GET /"}


def test_product_catalog_evaluates_its_flag_for_one_product_only() -> None:
    get = _operation("product-catalog", "oteldemo.ProductCatalogService/GetProduct")
    assert [c.count for c in get.calls if c.operation == FLAG_EVALUATION] == [0.1]
    listing = _operation("product-catalog", "oteldemo.ProductCatalogService/ListProducts")
    assert not [c for c in listing.calls if c.operation == FLAG_EVALUATION]


# ---- call graph and span names ----------------------------------------------------------------


def _services() -> dict[str, dict[str, Any]]:
    return _of("Service")


def _lookup(kind: str, name: str, key: str) -> str | None:
    for obj in CHART:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            data = obj.get("stringData") or obj.get("data") or {}
            value = data.get(key)
            return None if value is None else str(value)
    return None


def _edges() -> Iterator[tuple[Operation, Call]]:
    for op in OPERATIONS:
        for call in op.calls:
            yield op, call


def test_every_call_reaches_its_callee_through_the_charts_address() -> None:
    services = _services()
    for op, call in _edges():
        env = resolve_env(_container(op.service), _lookup)
        host, port, _ = address_of(env, call.address_env, call.protocol)
        assert host is not None, (op.service, call.address_env)
        name = host.split(".", 1)[0]
        callee = SERVICE_BY_NAME[call.service]
        assert name == callee.deployment, (op.service, call.address_env, host)
        assert port in {p["port"] for p in services[name]["spec"]["ports"]}, (op.service, port)


def _exported(service: str) -> set[str]:
    return {o.exported for o in OPERATIONS if o.service == service}


def test_server_and_consumer_span_names_are_the_exported_ones() -> None:
    for section in ("server", "consumer"):
        for service, entries in SPANS[section].items():
            assert _exported(service) == {e["exported"] for e in entries}, service
    instrumented = {s for s in SERVICE_BY_NAME.values() if s.instrumented}
    spanned = set(SPANS["server"]) | set(SPANS["consumer"])
    # image-provider serves only browsers' image requests (none with the stack's load).
    assert {s.name for s in instrumented} - spanned == {"image-provider", "load-generator"}
    assert {u["service"] for u in SPANS["uninstrumented"]} == {
        s.name for s in SERVICE_BY_NAME.values() if not s.instrumented
    } - {"flagd-ui", "opentelemetry-collector"}


def _semconv(kind: str, attributes: dict[str, str]) -> str:
    """The collector's set_semconv_span_name rule, as spans.yaml states it."""
    method = attributes.get("http.request.method") or attributes.get("http.method")
    if kind in ("consumer", "producer"):
        return f"{attributes['messaging.operation']} {attributes['messaging.destination.name']}"
    if method:
        route = attributes.get("http.route") if kind == "server" else attributes.get("url.template")
        return f"{method} {route}" if route else method
    if "rpc.service" in attributes:
        return f"{attributes['rpc.service']}/{attributes['rpc.method']}"
    if "gen_ai.operation.name" in attributes:
        return "chat astronomy-llm"
    raise AssertionError(attributes)


def test_every_exported_name_follows_the_collectors_renaming() -> None:
    for section in ("server", "consumer", "producer", "client"):
        for entries in SPANS[section].values():
            for entry in entries:
                assert _semconv(section, entry["attributes"]) == entry["exported"], entry


def test_client_span_names_are_the_exported_ones() -> None:
    clients = {
        (s, e["exported"])
        for section in ("client", "producer")
        for s, entries in SPANS[section].items()
        for e in entries
    }
    for op, call in _edges():
        if call.span and call.protocol in ("http", "kafka") and op.service in SPANS["client"]:
            assert (op.service, call.span) in clients, (op.service, call.span)


# ---- series ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def warm() -> SimEnvironment:
    twin = SimEnvironment(seed=11)
    twin.provision()
    twin.advance(180)
    return twin


def _series(env: SimEnvironment, name: str) -> list[dict[str, str]]:
    result = env.query_metrics(name, env.now())["result"]
    return [dict(r["metric"]) for r in result]


def test_kube_state_metrics_series_carry_the_exporters_labels_and_the_scrapes(
    warm: SimEnvironment,
) -> None:
    documented = SERIES["kube-state-metrics"]["metrics"]
    assert SERIES["scrape"]["kube-state-metrics"]["honorLabels"] is True
    scrape = {k for k, _ in KSM_TARGET} | {"namespace", "pod"}
    names = [
        n
        for n in documented
        if n.startswith(("kube_deployment_s", "kube_pod_", "kube_horizontalpodautoscaler_s"))
    ]
    written = 0
    for name in names:
        for labels in _series(warm, name):
            written += 1
            own = set(labels) - {"__name__"}
            # A label whose value is empty is not stored (a pod with no priority class).
            missing = set(documented[name]) - own
            assert missing <= {"priority_class", "host_ip", "pod_ip"}, (name, missing)
            assert own - set(documented[name]) <= scrape, (name, own - set(documented[name]))
    assert written > 100


def _dropped(labels: dict[str, str]) -> bool:
    for rule in SERIES["scrape"]["kubelet"]["cAdvisorMetricRelabelings"]:
        joined = ";".join(labels.get(s, "") for s in rule["sourceLabels"])
        if rule["action"] == "drop" and re.fullmatch(rule["regex"], joined):
            return True
    return False


def test_cadvisor_series_are_the_ones_kube_prometheus_stack_keeps(warm: SimEnvironment) -> None:
    assert SERIES["scrape"]["kubelet"]["honorLabels"] is True
    assert dict(KUBELET_TARGET)["metrics_path"] == "/metrics/cadvisor"
    for name in SERIES["cadvisor"]["metrics"]:
        series = _series(warm, name)
        assert series, name
        for labels in series:
            assert not _dropped(labels), labels
            assert labels.get("pod"), labels
    limited = {
        c["name"]
        for c in (_container(n) for n in SERVICE_BY_NAME)
        if "cpu" in c["resources"]["limits"]
    }
    cfs = {s["container"] for s in _series(warm, "container_cpu_cfs_periods_total")}
    assert cfs - {""} <= limited


def test_cfs_series_exist_only_for_containers_with_a_cpu_limit() -> None:
    env = SimEnvironment(seed=5)
    env.provision()
    env.advance(60)
    patch = ObjectChange(
        op="merge-patch",
        api_version="apps/v1",
        kind="Deployment",
        name="ad",
        namespace=NS,
        body={
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "ad", "resources": {"limits": {"cpu": None}}}]}
                }
            }
        },
    )
    assert env.inject("no-cpu-limit", [patch])
    env.advance(180)
    pods = {
        p["metadata"]["name"]
        for p in env.get_objects("Pod")
        if p["metadata"]["name"].startswith("ad-")
    }
    result = env.query_metrics('container_cpu_cfs_periods_total{container="ad"}', env.now())
    assert {r["metric"]["pod"] for r in result["result"]} & pods == set()


def test_span_and_kafka_series_have_the_names_upstream_rules_read(warm: SimEnvironment) -> None:
    names = set(SERIES["collector"]["metrics"])
    assert {"traces_span_metrics_calls_total", "kafka_consumer_group_lag_sum_ratio"} <= names
    for name in (
        "traces_span_metrics_calls_total",
        "traces_span_metrics_duration_milliseconds_bucket",
        "kafka_consumer_group_lag_sum_ratio",
    ):
        assert _series(warm, name), name
    # kafkametrics' kafka.consumer_group.lag is a unit-"1" gauge: Prometheus stores it with
    # `_ratio` (receiver metadata.yaml, checked with promtool); the bare name never exists.
    assert _series(warm, "kafka_consumer_group_lag_ratio")
    assert not _series(warm, "kafka_consumer_group_lag")
    rules = " ".join(r.expr for r in alert_rules(NS))
    assert "kafka_consumer_group_lag_sum_ratio" in rules


def test_the_collector_scrapes_kafka_and_exports_for_prometheus() -> None:
    config = yaml.safe_load(_of("ConfigMap")["otel-collector"]["data"]["relay"])
    receiver = config["receivers"]["kafkametrics"]
    assert receiver["brokers"] == [COLLECTOR_KAFKA_BROKER] and "consumers" in receiver["scrapers"]
    pipeline = config["service"]["pipelines"]["metrics"]
    assert "kafkametrics" in pipeline["receivers"] and "spanmetrics" in pipeline["receivers"]
    assert "prometheus" in pipeline["exporters"]


def test_every_alert_rule_reads_only_series_an_exporter_writes() -> None:
    known = set(SERIES["kube-state-metrics"]["metrics"]) | set(SERIES["cadvisor"]["metrics"])
    known |= set(SERIES["collector"]["metrics"])
    known |= {"traces_span_metrics_duration_milliseconds_bucket"}
    for documented in (
        "kube_pod_container_resource_requests",
        "kube_pod_container_resource_limits",
    ):
        assert documented in known
    for rule in alert_rules(NS):
        for name in re.findall(r"\b((?:kube|container|traces|kafka|itbench)_[a-z_]+)\b", rule.expr):
            assert name in known, (rule.name, name)


def test_no_alert_fires_on_the_healthy_shop_and_quiet_services_are_left_out() -> None:
    assert {"flagd", "load-generator"} <= set(QUIET_SERVICES)
    env = SimEnvironment(seed=13)
    env.provision()
    env.advance(1800)
    assert env.alerts() == []


# ---- faults ----------------------------------------------------------------------------------


def _schema_for(
    kind: str, spec: dict[str, Any]
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    schema = CHAOS[kind]["schema"]["properties"]["spec"]
    out = [(kind, schema, spec)]
    if kind == "Schedule":
        inner_kind = spec["type"]
        key = SCHEDULE_FIELDS[inner_kind]
        own = {k: v for k, v in spec.items() if k != key}
        out = [(kind, schema, own), *_schema_for(inner_kind, spec[key])]
    return out


def _chaos_changes(fid: str, args: dict[str, Any]) -> list[ObjectChange]:
    return [
        c
        for c in get_fault(fid).changes(args, NS)
        if c.op == "create" and c.api_version.startswith("chaos-mesh.org")
    ]


@pytest.mark.parametrize(("fid", "args"), [c for c in FAULT_CASES if c[0].startswith("chaos.")])
def test_every_chaos_object_is_valid_for_the_pinned_crds(fid: str, args: dict[str, Any]) -> None:
    changes = _chaos_changes(fid, args)
    assert changes
    for change in changes:
        assert change.kind in CHAOS
        assert change.api_version == f"chaos-mesh.org/{CHAOS[change.kind]['version']}"
        for kind, schema, spec in _schema_for(change.kind, change.body["spec"]):
            jsonschema.validate(spec, schema, cls=jsonschema.Draft4Validator)
            assert set(spec) <= set(schema["properties"]), (
                kind,
                set(spec) - set(schema["properties"]),
            )


def test_scheduled_chaos_validates_too() -> None:
    from itbench.core.fault_library import _SCHEDULE_FIELD

    assert {k: SCHEDULE_FIELDS[k] for k in _SCHEDULE_FIELD} == _SCHEDULE_FIELD
    for fault in all_faults():
        if fault.id.startswith("chaos."):
            args = {**SAMPLE_ARGS.get(fault.id, {}), "schedule": "@every 1m", "duration": "55s"}
            for change in _chaos_changes(fault.id, args):
                assert change.kind == "Schedule"
                for _, schema, spec in _schema_for("Schedule", change.body["spec"]):
                    jsonschema.validate(spec, schema, cls=jsonschema.Draft4Validator)


def test_jvm_return_sets_return_value_on_a_method_the_ad_program_declares() -> None:
    spec = _chaos_changes("chaos.jvm-return", {"workload": "ad"})[0].body["spec"]
    assert "returnValue" in CHAOS["JVMChaos"]["schema"]["properties"]["spec"]["properties"]
    assert spec["returnValue"] and "value" not in spec
    method = f"{spec['class']}.{spec['method']}"
    assert method in JVM_METHODS["ad"] and JVM_METHODS["ad"][method] != "void"
    assert "oteldemo.AdService.getAds" not in JVM_METHODS["ad"]


def test_an_invalid_jvm_rule_is_never_injected_in_the_twin() -> None:
    env = SimEnvironment(seed=2)
    env.provision()
    env.advance(60)
    inject(env, "chaos.jvm-return", workload="ad", class_name="oteldemo.AdService", method="getAds")
    env.advance(60)
    # The platform's view: agents are not served Chaos Mesh kinds.
    (chaos,) = env._cluster.of_kind("JVMChaos")
    conditions = {c["type"]: c["status"] for c in chaos["status"]["conditions"]}
    assert conditions["AllInjected"] == "False"
    assert wait_for_alert(env, "RequestErrorRate", {"service_name": "ad"}, 240) is None


def test_pod_failure_leaves_pods_ready_running_the_pause_image() -> None:
    env = SimEnvironment(seed=4)
    env.provision()
    env.advance(60)
    inject(env, "chaos.pod-failure", workload="fraud-detection")
    env.advance(120)
    pods = [
        p for p in env.get_objects("Pod") if p["metadata"]["name"].startswith("fraud-detection-")
    ]
    assert pods
    for pod in pods:
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"]
        assert ready == "True"
        assert {c["image"] for c in pod["spec"]["containers"]} == {
            "gcr.io/google-containers/pause:latest"
        }
    assert wait_for_alert(env, "PodNotReady", {"deployment": "fraud-detection"}, 180) is None


def _requirement_holds(kind: str, name: str, field: str) -> bool:
    if kind == "Flag":
        flags = snapshot("flags.yaml")["flags"]
        return name in flags and (not field or field in flags[name]["variants"])
    objects = {**_of(kind), **_of(kind, baseline_objects(NS))}
    if name not in objects:
        return False
    if not field:
        return True
    match = re.fullmatch(r"spec\.template\.spec\.containers\[name=(.+)\]", field)
    assert match, field
    containers = objects[name]["spec"]["template"]["spec"]["containers"]
    return match.group(1) in {c["name"] for c in containers}


@pytest.mark.parametrize(("fid", "args"), FAULT_CASES)
def test_every_fault_contract_holds_against_the_snapshot(fid: str, args: dict[str, Any]) -> None:
    contract = get_fault(fid).contract(args, NS)
    for req in contract.requires:
        assert _requirement_holds(req.kind, req.name, req.field), (fid, req)
    objects = {(o["kind"], o["metadata"]["name"]): o for o in baseline_objects(NS)}
    for change in contract.changes:
        if change.op != "merge-patch":
            continue
        target = objects[(change.kind, change.name)]
        patched = merge_patch(
            target,
            change.body,
            strategic=change.api_version in BUILTIN_GROUPS,
            kind=change.kind,
        )
        assert patched != target, (fid, change.kind, change.name)
        if change.kind == "Service":
            for port in patched["spec"]["ports"]:
                assert "port" in port, (fid, port)
    for change in contract.changes:
        if change.op == "set-flag":
            assert change.variant in snapshot("flags.yaml")["flags"][change.flag]["variants"]


def test_service_ports_merge_by_port_as_the_api_server_merges_them() -> None:
    service = _of("Service", baseline_objects(NS))["flagd"]
    with pytest.raises(MergePatchError, match="does not contain declared merge key: port"):
        merge_patch(
            service, {"spec": {"ports": [{"name": "rpc", "targetPort": 1}]}}, kind="Service"
        )
    patched = merge_patch(
        service, {"spec": {"ports": [{"port": 8013, "targetPort": 1}]}}, kind="Service"
    )
    first = patched["spec"]["ports"][0]
    assert (first["name"], first["targetPort"]) == ("rpc", 1)
    assert len(patched["spec"]["ports"]) == len(service["spec"]["ports"])


def test_the_wrong_architecture_image_is_a_published_single_architecture_image() -> None:
    change = next(
        c
        for c in get_fault("kubernetes.wrong-arch-image").changes({"workload": "cart"}, NS)
        if c.op == "merge-patch"
    )
    image = change.body["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image in SINGLE_ARCH_IMAGES and not image.startswith(DEMO_REPOSITORY)
    assert "amd64" not in SINGLE_ARCH_IMAGES[image]


# ---- the live stack's wiring ------------------------------------------------------------------


def test_the_live_stack_is_wired_as_the_twin_assumes() -> None:
    kps = chart_pin("kube-prometheus-stack")
    monitor = _of("ServiceMonitor")["otel-collector"]
    assert monitor["metadata"]["labels"]["release"] == kps["release"]
    config = yaml.safe_load(_of("ConfigMap")["otel-collector"]["data"]["relay"])
    loki = chart_pin("loki")
    jaeger = chart_pin("jaeger")
    exporters = config["exporters"]
    assert exporters["prometheus"]["endpoint"].endswith(":8888")
    assert f"loki-gateway.{loki['namespace']}" in exporters["otlphttp/loki"]["endpoint"]
    assert exporters["otlp/jaeger"]["endpoint"].startswith(f"jaeger.{jaeger['namespace']}")
    assert config["service"]["pipelines"]["logs"]["exporters"][0] == "otlphttp/loki"
    chaos = yaml.safe_load((STACK_DIR / chart_pin("chaos-mesh")["values"]).read_text())
    assert chaos["chaosDaemon"]["runtime"] == "containerd"
    assert chaos["chaosDaemon"]["socketPath"] == "/run/containerd/containerd.sock"
    for name, chart in pins()["charts"].items():
        if "values" in chart:
            assert (STACK_DIR / chart["values"]).is_file(), name
    create = (PLAYBOOKS / "faults" / "object-create.yaml").read_text(encoding="utf-8")
    assert "AllInjected" in create


def test_the_twin_scrapes_every_target_at_the_stacks_interval() -> None:
    # kube-prometheus-stack's values leave the kubelet's and kube-state-metrics' ServiceMonitor
    # intervals empty (Prometheus' own interval; values.yaml at the pinned commit), and the
    # collector's ServiceMonitor sets none: every target is scraped at the stack's interval.
    values = yaml.safe_load(
        (STACK_DIR / chart_pin("kube-prometheus-stack")["values"]).read_text(encoding="utf-8")
    )
    spec = values["prometheus"]["prometheusSpec"]
    assert parse_duration(spec["scrapeInterval"]) == SCRAPE_SECONDS
    assert parse_duration(spec["evaluationInterval"]) == EVALUATION_INTERVAL_SECONDS
    monitor = _of("ServiceMonitor")["otel-collector"]
    assert all("interval" not in e for e in monitor["spec"]["endpoints"])
    twin = SimEnvironment(seed=5)
    twin.provision()
    twin.advance(300)
    for name in (
        "traces_span_metrics_calls_total",
        "kube_pod_info",
        "container_cpu_usage_seconds_total",
    ):
        series = max(twin.series_store.series_named(name), key=lambda s: len(s.timestamps))
        gaps = {b - a for a, b in zip(series.timestamps, series.timestamps[1:], strict=False)}
        assert gaps == {SCRAPE_SECONDS}, (name, gaps)


# ---- coverage against upstream ITBench -------------------------------------------------------


def _coverage_rows() -> dict[int, tuple[str, str]]:
    rows: dict[int, tuple[str, str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\|\s*(\d+)\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|", line.strip())
        if m:
            rows[int(m.group(1))] = (m.group(2), m.group(3))
    return rows


def test_every_itbench_scenario_is_covered_or_dropped_with_a_reason() -> None:
    upstream = snapshot("itbench.yaml")["scenarios"]
    rows = _coverage_rows()
    assert {s["id"] for s in upstream} == set(rows)
    catalog, _ = load_catalog(ROOT / "scenarios")
    names = {s.metadata.name for s in catalog}
    for sid, (ours, why) in rows.items():
        if ours in ("", "—", "-"):
            assert why, f"ITBench scenario {sid}: dropped without a reason"
            continue
        for name in re.findall(r"`([a-z0-9-]+)`", ours):
            assert name in names, (sid, name)


# ---- every point of the review ---------------------------------------------------------------

REVIEW_POINTS: dict[int, tuple[str, ...]] = {
    1: (
        "test_every_flag_fault_rolls_flagd_out_after_changing_the_configmap",
        "test_a_configmap_edit_alone_does_not_reach_flagd_in_the_twin",
        "test_flagd_runs_the_ui_sidecar_and_copies_its_config_at_start",
        "tests.unit.sim.test_sim_physics::test_a_flagd_config_edit_takes_effect_only_when_flagd_rolls_out",
    ),
    2: (
        "test_service_ports_merge_by_port_as_the_api_server_merges_them",
        "test_every_fault_contract_holds_against_the_snapshot",
    ),
    3: (
        "test_jvm_return_sets_return_value_on_a_method_the_ad_program_declares",
        "test_an_invalid_jvm_rule_is_never_injected_in_the_twin",
        "test_every_chaos_object_is_valid_for_the_pinned_crds",
    ),
    4: (
        "test_the_snapshot_is_of_the_pinned_chart_rendered_with_the_stack_values",
        "test_every_chart_object_is_of_the_pinned_release",
        "test_versions_are_named_only_in_the_pin_file",
        "test_the_services_that_evaluate_flags_are_the_ones_that_call_flagd",
        "test_every_call_reaches_its_callee_through_the_charts_address",
    ),
    5: (
        "test_span_and_kafka_series_have_the_names_upstream_rules_read",
        "test_the_collector_scrapes_kafka_and_exports_for_prometheus",
        "test_the_twin_behaves_as_the_pinned_programs",
    ),
    6: (
        "test_every_container_requests_cpu_so_autoscalers_cost_and_cfs_series_work",
        "test_cfs_series_exist_only_for_containers_with_a_cpu_limit",
    ),
    7: (
        "test_the_baseline_holds_no_object_the_stack_does_not_install",
        "test_every_alert_rule_reads_only_series_an_exporter_writes",
    ),
    8: ("test_the_wrong_architecture_image_is_a_published_single_architecture_image",),
    9: ("test_pod_failure_leaves_pods_ready_running_the_pause_image",),
    10: (
        "test_the_load_is_the_locustfiles_http_user",
        "test_browser_only_flags_have_no_effect_and_no_fault",
        "test_frontend_routes_call_what_the_pages_call",
    ),
    11: (
        "test_server_and_consumer_span_names_are_the_exported_ones",
        "test_every_exported_name_follows_the_collectors_renaming",
        "test_product_catalog_evaluates_its_flag_for_one_product_only",
        "tests.unit.sim.test_sim_realism::test_checkout_drops_empty_cart_errors",
    ),
    12: ("tests.unit.test_alert_rules::test_promtool_tests_every_rule_on_realistic_series",),
    13: (
        "test_the_live_stack_is_wired_as_the_twin_assumes",
        "test_the_stack_playbook_installs_every_pinned_chart_from_the_pins",
    ),
    14: ("test_no_alert_fires_on_the_healthy_shop_and_quiet_services_are_left_out",),
    15: (
        "test_service_ports_are_named_as_the_chart_names_them",
        "test_flagd_runs_the_ui_sidecar_and_copies_its_config_at_start",
    ),
    16: ("test_every_itbench_scenario_is_covered_or_dropped_with_a_reason",),
}
"""Each point of the ranked list of the fidelity review, with the tests that would have caught
it (`module::test` for tests elsewhere)."""


def test_every_review_point_has_a_test_that_exists() -> None:
    assert sorted(REVIEW_POINTS) == list(range(1, 17))
    for point, tests in REVIEW_POINTS.items():
        assert tests, point
        for ref in tests:
            module, _, name = ref.rpartition("::")
            where = importlib.import_module(module) if module else globals()
            target = getattr(where, name, None) if module else where.get(name)
            assert callable(target), (point, ref)


def test_the_stack_playbook_installs_every_pinned_chart_from_the_pins() -> None:
    path = PLAYBOOKS / "stack" / "install.yaml"
    play = yaml.safe_load(path.read_text(encoding="utf-8"))[0]
    assert play["vars_files"] == ["../../../../stack/pins.yaml"]
    assert set(play["vars"]["install_order"]) == set(pins()["charts"]) - {"opentelemetry-collector"}
    assert play["vars"]["install_order"][-1] == "opentelemetry-demo"
    helm = next(t for t in play["tasks"] if "kubernetes.core.helm" in t)["kubernetes.core.helm"]
    assert helm["chart_version"] == "{{ charts[item].version }}"


def test_the_stack_playbook_waits_for_the_policy_engines_before_the_shop() -> None:
    path = PLAYBOOKS / "stack" / "install.yaml"
    play = yaml.safe_load(path.read_text(encoding="utf-8"))[0]
    order = play["vars"]["install_order"]
    engines = play["vars"]["policy_engines"]
    assert engines == ["kyverno", "gatekeeper"]
    for name in engines:
        chart = chart_pin(name)
        assert chart["source"]["tag"] == chart["appVersion"], name
        assert (STACK_DIR / chart["values"]).is_file(), name
        assert order.index(name) < order.index("opentelemetry-demo"), name
    assert set(play["vars"]["policy_crds"]) == set(engines)
    [wait] = [t for t in play["tasks"] if "policy engines serve" in t["name"]]
    waits = [t for t in wait["block"] if "kubernetes.core.k8s_info" in t]
    assert [t["kubernetes.core.k8s_info"]["wait_condition"]["type"] for t in waits] == [
        "Available",
        "Established",
    ]
    assert "not ready" in wait["rescue"][0]["ansible.builtin.fail"]["msg"]
    names = [t["name"] for t in play["tasks"]]
    assert names.index(wait["name"]) < names.index("Wait until every pod of the shop is Ready")


def test_spans_metrics_and_logs_carry_the_charts_service_namespace() -> None:
    # The collector's k8sattributes processor (otel_annotations: true) reads each pod's
    # resource.opentelemetry.io/service.namespace annotation onto everything the pod emits.
    annotation = "resource.opentelemetry.io/service.namespace"
    annotated = {
        (d["spec"]["template"]["metadata"].get("annotations") or {}).get(annotation)
        for d in _of("Deployment").values()
    }
    assert annotated - {None} == {SERVICE_NAMESPACE}
    env = SimEnvironment(seed=0)
    env.provision()
    (trace,) = env.search_traces(
        "checkout", None, {}, env.now() - timedelta(minutes=1), env.now(), 1
    )
    tags = {(t["key"], t["value"]) for p in trace["processes"].values() for t in p["tags"]}
    assert ("service.namespace", SERVICE_NAMESPACE) in tags
    assert ("service.namespace", "opentelemetry-demo") not in tags
    calls = env.query_metrics("traces_span_metrics_calls_total", env.now())["result"]
    assert {r["metric"]["exported_job"].split("/")[0] for r in calls} == {SERVICE_NAMESPACE}
