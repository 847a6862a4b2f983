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
`WorkspaceEnvironment` is the Environment port on a workspace.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from itbench.ciso.cluster import (
    COUNTERPART_PREFIX,
    HOLD_LABEL,
    KINDS,
    ClusterError,
    RefusedError,
    Rest,
    apply_manifests,
    variant_manifests,
)
from itbench.ciso.evaluate import twin_of
from itbench.ciso.reports import NAME_LABEL
from itbench.core.alert_rules import rules_fingerprint
from itbench.core.ciso.host import HostState
from itbench.core.faults import ObjectChange
from itbench.core.inventory import STATE_KINDS, object_states
from itbench.core.models.base import Domain
from itbench.core.models.observations import (
    ActionResult,
    AgentAction,
    Alert,
    AlertInterval,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import Scenario
from itbench.environments.kube.baseline import Key, read_baseline
from itbench.environments.kube.environment import ClusterEnvironment, account_kubeconfig
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.compliance import KINDS as TWIN_KINDS
from itbench.environments.sim.compliance import canonical_kind

log = logging.getLogger(__name__)

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

    def as_scenarios(self, obj: Obj) -> Obj:
        """An object of the workspace as the agent sees it: in the scenario's namespace, as in
        the twin (the workspace's name, label and Trial annotation are the platform's, and so
        is the node selector that holds its Pods off every node)."""
        own = self.instance.spec.environment.namespace
        out = copy.deepcopy(obj)
        meta = out.setdefault("metadata", {})
        spec = out.get("spec")
        if isinstance(spec, dict):
            template = spec.get("template")
            for pod in (spec, template.get("spec") if isinstance(template, dict) else None):
                selector = pod.get("nodeSelector") if isinstance(pod, dict) else None
                if isinstance(pod, dict) and isinstance(selector, dict) and HOLD_LABEL in selector:
                    kept = {k: v for k, v in selector.items() if k != HOLD_LABEL}
                    if kept:
                        pod["nodeSelector"] = kept
                    else:
                        pod.pop("nodeSelector")
        if out.get("kind") == "Namespace" and meta.get("name") == self.namespace:
            meta["name"] = own
            labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != WORKSPACE_LABEL}
            if NAME_LABEL in labels:
                labels[NAME_LABEL] = own
            meta["labels"] = labels
            notes = {
                k: v for k, v in (meta.get("annotations") or {}).items() if k != TRIAL_ANNOTATION
            }
            if notes:
                meta["annotations"] = notes
            else:
                meta.pop("annotations", None)
        elif meta.get("namespace") == self.namespace:
            meta["namespace"] = own
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


@dataclass
class WorkspaceEnvironment(ClusterEnvironment):
    """The cluster environment of a CISO trial: its `namespace` is the workspace's.

    It behaves as the compliance twin does: the trial's `ciso.*` faults are recorded, not played
    (the workspace is built with their changes) and any other fault is refused; what lies
    outside the namespace (installed policies, ClusterRoles) is shown as the twin of the
    instance shows it; there is no telemetry (nothing runs) and every agent action is refused.
    The workspace is recorded among the injections before it is built, and removing that record
    deletes it. Reads go through the CISO evaluator's identity when there is one (the operator's
    own rights cover the scenario namespaces only).

    Attributes:
        workspace: The trial's workspace (required).
    """

    workspace: Workspace | None = None
    _reader_api: tuple[str, Any] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.workspace is None:
            raise ValueError("a WorkspaceEnvironment needs its workspace")
        if self.namespace != self.workspace.namespace:
            raise ValueError(
                f"namespace {self.namespace!r} is not the workspace's ({self.workspace.namespace})"
            )
        super().__post_init__()

    @property
    def _ws(self) -> Workspace:
        assert self.workspace is not None
        return self.workspace

    def close(self) -> None:
        """Close the reading client too."""
        if self._reader_api is not None:
            self._reader_api[1].close()
            self._reader_api = None
        super().close()

    # ---- identities ---------------------------------------------------------------------------
    def _reading_api(self) -> Any:
        """The evaluator account's API client (renewed with its token), else the kubeconfig's."""
        if self._evaluator_tokens is None:
            return self._api
        import kubernetes

        token = self._evaluator_tokens.token()
        if self._reader_api is not None and self._reader_api[0] == token:
            return self._reader_api[1]
        config = account_kubeconfig(self.kubeconfig, "ciso-evaluator", token)
        client = kubernetes.config.new_client_from_config_dict(config)
        if self._reader_api is not None:
            self._reader_api[1].close()
        self._reader_api = (token, client)
        return client

    def _objects(self, kind: str) -> list[Obj]:
        try:
            return self._ws.list_objects(Rest(self._reading_api()), kind)
        except WorkspaceError as exc:
            raise EnvironmentFailure(str(exc)) from None

    # ---- lifecycle ----------------------------------------------------------------------------
    def provision(self) -> None:
        """Build the workspace (recorded first, so that whatever happens next its removal is
        known; idempotent), check it and take the baseline.

        Raises:
            EnvironmentFailure: The workspace could not be built or holds no Deployment.
        """
        if self._provisioned_at is not None:
            return
        workspace = self._ws
        if workspace.key not in self._applied:
            self._applied[workspace.key] = []
            if workspace.key not in self._order:
                self._order.append(workspace.key)
            self._records_changed()
        api = self.ciso_evaluator_api()
        try:
            workspace.build(Rest(api))
        except WorkspaceError as exc:
            raise EnvironmentFailure(str(exc)) from None
        finally:
            api.close()
        if not self._objects("Namespace"):
            raise EnvironmentFailure(
                f"the CISO workspace {self.namespace} is missing right after it was built"
            )
        if not self._objects("Deployment"):
            raise EnvironmentFailure(
                f"no Deployments in the CISO workspace {self.namespace}: the instance "
                f"{workspace.instance.metadata.name} holds none, or the cluster dropped them"
            )
        self._baseline = self.read_baseline()
        self._provisioned_at = self.clock.now()

    def _records_changed(self) -> None:
        """Called when the workspace is recorded (a subclass that keeps the records elsewhere
        saves them)."""

    def read_baseline(self) -> dict[Key, bytes]:
        """What the workspace holds, in its baseline form."""
        found: dict[Key, bytes] = self._call(
            "reading objects", read_baseline, self._reading_api(), self.namespace, baseline_kinds()
        )
        return found

    def snapshot(self) -> EnvironmentSnapshot:
        """The workspace as the twin reports its namespace: its Deployments as their owners
        deployed them (held off every node, they are meant never to run), nothing firing, no
        traffic, and the state of what it holds."""
        self._require()
        workloads = [
            WorkloadHealth(
                kind="Deployment",
                name=d["metadata"]["name"],
                desired_replicas=int((d.get("spec") or {}).get("replicas", 1)),
                ready_replicas=int((d.get("spec") or {}).get("replicas", 1)),
            )
            for d in self._objects("Deployment")
        ]
        objects = [
            o
            for kind in baseline_kinds()
            if kind in (*STATE_KINDS, "Role", "RoleBinding")
            for o in self._objects(kind)
        ]
        return EnvironmentSnapshot(
            time=self.now(),
            workloads=workloads,
            alert_rules_fingerprint=rules_fingerprint({"spec": []}),
            objects=object_states(objects),
        )

    # ---- faults -------------------------------------------------------------------------------
    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        """Record one of the faults the workspace was built with (once per key).

        Raises:
            EnvironmentFailure: A fault the workspace was not built with.
        """
        self._require()
        if key in self._applied:
            return False
        if key not in self._ws.built_in:
            raise EnvironmentFailure(
                f"injection {key}: the CISO workspace {self.namespace} is built whole with the "
                "instance's ciso.* faults and takes no other fault"
            )
        self._applied[key] = []
        if key not in self._order:
            self._order.append(key)
        return True

    def remove(self, key: str) -> bool:
        """Drop a record; the workspace's own deletes the workspace.

        Raises:
            EnvironmentFailure: The deletion failed (the record is kept; the message says how
                to finish it by hand).
        """
        workspace = self._ws
        if key != workspace.key:
            self._require()
        applied = self._applied.pop(key, None)
        if applied is None:
            return False
        if key != workspace.key:
            return True
        api: Any = None
        try:
            api = self.ciso_evaluator_api()
            workspace.delete(Rest(api))
        except (WorkspaceError, EnvironmentFailure) as exc:
            self._applied[key] = applied  # kept: the Trial's release retries it
            raise EnvironmentFailure(str(exc)) from None
        finally:
            if api is not None:
                api.close()
        log.info(
            "deleted the CISO workspace %s",
            workspace.namespace,
            extra={"trial": workspace.trial, "workspace": workspace.namespace},
        )
        return True

    # ---- observe ------------------------------------------------------------------------------
    def alerts(self) -> list[Alert]:
        """None: nothing runs in a workspace."""
        return []

    def alert_history(self) -> list[AlertInterval]:
        """None: nothing ever fires."""
        self._require()
        return []

    def query_metrics(self, query: str, time: datetime) -> Obj:
        """An empty vector: the workspace has no telemetry (the shop's is not its)."""
        return {"resultType": "vector", "result": []}

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> Obj:
        """An empty matrix.

        Raises:
            ValueError: A step that is not positive.
        """
        if step_seconds <= 0:
            raise ValueError("step must be positive")
        return {"resultType": "matrix", "result": []}

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> Obj:
        """No log streams."""
        return {"resultType": "streams", "result": []}

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[Obj]:
        """No traces."""
        return []

    def get_objects(self, kind: str, name: str | None = None, *, copy: bool = True) -> list[Obj]:
        """Objects of a kind the compliance twin serves: the namespace's read from the
        workspace and shown in the scenario's namespace, as in the twin (the agent is scoped
        to it and never sees the platform's name), the rest as the twin of the instance shows
        them (read afresh every time).

        Raises:
            ValueError: A kind the twin does not serve.
        """
        found = [self._ws.as_scenarios(o) for o in self._objects(kind)]
        return [o for o in found if name is None or o["metadata"]["name"] == name]

    def objects(self) -> list[Obj]:
        """Every object the agent may read, of every kind the compliance twin serves, as
        `get_objects` shows them: what a collection's `kubectl` reads when the agent tries it
        (`POST /collections`)."""
        return [o for kind in TWIN_KINDS for o in self.get_objects(kind)]

    def host_state(self) -> HostState:
        """The RHEL9 host's state: the instance's modelled host, the state the evidence Pods of
        a live evaluation render (a copy)."""
        return twin_of(self._ws.instance).host_state()

    def service_calls(self) -> list[tuple[str, str]]:
        """No call graph is modelled here."""
        return []

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[Obj]:
        """No events: nothing runs."""
        return []

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        """Pods log nothing here (held off every node, they never run).

        Raises:
            ValueError: No such pod.
        """
        if not self.get_objects("Pod", pod):
            raise ValueError(f'pods "{pod}" not found')
        return []

    # ---- act ----------------------------------------------------------------------------------
    def act(self, action: AgentAction) -> ActionResult:
        """Refuse, as the compliance twin does: an assessment reads, it does not repair."""
        self._require()
        return ActionResult(
            ok=False,
            outcome="refused",
            message=(
                f"refused: {action.verb.value} {action.kind}/{action.name}: the compliance "
                "environment is read-only; submit the assessment's artefacts instead"
            ),
        )
