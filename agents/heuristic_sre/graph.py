"""The call graph, and where on it an incident starts.

Failing calls are followed down from every failing service: a service with no failing call below
it fails on its own; a call that fails although its callee serves no errors points at what lies
between them (the callee's Service, replicas, NetworkPolicies, the network) or at the callee
itself; a slow service none of whose callees is slow is where latency starts. Then the chain of
callers that show symptoms is walked back up to the users.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agents.heuristic_sre.signals import Failure, Signals


@dataclass
class Graph:
    """The service call graph from the topology's `calls` edges."""

    callees: dict[str, list[str]] = field(default_factory=dict)
    callers: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_topology(cls, edges: list[dict[str, Any]]) -> Graph:
        """Read the `calls` edges of `GET /topology`."""
        graph = cls()
        for edge in edges:
            if edge.get("type") != "calls":
                continue
            a = str(edge["source"]).split("/", 1)[-1]
            b = str(edge["target"]).split("/", 1)[-1]
            graph.callees.setdefault(a, []).append(b)
            graph.callers.setdefault(b, []).append(a)
        return graph

    def neighbours(self, service: str) -> set[str]:
        """Direct callers and callees."""
        return set(self.callees.get(service, [])) | set(self.callers.get(service, []))

    def chain_up(self, start: str, symptomatic: set[str]) -> list[str]:
        """From a workload up its callers that show symptoms, to the farthest (the entry
        service when it is among them)."""
        previous: dict[str, str] = {}
        depth = {start: 0}
        queue = deque([start])
        while queue:
            current = queue.popleft()
            for caller in sorted(self.callers.get(current, [])):
                if caller in depth or caller not in symptomatic:
                    continue
                depth[caller] = depth[current] + 1
                previous[caller] = current
                queue.append(caller)
        end = max(depth, key=lambda s: (depth[s], s == "frontend", s))
        path = [end]
        while path[-1] != start:
            path.append(previous[path[-1]])
        return list(reversed(path))


@dataclass
class Origins:
    """Where the incident starts.

    Attributes:
        own: Services that fail with no failing call below them.
        edges: Calls that fail although the callee serves no errors, with the failures the
            caller reported.
        slow: Slow services whose callees are all fast.
        guessed: Failing calls to a callee that reports no spans and that no message names:
            each callee it may be is a suspect, none is known to fail.
    """

    own: set[str] = field(default_factory=set)
    edges: dict[tuple[str, str], list[Failure]] = field(default_factory=dict)
    slow: set[str] = field(default_factory=set)
    guessed: set[tuple[str, str]] = field(default_factory=set)


def find_origins(sig: Signals, graph: Graph, workloads: set[str]) -> Origins:
    """Follow failing calls down to where they start, and slow services to the slowest."""
    out = Origins()
    by_reporter: dict[str, list[Failure]] = {}
    calls: dict[str, set[str]] = {}
    for (a, b), share in sig.edges.items():
        if share > 0:
            calls.setdefault(a, set()).add(b)
    for f in sig.failures:
        by_reporter.setdefault(f.reporter, []).append(f)
        if f.target and f.target != f.reporter:
            calls.setdefault(f.reporter, set()).add(f.target)
    for a, targets in calls.items():
        if "" not in targets:
            continue
        targets.discard("")
        named = {f.target for f in by_reporter.get(a, []) if f.target and f.target != a}
        silent = {
            c for c in graph.callees.get(a, []) if c not in sig.instrumented and c in workloads
        }
        targets |= named or silent
        if not named:
            out.guessed |= {(a, c) for c in silent}
    seen: set[str] = set()
    queue = deque(sorted(s for s in workloads if sig.failing(s)))
    while queue:
        s = queue.popleft()
        if s in seen:
            continue
        seen.add(s)
        below = calls.get(s, set())
        if not below:
            out.own.add(s)
        for c in sorted(below):
            # A callee whose own calls fail is on the way down even when its errors, diluted
            # by the requests it still serves (or read just after the onset), stay under the
            # threshold.
            if c != s and (sig.failing(c) or calls.get(c)):
                queue.append(c)
            else:
                out.edges[(s, c)] = [
                    f for f in by_reporter.get(s, []) if f.target in (c, None) or not f.target
                ]
    for s in sorted(workloads):
        fast_below = not any(sig.slow(c) for c in graph.callees.get(s, []))
        if sig.slow(s) and not calls.get(s) and fast_below:
            out.slow.add(s)
    return out
