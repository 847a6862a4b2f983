"""The pinned stack as package data: versions (`pins.yaml`), the stack's chart values, its own
manifests, and the upstream snapshot the twin is built from and checked against.

`pins.yaml` is the one place a version is named. The twin reads the rendered chart from the
snapshot (`upstream/<chart>-<version>/chart.yaml`); the playbooks read the pins through
`playbook_vars()`; `docs/stack.md` is checked against them.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it (the snapshot is 2 MB of YAML read by every
process), else PyYAML's own."""

STACK_DIR = Path(__file__).parent
"""This directory: pins.yaml, values/, manifests/, upstream/."""

DEMO_CHART = "opentelemetry-demo"


@lru_cache(maxsize=1)
def _pins() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((STACK_DIR / "pins.yaml").read_text(encoding="utf-8"))
    return data


def pins() -> dict[str, Any]:
    """The pinned stack (a copy of pins.yaml)."""
    return copy.deepcopy(_pins())


def chart_pin(chart: str) -> dict[str, Any]:
    """One chart's pin (repository, version, release, namespace, values file)."""
    return copy.deepcopy(_pins()["charts"][chart])


def demo_version() -> str:
    """The pinned demo application version (the chart's appVersion)."""
    return str(_pins()["charts"][DEMO_CHART]["appVersion"])


def release() -> dict[str, str]:
    """The demo's Helm release: name and namespace."""
    return {k: str(v) for k, v in _pins()["release"].items()}


def snapshot_dir() -> Path:
    """The upstream snapshot of the pinned demo chart."""
    return STACK_DIR / "upstream" / f"{DEMO_CHART}-{_pins()['charts'][DEMO_CHART]['version']}"


@lru_cache(maxsize=16)
def _snapshot(name: str) -> Any:
    path = snapshot_dir() / name
    text = path.read_text(encoding="utf-8")
    if name == "chart.yaml":
        return [d for d in yaml.load_all(text, Loader=_LOADER) if d]
    return yaml.load(text, Loader=_LOADER)


def snapshot(name: str) -> Any:
    """A file of the snapshot, parsed (chart.yaml: the list of rendered objects); a copy."""
    return copy.deepcopy(_snapshot(name))


def chart_objects() -> list[dict[str, Any]]:
    """The objects the pinned chart renders with the stack values (a fresh copy)."""
    objects: list[dict[str, Any]] = snapshot("chart.yaml")
    return objects


@lru_cache(maxsize=4)
def _manifests(name: str) -> list[dict[str, Any]]:
    text = (STACK_DIR / "manifests" / name).read_text(encoding="utf-8")
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d]


def stack_manifests(name: str) -> list[dict[str, Any]]:
    """Objects the stack applies beside the chart (`manifests/<name>`), a fresh copy."""
    return copy.deepcopy(_manifests(name))


def playbook_vars() -> dict[str, Any]:
    """The pins as the playbooks' extra variable `stack`."""
    return {"stack": pins()}
