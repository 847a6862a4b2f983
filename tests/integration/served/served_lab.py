"""Helpers for tests against a served twin: real kubectl on its kubeconfig, and waiting on it."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def kubectl_binary() -> str:
    """The kubectl on PATH (the test is skipped without one)."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    return found


class Kubectl:
    """Runs the real kubectl against one kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.binary = kubectl_binary()

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}{done.stdout}")
        return done


def eventually(probe: Callable[[], T | None], what: str, limit: float = 60.0) -> T:
    """Poll probe until it answers something truthy (a wait with a limit, not a timed check)."""
    deadline = time.monotonic() + limit
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {limit:.0f} s")
        time.sleep(0.2)
