"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) decoded into the JSON
objects they stand for, for the kinds client-go's typed clients write here.

Since client-go v0.32 the typed clients send built-in kinds as protobuf with no fallback to JSON,
so `kubectl create secret|configmap|namespace|serviceaccount|role|rolebinding|token`,
`kubectl auth can-i` and Helm's release Secrets arrive in this encoding. A body is the magic
`k8s\\0` and a `runtime.Unknown` holding the kind and the object's message; the messages below
carry the field numbers of k8s.io/api's `generated.proto` (v0.32) for exactly these kinds.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf message of a kind decoded here."""


@dataclass(frozen=True)
class _Field:
    name: str
    type: str
    """`string`, `bytes`, `int`, `bool`, `time`, `raw` (JSON bytes), `map` (string values),
    `bytesmap` (bytes values, base64 in JSON) or a message name."""
    repeated: bool = False


def _fields(*entries: tuple[int, str, str] | tuple[int, str, str, bool]) -> dict[int, _Field]:
    return {e[0]: _Field(e[1], e[2], bool(e[3]) if len(e) > 3 else False) for e in entries}


_META = "ObjectMeta"
_MESSAGES: dict[str, dict[int, _Field]] = {
    "TypeMeta": _fields((1, "apiVersion", "string"), (2, "kind", "string")),
    "Unknown": _fields(
        (1, "typeMeta", "TypeMeta"),
        (2, "raw", "bytes"),
        (3, "contentEncoding", "string"),
        (4, "contentType", "string"),
    ),
    _META: _fields(
        (1, "name", "string"),
        (2, "generateName", "string"),
        (3, "namespace", "string"),
        (4, "selfLink", "string"),
        (5, "uid", "string"),
        (6, "resourceVersion", "string"),
        (7, "generation", "int"),
        (8, "creationTimestamp", "time"),
        (9, "deletionTimestamp", "time"),
        (10, "deletionGracePeriodSeconds", "int"),
        (11, "labels", "map"),
        (12, "annotations", "map"),
        (13, "ownerReferences", "OwnerReference", True),
        (14, "finalizers", "string", True),
        (17, "managedFields", "ManagedFieldsEntry", True),
    ),
    "OwnerReference": _fields(
        (1, "kind", "string"),
        (3, "name", "string"),
        (4, "uid", "string"),
        (5, "apiVersion", "string"),
        (6, "controller", "bool"),
        (7, "blockOwnerDeletion", "bool"),
    ),
    "ManagedFieldsEntry": _fields(
        (1, "manager", "string"),
        (2, "operation", "string"),
        (3, "apiVersion", "string"),
        (4, "time", "time"),
        (6, "fieldsType", "string"),
        (7, "fieldsV1", "FieldsV1"),
        (8, "subresource", "string"),
    ),
    "FieldsV1": _fields((1, "Raw", "raw")),
    "LabelSelector": _fields(
        (1, "matchLabels", "map"), (2, "matchExpressions", "SelectorRequirement", True)
    ),
    "SelectorRequirement": _fields(
        (1, "key", "string"), (2, "operator", "string"), (3, "values", "string", True)
    ),
    "Secret": _fields(
        (1, "metadata", _META),
        (2, "data", "bytesmap"),
        (3, "type", "string"),
        (4, "stringData", "map"),
        (5, "immutable", "bool"),
    ),
    "ConfigMap": _fields(
        (1, "metadata", _META),
        (2, "data", "map"),
        (3, "binaryData", "bytesmap"),
        (4, "immutable", "bool"),
    ),
    "Namespace": _fields(
        (1, "metadata", _META), (2, "spec", "NamespaceSpec"), (3, "status", "NamespaceStatus")
    ),
    "NamespaceSpec": _fields((1, "finalizers", "string", True)),
    "NamespaceStatus": _fields((1, "phase", "string")),
    "ServiceAccount": _fields(
        (1, "metadata", _META),
        (2, "secrets", "ObjectReference", True),
        (3, "imagePullSecrets", "LocalObjectReference", True),
        (4, "automountServiceAccountToken", "bool"),
    ),
    "ObjectReference": _fields(
        (1, "kind", "string"),
        (2, "namespace", "string"),
        (3, "name", "string"),
        (4, "uid", "string"),
        (5, "apiVersion", "string"),
        (6, "resourceVersion", "string"),
        (7, "fieldPath", "string"),
    ),
    "LocalObjectReference": _fields((1, "name", "string")),
    "SelfSubjectAccessReview": _fields(
        (1, "metadata", _META), (2, "spec", "SelfSubjectAccessReviewSpec")
    ),
    "SelfSubjectAccessReviewSpec": _fields(
        (1, "resourceAttributes", "ResourceAttributes"),
        (2, "nonResourceAttributes", "NonResourceAttributes"),
    ),
    "ResourceAttributes": _fields(
        (1, "namespace", "string"),
        (2, "verb", "string"),
        (3, "group", "string"),
        (4, "version", "string"),
        (5, "resource", "string"),
        (6, "subresource", "string"),
        (7, "name", "string"),
        (8, "fieldSelector", "SelectorAttributes"),
        (9, "labelSelector", "SelectorAttributes"),
    ),
    "SelectorAttributes": _fields(
        (1, "rawSelector", "string"), (2, "requirements", "SelectorRequirement", True)
    ),
    "NonResourceAttributes": _fields((1, "path", "string"), (2, "verb", "string")),
    "TokenRequest": _fields((1, "metadata", _META), (2, "spec", "TokenRequestSpec")),
    "TokenRequestSpec": _fields(
        (1, "audiences", "string", True),
        (3, "boundObjectRef", "BoundObjectReference"),
        (4, "expirationSeconds", "int"),
    ),
    "BoundObjectReference": _fields(
        (1, "kind", "string"),
        (2, "apiVersion", "string"),
        (3, "name", "string"),
        (4, "uid", "string"),
    ),
    "Role": _fields((1, "metadata", _META), (2, "rules", "PolicyRule", True)),
    "ClusterRole": _fields(
        (1, "metadata", _META),
        (2, "rules", "PolicyRule", True),
        (3, "aggregationRule", "AggregationRule"),
    ),
    "AggregationRule": _fields((1, "clusterRoleSelectors", "LabelSelector", True)),
    "PolicyRule": _fields(
        (1, "verbs", "string", True),
        (2, "apiGroups", "string", True),
        (3, "resources", "string", True),
        (4, "resourceNames", "string", True),
        (5, "nonResourceURLs", "string", True),
    ),
    "RoleBinding": _fields(
        (1, "metadata", _META), (2, "subjects", "Subject", True), (3, "roleRef", "RoleRef")
    ),
    "ClusterRoleBinding": _fields(
        (1, "metadata", _META), (2, "subjects", "Subject", True), (3, "roleRef", "RoleRef")
    ),
    "Subject": _fields(
        (1, "kind", "string"),
        (2, "apiGroup", "string"),
        (3, "name", "string"),
        (4, "namespace", "string"),
    ),
    "RoleRef": _fields((1, "apiGroup", "string"), (2, "kind", "string"), (3, "name", "string")),
}

KINDS: Mapping[tuple[str, str], str] = {
    ("v1", "Secret"): "Secret",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
}
"""The (apiVersion, kind) pairs whose protobuf bodies are decoded, and their messages."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _wire(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one message: ints for varint and fixed fields, bytes
    for length-delimited ones."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif kind == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            out.append((number, data[at : at + size]))
            at += size
        elif kind in (1, 5):
            width = 8 if kind == 1 else 4
            out.append((number, int.from_bytes(data[at : at + width], "little")))
            at += width
        else:
            raise ProtobufError(f"unsupported wire type {kind}")
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _time(data: bytes) -> str | None:
    parts = dict(_wire(data))
    seconds = _signed(int(parts.get(1, 0) or 0))
    if not parts:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _map_entry(data: bytes, *, binary: bool) -> tuple[str, str]:
    key, value = b"", b""
    for number, raw in _wire(data):
        if isinstance(raw, bytes):
            if number == 1:
                key = raw
            elif number == 2:
                value = raw
    text = base64.b64encode(value).decode() if binary else value.decode()
    return key.decode(), text


def _scalar(field: _Field, raw: int | bytes) -> Any:
    if field.type == "int":
        if not isinstance(raw, int):
            raise ProtobufError(f"{field.name}: expected a number")
        return _signed(raw)
    if field.type == "bool":
        return bool(raw)
    if not isinstance(raw, bytes):
        raise ProtobufError(f"{field.name}: expected bytes")
    if field.type == "string":
        return raw.decode()
    if field.type == "bytes":
        return base64.b64encode(raw).decode()
    if field.type == "time":
        return _time(raw)
    if field.type == "raw":
        return json.loads(raw) if raw else None
    return decode_message(field.type, raw)


def decode_message(message: str, data: bytes) -> Json:
    """One message as the JSON object Kubernetes writes for it (empty scalars left out, as the
    API types' `omitempty` does)."""
    fields = _MESSAGES[message]
    out: Json = {}
    for number, raw in _wire(data):
        field = fields.get(number)
        if field is None:
            continue  # a field this table does not carry (a newer client's)
        if field.type in ("map", "bytesmap"):
            if not isinstance(raw, bytes):
                raise ProtobufError(f"{field.name}: expected a map entry")
            key, value = _map_entry(raw, binary=field.type == "bytesmap")
            out.setdefault(field.name, {})[key] = value
            continue
        value = _scalar(field, raw)
        if field.repeated:
            out.setdefault(field.name, []).append(value)
        elif value in ("", 0, None) and field.type != "bool":
            continue
        else:
            out[field.name] = value
    return out


def decode(body: bytes) -> Json:
    """A protobuf request body as the JSON object it encodes (apiVersion and kind included).

    Raises:
        ProtobufError: Not a Kubernetes protobuf body, or of a kind not decoded here (the
            message names it, and that JSON bodies work for every kind).
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("a protobuf body starts with the magic k8s\\0")
    envelope = decode_message("Unknown", body[len(MAGIC) :])
    meta = envelope.get("typeMeta") or {}
    api_version, kind = str(meta.get("apiVersion", "")), str(meta.get("kind", ""))
    message = KINDS.get((api_version, kind))
    if message is None:
        raise ProtobufError(
            f"protobuf bodies of {api_version} {kind} are not decoded by this server; send it as "
            "JSON (kubectl apply -f, or a client with contentType application/json)"
        )
    raw = base64.b64decode(envelope.get("raw") or "")
    return {"apiVersion": api_version, "kind": kind, **decode_message(message, raw)}
