"""The four CISO scenario classes of the paper and what each one asks the agent to submit."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from itbench.core.models.base import Complexity


class CisoClass(StrEnum):
    """A CISO scenario class (`spec.class` of a CISO scenario)."""

    KYVERNO = "Kyverno"
    """A new Kubernetes CIS control as a Kyverno (or admission) policy."""
    K8S_OPA = "K8sOPA"
    """A new Kubernetes CIS control as a kubectl evidence collection and a Rego policy."""
    RHEL9_OPA = "RHEL9OPA"
    """A new RHEL9 CIS control as an Ansible (or script) evidence collection and Rego."""
    KYVERNO_UPDATE = "KyvernoUpdate"
    """An existing Kyverno policy set updated for a changed requirement."""


@dataclass(frozen=True)
class ClassRules:
    """What a class takes.

    Attributes:
        complexity: The class's complexity (the paper maps complexity to class).
        policy: `kyverno` (policy YAML) or `rego` (Rego with a collection).
        scope: `namespace` (Kubernetes objects) or `host` (the RHEL9 host).
        summary: What to submit, in words (the task shows it).
    """

    complexity: Complexity
    policy: str
    scope: str
    summary: str


CLASS_RULES: dict[CisoClass, ClassRules] = {
    CisoClass.KYVERNO: ClassRules(
        Complexity.EASY,
        "kyverno",
        "namespace",
        "Submit `kyverno`: a policy that checks the requirement on the namespace's objects. "
        "The twin evaluates CEL policies (Kyverno ValidatingPolicy, Kubernetes "
        "ValidatingAdmissionPolicy, or a Kyverno ClusterPolicy whose rules use validate.cel); "
        "pattern-style Kyverno rules are evaluated on a live cluster only.",
    ),
    CisoClass.K8S_OPA: ClassRules(
        Complexity.MEDIUM,
        "rego",
        "namespace",
        "Submit `collection` (a script that collects the objects with kubectl and writes "
        "them as one JSON document) and `rego` (a Rego policy over that evidence defining "
        "`violations`: the targets that do not comply, as `Kind/name`).",
    ),
    CisoClass.RHEL9_OPA: ClassRules(
        Complexity.MEDIUM,
        "rego",
        "host",
        "Submit `collection` (an Ansible playbook, or a script, that reads the host's "
        "configuration and writes it as one JSON document) and `rego` (a Rego policy over that "
        "evidence defining `compliant`, a boolean, or `violations`).",
    ),
    CisoClass.KYVERNO_UPDATE: ClassRules(
        Complexity.HARD,
        "kyverno",
        "namespace",
        "Submit `kyverno`: the whole installed policy set, updated for the new requirement. "
        "Policies the requirement does not concern must stay as they are; add or remove none.",
    ),
}
"""The rules of every class."""


def class_of(scenario_class: str) -> CisoClass | None:
    """The CISO class named by a scenario's `spec.class`, if it is one."""
    try:
        return CisoClass(scenario_class)
    except ValueError:
        return None
