"""How an agent's turn ends, through `itbench run`: each way has its own reason (the failure
taxonomy of docs/metrics.md), totalled per agent and task in the printed report, report.json and
report.html; an in-process agent needs no `next_trial()`, and one that raises or hangs leaves its
traceback in `agents/<trial>/`."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from itbench.cli.run import run_command
from itbench.core.models.report import Report, TrialRecord
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.context import OUTCOMES

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "cart-flagd-failure"

AGENTS_MODULE = '''
"""Callable agents that end their turn in every way there is."""

import threading

from itbench.client import (
    AgentAction,
    DiagnosisReport,
    ITBenchClient,
    ModelUnavailableError,
    PredictedEntity,
)


def without_next_trial(client: ITBenchClient) -> None:
    client.started()
    client.submit_diagnosis(
        DiagnosisReport(
            entities=[
                PredictedEntity(
                    kind="Deployment", name="cart", root_cause=True, category="FeatureFlag"
                )
            ]
        )
    )
    client.act(
        AgentAction(
            verb="set-flag", kind="ConfigMap", name="flagd-config", flag="cartFailure",
            variant="off",
        )
    )
    for _ in range(20):
        client.wait(30)
        if not [a for a in client.alerts() if a.state.value == "firing"]:
            break
    client.wait(60)
    client.finished()


def uncategorised(client: ITBenchClient) -> None:
    client.started()
    client.submit_diagnosis(
        DiagnosisReport(entities=[PredictedEntity(kind="Deployment", name="cart", root_cause=True)])
    )
    client.finished()


def deep_inside_the_agent() -> None:
    raise ValueError("the parser met an empty answer")


def crashing(client: ITBenchClient) -> None:
    client.started()
    deep_inside_the_agent()


def model_down(client: ITBenchClient) -> None:
    client.started()
    raise ModelUnavailableError("connection refused by http://127.0.0.1:9/v1")


def returns_early(client: ITBenchClient) -> None:
    client.started()


RELEASE = threading.Event()


class Stuck:
    wall_seconds = 1.0

    def run(self, client: ITBenchClient) -> None:
        client.started()
        waiting_for_a_model_that_never_answers()


def waiting_for_a_model_that_never_answers() -> None:
    RELEASE.wait(20)


STUCK = Stuck()
'''

EXITS_EARLY = """
import os
from itbench.client import ITBenchClient

client = ITBenchClient(os.environ["ITBENCH_GATEWAY_URL"], os.environ["ITBENCH_TOKEN"])
client.use_trial(os.environ["ITBENCH_TRIAL"])
client.started()
"""

MODEL_DOWN_COMMAND = """
import sys
from itbench.client import MODEL_UNAVAILABLE_EXIT

print("litellm.APIConnectionError: connection refused", file=sys.stderr)
sys.exit(MODEL_UNAVAILABLE_EXIT)
"""


UNPRICED_STEPS = """
import json
import os
from pathlib import Path

from itbench.client import ITBenchClient

call = {"kind": "model-call", "model": "hosted_vllm/local", "promptTokens": 50,
        "completionTokens": 5, "latencySeconds": 0.25, "text": "Thought: look at cart"}
lines = [json.dumps(call), "not json at all", json.dumps({"kind": "telepathy"}), json.dumps(call)]
Path(os.environ["ITBENCH_TRAJECTORY_FILE"]).write_text("\\n".join(lines) + "\\n")
client = ITBenchClient(os.environ["ITBENCH_GATEWAY_URL"], os.environ["ITBENCH_TOKEN"])
client.use_trial(os.environ["ITBENCH_TRIAL"])
client.started()
client.finished()
"""


@dataclass(frozen=True)
class Run:
    root: Path
    output: str
    report: Report
    records: dict[str, TrialRecord]

    def status(self, agent: str) -> TrialStatus:
        path = self.root / "trials" / f"{agent}--{SCENARIO}--0.json"
        return TrialStatus.model_validate_json(path.read_text())

    def agent_dir(self, agent: str) -> Path:
        return self.root / "agents" / f"{agent}--{SCENARIO}--0"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    work = tmp_path_factory.mktemp("outcomes")
    (work / "outcome_agents.py").write_text(textwrap.dedent(AGENTS_MODULE))
    (work / "exits_early.py").write_text(EXITS_EARLY)
    (work / "model_down_cmd.py").write_text(MODEL_DOWN_COMMAND)
    (work / "unpriced_steps.py").write_text(UNPRICED_STEPS)
    sys.path.insert(0, str(work))
    python = shlex.quote(sys.executable)
    args = ["--scenario", SCENARIO, "--trials", "1", "--workers", "1"]
    for name in (
        "without_next_trial",
        "uncategorised",
        "crashing",
        "model_down",
        "returns_early",
        "STUCK",
    ):
        args += ["--agent", f"outcome_agents:{name}"]
    for script in ("exits_early.py", "model_down_cmd.py", "unpriced_steps.py"):
        args += ["--agent-cmd", f"{python} {shlex.quote(str(work / script))}"]
    args += ["--output-dir", str(work / "out"), "--run-name", "r"]
    args += ["--scenarios-dir", str(ROOT / "scenarios")]
    try:
        result = CliRunner().invoke(run_command, args, catch_exceptions=False)
    finally:
        sys.path.remove(str(work))
        released = sys.modules.get("outcome_agents")
        if released is not None:
            released.RELEASE.set()
    assert result.exit_code == 0, result.output
    root = work / "out" / "r"
    report = Report.model_validate_json((root / "report.json").read_text())
    lines = (root / "trials.jsonl").read_text().splitlines()
    records = {r.agent: r for r in (TrialRecord.model_validate_json(x) for x in lines)}
    yield Run(root, result.output, report, records)


def test_a_callable_agent_needs_no_next_trial_and_scores(run: Run) -> None:
    record = run.records["without-next-trial"]
    assert (record.phase.value, record.reason) == ("Succeeded", "TasksPassed")


def test_a_crashing_callable_fails_as_crashed_and_leaves_its_traceback(run: Run) -> None:
    record = run.records["crashing"]
    assert (record.phase.value, record.reason) == ("Failed", "AgentCrashed")
    traceback = (run.agent_dir("crashing") / "traceback.txt").read_text()
    assert "deep_inside_the_agent" in traceback
    assert traceback.rstrip().endswith("ValueError: the parser met an empty answer")
    status = run.status("crashing")
    assert "ValueError: the parser met an empty answer" in status.message
    assert "traceback.txt" in status.message


def test_a_callable_past_its_wall_clock_limit_is_a_timeout_with_where_it_hung(run: Run) -> None:
    record = run.records["stuck"]
    assert (record.phase.value, record.reason) == ("Failed", "AgentTimeout")
    status = run.status("stuck")
    assert "did not return within its 1 s wall-clock limit" in status.message
    where = (run.agent_dir("stuck") / "traceback.txt").read_text()
    assert "waiting_for_a_model_that_never_answers" in where


def test_an_agent_that_returns_without_finishing_says_so_not_a_timeout(run: Run) -> None:
    record = run.records["returns-early"]
    assert (record.phase.value, record.reason) == ("Failed", "AgentExitedWithoutFinish")
    message = run.status("returns-early").message
    assert "the agent returned after" in message
    assert "without reporting FINISHED (it reported STARTED)" in message
    assert "limit" not in message


def test_a_command_that_exits_without_finishing_says_after_how_long(run: Run) -> None:
    record = run.records["exits-early"]
    assert (record.phase.value, record.reason) == ("Failed", "AgentExitedWithoutFinish")
    message = run.status("exits-early").message
    assert "exited with status 0 after" in message
    assert "900 s" not in message and "limit" not in message


def test_a_failing_model_endpoint_errors_the_trial_instead_of_failing_the_agent(
    run: Run,
) -> None:
    for agent in ("model-down", "model-down-cmd"):
        record = run.records[agent]
        assert (record.phase.value, record.reason) == ("Errored", "ModelUnavailable"), agent
        result = run.report.agent_result(agent)
        assert result is not None
        assert result.failed == 0 and result.errored.reasons == {"ModelUnavailable": 1}
        diagnosis = result.task("sre.diagnosis")
        assert diagnosis is not None and diagnosis.trials == 0
        assert diagnosis.errored_reasons == {"ModelUnavailable": 1}
    assert "connection refused" in run.status("model-down").message
    assert "model endpoint" in run.status("model-down-cmd").message


def test_failures_are_totalled_per_agent_and_task_in_json(run: Run) -> None:
    on_disk = json.loads((run.root / "report.json").read_text())
    tasks = {
        (a["agent"], t["key"]): t for a in on_disk["agents"] for t in a["tasks"] if t["trials"]
    }
    assert tasks[("uncategorised", "sre.diagnosis")]["failures"] == {"WrongCategory": 1}
    assert tasks[("crashing", "sre.diagnosis")]["failures"] == {"AgentCrashed": 1}
    assert tasks[("crashing", "sre.mitigation")]["failures"] == {"AgentCrashed": 1}
    assert tasks[("stuck", "sre.mitigation")]["failures"] == {"AgentTimeout": 1}
    assert tasks[("exits-early", "sre.diagnosis")]["failures"] == {"AgentExitedWithoutFinish": 1}
    assert tasks[("without-next-trial", "sre.diagnosis")]["failures"] == {}
    mitigation = tasks[("uncategorised", "sre.mitigation")]["failures"]
    assert set(mitigation) == {"AlertsStillFiring"}


def test_failures_are_totalled_in_the_printed_report_and_the_page(run: Run) -> None:
    assert "Failures by agent, task and reason" in run.output
    assert "WrongCategory 1" in run.output
    assert "AgentExitedWithoutFinish 1" in run.output
    assert "failed AgentTimeout: 1 (agent)" in run.output
    assert "errored ModelUnavailable: 2 (model endpoint)" in run.output
    page = (run.root / "report.html").read_text()
    assert 'id="failures"' in page
    assert "WrongCategory 1" in page and "ModelUnavailable 1" in page


def test_every_final_reason_is_in_the_documented_taxonomy_with_its_phase_and_owner() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    section = text.split("## Failure reasons", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    documented = {
        reason.value: (phase.value, owner.value if owner else "")
        for reason, (phase, owner) in OUTCOMES.items()
    }
    assert rows == documented


def test_bad_step_lines_are_counted_and_unpriced_calls_are_not_shown_as_free(run: Run) -> None:
    on_disk = json.loads((run.root / "report.json").read_text())
    (entry,) = [u for u in on_disk["agentUsage"] if u["agent"]["name"] == "unpriced-steps"]
    usage = entry["usage"]
    assert (usage["modelCalls"], usage["promptTokens"], usage["completionTokens"]) == (2, 100, 10)
    assert "costUsd" not in usage, "unknown, not zero"
    assert usage["unpricedCalls"] == 2
    assert usage["invalidSteps"] == 2 and usage["droppedSteps"] == 0
    table = run.output.split("Model usage by agent", 1)[1].split("From the steps", 1)[0]
    (row,) = [line for line in table.splitlines() if line.strip().startswith("unpriced-steps")]
    assert "unpriced" in row.split("unpriced-steps", 1)[1] and "$0.00" not in row
    assert "2 invalid" in row
    page = (run.root / "report.html").read_text()
    usage_section = page.split('id="usage"', 1)[1].split("</table>", 1)[0]
    assert "unpriced-steps" in usage_section and ">unpriced<" in usage_section
    assert "2 invalid, 0 over the limits" in usage_section
