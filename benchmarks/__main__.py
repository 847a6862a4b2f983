"""Run every benchmark module (`benchmarks/bench_*.py`) and print a table of figures vs. targets.

Each module defines `run() -> list[Figure]`. `python -m benchmarks [name ...]` runs a subset;
`--json PATH` also writes the figures as JSON. Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path

from benchmarks.harness import Figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help="benchmark modules to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    opts = parser.parse_args(argv)
    here = Path(__file__).parent
    modules = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    if opts.names:
        wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in opts.names}
        unknown = wanted - set(modules)
        if unknown:
            print(f"unknown benchmark(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        modules = [m for m in modules if m in wanted]
    figures: list[Figure] = []
    for name in modules:
        mod = importlib.import_module(f"benchmarks.{name}")
        print(f"== {name}", file=sys.stderr, flush=True)
        figures.extend(mod.run())
    width = max((len(f.name) for f in figures), default=10)
    missed = 0
    for f in figures:
        verdict = f.verdict()
        missed += verdict == "MISSED"
        target = f"{f.comparison} {f.target:g} {f.unit}" if f.target is not None else ""
        print(f"{f.name:<{width}}  {f.value:>12.4g} {f.unit:<8} {target:<18} {verdict}")
    if opts.json:
        opts.json.write_text(json.dumps([f.as_dict() for f in figures], indent=2))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
