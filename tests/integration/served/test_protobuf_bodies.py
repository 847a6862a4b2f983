"""Protobuf request bodies sent by hand to the served API: what kube-apiserver would store is
stored, and a set field the twin does not decode is refused (415), never silently dropped."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from itbench.environments.served.server import ServedCluster

NS = "otel-demo"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _body(api_version: str, kind: str, message: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, message)


def _post(served: ServedCluster, path: str, body: bytes) -> tuple[int, Any]:
    assert served.certificates is not None
    context = ssl.create_default_context(cadata=served.certificates.ca_pem.decode())
    request = urllib.request.Request(
        served.api_url + path,
        data=body,
        method="POST",
        headers={
            "Authorization": f"Bearer {served.admin_token}",
            "Content-Type": PROTOBUF,
            "Accept": f"{PROTOBUF}, application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _meta(name: str) -> bytes:
    # name, labels {tier: web}, and the zero fields Go's encoder writes for unset ones
    label = _field(1, b"tier") + _field(2, b"web")
    return _field(1, name.encode()) + _field(2, b"") + _field(7, 0) + _field(11, label)


def test_a_configmap_in_protobuf_is_stored_as_its_json(served: ServedCluster) -> None:
    entry = _field(1, b"mode") + _field(2, b"fast")
    message = _field(1, _meta("from-protobuf")) + _field(2, entry)
    status, body = _post(
        served, f"/api/v1/namespaces/{NS}/configmaps", _body("v1", "ConfigMap", message)
    )
    assert status == 201, body
    assert body["data"] == {"mode": "fast"}
    assert body["metadata"]["labels"] == {"tier": "web"}
    assert "generation" not in body["metadata"] and "generateName" not in body["metadata"]


def test_a_set_field_the_twin_does_not_decode_is_refused_not_dropped(
    served: ServedCluster,
) -> None:
    message = _field(1, _meta("unknown-field")) + _field(9, b"surprise")
    status, body = _post(
        served, f"/api/v1/namespaces/{NS}/configmaps", _body("v1", "ConfigMap", message)
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert "field 9 of ConfigMap is not decoded" in body["message"]
    configmaps = served.store.types.get("", "configmaps")
    assert configmaps is not None
    with served.store.lock:
        assert served.store.find(configmaps, NS, "unknown-field") is None


def test_a_kind_the_twin_does_not_decode_is_refused_with_its_name(served: ServedCluster) -> None:
    message = _field(1, _meta("guard"))
    status, body = _post(
        served,
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
        _body("policy/v1", "PodDisruptionBudget", message),
    )
    assert status == 415
    assert body["message"].startswith("protobuf bodies of policy/v1 PodDisruptionBudget")


def test_a_pointer_field_keeps_its_zero(served: ServedCluster) -> None:
    labels = _field(1, _field(1, b"app") + _field(2, b"zero"))
    container = _field(1, b"web") + _field(2, b"ghcr.io/open-telemetry/demo:2.2.0-cart")
    template = _field(1, _field(11, _field(1, b"app") + _field(2, b"zero"))) + _field(
        2, _field(2, container)
    )
    spec = _field(1, 0) + _field(2, labels) + _field(3, template)
    message = _field(1, _meta("zero")) + _field(2, spec) + _field(3, _field(1, 0))
    status, body = _post(
        served,
        f"/apis/apps/v1/namespaces/{NS}/deployments",
        _body("apps/v1", "Deployment", message),
    )
    assert status == 201, body
    assert body["spec"]["replicas"] == 0
    assert body["spec"]["selector"] == {"matchLabels": {"app": "zero"}}
