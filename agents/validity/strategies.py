"""The cheap strategies, as ordinary SDK agents.

Each tries, honestly, to score without skill: doing nothing, guessing, claiming success, echoing
the alert, giving one fixed answer, naming everything, repairing everything, scaling the
symptom away, or reading what a fault injector leaves behind. None reads the ground truth.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from typing import Any

from agents.routines import begin, finish, ref, task_seed
from agents.validity.ciso import ciso_all_noncompliant, ciso_cis_union, ciso_reference_union
from itbench.client import (
    ActionVerb,
    AgentAction,
    CollectionKind,
    ComplianceSubmission,
    DiagnosisReport,
    Domain,
    EntityKind,
    EvidenceCollection,
    FaultCategory,
    ITBenchAPIError,
    ITBenchClient,
    MitigationReport,
    PostureReport,
    PredictedEntity,
    TaskDescription,
)

SERVICE_LABELS = ("service_name", "deployment", "service", "workload", "consumer_group", "app")
"""Alert labels that name the workload an alert is about."""
FLAGD_CONFIGMAP = "flagd-config"
FLAGD_KEY = "demo.flagd.json"
INJECTOR_KINDS = (
    "NetworkChaos",
    "PodChaos",
    "StressChaos",
    "HTTPChaos",
    "JVMChaos",
    "IOChaos",
    "Schedule",
)

Strategy = Callable[[ITBenchClient], None]

ALERT_GUESS: dict[str, FaultCategory] = {
    "ContainerOOMKilled": FaultCategory.RESOURCE_LIMITS,
    "MemoryUsageHigh": FaultCategory.RESOURCE_LIMITS,
    "CPUThrottlingHigh": FaultCategory.RESOURCE_LIMITS,
    "PodNotReady": FaultCategory.BAD_IMAGE,
    "PodCrashLooping": FaultCategory.BAD_IMAGE,
    "RequestErrorRate": FaultCategory.APPLICATION_FAILURE,
    "RequestLatencyHigh": FaultCategory.NETWORK_DEGRADED,
    "NoRequests": FaultCategory.SERVICE_MISROUTED,
    "KafkaConsumerLag": FaultCategory.APPLICATION_FAILURE,
    "HPAMaxedOut": FaultCategory.AUTOSCALING,
    "CostBudgetExceeded": FaultCategory.ALERTING_THRESHOLD,
}
"""What an alert most often means, read off its name alone."""

KIND_GUESS: dict[str, FaultCategory] = {
    "Flag": FaultCategory.FEATURE_FLAG,
    "ConfigMap": FaultCategory.FEATURE_FLAG,
    "NetworkPolicy": FaultCategory.TRAFFIC_BLOCKED,
    "Service": FaultCategory.SERVICE_MISROUTED,
    "Deployment": FaultCategory.BAD_IMAGE,
    "HorizontalPodAutoscaler": FaultCategory.AUTOSCALING,
    "NetworkChaos": FaultCategory.NETWORK_DEGRADED,
    "PodChaos": FaultCategory.PODS_DOWN,
    "StressChaos": FaultCategory.RESOURCE_STRESS,
    "HTTPChaos": FaultCategory.APPLICATION_FAILURE,
    "JVMChaos": FaultCategory.APPLICATION_FAILURE,
}
"""What a kind of object most often has wrong with it."""


# ---- shared moves ----------------------------------------------------------------------------


def _names(client: ITBenchClient, kind: str) -> list[dict[str, Any]]:
    try:
        return list(client.get(kind).items)
    except ITBenchAPIError:
        return []


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def _alerting_workloads(task: TaskDescription) -> list[str]:
    out: dict[str, None] = {}
    for alert in task.alerts:
        for label in SERVICE_LABELS:
            value = alert.labels.get(label)
            if value:
                out.setdefault(value, None)
                break
    return list(out)


def _act(client: ITBenchClient, action: AgentAction) -> str:
    try:
        return client.act(action).message
    except ITBenchAPIError as exc:
        return f"refused: {exc.detail}"


def _diagnose(
    client: ITBenchClient,
    roots: Iterable[tuple[str, str]],
    why: str,
    category: Callable[[str, str], FaultCategory | None] = lambda _k, _n: None,
) -> None:
    entities = [
        PredictedEntity(
            kind=EntityKind(kind), name=name, root_cause=True, category=category(kind, name)
        )
        for kind, name in dict.fromkeys(roots)
        if kind in {k.value for k in EntityKind}
    ]
    client.submit_diagnosis(DiagnosisReport(entities=entities, reasoning=why))


def _by_kind(kind: str, _name: str) -> FaultCategory | None:
    return KIND_GUESS.get(kind)


def _alert_guesses(task: TaskDescription) -> Callable[[str, str], FaultCategory | None]:
    """The category the alert about a workload suggests."""
    guesses: dict[str, FaultCategory] = {}
    for alert in task.alerts:
        for label in SERVICE_LABELS:
            value = alert.labels.get(label)
            if value:
                guess = ALERT_GUESS.get(alert.alertname)
                if guess is not None:
                    guesses.setdefault(value, guess)
                break
    return lambda _kind, name: guesses.get(name)


def _report(client: ITBenchClient, done: list[str], why: str) -> None:
    client.submit_mitigation(MitigationReport(actions=done[:200], resolved=True, reasoning=why))


def _skip_ciso(client: ITBenchClient, task: TaskDescription, verdict: bool | None = None) -> bool:
    """On a CISO trial: submit a posture report and, when `verdict` is given, artefacts that
    give every target that verdict (True: always compliant, False: always violating)."""
    if task.domain != Domain.CISO:
        return False
    if verdict is not None:
        client.submit_compliance(_fixed_artefacts(task, verdict))
    client.submit_posture(PostureReport(reasoning="no assessment"))
    finish(client)
    return True


def _fixed_artefacts(task: TaskDescription, verdict: bool) -> ComplianceSubmission:
    """Artefacts in the form the requirement asks for that decide nothing: every target gets
    `verdict` whatever the environment holds."""
    cel = "true" if verdict else "false"
    if "Submit `kyverno`" in task.requirement:
        policy = {
            "apiVersion": "policies.kyverno.io/v1",
            "kind": "ValidatingPolicy",
            "metadata": {"name": "fixed"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}
                    ]
                },
                "validations": [{"expression": cel, "message": "fixed"}],
            },
        }
        return ComplianceSubmission(kyverno=json.dumps(policy), reasoning="a fixed answer")
    collection = (
        f"kubectl get deployments,roles,rolebindings,serviceaccounts,namespaces -n "
        f'{task.namespace} -o json > "$ITBENCH_EVIDENCE"\n'
    )
    rules = (
        "compliant := true\n\nviolations := set()\n"
        if verdict
        else "compliant := false\n\nviolations := "
        '{sprintf("%s/%s", [i.kind, i.metadata.name]) | some i in input.items}\n'
    )
    if "Host/" in task.requirement:
        rules = f"compliant := {'true' if verdict else 'false'}\n"
    return ComplianceSubmission(
        rego="package cis\n\nimport rego.v1\n\n" + rules,
        collection=EvidenceCollection(kind=CollectionKind.SCRIPT, content=collection),
        reasoning="a fixed answer",
    )


def _flags(client: ITBenchClient) -> dict[str, dict[str, Any]]:
    for cm in _names(client, "configmaps"):
        if _meta(cm).get("name") == FLAGD_CONFIGMAP:
            try:
                doc = json.loads(str((cm.get("data") or {}).get(FLAGD_KEY, "")))
            except json.JSONDecodeError:
                return {}
            flags = doc.get("flags") if isinstance(doc, dict) else None
            return {k: v for k, v in (flags or {}).items() if isinstance(v, dict)}
    return {}


# ---- the strategies --------------------------------------------------------------------------


def null(client: ITBenchClient) -> None:
    """Does nothing: takes the trial and finishes."""
    client.next_trial()
    client.started()
    finish(client)


def claim_only(client: ITBenchClient) -> None:
    """Claims everything is resolved without looking or acting."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    client.submit_diagnosis(DiagnosisReport(reasoning="resolved"))
    _report(client, [], "everything is fine now")
    finish(client)


def random_guess(client: ITBenchClient) -> None:
    """Names a random workload and restarts another random one (seeded by what the task shows)."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    rng = random.Random(task_seed(task))
    workloads = sorted(_meta(d).get("name", "") for d in _names(client, "deployments"))
    if workloads:
        guess = rng.choice(list(FaultCategory))
        _diagnose(client, [("Deployment", rng.choice(workloads))], "a guess", lambda _k, _n: guess)
        target = rng.choice(workloads)
        done = [
            _act(
                client, AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=target)
            )
        ]
        _report(client, done, "restarted something")
    finish(client)


def alert_echo(client: ITBenchClient) -> None:
    """Names the workloads the firing alerts name, and restarts them."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    workloads = _alerting_workloads(task)
    _diagnose(
        client, [("Deployment", w) for w in workloads], "the alert says so", _alert_guesses(task)
    )
    done = [
        _act(client, AgentAction(verb=ActionVerb.ROLLOUT_RESTART, kind="Deployment", name=w))
        for w in workloads
    ]
    _report(client, done, "restarted what alerted")
    finish(client)


def fixed_answer(client: ITBenchClient) -> None:
    """Gives the same answer to every incident: the flag ConfigMap (CISO: every target
    compliant)."""
    task = begin(client)
    if _skip_ciso(client, task, verdict=True):
        return
    _diagnose(client, [("ConfigMap", FLAGD_CONFIGMAP)], "it is always the flags", _by_kind)
    finish(client)


def shotgun_diagnosis(client: ITBenchClient) -> None:
    """Names every workload, Service and flag as a root cause, to be sure to hit it (CISO:
    every target violating)."""
    task = begin(client)
    if _skip_ciso(client, task, verdict=False):
        return
    roots = [("Deployment", _meta(d).get("name", "")) for d in _names(client, "deployments")]
    roots += [("Service", _meta(s).get("name", "")) for s in _names(client, "services")]
    roots += [("Flag", k) for k in _flags(client)]
    _diagnose(client, roots, "one of these", _by_kind)
    finish(client)


def shotgun_mitigation(client: ITBenchClient) -> None:
    """Applies every generic remedy everywhere: every flag off, every NetworkPolicy deleted,
    every Deployment rolled back and restarted with raised memory, then names the alerting
    workloads."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    _diagnose(
        client,
        [("Deployment", w) for w in _alerting_workloads(task)],
        "the alert",
        _alert_guesses(task),
    )
    done: list[str] = []
    for key in sorted(_flags(client)):
        done.append(
            _act(
                client,
                AgentAction(
                    verb=ActionVerb.SET_FLAG,
                    kind="ConfigMap",
                    name=FLAGD_CONFIGMAP,
                    flag=key,
                    variant="off",
                ),
            )
        )
    for policy in _names(client, "networkpolicies"):
        done.append(
            _act(
                client,
                AgentAction(
                    verb=ActionVerb.DELETE, kind="NetworkPolicy", name=_meta(policy)["name"]
                ),
            )
        )
    for kind in INJECTOR_KINDS:
        for obj in _names(client, kind):
            done.append(
                _act(
                    client, AgentAction(verb=ActionVerb.DELETE, kind=kind, name=_meta(obj)["name"])
                )
            )
    for d in _names(client, "deployments"):
        name = _meta(d)["name"]
        revision = int(_meta(d).get("annotations", {}).get("deployment.kubernetes.io/revision", 1))
        if revision > 1:
            done.append(
                _act(
                    client, AgentAction(verb=ActionVerb.ROLLOUT_UNDO, kind="Deployment", name=name)
                )
            )
        done.append(
            _act(
                client,
                AgentAction(
                    verb=ActionVerb.SET_RESOURCES,
                    kind="Deployment",
                    name=name,
                    limits={"memory": "1Gi"},
                    requests={"memory": "256Mi"},
                ),
            )
        )
        if int(d.get("spec", {}).get("replicas", 1)) < 1:
            done.append(
                _act(
                    client,
                    AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name=name, replicas=1),
                )
            )
    client.wait(120)
    _report(client, done, "fixed everything")
    finish(client)


def scale_to_zero(client: ITBenchClient) -> None:
    """Makes the symptom go away: scales the alerting workloads to zero."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    workloads = _alerting_workloads(task)
    _diagnose(client, [("Deployment", w) for w in workloads], "the alert", _alert_guesses(task))
    done = [
        _act(client, AgentAction(verb=ActionVerb.SCALE, kind="Deployment", name=w, replicas=0))
        for w in workloads
    ]
    client.wait(120)
    _report(client, done, "no more alerts")
    finish(client)


def _fingerprints(client: ITBenchClient) -> list[tuple[int, str, str, str]]:
    """What an injector may leave behind, most telling first: (rank, kind, name, remedy)."""
    found: list[tuple[int, str, str, str]] = []
    for kind in INJECTOR_KINDS:
        found += [(0, kind, _meta(o)["name"], "delete") for o in _names(client, kind)]
    for kind in (
        "deployments",
        "services",
        "networkpolicies",
        "configmaps",
        "horizontalpodautoscalers",
    ):
        for obj in _names(client, kind):
            labels = _meta(obj).get("labels") or {}
            if labels.get("app.kubernetes.io/managed-by") == "itbench":
                found.append((1, str(obj.get("kind", kind)), _meta(obj)["name"], "delete"))
    found += [
        (2, "NetworkPolicy", _meta(p)["name"], "delete") for p in _names(client, "networkpolicies")
    ]
    found += [
        (3, "Flag", key, "flag-off")
        for key, spec in sorted(_flags(client).items())
        if spec.get("defaultVariant", "off") != "off"
    ]
    for d in _names(client, "deployments"):
        revision = int(_meta(d).get("annotations", {}).get("deployment.kubernetes.io/revision", 1))
        if revision > 1:
            found.append((4, "Deployment", _meta(d)["name"], "undo"))
    for s in _names(client, "services"):
        if int(_meta(s).get("generation", 1) or 1) > 1:
            found.append((5, "Service", _meta(s)["name"], "none"))
    return found


def fingerprint(client: ITBenchClient) -> None:
    """Never reads telemetry: looks for what a fault injector leaves behind (injector objects,
    platform labels, NetworkPolicies, flags switched on, Deployments past their first revision,
    Services edited), names the most telling artefact and reverts it."""
    task = begin(client)
    if _skip_ciso(client, task):
        return
    found = _fingerprints(client)
    if not found:
        client.submit_diagnosis(DiagnosisReport(reasoning="nothing left behind"))
        finish(client)
        return
    best = min(rank for rank, *_ in found)
    candidates = sorted((k, n, r) for rank, k, n, r in found if rank == best)
    kind, name, remedy = random.Random(task_seed(task)).choice(candidates)
    _diagnose(client, [(kind, name)], f"the injector left {ref(kind, name)} behind", _by_kind)
    done: list[str] = []
    if remedy == "delete":
        done.append(_act(client, AgentAction(verb=ActionVerb.DELETE, kind=kind, name=name)))
    elif remedy == "flag-off":
        done.append(
            _act(
                client,
                AgentAction(
                    verb=ActionVerb.SET_FLAG,
                    kind="ConfigMap",
                    name=FLAGD_CONFIGMAP,
                    flag=name,
                    variant="off",
                ),
            )
        )
    elif remedy == "undo":
        done.append(_act(client, AgentAction(verb=ActionVerb.ROLLOUT_UNDO, kind=kind, name=name)))
    client.wait(120)
    _report(client, done, "reverted what the injector did")
    finish(client)


STRATEGIES: dict[str, Strategy] = {
    "null": null,
    "random": random_guess,
    "claim-only": claim_only,
    "alert-echo": alert_echo,
    "fixed-answer": fixed_answer,
    "shotgun-diagnosis": shotgun_diagnosis,
    "shotgun-mitigation": shotgun_mitigation,
    "scale-to-zero": scale_to_zero,
    "fingerprint": fingerprint,
    "ciso-cis-union": ciso_cis_union,
    "ciso-reference-union": ciso_reference_union,
    "ciso-all-noncompliant": ciso_all_noncompliant,
}
"""Every cheap strategy by name."""

ECHO_CEILING = 0.15
"""What a diagnosis that echoes the alert may pass: a symptom sometimes is the cause."""
CEILINGS: dict[tuple[str, str], float] = {
    (strategy, task): ECHO_CEILING
    for strategy in ("alert-echo", "shotgun-mitigation", "scale-to-zero")
    for task in ("sre.diagnosis", "finops.diagnosis")
}
"""Ceilings by (strategy, task) where they differ from the default: the strategies whose
diagnosis echoes the alert."""
DEFAULT_CEILING = 0.05
"""The most any cheap strategy may pass on any task."""
