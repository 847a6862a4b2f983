"""An AgentSubmission with a command runtime: the operator runs the command once per simulator
trial against its gateway on loopback, with the agent's variables and its credentials Secret but
not the operator's environment; the trial is scored, and a command that cannot run fails only
its own trials."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from operator_lab import NS, Lab, agent, benchmark_run, ready_agent, ready_scenarios, until

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agents"


def _trial(lab: Lab, run: str) -> dict[str, object]:
    trials = [
        t
        for t in lab.cluster.objects("trials")
        if t["metadata"].get("labels", {}).get("itbench.io/run") == run
    ]
    return trials[0] if trials else {}


def _final(lab: Lab, run: str) -> bool:
    status = dict(_trial(lab, run).get("status") or {})
    return status.get("phase") in ("Succeeded", "Failed", "Errored")


async def test_a_command_agent_works_simulator_trials_with_its_credentials(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPERATOR_ONLY_SECRET", "not for agents")
    await lab.start()
    await ready_scenarios(lab, "cart-flagd-failure")
    lab.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm", "namespace": NS},
            "stringData": {"MODEL_API_KEY": "s3cret"},
        }
    )
    runtime = {
        "command": {
            "command": [sys.executable, str(FIXTURES / "sdk_agent.py")],
            "env": [
                {"name": "ITBENCH_AGENT__REQUIRE_ENV", "value": "MODEL_API_KEY"},
                {"name": "ITBENCH_AGENT__FORBID_ENV", "value": "OPERATOR_ONLY_SECRET"},
            ],
            "credentialsSecretRef": {"name": "llm"},
            "wallSeconds": 120,
        }
    }
    await ready_agent(lab, agent("cmd", runtime))
    missing = {"command": {"command": ["no-such-agent-program"]}}
    await ready_agent(lab, agent("missing", missing))
    lab.cluster.apply(benchmark_run("with-cmd", "cmd", ["cart-flagd-failure"]))
    lab.cluster.apply(benchmark_run("with-missing", "missing", ["cart-flagd-failure"]))
    await until(lambda: _final(lab, "with-cmd") and _final(lab, "with-missing"), within=120)
    ran = dict(_trial(lab, "with-cmd")["status"])  # type: ignore[arg-type]
    assert ran["reason"] in ("TasksPassed", "TasksFailed"), ran["message"]
    assert ran["scores"]["diagnosis"]["passed"] is True, "the command named the root cause"
    broken = dict(_trial(lab, "with-missing")["status"])  # type: ignore[arg-type]
    assert (broken["phase"], broken["reason"]) == ("Failed", "AgentCrashed")
    assert "program 'no-such-agent-program' is not found" in broken["message"]
    secrets = lab.cluster.api.core.list_namespaced_secret(NS).items
    assert [s.metadata.name for s in secrets] == ["llm"], "a command agent needs no token Secret"
