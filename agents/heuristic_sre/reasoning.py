"""From symptoms to causes: where the incident starts and what is wrong there.

The checks of `causes` run where the incident starts (`graph.find_origins`) and on every workload
whose pods show symptoms. What no object explains is read from the symptoms, as an SRE would
before handing it on: calls that time out with nothing blocking them (the network path drops
packets: a partition), a slow service whose callees are fast and whose CPU is free (added network
latency), a callee that serves no errors while its callers' requests to it are aborted or
rejected, a service failing on its own with nothing changed, pods that run and do not serve, CPU
or memory burnt inside the pods. Such causes are named and left alone.
"""

from __future__ import annotations

from agents.heuristic_sre.causes import UNHEALTHY_REASONS, Finding, Investigation, likely, texts
from agents.heuristic_sre.graph import Origins, find_origins
from agents.heuristic_sre.signals import THROTTLED
from itbench.client import FaultCategory

POD_ALERTS = frozenset(
    {"PodNotReady", "PodCrashLooping", "ContainerOOMKilled", "CPUThrottlingHigh", "MemoryUsageHigh"}
)


def investigate(inv: Investigation) -> list[Finding]:
    """Name the causes of the incident (none when no alert fires)."""
    sig, objects = inv.signals, inv.objects
    workloads = set(objects.deployments)
    if not sig.firing:
        inv.notes.append("no alert fires: nothing is wrong that the alerts know of")
        return []
    unhealthy = {w for w in workloads if _unhealthy(inv, w)}
    symptomatic = (sig.symptomatic() | unhealthy) & workloads
    inv.notes.append(f"services with symptoms: {sorted(symptomatic)}")
    inv.inspect_flags(symptomatic)
    origins = find_origins(sig, inv.graph, workloads)
    inv.notes.append(
        f"origins: failing on their own {sorted(origins.own)}; failing calls "
        f"{sorted(f'{a}->{b}' for a, b in origins.edges)}; slowest {sorted(origins.slow)}"
    )
    for w in sorted(symptomatic):
        if w in unhealthy or sig.alerts(w) & POD_ALERTS or sig.throttled.get(w, 0.0) > THROTTLED:
            inv.inspect_workload(w)
    for (a, b), failures in sorted(origins.edges.items()):
        inv.inspect_target(a, b, failures)
        inv.inspect_workload(b)
        if any(f.kind == "unresolvable" or (f.host and not f.target) for f in failures):
            inv.inspect_caller_config(a, failures)
    for s in sorted(origins.own):
        inv.inspect_workload(s)
        if not inv.definite_at(s):
            inv.inspect_caller_config(s, [f for f in sig.failures if f.reporter == s])
    _read_from_symptoms(inv, origins, symptomatic)
    return list(inv.findings.values())


def _unhealthy(inv: Investigation, workload: str) -> bool:
    state = inv.objects.pod_state(workload)
    return bool(state.pods and state.ready < len(state.pods)) or bool(
        state.reasons & UNHEALTHY_REASONS
    )


def _read_from_symptoms(inv: Investigation, origins: Origins, symptomatic: set[str]) -> None:
    """Causes no object shows, read at the origins nothing definite explains."""
    sig, graph = inv.signals, inv.graph
    for (a, b), failures in sorted(origins.edges.items()):
        if inv.definite_at(b) or inv.definite_at(a) or inv.flag_covers({a, b}):
            continue
        if (a, b) in origins.guessed:
            continue  # which of the silent callees fails is unknown; name none of them
        kinds = {f.kind for f in failures}
        text = texts(failures)
        if "timeout" in kinds:
            others = [
                c
                for c in graph.callers.get(b, [])
                if c != a and sig.rate.get(c, 0.0) > 0 and (c, b) not in origins.edges
            ]
            everyone = sum(1 for (_, y) in origins.edges if y == b) > 1 and not others
            where = b if everyone else a
            inv.add(
                likely(
                    where,
                    FaultCategory.NETWORK_DEGRADED,
                    f"calls from {a} to {b} time out ({text}) while {b}'s pods are up and no "
                    f"NetworkPolicy blocks them: the network path of {where} drops packets",
                )
            )
        elif "unresolvable" in kinds:
            inv.add(
                likely(
                    a,
                    FaultCategory.BAD_CONFIGURATION,
                    f"{a} calls an address that does not resolve ({text})",
                )
            )
        elif inv.named(b):
            continue
        elif kinds & {"no-endpoints", "refused"}:
            inv.add(
                likely(
                    b,
                    FaultCategory.PODS_DOWN,
                    f"calls from {a} find nothing serving at {b} ({text})",
                )
            )
        else:
            inv.add(
                likely(
                    b,
                    FaultCategory.APPLICATION_FAILURE,
                    f"{b} serves no errors itself, yet its callers' requests to it fail ({text}):"
                    f" requests to {b} are aborted or corrupted",
                )
            )
    for s in sorted(origins.own):
        if inv.definite_at(s) or inv.flag_covers({s}) or inv.named(s):
            continue
        text = texts([f for f in sig.failures if f.reporter == s])
        inv.add(
            likely(
                s,
                FaultCategory.APPLICATION_FAILURE,
                f"{s} fails {sig.errors.get(s, 0.0):.0%} of what it serves with no failing call "
                f"below it ({text})",
            )
        )
    for s in sorted(origins.slow):
        near = {s} | set(graph.callees.get(s, []))
        if inv.definite_at(s) or inv.flag_covers(near) or inv.named(s):
            continue
        inv.add(
            likely(
                s,
                FaultCategory.NETWORK_DEGRADED,
                f"{s} is slow (p95 {sig.latency.get(s, 0.0):.0f} ms) while everything it calls is "
                "fast and its CPU is not throttled: its network path adds latency",
            )
        )
    explained = {f.service for f in inv.findings.values()}
    for s in sorted(symptomatic - explained):
        lagging = "KafkaConsumerLag" in sig.alerts(s)
        if lagging and not inv.flag_covers({s} | graph.neighbours(s)):
            inv.add(
                likely(
                    s,
                    FaultCategory.APPLICATION_FAILURE,
                    f"consumer {s} lags behind on its topic with its pods healthy",
                )
            )
