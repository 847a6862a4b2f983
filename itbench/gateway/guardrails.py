"""Guardrails: which reads and actions an agent may make, and why the others are refused.

Pure rules over the request and the trial's namespace. The gateway applies them before anything
reaches the environment and records every refusal on the trial's audit trail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from itbench.core.blinding import OBSERVABILITY_NAME
from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.gateway.kubectl import CLUSTER_SCOPED_KINDS, canonical_kind

PLATFORM_KINDS = frozenset({"Scenario", "BenchmarkRun", "Trial", "AgentSubmission"})
"""ITBench's own kinds (group itbench.io): the ground truth and the platform's bookkeeping."""

PLATFORM_NAMESPACES = frozenset({"itbench", "itbench-system"})
"""Namespaces where the platform itself runs."""

ALERTING_KINDS = frozenset(
    {"PrometheusRule", "ServiceMonitor", "PodMonitor", "AlertmanagerConfig", "Alertmanager"}
)
"""Kinds that configure alerting and scraping."""

PRIVILEGE_KINDS = frozenset({"Role", "RoleBinding", "ServiceAccount"})
"""Kinds that grant access; changing them could widen the agent's own privileges."""

_ALERT_RULES_NAME = re.compile(r"(alert.*rule|rule.*alert|prometheus)")


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused.

    Attributes:
        rule: The guardrail that refused it (a slug, also the problem type).
        reason: A sentence naming the object and what the agent may do instead.
    """

    rule: str
    reason: str


def check_read(kind: str, namespace: str | None, trial_namespace: str) -> Refusal | None:
    """Whether an agent may read objects of a kind in a namespace.

    Args:
        kind: The kind asked for (any kubectl spelling).
        namespace: The namespace asked for (None means the trial's).
        trial_namespace: The scenario's namespace.

    Returns:
        None when allowed, else the refusal.
    """
    canonical = canonical_kind(kind)
    if canonical in PLATFORM_KINDS:
        return Refusal(
            "ground-truth",
            f"{canonical} objects belong to the benchmark platform and hold the ground truth; "
            "agents may not read them",
        )
    if canonical in CLUSTER_SCOPED_KINDS and canonical != "Namespace":
        return None
    ns = namespace or trial_namespace
    return _check_namespace(
        ns, trial_namespace, f"namespace {ns!r}", f"only {trial_namespace!r} is in scope"
    )


def _check_namespace(ns: str, trial_namespace: str, subject: str, scope: str) -> Refusal | None:
    if ns in PLATFORM_NAMESPACES:
        return Refusal("platform", f"namespace {ns!r} belongs to the benchmark platform")
    if ns != trial_namespace:
        return Refusal("out-of-namespace", f"{subject} is outside this trial; {scope}")
    return None


def check_action(action: AgentAction, trial_namespace: str) -> Refusal | None:
    """Whether an agent may carry out an action.

    Args:
        action: The requested action.
        trial_namespace: The scenario's namespace.

    Returns:
        None when allowed, else the refusal.
    """
    targets: list[tuple[str, str, str | None]] = [(action.kind, action.name, action.namespace)]
    if action.verb == ActionVerb.PATCH:
        refusal = _check_identity(action, action.namespace or trial_namespace)
        if refusal is not None:
            return refusal
    if action.verb == ActionVerb.APPLY:
        meta: dict[str, Any] = action.manifest.get("metadata") or {}
        targets.append(
            (
                str(action.manifest.get("kind") or action.kind),
                str(meta.get("name") or action.name),
                meta.get("namespace") or action.namespace,
            )
        )
        if str(action.manifest.get("kind") or "").endswith("List") or "items" in action.manifest:
            # A List would carry objects past the checks below, which see only the wrapper.
            return Refusal("one-object", "apply takes one object; send its items one by one")
        api_version = str(action.manifest.get("apiVersion") or "")
        if api_version.startswith("itbench.io/"):
            return Refusal("platform", "objects of group itbench.io belong to the platform")
    for kind, name, namespace in targets:
        refusal = _check_target(action.verb, canonical_kind(kind), name, namespace, trial_namespace)
        if refusal is not None:
            return refusal
    return None


def _check_identity(action: AgentAction, namespace: str) -> Refusal | None:
    # A patch that rewrote kind or apiVersion would turn the object into another kind, past
    # every rule about kinds; a name or namespace change would move it.
    patch = action.patch
    ref = f"{action.kind}/{action.name}"
    changed: list[str] = [key for key in ("kind", "apiVersion") if key in patch]
    meta = patch.get("metadata") or {}
    expected = {"name": action.name, "namespace": namespace}
    changed += [f"metadata.{k}" for k, v in expected.items() if k in meta and meta[k] != v]
    if changed:
        return Refusal(
            "identity",
            f"a patch of {ref} may not change {', '.join(changed)}; patch the fields of the "
            "object itself, or apply a new object",
        )
    return None


def _check_target(
    verb: ActionVerb, kind: str, name: str, namespace: str | None, trial_namespace: str
) -> Refusal | None:
    ref = f"{kind}/{name}" if name else kind
    if verb == ActionVerb.DELETE and kind in ("Node", "Namespace"):
        return Refusal(
            "destructive",
            f"deleting {ref} is destructive and never allowed; fix the workloads instead",
        )
    if kind in PLATFORM_KINDS:
        return Refusal("platform", f"{ref} belongs to the benchmark platform")
    if kind in CLUSTER_SCOPED_KINDS:
        return Refusal(
            "out-of-namespace",
            f"{ref} is cluster-scoped; actions are limited to namespace {trial_namespace!r}",
        )
    ns = namespace or trial_namespace
    refusal = _check_namespace(
        ns, trial_namespace, f"{ns}/{ref}", f"only namespace {trial_namespace!r} is in scope"
    )
    if refusal is not None:
        return refusal
    if kind in ALERTING_KINDS:
        return Refusal(
            "observability",
            f"{ref} configures alerting; the observability stack and alert rules are off limits",
        )
    if kind == "ConfigMap" and _ALERT_RULES_NAME.search(name):
        return Refusal(
            "observability",
            f"{ref} holds alert rules; the observability stack and alert rules are off limits",
        )
    if OBSERVABILITY_NAME.search(name):
        return Refusal(
            "observability",
            f"{ref} is part of the observability stack, which agents may not change",
        )
    if kind in PRIVILEGE_KINDS:
        return Refusal("privilege", f"{ref} grants access; agents may not change permissions")
    return None
