"""The fault library: one registry of fault ids, each with an argument schema and an effect.

An effect is a list of object changes (create, merge-patch, delete, set a flagd flag). The simulator
applies them to its twin; the live cluster applies the same changes through the fault's playbook.
Removal restores the objects the effect touched, so it needs no per-fault code.
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

    op: Literal["create", "merge-patch", "delete", "set-flag"] = Field(
        description="create an object, JSON-merge-patch it, delete it, or set a flagd flag."
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
        playbook: The Ansible playbook that injects it on a live cluster.
        agent_reachable: The agent can undo the cause through the objects it may see and change.
            False for injector-side faults (Chaos Mesh experiments live where agents cannot
            read or write): scenarios with such a fault are scored on diagnosis only.
        category: What is wrong at the fault's root cause, as a diagnosis must name it.
    """

    id: str
    description: str
    mechanism: Mechanism
    args_model: type[FaultArgs]
    effect: EffectFn
    playbook: str
    agent_reachable: bool = True
    category: FaultCategory | None = None

    def changes(self, args: Mapping[str, Any], namespace: str) -> list[ObjectChange]:
        """Validate arguments and return the object changes that inject the fault."""
        return self.effect(self.args_model.model_validate(dict(args)), namespace)


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
