"""Label and field selectors as the Kubernetes API parses them from list and watch queries."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


class SelectorError(ValueError):
    """A selector that does not parse (answered 400 BadRequest)."""


def _terms(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in selector {text!r}")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise SelectorError(f"unbalanced parentheses in selector {text!r}")
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether labels match a label selector (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`).

    Raises:
        SelectorError: The selector does not parse.
    """
    for term in _terms(selector):
        found = _SET.match(term)
        if found:
            key, op, values = found.groups()
            options = {v.strip() for v in values.split(",") if v.strip()}
            inside = key in labels and labels[key] in options
            if (op == "in") != inside:
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=", 1).split("=", 1))
            if not key:
                raise SelectorError(f"selector term {term!r} has no key")
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif " " in term:
            raise SelectorError(f"cannot parse selector term {term!r}")
        elif term not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def field_selector_matches(selector: str, obj: Mapping[str, Any]) -> bool:
    """Whether an object matches a field selector of `path=value` and `path!=value` terms
    (e.g. `metadata.name=cart`, `involvedObject.uid=...`, `status.phase!=Running`).

    Raises:
        SelectorError: A term is neither form.
    """
    for term in _terms(selector):
        negate = "!=" in term
        separator = "!=" if negate else ("==" if "==" in term else "=")
        if separator not in term:
            raise SelectorError(f"field selector term {term!r} is not path=value")
        path, value = (s.strip() for s in term.split(separator, 1))
        if (_field(obj, path) == value) == negate:
            return False
    return True
