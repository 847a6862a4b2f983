"""Turning the bodies Kopf hands to handlers into API models, with field-path problems.

Where the API server does not validate (a CRD installed without its schema, an older cluster),
any JSON may arrive; everything here accepts any JSON and never raises on it, and every text it
builds for a condition or an Event quotes at most a bounded excerpt of a bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from itbench.core.catalog import Problem, validation_problems
from itbench.core.models.base import Condition, ConditionStatus, set_condition

M = TypeVar("M", bound=BaseModel)

ANNOTATION_PREFIX = "itbench.io/"
ADMITTED = f"{ANNOTATION_PREFIX}admitted"
"""Set to "true" by the BenchmarkRun scheduler when a trial may start."""
CANCELLED = f"{ANNOTATION_PREFIX}cancel"
"""Set to "true" by the BenchmarkRun when the run is cancelled: the trial recovers and ends."""
FORCE_RELEASE = f"{ANNOTATION_PREFIX}force-release"
"""Set to "true" by a user to let a deletion finish when the environment is unreachable."""
RUN_LABEL = f"{ANNOTATION_PREFIX}run"
"""Label of a Trial naming its BenchmarkRun (for selecting; ownership is the owner reference)."""

EXCERPT_CHARS = 80
"""Most characters of a value quoted in a message."""
REASON_CHARS = 240
"""Most characters of one problem's reason in a message."""
MESSAGE_CHARS = 1024
"""Most characters of a condition message or an Event message."""


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A value as text, cut to `limit` characters with its full length said when cut."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A message cut to `limit` characters (the cut is marked)."""
    if len(text) <= limit:
        return text
    marker = f"... ({len(text)} characters)"
    return text[: limit - len(marker)] + marker


def plain(body: Mapping[str, Any], *, status: bool = False) -> dict[str, Any]:
    """A JSON copy of an object's apiVersion, kind, metadata and spec (and status if asked)."""
    out: dict[str, Any] = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": _json(body.get("metadata") or {}),
        "spec": _json(body.get("spec") or {}),
    }
    if status and body.get("status"):
        out["status"] = _json(body["status"])
    return out


BOOKKEEPING_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
BOOKKEEPING_SUFFIX = "/last-handled-configuration"
"""Annotations that copy the whole object: kubectl's last-applied manifest and the operator
framework's record of what it last handled."""


def scenario_document(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Scenario object as its author wrote it: `plain`, without the annotations that copy it.

    `kubectl apply` and the operator framework each keep a copy of the object in an annotation;
    for a template that copy holds the `${...}` placeholders, which are allowed only under spec.
    """
    doc = plain(body)
    annotations = doc["metadata"].get("annotations")
    if isinstance(annotations, dict):
        rest = {
            k: v
            for k, v in annotations.items()
            if k not in BOOKKEEPING_ANNOTATIONS and not k.endswith(BOOKKEEPING_SUFFIX)
        }
        if rest:
            doc["metadata"]["annotations"] = rest
        else:
            doc["metadata"].pop("annotations", None)
    return doc


def _json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


def source(body: Mapping[str, Any]) -> str:
    """`kind namespace/name` of an object, for messages."""
    meta = body.get("metadata") or {}
    where = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    kind = body.get("kind") if isinstance(body.get("kind"), str) else "object"
    return f"{excerpt(kind, 64)} {excerpt(where, 320)}"


def parse(
    model: type[M], body: Mapping[str, Any], *, status: bool = False
) -> tuple[M | None, list[Problem]]:
    """Validate an object body against its model.

    Returns:
        (model, []) when valid, else (None, problems with field paths).
    """
    try:
        return model.model_validate(plain(body, status=status)), []
    except ValidationError as exc:
        return None, _bounded_problems(exc, source(body))


def _bounded_problems(exc: ValidationError, where: str) -> list[Problem]:
    # Reasons may quote the bad input whole (an enum's "got '<value>'"): quote an excerpt.
    quoted = {
        text: f"{text[:EXCERPT_CHARS]}... ({len(err['input'])} characters)"
        for err in exc.errors()
        if isinstance(err.get("input"), str | bytes)
        and len(text := repr(err["input"])) > EXCERPT_CHARS
    }
    problems = validation_problems(exc, where)
    if not quoted:
        return problems
    out = []
    for problem in problems:
        reason = problem.reason
        for text, short in quoted.items():
            reason = reason.replace(text, short)
        out.append(Problem(problem.source, problem.path, reason))
    return out


def parsed_status(model: type[M], body: Mapping[str, Any]) -> M | None:
    """An object's status as its model; None when absent or malformed (never raises)."""
    raw = body.get("status")
    if not raw or not isinstance(raw, Mapping):
        return None
    try:
        return model.model_validate(_json(raw))
    except ValidationError:
        return None


def problem_text(problems: list[Problem], limit: int = 5) -> str:
    """Problems as one bounded line: `path: reason; path: reason` (at most `limit` of them).

    Paths and reasons are cut to a bounded excerpt, so a bad value of any size (a 1 MB enum
    value, a 1 MB unknown key) never reaches a condition or an Event whole.
    """
    text = "; ".join(
        f"{excerpt(p.path, 160) if p.path else '<object>'}: {excerpt(p.reason, REASON_CHARS)}"
        for p in problems[:limit]
    )
    if len(problems) > limit:
        text += f"; and {len(problems) - limit} more"
    return text


def now() -> datetime:
    """Wall-clock time, for conditions and run timestamps (trials use environment time)."""
    return datetime.now(UTC).replace(microsecond=0)


def condition(
    conditions: list[Condition],
    type: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int | None,
) -> list[Condition]:
    """Set one condition (True when ok), keeping lastTransitionTime unless the status flips."""
    return set_condition(
        conditions,
        type=type,
        status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE,
        reason=reason,
        message=bounded(message),
        now=now(),
        generation=generation,
    )


def annotation(body: Mapping[str, Any], key: str) -> bool:
    """Whether an annotation is set to "true"."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(key, "")).lower() == "true"


def controller_uid(body: Mapping[str, Any], kind: str) -> str | None:
    """The UID of an object's controller owner of `kind`, if it has one."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("kind") == kind and ref.get("controller"):
            uid = ref.get("uid")
            return str(uid) if uid else None
    return None
