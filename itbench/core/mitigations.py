"""Accepted mitigations (ground truth) turned into the agent actions that perform them."""

from __future__ import annotations

import json
from typing import Any

from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.core.models.scenario import EntityKind, Mitigation, MitigationStep
from itbench.core.shop import FLAGD_CONFIGMAP


class MitigationError(ValueError):
    """A mitigation step that cannot be expressed as an action (names the step and the field)."""


def mitigation_to_actions(m: Mitigation, namespace: str) -> list[AgentAction]:
    """The gateway actions that carry out an accepted mitigation, in order.

    Step parameters: set-image takes `image` (and optionally `container`); set-resources takes
    `limits.cpu`, `limits.memory`, `requests.cpu`, `requests.memory` (a bare `cpu`/`memory` sets
    the limit); set-env takes every parameter except `container` as a variable; scale takes
    `replicas`; set-flag takes `variant` (default `off`) and names the flag as the step's name (kind
    Flag) or as `flag` (kind ConfigMap flagd-config); patch and apply take JSON text in `patch`.

    Args:
        m: The mitigation.
        namespace: The application namespace.

    Raises:
        MitigationError: A step lacks a parameter its action needs.
    """
    return [_action(step, namespace, n) for n, step in enumerate(m.steps)]


def _action(step: MitigationStep, namespace: str, n: int) -> AgentAction:
    p = step.params
    where = f"steps[{n}] ({step.action} {step.kind.value}/{step.name})"
    base: dict[str, Any] = {"kind": step.kind.value, "name": step.name, "namespace": namespace}
    if step.action == "patch":
        return AgentAction(verb=ActionVerb.PATCH, patch=_json(step.patch, where), **base)
    if step.action == "apply":
        manifest = _json(step.patch, where)
        return AgentAction(verb=ActionVerb.APPLY, manifest=manifest, **base)
    if step.action == "set-image":
        if "image" not in p:
            raise MitigationError(f"{where}: params.image is required")
        container = str(p["container"]) if "container" in p else None
        return AgentAction(
            verb=ActionVerb.SET_IMAGE, image=str(p["image"]), container=container, **base
        )
    if step.action == "set-resources":
        limits: dict[str, str] = {}
        requests: dict[str, str] = {}
        for key, value in p.items():
            if key == "container":
                continue
            section, _, resource = key.rpartition(".")
            target = requests if section == "requests" else limits
            target[resource] = str(value)
        if not limits and not requests:
            raise MitigationError(f"{where}: params must name limits or requests")
        container = str(p["container"]) if "container" in p else None
        return AgentAction(
            verb=ActionVerb.SET_RESOURCES,
            limits=limits,
            requests=requests,
            container=container,
            **base,
        )
    if step.action == "set-env":
        env = {k: str(v) for k, v in p.items() if k != "container"}
        if not env:
            raise MitigationError(f"{where}: params must name at least one variable")
        container = str(p["container"]) if "container" in p else None
        return AgentAction(verb=ActionVerb.SET_ENV, env=env, container=container, **base)
    if step.action == "scale":
        if "replicas" not in p:
            raise MitigationError(f"{where}: params.replicas is required")
        return AgentAction(verb=ActionVerb.SCALE, replicas=int(p["replicas"]), **base)
    if step.action == "set-flag":
        flag = step.name if step.kind == EntityKind.FLAG else str(p.get("flag", ""))
        if not flag:
            raise MitigationError(f"{where}: name the flag (kind Flag) or set params.flag")
        return AgentAction(
            verb=ActionVerb.SET_FLAG,
            kind="ConfigMap",
            name=FLAGD_CONFIGMAP,
            namespace=namespace,
            flag=flag,
            variant=str(p.get("variant", "off")),
        )
    verbs = {
        "rollout-undo": ActionVerb.ROLLOUT_UNDO,
        "rollout-restart": ActionVerb.ROLLOUT_RESTART,
        "delete": ActionVerb.DELETE,
    }
    return AgentAction(verb=verbs[step.action], **base)


def _json(text: str, where: str) -> dict[str, Any]:
    if not text:
        raise MitigationError(f"{where}: patch must hold a JSON object")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MitigationError(f"{where}: patch is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise MitigationError(f"{where}: patch must be a JSON object")
    return value
