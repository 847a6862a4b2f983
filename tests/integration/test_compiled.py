"""The compiled build (`itbench.compiled`) is the sources, faster: every catalog trial ends the
same way with the same scores on it, and the unit tests pass on it. Needs a C compiler (skipped,
saying so, without one); builds into build/compiled, where `make bench` finds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from itbench.compiled import CompileError, _c_compiler, build, module_name, running_build

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_c_compiler() is None, reason="no C compiler for the compiled build"),
]

_TRIALS = """
import json, sys
from pathlib import Path
from itbench.catalog_files import load_catalog
from itbench.compiled import compiled_modules, running_build
from itbench.execution import benchmark
from itbench.execution.plan import DEFAULT_AGENTS, plan_trials

catalog, _ = load_catalog(Path(sys.argv[1]))
plans = plan_trials("same", list(catalog), list(DEFAULT_AGENTS), trials=1, seed=42)
trials = {}
for plan in plans:
    status = benchmark.run_trial(plan, None)
    scores = status.scores.model_dump(mode="json") if status.scores is not None else None
    trials[plan.name] = [status.phase.value, status.reason, status.message, scores]
out = {"build": list(running_build()), "loaded": compiled_modules(), "trials": trials}
Path(sys.argv[2]).write_text(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled() -> Path:
    try:
        return build(ROOT / "build" / "compiled").path
    except CompileError as err:
        pytest.fail(f"the compiled build failed: {err}")


def _env(pythonpath: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def _catalog_trials(tmp_path: Path, name: str, pythonpath: Path | None) -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    subprocess.run(
        [sys.executable, "-c", _TRIALS, str(ROOT / "scenarios"), str(out)],
        cwd=tmp_path,
        env=_env(pythonpath),
        check=True,
        timeout=900,
    )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_every_catalog_trial_ends_the_same_with_the_same_scores_on_the_compiled_build(
    compiled: Path, tmp_path: Path
) -> None:
    on_build = _catalog_trials(tmp_path, "compiled", compiled)
    on_sources = _catalog_trials(tmp_path, "sources", None)
    # The run really was on compiled code, and the sources' run on none.
    assert "itbench.environments.sim.cluster" in on_build["loaded"]
    assert "itbench.environments.sim.promql.engine" in on_build["loaded"]
    assert "agents.heuristic_sre.causes" in on_build["loaded"]
    assert set(on_build["loaded"]) <= set(on_build["build"])
    assert on_sources["loaded"] == [] and on_sources["build"] == []
    assert len(on_build["trials"]) > 70
    different = sorted(
        name
        for name in on_build["trials"].keys() | on_sources["trials"].keys()
        if on_build["trials"].get(name) != on_sources["trials"].get(name)
    )
    first = {n: (on_build["trials"].get(n), on_sources["trials"].get(n)) for n in different[:3]}
    assert not different, first


_UNIT = """
import sys
import pytest
sys.path.insert(0, sys.argv[1])
import itbench.environments.sim.cluster as cluster
assert cluster.__file__.endswith(".so"), cluster.__file__
sys.exit(pytest.main(sys.argv[2:]))
"""


def test_the_unit_tests_pass_on_the_compiled_build(compiled: Path) -> None:
    # The build is imported first (the check above), and stays first on the tests' path.
    options = ["-q", "-p", "no:cacheprovider", "-o", f"pythonpath={compiled} ."]
    options += ["-o", "addopts=--strict-markers", "-m", "not e2e and not interpreted"]
    done = subprocess.run(
        [sys.executable, "-c", _UNIT, str(compiled), *options, "tests/unit"],
        cwd=ROOT,
        env=_env(None),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_a_build_is_kept_while_its_sources_are_unchanged(compiled: Path) -> None:
    again = build(compiled)
    assert not again.rebuilt
    assert "itbench.environments.sim.cluster" in again.modules
    assert module_name("itbench/environments/sim/promql/__init__.py") == (
        "itbench.environments.sim.promql"
    )
    # This process runs the sources.
    assert running_build() == ()


def test_without_a_c_compiler_the_build_says_so_and_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    target = tmp_path / "compiled"
    with pytest.raises(CompileError, match="no C compiler"):
        build(target)
    assert not target.exists()
