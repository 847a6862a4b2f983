"""The OpenTelemetry Astronomy Shop (demo 2.0, Helm chart names) as pure data.

Services with language, port, image and resources; operations with the calls they make (per-call
fan-out); Kafka consumers; the Valkey cart store; flagd flags and what they do; the load generator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

DEMO_VERSION = "2.0.2"
"""The demo release whose images the baseline runs."""

DEMO_REPOSITORY = "ghcr.io/open-telemetry/demo"
KNOWN_DEMO_VERSIONS = ("1.12.0", "2.0.0", "2.0.1", "2.0.2")
"""Demo releases whose images exist in the registry (multi-arch: amd64 and arm64)."""

NODE_ARCHITECTURE = "amd64"
"""Architecture of the cluster's nodes."""

SpanKind = Literal["SPAN_KIND_SERVER", "SPAN_KIND_CONSUMER"]
Protocol = Literal["grpc", "http", "redis", "kafka", "flagd"]
CallMode = Literal["sync", "soft", "async"]


@dataclass(frozen=True)
class Call:
    """One downstream call an operation makes.

    Attributes:
        service: The callee service.
        operation: The callee operation (its span name).
        count: Calls per execution of the calling operation (fan-out).
        address_env: The caller's environment variable that holds the callee's address.
        protocol: Wire protocol of the call.
        mode: sync (errors and latency propagate), soft (latency propagates, errors are absorbed)
            or async (fire and forget, e.g. a Kafka produce).
    """

    service: str
    operation: str
    count: float
    address_env: str
    protocol: Protocol
    mode: CallMode = "sync"


@dataclass(frozen=True)
class Operation:
    """One server (or consumer) operation of a service: a span name the span metrics carry.

    Attributes:
        service: The service that serves it.
        name: Span name.
        kind: Span kind.
        latency_ms: Own processing time at baseline (median), without downstream calls.
        cpu_ms: CPU core-milliseconds spent per execution.
        calls: Downstream calls, in the order they are made.
    """

    service: str
    name: str
    kind: SpanKind
    latency_ms: float
    cpu_ms: float
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class ServiceSpec:
    """One component of the shop: a Deployment and (when it listens) a Service of the same name.

    Attributes:
        name: Deployment, Service and container name.
        language: Implementation language / technology.
        port: Port the application listens on (None for pure consumers).
        protocol: Protocol served on that port.
        image: Container image of the baseline.
        cpu_request_m: CPU request in millicores.
        cpu_limit_m: CPU limit in millicores.
        memory_request_mi: Memory request in MiB.
        memory_limit_mi: Memory limit in MiB (the chart's value).
        working_set_mi: Memory working set at baseline, in MiB.
        idle_cpu_m: CPU used with no traffic, in millicores.
        env: Environment variables of the container (dependency addresses and settings).
        extra_ports: Other named container ports.
        jvm: Runs on the JVM (JVMChaos can attach to it).
        instrumented: Emits OpenTelemetry spans (the span metrics exist for it).
        replicas: Baseline replica count.
    """

    name: str
    language: str
    port: int | None
    protocol: Protocol | None
    image: str
    cpu_request_m: int
    cpu_limit_m: int
    memory_request_mi: int
    memory_limit_mi: int
    working_set_mi: int
    idle_cpu_m: int
    env: tuple[tuple[str, str], ...] = ()
    extra_ports: tuple[tuple[str, int], ...] = ()
    jvm: bool = False
    instrumented: bool = True
    replicas: int = 1


def demo_image(service: str, version: str = DEMO_VERSION) -> str:
    """The published demo image of a service at a release."""
    return f"{DEMO_REPOSITORY}:{version}-{service}"


_FLAGD_ENV = (("FLAGD_HOST", "flagd"), ("FLAGD_PORT", "8013"))
_OTEL_ENV = (("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector:4317"),)


def _svc(
    name: str,
    language: str,
    port: int | None,
    protocol: Protocol | None,
    *,
    cpu: tuple[int, int],
    memory: tuple[int, int, int],
    idle_cpu_m: int,
    env: tuple[tuple[str, str], ...] = (),
    image: str | None = None,
    extra_ports: tuple[tuple[str, int], ...] = (),
    jvm: bool = False,
    instrumented: bool = True,
) -> ServiceSpec:
    base_env: tuple[tuple[str, str], ...] = ()
    if instrumented:
        base_env = (("OTEL_SERVICE_NAME", name), *_OTEL_ENV, *_FLAGD_ENV)
    if port is not None and instrumented:
        base_env = (*base_env, (f"{name.upper().replace('-', '_')}_PORT", str(port)))
    return ServiceSpec(
        name=name,
        language=language,
        port=port,
        protocol=protocol,
        image=image or demo_image(name),
        cpu_request_m=cpu[0],
        cpu_limit_m=cpu[1],
        memory_request_mi=memory[0],
        memory_limit_mi=memory[1],
        working_set_mi=memory[2],
        idle_cpu_m=idle_cpu_m,
        env=(*base_env, *env),
        extra_ports=extra_ports,
        jvm=jvm,
        instrumented=instrumented,
    )


SERVICES: tuple[ServiceSpec, ...] = (
    _svc(
        "accounting",
        ".NET",
        None,
        None,
        cpu=(50, 200),
        memory=(120, 120, 70),
        idle_cpu_m=5,
        env=(("KAFKA_ADDR", "kafka:9092"),),
    ),
    _svc(
        "ad",
        "Java",
        8080,
        "grpc",
        cpu=(100, 300),
        memory=(300, 300, 180),
        idle_cpu_m=10,
        jvm=True,
    ),
    _svc(
        "cart",
        ".NET",
        8080,
        "grpc",
        cpu=(50, 200),
        memory=(160, 160, 90),
        idle_cpu_m=5,
        env=(("VALKEY_ADDR", "valkey-cart:6379"),),
    ),
    _svc(
        "checkout",
        "Go",
        8080,
        "grpc",
        cpu=(50, 200),
        memory=(20, 20, 11),
        idle_cpu_m=2,
        env=(
            ("CART_ADDR", "cart:8080"),
            ("CURRENCY_ADDR", "currency:8080"),
            ("EMAIL_ADDR", "http://email:8080"),
            ("PAYMENT_ADDR", "payment:8080"),
            ("PRODUCT_CATALOG_ADDR", "product-catalog:8080"),
            ("SHIPPING_ADDR", "http://shipping:8080"),
            ("KAFKA_ADDR", "kafka:9092"),
        ),
    ),
    _svc("currency", "C++", 8080, "grpc", cpu=(50, 200), memory=(20, 20, 8), idle_cpu_m=2),
    _svc("email", "Ruby", 8080, "http", cpu=(50, 200), memory=(100, 100, 55), idle_cpu_m=3),
    _svc(
        "fraud-detection",
        "Kotlin",
        None,
        None,
        cpu=(50, 300),
        memory=(300, 300, 170),
        idle_cpu_m=8,
        env=(("KAFKA_ADDR", "kafka:9092"),),
        jvm=True,
    ),
    _svc(
        "frontend",
        "TypeScript",
        8080,
        "http",
        cpu=(100, 500),
        memory=(250, 250, 140),
        idle_cpu_m=10,
        env=(
            ("AD_ADDR", "ad:8080"),
            ("CART_ADDR", "cart:8080"),
            ("CHECKOUT_ADDR", "checkout:8080"),
            ("CURRENCY_ADDR", "currency:8080"),
            ("PRODUCT_CATALOG_ADDR", "product-catalog:8080"),
            ("RECOMMENDATION_ADDR", "recommendation:8080"),
            ("SHIPPING_ADDR", "http://shipping:8080"),
        ),
    ),
    _svc(
        "frontend-proxy",
        "Envoy",
        8080,
        "http",
        cpu=(50, 300),
        memory=(65, 65, 35),
        idle_cpu_m=3,
        env=(
            ("FRONTEND_HOST", "frontend"),
            ("FRONTEND_PORT", "8080"),
            ("IMAGE_PROVIDER_HOST", "image-provider"),
            ("IMAGE_PROVIDER_PORT", "8081"),
            ("FLAGD_UI_HOST", "flagd"),
            ("FLAGD_UI_PORT", "4000"),
        ),
    ),
    _svc(
        "image-provider",
        "nginx",
        8081,
        "http",
        cpu=(20, 100),
        memory=(50, 50, 12),
        idle_cpu_m=1,
    ),
    _svc(
        "load-generator",
        "Python",
        8089,
        "http",
        cpu=(200, 1000),
        memory=(1500, 1500, 400),
        idle_cpu_m=30,
        env=(
            ("LOCUST_HOST", "http://frontend-proxy:8080"),
            ("LOCUST_USERS", "10"),
            ("LOCUST_SPAWN_RATE", "1"),
            ("LOCUST_AUTOSTART", "true"),
        ),
    ),
    _svc("payment", "JavaScript", 8080, "grpc", cpu=(50, 200), memory=(120, 120, 60), idle_cpu_m=3),
    _svc(
        "product-catalog",
        "Go",
        8080,
        "grpc",
        cpu=(50, 200),
        memory=(20, 20, 9),
        idle_cpu_m=2,
    ),
    _svc("quote", "PHP", 8080, "http", cpu=(50, 200), memory=(40, 40, 22), idle_cpu_m=2),
    _svc(
        "recommendation",
        "Python",
        8080,
        "grpc",
        cpu=(50, 300),
        memory=(500, 500, 60),
        idle_cpu_m=4,
        env=(("PRODUCT_CATALOG_ADDR", "product-catalog:8080"),),
    ),
    _svc(
        "shipping",
        "Rust",
        8080,
        "http",
        cpu=(50, 200),
        memory=(20, 20, 6),
        idle_cpu_m=1,
        env=(("QUOTE_ADDR", "http://quote:8080"),),
    ),
    _svc(
        "kafka",
        "Kafka",
        9092,
        "kafka",
        cpu=(200, 1000),
        memory=(600, 600, 420),
        idle_cpu_m=40,
        extra_ports=(("controller", 9093),),
        instrumented=False,
    ),
    _svc(
        "valkey-cart",
        "Valkey",
        6379,
        "redis",
        cpu=(50, 200),
        memory=(20, 20, 7),
        idle_cpu_m=2,
        image="valkey/valkey:8.1.3-alpine",
        instrumented=False,
    ),
    _svc(
        "flagd",
        "Go",
        8013,
        "flagd",
        cpu=(50, 200),
        memory=(75, 75, 30),
        idle_cpu_m=3,
        image="ghcr.io/open-feature/flagd:v0.12.8",
        extra_ports=(("ofrep", 8016), ("ui", 4000)),
        instrumented=False,
    ),
)

SERVICE_BY_NAME: dict[str, ServiceSpec] = {s.name: s for s in SERVICES}

THIRD_PARTY_IMAGES: dict[str, frozenset[str]] = {
    "valkey/valkey:8.1.3-alpine": frozenset({"amd64", "arm64"}),
    "valkey/valkey:7.2-alpine": frozenset({"amd64", "arm64"}),
    "ghcr.io/open-feature/flagd:v0.12.8": frozenset({"amd64", "arm64"}),
    "ghcr.io/open-feature/flagd:v0.11.1": frozenset({"amd64", "arm64"}),
    "busybox:1.36": frozenset({"amd64", "arm64"}),
    "arm64v8/busybox:1.36": frozenset({"arm64"}),
}
"""Images outside the demo repository that exist, with their platforms."""


@lru_cache(maxsize=512)
def image_platforms(image: str) -> frozenset[str] | None:
    """Platforms an image reference exists for, or None when it cannot be pulled.

    Demo images exist as `<repo>:<release>-<service>` (multi-arch) and as
    `<repo>:<release>-<service>-arm64` (arm64 only).
    """
    if image in THIRD_PARTY_IMAGES:
        return THIRD_PARTY_IMAGES[image]
    repo, _, tag = image.rpartition(":")
    if repo != DEMO_REPOSITORY:
        return None
    for version in KNOWN_DEMO_VERSIONS:
        prefix = f"{version}-"
        if not tag.startswith(prefix):
            continue
        rest = tag[len(prefix) :]
        if rest in SERVICE_BY_NAME:
            return frozenset({"amd64", "arm64"})
        if rest.endswith("-arm64") and rest[: -len("-arm64")] in SERVICE_BY_NAME:
            return frozenset({"arm64"})
    return None


@lru_cache(maxsize=512)
def image_program(image: str) -> str | None:
    """The shop component an image runs (None for images that are no shop component)."""
    if image in THIRD_PARTY_IMAGES:
        for s in SERVICES:
            if s.image.split(":")[0] == image.split(":")[0]:
                return s.name
        return None
    _, _, tag = image.rpartition(":")
    for version in KNOWN_DEMO_VERSIONS:
        if tag.startswith(f"{version}-"):
            rest = tag[len(version) + 1 :].removesuffix("-arm64")
            return rest if rest in SERVICE_BY_NAME else None
    return None


def _g(svc: str, op: str, n: float, env: str, mode: CallMode = "sync") -> Call:
    return Call(svc, op, n, env, "grpc", mode)


def _h(svc: str, op: str, n: float, env: str, mode: CallMode = "sync") -> Call:
    return Call(svc, op, n, env, "http", mode)


_PC = "product-catalog"
_GET_PRODUCT = "oteldemo.ProductCatalogService/GetProduct"
_LIST_PRODUCTS = "oteldemo.ProductCatalogService/ListProducts"
_CONVERT = "oteldemo.CurrencyService/Convert"
_CURRENCIES = "oteldemo.CurrencyService/GetSupportedCurrencies"
_GET_CART = "oteldemo.CartService/GetCart"
_ADD_ITEM = "oteldemo.CartService/AddItem"
_EMPTY_CART = "oteldemo.CartService/EmptyCart"
_FLAG = Call(
    "flagd", "flagd.evaluation.v1.Service/ResolveBoolean", 1, "FLAGD_HOST", "flagd", "soft"
)

ORDERS_TOPIC = "orders"

OPERATIONS: tuple[Operation, ...] = (
    # frontend-proxy (Envoy): one route per frontend API the load generator uses, plus images.
    *(
        Operation(
            "frontend-proxy",
            name,
            "SPAN_KIND_SERVER",
            2.0,
            0.4,
            (_h("frontend", name, 1, "FRONTEND_HOST"),),
        )
        for name in (
            "GET /",
            "GET /api/products/{productId}",
            "GET /api/recommendations",
            "GET /api/data",
            "GET /api/cart",
            "POST /api/cart",
            "POST /api/checkout",
        )
    ),
    Operation(
        "frontend-proxy",
        "GET /images/{image}",
        "SPAN_KIND_SERVER",
        1.0,
        0.2,
        (_h("image-provider", "GET /images/{image}", 1, "IMAGE_PROVIDER_HOST"),),
    ),
    Operation("image-provider", "GET /images/{image}", "SPAN_KIND_SERVER", 3.0, 0.3),
    # frontend (Next.js)
    Operation(
        "frontend",
        "GET /",
        "SPAN_KIND_SERVER",
        25.0,
        8.0,
        (
            _g(_PC, _LIST_PRODUCTS, 1, "PRODUCT_CATALOG_ADDR"),
            _g("currency", _CURRENCIES, 1, "CURRENCY_ADDR"),
        ),
    ),
    Operation(
        "frontend",
        "GET /api/products/{productId}",
        "SPAN_KIND_SERVER",
        12.0,
        4.0,
        (
            _g(_PC, _GET_PRODUCT, 1, "PRODUCT_CATALOG_ADDR"),
            _g("currency", _CONVERT, 1, "CURRENCY_ADDR"),
        ),
    ),
    Operation(
        "frontend",
        "GET /api/recommendations",
        "SPAN_KIND_SERVER",
        10.0,
        4.0,
        (
            _g(
                "recommendation",
                "oteldemo.RecommendationService/ListRecommendations",
                1,
                "RECOMMENDATION_ADDR",
            ),
            _g(_PC, _GET_PRODUCT, 4, "PRODUCT_CATALOG_ADDR"),
        ),
    ),
    Operation(
        "frontend",
        "GET /api/data",
        "SPAN_KIND_SERVER",
        6.0,
        2.0,
        (_g("ad", "oteldemo.AdService/GetAds", 1, "AD_ADDR"),),
    ),
    Operation(
        "frontend",
        "GET /api/cart",
        "SPAN_KIND_SERVER",
        8.0,
        3.0,
        (_g("cart", _GET_CART, 1, "CART_ADDR"),),
    ),
    Operation(
        "frontend",
        "POST /api/cart",
        "SPAN_KIND_SERVER",
        8.0,
        3.0,
        (_g("cart", _ADD_ITEM, 1, "CART_ADDR"),),
    ),
    Operation(
        "frontend",
        "POST /api/checkout",
        "SPAN_KIND_SERVER",
        15.0,
        5.0,
        (
            _g("checkout", "oteldemo.CheckoutService/PlaceOrder", 1, "CHECKOUT_ADDR"),
            _g(_PC, _GET_PRODUCT, 2, "PRODUCT_CATALOG_ADDR"),
        ),
    ),
    # checkout (Go): the order path.
    Operation(
        "checkout",
        "oteldemo.CheckoutService/PlaceOrder",
        "SPAN_KIND_SERVER",
        10.0,
        3.0,
        (
            _g("cart", _GET_CART, 1, "CART_ADDR"),
            _g(_PC, _GET_PRODUCT, 2, "PRODUCT_CATALOG_ADDR"),
            _g("currency", _CONVERT, 3, "CURRENCY_ADDR"),
            _h("shipping", "POST /get-quote", 1, "SHIPPING_ADDR"),
            _g("payment", "oteldemo.PaymentService/Charge", 1, "PAYMENT_ADDR"),
            _h("shipping", "POST /ship-order", 1, "SHIPPING_ADDR"),
            _g("cart", _EMPTY_CART, 1, "CART_ADDR"),
            _h("email", "POST /send_order_confirmation", 1, "EMAIL_ADDR", "soft"),
            Call("kafka", f"{ORDERS_TOPIC} publish", 1, "KAFKA_ADDR", "kafka", "async"),
            _FLAG,
        ),
    ),
    Operation(
        "cart",
        _GET_CART,
        "SPAN_KIND_SERVER",
        3.0,
        1.0,
        (Call("valkey-cart", "HGET", 1, "VALKEY_ADDR", "redis"),),
    ),
    Operation(
        "cart",
        _ADD_ITEM,
        "SPAN_KIND_SERVER",
        4.0,
        1.2,
        (
            Call("valkey-cart", "HGET", 1, "VALKEY_ADDR", "redis"),
            Call("valkey-cart", "HSET", 1, "VALKEY_ADDR", "redis"),
        ),
    ),
    Operation(
        "cart",
        _EMPTY_CART,
        "SPAN_KIND_SERVER",
        3.0,
        1.0,
        (Call("valkey-cart", "HSET", 1, "VALKEY_ADDR", "redis"), _FLAG),
    ),
    Operation("valkey-cart", "HGET", "SPAN_KIND_SERVER", 0.3, 0.05),
    Operation("valkey-cart", "HSET", "SPAN_KIND_SERVER", 0.3, 0.05),
    Operation("product-catalog", _LIST_PRODUCTS, "SPAN_KIND_SERVER", 2.0, 0.5, (_FLAG,)),
    Operation("product-catalog", _GET_PRODUCT, "SPAN_KIND_SERVER", 1.5, 0.4, (_FLAG,)),
    Operation("currency", _CONVERT, "SPAN_KIND_SERVER", 0.8, 0.2),
    Operation("currency", _CURRENCIES, "SPAN_KIND_SERVER", 0.5, 0.1),
    Operation(
        "recommendation",
        "oteldemo.RecommendationService/ListRecommendations",
        "SPAN_KIND_SERVER",
        6.0,
        2.0,
        (_g(_PC, _LIST_PRODUCTS, 1, "PRODUCT_CATALOG_ADDR"), _FLAG),
    ),
    Operation("ad", "oteldemo.AdService/GetAds", "SPAN_KIND_SERVER", 4.0, 1.5, (_FLAG,)),
    Operation("payment", "oteldemo.PaymentService/Charge", "SPAN_KIND_SERVER", 8.0, 2.0, (_FLAG,)),
    Operation(
        "shipping",
        "POST /get-quote",
        "SPAN_KIND_SERVER",
        2.0,
        0.5,
        (_h("quote", "POST /getquote", 1, "QUOTE_ADDR"),),
    ),
    Operation("shipping", "POST /ship-order", "SPAN_KIND_SERVER", 1.5, 0.4),
    Operation("quote", "POST /getquote", "SPAN_KIND_SERVER", 5.0, 1.5),
    Operation("email", "POST /send_order_confirmation", "SPAN_KIND_SERVER", 30.0, 6.0, (_FLAG,)),
    Operation("flagd", "flagd.evaluation.v1.Service/ResolveBoolean", "SPAN_KIND_SERVER", 0.2, 0.05),
    Operation("kafka", f"{ORDERS_TOPIC} publish", "SPAN_KIND_SERVER", 1.0, 0.2),
    Operation("accounting", f"{ORDERS_TOPIC} receive", "SPAN_KIND_CONSUMER", 4.0, 1.0),
    Operation("fraud-detection", f"{ORDERS_TOPIC} receive", "SPAN_KIND_CONSUMER", 6.0, 2.0),
)
"""Every operation; the kafka, valkey-cart and flagd entries carry no spans (uninstrumented)."""


@dataclass(frozen=True)
class KafkaConsumer:
    """A Kafka consumer group of the shop.

    Attributes:
        service: The consuming Deployment.
        group: The consumer group id.
        topic: The topic it reads.
        operation: Its consumer operation.
        capacity_per_replica: Messages per second one ready replica processes at baseline.
    """

    service: str
    group: str
    topic: str
    operation: str
    capacity_per_replica: float


KAFKA_CONSUMERS: tuple[KafkaConsumer, ...] = (
    KafkaConsumer("accounting", "accounting", ORDERS_TOPIC, f"{ORDERS_TOPIC} receive", 50.0),
    KafkaConsumer(
        "fraud-detection", "fraud-detection", ORDERS_TOPIC, f"{ORDERS_TOPIC} receive", 30.0
    ),
)

VALKEY_SERVICE = "valkey-cart"
"""The cart's store; a `--requirepass` argument on it demands the password in VALKEY_ADDR."""


@dataclass(frozen=True)
class LoadTask:
    """A task of the load generator's locustfile: its weight and the requests it makes."""

    name: str
    weight: int
    requests: tuple[tuple[str, float], ...]


PROXY = "frontend-proxy"
LOAD_USERS = 10
"""Users the load generator simulates (LOCUST_USERS)."""
LOAD_WAIT_SECONDS = 5.5
"""Mean wait between a user's tasks (locust wait_time between(1, 10))."""
FLOOD_FLAG = "loadGeneratorFloodHomepage"

LOAD_TASKS: tuple[LoadTask, ...] = (
    LoadTask("index", 1, (("GET /", 1), ("GET /images/{image}", 9))),
    LoadTask(
        "browse_product", 10, (("GET /api/products/{productId}", 1), ("GET /images/{image}", 1))
    ),
    LoadTask(
        "get_recommendations", 3, (("GET /api/recommendations", 1), ("GET /images/{image}", 4))
    ),
    LoadTask("get_ads", 3, (("GET /api/data", 1),)),
    LoadTask("view_cart", 3, (("GET /api/cart", 1),)),
    LoadTask("add_to_cart", 2, (("GET /api/products/{productId}", 1), ("POST /api/cart", 1))),
    LoadTask(
        "checkout",
        1,
        (("GET /api/products/{productId}", 1), ("POST /api/cart", 1), ("POST /api/checkout", 1)),
    ),
    LoadTask(
        "checkout_multi",
        1,
        (("GET /api/products/{productId}", 3), ("POST /api/cart", 3), ("POST /api/checkout", 1)),
    ),
    LoadTask("flood_home", 5, (("GET /", 0),)),
)
"""The locustfile's tasks; flood_home repeats `GET /` as often as the flood flag's value says."""


def proxy_request_rates(flood: float) -> dict[str, float]:
    """Requests per second the load generator sends to each frontend-proxy route.

    Args:
        flood: Value of the loadGeneratorFloodHomepage flag (homepage requests per flood task).
    """
    tasks_per_second = LOAD_USERS / LOAD_WAIT_SECONDS
    total_weight = sum(t.weight for t in LOAD_TASKS)
    rates: dict[str, float] = {}
    for task in LOAD_TASKS:
        share = tasks_per_second * task.weight / total_weight
        for route, count in task.requests:
            n = flood if task.name == "flood_home" else count
            rates[route] = rates.get(route, 0.0) + share * n
    return rates


# ---- flagd -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlagDefinition:
    """A flag of demo.flagd.json with its variants and what each variant does.

    Attributes:
        key: Flag key.
        description: The chart's description.
        variants: Variant name -> value, as in demo.flagd.json.
        service: The service whose behaviour the flag changes.
        operation: The operation affected (None: every operation of the service).
        effect: error (value = error ratio), latency (value = added ms), cpu (value scales extra
            millicores), leak (value scales MiB of leak per 1000 calls), gc (pauses), unreachable
            (calls from `caller` to the service fail), slow-route (value = ms added on the proxy's
            route to the service), kafka (value = extra messages per order, consumers slow down),
            flood (load generator floods the homepage), cache (an in-process cache grows by
            `magnitude` MiB per minute and slows lookups).
        caller: For unreachable: the caller whose calls fail.
        magnitude: Scale of the effect per unit of the variant value.
    """

    key: str
    description: str
    variants: dict[str, bool | float | int]
    service: str
    operation: str | None
    effect: Literal[
        "error", "cpu", "leak", "gc", "unreachable", "slow-route", "kafka", "flood", "cache"
    ]
    caller: str = ""
    magnitude: float = 1.0

    def value(self, variant: str) -> float:
        """Numeric value of a variant (booleans as 0/1)."""
        raw = self.variants.get(variant, 0)
        return float(raw)


_ON_OFF: dict[str, bool | float | int] = {"on": True, "off": False}

FLAGS: tuple[FlagDefinition, ...] = (
    FlagDefinition(
        "productCatalogFailure",
        "Fail product catalog service on a specific product",
        dict(_ON_OFF),
        "product-catalog",
        _GET_PRODUCT,
        "error",
        magnitude=0.1,
    ),
    FlagDefinition(
        "recommendationCacheFailure",
        "Fail recommendation service cache",
        dict(_ON_OFF),
        "recommendation",
        None,
        "cache",
        magnitude=40.0,
    ),
    FlagDefinition(
        "adManualGc",
        "Triggers full manual garbage collections in the ad service",
        dict(_ON_OFF),
        "ad",
        None,
        "gc",
    ),
    FlagDefinition(
        "adHighCpu",
        "Triggers high cpu load in the ad service",
        dict(_ON_OFF),
        "ad",
        None,
        "cpu",
        magnitude=2000.0,
    ),
    FlagDefinition(
        "adFailure", "Fail ad service", dict(_ON_OFF), "ad", None, "error", magnitude=0.1
    ),
    FlagDefinition(
        "kafkaQueueProblems",
        "Overloads Kafka queue while simultaneously introducing a consumer side delay leading "
        "to a lag spike",
        {"on": 100, "off": 0},
        "kafka",
        None,
        "kafka",
    ),
    FlagDefinition("cartFailure", "Fail cart service", dict(_ON_OFF), "cart", _EMPTY_CART, "error"),
    FlagDefinition(
        "paymentFailure",
        "Fail payment service charge requests n%",
        {"100%": 1, "90%": 0.95, "75%": 0.75, "50%": 0.5, "25%": 0.25, "10%": 0.1, "off": 0},
        "payment",
        None,
        "error",
    ),
    FlagDefinition(
        "paymentUnreachable",
        "Payment service is unavailable",
        dict(_ON_OFF),
        "payment",
        None,
        "unreachable",
        caller="checkout",
    ),
    FlagDefinition(
        "loadGeneratorFloodHomepage",
        "Flood the frontend with a large amount of requests.",
        {"on": 100, "off": 0},
        "load-generator",
        None,
        "flood",
    ),
    FlagDefinition(
        "imageSlowLoad",
        "slow loading images in the frontend",
        {"10sec": 10000, "5sec": 5000, "off": 0},
        "image-provider",
        None,
        "slow-route",
        caller=PROXY,
    ),
    FlagDefinition(
        "emailMemoryLeak",
        "Memory leak in the email service.",
        {"off": 0, "1x": 1, "10x": 10, "100x": 100, "1000x": 1000, "10000x": 10000},
        "email",
        None,
        "leak",
        magnitude=2.0,
    ),
)
"""The fault-injection flags of demo.flagd.json (every default variant is `off`)."""

FLAG_BY_KEY: dict[str, FlagDefinition] = {f.key: f for f in FLAGS}
FLAGD_CONFIGMAP = "flagd-config"
FLAGD_CONFIG_KEY = "demo.flagd.json"


def default_flagd_config() -> dict[str, Any]:
    """The demo.flagd.json document of the baseline (every flag off)."""
    return {
        "$schema": "https://flagd.dev/schema/v0/flags.json",
        "flags": {
            f.key: {
                "description": f.description,
                "state": "ENABLED",
                "variants": dict(f.variants),
                "defaultVariant": "off",
            }
            for f in FLAGS
        },
    }


def default_flagd_config_text() -> str:
    """demo.flagd.json as the chart's ConfigMap holds it (indented JSON text)."""
    return json.dumps(default_flagd_config(), indent=2) + "\n"


# ---- FinOps ----------------------------------------------------------------------------------

PRICE_PER_CORE_HOUR = 0.031611
"""USD per requested vCPU-hour (on-demand general-purpose price, us-east-1 class)."""
PRICE_PER_GIB_HOUR = 0.004237
"""USD per requested GiB-hour of memory."""
COST_CONFIGMAP = "cost-alert-config"
COST_BUDGET_KEY = "budgetPerHour"
DEFAULT_COST_BUDGET_PER_HOUR = 0.075
"""The baseline hourly budget (USD) of the namespace in cost-alert-config."""

HPA_WORKLOADS: tuple[tuple[str, int, int, int], ...] = (
    ("frontend", 1, 3, 80),
    ("product-catalog", 1, 3, 80),
    ("recommendation", 1, 3, 80),
    ("cart", 1, 3, 80),
)
"""Baseline HorizontalPodAutoscalers: (workload, minReplicas, maxReplicas, CPU target %)."""


def request_cost_per_hour(cpu_cores: float, memory_bytes: float) -> float:
    """Hourly cost of requested resources at the documented prices."""
    return cpu_cores * PRICE_PER_CORE_HOUR + memory_bytes / 2**30 * PRICE_PER_GIB_HOUR


def service_calls() -> list[tuple[str, str]]:
    """The service call graph as sorted, unique (caller, callee) pairs (incl. Kafka and load)."""
    edges = {(o.service, c.service) for o in OPERATIONS for c in o.calls}
    edges |= {("load-generator", PROXY)}
    edges |= {("kafka", k.service) for k in KAFKA_CONSUMERS}
    return sorted(edges)
