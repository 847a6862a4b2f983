"""kubectl-like verbs on the twin's objects, with kubectl's messages and errors.

The same primitives carry out agent actions and fault injections (object changes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from itbench.core.faults import ObjectChange
from itbench.core.models.observations import ActionResult, ActionVerb, AgentAction
from itbench.core.shop import FLAGD_CONFIG_KEY, FLAGD_CONFIGMAP, FLAGD_DEPLOYMENT
from itbench.environments.sim.cluster import Cluster
from itbench.environments.sim.limits import LimitExceededError, admit
from itbench.environments.sim.objects import (
    INJECTOR_KINDS,
    KIND_INFO,
    MergePatchError,
    Obj,
    api_defaults,
    canonical_kind,
    clone,
    merge_patch,
    resource_name,
    template_hash,
    valid_quantity,
)

CONTROLLED_KINDS = frozenset({"ReplicaSet", "Pod", "Endpoints", "Event"})
"""Kinds written by controllers: agents may delete them (controllers recreate) but not edit."""
BUILTIN_GROUPS = (
    "v1",
    "apps/v1",
    "autoscaling/v2",
    "batch/v1",
    "networking.k8s.io/v1",
    "rbac.authorization.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1",
)


class ActionError(Exception):
    """An action the API server or kubectl would reject; the message is kubectl's."""


@dataclass(frozen=True)
class Outcome:
    """What a primitive did: a kubectl message and whether anything changed."""

    message: str
    changed: bool


def _not_found(kind: str, name: str) -> ActionError:
    info = KIND_INFO.get(kind)
    plural = info[1] if info else kind.lower() + "s"
    return ActionError(f'Error from server (NotFound): {plural} "{name}" not found')


def _require(cluster: Cluster, kind: str, name: str) -> Obj:
    if kind not in KIND_INFO:
        raise ActionError(f'error: the server doesn\'t have a resource type "{kind}"')
    obj = cluster.get(kind, name)
    if obj is None:
        raise _not_found(kind, name)
    return obj


def _ref(kind: str, name: str) -> str:
    return f"{resource_name(kind)}/{name}"


def _store(cluster: Cluster, before: Obj, after: Obj) -> bool:
    """Validate and store an edited object; False when nothing changed."""
    if _comparable(before) == _comparable(after):
        return False
    _validate(after)
    _admit(after, None)
    cluster.put(after)
    return True


def _admit(obj: Obj, existing: int | None) -> None:
    """The lab's limits (`limits.admit`), refused as kubectl prints the API's answer."""
    try:
        admit(obj, existing)
    except LimitExceededError as exc:
        if exc.reason == "Invalid":
            raise ActionError(str(exc)) from None
        where = 'error when creating "STDIN": ' if existing is not None else ""
        raise ActionError(f"Error from server ({exc.reason}): {where}{exc}") from None


def _comparable(obj: Obj) -> Obj:
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    for key in ("resourceVersion", "generation", "uid", "creationTimestamp", "managedFields"):
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _validate(obj: Obj) -> None:
    kind = obj.get("kind", "")
    name = (obj.get("metadata") or {}).get("name", "")
    if kind == "Service":
        for i, port in enumerate(((obj.get("spec") or {}).get("ports")) or []):
            number = port.get("port") if isinstance(port, dict) else None
            if not isinstance(number, int) or not 1 <= number <= 65535:
                raise ActionError(
                    f'The Service "{name}" is invalid: spec.ports[{i}].port: Invalid value: '
                    f"{number or 0}: must be between 1 and 65535, inclusive"
                )
    if kind == "Deployment":
        spec = obj.get("spec") or {}
        replicas = spec.get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 0:
            raise ActionError(
                f'The Deployment "{name}" is invalid: spec.replicas: Invalid value: {replicas}: '
                "must be greater than or equal to 0"
            )
        pod = (spec.get("template") or {}).get("spec") or {}
        containers = pod.get("containers") or []
        if not containers:
            raise ActionError(
                f'The Deployment "{name}" is invalid: spec.template.spec.containers: Required value'
            )
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
                raise ActionError(
                    f'The Deployment "{name}" is invalid: spec.template.spec.containers[{i}]: '
                    "name and image are required"
                )
            for section in ("limits", "requests"):
                for res, value in ((c.get("resources") or {}).get(section) or {}).items():
                    if not valid_quantity(str(value), "cpu" if res == "cpu" else "memory"):
                        raise ActionError(
                            f'The Deployment "{name}" is invalid: spec.template.spec.containers'
                            f'[{i}].resources.{section}[{res}]: Invalid value: "{value}": '
                            "quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                        )


# ---- primitives ---------------------------------------------------------------------------------


def patch_object(cluster: Cluster, kind: str, name: str, patch: dict[str, Any]) -> Outcome:
    """Merge-patch an object (strategic merge for built-in kinds, like `kubectl patch`)."""
    kind = canonical_kind(kind)
    obj = _require(cluster, kind, name)
    if kind in CONTROLLED_KINDS:
        raise ActionError(
            f"{_ref(kind, name)} is managed by a controller; change its owner instead"
        )
    meta_patch = patch.get("metadata") or {}
    if "name" in meta_patch and meta_patch["name"] != name:
        raise ActionError(f'error: metadata.name cannot be changed ("{name}")')
    for key in ("kind", "apiVersion"):
        if key in patch and patch[key] != obj.get(key):
            # As the API server answers: a patch cannot turn an object into another kind.
            raise ActionError(f"error: {key} cannot be changed by a patch ({_ref(kind, name)})")
    strategic = obj.get("apiVersion", "v1") in BUILTIN_GROUPS
    try:
        after = merge_patch(obj, patch, strategic=strategic, kind=kind)
    except MergePatchError as exc:
        # What kube-apiserver answers (HTTP 500) and kubectl prints.
        raise ActionError(f"Error from server: {exc}") from None
    changed = _store(cluster, obj, after)
    return Outcome(f"{_ref(kind, name)} patched" + ("" if changed else " (no change)"), changed)


def apply_manifest(cluster: Cluster, manifest: dict[str, Any]) -> Outcome:
    """Create or replace an object from a manifest (`kubectl apply`)."""
    kind = canonical_kind(str(manifest.get("kind", "")))
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name", ""))
    if not kind or not name:
        raise ActionError("error: the manifest needs kind and metadata.name")
    if kind not in KIND_INFO:
        raise ActionError(
            f'error: resource mapping not found for name: "{name}" namespace: "" from "STDIN": '
            f'no matches for kind "{kind}" in version "{manifest.get("apiVersion", "")}"'
        )
    if kind in CONTROLLED_KINDS:
        raise ActionError(f"{_ref(kind, name)} is managed by a controller; apply its owner")
    namespace = meta.get("namespace")
    if namespace not in (None, cluster.namespace) and KIND_INFO[kind][2]:
        raise ActionError(
            f'Error from server (NotFound): error when creating "STDIN": namespaces '
            f'"{namespace}" not found'
        )
    body = clone(manifest)
    body["kind"] = kind
    body.setdefault("apiVersion", KIND_INFO[kind][0])
    old = cluster.get(kind, name)
    if old is None:
        body = api_defaults(body)
        _validate(body)
        _admit(body, len(cluster.objects.get(kind, {})))
        cluster.put(body)
        return Outcome(f"{_ref(kind, name)} created", True)
    after = clone(old)
    for key, value in body.items():
        if key in ("status", "metadata"):
            continue
        after[key] = value
    for key in ("labels", "annotations"):
        if key in meta:
            after["metadata"][key] = clone(meta[key])
    changed = _store(cluster, old, after)
    return Outcome(f"{_ref(kind, name)} {'configured' if changed else 'unchanged'}", changed)


def delete_object(cluster: Cluster, kind: str, name: str) -> Outcome:
    """Delete an object (and what it owns)."""
    kind = canonical_kind(kind)
    _require(cluster, kind, name)
    cluster.delete(kind, name)
    return Outcome(f'{resource_name(kind)} "{name}" deleted', True)


def _select(text: str, where: str, flag: str, variant: str) -> tuple[str, bool]:
    """demo.flagd.json text with a flag's default variant selected, and whether it changed."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"error: {where} is not valid JSON: {exc.msg}") from None
    flags = doc.get("flags") if isinstance(doc, dict) else None
    if not isinstance(flags, dict) or flag not in flags:
        known = ", ".join(sorted(flags)) if isinstance(flags, dict) else "none"
        raise ActionError(f'error: flag "{flag}" not found in {FLAGD_CONFIG_KEY} (flags: {known})')
    variants = flags[flag].get("variants") or {}
    if variant not in variants:
        raise ActionError(
            f'error: flag "{flag}" has no variant "{variant}" '
            f"(variants: {', '.join(sorted(variants))})"
        )
    if flags[flag].get("defaultVariant") == variant and "targeting" not in flags[flag]:
        return text, False
    # Selecting a variant serves it to everyone, as switching a flag in the flagd UI does.
    flags[flag]["defaultVariant"] = variant
    flags[flag].pop("targeting", None)
    return json.dumps(doc, indent=2) + "\n", True


def set_flag_in_configmap(cluster: Cluster, flag: str, variant: str) -> Outcome:
    """Select a flag's default variant in the flagd-config ConfigMap. flagd serves the copy its
    pod made at start, so the change takes effect when flagd rolls out again."""
    cm = _require(cluster, "ConfigMap", FLAGD_CONFIGMAP)
    text = str((cm.get("data") or {}).get(FLAGD_CONFIG_KEY, ""))
    where = f"configmap/{FLAGD_CONFIGMAP} key {FLAGD_CONFIG_KEY}"
    new, changed = _select(text, where, flag, variant)
    if not changed:
        return Outcome(f"configmap/{FLAGD_CONFIGMAP} unchanged ({flag} already {variant})", False)
    after = clone(cm)
    after.setdefault("data", {})[FLAGD_CONFIG_KEY] = new
    cluster.put(after)
    return Outcome(f"configmap/{FLAGD_CONFIGMAP} patched ({flag}={variant})", True)


def set_flag(cluster: Cluster, flag: str, variant: str) -> Outcome:
    """Select a flag's variant where the stack keeps it and make flagd serve it: flagd-config,
    then a rollout of flagd (its pods copy the ConfigMap at start). What the fault's contract
    does, so the change lasts across flagd restarts."""
    edited = set_flag_in_configmap(cluster, flag, variant)
    if not edited.changed:
        return edited
    rollout_restart(cluster, "Deployment", FLAGD_DEPLOYMENT)
    return Outcome(f"{edited.message}; deployment.apps/{FLAGD_DEPLOYMENT} restarted", True)


def flag_variant(cluster: Cluster, flag: str) -> str | None:
    """A flag's current default variant, or None when flagd-config does not define it."""
    cm = cluster.get("ConfigMap", FLAGD_CONFIGMAP)
    try:
        doc = json.loads(str(((cm or {}).get("data") or {}).get(FLAGD_CONFIG_KEY, "")))
    except json.JSONDecodeError:
        return None
    spec = (doc.get("flags") or {}).get(flag) if isinstance(doc, dict) else None
    return str(spec.get("defaultVariant")) if isinstance(spec, dict) else None


def apply_change(cluster: Cluster, change: ObjectChange) -> Outcome:
    """Carry out one fault-library object change."""
    if change.op == "set-flag":
        return set_flag_in_configmap(cluster, change.flag, change.variant)
    if change.op == "create":
        body = clone(change.body) or {}
        body.setdefault("kind", change.kind)
        body.setdefault("apiVersion", change.api_version)
        body.setdefault("metadata", {}).setdefault("name", change.name)
        return apply_manifest(cluster, body)
    if change.op == "merge-patch":
        return patch_object(cluster, change.kind, change.name, change.body)
    if change.op == "rollout":
        return rollout_restart(cluster, change.kind, change.name)
    if change.selector:
        return delete_matching(cluster, change.kind, change.selector)
    return delete_object(cluster, change.kind, change.name)


def rollout_restart(cluster: Cluster, kind: str, name: str) -> Outcome:
    """Roll a Deployment out again (`kubectl rollout restart`: a template annotation)."""
    obj, after = _with_template(cluster, kind, name)
    tpl_meta = after["spec"].setdefault("template", {}).setdefault("metadata", {})
    tpl_meta.setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = (
        cluster.timestamp()
    )
    _store(cluster, obj, after)
    return Outcome(f"{_ref(obj['kind'], name)} restarted", True)


def delete_matching(cluster: Cluster, kind: str, selector: dict[str, str]) -> Outcome:
    """Delete every object of a kind whose labels match (`kubectl delete -l`)."""
    kind = canonical_kind(kind)
    if kind not in KIND_INFO:
        raise ActionError(f'error: the server doesn\'t have a resource type "{kind}"')
    gone = []
    for obj in cluster.of_kind(kind):
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if all(labels.get(k) == v for k, v in selector.items()):
            cluster.delete(kind, obj["metadata"]["name"])
            gone.append(obj["metadata"]["name"])
    if not gone:
        return Outcome("No resources found", False)
    return Outcome("\n".join(f'{resource_name(kind)} "{n}" deleted' for n in gone), True)


# ---- agent actions ------------------------------------------------------------------------------


def _template_container(obj: Obj, container: str | None) -> Obj:
    containers = ((obj["spec"].get("template") or {}).get("spec") or {}).get("containers") or []
    if container is None:
        if not containers:
            raise ActionError(
                f"error: {_ref(obj['kind'], obj['metadata']['name'])} has no containers"
            )
        first: Obj = containers[0]
        return first
    for c in containers:
        if c.get("name") == container:
            found: Obj = c
            return found
    raise ActionError(f'error: unable to find container named "{container}"')


def _with_template(cluster: Cluster, kind: str, name: str) -> tuple[Obj, Obj]:
    kind = canonical_kind(kind)
    obj = _require(cluster, kind, name)
    if kind != "Deployment":
        raise ActionError(
            f"error: {_ref(kind, name)} has no pod template that kubectl can change here; "
            "target the Deployment"
        )
    return obj, clone(obj)


def perform(cluster: Cluster, action: AgentAction) -> ActionResult:
    """Carry out an agent action; errors come back as kubectl would print them."""
    try:
        if action.namespace not in (None, cluster.namespace):
            raise ActionError(
                f'Error from server (NotFound): namespaces "{action.namespace}" not found'
            )
        outcome = _perform(cluster, action)
    except ActionError as exc:
        return ActionResult(ok=False, message=str(exc), outcome="error")
    return ActionResult(
        ok=True, message=outcome.message, outcome="applied" if outcome.changed else "unchanged"
    )


def _unserved(kind: str) -> ActionError:
    return ActionError(f'error: the server doesn\'t have a resource type "{kind.lower()}"')


def _perform(cluster: Cluster, action: AgentAction) -> Outcome:
    verb = action.verb
    kind = canonical_kind(action.kind)
    name = action.name
    manifest_kind = canonical_kind(str(action.manifest.get("kind", "")))
    if kind in INJECTOR_KINDS or manifest_kind in INJECTOR_KINDS:
        raise _unserved(action.kind if kind in INJECTOR_KINDS else manifest_kind)
    if verb == ActionVerb.SET_FLAG:
        flag = action.flag or (name if kind == "Flag" else "")
        if not flag or action.variant is None:
            raise ActionError("error: set-flag needs a flag and a variant")
        return set_flag(cluster, flag, action.variant)
    if verb == ActionVerb.APPLY:
        manifest = dict(action.manifest)
        if not manifest:
            raise ActionError("error: no objects passed to apply")
        return apply_manifest(cluster, manifest)
    if not name:
        raise ActionError(f"error: resource name may not be empty ({verb.value} {kind})")
    if verb == ActionVerb.PATCH:
        if not action.patch:
            raise ActionError("error: must specify a non-empty patch")
        return patch_object(cluster, kind, name, action.patch)
    if verb == ActionVerb.DELETE:
        return delete_object(cluster, kind, name)
    if verb == ActionVerb.SCALE:
        if action.replicas is None:
            raise ActionError("error: --replicas is required")
        if kind not in ("Deployment", "ReplicaSet"):
            raise ActionError(f'error: cannot scale {resource_name(kind)} "{name}"')
        obj = _require(cluster, kind, name)
        after = clone(obj)
        after["spec"]["replicas"] = action.replicas
        changed = _store(cluster, obj, after)
        return Outcome(f"{_ref(kind, name)} scaled", changed)
    if verb == ActionVerb.ROLLOUT_UNDO:
        return _undo(cluster, kind, name)
    obj, after = _with_template(cluster, kind, name)
    if verb == ActionVerb.ROLLOUT_RESTART:
        return rollout_restart(cluster, kind, name)
    container = _template_container(after, action.container)
    if verb == ActionVerb.SET_IMAGE:
        if not action.image:
            raise ActionError("error: set image needs an image")
        container["image"] = action.image
        changed = _store(cluster, obj, after)
        return Outcome(
            f"{_ref(kind, name)} image updated"
            if changed
            else f"{_ref(kind, name)} image unchanged",
            changed,
        )
    if verb == ActionVerb.SET_RESOURCES:
        if not action.limits and not action.requests:
            raise ActionError("error: you must specify an update to requests or limits")
        resources = container.setdefault("resources", {})
        for section, values in (("limits", action.limits), ("requests", action.requests)):
            for res, value in values.items():
                if not valid_quantity(value, "cpu" if res == "cpu" else "memory"):
                    raise ActionError(f'error: invalid quantity "{value}" for {section}.{res}')
                resources.setdefault(section, {})[res] = value
        changed = _store(cluster, obj, after)
        return Outcome(f"{_ref(kind, name)} resource requirements updated", changed)
    if verb == ActionVerb.SET_ENV:
        if not action.env:
            raise ActionError("error: at least one environment variable must be provided")
        env = container.setdefault("env", [])
        for key, value in action.env.items():
            for item in env:
                if item.get("name") == key:
                    item.pop("valueFrom", None)
                    item["value"] = value
                    break
            else:
                env.append({"name": key, "value": value})
        changed = _store(cluster, obj, after)
        return Outcome(f"{_ref(kind, name)} env updated", changed)
    raise ActionError(f"error: unknown action {verb.value}")


def _undo(cluster: Cluster, kind: str, name: str) -> Outcome:
    if kind != "Deployment":
        raise ActionError(f'error: no rollout history found for {resource_name(kind)} "{name}"')
    d = _require(cluster, kind, name)
    current = template_hash(d["spec"].get("template") or {})
    sets = [
        rs
        for rs in cluster.owned("ReplicaSet", d)
        if rs["metadata"]["labels"].get("pod-template-hash") != current
    ]
    if not sets:
        raise ActionError(f'error: no rollout history found for deployment "{name}"')
    previous = max(
        sets, key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
    )
    template = clone(previous["spec"]["template"])
    template.get("metadata", {}).get("labels", {}).pop("pod-template-hash", None)
    after = clone(d)
    after["spec"]["template"] = template
    _store(cluster, d, after)
    return Outcome(f"{_ref(kind, name)} rolled back", True)
