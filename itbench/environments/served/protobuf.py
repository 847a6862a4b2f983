"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) decoded into the JSON
objects they stand for, for the kinds client-go's typed clients write here.

Since client-go v0.32 the typed clients send built-in kinds as protobuf with no fallback to JSON,
so `kubectl create secret|configmap|namespace|serviceaccount|role|rolebinding|token|deployment`,
`kubectl auth can-i` and Helm's release Secrets arrive in this encoding. A body is the magic
`k8s\\0` and a `runtime.Unknown` holding the kind and the object's message; the messages below
carry the field numbers of k8s.io/api's `generated.proto` (v0.32) for these kinds, and for the
workloads as far as `kubectl create deployment|job|cronjob|service` fill them. A field set that
the table does not carry makes the body refused (415), never silently dropped.
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
    `bytesmap` (bytes values, base64 in JSON), `quantities` (a map of resource quantities),
    `intorstring`, `skip` (read and dropped: a status the server sets itself) or a message
    name."""
    repeated: bool = False
    pointer: bool = False
    """A Go pointer field: written only when set, so a zero value is kept (`replicas: 0`)."""


REPEATED, POINTER = "repeated", "pointer"


def _fields(*entries: tuple[int, str, str] | tuple[int, str, str, str]) -> dict[int, _Field]:
    out = {}
    for entry in entries:
        flag = entry[3] if len(entry) > 3 else ""
        out[entry[0]] = _Field(
            entry[1], entry[2], repeated=flag == REPEATED, pointer=flag == POINTER
        )
    return out


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
        (10, "deletionGracePeriodSeconds", "int", POINTER),
        (11, "labels", "map"),
        (12, "annotations", "map"),
        (13, "ownerReferences", "OwnerReference", REPEATED),
        (14, "finalizers", "string", REPEATED),
        (17, "managedFields", "ManagedFieldsEntry", REPEATED),
    ),
    "OwnerReference": _fields(
        (1, "kind", "string"),
        (3, "name", "string"),
        (4, "uid", "string"),
        (5, "apiVersion", "string"),
        (6, "controller", "bool", POINTER),
        (7, "blockOwnerDeletion", "bool", POINTER),
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
        (1, "matchLabels", "map"), (2, "matchExpressions", "SelectorRequirement", REPEATED)
    ),
    "SelectorRequirement": _fields(
        (1, "key", "string"), (2, "operator", "string"), (3, "values", "string", REPEATED)
    ),
    "Secret": _fields(
        (1, "metadata", _META),
        (2, "data", "bytesmap"),
        (3, "type", "string"),
        (4, "stringData", "map"),
        (5, "immutable", "bool", POINTER),
    ),
    "ConfigMap": _fields(
        (1, "metadata", _META),
        (2, "data", "map"),
        (3, "binaryData", "bytesmap"),
        (4, "immutable", "bool", POINTER),
    ),
    "Namespace": _fields(
        (1, "metadata", _META), (2, "spec", "NamespaceSpec"), (3, "status", "NamespaceStatus")
    ),
    "NamespaceSpec": _fields((1, "finalizers", "string", REPEATED)),
    "NamespaceStatus": _fields((1, "phase", "string")),
    "ServiceAccount": _fields(
        (1, "metadata", _META),
        (2, "secrets", "ObjectReference", REPEATED),
        (3, "imagePullSecrets", "LocalObjectReference", REPEATED),
        (4, "automountServiceAccountToken", "bool", POINTER),
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
        (1, "metadata", _META), (2, "spec", "SelfSubjectAccessReviewSpec"), (3, "status", "skip")
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
        (1, "rawSelector", "string"), (2, "requirements", "SelectorRequirement", REPEATED)
    ),
    "NonResourceAttributes": _fields((1, "path", "string"), (2, "verb", "string")),
    "TokenRequest": _fields(
        (1, "metadata", _META), (2, "spec", "TokenRequestSpec"), (3, "status", "skip")
    ),
    "TokenRequestSpec": _fields(
        (1, "audiences", "string", REPEATED),
        (3, "boundObjectRef", "BoundObjectReference"),
        (4, "expirationSeconds", "int", POINTER),
    ),
    "BoundObjectReference": _fields(
        (1, "kind", "string"),
        (2, "apiVersion", "string"),
        (3, "name", "string"),
        (4, "uid", "string"),
    ),
    "Role": _fields((1, "metadata", _META), (2, "rules", "PolicyRule", REPEATED)),
    "ClusterRole": _fields(
        (1, "metadata", _META),
        (2, "rules", "PolicyRule", REPEATED),
        (3, "aggregationRule", "AggregationRule"),
    ),
    "AggregationRule": _fields((1, "clusterRoleSelectors", "LabelSelector", REPEATED)),
    "PolicyRule": _fields(
        (1, "verbs", "string", REPEATED),
        (2, "apiGroups", "string", REPEATED),
        (3, "resources", "string", REPEATED),
        (4, "resourceNames", "string", REPEATED),
        (5, "nonResourceURLs", "string", REPEATED),
    ),
    "RoleBinding": _fields(
        (1, "metadata", _META), (2, "subjects", "Subject", REPEATED), (3, "roleRef", "RoleRef")
    ),
    "ClusterRoleBinding": _fields(
        (1, "metadata", _META), (2, "subjects", "Subject", REPEATED), (3, "roleRef", "RoleRef")
    ),
    "Subject": _fields(
        (1, "kind", "string"),
        (2, "apiGroup", "string"),
        (3, "name", "string"),
        (4, "namespace", "string"),
    ),
    "RoleRef": _fields((1, "apiGroup", "string"), (2, "kind", "string"), (3, "name", "string")),
    # Workloads, as far as `kubectl create deployment|job|cronjob|service` fill them; any other
    # field set makes the body refused rather than dropped.
    "Deployment": _fields(
        (1, "metadata", _META), (2, "spec", "DeploymentSpec"), (3, "status", "skip")
    ),
    "DeploymentSpec": _fields(
        (1, "replicas", "int", POINTER),
        (2, "selector", "LabelSelector"),
        (3, "template", "PodTemplateSpec"),
        (4, "strategy", "DeploymentStrategy"),
        (5, "minReadySeconds", "int"),
        (6, "revisionHistoryLimit", "int", POINTER),
        (9, "progressDeadlineSeconds", "int", POINTER),
    ),
    "DeploymentStrategy": _fields((1, "type", "string")),
    "Job": _fields((1, "metadata", _META), (2, "spec", "JobSpec"), (3, "status", "skip")),
    "JobSpec": _fields(
        (1, "parallelism", "int", POINTER),
        (2, "completions", "int", POINTER),
        (3, "activeDeadlineSeconds", "int", POINTER),
        (4, "selector", "LabelSelector"),
        (6, "template", "PodTemplateSpec"),
        (7, "backoffLimit", "int", POINTER),
        (8, "ttlSecondsAfterFinished", "int", POINTER),
    ),
    "CronJob": _fields((1, "metadata", _META), (2, "spec", "CronJobSpec"), (3, "status", "skip")),
    "CronJobSpec": _fields(
        (1, "schedule", "string"),
        (2, "startingDeadlineSeconds", "int", POINTER),
        (3, "concurrencyPolicy", "string"),
        (5, "jobTemplate", "JobTemplateSpec"),
        (6, "successfulJobsHistoryLimit", "int", POINTER),
        (7, "failedJobsHistoryLimit", "int", POINTER),
        (8, "timeZone", "string", POINTER),
    ),
    "JobTemplateSpec": _fields((1, "metadata", _META), (2, "spec", "JobSpec")),
    "PodTemplateSpec": _fields((1, "metadata", _META), (2, "spec", "PodSpec")),
    "PodSpec": _fields(
        (2, "containers", "Container", REPEATED),
        (3, "restartPolicy", "string"),
        (4, "terminationGracePeriodSeconds", "int", POINTER),
        (6, "dnsPolicy", "string"),
        (7, "nodeSelector", "map"),
        (8, "serviceAccountName", "string"),
        (15, "imagePullSecrets", "LocalObjectReference", REPEATED),
        (19, "schedulerName", "string"),
        (20, "initContainers", "Container", REPEATED),
        (21, "automountServiceAccountToken", "bool", POINTER),
        (24, "priorityClassName", "string"),
    ),
    "Container": _fields(
        (1, "name", "string"),
        (2, "image", "string"),
        (3, "command", "string", REPEATED),
        (4, "args", "string", REPEATED),
        (5, "workingDir", "string"),
        (6, "ports", "ContainerPort", REPEATED),
        (7, "env", "EnvVar", REPEATED),
        (8, "resources", "ResourceRequirements"),
        (13, "terminationMessagePath", "string"),
        (14, "imagePullPolicy", "string"),
        (20, "terminationMessagePolicy", "string"),
    ),
    "ContainerPort": _fields(
        (1, "name", "string"),
        (2, "hostPort", "int"),
        (3, "containerPort", "int"),
        (4, "protocol", "string"),
        (5, "hostIP", "string"),
    ),
    "EnvVar": _fields((1, "name", "string"), (2, "value", "string")),
    "ResourceRequirements": _fields((1, "limits", "quantities"), (2, "requests", "quantities")),
    "Service": _fields((1, "metadata", _META), (2, "spec", "ServiceSpec"), (3, "status", "skip")),
    "ServiceSpec": _fields(
        (1, "ports", "ServicePort", REPEATED),
        (2, "selector", "map"),
        (3, "clusterIP", "string"),
        (4, "type", "string"),
        (5, "externalIPs", "string", REPEATED),
        (7, "sessionAffinity", "string"),
        (10, "externalName", "string"),
        (18, "clusterIPs", "string", REPEATED),
    ),
    "ServicePort": _fields(
        (1, "name", "string"),
        (2, "protocol", "string"),
        (3, "port", "int"),
        (4, "targetPort", "intorstring"),
        (5, "nodePort", "int"),
    ),
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
    ("apps/v1", "Deployment"): "Deployment",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("v1", "Service"): "Service",
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


def _entry(data: bytes) -> tuple[str, bytes]:
    key, value = b"", b""
    for number, raw in _wire(data):
        if isinstance(raw, bytes):
            if number == 1:
                key = raw
            elif number == 2:
                value = raw
    return key.decode(), value


def _int_or_string(data: bytes) -> int | str:
    parts = dict(_wire(data))
    if parts.get(1, 0) == 1:
        text = parts.get(3, b"")
        return text.decode() if isinstance(text, bytes) else str(text)
    value = parts.get(2, 0)
    return _signed(value) if isinstance(value, int) else 0


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
    if field.type == "intorstring":
        return _int_or_string(raw)
    return decode_message(field.type, raw)


_MAPS = {"map", "bytesmap", "quantities"}


def _zero(raw: int | bytes) -> bool:
    """Whether a value is a zero Go writes for a field left unset (0, empty, or a message of
    zeros: Go's encoder writes every non-pointer field)."""
    if isinstance(raw, int):
        return raw == 0
    if not raw:
        return True
    try:
        return all(_zero(value) for _, value in _wire(raw))
    except ProtobufError:
        return False


def _map_value(field: _Field, raw: bytes) -> str:
    if field.type == "bytesmap":
        return base64.b64encode(raw).decode()
    if field.type == "quantities":
        text = dict(_wire(raw)).get(1, b"")
        return text.decode() if isinstance(text, bytes) else str(text)
    return raw.decode()


def decode_message(message: str, data: bytes) -> Json:
    """One message as the JSON object Kubernetes writes for it: empty values of plain fields
    left out (as the API types' `omitempty` does), those of pointer fields kept.

    Raises:
        ProtobufError: A field this table does not carry has a value (refused, not dropped).
    """
    fields = _MESSAGES[message]
    out: Json = {}
    for number, raw in _wire(data):
        field = fields.get(number)
        if field is None:
            if _zero(raw):
                continue  # a zero value Go's encoder writes for a field left unset
            raise ProtobufError(
                f"field {number} of {message} is not decoded by this server; send the object "
                "as JSON (kubectl apply -f, or a client with contentType application/json)"
            )
        if field.type == "skip":
            continue
        if field.type in _MAPS:
            if not isinstance(raw, bytes):
                raise ProtobufError(f"{field.name}: expected a map entry")
            key, value = _entry(raw)
            out.setdefault(field.name, {})[key] = _map_value(field, value)
            continue
        value = _scalar(field, raw)
        if field.repeated:
            out.setdefault(field.name, []).append(value)
        elif field.pointer or (value not in ("", 0, None) and value is not False):
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
