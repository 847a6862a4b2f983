"""The fault library: one registry of fault ids, each with an argument schema, an effect and a
real-cluster contract.

An effect is a list of object changes (create, merge-patch, delete, set a flagd flag, roll a
workload out). The simulator applies them to its twin; the live cluster applies the same changes
through the fault's playbooks. Removal restores the objects the effect touched, so it needs no
per-fault code. A fault's contract (`FaultDefinition.contract`) says what the live stack must
have for it, how its effect starts and is confirmed, and how removal undoes it; a test checks
every contract against the pinned upstream snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itbench.core.models.base import ApiModel
from itbench.core.models.scenario import FaultCategory


class Mechanism(StrEnum):
    """How a fault is injected on a live cluster."""

    FLAGD = "flagd"
    CHAOS_MESH = "chaos-mesh"
    KUBERNETES = "kubernetes"


class ObjectChange(ApiModel):
    """One change to one object: the unit of every fault effect and of every agent action."""

    op: Literal["create", "merge-patch", "delete", "set-flag", "rollout"] = Field(
        description="create an object, merge-patch it (strategic for built-in kinds), delete it "
        "(every object of the kind matching `selector` when given), set a flagd flag, or roll a "
        "Deployment out again (`kubectl rollout restart`)."
    )
    api_version: str = Field(default="v1", description="API version of the object.")
    kind: str = Field(description="Kind of the object (ConfigMap for set-flag).")
    name: str = Field(description="Object name.")
    namespace: str | None = Field(default=None, description="Namespace, for namespaced kinds.")
    body: dict[str, Any] = Field(
        default_factory=dict, description="The manifest (create) or the merge patch (merge-patch)."
    )
    flag: str = Field(default="", description="For set-flag: the flag key.")
    variant: str = Field(default="", description="For set-flag: the default variant to select.")
    selector: dict[str, str] = Field(
        default_factory=dict,
        description="For delete: the labels of the objects to delete (instead of one by name).",
    )


class FaultArgs(BaseModel):
    """Base of every fault's argument schema: unknown arguments are errors."""

    model_config = ConfigDict(extra="forbid")


EffectFn = Callable[[Any, str], list[ObjectChange]]


@dataclass(frozen=True)
class FaultDefinition:
    """A fault of the library.

    Attributes:
        id: The fault id used in scenario files.
        description: What the fault does.
        mechanism: How the live cluster injects it.
        args_model: The pydantic model its arguments must satisfy.
        effect: Pure function (validated args, namespace) -> object changes.
        playbook: The Ansible playbook that makes its characteristic change on a live cluster.
        agent_reachable: The agent can undo the cause through the objects it may see and change.
            False for injector-side faults (Chaos Mesh experiments live where agents cannot
            read or write): scenarios with such a fault are scored on diagnosis only.
        category: What is wrong at the fault's root cause, as a diagnosis must name it.
        signals: The series its effect shows in (metric names the stack's exporters write).
        notes: What a user of the live stack should know (one or two sentences).
    """

    id: str
    description: str
    mechanism: Mechanism
    args_model: type[FaultArgs]
    effect: EffectFn
    playbook: str
    agent_reachable: bool = True
    category: FaultCategory | None = None
    signals: tuple[str, ...] = ()
    notes: str = ""

    def changes(self, args: Mapping[str, Any], namespace: str) -> list[ObjectChange]:
        """Validate arguments and return the object changes that inject the fault."""
        return self.effect(self.args_model.model_validate(dict(args)), namespace)

    def contract(self, args: Mapping[str, Any], namespace: str) -> Contract:
        """The fault's real-cluster contract for these arguments (see `Contract`)."""
        return contract_for(self, self.changes(args, namespace))


CHAOS_GROUP = "chaos-mesh.org"


@dataclass(frozen=True)
class Requirement:
    """Something the live stack must have before a fault is injected.

    Attributes:
        kind: Kind of the object (`Flag` for a flagd flag).
        name: Its name.
        field: A dotted path inside it that must exist ("" for the object itself), or the
            variant of a flag.
    """

    kind: str
    name: str
    field: str = ""


@dataclass(frozen=True)
class Contract:
    """How a fault behaves on a live cluster.

    Attributes:
        changes: The exact object changes, in order (what the playbooks make).
        requires: Objects, fields and flags that must exist at the pinned release.
        activation: How the effect starts: `immediate`, or `rollout Deployment/<name>` (the
            workload reads what changed only when its pods restart), or `chaos` (a Chaos Mesh
            controller injects it).
        confirms: Conditions waited on before the fault counts as injected, as
            `<kind>/<name> <condition>=True`.
        removal: How removal undoes it.
        signals: Series its effect shows in.
    """

    changes: tuple[ObjectChange, ...]
    requires: tuple[Requirement, ...]
    activation: str
    confirms: tuple[str, ...]
    removal: str
    signals: tuple[str, ...]


def contract_for(fault: FaultDefinition, changes: list[ObjectChange]) -> Contract:
    """Derive a fault's contract from its changes."""
    requires: list[Requirement] = []
    confirms: list[str] = []
    rolled = [c for c in changes if c.op == "rollout"]
    for change in changes:
        if change.op in ("merge-patch", "rollout") or (
            change.op == "delete" and not change.selector
        ):
            requires.append(Requirement(change.kind, change.name))
            for container in _patched_containers(change):
                requires.append(
                    Requirement(
                        change.kind, change.name, f"spec.template.spec.containers[name={container}]"
                    )
                )
        elif change.op == "set-flag":
            requires.append(Requirement(change.kind, change.name))
            requires.append(Requirement("Flag", change.flag, change.variant))
        elif change.op == "create" and change.api_version.startswith(CHAOS_GROUP):
            confirms.append(f"{change.kind}/{change.name} AllInjected=True")
            for workload in _selected_workloads(change.body):
                requires.append(Requirement("Deployment", workload))
    if rolled:
        activation = ", ".join(f"rollout {c.kind}/{c.name}" for c in rolled)
        removal = (
            "restore each touched object as it was (a flag to its earlier variant), then roll "
            + ", ".join(f"{c.kind}/{c.name}" for c in rolled)
            + " out again"
        )
    elif confirms:
        activation = "chaos"
        removal = "delete the experiment; Chaos Mesh recovers the pods it recorded"
    else:
        activation = "immediate"
        removal = "restore each patched object as it was and delete each created one"
    return Contract(
        changes=tuple(changes),
        requires=tuple(dict.fromkeys(requires)),
        activation=activation,
        confirms=tuple(confirms),
        removal=removal,
        signals=fault.signals,
    )


def _patched_containers(change: ObjectChange) -> list[str]:
    if change.op != "merge-patch" or change.kind != "Deployment":
        return []
    pod = ((change.body.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [
        str(c["name"]) for c in pod.get("containers") or [] if isinstance(c, dict) and "name" in c
    ]


def _selected_workloads(body: dict[str, Any]) -> list[str]:
    spec = body.get("spec") or {}
    inner = next((v for k, v in spec.items() if k.endswith("Chaos") and isinstance(v, dict)), spec)
    names: list[str] = []
    target = inner.get("target")
    for part in (inner, target if isinstance(target, dict) else {}):
        labels = (part.get("selector") or {}).get("labelSelectors") or {}
        names += [str(v) for k, v in labels.items() if k == "opentelemetry.io/name"]
    return names


class UnknownFaultError(KeyError):
    """A fault id that is not in the library."""


_REGISTRY: dict[str, FaultDefinition] = {}


def register(fault: FaultDefinition) -> FaultDefinition:
    """Add a fault to the library (ids are unique)."""
    if fault.id in _REGISTRY:
        raise ValueError(f"fault {fault.id!r} is registered twice")
    _REGISTRY[fault.id] = fault
    return fault


def get_fault(fault_id: str) -> FaultDefinition:
    """Return a fault by id, or raise UnknownFaultError naming the known ids."""
    _load_library()
    try:
        return _REGISTRY[fault_id]
    except KeyError:
        raise UnknownFaultError(fault_id) from None


def all_faults() -> list[FaultDefinition]:
    """Every fault in the library, sorted by id."""
    _load_library()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def fault_arg_errors(fault_id: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Validate a fault reference; return (field path, reason) pairs, empty when valid.

    Paths are relative to the fault spec (`id`, `args.<name>`).
    """
    _load_library()
    fault = _REGISTRY.get(fault_id)
    if fault is None:
        close = [k for k in sorted(_REGISTRY) if k.split(".")[-1] in fault_id or fault_id in k]
        hint = f"; did you mean {', '.join(close[:3])}?" if close else "; see `itbench faults list`"
        return [("id", f"unknown fault id {fault_id!r}{hint}")]
    try:
        fault.args_model.model_validate(dict(args))
    except ValidationError as exc:
        out: list[tuple[str, str]] = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            out.append((f"args.{loc}" if loc else "args", err["msg"]))
        return out
    return []


def _load_library() -> None:
    # The definitions live in a sibling module so this one stays a small public surface.
    from itbench.core import fault_library  # noqa: F401
