"""What the operator keeps in ConfigMaps: each Trial's trajectory and the run's reports."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gzip
import json
import logging
import random
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes.client.exceptions import ApiException
from operator_lab import (
    FAST,
    NS,
    Cluster,
    Lab,
    agent,
    benchmark_run,
    ready_agent,
    ready_scenarios,
    status_of,
    trials_of,
    until,
)

from agents.oracle.agent import diagnosis_of
from itbench.cli.main import cli
from itbench.client import ITBenchClient
from itbench.core.models.report import TrialRecord
from itbench.operator.artefacts import (
    CONFIG_MAP_BYTES,
    TRAJECTORY_BYTES,
    report_data,
    trajectory_document,
    trajectory_name,
)
from itbench.operator.benchmark_runs import trial_name
from itbench.operator.runtime import OperatorRuntime
from itbench.operator.workloads import workload_name

pytestmark = pytest.mark.asyncio

SCENARIO = "cart-flagd-failure"
RUN_SECONDS = 120.0
"""How long a run of a few trials may take: seconds on an idle machine, but the trials share two
cores with the rest of the suite."""
QUERY = 'sum(rate(http_server_duration_seconds_count{service="cart"}[5m]))'

Asgi = Callable[..., Awaitable[None]]


class Recorder:
    """An ASGI wrapper around the gateway that notes every request an agent sends."""

    def __init__(self, app: Asgi) -> None:
        self.app = app
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


def config_map(lab: Lab, name: str) -> dict[str, Any] | None:
    """A ConfigMap as stored."""
    return lab.cluster.server.get("", "configmaps", NS, name)


def trajectory_of(lab: Lab, trial: dict[str, Any]) -> dict[str, Any]:
    """The trajectory document a Trial's status.trajectoryRef names."""
    ref = trial["status"].get("trajectoryRef") or ""
    assert ref.startswith("configmap/"), trial["status"]
    stored = config_map(lab, ref.removeprefix("configmap/"))
    assert stored is not None, ref
    doc: dict[str, Any] = json.loads(stored["data"]["trajectory.json"])
    return doc


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Page(HTMLParser):
    """The text of the report page's main table, its title and its embedded trial data."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.title = ""
        self.main_table: list[str] = []
        self.data = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        found = dict(attrs).get("id")
        if (
            (tag == "title" and not self.title)
            or found in ("main-table", "report-data")
            or self.open
        ):
            self.open.append(str(found) if found in ("main-table", "report-data") else tag)

    def handle_endtag(self, tag: str) -> None:
        if self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if not self.open:
            return
        if self.open[0] == "title":
            self.title += data
        elif self.open[0] == "main-table":
            self.main_table.append(data.strip())
        elif self.open[0] == "report-data":
            self.data += data


def page(html: str) -> Page:
    parsed = Page()
    parsed.feed(html)
    parsed.close()
    return parsed


def condition_of(trial: dict[str, Any], kind: str) -> dict[str, Any]:
    """One condition of a Trial's status."""
    return next(c for c in trial["status"]["conditions"] if c["type"] == kind)


async def test_a_trials_trajectory_is_stored_with_exactly_its_calls_and_owned_by_it(
    lab: Lab,
) -> None:
    handle = await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("outside", {"external": {"pollIntervalSeconds": 5}}))
    lab.cluster.apply(
        benchmark_run(
            "kept",
            "outside",
            [SCENARIO],
            trialsPerScenario=1,
            allowOracle=True,
            timeouts={"agentSeconds": 86400},
        )
    )
    name = trial_name("kept", SCENARIO, 0)
    secret = await until(
        lambda: lab.cluster.server.get("", "secrets", NS, workload_name(name)), what="the token"
    )
    recorder = Recorder(handle.runtime.gateway())

    def external_agent() -> None:
        client = ITBenchClient.in_process(recorder, secret["stringData"]["token"])
        try:
            # A few calls of each kind, none waiting: every call the agent makes lets the
            # trial's virtual time pass from this thread while the operator ticks it too.
            client.use_trial(secret["stringData"]["trialId"])
            client.task()
            client.started()
            client.query(QUERY)
            client.submit_diagnosis(diagnosis_of(client.oracle()))
            client.finished()
        finally:
            client.close()

    await asyncio.to_thread(external_agent)
    await until(
        lambda: status_of(lab, "benchmarkruns", "kept").get("phase") in ("Succeeded", "Failed"),
        within=RUN_SECONDS,
        what="the run complete",
    )
    (trial,) = trials_of(lab, "kept")
    doc = trajectory_of(lab, trial)
    # Every call the agent sent under its token, in order (listing trials included).
    sent = [c for c in recorder.calls if c[1].startswith("/v1/trials")]
    assert [(c["method"], c["path"]) for c in doc["calls"]] == sent
    assert doc["trial"] == f"{NS}/{name}" and doc["run"] == "kept"
    assert doc["totalCalls"] == doc["storedCalls"] == len(sent) and not doc["truncated"]
    query = next(c for c in doc["calls"] if c["action"] == "observe.metrics.query")
    assert query["detail"]["query"] == QUERY
    assert doc["calls"][-1]["path"].endswith("/finished")
    stored = condition_of(trial, "TrajectoryStored")
    assert (stored["status"], stored["reason"]) == ("True", "Stored")
    assert f"{len(sent)} calls" in stored["message"]
    # The run's ConfigMap holds the three reports; the page names the agent and shows the calls.
    run = status_of(lab, "benchmarkruns", "kept")
    assert run["reportRef"] == "configmap/kept-report"
    data = config_map(lab, "kept-report")["data"]  # type: ignore[index]
    assert set(data) == {"report.json", "trials.jsonl", "report.html"}
    assert json.loads(data["report.json"])["agents"][0]["agent"] == "outside"
    (record,) = [
        TrialRecord.model_validate_json(line) for line in data["trials.jsonl"].splitlines()
    ]
    assert (record.trial, record.agent) == (name, "outside")
    assert record.phase.value == trial["status"]["phase"]
    # As docs/operator.md fetches it, with the real kubectl.
    fetched = lab.cluster.kubectl(
        "get", "configmap", "kept-report", "-o", r"jsonpath={.data.report\.html}"
    )
    assert fetched == data["report.html"]
    shown = page(data["report.html"])
    assert shown.title == "ITBench report: kept"
    assert "outside" in shown.main_table
    (row,) = json.loads(shown.data)["trials"]
    assert (row["name"], row["agent"]) == (name, "outside")
    assert [c["action"] for c in row["trajectory"]] == [c["action"] for c in doc["calls"]]
    assert any(QUERY in c["content"] for c in row["trajectory"])
    # Owned by the Trial: it goes when the Trial goes (with its run).
    cm_name = trial["status"]["trajectoryRef"].removeprefix("configmap/")
    owners = config_map(lab, cm_name)["metadata"]["ownerReferences"]  # type: ignore[index]
    assert [(o["kind"], o["uid"]) for o in owners] == [("Trial", trial["metadata"]["uid"])]
    lab.cluster.kubectl("delete", "benchmarkrun", "kept", "--wait=false")
    await until(lambda: config_map(lab, cm_name) is None, what="the trajectory collected")


async def test_an_oversized_trajectory_keeps_its_first_calls_and_says_so(lab: Lab) -> None:
    await lab.start(dataclasses.replace(FAST, trajectory_bytes=2048))
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run("long", "oracle", [SCENARIO], trialsPerScenario=1, allowOracle=True)
    )
    await until(
        lambda: status_of(lab, "benchmarkruns", "long").get("phase") == "Succeeded",
        within=RUN_SECONDS,
        what="the run complete",
    )
    (trial,) = trials_of(lab, "long")
    assert trial["status"]["phase"] == "Succeeded", "a cut trajectory never fails the trial"
    doc = trajectory_of(lab, trial)
    text = config_map(lab, trial["status"]["trajectoryRef"].removeprefix("configmap/"))["data"]  # type: ignore[index]
    assert len(text["trajectory.json"].encode()) <= 2048
    assert doc["truncated"] and 0 < doc["storedCalls"] < doc["totalCalls"]
    assert len(doc["calls"]) == doc["storedCalls"]
    assert f"{doc['totalCalls'] - doc['storedCalls']} of {doc['totalCalls']} calls" in doc["note"]
    assert doc["calls"][0]["action"] == "protocol.list", "the first calls are the ones kept"
    stored = condition_of(trial, "TrajectoryStored")
    assert (stored["status"], stored["reason"]) == ("True", "Truncated")
    assert "2048-byte limit" in stored["message"]


async def test_refused_writes_are_retried_and_the_run_completes_once_they_go_through(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="itbench.operator")
    api = lab.cluster.api
    write = api.put_config_map
    refusing = [True]
    refused: list[str] = []

    def flaky(namespace: str, name: str, *args: Any, **kwargs: Any) -> None:
        if refusing[0]:
            refused.append(name)
            raise ApiException(status=503, reason="Service Unavailable")
        write(namespace, name, *args, **kwargs)

    monkeypatch.setattr(api, "put_config_map", flaky)
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run("flaky", "oracle", [SCENARIO], trialsPerScenario=1, allowOracle=True)
    )
    name = trial_name("flaky", SCENARIO, 0)

    def waiting() -> dict[str, Any] | None:
        trial = lab.cluster.get("trials", name) or {}
        conditions = (trial.get("status") or {}).get("conditions") or []
        found = [c for c in conditions if c["type"] == "TrajectoryStored"]
        return found[0] if found else None

    stored = await until(waiting, what="the refused trajectory write")
    assert (stored["status"], stored["reason"]) == ("False", "WriteFailed")
    trial = lab.cluster.get("trials", name)
    assert trial is not None and trial["status"]["phase"] == "Succeeded"
    assert not trial["status"].get("trajectoryRef")
    await until(lambda: "flaky-report" in refused, what="the refused report write")
    run = status_of(lab, "benchmarkruns", "flaky")
    assert run["phase"] == "Running" and not run.get("reportRef"), "no half-applied completion"
    await until(
        lambda: refused.count(trajectory_name(name)) >= 2,
        what="the trajectory write retried tick after tick",
    )

    refusing[0] = False
    await until(
        lambda: status_of(lab, "benchmarkruns", "flaky").get("phase") == "Succeeded",
        what="the run complete once writes go through",
    )
    trial = lab.cluster.get("trials", name)
    assert trial is not None and condition_of(trial, "TrajectoryStored")["reason"] == "Stored"
    assert trajectory_of(lab, trial)["calls"], "the trajectory kept in memory was stored"
    assert status_of(lab, "benchmarkruns", "flaky")["reportRef"] == "configmap/flaky-report"
    assert "report.html" in config_map(lab, "flaky-report")["data"]  # type: ignore[index]
    handle = lab.operators[0]
    assert not handle.task.done(), "the operator never crashed"
    # One warning per refused object; the retries (tick after tick) at DEBUG.
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned.count("trajectory not stored; retrying on the next tick") == 1
    assert warned.count("report not stored; retrying on the next tick") == 1
    retried = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "trajectory not stored; retrying on the next tick" in retried


async def test_a_restart_mid_run_keeps_every_trajectory_once(lab: Lab) -> None:
    first = await lab.start()
    await ready_scenarios(lab, SCENARIO, "payment-failure")
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run(
            "restarted",
            "oracle",
            [SCENARIO, "payment-failure"],
            trialsPerScenario=2,
            concurrency=2,
            allowOracle=True,
        )
    )

    def finished() -> list[dict[str, Any]]:
        return [
            t
            for t in trials_of(lab, "restarted")
            if (t.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Errored")
        ]

    await until(lambda: 0 < len(finished()) < 4, what="a run part-way through")
    await first.kill()
    before = {t["metadata"]["name"]: t["status"]["trajectoryRef"] for t in finished()}
    await lab.start()
    await until(
        lambda: status_of(lab, "benchmarkruns", "restarted").get("phase") == "Succeeded",
        within=60,
        what="the run complete after the restart",
    )
    trials = trials_of(lab, "restarted")
    refs = {t["metadata"]["name"]: t["status"].get("trajectoryRef") for t in trials}
    assert len(refs) == 4 and all(refs.values()), refs
    assert {n: refs[n] for n in before} == before, "what was stored before stays"
    kept = lab.cluster.api.config_map_names(
        NS, "itbench.io/run=restarted,itbench.io/artefact=trajectory"
    )
    assert sorted(kept) == sorted(r.removeprefix("configmap/") for r in refs.values() if r)
    for trial in trials:
        doc = trajectory_of(lab, trial)
        assert doc["calls"] and doc["calls"][-1]["action"] == "protocol.finished"
        # Each call once: a restart neither drops nor repeats what the agent did.
        times = [(c["time"], c["path"]) for c in doc["calls"]]
        assert len(times) == len(set(times)), trial["metadata"]["name"]
    data = config_map(lab, "restarted-report")["data"]  # type: ignore[index]
    rows = json.loads(page(data["report.html"]).data)["trials"]
    assert sorted(r["name"] for r in rows) == sorted(refs)
    assert all(r["trajectory"] for r in rows)
    assert len(data["trials.jsonl"].splitlines()) == 4


async def test_the_retention_limit_keeps_the_first_trajectories_of_a_run(lab: Lab) -> None:
    await lab.start(dataclasses.replace(FAST, trajectories_per_run=1))
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run("few", "oracle", [SCENARIO], trialsPerScenario=3, allowOracle=True)
    )
    await until(
        lambda: status_of(lab, "benchmarkruns", "few").get("phase") == "Succeeded",
        within=RUN_SECONDS,
        what="the run complete",
    )
    trials = trials_of(lab, "few")
    stored = [t for t in trials if t["status"].get("trajectoryRef")]
    assert len(trials) == 3 and len(stored) == 1
    for trial in trials:
        assert trial["status"]["phase"] == "Succeeded"
        if trial not in stored:
            limit = condition_of(trial, "TrajectoryStored")
            assert (limit["status"], limit["reason"]) == ("False", "RetentionLimit")
            assert "--trajectories-per-run 1" in limit["message"]
    assert lab.cluster.api.config_map_names(NS, "itbench.io/artefact=trajectory") == [
        stored[0]["status"]["trajectoryRef"].removeprefix("configmap/")
    ]


async def test_documents_fit_a_config_map_as_kube_apiserver_counts_it(cluster: Cluster) -> None:
    owner = cluster.api.core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}})
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "owner", "namespace": NS, "uid": owner.metadata.uid},
    }
    # A trajectory of 1.5 MB: as is, the API refuses it; capped, it is stored with the note.
    calls = [
        {"path": "/v1/trials/t/metrics/query", "detail": {"query": "x" * 3000, "n": i}}
        for i in range(500)
    ]
    whole, dropped = trajectory_document("default/t", "r", calls, limit=10 << 20)
    assert dropped == 0 and len(whole.encode()) > CONFIG_MAP_BYTES
    with pytest.raises(ApiException) as refused:
        cluster.api.put_config_map(NS, "whole", {"trajectory.json": whole}, body)
    assert refused.value.status == 422 and "Too long" in str(refused.value.body)
    capped, dropped = trajectory_document("default/t", "r", calls)
    assert 0 < dropped < 500 and len(capped.encode()) <= TRAJECTORY_BYTES
    cluster.api.put_config_map(NS, "capped", {"trajectory.json": capped}, body)
    doc = json.loads(cluster.api.config_map(NS, "capped")["trajectory.json"])  # type: ignore[index]
    assert doc["storedCalls"] == 500 - dropped and doc["calls"] == calls[: 500 - dropped]
    # Report files: text while they fit, then gzip in binaryData, then left out; notes say which.
    html = "<p>" + "".join(f"row {i} " for i in range(200_000)) + "</p>"
    noise = base64.b64encode(random.Random(0).randbytes(1_000_000)).decode()  # gzip: ~1 MB
    data, binary, notes = report_data(
        [("report.json", "{}"), ("report.html", html), ("noise.txt", noise)]
    )
    assert data["report.json"] == "{}" and "report.html" not in data and "noise.txt" not in data
    assert gzip.decompress(base64.b64decode(binary["report.html.gz"])).decode() == html
    assert len(notes) == 2 and "binaryData report.html.gz" in notes[0]
    assert "noise.txt" in notes[1] and "left out" in notes[1]
    assert data["notes.txt"] == "\n".join(notes) + "\n"
    cluster.api.put_config_map(NS, "report", data, body, binary_data=binary)
    stored = cluster.server.get("", "configmaps", NS, "report")
    assert stored is not None and set(stored["binaryData"]) == {"report.html.gz"}


@pytest.mark.parametrize(
    ("args", "env", "kept"),
    [
        ([], {}, 500),
        ([], {"ITBENCH_OPERATOR__TRAJECTORIES_PER_RUN": "7"}, 7),
        (["--trajectories-per-run", "0"], {}, 0),
    ],
    ids=["default", "setting", "option"],
)
async def test_the_retention_setting_reaches_the_operator(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], kept: int
) -> None:
    seen: list[OperatorRuntime] = []

    async def serve(runtime: OperatorRuntime, **_: Any) -> None:
        seen.append(runtime)

    monkeypatch.setattr("itbench.operator.app.serve", serve)
    monkeypatch.setattr("itbench.operator.app.connection_info", lambda api: None)
    monkeypatch.setattr("itbench.operator.kubeapi.connect", lambda kubeconfig: None)
    monkeypatch.setattr("itbench.operator.logs.configure_logging", lambda *a, **k: None)
    result = await asyncio.to_thread(
        CliRunner().invoke, cli, ["operator", "run", *args], env=env, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert [r.config.trajectories_per_run for r in seen] == [kept]


async def test_a_page_too_large_with_its_trajectories_is_stored_without_them(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    from itbench.operator import benchmark_runs

    render = benchmark_runs.render_html
    filler = base64.b64encode(random.Random(1).randbytes(1_200_000)).decode()

    def heavy(*args: Any) -> str:
        page_html = render(*args)
        # Trajectories that make the page too large even compressed (gzip cannot shrink noise).
        return page_html + f"<!-- {filler} -->" if args[-1] else page_html

    monkeypatch.setattr(benchmark_runs, "render_html", heavy)
    monkeypatch.setattr(benchmark_runs, "PAGE_TRAJECTORY_BYTES", 1)  # reads one, then stops
    await lab.start()
    await ready_scenarios(lab, SCENARIO)
    await ready_agent(lab, agent("oracle", {"builtin": {"name": "oracle"}}))
    lab.cluster.apply(
        benchmark_run("big", "oracle", [SCENARIO], trialsPerScenario=3, allowOracle=True)
    )
    await until(
        lambda: status_of(lab, "benchmarkruns", "big").get("phase") == "Succeeded",
        within=RUN_SECONDS,
        what="the run complete",
    )
    stored = config_map(lab, "big-report")
    assert stored is not None and not stored.get("binaryData")
    data = stored["data"]
    assert set(data) == {"report.json", "trials.jsonl", "report.html", "notes.txt"}
    assert filler not in data["report.html"]
    rows = json.loads(page(data["report.html"]).data)["trials"]
    assert len(rows) == 3 and all(r["trajectory"] == [] for r in rows)
    first, second = data["notes.txt"].splitlines()
    assert "trajectories of 1 trials; the other 2 are only in their Trials' ConfigMaps" in first
    assert "report.html shows no trajectories" in second
    complete = next(
        c for c in status_of(lab, "benchmarkruns", "big")["conditions"] if c["type"] == "Complete"
    )
    assert "see its notes.txt" in complete["message"]
