"""Test-suite wide settings: e2e tests run only when asked for."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("ITBENCH_E2E") == "1" or "e2e" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="needs a kind cluster: run `make e2e` (ITBENCH_E2E=1)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)
