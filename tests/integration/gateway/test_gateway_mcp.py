"""The MCP server over the operations layer: an `mcp` SDK client lists the tools, works a trial on
the simulator through them and submits a report that is scored; refusals are tool errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from itbench.catalog_files import load_catalog
from itbench.cli.serve import external_agent, practice_trial
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import new_status
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial
from itbench.gateway.mcp import build_server
from itbench.gateway.sessions import TrialSession

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = "cart-flagd-failure"
TOOLS = {
    "task",
    "started",
    "finished",
    "wait",
    "alerts",
    "query_metrics",
    "query_metrics_range",
    "query_logs",
    "search_traces",
    "trace_services",
    "topology",
    "kubectl_get",
    "kubectl_describe",
    "kubectl_logs",
    "kubectl_events",
    "act",
    "submit_diagnosis",
    "submit_mitigation",
    "submit_posture",
}


class _Practice:
    """A practice trial driven in a thread; the MCP server resolves to its session."""

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
    # A tool error's text is the problem, after the SDK's "Error executing tool ...: ".
    text: str = result.content[0].text
    return json.loads(text[text.index("{") :])


def test_an_mcp_client_works_a_trial_through_the_tools_and_is_scored() -> None:
    practice = _Practice()
    server = build_server(practice.session)

    async def agent() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(server) as client:
            listed = await client.list_tools()
            seen["tools"] = {t.name: t for t in listed.tools}
            task = _json(await client.call_tool("task", {}))
            seen["task"] = task
            await client.call_tool("started", {})
            seen["alerts"] = _json(await client.call_tool("alerts", {}))
            seen["pods"] = _json(await client.call_tool("kubectl_get", {"kind": "pods"}))
            refused = await client.call_tool(
                "act", {"action": {"verb": "delete", "kind": "Node", "name": "n1"}}
            )
            seen["refused"] = (refused.is_error, _json(refused))
            chain = " or ".join(["up"] * 300)
            bad_query = await client.call_tool("query_metrics", {"query": chain})
            seen["bad_query"] = (bad_query.is_error, _json(bad_query))
            diagnosis = {
                "entities": [{"kind": "Deployment", "name": "cart", "rootCause": True}],
                "reasoning": "the cart's errors",
            }
            receipt = await client.call_tool("submit_diagnosis", {"report_body": diagnosis})
            seen["receipt"] = _json(receipt)
            malformed = await client.call_tool(
                "submit_mitigation", {"report_body": {"actions": "not a list"}}
            )
            seen["malformed"] = (malformed.is_error, _json(malformed))
            seen["finished"] = _json(await client.call_tool("finished", {}))
        return seen

    seen = asyncio.run(agent())
    practice.thread.join(timeout=120)
    session = practice.trial.registry.sessions() or None
    assert set(seen["tools"]) >= TOOLS
    for tool in seen["tools"].values():
        assert "Example:" in (tool.description or "")
    assert "verb" in json.dumps(seen["tools"]["act"].input_schema)
    assert "entities" in json.dumps(seen["tools"]["submit_diagnosis"].input_schema)
    assert seen["task"]["tasks"] == ["diagnosis", "mitigation"]
    assert seen["alerts"]["status"] == "success"
    assert seen["pods"]["kind"] == "Pod"
    assert seen["refused"][0] is True
    assert seen["refused"][1]["type"] == "forbidden-destructive"
    assert seen["bad_query"][0] is True
    assert seen["bad_query"][1]["limit"] == "binary-operators"
    assert seen["receipt"]["report"] == "diagnosis"
    assert seen["malformed"][0] is True
    assert seen["malformed"][1]["errors"][0]["field"] == "actions"
    assert seen["finished"]["state"] == "Finished"
    final = practice.final
    assert final is not None and final.scores is not None
    assert session is None  # the runner closed the session after scoring


def test_mcp_calls_are_on_the_audit_trail_with_the_guardrails_of_http() -> None:
    practice = _Practice()
    server = build_server(practice.session)
    session = practice.session(None)

    async def agent() -> None:
        async with Client(server) as client:
            await client.call_tool("alerts", {})
            await client.call_tool(
                "act", {"action": {"verb": "scale", "kind": "Deployment", "name": "prometheus"}}
            )
            await client.call_tool("kubectl_get", {"kind": "scenarios"})
            await client.call_tool("act", {"action": {"verb": "fly"}})

    before = session.env.now()
    asyncio.run(agent())
    entries = [e for e in session.audit if e.method == "MCP"]
    assert [(e.path, e.action, e.outcome) for e in entries] == [
        ("alerts", "observe.alerts", "ok"),
        ("act", "act.scale", "refused"),
        ("kubectl_get", "observe.kubectl.get", "refused"),
        ("act", "act", "rejected"),
    ]
    assert (session.env.now() - before).total_seconds() == pytest.approx(2 + 5 + 2 + 5)


def test_itbench_mcp_serves_the_tools_on_stdio() -> None:
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "itbench"),
        args=["mcp", "--scenario", SCENARIO, "--scenarios-dir", str(ROOT / "scenarios")],
        env={**os.environ},
    )

    async def agent() -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            task = _json(await client.call_tool("task", {}))
            done = _json(await client.call_tool("finished", {}))
        return tools, task, done

    tools, task, done = asyncio.run(agent())
    assert tools >= TOOLS
    assert task["namespace"]
    assert done["state"] == "Finished"


def test_itbench_mcp_needs_a_known_scenario() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "itbench"), "mcp", "--scenario", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "unknown scenario 'nope'" in result.stderr


def test_itbench_mcp_serves_streamable_http_to_the_trials_token_only() -> None:
    import re
    import socket

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "itbench"),
            "mcp",
            "--scenario",
            SCENARIO,
            "--scenarios-dir",
            str(ROOT / "scenarios"),
            "--transport",
            "http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        token = ""
        for line in proc.stderr:
            if match := re.match(r"token:\s+(\S+)", line):
                token = match.group(1)
                break
        assert token, "itbench mcp printed no token"
        url = f"http://127.0.0.1:{port}/mcp"

        async def call(headers: dict[str, str]) -> Any:
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                return tools, await client.call_tool("task", {})

        tools, task = asyncio.run(call({"Authorization": f"Bearer {token}"}))
        _, stranger = asyncio.run(call({"Authorization": "Bearer wrong"}))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert tools >= TOOLS
    assert task.is_error is False and _json(task)["state"] == "Ready"
    assert stranger.is_error is True and _json(stranger)["type"] == "unauthenticated"
