"""The OpenTelemetry Astronomy Shop as pure data: how its programs behave at the pinned release.

Programs (what runs in each container) with language, the ports they listen on and their resource
habits; operations under the span names the stack exports (after the collector's semantic-
convention renaming), with the calls each makes; Kafka consumers; flagd flags and what they do in
the stack; the load generator's request mix. The Kubernetes objects themselves come from the
rendered chart (`itbench.stack`), and a test checks this data against the upstream snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

SpanKind = Literal["SPAN_KIND_SERVER", "SPAN_KIND_CONSUMER"]
Protocol = Literal["grpc", "http", "redis", "kafka", "flagd", "postgres"]
CallMode = Literal["sync", "soft", "async"]


@dataclass(frozen=True)
class Call:
    """One downstream call an operation makes.

    Attributes:
        service: The callee program (its Deployment's name).
        operation: The callee operation (its key in OPERATIONS).
        count: Calls per execution of the calling operation (fan-out).
        address_env: The caller's environment variable that holds the callee's address (for
            `<X>_HOST` the port is in `<X>_PORT`; connection strings are parsed).
        protocol: Wire protocol of the call.
        mode: sync (errors and latency propagate), soft (latency propagates, errors are absorbed)
            or async (fire and forget).
        span: The client span's exported name ("" for calls that export no client span, such as
            flag evaluations served from the SDK's cache).
    """

    service: str
    operation: str
    count: float
    address_env: str
    protocol: Protocol
    mode: CallMode = "sync"
    span: str = ""


@dataclass(frozen=True)
class Operation:
    """One server (or consumer) operation of a program.

    Attributes:
        service: The program that serves it.
        name: The operation's key (for HTTP routes `METHOD route`; otherwise its span name).
        kind: Span kind.
        latency_ms: Own processing time at baseline (median), without downstream calls.
        cpu_ms: CPU core-milliseconds spent per execution.
        calls: Downstream calls, in the order they are made.
        span: The exported span name when it differs from `name` (the collector renames spans
            after semantic conventions: an HTTP server span without `http.route` keeps only its
            method).
    """

    service: str
    name: str
    kind: SpanKind
    latency_ms: float
    cpu_ms: float
    calls: tuple[Call, ...] = ()
    span: str = ""

    @property
    def exported(self) -> str:
        """The span name the span metrics and traces carry."""
        return self.span or self.name


@dataclass(frozen=True)
class ServiceSpec:
    """One program of the shop: what runs in a container of the chart.

    Attributes:
        name: Container name (and, for main containers, the Deployment's and Service's name).
        language: Implementation language / technology.
        port: The port its clients reach it on (None for pure consumers).
        protocol: Protocol served on that port.
        working_set_mi: Memory working set at baseline, in MiB.
        idle_cpu_m: CPU used with no traffic, in millicores.
        extra_ports: Other ports it listens on, by name.
        jvm: Runs on the JVM (JVMChaos can attach to it).
        instrumented: Exports OpenTelemetry spans (span metrics exist for it).
        workload: The Deployment it runs in ("" for its own name).
        startup_dependency: (address variable, protocol) of a dependency it must reach to start
            (it exits otherwise).
    """

    name: str
    language: str
    port: int | None
    protocol: Protocol | None
    working_set_mi: int
    idle_cpu_m: int
    extra_ports: tuple[tuple[str, int], ...] = ()
    jvm: bool = False
    instrumented: bool = True
    workload: str = ""
    startup_dependency: tuple[str, Protocol] | None = None

    @property
    def deployment(self) -> str:
        """The Deployment this program runs in."""
        return self.workload or self.name

    def listens(self) -> set[int]:
        """Every port the program listens on."""
        ports = {p for _, p in self.extra_ports}
        return ports | ({self.port} if self.port is not None else set())


def _svc(
    name: str,
    language: str,
    port: int | None,
    protocol: Protocol | None,
    working_set_mi: int,
    idle_cpu_m: int,
    **extra: Any,
) -> ServiceSpec:
    return ServiceSpec(name, language, port, protocol, working_set_mi, idle_cpu_m, **extra)


SERVICES: tuple[ServiceSpec, ...] = (
    _svc("accounting", ".NET", None, None, 70, 5),
    _svc("ad", "Java", 8080, "grpc", 180, 10, jvm=True),
    _svc("cart", ".NET", 8080, "grpc", 90, 5),
    _svc("checkout", "Go", 8080, "grpc", 11, 2),
    _svc("currency", "C++", 8080, "grpc", 8, 2),
    _svc("email", "Ruby", 8080, "http", 55, 3),
    _svc("fraud-detection", "Kotlin", None, None, 170, 8, jvm=True),
    _svc("frontend", "TypeScript", 8080, "http", 140, 10),
    _svc("frontend-proxy", "Envoy", 8080, "http", 35, 3, extra_ports=(("admin", 10000),)),
    _svc("image-provider", "nginx", 8081, "http", 12, 1),
    _svc("llm", "Python", 8000, "http", 45, 2, instrumented=False),
    _svc("load-generator", "Python", 8089, "http", 400, 30),
    _svc("payment", "JavaScript", 8080, "grpc", 60, 3),
    # product-catalog pings PostgreSQL at start and exits when it cannot.
    _svc(
        "product-catalog",
        "Go",
        8080,
        "grpc",
        9,
        2,
        startup_dependency=("DB_CONNECTION_STRING", "postgres"),
    ),
    _svc("product-reviews", "Python", 3551, "grpc", 60, 3),
    _svc("quote", "PHP", 8080, "http", 22, 2),
    _svc("recommendation", "Python", 8080, "grpc", 60, 4),
    _svc("shipping", "Rust", 8080, "http", 6, 1),
    _svc(
        "kafka",
        "Kafka",
        9092,
        "kafka",
        420,
        40,
        extra_ports=(("controller", 9093),),
        instrumented=False,
    ),
    _svc("postgresql", "PostgreSQL", 5432, "postgres", 40, 3, instrumented=False),
    _svc("valkey-cart", "Valkey", 6379, "redis", 7, 2, instrumented=False),
    _svc("flagd", "Go", 8013, "flagd", 30, 3, extra_ports=(("ofrep", 8016),), instrumented=False),
)
"""The main program of every Deployment of the shop (container, Deployment and Service share its
name); kafka, postgresql, valkey, flagd and llm export no application spans (llm has no
OpenTelemetry SDK at the pinned release)."""

SIDE_PROGRAMS: tuple[ServiceSpec, ...] = (
    _svc("flagd-ui", "Elixir", 4000, "http", 120, 2, instrumented=False, workload="flagd"),
    _svc(
        "opentelemetry-collector",
        "Go",
        4317,
        "grpc",
        80,
        10,
        extra_ports=(
            ("otlp-http", 4318),
            ("metrics", 8888),
            ("health", 13133),
            ("zipkin", 9411),
            ("jaeger-grpc", 14250),
            ("jaeger-thrift", 14268),
            ("jaeger-compact", 6831),
        ),
        instrumented=False,
        workload="otel-collector",
    ),
)
"""The other programs of the chart: flagd's UI sidecar and the OpenTelemetry Collector (its own
Deployment, otel-collector)."""

NODES: tuple[str, ...] = ("kind-control-plane", "kind-worker")
"""The cluster's nodes: kind's control plane (tainted) and the worker the shop runs on."""

SERVICE_BY_NAME: dict[str, ServiceSpec] = {s.name: s for s in (*SERVICES, *SIDE_PROGRAMS)}
"""Every program of the chart by container name."""
COLLECTOR = "otel-collector"
"""The Deployment of the OpenTelemetry Collector: span metrics and Kafka lag pass through it."""


def _g(svc: str, op: str, n: float, env: str, mode: CallMode = "sync") -> Call:
    return Call(svc, op, n, env, "grpc", mode, op)


def _h(svc: str, op: str, n: float, env: str, mode: CallMode = "sync") -> Call:
    # HTTP client spans carry no url.template, so the collector names them by method only.
    return Call(svc, op, n, env, "http", mode, op.split(" ", 1)[0])


def _flag(env: str = "FLAGD_HOST", n: float = 1) -> Call:
    return Call("flagd", FLAG_EVALUATION, n, env, "flagd", "soft")


def _sql(n: float, env: str = "DB_CONNECTION_STRING") -> Call:
    return Call("postgresql", SQL_QUERY, n, env, "postgres", "sync", "postgresql")


_PC = "product-catalog"
_GET_PRODUCT = "oteldemo.ProductCatalogService/GetProduct"
_LIST_PRODUCTS = "oteldemo.ProductCatalogService/ListProducts"
_CONVERT = "oteldemo.CurrencyService/Convert"
_GET_CART = "POST /oteldemo.CartService/GetCart"
_ADD_ITEM = "POST /oteldemo.CartService/AddItem"
_EMPTY_CART = "POST /oteldemo.CartService/EmptyCart"
_PLACE_ORDER = "oteldemo.CheckoutService/PlaceOrder"
_REVIEWS = "oteldemo.ProductReviewService/GetProductReviews"
_ASK = "oteldemo.ProductReviewService/AskProductAIAssistant"
_RECOMMEND = "oteldemo.RecommendationService/ListRecommendations"
_CHAT = "POST /v1/chat/completions"
FLAG_EVALUATION = "flagd.evaluation.v1.Service/ResolveBoolean"
SQL_QUERY = "query"
ORDERS_TOPIC = "orders"
PUBLISH = f"publish {ORDERS_TOPIC}"
PROXY = "frontend-proxy"

_FRONTEND_ROUTES: tuple[tuple[str, str, float, float, tuple[Call, ...]], ...] = (
    # (route, exported span name, own latency ms, cpu ms, calls)
    ("GET /", "GET /", 25.0, 8.0, ()),
    (
        "GET /api/products/{productId}",
        "",
        12.0,
        4.0,
        (_g(_PC, _GET_PRODUCT, 1, "PRODUCT_CATALOG_ADDR"),),
    ),
    (
        "GET /api/recommendations",
        "",
        10.0,
        4.0,
        (
            _g("recommendation", _RECOMMEND, 1, "RECOMMENDATION_ADDR"),
            _g(_PC, _GET_PRODUCT, 4, "PRODUCT_CATALOG_ADDR"),
        ),
    ),
    (
        "GET /api/product-reviews/{productId}",
        "GET",
        8.0,
        3.0,
        (_g("product-reviews", _REVIEWS, 1, "PRODUCT_REVIEWS_ADDR"),),
    ),
    (
        "POST /api/product-ask-ai-assistant/{productId}",
        "POST",
        10.0,
        3.0,
        (_g("product-reviews", _ASK, 1, "PRODUCT_REVIEWS_ADDR"),),
    ),
    ("GET /api/data", "", 6.0, 2.0, (_g("ad", "oteldemo.AdService/GetAds", 1, "AD_ADDR"),)),
    ("GET /api/cart", "", 8.0, 3.0, (_g("cart", _GET_CART, 1, "CART_ADDR"),)),
    (
        "POST /api/cart",
        "",
        8.0,
        3.0,
        (_g("cart", _ADD_ITEM, 1, "CART_ADDR"), _g("cart", _GET_CART, 1, "CART_ADDR")),
    ),
    (
        "POST /api/checkout",
        "",
        15.0,
        5.0,
        (
            _g("checkout", _PLACE_ORDER, 1, "CHECKOUT_ADDR"),
            _g(_PC, _GET_PRODUCT, 2, "PRODUCT_CATALOG_ADDR"),
        ),
    ),
)
"""The frontend's routes the load generator reaches. Without `http.route` (set by the collector
only for the routes it knows) a Next.js API span keeps only its method."""

OPERATIONS: tuple[Operation, ...] = (
    # frontend-proxy (Envoy): its spans carry http.method but no route, so they export as the
    # method; the routes stay apart here to carry the traffic to the frontend.
    *(
        Operation(
            PROXY,
            route,
            "SPAN_KIND_SERVER",
            2.0,
            0.4,
            (_h("frontend", route, 1, "FRONTEND_HOST"),),
            route.split(" ", 1)[0],
        )
        for route, *_ in _FRONTEND_ROUTES
    ),
    *(
        Operation("frontend", route, "SPAN_KIND_SERVER", latency, cpu, calls, span)
        for route, span, latency, cpu, calls in _FRONTEND_ROUTES
    ),
    Operation(
        "checkout",
        _PLACE_ORDER,
        "SPAN_KIND_SERVER",
        10.0,
        3.0,
        (
            _g("cart", _GET_CART, 1, "CART_ADDR"),
            _g(_PC, _GET_PRODUCT, 2, "PRODUCT_CATALOG_ADDR"),
            _g("currency", _CONVERT, 3, "CURRENCY_ADDR"),
            _h("shipping", "POST /get-quote", 1, "SHIPPING_ADDR"),
            _flag(),
            _g("payment", "oteldemo.PaymentService/Charge", 1, "PAYMENT_ADDR"),
            _h("shipping", "POST /ship-order", 1, "SHIPPING_ADDR"),
            # checkout drops EmptyCart's error (`_ = cs.emptyUserCart(...)`).
            _g("cart", _EMPTY_CART, 1, "CART_ADDR", "soft"),
            _h("email", "POST /send_order_confirmation", 1, "EMAIL_ADDR", "soft"),
            # The producer waits for Kafka's ack but only logs a failure.
            Call("kafka", PUBLISH, 1, "KAFKA_ADDR", "kafka", "soft", PUBLISH),
            _flag(),
        ),
    ),
    Operation(
        "cart",
        _GET_CART,
        "SPAN_KIND_SERVER",
        3.0,
        1.0,
        (Call("valkey-cart", "HGET", 1, "VALKEY_ADDR", "redis", span="HGET"),),
    ),
    Operation(
        "cart",
        _ADD_ITEM,
        "SPAN_KIND_SERVER",
        4.0,
        1.2,
        (
            Call("valkey-cart", "HGET", 1, "VALKEY_ADDR", "redis", span="HGET"),
            Call("valkey-cart", "HMSET", 1, "VALKEY_ADDR", "redis", span="HMSET"),
            Call("valkey-cart", "EXPIRE", 1, "VALKEY_ADDR", "redis", span="EXPIRE"),
        ),
    ),
    Operation(
        "cart",
        _EMPTY_CART,
        "SPAN_KIND_SERVER",
        3.0,
        1.0,
        (Call("valkey-cart", "HMSET", 1, "VALKEY_ADDR", "redis", span="HMSET"), _flag()),
    ),
    *(
        Operation("valkey-cart", name, "SPAN_KIND_SERVER", 0.3, 0.05)
        for name in ("HGET", "HMSET", "EXPIRE")
    ),
    Operation("product-catalog", _LIST_PRODUCTS, "SPAN_KIND_SERVER", 2.0, 0.5, (_sql(1),)),
    # GetProduct evaluates productCatalogFailure only for product OLJCESPC7Z (1 in 10).
    Operation(
        "product-catalog",
        _GET_PRODUCT,
        "SPAN_KIND_SERVER",
        1.5,
        0.4,
        (_flag(n=0.1), _sql(1)),
    ),
    Operation("postgresql", SQL_QUERY, "SPAN_KIND_SERVER", 0.8, 0.2),
    Operation("currency", _CONVERT, "SPAN_KIND_SERVER", 0.8, 0.2),
    Operation(
        "currency", "oteldemo.CurrencyService/GetSupportedCurrencies", "SPAN_KIND_SERVER", 0.5, 0.1
    ),
    Operation(
        "recommendation",
        _RECOMMEND,
        "SPAN_KIND_SERVER",
        6.0,
        2.0,
        (_flag(), _g(_PC, _LIST_PRODUCTS, 1, "PRODUCT_CATALOG_ADDR")),
    ),
    Operation("ad", "oteldemo.AdService/GetAds", "SPAN_KIND_SERVER", 4.0, 1.5, (_flag(n=3),)),
    Operation(
        "payment", "oteldemo.PaymentService/Charge", "SPAN_KIND_SERVER", 8.0, 2.0, (_flag(),)
    ),
    Operation(
        "product-reviews",
        _REVIEWS,
        "SPAN_KIND_SERVER",
        4.0,
        1.5,
        (_sql(1),),
    ),
    Operation(
        "product-reviews",
        _ASK,
        "SPAN_KIND_SERVER",
        20.0,
        6.0,
        (
            _flag(),
            Call("llm", _CHAT, 1, "LLM_HOST", "http", "sync", "chat astronomy-llm"),
            _sql(1),
            _g(_PC, _GET_PRODUCT, 1, "PRODUCT_CATALOG_ADDR"),
            _flag(),
            Call("llm", _CHAT, 1, "LLM_HOST", "http", "sync", "chat astronomy-llm"),
        ),
    ),
    Operation("llm", _CHAT, "SPAN_KIND_SERVER", 30.0, 3.0, (_flag(n=2),)),
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
    Operation("email", "POST /send_order_confirmation", "SPAN_KIND_SERVER", 30.0, 6.0, (_flag(),)),
    Operation("flagd", FLAG_EVALUATION, "SPAN_KIND_SERVER", 0.2, 0.05),
    Operation("kafka", PUBLISH, "SPAN_KIND_SERVER", 1.0, 0.2),
    Operation("accounting", f"receive {ORDERS_TOPIC}", "SPAN_KIND_CONSUMER", 4.0, 1.0, (_sql(3),)),
    Operation(
        "fraud-detection",
        f"process {ORDERS_TOPIC}",
        "SPAN_KIND_CONSUMER",
        6.0,
        2.0,
        (_flag(),),
    ),
)
"""Every operation; the kafka, postgresql, valkey-cart, flagd and llm entries carry no spans."""


@dataclass(frozen=True)
class KafkaConsumer:
    """A Kafka consumer group of the shop.

    Attributes:
        service: The consuming Deployment.
        group: The consumer group id.
        topic: The topic it reads.
        operation: Its consumer operation.
        capacity_per_replica: Messages per second one ready replica processes at baseline.
        flag_delay_seconds: Seconds it sleeps per record while kafkaQueueProblems is on.
    """

    service: str
    group: str
    topic: str
    operation: str
    capacity_per_replica: float
    flag_delay_seconds: float = 0.0


KAFKA_CONSUMERS: tuple[KafkaConsumer, ...] = (
    KafkaConsumer("accounting", "accounting", ORDERS_TOPIC, f"receive {ORDERS_TOPIC}", 50.0),
    KafkaConsumer(
        "fraud-detection",
        "fraud-detection",
        ORDERS_TOPIC,
        f"process {ORDERS_TOPIC}",
        30.0,
        flag_delay_seconds=1.0,
    ),
)

POSTGRES_PASSWORD = "otelp"
"""The password the chart's PostgreSQL clients give for user otelu (their DB_CONNECTION_STRINGs);
the server accepts no other."""
COLLECTOR_KAFKA_BROKER = "kafka:9092"
"""The broker the collector's kafkametrics receiver scrapes (its rendered configuration)."""

JVM_METHODS: dict[str, dict[str, str]] = {
    "ad": {
        "oteldemo.AdService.getInstance": "oteldemo.AdService",
        "oteldemo.AdService.getAdsByCategory": "java.util.Collection",
        "oteldemo.AdService.getRandomAds": "java.util.List",
        "oteldemo.AdService.createAdsMap": "com.google.common.collect.ImmutableListMultimap",
        "oteldemo.AdService.start": "void",
        "oteldemo.AdService.stop": "void",
        "oteldemo.AdService$AdServiceImpl.getAds": "void",
    },
}
"""Methods of the JVM programs a JVMChaos rule can name (`<class>.<method>` -> return type), read
from the pinned source: `getAds` is declared in the nested AdServiceImpl and returns void."""

VALKEY_SERVICE = "valkey-cart"
"""The cart's store; a `--requirepass` argument on it demands the password in VALKEY_ADDR."""


@dataclass(frozen=True)
class LoadTask:
    """A task of the load generator's locustfile: its weight and the routes it requests."""

    name: str
    weight: int
    requests: tuple[tuple[str, float], ...]


LOAD_USERS = 10
"""Users the load generator simulates (the chart's LOCUST_USERS)."""
LOAD_WAIT_SECONDS = 5.5
"""Mean wait between a user's tasks (locust wait_time between(1, 10))."""
FLOOD_FLAG = "loadGeneratorFloodHomepage"
_PRODUCT = "GET /api/products/{productId}"

LOAD_TASKS: tuple[LoadTask, ...] = (
    LoadTask("index", 1, (("GET /", 1),)),
    LoadTask("browse_product", 10, ((_PRODUCT, 1),)),
    LoadTask("get_recommendations", 3, (("GET /api/recommendations", 1),)),
    LoadTask("get_product_reviews", 2, (("GET /api/product-reviews/{productId}", 1),)),
    LoadTask(
        "ask_product_ai_assistant", 1, (("POST /api/product-ask-ai-assistant/{productId}", 1),)
    ),
    LoadTask("get_ads", 3, (("GET /api/data", 1),)),
    LoadTask("view_cart", 3, (("GET /api/cart", 1),)),
    LoadTask("add_to_cart", 2, ((_PRODUCT, 1), ("POST /api/cart", 1))),
    LoadTask("checkout", 1, ((_PRODUCT, 1), ("POST /api/cart", 1), ("POST /api/checkout", 1))),
    LoadTask(
        "checkout_multi", 1, ((_PRODUCT, 3), ("POST /api/cart", 3), ("POST /api/checkout", 1))
    ),
    LoadTask("flood_home", 5, (("GET /", 0),)),
)
"""The locustfile's HttpUser tasks (no image requests: those come from browsers only);
flood_home repeats `GET /` as often as the flood flag's value says, and checkout_multi adds
2 to 4 items (3 on average)."""

LOAD_PATHS: dict[str, str] = {
    "/": "GET /",
    "/api/products/{product}": _PRODUCT,
    "/api/recommendations": "GET /api/recommendations",
    "/api/product-reviews/{product}": "GET /api/product-reviews/{productId}",
    "/api/product-ask-ai-assistant/{product}": "POST /api/product-ask-ai-assistant/{productId}",
    "/api/data/": "GET /api/data",
    "/api/cart": "/api/cart",
    "/api/checkout": "POST /api/checkout",
}
"""How the locustfile's request paths map to the routes above (`/api/cart` takes its method)."""


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


def flood_task_rate() -> float:
    """Runs per second of flood_home, each of which evaluates the flood flag over OFREP."""
    total_weight = sum(t.weight for t in LOAD_TASKS)
    weight = next(t.weight for t in LOAD_TASKS if t.name == "flood_home")
    return LOAD_USERS / LOAD_WAIT_SECONDS * weight / total_weight


# ---- flagd -----------------------------------------------------------------------------------

Effect = Literal["error", "cpu", "leak", "gc", "unreachable", "kafka", "flood", "cache", "none"]


@dataclass(frozen=True)
class FlagDefinition:
    """A flag of the pinned demo.flagd.json and what it does in the stack.

    Attributes:
        key: Flag key.
        service: The program that evaluates it.
        operation: The operation affected (None: every operation of the service).
        effect: error (value = error ratio), cpu (value scales extra millicores), leak (value
            scales MiB of leak per 1000 calls), gc (pauses), unreachable (calls from `caller` to
            the service fail), kafka (value = extra messages per order, a consumer sleeps per
            record), flood (load generator floods the homepage), cache (an in-process cache
            grows by `magnitude` MiB per minute and slows lookups), none (no telemetry effect in
            the stack; `why` says why).
        caller: For unreachable: the caller whose calls fail.
        magnitude: Scale of the effect per unit of the variant value.
        why: For effect none: why the stack shows nothing.
    """

    key: str
    service: str
    operation: str | None
    effect: Effect
    caller: str = ""
    magnitude: float = 1.0
    why: str = ""


FLAGS: tuple[FlagDefinition, ...] = (
    FlagDefinition(
        "productCatalogFailure", "product-catalog", _GET_PRODUCT, "error", magnitude=0.1
    ),
    FlagDefinition("recommendationCacheFailure", "recommendation", None, "cache", magnitude=40.0),
    FlagDefinition("adManualGc", "ad", None, "gc"),
    FlagDefinition("adHighCpu", "ad", None, "cpu", magnitude=2000.0),
    FlagDefinition("adFailure", "ad", None, "error", magnitude=0.1),
    FlagDefinition("kafkaQueueProblems", "kafka", None, "kafka"),
    FlagDefinition("cartFailure", "cart", _EMPTY_CART, "error"),
    FlagDefinition("paymentFailure", "payment", None, "error"),
    FlagDefinition("paymentUnreachable", "payment", None, "unreachable", caller="checkout"),
    FlagDefinition(FLOOD_FLAG, "load-generator", None, "flood"),
    FlagDefinition("emailMemoryLeak", "email", None, "leak", magnitude=2.0),
    FlagDefinition(
        "imageSlowLoad",
        "frontend",
        None,
        "none",
        why="only browser users send the fault-delay header to Envoy, and the stack runs the "
        "load generator without browser traffic",
    ),
    FlagDefinition(
        "failedReadinessProbe",
        "cart",
        None,
        "none",
        why="it fails cart's gRPC health check, but the chart gives cart no readiness probe",
    ),
    FlagDefinition(
        "llmInaccurateResponse",
        "product-reviews",
        None,
        "none",
        why="it changes the text of one product's AI summary; no span, metric or log shows it",
    ),
    FlagDefinition(
        "llmRateLimitError",
        "product-reviews",
        None,
        "none",
        why="the LLM's 429 marks only an internal span and the client span as errors; the gRPC "
        "server span answers normally, so no server error rate rises",
    ),
)
"""Every flag of the pinned demo.flagd.json (each default variant is `off`)."""

FLAG_BY_KEY: dict[str, FlagDefinition] = {f.key: f for f in FLAGS}
FLAGD_CONFIGMAP = "flagd-config"
FLAGD_CONFIG_KEY = "demo.flagd.json"
FLAGD_DEPLOYMENT = "flagd"
"""flagd reads its flags from a copy the init container makes at pod start: a changed
ConfigMap takes effect when this Deployment rolls out again."""


def flag_value(variants: dict[str, Any], variant: str) -> float:
    """Numeric value of a variant (booleans as 0/1; unknown variants as 0)."""
    raw = variants.get(variant, 0)
    try:
        return float(raw)
    except (TypeError, ValueError):
        return 0.0


def flag_variants(flagd_config_text: str) -> dict[str, dict[str, Any]]:
    """Each flag's variants in a demo.flagd.json text (empty when it does not parse)."""
    try:
        doc = json.loads(flagd_config_text) if flagd_config_text else {}
    except json.JSONDecodeError:
        return {}
    flags = doc.get("flags") if isinstance(doc, dict) else None
    if not isinstance(flags, dict):
        return {}
    return {str(k): dict(v.get("variants") or {}) for k, v in flags.items() if isinstance(v, dict)}


# ---- FinOps ----------------------------------------------------------------------------------

PRICE_PER_CORE_HOUR = 0.031611
"""USD per requested vCPU-hour (on-demand general-purpose price, us-east-1 class)."""
PRICE_PER_GIB_HOUR = 0.004237
"""USD per requested GiB-hour of memory."""
DEFAULT_COST_BUDGET_PER_HOUR = 0.085
"""The hourly budget (USD) of the namespace's requested resources that the cost rule checks."""
COST_CONFIGMAP = "cost-alert-config"
COST_BUDGET_KEY = "budgetPerHour"
"""Name and key of a budget ConfigMap. The pinned stack has none (the budget is a constant of the
cost rule, above); scoring still treats a ConfigMap of this name as alert configuration."""

HPA_WORKLOADS: tuple[tuple[str, int, int, int], ...] = (
    ("frontend", 1, 3, 80),
    ("product-catalog", 1, 3, 80),
    ("recommendation", 1, 3, 80),
    ("cart", 1, 3, 80),
)
"""The stack's HorizontalPodAutoscalers (itbench/stack/manifests/autoscaling.yaml): (workload,
minReplicas, maxReplicas, CPU target %)."""


def request_cost_per_hour(cpu_cores: float, memory_bytes: float) -> float:
    """Hourly cost of requested resources at the documented prices."""
    return cpu_cores * PRICE_PER_CORE_HOUR + memory_bytes / 2**30 * PRICE_PER_GIB_HOUR


def service_calls() -> list[tuple[str, str]]:
    """The service call graph as sorted, unique (caller, callee) pairs (incl. Kafka and load)."""
    edges = {(o.service, c.service) for o in OPERATIONS for c in o.calls}
    edges |= {("load-generator", PROXY), ("load-generator", "flagd")}
    edges |= {("kafka", k.service) for k in KAFKA_CONSUMERS}
    return sorted(edges)
