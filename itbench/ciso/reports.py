"""What a live cluster's policy engines say, as the posture the grader compares: the platform's
copies of a submitted policy (audit only, background scanning, scoped to the namespaces it
assesses) and the verdicts Kyverno's PolicyReports give the namespace's objects.

Pure functions over documents; `itbench.ciso.cluster` does the API calls. The shapes follow
Kyverno v1.19.0 (the stack's pin): a PolicyReport (`wgpolicyk8s.io/v1alpha2`) per resource,
named by the resource's uid, its `scope` the resource, one result per policy rule with
`source` (`kyverno` for ClusterPolicy and Policy, `KyvernoValidatingPolicy`,
`ValidatingAdmissionPolicy`), `policy` (the policy's name; `namespace/name` for a namespaced
Policy) and `result` (pass, fail, warn, error, skip); cluster-scoped resources (a Namespace) get
a ClusterPolicyReport (upstream `pkg/utils/report/results.go`, `pkg/controllers/report/aggregate`).
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from itbench.core.models.compliance import TargetVerdict, VerdictResult

Obj = dict[str, Any]

NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server gives every Namespace: its name (a namespace selector's handle)."""
MANAGED_LABEL = "itbench.io/evaluation"
"""Label on the platform's policy copies: the evaluation they belong to."""
REPORT_GROUP = "wgpolicyk8s.io"
REPORT_VERSION = "v1alpha2"

SOURCE_KYVERNO = "kyverno"
SOURCE_VALIDATING_POLICY = "KyvernoValidatingPolicy"
SOURCE_ADMISSION_POLICY = "ValidatingAdmissionPolicy"

RESULTS = {
    "pass": VerdictResult.PASS,
    # Kyverno reports a failed rule of an unscored policy as warn: the object still does not
    # meet the requirement.
    "fail": VerdictResult.FAIL,
    "warn": VerdictResult.FAIL,
    "error": VerdictResult.ERROR,
    # skip: the object matched the rule but a precondition or an exception excluded it; it was
    # assessed and found not in violation.
    "skip": VerdictResult.PASS,
}
"""Kyverno's result values and the verdict each one is."""


@dataclass(frozen=True)
class PlatformPolicy:
    """One object the platform installs for an evaluation.

    Attributes:
        group: API group (empty for the core group).
        version: API version within the group.
        plural: Resource name.
        kind: Kind.
        name: The platform's name for it (cluster-scoped, unique to the evaluation).
        body: The object.
        source: The `source` of its results in a PolicyReport (empty: it reports none, a
            binding).
        ready: How its readiness shows: `conditions` (ClusterPolicy's Ready condition),
            `conditionStatus` (ValidatingPolicy's status.conditionStatus.ready) or `` (none).
        submitted: `Kind/name` of the document it was made from.
    """

    group: str
    version: str
    plural: str
    kind: str
    name: str
    body: Obj
    source: str
    ready: str
    submitted: str

    @property
    def api_version(self) -> str:
        """`group/version`."""
        return f"{self.group}/{self.version}" if self.group else self.version


def evaluation_token(namespace: str, salt: str) -> str:
    """A short token naming one evaluation's objects: distinct per namespace and salt (the
    caller passes something unique, such as a random string)."""
    return hashlib.sha256(f"{namespace}\0{salt}".encode()).hexdigest()[:10]


def platform_name(token: str, n: int) -> str:
    """The platform's name for the n-th policy of an evaluation (a DNS label, 63 chars max)."""
    return f"itbench-ciso-{token}-{n}"


def _map(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _in_scope(patterns: Iterable[Any], namespace: str) -> bool:
    return any(isinstance(p, str) and fnmatch.fnmatchcase(namespace, p) for p in patterns)


def _scope_filter(block: Any, namespaces: list[str]) -> Any:
    """A Kyverno resource filter restricted to the namespaces (`namespaces` also matches a
    Namespace object by its own name, upstream `pkg/utils/match`); a filter the author limited
    to other namespaces matches none of them."""
    if not isinstance(block, dict):
        return block
    out = copy.deepcopy(block)
    resources = out.get("resources")
    if not isinstance(resources, dict):
        return out
    wanted = resources.get("namespaces")
    if isinstance(wanted, list) and wanted:
        kept = [ns for ns in namespaces if _in_scope(wanted, ns)]
    else:
        kept = list(namespaces)
    if kept:
        resources["namespaces"] = kept
    else:
        # No namespace of the evaluation is in the author's list: keep the rule matching
        # nothing (a selector no namespace satisfies) instead of widening it.
        resources["namespaces"] = list(namespaces)
        resources["namespaceSelector"] = {
            "matchExpressions": [{"key": NAME_LABEL, "operator": "DoesNotExist"}]
        }
    return out


def _scope_match(match: Any, namespaces: list[str]) -> Any:
    if not isinstance(match, dict):
        return match
    out = dict(match)
    for key in ("any", "all"):
        if isinstance(out.get(key), list):
            out[key] = [_scope_filter(b, namespaces) for b in out[key]]
    if "resources" in out:
        out = _scope_filter(out, namespaces)
    return out


def _selector_with(selector: Any, namespaces: list[str]) -> Obj:
    """A label selector ANDed with `the namespace is one of these`."""
    out: Obj = copy.deepcopy(selector) if isinstance(selector, dict) else {}
    expressions = out.get("matchExpressions")
    expressions = list(expressions) if isinstance(expressions, list) else []
    expressions.append({"key": NAME_LABEL, "operator": "In", "values": list(namespaces)})
    out["matchExpressions"] = expressions
    return out


def _ref(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name', '')}"


def _meta(name: str, token: str) -> Obj:
    return {"name": name, "labels": {MANAGED_LABEL: token}}


def _kyverno_policy(doc: Obj, name: str, token: str, namespaces: list[str]) -> PlatformPolicy:
    spec = copy.deepcopy(doc.get("spec"))
    if not isinstance(spec, dict):
        raise ValueError(f"{_ref(doc)}: spec must be a mapping")
    rules = spec.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ValueError(f"{_ref(doc)}: spec.rules: no rule")
    kept = []
    for rule in rules:
        # Only validation is assessment: a mutate or generate rule would change the cluster.
        if not isinstance(rule, dict) or not isinstance(rule.get("validate"), dict):
            continue
        rule = dict(rule)
        validate = dict(rule["validate"])
        validate["failureAction"] = "Audit"
        validate.pop("failureActionOverrides", None)
        rule["validate"] = validate
        rule["match"] = _scope_match(rule.get("match"), namespaces)
        kept.append(rule)
    if not kept:
        raise ValueError(f"{_ref(doc)}: spec.rules: no validate rule to evaluate")
    spec["rules"] = kept
    spec["background"] = True
    spec["admission"] = False
    for key in ("validationFailureAction", "validationFailureActionOverrides"):
        spec.pop(key, None)
    body = {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": _meta(name, token),
        "spec": spec,
    }
    return PlatformPolicy(
        group="kyverno.io",
        version="v1",
        plural="clusterpolicies",
        kind="ClusterPolicy",
        name=name,
        body=body,
        source=SOURCE_KYVERNO,
        ready="conditions",
        submitted=_ref(doc),
    )


def _validating_policy(doc: Obj, name: str, token: str, namespaces: list[str]) -> PlatformPolicy:
    spec = copy.deepcopy(doc.get("spec"))
    if not isinstance(spec, dict):
        raise ValueError(f"{_ref(doc)}: spec must be a mapping")
    spec["validationActions"] = ["Audit"]
    spec["evaluation"] = {
        **_map(spec.get("evaluation")),
        "background": {"enabled": True},
        "admission": {"enabled": False},
    }
    constraints = spec.get("matchConstraints")
    constraints = dict(constraints) if isinstance(constraints, dict) else {}
    constraints["namespaceSelector"] = _selector_with(
        constraints.get("namespaceSelector"), namespaces
    )
    spec["matchConstraints"] = constraints
    version = str(doc.get("apiVersion", "")).rsplit("/", 1)[-1] or "v1"
    body = {
        "apiVersion": f"policies.kyverno.io/{version}",
        "kind": "ValidatingPolicy",
        "metadata": _meta(name, token),
        "spec": spec,
    }
    return PlatformPolicy(
        group="policies.kyverno.io",
        version=version,
        plural="validatingpolicies",
        kind="ValidatingPolicy",
        name=name,
        body=body,
        source=SOURCE_VALIDATING_POLICY,
        ready="conditionStatus",
        submitted=_ref(doc),
    )


def _admission_policy(
    doc: Obj, bindings: list[Obj], name: str, token: str, namespaces: list[str]
) -> list[PlatformPolicy]:
    spec = copy.deepcopy(doc.get("spec"))
    if not isinstance(spec, dict):
        raise ValueError(f"{_ref(doc)}: spec must be a mapping")
    version = str(doc.get("apiVersion", "")).rsplit("/", 1)[-1] or "v1"
    group = "admissionregistration.k8s.io"
    out = [
        PlatformPolicy(
            group=group,
            version=version,
            plural="validatingadmissionpolicies",
            kind="ValidatingAdmissionPolicy",
            name=name,
            body={
                "apiVersion": f"{group}/{version}",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": _meta(name, token),
                "spec": spec,
            },
            source=SOURCE_ADMISSION_POLICY,
            ready="",
            submitted=_ref(doc),
        )
    ]
    # Kyverno reports on an admission policy through its bindings; without one it is unbound
    # (the API server would not apply it either), so the platform binds it as the author would.
    for n, binding in enumerate(bindings or [{"spec": {}}]):
        bspec = copy.deepcopy(binding.get("spec"))
        bspec = bspec if isinstance(bspec, dict) else {}
        bspec["policyName"] = name
        bspec["validationActions"] = ["Audit"]
        resources = bspec.get("matchResources")
        resources = dict(resources) if isinstance(resources, dict) else {}
        resources["namespaceSelector"] = _selector_with(
            resources.get("namespaceSelector"), namespaces
        )
        bspec["matchResources"] = resources
        bname = f"{name}-b{n}"
        out.append(
            PlatformPolicy(
                group=group,
                version=version,
                plural="validatingadmissionpolicybindings",
                kind="ValidatingAdmissionPolicyBinding",
                name=bname,
                body={
                    "apiVersion": f"{group}/{version}",
                    "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": _meta(bname, token),
                    "spec": bspec,
                },
                source="",
                ready="",
                submitted=_ref(binding) if binding.get("kind") else _ref(doc),
            )
        )
    return out


def platform_policies(docs: list[Obj], namespaces: list[str], token: str) -> list[PlatformPolicy]:
    """The platform's copies of a submitted policy (set): every policy renamed to a
    platform-owned cluster-scoped name, in audit mode with background scanning, matching only
    objects of `namespaces`.

    A ClusterPolicy or Policy becomes a ClusterPolicy whose validate rules match in those
    namespaces only (mutate, generate and image rules are left out: they would change the
    cluster); a ValidatingPolicy or ValidatingAdmissionPolicy (with its bindings) gets a
    namespace selector ANDed with its own.

    Raises:
        ValueError: A document the live engines cannot take (the message names it).
    """
    if not namespaces:
        raise ValueError("no namespace to evaluate in")
    bindings: dict[str, list[Obj]] = {}
    for doc in docs:
        if doc.get("kind") == "ValidatingAdmissionPolicyBinding":
            spec = _map(doc.get("spec"))
            bindings.setdefault(str(spec.get("policyName", "")), []).append(doc)
    out: list[PlatformPolicy] = []
    n = 0
    for doc in docs:
        kind = doc.get("kind")
        if kind == "ValidatingAdmissionPolicyBinding":
            continue
        name = platform_name(token, n)
        n += 1
        if kind in ("ClusterPolicy", "Policy"):
            out.append(_kyverno_policy(doc, name, token, namespaces))
        elif kind == "ValidatingPolicy":
            out.append(_validating_policy(doc, name, token, namespaces))
        elif kind == "ValidatingAdmissionPolicy":
            own = str((doc.get("metadata") or {}).get("name", ""))
            out += _admission_policy(doc, bindings.get(own, []), name, token, namespaces)
        else:
            raise ValueError(f"{_ref(doc)}: not a policy kind a live cluster evaluates")
    if not any(p.source for p in out):
        raise ValueError("no policy to evaluate (only bindings)")
    return out


def policy_ready(policy: PlatformPolicy, body: Mapping[str, Any] | None) -> tuple[bool, str]:
    """Whether the engine says an installed policy is ready, and its message if not."""
    if not policy.ready:
        return True, ""
    status = (body or {}).get("status")
    status = status if isinstance(status, dict) else {}
    if policy.ready == "conditionStatus":
        cs = status.get("conditionStatus")
        cs = cs if isinstance(cs, dict) else {}
        conditions = cs.get("conditions")
        ready = cs.get("ready") is True
    else:
        conditions = status.get("conditions")
        ready = any(
            isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in conditions or []
        )
    if ready:
        return True, ""
    messages = [
        f"{c.get('type')}: {c.get('message')}"
        for c in conditions or []
        if isinstance(c, dict) and c.get("status") != "True" and c.get("message")
    ]
    return False, "; ".join(messages)[:500]


@dataclass(frozen=True)
class ReportResult:
    """One result of one of the evaluation's policies on one object.

    Attributes:
        namespace: The object's namespace (its own name for a Namespace).
        target: The object, as `Kind/name`.
        verdict: What the result says.
    """

    namespace: str
    target: str
    verdict: TargetVerdict


def report_results(
    reports: Iterable[Mapping[str, Any]], policies: Iterable[PlatformPolicy]
) -> list[ReportResult]:
    """The results of the evaluation's policies in PolicyReports and ClusterPolicyReports.

    A result counts when its (source, policy) is one of the evaluation's policies; results of
    every other policy (the agent's, other trials', the cluster's) are ignored. The object is
    the report's `scope`; a report without one (the older per-namespace shape) names its
    objects in each result's `resources`.
    """
    wanted = {(p.source, p.name) for p in policies if p.source}
    out: list[ReportResult] = []
    for report in reports:
        if not isinstance(report, Mapping):
            continue
        scope = report.get("scope") if isinstance(report.get("scope"), dict) else None
        for result in report.get("results") or []:
            if not isinstance(result, dict):
                continue
            policy = str(result.get("policy", ""))
            if (str(result.get("source", "")), policy.rsplit("/", 1)[-1]) not in wanted:
                continue
            verdict = RESULTS.get(str(result.get("result", "")))
            if verdict is None:
                continue
            subjects = [scope] if scope is not None else list(result.get("resources") or [])
            message = str(result.get("message") or "")
            rule = str(result.get("rule") or "")
            detail = f"{rule}: {message}" if rule and message else message or rule
            for subject in subjects:
                if not isinstance(subject, dict) or not subject.get("kind"):
                    continue
                kind, name = str(subject["kind"]), str(subject.get("name", ""))
                namespace = name if kind == "Namespace" else str(subject.get("namespace", ""))
                if not namespace:
                    namespace = str(_map(report.get("metadata")).get("namespace", ""))
                out.append(
                    ReportResult(
                        namespace=namespace,
                        target=f"{kind}/{name}",
                        verdict=TargetVerdict(
                            target=f"{kind}/{name}", result=verdict, detail=detail[:1000]
                        ),
                    )
                )
    return out


def owners_of(objects: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The owning target of each derived object, from ownerReferences: a Pod's ReplicaSet's
    Deployment (or the ReplicaSet's), a ReplicaSet's Deployment."""
    direct: dict[str, str] = {}
    for obj in objects:
        meta = _map(obj.get("metadata"))
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("controller", True):
                direct[f"{obj.get('kind')}/{meta.get('name')}"] = (
                    f"{ref.get('kind')}/{ref.get('name')}"
                )
                break
    out: dict[str, str] = {}
    for ref in direct:
        top, seen = ref, {ref}
        while top in direct and direct[top] not in seen:
            top = direct[top]
            seen.add(top)
        out[ref] = top
    return out


def uncovered(
    targets: Iterable[str], results: Iterable[ReportResult], owners: Mapping[str, str]
) -> list[str]:
    """The targets no result speaks of yet (directly or through an object they own)."""
    seen = {owners.get(r.target, r.target) for r in results}
    return [t for t in targets if t not in seen]
