"""Baselines are ordinary clients: the agents import nothing of ITBench but the SDK."""

from __future__ import annotations

import ast
from pathlib import Path

import agents
from agents import BUILTIN_AGENTS
from itbench.core.models.agent_submission import BuiltinAgent

AGENTS_DIR = Path(agents.__file__).parent


def _itbench_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n == "itbench" or n.startswith("itbench."))
    return found


def test_agents_import_only_the_sdk() -> None:
    modules = sorted(AGENTS_DIR.rglob("*.py"))
    assert len(modules) >= 11
    imported = {str(p.relative_to(AGENTS_DIR)): _itbench_imports(p) for p in modules}
    outside = {name: found - {"itbench.client"} for name, found in imported.items()}
    assert {name: found for name, found in outside.items() if found} == {}


def test_every_builtin_agent_is_registered() -> None:
    from itbench.execution.agents import load_definition, registered

    assert sorted(BUILTIN_AGENTS) == sorted(a.value for a in BuiltinAgent)
    entries = registered()
    assert {a.value for a in BuiltinAgent} <= set(entries)
    for agent in BuiltinAgent:
        assert load_definition(entries[agent.value].target).run is BUILTIN_AGENTS[agent.value]
