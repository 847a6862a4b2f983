"""Turning the bodies Kopf hands to handlers into API models, with field-path problems."""

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
"""Label of a Trial naming its BenchmarkRun."""


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
    return f"{body.get('kind', 'object')} {where}"


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
        return None, validation_problems(exc, source(body))


def problem_text(problems: list[Problem], limit: int = 10) -> str:
    """Problems as one line: `path: reason; path: reason` (at most `limit`)."""
    text = "; ".join(f"{p.path or '<object>'}: {p.reason}" for p in problems[:limit])
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
        message=message,
        now=now(),
        generation=generation,
    )


def annotation(body: Mapping[str, Any], key: str) -> bool:
    """Whether an annotation is set to "true"."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(key, "")).lower() == "true"
