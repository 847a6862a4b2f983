"""The compliance twin: the environment of a CISO scenario behind the Environment port.

It holds the scenario namespace's Kubernetes objects (the hardened shop of
`itbench.core.ciso.namespace`, with ReplicaSets and Pods derived from the Deployments, and any
installed policies) and a modelled RHEL9 host (`itbench.core.ciso.host`). Misconfigurations are
injected as object changes, or as merge patches of the host (kind `Host`); objects look as their
owners deployed them (generation 1, no rollout history), so nothing but their real state tells a
compliant variant from a non-compliant one. There is no traffic and no telemetry: observation
queries answer with nothing, and the environment refuses every change an agent asks for (a
compliance assessment reads, it does not repair).
"""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from itbench.core.ciso import host as host_model
from itbench.core.ciso.namespace import NAMESPACE, baseline_objects
from itbench.core.faults import ObjectChange
from itbench.core.inventory import STATE_KINDS, object_states
from itbench.core.models.observations import (
    ActionResult,
    AgentAction,
    Alert,
    AlertInterval,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.models.scenario import Scenario
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.objects import merge_patch, template_hash

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)

Obj = dict[str, Any]

KINDS: dict[str, tuple[str, bool, tuple[str, ...]]] = {
    "Namespace": ("v1", False, ("ns", "namespaces")),
    "Deployment": ("apps/v1", True, ("deploy", "deployments")),
    "ReplicaSet": ("apps/v1", True, ("rs", "replicasets")),
    "Pod": ("v1", True, ("po", "pods")),
    "Service": ("v1", True, ("svc", "services")),
    "ServiceAccount": ("v1", True, ("sa", "serviceaccounts")),
    "ConfigMap": ("v1", True, ("cm", "configmaps")),
    "Secret": ("v1", True, ("secrets",)),
    "NetworkPolicy": ("networking.k8s.io/v1", True, ("netpol", "networkpolicies")),
    "Role": ("rbac.authorization.k8s.io/v1", True, ("roles",)),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", True, ("rolebindings",)),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", False, ("clusterroles",)),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", False, ("clusterrolebindings",)),
    "ValidatingPolicy": ("policies.kyverno.io/v1", False, ("vpol", "validatingpolicies")),
    "ClusterPolicy": ("kyverno.io/v1", False, ("cpol", "clusterpolicies")),
    "Policy": ("kyverno.io/v1", True, ("pol", "policies")),
    "ValidatingAdmissionPolicy": (
        "admissionregistration.k8s.io/v1",
        False,
        ("validatingadmissionpolicies", "vap"),
    ),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io/v1",
        False,
        ("validatingadmissionpolicybindings", "vapb"),
    ),
}
"""Kinds the twin serves: (apiVersion, namespaced, kubectl spellings)."""

_SPELLINGS: dict[str, str] = {}
for _kind, (_api, _ns, _aliases) in KINDS.items():
    _SPELLINGS[_kind.lower()] = _kind
    for _alias in _aliases:
        _SPELLINGS[_alias] = _kind

POLICY_KINDS = (
    "ValidatingPolicy",
    "ClusterPolicy",
    "Policy",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)
"""Policy kinds an update scenario installs and its agent reads."""

CLUSTER_ROLES = ("view", "edit", "admin", "cluster-admin")
"""The built-in ClusterRoles the namespace's bindings may refer to."""


def canonical_kind(kind: str) -> str:
    """The canonical kind of any kubectl spelling; unknown spellings come back unchanged."""
    text = kind.strip().split(".", 1)[0]
    return _SPELLINGS.get(text.lower(), kind.strip())


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


class ComplianceEnvironment:
    """One CISO scenario's namespace and RHEL9 host on a virtual clock.

    Args:
        seed: Seed of the generated names (pod suffixes, uids).
        namespace: The scenario namespace.
        start: Virtual time at construction.
    """

    def __init__(
        self, *, seed: int, namespace: str = NAMESPACE, start: datetime = DEFAULT_START
    ) -> None:
        self.seed = seed
        self.namespace = namespace
        self._now = start
        self._objects: dict[tuple[str, str], Obj] = {}
        self._host: host_model.HostState = {}
        self._provisioned_at: datetime | None = None
        self._injections: dict[str, list[tuple[ObjectChange, Any]]] = {}
        self._order: list[str] = []

    @classmethod
    def for_scenario(
        cls, scenario: Scenario, *, seed: int = 0, start: datetime = DEFAULT_START
    ) -> ComplianceEnvironment:
        """A fresh, unprovisioned environment for a CISO scenario."""
        return cls(seed=seed, namespace=scenario.spec.environment.namespace, start=start)

    # ---- time -------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The virtual time."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Let virtual time pass (nothing else happens in a compliance environment)."""
        if seconds < 0 or seconds != seconds:
            raise ValueError(f"cannot advance by {seconds} seconds")
        self._now += timedelta(seconds=seconds)

    # ---- lifecycle --------------------------------------------------------------------------
    def provision(self) -> None:
        """Install the hardened namespace and the host (idempotent)."""
        if self._provisioned_at is not None:
            return
        self._provisioned_at = self._now
        for obj in baseline_objects():
            self._put(copy.deepcopy(obj))
        for name in CLUSTER_ROLES:
            self._put(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name},
                    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
                    if name == "cluster-admin"
                    else [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
                }
            )
        self._host = host_model.baseline_state()
        self._reconcile()

    def _require(self) -> None:
        if self._provisioned_at is None:
            raise EnvironmentFailure("the compliance twin is not provisioned; call provision()")

    def snapshot(self) -> EnvironmentSnapshot:
        """Every Deployment ready, nothing firing, and the desired state of the objects."""
        self._require()
        workloads = [
            WorkloadHealth(
                kind="Deployment",
                name=str(d["metadata"]["name"]),
                desired_replicas=int(d["spec"].get("replicas", 1)),
                ready_replicas=int(d["spec"].get("replicas", 1)),
            )
            for d in self._of_kind("Deployment")
        ]
        kinds = (*STATE_KINDS, "Role", "RoleBinding", *POLICY_KINDS)
        objects = object_states(o for kind in kinds for o in self._of_kind(kind))
        return EnvironmentSnapshot(
            time=self._now,
            workloads=workloads,
            alert_rules_fingerprint="sha256:" + _digest("no-alert-rules"),
            objects=copy.deepcopy(objects),
        )

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        """Apply changes once per key (objects, or the host for kind `Host`).

        Raises:
            EnvironmentFailure: A change names an object that does not exist, or creates one
                that does; the changes before it are undone.
        """
        self._require()
        if key in self._injections:
            return False
        applied: list[tuple[ObjectChange, Any]] = []
        try:
            for change in changes:
                applied.append((change, self._apply(change)))
        except ValueError as exc:
            self._undo(applied)
            raise EnvironmentFailure(f"injection {key!r} failed: {exc}") from None
        self._injections[key] = applied
        self._order.append(key)
        self._reconcile()
        return True

    def _apply(self, change: ObjectChange) -> Any:
        if change.kind == "Host":
            host_before = copy.deepcopy(self._host)
            if change.op != "merge-patch":
                raise ValueError(f"the host takes merge patches, not {change.op}")
            self._host = host_model.apply_patch(self._host, change.body)
            return host_before
        kind = canonical_kind(change.kind)
        slot = (kind, change.name)
        current = self._objects.get(slot)
        before = copy.deepcopy(current) if current is not None else None
        if change.op == "create":
            if before is not None:
                raise ValueError(f"{kind}/{change.name} already exists")
            self._put(copy.deepcopy(change.body))
        elif change.op == "merge-patch":
            if before is None:
                raise ValueError(f"{kind}/{change.name} does not exist")
            self._put(merge_patch(copy.deepcopy(before), change.body))
        elif change.op == "delete":
            if before is None:
                raise ValueError(f"{kind}/{change.name} does not exist")
            del self._objects[slot]
        else:
            raise ValueError(f"the compliance twin has no {change.op} change")
        return before

    def remove(self, key: str) -> bool:
        """Undo an injection: restore everything it touched."""
        self._require()
        applied = self._injections.pop(key, None)
        if applied is None:
            return False
        self._undo(applied)
        self._reconcile()
        return True

    def _undo(self, applied: list[tuple[ObjectChange, Any]]) -> None:
        for change, before in reversed(applied):
            if change.kind == "Host":
                self._host = before
                continue
            slot = (canonical_kind(change.kind), change.name)
            if before is None:
                self._objects.pop(slot, None)
            else:
                self._objects[slot] = before

    def injections(self) -> list[str]:
        """Keys of every injection ever applied, in order."""
        return list(self._order)

    # ---- the objects ------------------------------------------------------------------------
    def _put(self, obj: Obj) -> None:
        kind = canonical_kind(str(obj.get("kind", "")))
        if kind not in KINDS:
            raise ValueError(f"the compliance twin has no kind {kind!r}")
        api, namespaced, _ = KINDS[kind]
        obj["kind"] = kind
        obj.setdefault("apiVersion", api)
        meta = obj.setdefault("metadata", {})
        name = str(meta.get("name", ""))
        if not name:
            raise ValueError(f"a {kind} without metadata.name")
        if namespaced:
            meta["namespace"] = self.namespace
        else:
            meta.pop("namespace", None)
        assert self._provisioned_at is not None
        meta["uid"] = _uid(self.seed, kind, name)
        meta["resourceVersion"] = str(int(_digest(kind, name)[:6], 16))
        meta["creationTimestamp"] = self._provisioned_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        if kind in ("Deployment", "ReplicaSet"):
            meta["generation"] = 1
        self._objects[(kind, name)] = obj

    def _of_kind(self, kind: str) -> list[Obj]:
        return [o for (k, _n), o in sorted(self._objects.items()) if k == kind]

    def _reconcile(self) -> None:
        """Derive each Deployment's ReplicaSet and Pods from its current template, as its
        controllers would have when it was deployed that way."""
        for kind in ("ReplicaSet", "Pod"):
            for slot in [s for s in self._objects if s[0] == kind]:
                del self._objects[slot]
        for deploy in self._of_kind("Deployment"):
            self._derive(deploy)

    def _derive(self, deploy: Obj) -> None:
        name = str(deploy["metadata"]["name"])
        spec = deploy["spec"]
        template = copy.deepcopy(spec["template"])
        pod_hash = template_hash(template)
        replicas = int(spec.get("replicas", 1))
        rs_name = f"{name}-{pod_hash}"
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            "pod-template-hash": pod_hash,
        }
        deploy["status"] = {
            "observedGeneration": 1,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        }
        owner = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
            "uid": deploy["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self._put(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "labels": labels,
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                    "ownerReferences": [owner],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {
                        "matchLabels": {
                            **spec["selector"]["matchLabels"],
                            "pod-template-hash": pod_hash,
                        }
                    },
                    "template": {
                        **template,
                        "metadata": {**template.get("metadata", {}), "labels": labels},
                    },
                },
                "status": {
                    "replicas": replicas,
                    "readyReplicas": replicas,
                    "availableReplicas": replicas,
                },
            }
        )
        rs_uid = _uid(self.seed, "ReplicaSet", rs_name)
        for n in range(replicas):
            suffix = _suffix(self.seed, name, n)
            pod_spec = copy.deepcopy(template["spec"])
            pod_spec.setdefault("restartPolicy", "Always")
            pod_spec.setdefault("dnsPolicy", "ClusterFirst")
            pod_spec.setdefault("schedulerName", "default-scheduler")
            pod_spec.setdefault("terminationGracePeriodSeconds", 30)
            pod_spec.setdefault("serviceAccountName", "default")
            pod_spec["nodeName"] = "worker-1"
            containers = pod_spec.get("containers") or []
            self._put(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{rs_name}-{suffix}",
                        "labels": dict(labels),
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "ReplicaSet",
                                "name": rs_name,
                                "uid": rs_uid,
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": pod_spec,
                    "status": {
                        "phase": "Running",
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [
                            {
                                "name": c.get("name", ""),
                                "image": c.get("image", ""),
                                "ready": True,
                                "restartCount": 0,
                                "started": True,
                                "state": {"running": {}},
                            }
                            for c in containers
                        ],
                    },
                }
            )

    def owners(self) -> dict[str, str]:
        """The Deployment each ReplicaSet and Pod belongs to, `Kind/name` to `Kind/name`."""
        out: dict[str, str] = {}
        rs_owner: dict[str, str] = {}
        for rs in self._of_kind("ReplicaSet"):
            for ref in rs["metadata"].get("ownerReferences", []):
                rs_owner[str(rs["metadata"]["name"])] = f"Deployment/{ref['name']}"
                out[f"ReplicaSet/{rs['metadata']['name']}"] = f"Deployment/{ref['name']}"
        for pod in self._of_kind("Pod"):
            for ref in pod["metadata"].get("ownerReferences", []):
                owner = rs_owner.get(str(ref["name"]))
                if owner is not None:
                    out[f"Pod/{pod['metadata']['name']}"] = owner
        return out

    def objects(self) -> list[Obj]:
        """Every object (copies): the namespace's, the cluster-scoped ones it uses, policies."""
        self._require()
        return [copy.deepcopy(o) for _slot, o in sorted(self._objects.items())]

    def host_state(self) -> host_model.HostState:
        """The RHEL9 host's state (a copy)."""
        self._require()
        return copy.deepcopy(self._host)

    # ---- observe ----------------------------------------------------------------------------
    def alerts(self) -> list[Alert]:
        """No alert rules exist here."""
        return []

    def alert_history(self) -> list[AlertInterval]:
        """Nothing ever fires."""
        return []

    def query_metrics(self, query: str, time: datetime) -> dict[str, Any]:
        """No metrics exist in a compliance environment: an empty vector."""
        self._require()
        return {"resultType": "vector", "result": []}

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> dict[str, Any]:
        """An empty matrix."""
        self._require()
        if step_seconds <= 0:
            raise ValueError("step must be positive")
        return {"resultType": "matrix", "result": []}

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> dict[str, Any]:
        """No log streams."""
        self._require()
        return {"resultType": "streams", "result": []}

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[dict[str, Any]]:
        """No traces."""
        self._require()
        return []

    def get_objects(
        self, kind: str, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        """Objects of a kind (copies), all or one by name.

        Raises:
            ValueError: A kind the twin does not serve.
        """
        self._require()
        canonical = canonical_kind(kind)
        if canonical == "Event":
            return []
        if canonical not in KINDS:
            raise ValueError(f'the server doesn\'t have a resource type "{kind}"')
        found = self._of_kind(canonical)
        if name is not None:
            found = [o for o in found if o["metadata"]["name"] == name]
        return _copied(found) if copy else found

    def service_calls(self) -> list[tuple[str, str]]:
        """No call graph is modelled here."""
        return []

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[dict[str, Any]]:
        """No events."""
        return []

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        """Pods log nothing here.

        Raises:
            ValueError: No such pod.
        """
        self._require()
        if ("Pod", pod) not in self._objects:
            raise ValueError(f'pods "{pod}" not found')
        return []

    # ---- act --------------------------------------------------------------------------------
    def act(self, action: AgentAction) -> ActionResult:
        """Refuse: a compliance assessment reads the environment and never changes it."""
        return ActionResult(
            ok=False,
            outcome="refused",
            message=(
                f"refused: {action.verb.value} {action.kind}/{action.name}: the compliance "
                "environment is read-only; submit the assessment's artefacts instead"
            ),
        )


def _uid(seed: int, kind: str, name: str) -> str:
    h = _digest("uid", seed, kind, name)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _suffix(seed: int, name: str, n: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    value = int(_digest("pod", seed, name, n), 16)
    out = []
    for _ in range(5):
        value, r = divmod(value, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def _copied(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return copy.deepcopy(objects)
