"""The served API's patch types: JSON patch, merge patch and strategic merge patch."""

from __future__ import annotations

import pytest

from itbench.environments.served.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    PatchError,
    apply_patch,
    json_patch,
)

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "cart"},
    "spec": {
        "ports": [
            {"name": "rpc", "port": 8013, "targetPort": 8013},
            {"name": "ofrep", "port": 8016, "targetPort": 8016},
        ]
    },
}


def test_json_patch_adds_replaces_removes_moves_and_copies() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "replace", "path": "/c", "value": "y"},
            {"op": "copy", "from": "/c", "path": "/d"},
            {"op": "move", "from": "/d", "path": "/e~1f"},
            {"op": "remove", "path": "/a/b/1"},
            {"op": "test", "path": "/e~1f", "value": "y"},
        ],
    )
    assert out == {"a": {"b": [0, 2, 3]}, "c": "y", "e/f": "y"}
    assert doc == {"a": {"b": [1, 2]}, "c": "x"}, "the stored object is untouched"


@pytest.mark.parametrize(
    ("ops", "code", "words"),
    [
        ([{"op": "test", "path": "/c", "value": "z"}], 422, "test failed at /c"),
        ([{"op": "remove", "path": "/nope"}], 422, "missing path: /nope"),
        ([{"op": "replace", "path": "/a/b/9", "value": 1}], 422, "missing path: /a/b/9"),
        ([{"op": "frobnicate", "path": "/c"}], 400, "unsupported"),
        ({"op": "add"}, 400, "list of operations"),
        ([{"op": "add", "path": "c", "value": 1}], 422, "does not start with /"),
    ],
)
def test_a_json_patch_that_does_not_apply_is_refused(ops: object, code: int, words: str) -> None:
    with pytest.raises(PatchError, match=words) as caught:
        json_patch({"a": {"b": [1]}, "c": "x"}, ops)
    assert caught.value.code == code


def test_a_strategic_patch_merges_service_ports_by_port_and_a_merge_patch_replaces_lists() -> None:
    body = {"spec": {"ports": [{"port": 8013, "targetPort": 9999}]}}
    strategic = apply_patch(SERVICE, body, STRATEGIC_PATCH, builtin=True)
    assert [(p["name"], p["targetPort"]) for p in strategic["spec"]["ports"]] == [
        ("rpc", 9999),
        ("ofrep", 8016),
    ]
    merged = apply_patch(SERVICE, body, MERGE_PATCH, builtin=True)
    assert merged["spec"]["ports"] == [{"port": 8013, "targetPort": 9999}]


def test_a_strategic_patch_without_the_merge_key_is_refused() -> None:
    body = {"spec": {"ports": [{"name": "rpc", "targetPort": 9999}]}}
    with pytest.raises(PatchError, match="merge key"):
        apply_patch(SERVICE, body, STRATEGIC_PATCH, builtin=True)


def test_custom_resources_take_no_strategic_patch_and_server_side_apply_merges() -> None:
    with pytest.raises(PatchError) as strategic:
        apply_patch({"spec": {}}, {"spec": {"a": 1}}, STRATEGIC_PATCH, builtin=False)
    assert strategic.value.code == 415
    applied = apply_patch(
        {"spec": {"a": 1, "b": 2}},
        {"spec": {"a": 3}},
        "application/apply-patch+yaml",
        builtin=False,
    )
    assert applied == {"spec": {"a": 3, "b": 2}}  # no field ownership: b stays
    with pytest.raises(PatchError, match="merge patch is a JSON object"):
        apply_patch({"spec": {}}, [1], MERGE_PATCH, builtin=True)
    assert apply_patch({"a": 1}, [{"op": "remove", "path": "/a"}], JSON_PATCH, builtin=True) == {}
