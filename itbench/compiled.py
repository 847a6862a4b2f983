"""The compiled build: the embedded twin's hot modules, the same sources compiled to C
extensions with mypyc, in a copy of the packages that a run puts first on PYTHONPATH.

`python -m itbench.compiled build/compiled` builds it (`make compiled`; `make bench` uses it);
`PYTHONPATH=build/compiled itbench run ...` runs on it. Results are the same as from the
sources: `tests/integration/test_compiled.py` runs the catalog both ways and compares every
score.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The project root: the packages copied into a build live here."""

PACKAGES = ("itbench", "agents")
"""The top-level packages a build copies: everything a run imports from this project."""

COMPILED = (
    "itbench/environments/sim/*.py",
    "itbench/environments/sim/promql/*.py",
    "itbench/environments/sim/telemetry/*.py",
    "itbench/core/runner/evaluation.py",
    "itbench/core/runner/machine.py",
    "itbench/core/alert_rules.py",
    "itbench/core/decoys.py",
    "itbench/core/inventory.py",
    "itbench/core/matching.py",
    "itbench/core/scoring/collateral.py",
    "itbench/core/shop.py",
    "itbench/core/topology.py",
    "itbench/execution/executor.py",
    "itbench/gateway/kubectl.py",
    "itbench/gateway/sessions.py",
    "itbench/gateway/operations/*.py",
    "agents/routines.py",
    "agents/heuristic_sre/*.py",
    "agents/heuristic_finops/*.py",
)
"""What is compiled, as patterns relative to the root: the twin, its PromQL engine and
telemetry, the trial machine's evaluation and grading of the environment, the executor, the
gateway's operations and the heuristic baselines, which together hold nearly all of an
embedded trial's time. (A module that defines an exception over a built-in exception type
other than Exception cannot be compiled: such exceptions live in interpreted modules, as the
gateway's do in `itbench.gateway.errors`.)"""

INTERPRETED = frozenset(
    {
        # Pydantic models: mypyc compiles classes to native classes, and a model's fields are
        # descriptors only pydantic's metaclass understands.
        "itbench/core/runner/actions.py",
        "itbench/gateway/operations/payloads.py",
        "itbench/gateway/operations/protocol.py",
        "itbench/gateway/operations/submit.py",
        "itbench/environments/sim/selftest.py",
        # A runtime-checkable Protocol: mypyc compiles it to a class `isinstance` refuses.
        "itbench/gateway/operations/host.py",
        # The CISO twin is off the SRE and FinOps path, and mypyc 2.4 fails on its Any-typed
        # loops with an internal error.
        "itbench/environments/sim/compliance.py",
    }
)
"""Files the patterns match that stay interpreted, and why."""

STAMP = ".compiled"
"""The file in a build that records the digest it was built from."""

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

jobs, paths = sys.argv[1], sys.argv[2:]
setup(
    name="itbench-compiled",
    ext_modules=mypycify(paths, opt_level="3", multi_file=True),
    script_args=["build_ext", "--inplace", "--parallel", jobs],
)
"""


class CompileError(RuntimeError):
    """The compiled build could not be made (no C compiler, no mypyc, or mypyc refused)."""


@dataclass(frozen=True)
class Build:
    """A compiled build on disk."""

    path: Path
    digest: str
    modules: tuple[str, ...]
    rebuilt: bool


def compiled_files(root: Path = ROOT) -> list[str]:
    """The source files a build compiles, relative to root, sorted."""
    found = {p.relative_to(root).as_posix() for pattern in COMPILED for p in root.glob(pattern)}
    return sorted(found - INTERPRETED)


def source_digest(root: Path = ROOT) -> str:
    """A digest of every source a build copies, the compiled list, the type checker's settings
    and the compiler's version: a build from the same digest is the same build."""
    import mypy.version

    h = hashlib.sha256()
    h.update(f"python {sys.version}\nmypy {mypy.version.__version__}\n".encode())
    h.update("\n".join(compiled_files(root)).encode())
    h.update((root / "pyproject.toml").read_bytes())
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so":
                h.update(path.relative_to(root).as_posix().encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()


def module_name(path: str) -> str:
    """The dotted module a compiled file becomes."""
    name = path.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def compiled_modules() -> list[str]:
    """The modules of this project loaded so far from compiled extensions."""
    suffixes = tuple(s for s in (sysconfig.get_config_var("EXT_SUFFIX"), ".so", ".pyd") if s)
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in PACKAGES
        and str(getattr(module, "__file__", "") or "").endswith(suffixes)
    )


def _c_compiler() -> str | None:
    # The compiler setuptools will call: CC from the environment, else Python's own.
    cc = (os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc")).split()
    return shutil.which(cc[0]) if cc else None


def build(target: Path, root: Path = ROOT, jobs: int = 2) -> Build:
    """Build (or keep, when its digest matches) the compiled copy of the packages in target.

    The packages are copied whole, so a run on the build never mixes its compiled modules with
    sources of another version; the compiled extensions sit beside their sources and are
    imported first. A failed build leaves no directory behind.

    Raises:
        CompileError: No C compiler or no mypyc, or compilation failed (mypyc's output
            is in the message).
    """
    target = target.resolve()
    if (root / STAMP).exists():
        raise CompileError(f"{root} is itself a compiled build; build from the sources")
    try:
        digest = source_digest(root)
    except ImportError as err:
        raise CompileError(f"the compiled build needs mypy (the dev extra): {err}") from err
    files = compiled_files(root)
    modules = tuple(module_name(f) for f in files)
    if _stamped(target) == digest:
        return Build(target, digest, modules, rebuilt=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time per directory: a second one waits, then finds the build made.
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamped(target) == digest:
            return Build(target, digest, modules, rebuilt=False)
        _compile(root, target, files, digest, jobs)
    return Build(target, digest, modules, rebuilt=True)


def _compile(root: Path, target: Path, files: list[str], digest: str, jobs: int) -> None:
    # A build of other sources is never left to be run by mistake, whether or not this one
    # can be made.
    if target.exists():
        shutil.rmtree(target)
    if _c_compiler() is None:
        raise CompileError(
            "no C compiler found (CC or cc); install one (e.g. gcc) to build the compiled twin"
        )
    staging = Path(tempfile.mkdtemp(prefix=".compiled-", dir=target.parent))
    try:
        for package in PACKAGES:
            shutil.copytree(
                root / package,
                staging / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"),
            )
        # The modules that stay interpreted are compiled to bytecode here, once, rather than
        # by every process that imports them (where writing bytecode may be off).
        compiled_bytecode = subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *PACKAGES],
            cwd=staging,
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled_bytecode.returncode != 0:
            raise CompileError(f"compileall failed: {compiled_bytecode.stdout[-2000:]}")
        # The type checker's settings (strictness, the pydantic plugin) are the project's.
        shutil.copy2(root / "pyproject.toml", staging / "pyproject.toml")
        done = subprocess.run(
            [sys.executable, "-c", _SETUP, str(max(jobs, 1)), *files],
            cwd=staging,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
            raise CompileError(f"mypyc failed (exit {done.returncode}):\n{tail}")
        for leftover in ("build", ".mypy_cache", "pyproject.toml"):
            path = staging / leftover
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        (staging / STAMP).write_text(digest + "\n" + "\n".join(files) + "\n")
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _stamped(build_dir: Path) -> str | None:
    stamp = build_dir / STAMP
    return stamp.read_text().split("\n", 1)[0] if stamp.is_file() else None


def running_build() -> tuple[str, ...]:
    """The modules compiled in the build this process runs on: empty when it runs the sources."""
    stamp = ROOT / STAMP
    if not stamp.is_file():
        return ()
    return tuple(module_name(f) for f in stamp.read_text().splitlines()[1:] if f)


def main(argv: list[str] | None = None) -> int:
    """`python -m itbench.compiled DIR`: build the compiled copy in DIR (exit 1 on failure)."""
    parser = argparse.ArgumentParser(
        prog="python -m itbench.compiled",
        description="Build the embedded twin's hot modules with mypyc into DIR "
        "(then run with PYTHONPATH=DIR).",
    )
    parser.add_argument("target", type=Path, help="the build directory, e.g. build/compiled")
    parser.add_argument("--jobs", type=int, default=2, help="C compiler jobs (default 2)")
    opts = parser.parse_args(argv)
    try:
        made = build(opts.target, jobs=opts.jobs)
    except CompileError as err:
        print(f"error: compiled build in {opts.target}: {err}", file=sys.stderr)
        return 1
    state = "built" if made.rebuilt else "up to date"
    print(f"compiled build {state}: {made.path} ({len(made.modules)} modules)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
