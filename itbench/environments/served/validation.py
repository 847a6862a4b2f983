"""Schema validation of written objects, as kube-apiserver validates them: built-in kinds against
the Kubernetes schemas of the pinned version (`kubernetes-validate`'s strict schemas), custom
resources against their CRD's openAPIV3Schema."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema.protocols
import referencing
import referencing.jsonschema
from kubernetes_validate.utils import SchemaNotFoundError, schema_contents

from itbench import stack

MAX_ERRORS = 10


def kubernetes_minor() -> str:
    """`1.32` for the pinned kind node image `v1.32.4`."""
    version = str(stack.pins()["kubernetes"]["version"]).lstrip("v")
    return ".".join(version.split(".")[:2])


@functools.cache
def _registry(version: str) -> referencing.Registry[Any]:
    contents = schema_contents(
        f"kubernetes-json-schema/v{version}.0-local-strict/_definitions.json", version
    )
    resource: referencing.Resource[Any] = referencing.Resource.from_contents(
        contents, default_specification=referencing.jsonschema.DRAFT202012
    )
    return resource @ referencing.Registry()


@functools.cache
def _validator(kind: str, api_version: str, version: str) -> jsonschema.Draft202012Validator | None:
    group, _, api = api_version.rpartition("/")
    suffix = f"{group.split('.', 1)[0]}-{api}" if group else api
    try:
        schema = schema_contents(
            f"kubernetes-json-schema/v{version}.0-local-strict/{kind.lower()}-{suffix}.json",
            version,
        )
    except (FileNotFoundError, SchemaNotFoundError):
        return None
    return jsonschema.Draft202012Validator(schema, registry=_registry(version))


def invalid_fields(obj: dict[str, Any], *, strict: bool) -> list[str]:
    """Why an object is not a valid object of its kind: `path: message` lines (empty: valid).

    Args:
        obj: The object (its apiVersion and kind select the schema; kinds without one pass).
        strict: Whether unknown fields are errors (`fieldValidation=Strict`, which kubectl
            sends); otherwise only type and value errors are.
    """
    validator = _validator(
        str(obj.get("kind", "")), str(obj.get("apiVersion", "")), kubernetes_minor()
    )
    if validator is None:
        return []
    return _problems(validator, obj, strict=strict)


def invalid_custom_fields(
    obj: dict[str, Any], schema: Mapping[str, Any], *, strict: bool
) -> list[str]:
    """Why a custom resource does not fit its CRD's openAPIV3Schema (empty: it fits).

    Unknown fields are pruned by kube-apiserver, not refused, unless `strict`; metadata is the
    API server's and is not checked against the schema.
    """
    body = {k: v for k, v in obj.items() if k != "metadata"}
    return _problems(_custom_validator(json.dumps(schema, sort_keys=True)), body, strict=strict)


@functools.cache
def _custom_validator(schema: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(schema))


def _problems(
    validator: jsonschema.protocols.Validator, obj: dict[str, Any], *, strict: bool
) -> list[str]:
    out: list[str] = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        if not strict and error.validator == "additionalProperties":
            continue
        path = ".".join(str(p) for p in error.absolute_path) or "<root>"
        out.append(f"{path}: {error.message[:200]}")
        if len(out) >= MAX_ERRORS:
            break
    return out
