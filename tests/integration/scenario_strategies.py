"""Hypothesis strategies for scenario files, derived from the Scenario model's JSON Schema.

`documents()` draws documents that follow the schema (types, enums, patterns, bounds, required
fields); `hostile_documents()` breaks them the ways hostile input does (non-finite numbers,
invisible characters, huge or deeply nested values, wrong types, missing or unknown fields);
`hostile_texts()` breaks the YAML text itself (aliases, nesting, duplicate keys, truncation).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from itbench.core.models import Scenario

ROOT = Path(__file__).resolve().parents[2]
CATALOG_TEXTS = [
    p.read_text(encoding="utf-8") for p in sorted((ROOT / "scenarios").glob("*/*/scenario.yaml"))
]
SCHEMA = Scenario.model_json_schema(by_alias=True)
DEFS: dict[str, Any] = SCHEMA.get("$defs", {})
MAX_DEPTH = 6

_text = st.text(max_size=24)
_name = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)


def from_schema(node: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for the JSON values one JSON-Schema node allows (a practical subset)."""
    if "$ref" in node:
        return from_schema(DEFS[node["$ref"].rsplit("/", 1)[-1]], depth)
    if "allOf" in node and len(node["allOf"]) == 1:
        return from_schema(node["allOf"][0], depth)
    if "anyOf" in node:
        return st.one_of([from_schema(o, depth) for o in node["anyOf"]])
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = node.get("minimum", node.get("exclusiveMinimum", -(2**31)))
        high = node.get("maximum", node.get("exclusiveMaximum", 2**31))
        return st.integers(low, high)
    if kind == "number":
        return st.floats(node.get("minimum", 0.001), node.get("maximum", 1e6), allow_nan=False)
    if kind == "string":
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True).filter(
                lambda s: len(s) <= node.get("maxLength", 253)
            )
        return st.text(min_size=node.get("minLength", 0), max_size=24)
    if kind == "array":
        if depth >= MAX_DEPTH:
            return st.just([])
        return st.lists(
            from_schema(node.get("items", {}), depth + 1),
            min_size=node.get("minItems", 0),
            max_size=min(node.get("maxItems", 3), 3),
        )
    if kind == "object" or "properties" in node:
        return _object(node, depth)
    return st.one_of(st.none(), st.booleans(), st.integers(), _text)


def _object(node: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = node.get("properties", {})
    required = set(node.get("required", []))
    if not properties:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and depth < MAX_DEPTH:
            return st.dictionaries(_name, from_schema(extra, depth + 1), max_size=3)
        return st.just({})
    if depth >= MAX_DEPTH:
        required_only = {k: from_schema(properties[k], depth + 1) for k in required}
        return st.fixed_dictionaries(required_only)
    return st.fixed_dictionaries(
        {k: from_schema(v, depth + 1) for k, v in properties.items() if k in required},
        optional={k: from_schema(v, depth + 1) for k, v in properties.items() if k not in required},
    )


def documents() -> st.SearchStrategy[dict[str, Any]]:
    """Scenario documents that follow the model's schema, with apiVersion and kind given."""
    return from_schema(SCHEMA).map(
        lambda d: {"apiVersion": "itbench.io/v1alpha1", "kind": "Scenario", **d}
    )


def catalog_documents() -> st.SearchStrategy[dict[str, Any]]:
    """Real, valid scenario files of the catalog, parsed."""
    return st.sampled_from(CATALOG_TEXTS).map(yaml.safe_load)


HOSTILE_VALUES: list[Any] = [
    float("inf"),
    float("-inf"),
    float("nan"),
    "x" * 100_000,
    "check\u202eout",
    "cart\u200b",
    "\x00",
    "${nobody}",
    "${",
    [[[[[[[[[[[[["deep"]]]]]]]]]]]]],
    {"unexpected": {"mapping": True}},
    None,
    -1,
    10**30,
    True,
    "",
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, sub in value.items():
            out.extend(_paths(sub, (*prefix, key)))
    elif isinstance(value, list):
        for n, sub in enumerate(value):
            out.extend(_paths(sub, (*prefix, n)))
    return out


@st.composite
def hostile_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A schema-following or real document with one to three hostile changes."""
    doc = copy.deepcopy(draw(st.one_of(documents(), catalog_documents())))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            key = draw(st.sampled_from(["extra", "x\u200by", "spec", "kind"]))
            parent[key] = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
    return doc


def _bomb(levels: int) -> str:
    lines = ["b0: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"b{n}: &b{n} [{', '.join([f'*b{n - 1}'] * 10)}]" for n in range(1, levels)]
    return "\n".join(lines)


@st.composite
def hostile_texts(draw: st.DrawFn) -> str:
    """A catalog file's YAML text broken at the text level."""
    text = draw(st.sampled_from(CATALOG_TEXTS))
    lines = text.splitlines()
    at = draw(st.integers(0, len(lines)))
    kind = draw(
        st.sampled_from(["bomb", "nest", "duplicate", "truncate", "insert", "tabs", "anchor"])
    )
    if kind == "bomb":
        return "\n".join(lines) + "\n" + _bomb(draw(st.integers(2, 9))) + "\n"
    if kind == "nest":
        depth = draw(st.integers(60, 6000))
        return "\n".join(lines) + "\nx: " + "[" * depth + "]" * depth + "\n"
    if kind == "duplicate" and lines:
        line = lines[min(at, len(lines) - 1)]
        return "\n".join([*lines[:at], line, *lines[at:]]) + "\n"
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "tabs":
        return text.replace("  ", "\t", draw(st.integers(1, 5)))
    if kind == "anchor":
        return text.replace("spec:", "spec: &s", 1).rstrip() + "\nagain: *s\n"
    noise = draw(st.text(min_size=1, max_size=40))
    return "\n".join([*lines[:at], noise, *lines[at:]]) + "\n"
