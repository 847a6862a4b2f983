"""Objects an agent applies or patches, validated against the Kubernetes schema of their kind
(`kubernetes-validate`'s strict OpenAPI schemas, as `kubectl apply --validate=strict` checks) before
they reach the environment, with every invalid field path.

A patch is checked as the object it would produce: the current object with the patch merged in
(strategic merge for built-in kinds, like kubectl). Kinds without a Kubernetes schema (custom
resources) are refused, since nothing would check what an environment is then asked to hold.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema
from kubernetes_validate.utils import SchemaNotFoundError, schema_contents

from itbench.core.models.observations import ActionVerb, AgentAction
from itbench.environments.sim.objects import merge_patch
from itbench.gateway.errors import FieldError, InvalidError, bounded
from itbench.gateway.kubectl import canonical_kind
from itbench.gateway.sessions import TrialSession

KUBERNETES_VERSION = "1.32"
"""The Kubernetes version whose schemas objects are checked against."""

STRATEGIC_GROUPS = ("v1", "apps/v1", "autoscaling/v2", "networking.k8s.io/v1", "batch/v1")
"""apiVersions of built-in kinds, which kubectl patches by strategic merge."""

MAX_ERRORS = 20
"""The most field errors one refusal lists."""

_SCHEMA_DIR = f"kubernetes-json-schema/v{KUBERNETES_VERSION}.0-local-strict"


@functools.cache
def _definitions() -> referencing.Registry[Any]:
    contents = schema_contents(f"{_SCHEMA_DIR}/_definitions.json", KUBERNETES_VERSION)
    resource: referencing.Resource[Any] = referencing.Resource.from_contents(
        contents, default_specification=referencing.jsonschema.DRAFT202012
    )
    return resource @ referencing.Registry()


@functools.cache
def _validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator | None:
    group, _, version = api_version.rpartition("/")
    suffix = f"{group.split('.', 1)[0]}-{version}" if group else version
    try:
        schema = schema_contents(f"{_SCHEMA_DIR}/{kind.lower()}-{suffix}.json", KUBERNETES_VERSION)
    except (FileNotFoundError, SchemaNotFoundError):
        return None
    return jsonschema.Draft202012Validator(schema, registry=_definitions())


def _path(prefix: str, parts: Any) -> str:
    return ".".join([prefix, *(str(p) for p in parts)])


def schema_errors(obj: dict[str, Any], prefix: str) -> list[FieldError]:
    """Every way an object departs from the Kubernetes schema of its kind, by field path.

    Args:
        obj: The object (kind and apiVersion select the schema).
        prefix: Prepended to each path (`manifest`, `patch`).

    Returns:
        The field errors (empty when valid), at most MAX_ERRORS.
    """
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    missing = [
        FieldError(field=f"{prefix}.{key}", message="required (as kubectl requires it)")
        for key, value in (("apiVersion", api_version), ("kind", kind))
        if not isinstance(value, str) or not value
    ]
    if missing:
        return missing
    assert isinstance(kind, str) and isinstance(api_version, str)
    validator = _validator(kind, api_version)
    if validator is None:
        return [
            FieldError(
                field=f"{prefix}.kind",
                message=bounded(
                    f"no Kubernetes schema for kind {kind!r} in {api_version!r}; only built-in "
                    "kinds can be applied or patched"
                ),
            )
        ]
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [
        FieldError(field=_path(prefix, e.absolute_path), message=bounded(e.message, 300))
        for e in errors[:MAX_ERRORS]
    ]


@dataclass(frozen=True)
class Proposed:
    """The object an apply or patch would leave, beside the object as it is now.

    Attributes:
        kind: Its kind (canonical).
        name: Its name.
        before: The object now (None when the action creates it).
        after: The object as the action would leave it.
        checked: What the schema check reads: the manifest as sent, or the patched object.
        prefix: The field prefix of schema errors (`manifest`, `patch`).
        subject: How refusals name it (`manifest`, `the patched Deployment/cart`).
    """

    kind: str
    name: str
    before: dict[str, Any] | None
    after: dict[str, Any]
    checked: dict[str, Any]
    prefix: str
    subject: str

    @property
    def ref(self) -> str:
        """`Kind/name`."""
        return f"{self.kind}/{self.name}"


def _current(session: TrialSession, kind: str, name: str) -> dict[str, Any] | None:
    if not name:
        return None
    try:
        found = session.env.get_objects(kind, name)
    except (KeyError, ValueError):
        return None  # a kind the environment does not serve: it answers for itself
    return found[0] if found else None


def proposed_object(session: TrialSession, action: AgentAction) -> Proposed | None:
    """The object an apply or a patch would produce (None for other verbs, and for a patch of
    an object that does not exist: the environment answers that as kubectl would).

    An applied manifest replaces the current object's top-level fields (labels and annotations
    merged into its metadata), as the environments apply it; a patch is merged into the current
    object, strategically for built-in kinds.
    """
    if action.verb == ActionVerb.APPLY:
        manifest = dict(action.manifest)
        meta = manifest.get("metadata") or {}
        kind = canonical_kind(str(manifest.get("kind") or action.kind))
        name = str(meta.get("name") or action.name)
        before = _current(session, kind, name)
        after = manifest
        if before is not None:
            after = {**before, **{k: v for k, v in manifest.items() if k != "metadata"}}
            after["metadata"] = {**(before.get("metadata") or {}), **meta}
        return Proposed(kind, name, before, after, manifest, "manifest", "manifest")
    if action.verb == ActionVerb.PATCH and action.patch:
        kind = canonical_kind(action.kind)
        before = _current(session, kind, action.name)
        if before is None:
            return None
        strategic = str(before.get("apiVersion", "v1")) in STRATEGIC_GROUPS
        after = merge_patch(before, action.patch, strategic=strategic)
        after.pop("status", None)
        subject = f"the patched {kind}/{action.name}"
        return Proposed(kind, action.name, before, after, after, "patch", subject)
    return None


def check_schema(proposed: Proposed) -> None:
    """Refuse an apply or patch whose object would not be a valid object of its kind.

    Raises:
        InvalidError: 422 listing every invalid field path of the manifest or patched object.
    """
    errors = schema_errors(proposed.checked, proposed.prefix)
    if errors:
        raise InvalidError(
            "invalid-object",
            "Invalid object",
            bounded(
                f"{proposed.subject} is not a valid Kubernetes object at: "
                f"{', '.join(e.field for e in errors)}; nothing was changed"
            ),
            errors=errors,
        )
