"""The operator's process caps glibc's malloc arenas (see `itbench.operator.app.MALLOC_ARENAS`)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from itbench.operator.app import MALLOC_ARENAS, limit_malloc_arenas


class _Libc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


def test_the_arena_cap_is_set_through_mallopt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    libc = _Libc()
    assert limit_malloc_arenas(libc) is True
    assert libc.calls == [(-8, MALLOC_ARENAS)]  # M_ARENA_MAX
    assert limit_malloc_arenas(_Libc(answer=0)) is False  # mallopt refused it


def test_a_cap_the_environment_sets_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    libc = _Libc()
    assert limit_malloc_arenas(libc) is False
    assert libc.calls == []


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas(object()) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_the_cap() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from itbench.operator.app import limit_malloc_arenas; print(limit_malloc_arenas())",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout.strip() == "True"
