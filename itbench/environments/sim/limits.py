"""The lab's limits on what a namespace may hold, enforced where a real cluster enforces them.

A lab cluster shared by tenants bounds each namespace: an admission policy caps a workload's
replicas (the `ValidatingAdmissionPolicy` of the Kubernetes documentation's own example, a
cluster-scoped object a namespace user can neither read nor change), and a ResourceQuota caps
the pods and the objects of each kind. These bounds keep whatever an agent does to the twin
within a fixed cost per tick (pods, their series, objects the controllers walk). Where the twin
differs: its quota is the platform's, not an object in the namespace, so `kubectl get quota`
does not list it (an agent cannot delete it either); messages are kube-apiserver's.
"""

from __future__ import annotations

from typing import Any

from itbench.environments.sim.objects import KIND_INFO, Obj

MAX_REPLICAS = 100
"""The most replicas a workload or an autoscaler may ask for (the fault library's own bound)."""
REPLICA_POLICY = "workload-replica-limit"
"""The admission policy (and its binding) that refuses more."""
POD_QUOTA = 150
"""The most pods the namespace holds: the shop runs about 25, a fault adds at most 100."""
OBJECT_QUOTA = 100
"""The most objects of each kind (`count/<resource>`) the namespace holds (pods excepted)."""
QUOTA_NAME = "namespace-quota"
"""The ResourceQuota's name, as its refusals give it."""
UNCOUNTED_KINDS = frozenset({"Pod", "Event", "Endpoints", "ReplicaSet"})
"""Kinds only controllers write: pods have their own bound; Events and Endpoints follow objects
already counted; a Deployment's ReplicaSets are bounded by its revision history and by the
actions that roll it out."""
_REPLICA_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "replicas"),),
    "ReplicaSet": (("spec", "replicas"),),
    "StatefulSet": (("spec", "replicas"),),
    "HorizontalPodAutoscaler": (("spec", "minReplicas"), ("spec", "maxReplicas")),
}


class LimitExceededError(Exception):
    """A write the lab's limits refuse; the message is what kube-apiserver answers."""

    def __init__(self, message: str, *, status: int, reason: str) -> None:
        """Keep the API's status code and reason with the message.

        Args:
            message: The refusal as kubectl prints it.
            status: The HTTP status kube-apiserver answers with (422 or 403).
            reason: Its status reason (`Invalid` or `Forbidden`).
        """
        super().__init__(message)
        self.status = status
        self.reason = reason


def _resource(kind: str) -> str:
    info = KIND_INFO.get(kind)
    return info[1] if info else kind.lower() + "s"


def _field(obj: Obj, path: tuple[str, ...]) -> Any:
    value: Any = obj
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def check_replicas(obj: Obj) -> None:
    """Refuse a workload or autoscaler asking for more than `MAX_REPLICAS`.

    Raises:
        LimitExceededError: A replica field is above the bound (422 Invalid, as the admission
            policy's validation with `reason: Invalid` answers).
    """
    kind = str(obj.get("kind", ""))
    name = str((obj.get("metadata") or {}).get("name", ""))
    for path in _REPLICA_FIELDS.get(kind, ()):
        value = _field(obj, path)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_REPLICAS:
            field = ".".join(path)
            raise LimitExceededError(
                f'The {_resource(kind).split(".")[0]} "{name}" is invalid: : '
                "ValidatingAdmissionPolicy "
                f"'{REPLICA_POLICY}' with binding '{REPLICA_POLICY}' denied request: {field} "
                f"must be no greater than {MAX_REPLICAS} (requested {value}); ask for at most "
                f"{MAX_REPLICAS}",
                status=422,
                reason="Invalid",
            )


def check_count(kind: str, name: str, count: int) -> None:
    """Refuse creating an object of a kind the namespace already holds `OBJECT_QUOTA` of.

    Args:
        kind: The new object's kind.
        name: Its name.
        count: How many objects of the kind the namespace holds now.

    Raises:
        LimitExceededError: The kind's count quota is used up (403 Forbidden, as ResourceQuota
            admission answers).
    """
    if kind in UNCOUNTED_KINDS or not KIND_INFO.get(kind, ("", "", False))[2]:
        return
    if count + 1 <= OBJECT_QUOTA:
        return
    resource = _resource(kind)
    raise LimitExceededError(
        f'{resource} "{name}" is forbidden: exceeded quota: {QUOTA_NAME}, requested: '
        f"count/{resource}=1, used: count/{resource}={count}, limited: "
        f"count/{resource}={OBJECT_QUOTA}",
        status=403,
        reason="Forbidden",
    )


def pod_quota_refusal(pod_name: str, pods: int) -> str | None:
    """Why the pod quota refuses one more pod, or None.

    Args:
        pod_name: The pod's name (a controller's pods: its `generateName`, the owner's name and
            a dash).
        pods: Pods the namespace holds now.
    """
    if pods + 1 <= POD_QUOTA:
        return None
    return (
        f'pods "{pod_name}" is forbidden: exceeded quota: {QUOTA_NAME}, requested: pods=1, '
        f"used: pods={pods}, limited: pods={POD_QUOTA}"
    )


def admit(obj: Obj, existing: int | None) -> None:
    """Every limit on one written object.

    Args:
        obj: The object as it would be stored.
        existing: Objects of its kind the namespace holds when it is new, None when it
            replaces one (a replacement adds nothing to the count).

    Raises:
        LimitExceededError: A limit refuses it.
    """
    kind = str(obj.get("kind", ""))
    name = str((obj.get("metadata") or {}).get("name", ""))
    if existing is not None and kind == "Pod":
        refused = pod_quota_refusal(name, existing)
        if refused is not None:
            # A pod created directly (not by a controller) is refused to its creator.
            raise LimitExceededError(refused, status=403, reason="Forbidden")
    if existing is not None:
        check_count(kind, name, existing)
    check_replicas(obj)
