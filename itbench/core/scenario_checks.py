"""The scenario validator's checks beyond the schema: sane values and names that exist.

Two kinds: checks of the raw document (every number finite, no invisible or bidirectional
control characters, `apiVersion` and `kind` given as `kubectl apply` needs them), and checks of
a schema-valid scenario against the shop it runs in (entities, mitigation targets and fault
targets exist in the topology, after the faults' own objects are created; expected alerts are
defined by a rule that can carry their labels; names follow Kubernetes' grammars). Every finding
is a (field path, reason) pair.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from itbench.core.alert_rules import RULE_NAME, AlertRule, alert_rules
from itbench.core.excerpts import excerpt
from itbench.core.faults import get_fault
from itbench.core.models.base import API_VERSION, Domain
from itbench.core.models.scenario import INJECTOR_KINDS, EntityKind, Scenario
from itbench.core.shop import (
    FLAG_BY_KEY,
    FLAGD_CONFIGMAP,
    HPA_WORKLOADS,
    KAFKA_CONSUMERS,
    NODES,
    SERVICES,
)

Finding = tuple[str, str]
"""(field path, reason)."""

MAX_FINDINGS = 50
"""Findings one pass reports for one document; the rest are counted, not listed."""

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_ALIAS = re.compile(r"^([A-Za-z]+)/([A-Za-z0-9._*?\[\]-]+)$")
_GROUPING = re.compile(r"\b(?:by|on)\s*\(([^)]*)\)")
_LABEL_REFERENCE = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")

# Zero-width, bidirectional and other invisible format characters (Unicode category Cf that
# matter in text), and C0/C1 controls other than tab, newline and carriage return.
_INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)

_SERVICE_NAME_KINDS = frozenset({"Service"})
_LABEL_NAME_KINDS = frozenset({"Namespace"})
_POD_LIKE = frozenset({"Pod", "ReplicaSet"})
"""Entity kinds named by the workload whose generated objects they stand for."""


@dataclass(frozen=True)
class Inventory:
    """What exists in the application before any fault: objects and telemetry label values.

    Attributes:
        objects: (kind, name) of every object of the modelled kinds.
        flags: flagd flag keys.
        alert_labels: Label names each alert rule can give its alerts, by alertname.
        alert_severities: The severity each rule sets, by alertname.
        span_services: `service_name` values the span metrics carry.
        consumer_groups: Kafka consumer groups.
    """

    objects: frozenset[tuple[str, str]]
    flags: frozenset[str]
    alert_labels: Mapping[str, frozenset[str]]
    alert_severities: Mapping[str, str]
    span_services: frozenset[str]
    consumer_groups: frozenset[str]

    def names(self, kind: str, extra: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
        """Sorted names of one kind (including objects the faults create)."""
        return sorted(n for k, n in self.objects | extra if k == kind)


def rule_label_names(rule: AlertRule) -> frozenset[str]:
    """Label names an alert of a rule can carry: its own labels, the expression's grouping
    (`by (...)`, `on (...)`), the labels its templates read, and alertname."""
    names = {"alertname", *rule.labels}
    for group in _GROUPING.findall(rule.expr):
        names.update(part.strip() for part in group.split(",") if part.strip())
    for text in (*rule.labels.values(), *rule.annotations.values()):
        names.update(_LABEL_REFERENCE.findall(text))
    return frozenset(names)


@lru_cache(maxsize=1)
def shop_inventory() -> Inventory:
    """The Astronomy Shop as the simulator and the live chart deploy it (namespace-free)."""
    objects: set[tuple[str, str]] = set()
    for spec in SERVICES:
        objects.add(("Deployment", spec.name))
        if spec.port is not None:
            objects.add(("Service", spec.name))
    objects.add(("ConfigMap", FLAGD_CONFIGMAP))
    objects.update(("HorizontalPodAutoscaler", w) for w, *_ in HPA_WORKLOADS)
    objects.update(("Node", n) for n in NODES)
    rules = alert_rules("otel-demo")
    return Inventory(
        objects=frozenset(objects),
        flags=frozenset(FLAG_BY_KEY),
        alert_labels={r.name: rule_label_names(r) for r in rules},
        alert_severities={r.name: r.labels.get("severity", "") for r in rules},
        span_services=frozenset(s.name for s in SERVICES if s.instrumented),
        consumer_groups=frozenset(k.group for k in KAFKA_CONSUMERS),
    )


@lru_cache(maxsize=1)
def compliance_inventory() -> Inventory:
    """The CISO scenarios' environment: the hardened namespace and the RHEL9 host."""
    from itbench.core.ciso.host import HOSTNAME
    from itbench.core.ciso.namespace import baseline_objects

    objects = {(str(o["kind"]), str(o["metadata"]["name"])) for o in baseline_objects()}
    objects.add(("Host", HOSTNAME))
    return Inventory(
        objects=frozenset(objects),
        flags=frozenset(),
        alert_labels={},
        alert_severities={},
        span_services=frozenset(),
        consumer_groups=frozenset(),
    )


# ---- the raw document --------------------------------------------------------------------


def _walk(value: object, path: str) -> Iterator[tuple[str, object]]:
    yield path, value
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _walk(sub, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for n, sub in enumerate(value):
            yield from _walk(sub, f"{path}[{n}]")


def document_findings(doc: Mapping[str, Any]) -> list[Finding]:
    """Checks of a raw scenario document that the schema cannot make.

    `apiVersion` and `kind` must be given (kubectl refuses a manifest without them; the model
    would fill them in); every number must be finite; no string may hold an invisible or
    bidirectional control character (which make two different names look alike); values
    must be JSON values.

    Args:
        doc: The parsed document, without `status`.
    """
    findings: list[Finding] = []
    for key, expected in (("apiVersion", API_VERSION), ("kind", "Scenario")):
        if key not in doc:
            findings.append(
                (key, f"required field is missing (kubectl apply needs it): write {expected}")
            )
    for path, value in _walk(dict(doc), ""):
        if isinstance(value, float) and not math.isfinite(value):
            findings.append((path, f"{value} is not a finite number"))
        elif isinstance(value, str):
            found = _INVISIBLE.search(value)
            if found is not None:
                findings.append(
                    (
                        path,
                        f"character U+{ord(found.group()):04X} at offset {found.start()} is an "
                        "invisible or control character; remove it",
                    )
                )
        elif isinstance(value, dict):
            for key in value:
                shown = excerpt(key).strip("'") if isinstance(key, str) else excerpt(key)
                where = f"{path}.{shown}" if path else shown
                if not isinstance(key, str):
                    findings.append((where, f"key {excerpt(key)} is not a string"))
                elif _INVISIBLE.search(key):
                    findings.append(
                        (where, f"key {excerpt(key)} holds an invisible or control character")
                    )
        elif value is not None and not isinstance(value, bool | int | float | list):
            findings.append((path, f"{excerpt(value)} is not a JSON value"))
        if len(findings) > MAX_FINDINGS:
            break
    return findings


# ---- names and references ------------------------------------------------------------------


def name_problem(kind: str, name: str) -> str:
    """Why a name is not a valid name for an object of a kind ('' when it is valid)."""
    if kind == "Flag":
        if not _FLAG_KEY.match(name):
            return f"{excerpt(name)} is not a flag key (letters, digits, '_' and '-')"
        return ""
    if kind == "AlertRule":
        if not (_LABEL_NAME.match(name) or _DNS1123_SUBDOMAIN.match(name)):
            return f"{excerpt(name)} is not an alert name"
        return ""
    if kind in _SERVICE_NAME_KINDS or kind in _LABEL_NAME_KINDS:
        grammar = _DNS1035_LABEL if kind in _SERVICE_NAME_KINDS else _DNS1123_LABEL
        rule = "a DNS-1035 label" if kind in _SERVICE_NAME_KINDS else "a DNS-1123 label"
        if len(name) > 63 or not grammar.match(name):
            return (
                f"{excerpt(name)} is not a valid {kind} name: {rule} of at most 63 "
                "lower-case letters, digits and '-'"
            )
        return ""
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        return (
            f"{excerpt(name)} is not a valid {kind} name: a DNS-1123 subdomain of at most 253 "
            "lower-case letters, digits, '-' and '.'"
        )
    return ""


class _Shop:
    """The inventory of one scenario: the shop plus what its faults create."""

    def __init__(self, inventory: Inventory, namespace: str) -> None:
        self.inventory = inventory
        self.namespace = namespace
        self.created: set[tuple[str, str]] = set()

    def has(self, kind: str, name: str) -> bool:
        if kind == "Namespace":
            return name == self.namespace
        if kind == "Flag":
            return name in self.inventory.flags
        if kind == "AlertRule":
            return name in self.inventory.alert_labels or name == RULE_NAME
        if kind in _POD_LIKE:
            workloads = self.inventory.names("Deployment", frozenset(self.created))
            return any(name == w or name.startswith(f"{w}-") for w in workloads)
        return (kind, name) in self.inventory.objects or (kind, name) in self.created

    def missing(self, kind: str, name: str) -> str:
        if kind == "Namespace":
            return f"{excerpt(name)} is not the scenario's namespace {self.namespace!r}"
        if kind == "Flag":
            flags = ", ".join(sorted(self.inventory.flags))
            return f"the shop has no flag {excerpt(name)} (flags: {flags})"
        if kind == "AlertRule":
            return (
                f"no alert rule {excerpt(name)} (rules: {', '.join(self.inventory.alert_labels)})"
            )
        if kind in _POD_LIKE:
            return (
                f"{kind} {excerpt(name)} belongs to no Deployment of the shop; name it after its "
                "workload (e.g. cart) and match the generated names with an alias (Pod/cart-*)"
            )
        known = self.inventory.names(kind, frozenset(self.created))
        listed = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        hint = f" ({kind}s: {listed})" if known else ""
        return f"the shop has no {kind} {excerpt(name)}, nor do the faults create one{hint}"


def _fault_findings(scenario: Scenario, shop: _Shop) -> list[Finding]:
    findings: list[Finding] = []
    namespace = shop.namespace
    for n, fault in enumerate(scenario.spec.faults):
        for arg, kind in (
            ("workload", "Deployment"),
            ("target", "Deployment"),
            ("service", "Service"),
        ):
            value = fault.args.get(arg)
            if isinstance(value, str) and not shop.has(kind, value):
                findings.append((f"spec.faults[{n}].args.{arg}", shop.missing(kind, value)))
        try:
            changes = get_fault(fault.id).changes(fault.args, namespace)
        except (KeyError, ValueError):
            continue  # reported by the fault-argument check
        for change in changes:
            if change.op in ("merge-patch", "delete") and not shop.has(change.kind, change.name):
                findings.append(
                    (
                        f"spec.faults[{n}]",
                        f"the fault changes {change.kind}/{excerpt(change.name)}, which does not "
                        "exist in the shop",
                    )
                )
            elif change.op == "create":
                shop.created.add((change.kind, change.name))
    return findings


def _entity_findings(scenario: Scenario, shop: _Shop) -> list[Finding]:
    findings: list[Finding] = []
    truth = scenario.spec.ground_truth
    kinds = {k.value for k in EntityKind}
    for n, entity in enumerate(truth.entities):
        where = f"spec.groundTruth.entities[{n}]"
        problem = name_problem(entity.kind.value, entity.name)
        if problem:
            findings.append((f"{where}.name", problem))
        elif not shop.has(entity.kind.value, entity.name):
            findings.append((f"{where}.name", shop.missing(entity.kind.value, entity.name)))
        for a, alias in enumerate(entity.aliases):
            match = _ALIAS.match(alias)
            if match is None:
                findings.append(
                    (
                        f"{where}.aliases[{a}]",
                        f"{excerpt(alias)} is not `Kind/name` (name letters, digits, '-', '.', "
                        "and the wildcards * ? [...])",
                    )
                )
            elif match.group(1) not in kinds:
                findings.append(
                    (f"{where}.aliases[{a}]", f"unknown kind {excerpt(match.group(1))}")
                )
    roots = [e for e in truth.entities if e.root_cause]
    if roots and all(e.kind.value in INJECTOR_KINDS for e in roots):
        findings.append(
            (
                "spec.groundTruth.entities",
                "every root cause is one of the fault injector's own objects ("
                + ", ".join(f"{e.kind.value}/{e.name}" for e in roots)
                + "), which agents never see and a diagnosis is not graded on; mark the object "
                "the fault acts on (e.g. the Deployment it delays) `rootCause: true` as well",
            )
        )
    for m, mitigation in enumerate(truth.mitigations):
        for s, step in enumerate(mitigation.steps):
            where = f"spec.groundTruth.mitigations[{m}].steps[{s}]"
            problem = name_problem(step.kind.value, step.name)
            if problem:
                findings.append((f"{where}.name", problem))
            elif step.action != "apply" and not shop.has(step.kind.value, step.name):
                findings.append((f"{where}.name", shop.missing(step.kind.value, step.name)))
    return findings


def _alert_findings(scenario: Scenario, shop: _Shop) -> list[Finding]:
    findings: list[Finding] = []
    inventory = shop.inventory
    for n, alert in enumerate(scenario.spec.triggers.alerts):
        where = f"spec.triggers.alerts[{n}]"
        labels = inventory.alert_labels.get(alert.alertname)
        if labels is None:
            findings.append(
                (
                    f"{where}.alertname",
                    f"no alert rule defines {excerpt(alert.alertname)} (rules: "
                    f"{', '.join(inventory.alert_labels)}; see itbench/core/alert_rules.py)",
                )
            )
            continue
        for key, value in alert.labels.items():
            at = f"{where}.labels.{excerpt(key) if len(key) > 63 else key}"
            if key not in labels:
                findings.append(
                    (
                        at,
                        f"{alert.alertname} alerts carry no label {excerpt(key)} (they carry "
                        f"{', '.join(sorted(labels))})",
                    )
                )
                continue
            reason = _label_value_problem(key, value, alert.alertname, shop)
            if reason:
                findings.append((at, reason))
    return findings


def _label_value_problem(key: str, value: str, alertname: str, shop: _Shop) -> str:
    inventory = shop.inventory
    if key == "service_name" and value not in inventory.span_services:
        return f"no service reports spans as {excerpt(value)}"
    if key in ("deployment", "container") and not shop.has("Deployment", value):
        return shop.missing("Deployment", value)
    if key == "horizontalpodautoscaler" and not shop.has("HorizontalPodAutoscaler", value):
        return shop.missing("HorizontalPodAutoscaler", value)
    if key == "namespace" and value != shop.namespace:
        return f"{excerpt(value)} is not the scenario's namespace {shop.namespace!r}"
    if key == "consumer_group" and value not in inventory.consumer_groups:
        groups = ", ".join(sorted(inventory.consumer_groups))
        return f"no Kafka consumer group {excerpt(value)} (groups: {groups})"
    severity = inventory.alert_severities.get(alertname, "")
    if key == "severity" and severity and value != severity:
        return f"{alertname} alerts have severity {severity!r}, not {excerpt(value)}"
    return ""


def reference_findings(scenario: Scenario, inventory: Inventory | None = None) -> list[Finding]:
    """Check a schema-valid scenario against the shop it runs in.

    Fault targets (workload, target, service arguments and every object a fault patches or
    deletes) exist; objects the faults create are added; ground-truth entities and mitigation
    targets then exist and have valid names; expected alerts are defined by a rule whose alerts
    can carry their labels, with values that exist (service, Deployment, HPA, namespace,
    consumer group, severity); the namespace is a valid name.

    Args:
        scenario: A scenario that passed the schema.
        inventory: The application's objects [default: the Astronomy Shop].
    """
    if inventory is None:
        ciso = scenario.spec.domain == Domain.CISO
        inventory = compliance_inventory() if ciso else shop_inventory()
    shop = _Shop(inventory, scenario.spec.environment.namespace)
    findings: list[Finding] = []
    problem = name_problem("Namespace", shop.namespace)
    if problem:
        findings.append(("spec.environment.namespace", problem))
    findings.extend(_fault_findings(scenario, shop))
    findings.extend(_entity_findings(scenario, shop))
    findings.extend(_alert_findings(scenario, shop))
    return findings
