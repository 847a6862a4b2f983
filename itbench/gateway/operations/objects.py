"""kubectl reads on a trial session: get, describe, logs and events, within the guardrails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from itbench.gateway import guardrails, kubectl
from itbench.gateway.errors import BadInputError, FieldError, NotFoundError, bounded, refusal_error
from itbench.gateway.operations.calls import Origin, audited
from itbench.gateway.operations.observe import MAX_LOG_LINES
from itbench.gateway.operations.params import bounded_int
from itbench.gateway.schemas import EventList, KubectlDescribe, KubectlGet, PodLogs
from itbench.gateway.sessions import TrialSession

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

MAX_ITEMS = 500
"""The most objects or events one read returns."""


def _in_namespace(obj: dict[str, Any], kind: str, namespace: str) -> bool:
    if kind in kubectl.CLUSTER_SCOPED_KINDS:
        return kind != "Namespace" or (obj.get("metadata") or {}).get("name") == namespace
    return (obj.get("metadata") or {}).get("namespace") in (None, namespace)


def read_objects(
    session: TrialSession,
    kind: str,
    name: str | None,
    namespace: str | None,
    *,
    copy: bool = True,
) -> tuple[str, list[dict[str, Any]]]:
    """The objects of a kind (or the one named) that the agent may read (with `copy=False`,
    possibly the environment's own, to be read under the session's lock only).

    Raises:
        RefusedError: A guardrail refuses the read.
        BadInputError: The environment has no such kind.
        NotFoundError: The named object does not exist in the trial's namespace.
    """
    canonical = kubectl.canonical_kind(kind)
    refusal = guardrails.check_read(kind, namespace, session.namespace)
    if refusal is not None:
        raise refusal_error(refusal.rule, refusal.reason)
    try:
        objects = session.env.get_objects(canonical, name or None, copy=copy)
    except (KeyError, ValueError) as exc:
        message = bounded(str(exc))
        raise BadInputError(
            "unknown-kind",
            "Unknown kind",
            bounded(f"kind: cannot list {kind!r}: {message}"),
            errors=[FieldError(field="kind", message=message)],
        ) from exc
    objects = [o for o in objects if _in_namespace(o, canonical, session.namespace)]
    if name and not objects:
        raise NotFoundError(
            "object-not-found",
            "Not found",
            bounded(f'{canonical} "{name}" not found in namespace {session.namespace!r}'),
            extra={"kind": canonical, "name": name},
        )
    if canonical == "Secret":
        objects = [without_secret_values(o) for o in objects]
    return canonical, objects[:MAX_ITEMS]


def without_secret_values(secret: dict[str, Any]) -> dict[str, Any]:
    """A Secret as an agent reads it: its keys, each with an empty value (`data` and
    `stringData`), and the last-applied annotation (which would repeat them) left out.

    A new object: with `copy=False` the one given may be the environment's own.
    """
    out = dict(secret)
    for field_name in ("data", "stringData"):
        values = secret.get(field_name)
        if isinstance(values, dict):
            out[field_name] = dict.fromkeys(values, "")
    meta = secret.get("metadata")
    if isinstance(meta, dict):
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            out["metadata"] = {
                **meta,
                "annotations": {k: v for k, v in annotations.items() if k != LAST_APPLIED},
            }
    return out


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def get(
    session: TrialSession,
    origin: Origin,
    kind: str,
    name: str | None = None,
    namespace: str | None = None,
) -> KubectlGet:
    """`kubectl get`: objects as JSON and as the table kubectl prints."""
    return _get(session, origin, kind, name, namespace, _same, copy=True)


def get_json(
    session: TrialSession,
    origin: Origin,
    kind: str,
    name: str | None = None,
    namespace: str | None = None,
) -> bytes:
    """`kubectl get` as the JSON document of a `KubectlGet`, written under the session's lock
    before the call's virtual time passes, so the environment's objects are read in place
    instead of copied first."""
    return _get(session, origin, kind, name, namespace, _json, copy=False)


def _same(result: M) -> M:
    return result


def _json(result: BaseModel) -> bytes:
    return result.model_dump_json(by_alias=True).encode()


def _get(
    session: TrialSession,
    origin: Origin,
    kind: str,
    name: str | None,
    namespace: str | None,
    finish: Callable[[KubectlGet], T],
    *,
    copy: bool,
) -> T:
    with audited(session, origin, "observe.kubectl.get", session.virtual_cost.observation) as call:
        call.detail.update({"kind": kind, "name": name or ""})
        canonical, objects = read_objects(session, kind, name, namespace, copy=copy)
        return finish(
            KubectlGet(
                kind=canonical,
                namespace=session.namespace,
                items=objects,
                text=kubectl.render_get(canonical, objects, session.env.now()),
            )
        )


def describe(
    session: TrialSession, origin: Origin, kind: str, name: str, namespace: str | None = None
) -> KubectlDescribe:
    """`kubectl describe`: one object with its events."""
    with audited(
        session, origin, "observe.kubectl.describe", session.virtual_cost.observation
    ) as call:
        call.detail.update({"kind": kind, "name": name})
        canonical, objects = read_objects(session, kind, name, namespace)
        obj = objects[0]
        events = kubectl.events_for(session.env.events(canonical, name), canonical, name)
        return KubectlDescribe(
            kind=canonical,
            name=name,
            object=obj,
            events=events,
            text=kubectl.render_describe(obj, events),
        )


def pod_logs(session: TrialSession, origin: Origin, pod: str, tail: int = 100) -> PodLogs:
    """`kubectl logs --tail`: the last lines of a pod's log.

    Raises:
        InvalidError: A tail outside 1..MAX_LOG_LINES.
    """
    with audited(session, origin, "observe.kubectl.logs", session.virtual_cost.observation) as call:
        call.detail["pod"] = pod
        bounded_int(tail, "tail", 1, MAX_LOG_LINES)
        read_objects(session, "Pod", pod, None)
        lines = session.env.pod_logs(pod, tail)
        return PodLogs(pod=pod, lines=lines, text="\n".join(lines))


def events(
    session: TrialSession, origin: Origin, kind: str | None = None, name: str | None = None
) -> EventList:
    """`kubectl get events`: events in the trial's namespace, optionally of one object."""
    return _events(session, origin, kind, name, _same, copy=True)


def events_json(
    session: TrialSession, origin: Origin, kind: str | None = None, name: str | None = None
) -> bytes:
    """`kubectl get events` as the JSON document of an `EventList`, written under the session's
    lock (as `get_json`), so the environment's events are read in place instead of copied."""
    return _events(session, origin, kind, name, _json, copy=False)


def _events(
    session: TrialSession,
    origin: Origin,
    kind: str | None,
    name: str | None,
    finish: Callable[[EventList], T],
    *,
    copy: bool,
) -> T:
    with audited(session, origin, "observe.kubectl.events", session.virtual_cost.observation):
        found = [
            e
            for e in session.env.events(copy=copy)
            if (e.get("metadata") or {}).get("namespace") in (None, session.namespace)
        ]
        if kind and name:
            found = kubectl.events_for(found, kubectl.canonical_kind(kind), name)
        found = found[-MAX_ITEMS:]
        return finish(EventList(items=found, text=kubectl.render_events(found)))
