"""The Chaos Mesh CRDs of the pinned chart, for tests that need Chaos Mesh's kinds served (their
schemas from the upstream snapshot, itbench/stack/upstream)."""

from __future__ import annotations

from typing import Any

from itbench.stack import snapshot


def _without_own_keys(schema: Any) -> Any:
    # The snapshot marks schemas it abbreviated with x-itbench-* keys, which no API server knows.
    if isinstance(schema, dict):
        return {k: _without_own_keys(v) for k, v in schema.items() if not k.startswith("x-itbench")}
    if isinstance(schema, list):
        return [_without_own_keys(v) for v in schema]
    return schema


def chaos_crds() -> list[dict[str, Any]]:
    """The Chaos Mesh CRDs of the pinned chart, as kube-apiserver accepts them."""
    out = []
    for kind, facts in snapshot("chaos-mesh.yaml")["kinds"].items():
        out.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{facts['plural']}.{facts['group']}"},
                "spec": {
                    "group": facts["group"],
                    "scope": facts["scope"],
                    "names": {"plural": facts["plural"], "kind": kind},
                    "versions": [
                        {
                            "name": facts["version"],
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": _without_own_keys(facts["schema"])},
                            "subresources": {"status": {}},
                        }
                    ],
                },
            }
        )
    return out
