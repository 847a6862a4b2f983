"""Scoring speed: FPC-NTAM on a 10,000-entity topology and the report over 1,000 trials (one
agent, and three agents with their breakdowns and pairwise comparisons)."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import Any

from benchmarks.harness import Figure, median_seconds
from itbench.core.models.agent_io import DiagnosisReport, PredictedEntity
from itbench.core.models.base import Complexity, Domain
from itbench.core.models.report import TrialRecord
from itbench.core.models.scenario import EntityKind, GroundTruth, GroundTruthEntity, PropagationEdge
from itbench.core.models.trial import (
    DiagnosisScores,
    MitigationScores,
    PostureScores,
    TrialPhase,
    TrialScores,
)
from itbench.core.scoring import DEFAULT_PROFILE, build_report, score_diagnosis
from itbench.core.scoring.ntam import fpc_ntam
from itbench.core.topology import Topology, build_topology

SERVICES = 400
PODS_PER_SERVICE = 20


def big_topology(seed: int = 7) -> Topology:
    """400 services, each with Deployment, ReplicaSet, ConfigMap and 20 Pods, on 400 Nodes."""
    rnd = random.Random(seed)
    objects: list[dict[str, Any]] = []
    for i in range(SERVICES):
        svc = f"svc-{i:04d}"
        labels = {"app": svc}
        objects.append({"kind": "Deployment", "metadata": {"name": svc}})
        objects.append({"kind": "Service", "metadata": {"name": svc}, "spec": {"selector": labels}})
        objects.append({"kind": "ConfigMap", "metadata": {"name": f"{svc}-config"}})
        objects.append(
            {
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{svc}-rs",
                    "ownerReferences": [{"kind": "Deployment", "name": svc}],
                },
            }
        )
        for p in range(PODS_PER_SERVICE):
            objects.append(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{svc}-rs-{p:03d}",
                        "labels": labels,
                        "ownerReferences": [{"kind": "ReplicaSet", "name": f"{svc}-rs"}],
                    },
                    "spec": {
                        "nodeName": f"node-{rnd.randrange(SERVICES):04d}",
                        "volumes": [{"name": "c", "configMap": {"name": f"{svc}-config"}}],
                    },
                }
            )
    calls = [
        (f"svc-{i:04d}", f"svc-{rnd.randrange(SERVICES):04d}")
        for i in range(SERVICES)
        for _ in range(3)
    ]
    return build_topology(objects, calls)


def chain_truth(length: int = 8) -> GroundTruth:
    """A propagation chain over the first `length` services, each with Service and Pod aliases."""
    entities = [
        GroundTruthEntity(
            id=f"e{i}",
            kind=EntityKind.DEPLOYMENT,
            name=f"svc-{i:04d}",
            aliases=[f"Service/svc-{i:04d}", f"Pod/svc-{i:04d}-*"],
            root_cause=i == 0,
        )
        for i in range(length)
    ]
    edges = [PropagationEdge(source=f"e{i}", target=f"e{i + 1}") for i in range(length - 1)]
    return GroundTruth(entities=entities, propagation=edges)


def prediction(topology: Topology, size: int = 50, seed: int = 3) -> list[str]:
    """Half near the truth (its pods, ConfigMaps, Nodes), half anywhere."""
    rnd = random.Random(seed)
    near = [f"Pod/svc-{i:04d}-rs-{p:03d}" for i in range(8) for p in range(3)]
    near += [f"ConfigMap/svc-{i:04d}-config" for i in range(8, 12)]
    anywhere = rnd.sample(topology.nodes, size - len(near))
    return (near + anywhere)[:size]


def records(n: int = 1000, seed: int = 11) -> list[TrialRecord]:
    """n trials: 10 attempts per scenario, SRE and CISO, a few Errored."""
    rnd = random.Random(seed)
    out: list[TrialRecord] = []
    for t in range(n):
        scenario, attempt = t // 10, t % 10
        domain = Domain.CISO if scenario % 4 == 3 else Domain.SRE
        if rnd.random() < 0.05:
            phase, scores = TrialPhase.ERRORED, None
        else:
            diag, mit = rnd.random() < 0.3, rnd.random() < 0.2
            phase = TrialPhase.SUCCEEDED if diag and mit else TrialPhase.FAILED
            if domain == Domain.SRE:
                scores = TrialScores(
                    profile="default@1",
                    diagnosis=DiagnosisScores(
                        passed=diag,
                        fl_ntam=rnd.random(),
                        fpc_ntam=rnd.random(),
                        ttd_seconds=rnd.uniform(30, 300),
                    ),
                    mitigation=MitigationScores(passed=mit, ttr_seconds=rnd.uniform(60, 900)),
                )
            else:
                scores = TrialScores(
                    profile="default@1",
                    posture=PostureScores(
                        passed=diag, matched=1, expected=1, ttp_seconds=rnd.uniform(10, 90)
                    ),
                )
        out.append(
            TrialRecord(
                trial=f"t-{t}",
                run="bench",
                scenario=f"s-{scenario}",
                attempt=attempt,
                domain=domain,
                scenario_class=f"Class{scenario % 7}",
                complexity=list(Complexity)[scenario % 3],
                traces_enabled=scenario % 2 == 0,
                phase=phase,
                reason="EnvironmentUnavailable" if phase == TrialPhase.ERRORED else "",
                scores=scores,
                agent="bench-agent",
            )
        )
    return out


def three_agents(n: int = 1000) -> list[TrialRecord]:
    """n trials of three agents over the same scenarios (each its own outcomes)."""
    out: list[TrialRecord] = []
    for i in range(3):
        share = n // 3 + (1 if i < n % 3 else 0)
        for r in records(share, seed=11 + i):
            out.append(r.model_copy(update={"agent": f"agent-{i}", "trial": f"{r.trial}-{i}"}))
    return out


def run() -> list[Figure]:
    """Measure NTAM on the large topology and the aggregation of 1,000 trials."""
    topology = big_topology()
    truth = chain_truth()
    predicted = prediction(topology)
    report = DiagnosisReport(
        entities=[
            PredictedEntity(kind=EntityKind(ref.split("/")[0]), name=ref.split("/")[1])
            for ref in predicted
        ]
    )
    cold = big_topology()
    start = time.perf_counter()
    fpc_ntam(predicted, truth, cold, DEFAULT_PROFILE)
    cold_s = time.perf_counter() - start
    ntam_s = median_seconds(lambda: fpc_ntam(predicted, truth, topology, DEFAULT_PROFILE))
    diag_s = median_seconds(lambda: score_diagnosis(report, truth, topology, DEFAULT_PROFILE))
    trials = records()
    created = datetime(2026, 1, 1, tzinfo=UTC)
    agg_s = median_seconds(
        lambda: build_report(trials, DEFAULT_PROFILE, agent="bench-agent", created_at=created)
    )
    several = three_agents()
    agents_s = median_seconds(
        lambda: build_report(several, DEFAULT_PROFILE, agent="three", created_at=created)
    )
    return [
        Figure("scoring: topology entities", float(len(topology)), "count"),
        Figure("scoring: FPC-NTAM, 50 predicted, 10k entities", ntam_s * 1000, "ms", 50.0),
        Figure("scoring: FPC-NTAM, first call on a fresh topology", cold_s * 1000, "ms"),
        Figure("scoring: full diagnosis score, 50 predicted, 10k", diag_s * 1000, "ms"),
        Figure("scoring: report over 1,000 trials", agg_s * 1000, "ms", 200.0),
        Figure("scoring: report over 1,000 trials of 3 agents", agents_s * 1000, "ms", 200.0),
    ]
