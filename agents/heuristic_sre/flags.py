"""Feature flags as flagd serves them: targeting evaluated, and what each flag is about.

A flag counts as switched on only when flagd serves one of its non-off variants to someone: a
rollout held at 0 % (`fractional: [[on, 0], [off, 100]]`) serves `off` whatever its default.
"""

from __future__ import annotations

import re
from typing import Any


def off_variant(spec: dict[str, Any]) -> str | None:
    """The variant of a flag that switches its behaviour off (false or zero)."""
    variants = spec.get("variants") or {}
    if "off" in variants:
        return "off"
    for name, value in variants.items():
        if value is False or value == 0:
            return str(name)
    return None


def served_variants(spec: dict[str, Any]) -> set[str]:
    """The variants flagd serves for a flag: the default, unless a `fractional` targeting rule
    splits the traffic (then every bucket with a share above zero). A disabled flag serves
    nothing."""
    if spec.get("state", "ENABLED") != "ENABLED":
        return set()
    default = str(spec.get("defaultVariant", ""))
    targeting = spec.get("targeting")
    if not isinstance(targeting, dict) or "fractional" not in targeting:
        return {default}
    shares = [
        b
        for b in targeting.get("fractional") or []
        if isinstance(b, list) and len(b) == 2 and isinstance(b[1], int | float)
    ]
    served = {str(b[0]) for b in shares if float(b[1]) > 0}
    return served or {default}


def flag_is_on(spec: dict[str, Any]) -> bool:
    """Whether flagd serves a variant other than the flag's off variant to anyone."""
    off = off_variant(spec)
    return off is not None and bool(served_variants(spec) - {off})


_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _tokens(text: str) -> set[str]:
    words = {w.lower() for w in _WORD.findall(text)}
    return words | {w[:-1] for w in words if w.endswith("s") and len(w) > 3}


def flag_concerns(key: str, spec: dict[str, Any], services: list[str]) -> set[str]:
    """The services a flag is about, read from its key and description: every service whose
    whole name appears in them, or whose first word starts the key when no other service
    shares that word (`imageSlowLoad` is about `image-provider`)."""
    words = _tokens(key) | _tokens(str(spec.get("description", "")))
    out = {s for s in services if all(part in words for part in s.split("-"))}
    lead = _WORD.findall(key)[:1]
    for s in services:
        first = s.split("-", 1)[0]
        shared = sum(1 for o in services if o.split("-", 1)[0] == first)
        if lead and lead[0].lower() == first and shared == 1:
            out.add(s)
    return out
