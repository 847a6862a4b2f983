"""Hypothesis strategies for custom-resource bodies, derived from the API models.

`valid_spec` draws from the structural schema `make generate` writes into the CRDs (itself made
from the pydantic models), so its bodies are what a schema-checking API server would accept;
`hostile_spec` takes such a body and breaks it at one place, the way a server that skips the
schema (or a CRD installed without one) lets it through.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from itbench.core.crds import structural_schema

Json = dict[str, Any]

_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)
    | st.sampled_from("\u200b\u202e\x00\n"),
    max_size=12,
)
_LIST_MAX = 3


def spec_schema(model: type[BaseModel]) -> Json:
    """The CRD schema of a kind's spec."""
    schema: Json = structural_schema(model)["properties"]["spec"]
    return schema


def from_schema(node: Json, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that a structural schema node accepts (bounded in size)."""
    if node.get("x-kubernetes-int-or-string"):
        return st.integers(0, 10_000) | _TEXT
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if kind == "object":
        props: Json = node.get("properties", {})
        if not props:
            extra = node.get("additionalProperties")
            values = from_schema(extra, depth + 1) if isinstance(extra, dict) else _TEXT
            return st.dictionaries(_TEXT.filter(bool), values, max_size=_LIST_MAX)
        required = set(node.get("required", []))
        return st.fixed_dictionaries(
            {k: from_schema(v, depth + 1) for k, v in props.items() if k in required},
            optional={
                k: from_schema(v, depth + 1)
                for k, v in props.items()
                if k not in required and depth < 4
            },
        )
    if kind == "array":
        low = int(node.get("minItems", 0))
        high = min(int(node.get("maxItems", _LIST_MAX)), max(low, _LIST_MAX))
        return st.lists(from_schema(node["items"], depth + 1), min_size=low, max_size=high)
    if kind == "string":
        low = int(node.get("minLength", 0))
        high = min(int(node.get("maxLength", 40)), 40)
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True).filter(
                lambda s: low <= len(s) <= int(node.get("maxLength", 10**6))
            )
        return st.text(
            alphabet=st.characters(min_codepoint=0x61, max_codepoint=0x7A),
            min_size=low,
            max_size=high,
        )
    if kind == "integer":
        return st.integers(int(node.get("minimum", -1000)), int(node.get("maximum", 10**6)))
    if kind == "number":
        return st.floats(node.get("minimum", -1e6), node.get("maximum", 1e6), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    raise ValueError(f"no strategy for schema node {node}")


def valid_spec(model: type[BaseModel]) -> st.SearchStrategy[Json]:
    """Specs a schema-checking API server would store for the kind."""
    return from_schema(spec_schema(model))  # type: ignore[return-value]


_WRONG = st.sampled_from(
    [
        "x" * 200_000,
        -(10**30),
        1e308,
        [],
        [1, [2, [3]]],
        {"unexpected": {"deeply": {"nested": [None]}}},
        None,
        True,
        "Zero\u200bWidth\u202eName",
        "\x00",
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, sub in value.items():
            found += _paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            found += _paths(sub, (*prefix, index))
    return found


@st.composite
def hostile_spec(draw: st.DrawFn, model: type[BaseModel]) -> tuple[Any, str]:
    """A valid spec broken at one place; returns (spec, what was done) for messages."""
    spec = draw(valid_spec(model))
    how = draw(st.sampled_from(["replace", "unknown-key", "whole"]))
    if how == "whole":
        return draw(st.sampled_from(["a string spec", 42, ["a", "list"], None])), "whole spec"
    paths = _paths(spec)
    target = draw(st.sampled_from(paths))
    broken = copy.deepcopy(spec)
    if how == "unknown-key" or not target:
        node = broken
        for part in target:
            node = node[part]
        if isinstance(node, dict):
            node["x" * draw(st.sampled_from([3, 300]))] = draw(_WRONG)
            return broken, f"unknown key under {target}"
        how = "replace"
    value = draw(_WRONG)
    if not target:
        return value, "whole spec"
    node = broken
    for part in target[:-1]:
        node = node[part]
    node[target[-1]] = value
    return broken, f"{target} = {type(value).__name__}"
