"""The workspace of a CISO trial on a live cluster: a namespace of its own holding exactly the
instance's objects (the hardened baseline with the scenario's setting already in it), built
when the trial's environment is provisioned and deleted when its injections are removed.

The shop's own namespace is never read or written by a CISO trial: its upstream Deployments
would fail controls whatever the scenario set. The workspace is built and deleted with the CISO
evaluator's identity (`ClusterEnvironment.ciso_evaluator_api`), whose writes the chart confines
to `itbench-ciso-` names; Pods of its Deployments are held off every node (nothing runs, the
posture is assessed on the manifests). What the instance holds outside a namespace (the update
class's installed policy set, the built-in ClusterRoles) is never created on the cluster: the
agent reads it as the compliance twin shows it, so no enforcing policy is ever installed.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from itbench.ciso.cluster import (
    COUNTERPART_PREFIX,
    KINDS,
    ClusterError,
    RefusedError,
    Rest,
    apply_manifests,
    variant_manifests,
)
from itbench.ciso.evaluate import twin_of
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario
from itbench.environments.sim.compliance import KINDS as TWIN_KINDS
from itbench.environments.sim.compliance import canonical_kind

Obj = dict[str, Any]

WORKSPACE_PREFIX = f"{COUNTERPART_PREFIX}w"
"""Workspace namespaces start with this (counterpart namespaces never do: their token is hex)."""
WORKSPACE_LABEL = "itbench.io/ciso-workspace"
"""Label of a workspace Namespace (its value: the workspace's token); select leftovers by it."""
TRIAL_ANNOTATION = "itbench.io/trial"
"""Annotation of a workspace Namespace: the Trial (`namespace/name`) it was built for."""
SETTING_FAULT_PREFIX = "ciso."
"""The CISO faults (`ciso.setting`, `ciso.policy-set`): built into the workspace, never played."""
TOKEN_CHARS = 12


class WorkspaceError(RuntimeError):
    """The workspace could not be built, read or deleted (the message names it)."""


def workspace_token(namespace: str, name: str, uid: str) -> str:
    """The token of a Trial's workspace: the same for the same Trial object, whichever operator
    process asks, and different for a Trial deleted and made again under the same name."""
    return hashlib.sha256(f"{namespace}/{name}\0{uid}".encode()).hexdigest()[:TOKEN_CHARS]


def workspace_namespace(namespace: str, name: str, uid: str) -> str:
    """The workspace namespace of a Trial (`itbench-ciso-w<token>`, a DNS label)."""
    return f"{WORKSPACE_PREFIX}{workspace_token(namespace, name, uid)}"


def is_workspace(namespace: str) -> bool:
    """Whether a namespace name is a CISO workspace's."""
    rest = namespace[len(WORKSPACE_PREFIX) :]
    return (
        namespace.startswith(WORKSPACE_PREFIX)
        and len(rest) == TOKEN_CHARS
        and all(c in "0123456789abcdef" for c in rest)
    )


def uses_workspace(scenario: Scenario) -> bool:
    """Whether a trial of this scenario runs in a workspace on a cluster (CISO scenarios)."""
    return scenario.spec.domain == Domain.CISO


@dataclass(frozen=True)
class Workspace:
    """One CISO trial's workspace.

    Attributes:
        instance: The trial's instance (its faults say what the workspace holds).
        namespace: The workspace namespace.
        trial: The Trial it belongs to (`namespace/name`).
        key: The injection-record key under which its existence is recorded on the Trial.
        built_in: The trial's injection keys whose changes the workspace is built with (its
            `ciso.*` faults): recorded, never played by the fault playbooks.
    """

    instance: Scenario
    namespace: str
    trial: str
    key: str
    built_in: frozenset[str]

    @classmethod
    def of_trial(
        cls, instance: Scenario, namespace: str, name: str, uid: str, fault_keys: list[str]
    ) -> Workspace:
        """The workspace of a Trial.

        Args:
            instance: The trial's instance.
            namespace: The Trial's namespace.
            name: The Trial's name.
            uid: The Trial's UID.
            fault_keys: The trial's fault injection keys, one per fault of the instance.
        """
        faults = instance.spec.faults
        built_in = frozenset(
            key
            for key, fault in zip(fault_keys, faults, strict=True)
            if fault.id.startswith(SETTING_FAULT_PREFIX)
        )
        return cls(
            instance=instance,
            namespace=workspace_namespace(namespace, name, uid),
            trial=f"{namespace}/{name}",
            key=f"{uid}/ciso-workspace",
            built_in=built_in,
        )

    @property
    def token(self) -> str:
        """The workspace's token (its name without the prefix)."""
        return self.namespace[len(WORKSPACE_PREFIX) :]

    def manifests(self) -> list[Obj]:
        """The workspace's objects: the instance's namespace as manifests for the workspace,
        its Namespace labelled and annotated with the Trial (leftovers name their owner)."""
        out = variant_manifests(self.instance, self.namespace)
        for body in out:
            if body["kind"] == "Namespace":
                meta = body["metadata"]
                meta["labels"] = {**(meta.get("labels") or {}), WORKSPACE_LABEL: self.token}
                meta["annotations"] = {
                    **(meta.get("annotations") or {}),
                    TRIAL_ANNOTATION: self.trial,
                }
        return out

    def build(self, rest: Rest) -> None:
        """Create the workspace's objects, or merge them onto those that exist (idempotent: a
        second build after a restart changes nothing).

        Raises:
            WorkspaceError: The cluster refused an object or could not be reached.
        """
        try:
            apply_manifests(rest, self.manifests())
        except (ClusterError, RefusedError) as exc:
            raise WorkspaceError(
                f"building the CISO workspace {self.namespace} of Trial {self.trial} failed: {exc}"
            ) from None

    def delete(self, rest: Rest) -> bool:
        """Delete the workspace namespace with all it holds.

        Returns:
            Whether it existed (False: it was gone already).

        Raises:
            WorkspaceError: The cluster refused the deletion or could not be reached (the
                namespace is left; the message says how to remove it).
        """
        try:
            answer = rest.call("DELETE", f"/api/v1/namespaces/{self.namespace}")
        except (ClusterError, RefusedError) as exc:
            raise WorkspaceError(
                f"deleting the CISO workspace {self.namespace} of Trial {self.trial} failed "
                f"({exc}); delete it with `kubectl delete namespace {self.namespace}`"
            ) from None
        return answer is not None

    def list_objects(self, rest: Rest, kind: str) -> list[Obj]:
        """The objects of a kind as the agent sees them in the workspace: the namespace's
        kinds read live from the workspace, the rest of what the twin serves (cluster-scoped
        objects, installed policies) as the twin of the instance shows it; Events are none.

        Raises:
            ValueError: A kind the twin does not serve (kubectl's message).
            WorkspaceError: The cluster could not be read.
        """
        canonical = canonical_kind(kind)
        if canonical == "Event":
            return []
        if canonical not in TWIN_KINDS:
            raise ValueError(f'the server doesn\'t have a resource type "{kind}"')
        spec = KINDS.get(canonical)
        if spec is None or (canonical != "Namespace" and not spec[3]):
            return modelled(self.instance, canonical)
        group, version, plural, _namespaced = spec
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        api_version = f"{group}/{version}" if group else version
        try:
            if canonical == "Namespace":
                found = rest.call("GET", f"{base}/namespaces/{self.namespace}")
                items = [found] if found is not None else []
            else:
                items = rest.items(f"{base}/namespaces/{self.namespace}/{plural}")
        except (ClusterError, RefusedError) as exc:
            raise WorkspaceError(
                f"reading {canonical} of the CISO workspace {self.namespace}: {exc}"
            ) from None
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", canonical)
        return items


def modelled(instance: Scenario, kind: str) -> list[Obj]:
    """The instance's objects of a kind as its compliance twin shows them (copies)."""
    return [copy.deepcopy(o) for o in twin_of(instance).get_objects(kind, copy=False)]


def baseline_kinds() -> dict[str, str]:
    """Kind to apiVersion of what a workspace holds (its baseline reads these, in it only)."""
    return {
        kind: (f"{group}/{version}" if group else version)
        for kind, (group, version, _plural, namespaced) in KINDS.items()
        if namespaced
    }
