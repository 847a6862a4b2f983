"""Kubernetes and Kyverno CEL policies, evaluated with a real CEL engine over the twin's objects.

Three policy kinds are CEL throughout: the Kubernetes ValidatingAdmissionPolicy (with its
ValidatingAdmissionPolicyBinding), the Kyverno ValidatingPolicy, and a Kyverno ClusterPolicy or
Policy whose validate rules are `validate.cel`. Each matching object of the namespace is
evaluated as an admission request would be in a background scan (`object` the object,
`oldObject` null, `request`, `namespaceObject`, `params` null, `variables` in order); an object
fails when a validation evaluates to false, errs when one cannot be evaluated, and passes
otherwise. Pattern-style Kyverno rules (pattern, anyPattern, deny, foreach, podSecurity,
preconditions) need Kyverno itself: they are reported as live-only.

The engine is `common-expression-language` (standard CEL: macros, has(), size and the string
functions of the standard library). Optional types (`?.`, `orValue`) and the Kubernetes
extension libraries are not available in it: an expression using them fails to compile, naming
the function.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

MAX_EXPRESSION_CHARS = 5000
"""Longest CEL expression accepted (the Kubernetes limit for a validation is 5 KiB too)."""

RESOURCES: dict[str, tuple[str, str]] = {
    "Pod": ("", "pods"),
    "Deployment": ("apps", "deployments"),
    "ReplicaSet": ("apps", "replicasets"),
    "Service": ("", "services"),
    "ServiceAccount": ("", "serviceaccounts"),
    "ConfigMap": ("", "configmaps"),
    "Secret": ("", "secrets"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "Namespace": ("", "namespaces"),
}
"""The (API group, resource) of every kind a policy may match in the twin."""

PATTERN_KEYS = ("pattern", "anyPattern", "deny", "foreach", "podSecurity", "manifests")
"""Kyverno validate forms that are not CEL."""


@functools.cache
def engine() -> Any:
    """The CEL engine: the native module of `common-expression-language`.

    The package's `__init__` also imports its interactive command line (prompt_toolkit, typer),
    which takes a second; the engine is its compiled extension alone, loaded directly.
    """
    spec = importlib.util.find_spec("cel")
    if spec is not None and spec.origin:
        for so in sorted(Path(spec.origin).parent.glob("cel.*.so")):
            loader = importlib.machinery.ExtensionFileLoader("cel", str(so))
            native = importlib.util.spec_from_file_location("cel", str(so), loader=loader)
            if native is not None:
                module = importlib.util.module_from_spec(native)
                loader.exec_module(module)
                return module
    import cel  # pragma: no cover - another layout of the package

    return cel  # pragma: no cover


class PolicyError(ValueError):
    """A policy document that cannot be used as written (the message names the field)."""


class LiveOnlyError(ValueError):
    """A pattern-style Kyverno policy: only a live cluster's Kyverno can evaluate it."""


@dataclass
class Selector:
    """Which objects a rule of a policy matches.

    Attributes:
        resources: (group, resource) pairs; `*` matches any.
        names: Object names (empty: any).
        namespaces: Namespace names (empty: any).
        namespace_selector: A label selector on the namespace (None: any).
        object_selector: A label selector on the object (None: any).
    """

    resources: list[tuple[str, str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    namespace_selector: Obj | None = None
    object_selector: Obj | None = None

    def matches(self, obj: Obj, namespace: Obj) -> bool:
        """Whether the selector matches an object."""
        kind = str(obj.get("kind", ""))
        group, resource = RESOURCES.get(kind, ("?", "?"))
        if not any((g in ("*", group)) and (r in ("*", resource)) for g, r in self.resources):
            return False
        meta = obj.get("metadata") or {}
        if self.names and not any(_glob(n, str(meta.get("name", ""))) for n in self.names):
            return False
        ns_name = str((namespace.get("metadata") or {}).get("name", ""))
        if self.namespaces and not any(_glob(n, ns_name) for n in self.namespaces):
            return False
        if self.namespace_selector is not None and not _labels_match(
            self.namespace_selector, (namespace.get("metadata") or {}).get("labels") or {}
        ):
            return False
        return self.object_selector is None or _labels_match(
            self.object_selector, meta.get("labels") or {}
        )


@dataclass
class CelPolicy:
    """One CEL policy (or one rule of a Kyverno ClusterPolicy) ready to evaluate.

    Attributes:
        ref: `Kind/name` of the policy (and `/rule` for a ClusterPolicy rule).
        match: Selectors of which one must match.
        exclude: Selectors of which none may match.
        conditions: Match conditions (CEL), all of which must hold.
        variables: (name, expression) in order.
        validations: (expression, message) pairs.
    """

    ref: str
    match: list[Selector]
    exclude: list[Selector] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    variables: list[tuple[str, str]] = field(default_factory=list)
    validations: list[tuple[str, str]] = field(default_factory=list)

    def expressions(self) -> list[tuple[str, str]]:
        """Every CEL expression with the field it comes from."""
        out = [(f"{self.ref}: matchConditions[{n}]", e) for n, e in enumerate(self.conditions)]
        out += [(f"{self.ref}: variables.{n}", e) for n, e in self.variables]
        out += [(f"{self.ref}: validations[{n}]", e) for n, (e, _m) in enumerate(self.validations)]
        return out


def _glob(pattern: str, value: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(value, pattern)


def _labels_match(selector: Obj, labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _ref(doc: Obj) -> str:
    return f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PolicyError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _map(value: Any, where: str) -> Obj:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PolicyError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _expression(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"{where}: expected a CEL expression (a non-empty string)")
    if len(value) > MAX_EXPRESSION_CHARS:
        raise PolicyError(f"{where}: {len(value)} characters, at most {MAX_EXPRESSION_CHARS}")
    return value


def _resource_rules(value: Any, where: str) -> list[Selector]:
    out = []
    for n, rule in enumerate(_list(value, where)):
        rule = _map(rule, f"{where}[{n}]")
        groups = [str(g) for g in _list(rule.get("apiGroups"), f"{where}[{n}].apiGroups")] or ["*"]
        resources = [
            str(r).split("/", 1)[0] for r in _list(rule.get("resources"), f"{where}[{n}].resources")
        ]
        if not resources:
            raise PolicyError(f"{where}[{n}].resources: name at least one resource (e.g. pods)")
        out.append(
            Selector(
                resources=[(g, r) for g in groups for r in resources],
                names=[str(x) for x in _list(rule.get("resourceNames"), f"{where}[{n}]")],
            )
        )
    return out


def _constraints(spec: Obj, where: str) -> tuple[list[Selector], list[Selector]]:
    constraints = _map(spec.get("matchConstraints"), f"{where}.matchConstraints")
    match = _resource_rules(
        constraints.get("resourceRules"), f"{where}.matchConstraints.resourceRules"
    )
    if not match:
        raise PolicyError(
            f"{where}.matchConstraints.resourceRules: a policy must say which resources it checks"
        )
    ns_selector = constraints.get("namespaceSelector")
    obj_selector = constraints.get("objectSelector")
    for s in match:
        s.namespace_selector = (
            _map(ns_selector, f"{where}.matchConstraints.namespaceSelector") or None
        )
        s.object_selector = _map(obj_selector, f"{where}.matchConstraints.objectSelector") or None
    exclude = _resource_rules(
        constraints.get("excludeResourceRules"), f"{where}.matchConstraints.excludeResourceRules"
    )
    return match, exclude


def _validations(spec: Obj, where: str) -> list[tuple[str, str]]:
    out = []
    for n, v in enumerate(_list(spec.get("validations"), f"{where}.validations")):
        v = _map(v, f"{where}.validations[{n}]")
        out.append(
            (
                _expression(v.get("expression"), f"{where}.validations[{n}].expression"),
                str(v.get("message", "")),
            )
        )
    if not out:
        raise PolicyError(f"{where}.validations: a policy needs at least one validation")
    return out


def _variables(value: Any, where: str) -> list[tuple[str, str]]:
    out = []
    for n, v in enumerate(_list(value, where)):
        v = _map(v, f"{where}[{n}]")
        name = v.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise PolicyError(f"{where}[{n}].name: a variable needs a name (an identifier)")
        out.append((name, _expression(v.get("expression"), f"{where}[{n}].expression")))
    return out


def _conditions(value: Any, where: str) -> list[str]:
    return [
        _expression(_map(c, f"{where}[{n}]").get("expression"), f"{where}[{n}].expression")
        for n, c in enumerate(_list(value, where))
    ]


def _admission(doc: Obj, bindings: Mapping[str, list[Obj]]) -> list[CelPolicy]:
    ref = _ref(doc)
    spec = _map(doc.get("spec"), f"{ref}: spec")
    match, exclude = _constraints(spec, f"{ref}: spec")
    if doc.get("kind") == "ValidatingAdmissionPolicy":
        name = str((doc.get("metadata") or {}).get("name", ""))
        bound = bindings.get(name, [])
        if not bound:
            raise PolicyError(
                f"{ref}: no ValidatingAdmissionPolicyBinding names it (spec.policyName); "
                "without one it checks nothing"
            )
        narrowed: list[Selector] = []
        for b in bound:
            resources = _map(_map(b.get("spec"), "binding spec").get("matchResources"), "")
            ns_selector = _map(resources.get("namespaceSelector"), "") or None
            obj_selector = _map(resources.get("objectSelector"), "") or None
            for s in match:
                narrowed.append(
                    Selector(
                        resources=s.resources,
                        names=s.names,
                        namespace_selector=ns_selector or s.namespace_selector,
                        object_selector=obj_selector or s.object_selector,
                    )
                )
        match = narrowed
    return [
        CelPolicy(
            ref=ref,
            match=match,
            exclude=exclude,
            conditions=_conditions(spec.get("matchConditions"), f"{ref}: spec.matchConditions"),
            variables=_variables(spec.get("variables"), f"{ref}: spec.variables"),
            validations=_validations(spec, f"{ref}: spec"),
        )
    ]


def _kinds(resources: Obj, where: str) -> list[tuple[str, str]]:
    out = []
    for kind in _list(resources.get("kinds"), f"{where}.kinds"):
        text = str(kind).split("/")[-1]
        if text == "*":
            out.append(("*", "*"))
        elif text in RESOURCES:
            out.append(RESOURCES[text])
        else:
            out.append(("?", text.lower()))
    if not out:
        raise PolicyError(f"{where}.kinds: name at least one kind (e.g. Pod)")
    return out


def _kyverno_selectors(block: Any, where: str) -> list[Selector]:
    block = _map(block, where)
    filters = _list(block.get("any"), f"{where}.any") + _list(block.get("all"), f"{where}.all")
    if "resources" in block:
        filters.append({"resources": block["resources"]})
    out = []
    for n, f in enumerate(filters):
        resources = _map(_map(f, f"{where}[{n}]").get("resources"), f"{where}[{n}].resources")
        out.append(
            Selector(
                resources=_kinds(resources, f"{where}[{n}].resources"),
                names=[str(x) for x in _list(resources.get("names"), "names")]
                + ([str(resources["name"])] if resources.get("name") else []),
                namespaces=[str(x) for x in _list(resources.get("namespaces"), "namespaces")],
                namespace_selector=_map(resources.get("namespaceSelector"), "") or None,
                object_selector=_map(resources.get("selector"), "") or None,
            )
        )
    return out


def _cluster_policy(doc: Obj) -> list[CelPolicy]:
    ref = _ref(doc)
    spec = _map(doc.get("spec"), f"{ref}: spec")
    out: list[CelPolicy] = []
    for n, rule in enumerate(_list(spec.get("rules"), f"{ref}: spec.rules")):
        where = f"{ref}: spec.rules[{n}]"
        rule = _map(rule, where)
        validate = rule.get("validate")
        if validate is None:
            continue  # mutate, generate and verifyImages rules assess nothing
        validate = _map(validate, f"{where}.validate")
        styles = [k for k in PATTERN_KEYS if k in validate]
        if styles or "preconditions" in rule:
            form = ", ".join(styles or ["preconditions"])
            raise LiveOnlyError(
                f"{where} uses {form}: pattern-style Kyverno rules are evaluated by Kyverno on a "
                "live cluster only; in the twin write the rule as validate.cel, a "
                "ValidatingPolicy or a ValidatingAdmissionPolicy"
            )
        cel_block = _map(validate.get("cel"), f"{where}.validate.cel")
        if not cel_block:
            raise PolicyError(f"{where}.validate: give validate.cel.expressions")
        expressions = []
        for m, e in enumerate(
            _list(cel_block.get("expressions"), f"{where}.validate.cel.expressions")
        ):
            e = _map(e, f"{where}.validate.cel.expressions[{m}]")
            expressions.append(
                (
                    _expression(
                        e.get("expression"), f"{where}.validate.cel.expressions[{m}].expression"
                    ),
                    str(e.get("message", validate.get("message", ""))),
                )
            )
        if not expressions:
            raise PolicyError(f"{where}.validate.cel.expressions: give at least one expression")
        match = _kyverno_selectors(rule.get("match"), f"{where}.match")
        if not match:
            raise PolicyError(f"{where}.match: a rule must say which resources it checks")
        out.append(
            CelPolicy(
                ref=f"{ref}/{rule.get('name', n)}",
                match=match,
                exclude=_kyverno_selectors(rule.get("exclude"), f"{where}.exclude")
                if rule.get("exclude")
                else [],
                variables=_variables(cel_block.get("variables"), f"{where}.validate.cel.variables"),
                validations=expressions,
            )
        )
    if not out:
        raise PolicyError(f"{ref}: spec.rules: no validate rule to evaluate")
    return out


POLICY_KINDS = {
    "ValidatingAdmissionPolicy": (
        "admissionregistration.k8s.io/v1",
        "admissionregistration.k8s.io/v1beta1",
    ),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io/v1",
        "admissionregistration.k8s.io/v1beta1",
    ),
    "ValidatingPolicy": (
        "policies.kyverno.io/v1",
        "policies.kyverno.io/v1beta1",
        "policies.kyverno.io/v1alpha1",
    ),
    "ClusterPolicy": ("kyverno.io/v1", "kyverno.io/v2beta1"),
    "Policy": ("kyverno.io/v1", "kyverno.io/v2beta1"),
}
"""The policy kinds a submission may hold, with their API versions."""


def check_kinds(docs: Iterable[Obj]) -> None:
    """Refuse a document that is not one of the policy kinds.

    Raises:
        PolicyError: Naming the document and what it is.
    """
    for n, doc in enumerate(docs):
        kind = doc.get("kind")
        api = doc.get("apiVersion")
        if kind not in POLICY_KINDS:
            raise PolicyError(
                f"document {n + 1}: kind {kind!r} is not a policy (take {', '.join(POLICY_KINDS)})"
            )
        if api not in POLICY_KINDS[str(kind)]:
            raise PolicyError(
                f"document {n + 1} ({kind}): apiVersion {api!r}; use "
                f"{' or '.join(POLICY_KINDS[str(kind)])}"
            )
        if not (doc.get("metadata") or {}).get("name"):
            raise PolicyError(f"document {n + 1} ({kind}): metadata.name is required")


def build(docs: list[Obj]) -> list[CelPolicy]:
    """The evaluable policies of a set of documents.

    Raises:
        PolicyError: A document cannot be used as written.
        LiveOnlyError: A pattern-style Kyverno rule.
    """
    check_kinds(docs)
    bindings: dict[str, list[Obj]] = {}
    for doc in docs:
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            name = str(_map(doc.get("spec"), f"{_ref(doc)}: spec").get("policyName", ""))
            bindings.setdefault(name, []).append(doc)
    out: list[CelPolicy] = []
    for doc in docs:
        kind = doc["kind"]
        if kind in ("ValidatingAdmissionPolicy", "ValidatingPolicy"):
            out += _admission(doc, bindings)
        elif kind in ("ClusterPolicy", "Policy"):
            out += _cluster_policy(doc)
    if not out:
        raise PolicyError("no policy to evaluate (only bindings)")
    return out


def compile_problems(policies: Iterable[CelPolicy]) -> list[str]:
    """Every expression that does not compile, with its field."""
    problems = []
    for policy in policies:
        for where, expression in policy.expressions():
            try:
                engine().compile(expression)
            except Exception as exc:
                problems.append(f"{where}: {_short(exc)}")
    return problems


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first[:300]


def _context(values: Mapping[str, Any]) -> Any:
    ctx = engine().Context()
    for key, value in values.items():
        ctx.add_variable(key, value)
    return ctx


def _eval(program: Any, values: Mapping[str, Any]) -> Any:
    return program.execute(_context(values))


def evaluate(
    policies: list[CelPolicy], objects: list[Obj], namespace: Obj
) -> list[tuple[str, str, str]]:
    """Evaluate policies on every object they match.

    Returns:
        (object `Kind/name`, pass|fail|error, detail) per evaluated object and policy.
    """
    compiled: dict[str, Any] = {}

    def program(expression: str) -> Any:
        if expression not in compiled:
            compiled[expression] = engine().compile(expression)
        return compiled[expression]

    results: list[tuple[str, str, str]] = []
    for policy in policies:
        for obj in objects:
            if not any(s.matches(obj, namespace) for s in policy.match):
                continue
            if any(s.matches(obj, namespace) for s in policy.exclude):
                continue
            ref = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            result, detail = _verdict(policy, obj, namespace, program)
            if result != "skip":
                results.append((ref, result, detail))
    return results


def _verdict(policy: CelPolicy, obj: Obj, namespace: Obj, program: Any) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    group, _resource = RESOURCES.get(str(obj.get("kind")), ("", ""))
    values: dict[str, Any] = {
        "object": obj,
        "oldObject": None,
        "params": None,
        "namespaceObject": namespace,
        "request": {
            "operation": "CREATE",
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "kind": {"group": group, "version": "v1", "kind": obj.get("kind")},
            "userInfo": {"username": "system:serviceaccount:kyverno:kyverno-background-controller"},
            "dryRun": False,
        },
    }
    variables: dict[str, Any] = {}
    values["variables"] = variables
    try:
        for expression in policy.conditions:
            if _eval(program(expression), values) is not True:
                return "skip", ""
        for name, expression in policy.variables:
            variables[name] = _eval(program(expression), values)
    except Exception as exc:
        return "error", f"{policy.ref}: {_short(exc)}"
    failures, errors = [], []
    for expression, message in policy.validations:
        try:
            result = _eval(program(expression), values)
        except Exception as exc:
            errors.append(f"{policy.ref}: {_short(exc)}")
            continue
        if result is False:
            failures.append(f"{policy.ref}: {message or 'validation failed'}")
        elif result is not True:
            errors.append(
                f"{policy.ref}: the validation returned {type(result).__name__}, not a bool"
            )
    if failures:
        return "fail", "; ".join(failures)[:900]
    if errors:
        return "error", "; ".join(errors)[:900]
    return "pass", ""
