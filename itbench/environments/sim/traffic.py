"""The twin's request model: load flows from the load generator through the call graph.

Every call is routed the way the cluster would route it: the caller's address variable names a
Service, the Service's port maps to a targetPort, its Endpoints list ready pods, NetworkPolicies
and Chaos Mesh objects decide whether packets pass, and the program in the reached pod decides
whether it understands the call. Errors and latency flow back up to the caller.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

from itbench.core.shop import (
    FLAG_BY_KEY,
    FLAGD_CONFIG_KEY,
    FLAGD_CONFIGMAP,
    KAFKA_CONSUMERS,
    OPERATIONS,
    PROXY,
    SERVICE_BY_NAME,
    VALKEY_SERVICE,
    Call,
    Operation,
    image_program,
    proxy_request_rates,
)
from itbench.environments.sim.cluster import (
    Cluster,
    PodDemand,
    chaos_selects,
    listening_ports,
)
from itbench.environments.sim.objects import (
    NODE_CPU_CORES,
    Obj,
    env_value,
    labels_match,
    main_container,
    parse_cpu,
    parse_memory,
)

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


@dataclass
class Latency:
    """A two-part latency distribution: body (weight 1 - tail) and tail, both log-normal."""

    median_ms: float
    tail: float = 0.0
    tail_ms: float = 0.0

    def mean_ms(self) -> float:
        """Mean of the mixture (log-normal sigma 0.4)."""
        k = math.exp(0.08)
        return ((1 - self.tail) * self.median_ms + self.tail * self.tail_ms) * k

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


@dataclass
class _Route:
    fail: float
    reason: str
    delay_ms: float
    timeout: bool
    callee_ok: float


class TrafficModel:
    """Computes each interval's traffic from the cluster's objects."""

    def __init__(self, cluster: Cluster) -> None:
        """Bind the model to a cluster; Kafka lag starts at zero."""
        self.cluster = cluster
        self.kafka_lag: dict[str, float] = {k.group: 0.0 for k in KAFKA_CONSUMERS}
        self._flag_cache: tuple[str, dict[str, str]] = ("", {})
        self._routes: dict[tuple[str, str, int], _Route] = {}
        self._route_signature: tuple[object, ...] = ()

    # ---- views ------------------------------------------------------------------------------
    def configured_flags(self) -> dict[str, str]:
        """Every flag of flagd-config and the variant flagd serves (see `served_variant`)."""
        cm = self.cluster.get("ConfigMap", FLAGD_CONFIGMAP)
        text = str(((cm or {}).get("data") or {}).get(FLAGD_CONFIG_KEY, ""))
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

    def _pods_by_service(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for pod in self.cluster.of_kind("Pod"):
            name = (pod["metadata"].get("labels") or {}).get("opentelemetry.io/name", "")
            owner = _deployment_of(pod)
            out.setdefault(owner or name, []).append(pod)
        return out

    # ---- one interval -----------------------------------------------------------------------
    def step(self, dt: float) -> TrafficState:
        """Compute the traffic of the interval that just ended.

        Args:
            dt: Interval length in seconds.
        """
        c = self.cluster
        pods_by_svc = self._pods_by_service()
        ready = {
            svc: [
                p
                for p in pods
                if c.runtime.get(p["metadata"]["name"]) and c.runtime[p["metadata"]["name"]].ready
            ]
            for svc, pods in pods_by_svc.items()
        }
        flagd_up = bool(ready.get("flagd"))
        flags = self.configured_flags() if flagd_up else {}
        values = {k: FLAG_BY_KEY[k].value(v) for k, v in flags.items() if k in FLAG_BY_KEY}
        chaos = {kind: c.of_kind(kind) for kind in _CHAOS_KINDS}
        policies = c.of_kind("NetworkPolicy")

        # Routes: for every (caller op, call) how the network treats it. They depend only on
        # objects, pod readiness and flags, so they are reused until one of those changes.
        signature = (
            c.generation,
            tuple(sorted(p["metadata"]["name"] for pods in ready.values() for p in pods)),
            tuple(sorted(values.items())),
        )
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
                    consumer.service,
                    Call("kafka", "orders publish", 1, "KAFKA_ADDR", "kafka"),
                    ready,
                    values,
                    chaos,
                    policies,
                )
            self._route_signature = signature
        routes = self._routes
        load_route = routes[("load-generator", PROXY, 0)]
        rates: dict[OpKey, float] = {k: 0.0 for k in _OPS}
        load_ready = bool(ready.get("load-generator"))
        load_rps = 0.0
        if load_ready:
            for path, rps in proxy_request_rates(_effect_value(values, "flood")).items():
                load_rps += rps
                rates[(PROXY, path)] += rps * (1 - load_route.fail)
        edges: dict[tuple[str, str, str, str], EdgeStats] = {}
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
                    rates[target] += made * (1 - route.fail) * route.callee_ok

        # Kafka: orders produced by successful checkouts, consumed by each group.
        place_order = ("checkout", "oteldemo.CheckoutService/PlaceOrder")
        produce_edge = edges.get((*place_order, "kafka", "orders publish"))
        kafka_extra = _effect_value(values, "kafka")
        produced = 0.0
        if produce_edge is not None:
            produced = produce_edge.rate * (1 - produce_edge.net_fail) * (1 + kafka_extra)
        consumed: dict[str, float] = {}
        for n, consumer in enumerate(KAFKA_CONSUMERS):
            route = routes[(consumer.service, "kafka", n)]
            replicas = len(ready.get(consumer.service, []))
            slowdown = 200.0 if kafka_extra > 0 else 1.0
            capacity = replicas * consumer.capacity_per_replica / slowdown * (1 - route.fail)
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
                labels = pod["metadata"].get("labels") or {}
                burn = _stress_cpu(chaos["StressChaos"], labels, c.namespace)
                flag_cpu, leak, ms_per_mib = _flag_resources(svc, values, rates)
                burn += flag_cpu
                extra_mem = _stress_memory(chaos["StressChaos"], labels, c.namespace, container)
                app = (spec.idle_cpu_m / 1000.0 if spec else 0.001) + (
                    op_cpu / n if pod in serving else 0.0
                )
                rt = c.runtime.get(pname)
                leaked = rt.leaked if rt is not None else 0.0
                demand[pname] = PodDemand(app + burn, leak, extra_mem)
                if pod in serving:
                    limit = _cpu_limit(container)
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
            ops[key] = self._serve(op, rates[key], speed, values, ready, chaos, routes, ops, edges)
        return TrafficState(
            ops=ops,
            edges=edges,
            demand=demand,
            kafka_lag=dict(self.kafka_lag),
            kafka_consumed=consumed,
            flags=flags,
            load_rps=load_rps if load_ready else 0.0,
        )

    def _serve(
        self,
        op: Operation,
        rate: float,
        speed: dict[str, tuple[float, float, float]],
        values: dict[str, float],
        ready: dict[str, list[Obj]],
        chaos: dict[str, list[Obj]],
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
                latency = Latency(
                    latency.median_ms, max(latency.tail, 0.25), latency.median_ms + 1800.0
                )
        if extra_ms > 0:
            latency = Latency(
                latency.median_ms + extra_ms,
                latency.tail,
                latency.tail_ms + extra_ms if latency.tail else 0.0,
            )
        jvm = _jvm_effect(chaos["JVMChaos"], ready.get(svc, []), self.cluster.namespace)
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
        return self._route(
            "load-generator",
            Call(PROXY, "GET /", 1, "LOCUST_HOST", "http"),
            ready,
            {},
            chaos,
            policies,
        )

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
        c = self.cluster
        for flag, value in values.items():
            definition = FLAG_BY_KEY[flag]
            if (
                value > 0
                and definition.effect == "unreachable"
                and definition.caller == caller
                and definition.service == call.service
            ):
                return _Route(
                    1.0,
                    "rpc error: code = Unavailable desc = name resolver error: produced zero "
                    "addresses (badAddress:50051)",
                    0.0,
                    False,
                    1.0,
                )
        callers = ready.get(caller) or []
        if not callers:
            d = c.get("Deployment", caller)
            if d is None:
                return _Route(1.0, "caller has no pods", 0.0, False, 1.0)
            callers = [
                {
                    "metadata": {
                        "labels": (d["spec"].get("template") or {})
                        .get("metadata", {})
                        .get("labels")
                        or {}
                    },
                    "spec": (d["spec"].get("template") or {}).get("spec") or {},
                }
            ]
        slow_route = 0.0
        for flag, value in values.items():
            definition = FLAG_BY_KEY[flag]
            if (
                value > 0
                and definition.effect == "slow-route"
                and definition.caller == caller
                and definition.service == call.service
            ):
                slow_route = value
        fails = 0.0
        delays = 0.0
        callee_ok = 0.0
        timeout = False
        reasons: list[str] = []
        for pod in callers:
            container = main_container(pod["spec"])
            f, reason, delay, to, ok = self._route_from(pod, container, call, chaos, policies)
            fails += f
            delays += delay
            callee_ok += ok
            timeout = timeout or to
            if reason:
                reasons.append(reason)
        n = len(callers)
        return _Route(
            fails / n,
            reasons[0] if reasons else "",
            delays / n + slow_route,
            timeout,
            callee_ok / n,
        )

    def _route_from(
        self,
        pod: Obj,
        container: Obj,
        call: Call,
        chaos: dict[str, list[Obj]],
        policies: list[Obj],
    ) -> tuple[float, str, float, bool, float]:
        """(fail share, reason, added delay ms, dropped packets?, share the callee understands)."""
        c = self.cluster
        host, port, password = _address(container, call)
        if host is None:
            return 1.0, f"{call.address_env} is not set", 0.0, False, 1.0
        svc_name = _service_name(host, c.namespace)
        svc = c.get("Service", svc_name) if svc_name else None
        if svc is None:
            return 1.0, f"dial tcp: lookup {host}: no such host", 0.0, False, 1.0
        target = None
        for sp in (svc.get("spec") or {}).get("ports") or []:
            if int(sp.get("port", 0)) == port:
                target = sp.get("targetPort", sp.get("port"))
        if target is None:
            return 1.0, f"dial tcp {host}:{port}: connect: connection refused", 0.0, False, 1.0
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
            )
        src_labels = pod["metadata"].get("labels") or {}
        fail = 0.0
        delay = 0.0
        understood = 0.0
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
            blocked, add = _network_chaos(
                chaos["NetworkChaos"], src_labels, dst_labels, c.namespace
            )
            if blocked:
                fail += 1
                timeout = True
                reason = f"dial tcp {host}:{port}: i/o timeout"
                continue
            delay += add
            if call.service == VALKEY_SERVICE:
                required = _required_password(dst_container)
                if required is not None and required != password:
                    fail += 1
                    reason = (
                        "NOAUTH Authentication required. (StackExchange.Redis.RedisServerException)"
                    )
                    continue
            http_fail, http_reason, http_delay = _http_chaos(
                chaos["HTTPChaos"], dst_labels, c.namespace, number, call
            )
            delay += http_delay
            if http_fail:
                fail += 1
                reason = http_reason
                continue
            program = image_program(image)
            if program == call.service:
                understood += 1
            else:
                reason = (
                    "rpc error: code = Unimplemented desc = unknown service or method "
                    f"{call.operation} (served by {program or image})"
                )
                understood += 0
        n = len(endpoints)
        reached = n - fail
        ok_share = understood / reached if reached > 0 else 1.0
        return fail / n, reason, delay / n, timeout, ok_share


# ---- helpers -----------------------------------------------------------------------------------


def _deployment_of(pod: Obj) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "ReplicaSet":
            name = str(ref.get("name", ""))
            return name.rsplit("-", 1)[0]
    return ""


def _address(container: Obj, call: Call) -> tuple[str | None, int, str | None]:
    env = call.address_env
    raw = env_value(container, env)
    if raw is None:
        return None, 0, None
    if call.protocol == "flagd":
        port_text = env_value(container, "FLAGD_PORT") or "8013"
        return raw, int(port_text) if port_text.isdigit() else 0, None
    if env.endswith("_HOST"):
        port_var = env_value(container, env[: -len("_HOST")] + "_PORT")
        if port_var is not None:
            return raw, int(port_var) if port_var.isdigit() else 0, None
    text = raw
    password = None
    if "," in text:
        text, *options = text.split(",")
        for option in options:
            key, _, value = option.partition("=")
            if key.strip() == "password":
                password = value.strip()
    text = text.split("://", 1)[-1].split("/", 1)[0]
    host, _, port_text = text.rpartition(":")
    if not host:
        host, port_text = port_text, "80"
    return host, int(port_text) if port_text.isdigit() else 0, password


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


def _network_chaos(
    objs: list[Obj], src: dict[str, str], dst: dict[str, str], ns: str
) -> tuple[bool, float]:
    delay = 0.0
    for o in objs:
        spec = o.get("spec") or {}
        action = spec.get("action")
        src_in = chaos_selects(o, src, ns)
        dst_in = chaos_selects(o, dst, ns)
        target = spec.get("target")
        target_src = target is None or chaos_selects({"spec": target}, src, ns)
        target_dst = target is None or chaos_selects({"spec": target}, dst, ns)
        direction = spec.get("direction", "to")
        if action == "partition":
            forward = src_in and target_dst and direction in ("to", "both")
            backward = dst_in and target_src and direction in ("to", "both", "from")
            reverse = src_in and target_dst and direction == "from"
            if forward or backward or reverse:
                return True, 0.0
        elif action == "delay" and (src_in or dst_in):
            delay += _duration_ms(str((spec.get("delay") or {}).get("latency", "0ms")))
        elif action == "loss" and (src_in or dst_in):
            loss = float(str((spec.get("loss") or {}).get("loss", "0")).rstrip("%") or 0)
            delay += loss / 100.0 * 200.0
    return False, delay


def _duration_ms(text: str) -> float:
    units = (("ms", 1.0), ("us", 0.001), ("s", 1000.0), ("m", 60000.0))
    for suffix, scale in units:
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def _http_chaos(
    objs: list[Obj], dst: dict[str, str], ns: str, port: int, call: Call
) -> tuple[bool, str, float]:
    if call.protocol != "http":
        return False, "", 0.0
    path = call.operation.split(" ", 1)[-1]
    for o in objs:
        spec = o.get("spec") or {}
        if not chaos_selects(o, dst, ns) or int(spec.get("port", 0)) != port:
            continue
        if spec.get("target", "Request") != "Request" or not fnmatch(
            path, str(spec.get("path", "*"))
        ):
            continue
        if spec.get("abort"):
            return (
                True,
                f"{call.operation.split(' ')[0]} http://{call.service}:{port}{path}: EOF "
                "(connection aborted)",
                0.0,
            )
        if spec.get("replace") or spec.get("patch"):
            return True, f"HTTP 400 Bad Request from {call.service}: malformed request body", 0.0
        if spec.get("delay"):
            return False, "", _duration_ms(str(spec.get("delay")))
    return False, "", 0.0


def _jvm_effect(objs: list[Obj], pods: list[Obj], ns: str) -> tuple[float, str, float] | None:
    if not pods or not objs:
        return None
    hit = 0
    message = ""
    add_ms = 0.0
    for pod in pods:
        program = image_program(str(main_container(pod["spec"]).get("image", "")))
        spec_obj = SERVICE_BY_NAME.get(program or "")
        if spec_obj is None or not spec_obj.jvm:
            continue
        labels = pod["metadata"].get("labels") or {}
        for o in objs:
            spec = o.get("spec") or {}
            if not chaos_selects(o, labels, ns):
                continue
            action = spec.get("action")
            where = f"{spec.get('class', '')}.{spec.get('method', '')}"
            if action == "return":
                hit += 1
                message = (
                    f"java.lang.NullPointerException: {where} returned {spec.get('value', 'null')}"
                )
                break
            if action == "exception":
                hit += 1
                message = f"{spec.get('exception', 'java.io.IOException')} thrown in {where}"
                break
            if action == "latency":
                add_ms = max(add_ms, float(spec.get("latency", 0)))
    return hit / len(pods), message, add_ms


def _stress_cpu(objs: list[Obj], labels: dict[str, str], ns: str) -> float:
    total = 0.0
    for o in objs:
        cpu = ((o.get("spec") or {}).get("stressors") or {}).get("cpu")
        if cpu and chaos_selects(o, labels, ns):
            total += float(cpu.get("workers", 1)) * float(cpu.get("load", 100)) / 100.0
    return total


def _stress_memory(objs: list[Obj], labels: dict[str, str], ns: str, container: Obj) -> float:
    total = 0.0
    for o in objs:
        mem = ((o.get("spec") or {}).get("stressors") or {}).get("memory")
        if not mem or not chaos_selects(o, labels, ns):
            continue
        size = str(mem.get("size", "0"))
        workers = float(mem.get("workers", 1))
        if size.endswith("%"):
            limit_text = ((container.get("resources") or {}).get("limits") or {}).get("memory")
            limit = parse_memory(limit_text) if limit_text else 0.0
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
        if definition.effect == "cpu":
            cpu += definition.magnitude / 1000.0
        elif definition.effect == "gc":
            cpu += 0.1
        elif definition.effect == "leak":
            calls = sum(r for k, r in rates.items() if k[0] == svc)
            leak += calls * value * definition.magnitude * 1024.0
        elif definition.effect == "cache":
            # The cache list grows with every request; lookups scan it.
            leak += definition.magnitude * MiB / 60.0
            ms_per_mib += CACHE_MS_PER_MIB
    return cpu, leak, ms_per_mib


def _effect_value(values: dict[str, float], effect: str) -> float:
    """The largest value among the flags that are on with a given effect."""
    return max((v for k, v in values.items() if FLAG_BY_KEY[k].effect == effect), default=0.0)


def _required_password(container: Obj) -> str | None:
    args = [str(a) for a in (container.get("args") or []) + (container.get("command") or [])]
    for i, arg in enumerate(args):
        if arg == "--requirepass" and i + 1 < len(args):
            return args[i + 1]
    return None


def _cpu_limit(container: Obj) -> float | None:
    raw = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
    try:
        return parse_cpu(raw) if raw is not None else None
    except ValueError:
        return None


def _overload_message(svc: str) -> str:
    return f"{svc} is overloaded: request queue full, deadline exceeded (CPU throttled)"


def _flag_message(flag: str, svc: str, op: str) -> str:
    messages = {
        "cartFailure": "Can't access cart storage. System.ApplicationException: Wasn't able to "
        "connect to redis",
        "adFailure": "io.grpc.StatusRuntimeException: UNAVAILABLE: Ad service failure "
        "(feature flag adFailure)",
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


def served_variant(spec: dict[str, Any]) -> str:
    """The variant flagd serves for a flag: its default, unless a `fractional` targeting rule
    decides (the twin serves the variant with the largest share; a rollout held at 0 % serves
    the other one)."""
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
