"""A CISO practice trial through the MCP tools: the host's commands, a collection tried in the
sandbox, the artefacts submitted, and the trial scored on the platform's evaluation."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from mcp import Client

from agents.ciso_reference import solutions
from itbench.catalog_files import load_catalog
from itbench.cli.serve import external_agent, practice_trial
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import new_status
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial
from itbench.gateway.mcp import build_server
from itbench.gateway.sessions import TrialSession

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = "ciso-rhel9-ip-forwarding"


class _Practice:
    def __init__(self) -> None:
        catalog, _ = load_catalog(ROOT / "scenarios")
        self.trial = practice_trial(
            catalog.get(SCENARIO), seed=42, agent_seconds=900, allow_oracle=False
        )
        self.ready = threading.Event()
        self.final: TrialStatus | None = None
        self.thread = threading.Thread(target=self._drive, daemon=True)
        self.thread.start()

    def _drive(self) -> None:
        executor = self.trial.executor
        self.final = drive_trial(
            new_status(executor.now()),
            executor,
            persist=lambda _s: None,
            run_agent=external_agent(lambda _t, _k: self.ready.set(), wall_seconds=120),
            config=EMBEDDED_CONFIG,
        )

    def session(self, _ctx: Any) -> TrialSession:
        assert self.ready.wait(120)
        return self.trial.registry.sessions()[0]


def _json(result: Any) -> Any:
    text: str = result.content[0].text
    return json.loads(text[text.index("{") :])


def test_a_ciso_trial_is_worked_and_scored_through_mcp() -> None:
    practice = _Practice()
    server = build_server(practice.session)
    collection = {"kind": "script", "content": solutions.HOST_SCRIPT}

    async def agent() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(server) as client:
            seen["tools"] = {t.name for t in (await client.list_tools()).tools}
            seen["task"] = _json(await client.call_tool("task", {}))
            await client.call_tool("started", {})
            seen["sysctl"] = _json(
                await client.call_tool("host_command", {"argv": ["sysctl", "net.ipv4.ip_forward"]})
            )
            seen["tried"] = _json(
                await client.call_tool("try_collection", {"collection": collection})
            )
            body = {
                "rego": solutions.rego_module(solutions.REGO_HOST["ip-forwarding"]),
                "collection": collection,
            }
            seen["submitted"] = _json(
                await client.call_tool("submit_compliance", {"report_body": body})
            )
            await client.call_tool("finished", {})
        return seen

    seen = asyncio.run(agent())
    practice.thread.join(120)
    assert {"host_files", "host_command", "try_collection", "submit_compliance"} <= seen["tools"]
    assert seen["task"]["tasks"] == ["compliance", "posture"]
    assert seen["sysctl"]["stdout"].startswith("net.ipv4.ip_forward = ")
    assert seen["tried"]["ok"] is True
    assert "sysctl" in seen["tried"]["evidence"]
    assert seen["submitted"]["report"] == "compliance"
    assert practice.final is not None and practice.final.scores is not None
    posture = practice.final.scores.posture
    assert posture is not None and posture.passed, posture
    assert posture.counterpart_passed is True
