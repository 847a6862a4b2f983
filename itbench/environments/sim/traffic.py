"""The twin's request model: load flows from the load generator through the call graph.

Every call is routed the way the cluster would route it: the caller's environment names a
Service (resolved through the pod's DNS policy), the Service's port maps to a targetPort, its
Endpoints list ready pods, NetworkPolicies and the Chaos Mesh experiments that recorded the pods
decide whether packets pass, and the program in the reached pod decides whether it understands
the call. Errors and latency flow back up to the caller. flagd serves the flags its pod copied
from the ConfigMap when it started.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any, Final

from itbench.core.shop import (
    COLLECTOR_KAFKA_BROKER,
    FLAG_BY_KEY,
    FLAGD_CONFIG_KEY,
    FLAGD_DEPLOYMENT,
    FLOOD_FLAG,
    KAFKA_CONSUMERS,
    OPERATIONS,
    POSTGRES_PASSWORD,
    PROXY,
    PUBLISH,
    SERVICE_BY_NAME,
    VALKEY_SERVICE,
    Call,
    Operation,
    flag_value,
    flag_variants,
    proxy_request_rates,
)
from itbench.environments.sim.chaosmesh import jvm_rule_valid, parse_go_duration
from itbench.environments.sim.cluster import Cluster, PodDemand, listening_ports
from itbench.environments.sim.kubelet import CONFIG_VOLUME, cpu_limit, memory_limit
from itbench.environments.sim.objects import (
    NODE_CPU_CORES,
    Obj,
    address_of,
    labels_match,
    main_container,
    parse_memory,
    resolve_env,
)
from itbench.environments.sim.registry import image_program

MiB = 2**20
TIMEOUT_MS = 5000.0
"""Client-side time-out of a call whose packets are dropped."""
REFUSED_MS = 1.0
CACHE_MS_PER_MIB = 3.75
"""Latency a growing in-process cache adds per MiB it holds (linear scans)."""
OpKey = tuple[str, str]

_OPS: dict[OpKey, Operation] = {(o.service, o.name): o for o in OPERATIONS}
_OPS_BY_SERVICE: dict[str, list[OpKey]] = {}
for _key in _OPS:
    _OPS_BY_SERVICE.setdefault(_key[0], []).append(_key)
_CHAOS_KINDS = ("NetworkChaos", "StressChaos", "HTTPChaos", "JVMChaos")


def _topological() -> list[OpKey]:
    order: list[OpKey] = []
    seen: set[OpKey] = set()

    def visit(key: OpKey) -> None:
        if key in seen:
            return
        seen.add(key)
        for c in _OPS[key].calls:
            if (c.service, c.operation) in _OPS:
                visit((c.service, c.operation))
        order.append(key)

    for key in _OPS:
        visit(key)
    return order


_CALLEES_FIRST = _topological()
_CALLERS_FIRST = list(reversed(_CALLEES_FIRST))


_LOGNORMAL_MEAN: Final = math.exp(0.08)
"""Mean over median of a log-normal with sigma 0.4 (exp(sigma^2 / 2))."""


@dataclass
class Latency:
    """A two-part latency distribution: body (weight 1 - tail) and tail, both log-normal."""

    median_ms: float
    tail: float = 0.0
    tail_ms: float = 0.0

    def __init__(self, median_ms: float, tail: float = 0.0, tail_ms: float = 0.0) -> None:
        """A latency (written out: see "Compiled build" in docs/architecture.md)."""
        self.median_ms = median_ms
        self.tail = tail
        self.tail_ms = tail_ms

    def mean_ms(self) -> float:
        """Mean of the mixture (log-normal sigma 0.4)."""
        return ((1 - self.tail) * self.median_ms + self.tail * self.tail_ms) * _LOGNORMAL_MEAN

    def plus(self, other: Latency, count: float = 1.0) -> Latency:
        """This latency followed by `count` sequential calls of another."""
        tail = 1 - (1 - self.tail) * (1 - other.tail) ** count
        extra = max(self.tail_ms - self.median_ms, other.tail_ms - other.median_ms, 0.0)
        median = self.median_ms + count * other.median_ms
        return Latency(median, tail, median + extra if tail > 0 else 0.0)


@dataclass
class OpStats:
    """What one operation did over the last interval, at its server."""

    rate: float = 0.0
    error: float = 0.0
    latency: Latency = field(default_factory=lambda: Latency(1.0))
    causes: list[tuple[float, str]] = field(default_factory=list)
    """(share of calls, error message) of the errors the operation returned."""

    def __init__(
        self,
        rate: float = 0.0,
        error: float = 0.0,
        latency: Latency | None = None,
        causes: list[tuple[float, str]] | None = None,
    ) -> None:
        """An operation's interval (written out, as `Latency`'s)."""
        self.rate = rate
        self.error = error
        self.latency = Latency(1.0) if latency is None else latency
        self.causes = [] if causes is None else causes


@dataclass
class EdgeStats:
    """A call edge seen from its caller: how often it was made and how it went."""

    caller: str
    caller_op: str
    call: Call
    rate: float = 0.0
    net_fail: float = 0.0
    error: float = 0.0
    latency: Latency = field(default_factory=lambda: Latency(1.0))
    reason: str = ""
    delay_ms: float = 0.0

    def __init__(
        self,
        caller: str,
        caller_op: str,
        call: Call,
        rate: float = 0.0,
        net_fail: float = 0.0,
        error: float = 0.0,
        latency: Latency | None = None,
        reason: str = "",
        delay_ms: float = 0.0,
    ) -> None:
        """A call edge's interval (written out, as `Latency`'s)."""
        self.caller = caller
        self.caller_op = caller_op
        self.call = call
        self.rate = rate
        self.net_fail = net_fail
        self.error = error
        self.latency = Latency(1.0) if latency is None else latency
        self.reason = reason
        self.delay_ms = delay_ms


@dataclass
class TrafficState:
    """The outcome of one interval of traffic."""

    ops: dict[OpKey, OpStats]
    edges: dict[tuple[str, str, str, str], EdgeStats]
    demand: dict[str, PodDemand]
    kafka_lag: dict[str, float]
    kafka_consumed: dict[str, float]
    flags: dict[str, str]
    load_rps: float
    kafka_visible: bool = True
    """Whether the collector's kafkametrics receiver reaches Kafka (the lag series exist)."""
    inputs: tuple[object, ...] | None = None
    """What the interval's traffic was computed from (equal inputs, equal traffic); None when
    not known."""

    def same_as(self, other: TrafficState) -> bool:
        """Whether another interval's traffic is this one's (the same inputs)."""
        return other is self or (self.inputs is not None and self.inputs == other.inputs)


@dataclass
class _Route:
    fail: float
    reason: str
    delay_ms: float
    timeout: bool
    callee_ok: float
    tampered: float = 0.0
    """Share of the requests that reach the callee with a body an HTTPChaos changed."""

    def __init__(
        self,
        fail: float,
        reason: str,
        delay_ms: float,
        timeout: bool,
        callee_ok: float,
        tampered: float = 0.0,
    ) -> None:
        self.fail = fail
        self.reason = reason
        self.delay_ms = delay_ms
        self.timeout = timeout
        self.callee_ok = callee_ok
        self.tampered = tampered


class TrafficModel:
    """Computes each interval's traffic from the cluster's objects."""

    def __init__(self, cluster: Cluster) -> None:
        """Bind the model to a cluster; Kafka lag starts at zero."""
        self.cluster = cluster
        self.kafka_lag: dict[str, float] = {k.group: 0.0 for k in KAFKA_CONSUMERS}
        self._flag_cache: tuple[str, dict[str, str]] = ("", {})
        self._routes: dict[tuple[str, str, int], _Route] = {}
        self._route_signature: tuple[object, ...] = ()
        self._values_cache: tuple[str, dict[str, float]] = ("", {})
        self._last: tuple[tuple[object, ...], TrafficState] | None = None
        """The inputs of the last interval and its traffic (see `step`)."""

    # ---- views ------------------------------------------------------------------------------
    def served_config(self) -> str:
        """The demo.flagd.json text flagd serves: the copy its newest ready pod made at start."""
        c = self.cluster
        newest: tuple[float, str] | None = None
        for pod in c.of_kind("Pod"):
            if _deployment_of(pod) != FLAGD_DEPLOYMENT:
                continue
            rt = c.runtime.get(pod["metadata"]["name"])
            if rt is None or not rt.ready:
                continue
            text = rt.files.get((CONFIG_VOLUME, FLAGD_CONFIG_KEY))
            if text is not None and (newest is None or rt.started_at > newest[0]):
                newest = (rt.started_at, text)
        return newest[1] if newest is not None else ""

    def configured_flags(self) -> dict[str, str]:
        """Every enabled flag flagd serves and the variant it serves (see `served_variant`;
        empty while flagd is down)."""
        text = self.served_config()
        if self._flag_cache[0] == text:
            return dict(self._flag_cache[1])
        flags: dict[str, str] = {}
        try:
            doc = json.loads(text) if text else {}
        except json.JSONDecodeError:
            doc = {}
        for key, spec in (doc.get("flags") or {}).items() if isinstance(doc, dict) else []:
            if isinstance(spec, dict) and spec.get("state", "ENABLED") == "ENABLED":
                flags[str(key)] = served_variant(spec)
        self._flag_cache = (text, flags)
        return dict(flags)

    def flag_values(self) -> dict[str, float]:
        """Numeric value of each served flag that the shop's programs evaluate, averaged over
        the evaluations: a `fractional` rollout serves each variant to its share of the users
        (flagd buckets every evaluation by its targeting key), so a flag on for 3 % of them
        acts on about 3 % of the requests."""
        text = self.served_config()
        if self._values_cache[0] != text or not text:
            variants = flag_variants(text)
            specs = _flag_specs(text)
            values = {
                k: sum(
                    share * flag_value(variants.get(k, {}), variant)
                    for variant, share in served_shares(specs.get(k, {})).items()
                )
                for k in self.configured_flags()
                if k in FLAG_BY_KEY
            }
            self._values_cache = (text, values)
        return dict(self._values_cache[1])

    def _pods_by_service(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for pod in self.cluster.of_kind("Pod"):
            owner = _deployment_of(pod)
            if owner:
                out.setdefault(owner, []).append(pod)
        return out

    # ---- one interval -----------------------------------------------------------------------
    def step(self, dt: float) -> TrafficState:
        """Compute the traffic of the interval that just ended.

        Args:
            dt: Interval length in seconds.
        """
        c = self.cluster
        pods_by_svc = self._pods_by_service()
        ready = {svc: [p for p in pods if c.pod_ready(p)] for svc, pods in pods_by_svc.items()}
        flags = self.configured_flags()
        values = self.flag_values()
        chaos = {kind: c.of_kind(kind) for kind in _CHAOS_KINDS}
        policies = c.of_kind("NetworkPolicy")
        active = tuple(
            o["metadata"]["name"] for kind in _CHAOS_KINDS for o in chaos[kind] if c.chaos.active(o)
        )

        # Routes: for every (caller op, call) how the network treats it. They depend only on
        # objects, pod readiness, flags and the experiments acting, so they are reused until one
        # of those changes.
        signature = (
            c.generation,
            tuple(sorted(p["metadata"]["name"] for pods in ready.values() for p in pods)),
            tuple(sorted(values.items())),
            active,
        )
        # The whole interval is a function of those, of what else changes between intervals
        # (the flags flagd serves, the memory leaked so far, the consumers' lag) and of its
        # length: an interval like the last one has the last one's traffic.
        runtime = c.runtime
        inputs = (
            signature,
            tuple(sorted(flags.items())),
            tuple(
                rt.leaked if rt is not None else 0.0
                for pods in pods_by_svc.values()
                for rt in (runtime.get(p["metadata"]["name"]) for p in pods)
            ),
            tuple(self.kafka_lag.items()),
            dt,
        )
        if self._last is not None and self._last[0] == inputs:
            return self._last[1]
        if signature != self._route_signature:
            self._routes = {}
            for key in _CALLERS_FIRST:
                op = _OPS[key]
                for i, call in enumerate(op.calls):
                    self._routes[(op.service, op.name, i)] = self._route(
                        op.service, call, ready, values, chaos, policies
                    )
            self._routes[("load-generator", PROXY, 0)] = self._entry_route(ready, policies, chaos)
            for n, consumer in enumerate(KAFKA_CONSUMERS):
                self._routes[(consumer.service, "kafka", n)] = self._route(
                    consumer.service, _KAFKA_FETCH, ready, values, chaos, policies
                )
            self._routes[("load-generator", "flagd", 0)] = self._route(
                "load-generator", _OFREP, ready, values, chaos, policies
            )
            self._routes[("otel-collector", "kafka", 0)] = self._route(
                "otel-collector", _KAFKA_SCRAPE, ready, values, chaos, policies
            )
            self._route_signature = signature
        routes = self._routes
        load_route = routes[("load-generator", PROXY, 0)]
        rates: dict[OpKey, float] = {k: 0.0 for k in _OPS}
        load_ready = bool(ready.get("load-generator"))
        load_rps = 0.0
        if load_ready:
            # Each flood run asks flagd (over OFREP) how often to load the homepage.
            ofrep = routes[("load-generator", "flagd", 0)]
            flood = values.get(FLOOD_FLAG, 0.0) * (1 - ofrep.fail)
            for path, rps in proxy_request_rates(flood).items():
                load_rps += rps
                rates[(PROXY, path)] += rps * (1 - load_route.fail)
        edges: dict[tuple[str, str, str, str], EdgeStats] = {}
        bad_in: dict[OpKey, float] = {}
        for key in _CALLERS_FIRST:
            op = _OPS[key]
            r = rates[key]
            for i, call in enumerate(op.calls):
                route = routes[(op.service, op.name, i)]
                made = r * call.count
                edges[(op.service, op.name, call.service, call.operation)] = EdgeStats(
                    op.service,
                    op.name,
                    call,
                    made,
                    route.fail,
                    reason=route.reason,
                    delay_ms=route.delay_ms,
                )
                target = (call.service, call.operation)
                if target in rates:
                    reaching = made * (1 - route.fail) * route.callee_ok
                    rates[target] += reaching
                    if route.tampered > 0:
                        bad_in[target] = bad_in.get(target, 0.0) + reaching * route.tampered

        # Kafka: orders produced by successful checkouts, consumed by each group.
        place_order = ("checkout", "oteldemo.CheckoutService/PlaceOrder")
        produce_edge = edges.get((*place_order, "kafka", PUBLISH))
        kafka_extra = _effect_value(values, "kafka")
        produced = 0.0
        if produce_edge is not None:
            produced = produce_edge.rate * (1 - produce_edge.net_fail) * (1 + kafka_extra)
        consumed: dict[str, float] = {}
        for n, consumer in enumerate(KAFKA_CONSUMERS):
            route = routes[(consumer.service, "kafka", n)]
            # Only pods that run the consumer's program consume (not a pause image).
            replicas = sum(
                1
                for p in ready.get(consumer.service, [])
                if image_program(str(main_container(p["spec"]).get("image", "")))
                == consumer.service
            )
            per_replica = consumer.capacity_per_replica
            if kafka_extra > 0 and consumer.flag_delay_seconds > 0:
                # The consumer sleeps this long per record while kafkaQueueProblems is on.
                per_replica = 1.0 / consumer.flag_delay_seconds
            capacity = replicas * per_replica * (1 - route.fail)
            backlog = self.kafka_lag[consumer.group]
            took = min(capacity, produced + backlog / dt)
            self.kafka_lag[consumer.group] = max(0.0, backlog + (produced - took) * dt)
            consumed[consumer.group] = took
            rates[(consumer.service, consumer.operation)] = took

        # Resource demand per pod, then each service's speed.
        demand: dict[str, PodDemand] = {}
        speed: dict[str, tuple[float, float, float]] = {}
        for svc, pods in pods_by_svc.items():
            spec = SERVICE_BY_NAME.get(svc)
            op_cpu = sum(rates[k] * _OPS[k].cpu_ms / 1000.0 for k in _OPS_BY_SERVICE.get(svc, ()))
            if svc == "load-generator":
                op_cpu = load_rps * 0.002
            serving = ready.get(svc, [])
            n = max(len(serving), 1)
            factors: list[tuple[float, float, float]] = []
            for pod in pods:
                pname = pod["metadata"]["name"]
                container = main_container(pod["spec"])
                stress = c.chaos.acting("StressChaos", pname)
                burn = _stress_cpu(stress)
                flag_cpu, leak, ms_per_mib = _flag_resources(svc, values, rates)
                burn += flag_cpu
                extra_mem = _stress_memory(stress, container)
                base = float(spec.working_set_mi * MiB) if spec else 0.0
                extra_mem += _jvm_heap(c.chaos.acting("JVMChaos", pname), container, base)
                app = (spec.idle_cpu_m / 1000.0 if spec else 0.001) + (
                    op_cpu / n if pod in serving else 0.0
                )
                rt = c.runtime.get(pname)
                leaked = rt.leaked if rt is not None else 0.0
                demand[pname] = PodDemand(app + burn, leak, extra_mem)
                if pod in serving:
                    limit = cpu_limit(container)
                    cap = (limit if limit is not None else float(NODE_CPU_CORES)) / (1.0 + burn)
                    rho = app / cap if cap > 0 else math.inf
                    cache_ms = leaked / MiB * ms_per_mib
                    factors.append((rho, cap, cache_ms))
            if factors:
                speed[svc] = (
                    sum(f[0] for f in factors) / len(factors),
                    sum(f[1] for f in factors) / len(factors),
                    sum(f[2] for f in factors) / len(factors),
                )

        # Errors and latency, callees first.
        ops: dict[OpKey, OpStats] = {}
        for key in _CALLEES_FIRST:
            op = _OPS[key]
            ops[key] = self._serve(op, rates[key], speed, values, ready, routes, ops, edges)
            if bad_in.get(key):
                ops[key] = _with_bad_requests(ops[key], bad_in[key])
        scrape = routes[("otel-collector", "kafka", 0)]
        state = TrafficState(
            ops=ops,
            edges=edges,
            demand=demand,
            kafka_lag=dict(self.kafka_lag),
            kafka_consumed=consumed,
            flags=flags,
            load_rps=load_rps if load_ready else 0.0,
            kafka_visible=bool(ready.get("otel-collector")) and scrape.fail < 1.0,
            inputs=inputs,
        )
        self._last = (inputs, state)
        return state

    def _serve(
        self,
        op: Operation,
        rate: float,
        speed: dict[str, tuple[float, float, float]],
        values: dict[str, float],
        ready: dict[str, list[Obj]],
        routes: dict[tuple[str, str, int], _Route],
        ops: dict[OpKey, OpStats],
        edges: dict[tuple[str, str, str, str], EdgeStats],
    ) -> OpStats:
        svc = op.service
        causes: list[tuple[float, str]] = []
        rho, cap, extra_ms = speed.get(svc, (0.0, float(NODE_CPU_CORES), 0.0))
        cpu_ms = op.cpu_ms
        quota_ms = cap * 100.0
        wall_cpu = cpu_ms if cpu_ms <= quota_ms else cpu_ms / max(cap, 1e-6)
        own = max(op.latency_ms - cpu_ms, 0.0) + wall_cpu
        queue = 1.0 / (1.0 - rho) if rho < 0.95 else 20.0
        latency = Latency(own * queue)
        ok = 1.0
        if rho >= 1.0:
            overload = 1.0 - 1.0 / rho
            ok *= 1 - overload
            causes.append((overload, _overload_message(svc)))
        for flag, value in values.items():
            definition = FLAG_BY_KEY[flag]
            if value <= 0 or definition.service != svc:
                continue
            if definition.operation not in (None, op.name):
                continue
            if definition.effect == "error":
                share = min(1.0, value * definition.magnitude)
                ok *= 1 - share
                causes.append((share, _flag_message(flag, svc, op.name)))
            elif definition.effect == "gc":
                # Only the pauses of the share of requests that trigger a manual GC.
                latency = Latency(
                    latency.median_ms,
                    max(latency.tail, 0.25 * min(value, 1.0)),
                    latency.median_ms + 1800.0,
                )
        if extra_ms > 0:
            latency = Latency(
                latency.median_ms + extra_ms,
                latency.tail,
                latency.tail_ms + extra_ms if latency.tail else 0.0,
            )
        jvm = _jvm_effect(self.cluster, ready.get(svc, []))
        if jvm is not None:
            share, message, add_ms = jvm
            if share > 0:
                ok *= 1 - share
                causes.append((share, message))
            if add_ms > 0:
                latency = Latency(latency.median_ms + add_ms)
        for i, call in enumerate(op.calls):
            route = routes[(svc, op.name, i)]
            edge = edges[(svc, op.name, call.service, call.operation)]
            callee = ops.get((call.service, call.operation))
            callee_err = callee.error if callee is not None else 0.0
            callee_lat = callee.latency if callee is not None else Latency(1.0)
            fail = route.fail + (1 - route.fail) * (1 - route.callee_ok * (1 - callee_err))
            fail = min(max(fail, 0.0), 1.0)
            call_lat = Latency(
                callee_lat.median_ms + route.delay_ms,
                callee_lat.tail,
                callee_lat.tail_ms + route.delay_ms if callee_lat.tail else 0.0,
            )
            if route.timeout and route.fail > 0:
                call_lat = Latency(
                    call_lat.median_ms if route.fail < 0.5 else TIMEOUT_MS,
                    route.fail if route.fail < 0.5 else 0.0,
                    TIMEOUT_MS if route.fail < 0.5 else 0.0,
                )
            elif route.fail >= 1.0:
                call_lat = Latency(REFUSED_MS)
            edge.error = fail
            edge.latency = call_lat
            if call.mode == "async":
                continue
            latency = latency.plus(call_lat, call.count)
            if call.mode == "soft":
                continue
            survive = (1 - fail) ** call.count
            if fail > 0:
                reason = route.reason if route.fail > 0 else _downstream_message(call, callee)
                causes.append((1 - survive, reason))
            ok *= survive
        error = min(max(1 - ok, 0.0), 1.0)
        return OpStats(rate=rate, error=error, latency=latency, causes=causes)

    def _entry_route(
        self, ready: dict[str, list[Obj]], policies: list[Obj], chaos: dict[str, list[Obj]]
    ) -> _Route:
        return self._route("load-generator", _LOCUST, ready, {}, chaos, policies)

    def _route(
        self,
        caller: str,
        call: Call,
        ready: dict[str, list[Obj]],
        values: dict[str, float],
        chaos: dict[str, list[Obj]],
        policies: list[Obj],
    ) -> _Route:
        """How the network treats a call from a caller's pods (averaged over them)."""
        unreachable = max(
            (
                min(value, 1.0)
                for flag, value in values.items()
                if FLAG_BY_KEY[flag].effect == "unreachable"
                and FLAG_BY_KEY[flag].caller == caller
                and FLAG_BY_KEY[flag].service == call.service
            ),
            default=0.0,
        )
        reason = (
            "rpc error: code = Unavailable desc = name resolver error: produced zero "
            "addresses (badAddress:50051)"
        )
        if unreachable >= 1.0:
            return _Route(1.0, reason, 0.0, False, 1.0)
        route = self._network_route(caller, call, ready, chaos, policies)
        if unreachable <= 0:
            return route
        # The requests that got the flag's bad address fail; the rest take the network.
        return _Route(
            1.0 - (1.0 - unreachable) * (1.0 - route.fail),
            route.reason or reason,
            route.delay_ms,
            route.timeout,
            route.callee_ok,
            route.tampered,
        )

    def _network_route(
        self,
        caller: str,
        call: Call,
        ready: dict[str, list[Obj]],
        chaos: dict[str, list[Obj]],
        policies: list[Obj],
    ) -> _Route:
        """How the network treats a call from a caller's pods, flags aside."""
        c = self.cluster
        callers = ready.get(caller) or []
        if not callers:
            d = c.get("Deployment", caller)
            if d is None:
                return _Route(1.0, "caller has no pods", 0.0, False, 1.0)
            template = d["spec"].get("template") or {}
            callers = [
                {
                    "metadata": {
                        "name": "",
                        "labels": (template.get("metadata") or {}).get("labels") or {},
                    },
                    "spec": template.get("spec") or {},
                    "status": {},
                }
            ]
        fails = 0.0
        delays = 0.0
        callee_ok = 0.0
        tampered = 0.0
        timeout = False
        reasons: list[str] = []
        for pod in callers:
            f, reason, delay, to, ok, bad = self._route_from(pod, call, chaos, policies)
            fails += f
            delays += delay
            callee_ok += ok
            tampered += bad
            timeout = timeout or to
            if reason:
                reasons.append(reason)
        n = len(callers)
        return _Route(
            fails / n,
            reasons[0] if reasons else "",
            delays / n,
            timeout,
            callee_ok / n,
            tampered / n,
        )

    def _route_from(
        self,
        pod: Obj,
        call: Call,
        chaos: dict[str, list[Obj]],
        policies: list[Obj],
    ) -> tuple[float, str, float, bool, float, float]:
        """(fail share, reason, added delay ms, dropped packets?, share the callee understands,
        share of the reached requests an HTTPChaos tampered with)."""
        c = self.cluster
        env = c.environment(pod) if pod["metadata"].get("name") else {}
        if not env:
            env = resolve_env(main_container(pod["spec"]), c.lookup)
        env = {**env, "KAFKA_BROKER": COLLECTOR_KAFKA_BROKER}
        if call is _OFREP:
            env = {**env, "FLAGD_PORT": env.get("FLAGD_OFREP_PORT", "")}
        host, port, password = address_of(env, call.address_env, call.protocol)
        if host is None:
            return 1.0, f"{call.address_env} is not set", 0.0, False, 1.0, 0.0
        svc_name = _service_name(host, c.namespace)
        if (pod.get("spec") or {}).get("dnsPolicy") == "Default" and not _is_ip(host):
            # The node's resolver knows no cluster Service names.
            return (
                1.0,
                f"dial tcp: lookup {host} on 172.18.0.1:53: no such host",
                0.0,
                False,
                1.0,
                0.0,
            )
        svc = c.get("Service", svc_name) if svc_name else None
        if svc is None:
            return 1.0, f"dial tcp: lookup {host}: no such host", 0.0, False, 1.0, 0.0
        target = None
        for sp in (svc.get("spec") or {}).get("ports") or []:
            if int(sp.get("port", 0)) == port:
                target = sp.get("targetPort", sp.get("port"))
        if target is None:
            return 1.0, f"dial tcp {host}:{port}: connect: connection refused", 0.0, False, 1.0, 0.0
        ep = c.get("Endpoints", svc.get("metadata", {}).get("name", "")) or {}
        endpoints = [
            a["targetRef"]["name"]
            for s in ep.get("subsets") or []
            for a in s.get("addresses") or []
        ]
        if not endpoints:
            return (
                1.0,
                f"dial tcp {host}:{port}: connect: connection refused "
                f"(no endpoints for service {svc_name})",
                0.0,
                False,
                1.0,
                0.0,
            )
        src_name = str(pod["metadata"].get("name", ""))
        src_labels = pod["metadata"].get("labels") or {}
        fail = 0.0
        delay = 0.0
        understood = 0.0
        bad = 0.0
        timeout = False
        reason = ""
        for name in endpoints:
            dst = c.get("Pod", name)
            if dst is None:
                fail += 1
                continue
            dst_labels = dst["metadata"].get("labels") or {}
            dst_container = main_container(dst["spec"])
            image = str(dst_container.get("image", ""))
            number = _target_port(target, dst_container)
            if number is None or number not in listening_ports(image):
                fail += 1
                reason = (
                    f"dial tcp {dst['status'].get('podIP')}:{number}: connect: connection refused"
                )
                continue
            if not _policy_allows(policies, src_labels, dst_labels, number):
                fail += 1
                timeout = True
                reason = f"dial tcp {host}:{port}: i/o timeout"
                continue
            blocked, add = self._network_chaos(src_name, name)
            if blocked:
                fail += 1
                timeout = True
                reason = f"dial tcp {host}:{port}: i/o timeout"
                continue
            delay += add
            if call.service == VALKEY_SERVICE:
                required = _required_password(dst_container, c.environment(dst))
                if required is not None and required != password:
                    fail += 1
                    reason = (
                        "NOAUTH Authentication required. (StackExchange.Redis.RedisServerException)"
                    )
                    continue
            if call.protocol == "postgres" and password != POSTGRES_PASSWORD:
                fail += 1
                reason = 'FATAL: password authentication failed for user "otelu"'
                continue
            http_fail, http_reason, http_delay, http_bad = _http_chaos(
                c.chaos.acting("HTTPChaos", name), number, call
            )
            delay += http_delay
            if http_fail:
                fail += 1
                reason = http_reason
                continue
            if http_bad:
                bad += 1
            program = image_program(image)
            if program == call.service:
                understood += 1
            else:
                reason = (
                    "rpc error: code = Unimplemented desc = unknown service or method "
                    f"{call.operation} (served by {program or image})"
                )
        n = len(endpoints)
        reached = n - fail
        ok_share = understood / reached if reached > 0 else 1.0
        bad_share = bad / reached if reached > 0 else 0.0
        return fail / n, reason, delay / n, timeout, ok_share, bad_share

    def _network_chaos(self, src: str, dst: str) -> tuple[bool, float]:
        """Whether the experiments acting on either pod drop the packets, and the delay they add."""
        chaos = self.cluster.chaos
        delay = 0.0
        for o in self.cluster.of_kind("NetworkChaos"):
            if not chaos.active(o):
                continue
            spec = o.get("spec") or {}
            action = spec.get("action")
            direction = spec.get("direction", "to")
            src_in, dst_in = chaos.targets(o, src), chaos.targets(o, dst)
            has_target = isinstance(spec.get("target"), dict)
            src_t = chaos.targets(o, src, ".Target")
            dst_t = chaos.targets(o, dst, ".Target")
            if has_target:
                # Traffic between the recorded pods and the recorded targets, in its direction.
                outgoing = src_in and dst_t and direction in ("to", "both")
                incoming = dst_in and src_t and direction in ("from", "both")
                # A dropped reply breaks the connection as well.
                replies = (dst_in and src_t and direction == "to") or (
                    src_in and dst_t and direction == "from"
                )
                hit = outgoing or incoming or replies
            else:
                hit = src_in or dst_in
            if not hit:
                continue
            if action == "partition":
                return True, 0.0
            if action == "loss":
                loss = _percent((spec.get("loss") or {}).get("loss", "0"))
                if loss >= 100.0:
                    return True, 0.0
                # Retransmissions: each lost segment costs a retransmission timeout.
                delay += loss / 100.0 * 1000.0
            elif action == "delay":
                delay += _duration_ms(str((spec.get("delay") or {}).get("latency", "0ms")))
        return False, delay


# ---- helpers -----------------------------------------------------------------------------------

_LOCUST = Call(PROXY, "GET /", 1, "LOCUST_HOST", "http")
_KAFKA_FETCH = Call("kafka", PUBLISH, 1, "KAFKA_ADDR", "kafka")
_KAFKA_SCRAPE = Call("kafka", PUBLISH, 1, "KAFKA_BROKER", "kafka")
_OFREP = Call("flagd", "ofrep", 1, "FLAGD_HOST", "flagd")


def _deployment_of(pod: Obj) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "ReplicaSet":
            name = str(ref.get("name", ""))
            return name.rsplit("-", 1)[0]
    return ""


def _is_ip(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


def _percent(value: object) -> float:
    try:
        return float(str(value).rstrip("%") or 0)
    except ValueError:
        return 0.0


def _service_name(host: str, namespace: str) -> str | None:
    parts = host.split(".")
    if len(parts) == 1:
        return parts[0]
    if parts[1] != namespace:
        return None
    rest = ".".join(parts[2:])
    return parts[0] if rest in ("", "svc", "svc.cluster.local") else None


def _target_port(target: object, container: Obj) -> int | None:
    if isinstance(target, int):
        return target
    text = str(target)
    if text.isdigit():
        return int(text)
    for p in container.get("ports") or []:
        if p.get("name") == text:
            return int(p.get("containerPort", 0))
    return None


def _policy_allows(
    policies: list[Obj], src: dict[str, str], dst: dict[str, str], port: int
) -> bool:
    ingress = [
        p
        for p in policies
        if "Ingress" in _policy_types(p)
        and labels_match((p.get("spec") or {}).get("podSelector") or {}, dst)
    ]
    if ingress and not any(
        _rule_allows(r, src, port, "from")
        for p in ingress
        for r in (p.get("spec") or {}).get("ingress") or []
    ):
        return False
    egress = [
        p
        for p in policies
        if "Egress" in _policy_types(p)
        and labels_match((p.get("spec") or {}).get("podSelector") or {}, src)
    ]
    return not egress or any(
        _rule_allows(r, dst, port, "to")
        for p in egress
        for r in (p.get("spec") or {}).get("egress") or []
    )


def _policy_types(policy: Obj) -> list[str]:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    if types:
        return [str(t) for t in types]
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _rule_allows(rule: Obj, peer: dict[str, str], port: int, direction: str) -> bool:
    ports = rule.get("ports") or []
    if ports and not any(_port_matches(p, port) for p in ports):
        return False
    peers = rule.get(direction) or []
    if not peers:
        return True
    for p in peers:
        if "ipBlock" in p:
            continue
        if "podSelector" in p and labels_match(p.get("podSelector") or {}, peer):
            return True
        if "namespaceSelector" in p and "podSelector" not in p:
            return True
    return False


def _port_matches(spec: Obj, port: int) -> bool:
    value = spec.get("port")
    if value is None:
        return True
    if not isinstance(value, int) and not str(value).isdigit():
        return False
    low = int(value)
    high = int(spec.get("endPort", low))
    return low <= port <= high


def _duration_ms(text: str) -> float:
    seconds = parse_go_duration(text)
    if seconds is not None:
        return seconds * 1000.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def _http_chaos(objs: list[Obj], port: int, call: Call) -> tuple[bool, str, float, bool]:
    """(aborted, reason, added delay ms, body tampered) of the HTTPChaos acting on a callee."""
    if call.protocol != "http":
        return False, "", 0.0, False
    method, _, path = call.operation.partition(" ")
    for o in objs:
        spec = o.get("spec") or {}
        if int(spec.get("port", 0)) != port:
            continue
        if spec.get("target", "Request") != "Request" or not fnmatch(
            path, str(spec.get("path", "*"))
        ):
            continue
        if spec.get("method") and str(spec["method"]).upper() != method:
            continue
        if spec.get("abort"):
            return (
                True,
                f"{method} http://{call.service}:{port}{path}: EOF (connection aborted)",
                0.0,
                False,
            )
        if spec.get("replace") or spec.get("patch"):
            # The request reaches the server with a body it cannot handle.
            return False, "", 0.0, True
        if spec.get("delay"):
            return False, "", _duration_ms(str(spec.get("delay"))), False
    return False, "", 0.0, False


def _with_bad_requests(stats: OpStats, bad_rate: float) -> OpStats:
    """An operation's stats when part of its requests arrive with a tampered body (it fails
    them)."""
    if stats.rate <= 0:
        return stats
    share = min(1.0, bad_rate / stats.rate)
    error = 1 - (1 - stats.error) * (1 - share)
    causes = [*stats.causes, (share, "failed to parse the request body (unexpected token)")]
    return OpStats(rate=stats.rate, error=error, latency=stats.latency, causes=causes)


def _jvm_effect(cluster: Cluster, pods: list[Obj]) -> tuple[float, str, float] | None:
    if not pods:
        return None
    hit = 0
    message = ""
    add_ms = 0.0
    for pod in pods:
        program = image_program(str(main_container(pod["spec"]).get("image", "")))
        spec_obj = SERVICE_BY_NAME.get(program or "")
        if spec_obj is None or not spec_obj.jvm:
            continue
        for o in cluster.chaos.acting("JVMChaos", pod["metadata"]["name"]):
            spec = o.get("spec") or {}
            action = spec.get("action")
            where = f"{spec.get('class', '')}.{spec.get('method', '')}"
            if not jvm_rule_valid(spec, spec_obj.name):
                continue
            if action == "return":
                hit += 1
                message = (
                    f"java.lang.NullPointerException: Cannot invoke a method because "
                    f'"{where}()" returned {spec.get("returnValue")}'
                )
                break
            if action == "exception":
                hit += 1
                message = f"{spec.get('exception', 'java.io.IOException')} thrown in {where}"
                break
            if action == "stress" and spec.get("memType"):
                hit += 1
                message = "java.lang.OutOfMemoryError: Java heap space"
                add_ms = max(add_ms, 1500.0)
                break
            if action == "latency":
                add_ms = max(add_ms, float(spec.get("latency", 0)))
    return hit / len(pods), message, add_ms


def _jvm_heap(objs: list[Obj], container: Obj, base: float) -> float:
    """Memory a JVMChaos heap stress fills: the heap up to its maximum, which the JVM sizes below
    the container's limit (so the JVM, not the kernel, runs out of memory)."""
    total = 0.0
    for o in objs:
        spec = o.get("spec") or {}
        if spec.get("action") == "stress" and spec.get("memType") == "heap":
            limit = memory_limit(container) or 0.0
            total = max(total, 0.95 * limit - base)
    return max(total, 0.0)


def _stress_cpu(objs: list[Obj]) -> float:
    total = 0.0
    for o in objs:
        cpu = ((o.get("spec") or {}).get("stressors") or {}).get("cpu")
        if cpu:
            total += float(cpu.get("workers", 1)) * float(cpu.get("load", 100)) / 100.0
    return total


def _stress_memory(objs: list[Obj], container: Obj) -> float:
    total = 0.0
    for o in objs:
        mem = ((o.get("spec") or {}).get("stressors") or {}).get("memory")
        if not mem:
            continue
        size = str(mem.get("size", "0"))
        workers = float(mem.get("workers", 1))
        if size.endswith("%"):
            limit = memory_limit(container) or 0.0
            total += workers * limit * float(size[:-1]) / 100.0
        else:
            try:
                total += workers * parse_memory(size)
            except ValueError:
                continue
    return total


def _flag_resources(
    svc: str, values: dict[str, float], rates: dict[OpKey, float]
) -> tuple[float, float, float]:
    """(burning CPU cores, leak bytes/s, ms added per leaked MiB) the flags cause in a service."""
    cpu = 0.0
    leak = 0.0
    ms_per_mib = 0.0
    for flag, value in values.items():
        definition = FLAG_BY_KEY[flag]
        if value <= 0 or definition.service != svc:
            continue
        share = min(value, 1.0)
        if definition.effect == "cpu":
            cpu += definition.magnitude / 1000.0 * share
        elif definition.effect == "gc":
            cpu += 0.1 * share
        elif definition.effect == "leak":
            calls = sum(r for k, r in rates.items() if k[0] == svc)
            leak += calls * value * definition.magnitude * 1024.0
        elif definition.effect == "cache":
            # The cache list grows with every request; lookups scan it.
            leak += definition.magnitude * MiB / 60.0 * share
            ms_per_mib += CACHE_MS_PER_MIB
    return cpu, leak, ms_per_mib


def _effect_value(values: dict[str, float], effect: str) -> float:
    """The largest value among the flags that are on with a given effect."""
    return max((v for k, v in values.items() if FLAG_BY_KEY[k].effect == effect), default=0.0)


def _required_password(container: Obj, env: dict[str, str]) -> str | None:
    args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    for i, arg in enumerate(args):
        if arg == "--requirepass" and i + 1 < len(args):
            value = args[i + 1]
            for name, text in env.items():
                value = value.replace(f"$({name})", text)
            return value
    return None


def _overload_message(svc: str) -> str:
    return f"{svc} is overloaded: request queue full, deadline exceeded (CPU throttled)"


def _flag_message(flag: str, svc: str, op: str) -> str:
    messages = {
        "cartFailure": "Can't access cart storage. System.ApplicationException: Wasn't able to "
        "connect to redis",
        "adFailure": "io.grpc.StatusRuntimeException: UNAVAILABLE",
        "productCatalogFailure": "rpc error: code = Internal desc = Error: Product Catalog Fail "
        "Feature Flag Enabled",
        "paymentFailure": "Payment request failed. Invalid token. app.loyalty.level=gold",
    }
    return messages.get(flag, f"{op} failed in {svc} ({flag})")


def _downstream_message(call: Call, callee: OpStats | None) -> str:
    if callee is not None and callee.causes:
        inner = max(callee.causes)[1]
        return f"{call.operation} on {call.service} failed: {inner}"
    return f"{call.operation} on {call.service} failed"


def _flag_specs(text: str) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    flags = doc.get("flags") if isinstance(doc, dict) else None
    if not isinstance(flags, dict):
        return {}
    return {str(k): v for k, v in flags.items() if isinstance(v, dict)}


def served_shares(spec: dict[str, Any]) -> dict[str, float]:
    """The share of evaluations each variant of a flag gets: all to the default, unless a
    `fractional` targeting rule splits them by weight (weights need not add up to 100)."""
    default = str(spec.get("defaultVariant", "off"))
    targeting = spec.get("targeting")
    if not isinstance(targeting, dict) or "fractional" not in targeting:
        return {default: 1.0}
    buckets = [
        (str(b[0]), float(b[1]))
        for b in targeting.get("fractional") or []
        if isinstance(b, list) and len(b) == 2 and isinstance(b[1], int | float) and b[1] >= 0
    ]
    total = sum(w for _, w in buckets)
    if total <= 0:
        return {default: 1.0}
    out: dict[str, float] = {}
    for variant, weight in buckets:
        out[variant] = out.get(variant, 0.0) + weight / total
    return out


def served_variant(spec: dict[str, Any]) -> str:
    """The variant flagd serves for a flag: its default, unless a `fractional` targeting rule
    decides (then the variant most evaluations get; `served_shares` gives every share)."""
    default = str(spec.get("defaultVariant", "off"))
    targeting = spec.get("targeting")
    if not isinstance(targeting, dict) or "fractional" not in targeting:
        return default
    buckets = [
        b
        for b in targeting.get("fractional") or []
        if isinstance(b, list) and len(b) == 2 and isinstance(b[1], int | float)
    ]
    if not buckets:
        return default
    best = max(buckets, key=lambda b: float(b[1]))
    return str(best[0])
