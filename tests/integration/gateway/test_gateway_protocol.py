"""The run protocol over HTTP: polling, the task, STARTED / FINISHED, waiting and deadlines."""

from __future__ import annotations

from datetime import timedelta

import pytest
from gateway_fakes import Gateway

from itbench.client import AgentAction, ITBenchAPIError, ITBenchClient, NoReadyTrialError
from itbench.core.models.base import TelemetryToggles
from itbench.gateway.sessions import AgentState


def test_polling_lists_only_the_tokens_own_ready_trial(gw: Gateway) -> None:
    mine = gw.open("t1")
    gw.open("t2")
    client = ITBenchClient.in_process(gw.app, mine.token)
    ready = client.list_trials("Ready")
    assert [t.trial_id for t in ready] == ["t1"]
    assert ready[0].namespace == "otel-demo"
    assert ready[0].deadline == mine.deadline
    assert client.next_trial().trial_id == "t1"
    assert client.trial_id == "t1"


def test_next_trial_polls_with_the_injected_sleep_and_gives_up(gw: Gateway) -> None:
    waiting = gw.open("t1", ready=False)
    slept: list[float] = []
    client = ITBenchClient(
        "http://gw", waiting.token, http=gw.http, poll_interval=5.0, sleep=slept.append
    )
    with pytest.raises(NoReadyTrialError):
        client.next_trial(timeout=12)
    assert slept == [5.0, 5.0, 5.0]


def test_task_names_alerts_deadline_and_schemas_but_no_ground_truth(gw: Gateway) -> None:
    session = gw.open("t1", telemetry=TelemetryToggles(traces=False))
    task = gw.client(session).task()
    assert task.domain.value == "SRE"
    assert [a.alertname for a in task.alerts] == ["KubePodNotReady"]
    assert task.alerts[0].labels["deployment"] == "cart"
    assert task.deadline == session.deadline
    assert task.remaining_seconds == 600.0
    assert task.telemetry.traces is False
    assert task.tasks == ["diagnosis", "mitigation"]
    assert "rootCause" in str(task.output_schemas["diagnosis"])
    raw = gw.http.get("/v1/trials/t1/task", headers=gw.headers(session)).text
    assert "corrupt-image-cart" not in raw
    assert "does not exist" not in raw
    assert "rollout-undo" not in raw


def test_ciso_task_carries_the_requirement(gw: Gateway) -> None:
    session = gw.open("t1", domain="CISO")
    task = gw.client(session).task()
    assert task.requirement == "The cart runs an image that does not exist."
    assert task.tasks == ["compliance", "posture"]


def test_started_and_finished_move_the_state_and_are_recorded(gw: Gateway) -> None:
    session = gw.open("t1")
    client = gw.client(session)
    assert client.started().state == "Started"
    assert session.state == AgentState.STARTED
    assert session.started_at == session.env.now()
    assert client.finished().state == "Finished"
    assert client.finished().state == "Finished"
    assert session.finished_at is not None
    actions = [e.action for e in session.audit]
    assert actions == ["protocol.started", "protocol.finished", "protocol.finished"]


def test_calls_before_ready_are_refused_and_audited(gw: Gateway) -> None:
    session = gw.open("t1", ready=False)
    with pytest.raises(ITBenchAPIError) as err:
        gw.client(session).task()
    assert err.value.status == 409
    assert err.value.slug == "trial-not-ready"
    assert session.audit[-1].outcome == "refused"
    assert "not Ready" in session.audit[-1].reason


def test_calls_after_finished_are_refused(gw: Gateway) -> None:
    session = gw.open("t1")
    client = gw.client(session)
    client.finished()
    with pytest.raises(ITBenchAPIError) as err:
        client.alerts()
    assert err.value.slug == "trial-finished"
    assert session.audit[-1].action == "observe.alerts"
    assert session.audit[-1].outcome == "refused"


def test_wait_lets_virtual_time_pass_but_not_beyond_the_deadline(gw: Gateway) -> None:
    session = gw.open("t1", deadline_seconds=100)
    client = gw.client(session)
    result = client.wait(30)
    assert result.waited_seconds == 30
    assert result.remaining_seconds == 70
    assert result.firing_alerts == 1
    assert client.wait(500).waited_seconds == 70
    assert session.env.now() == session.deadline


def test_an_agent_working_after_the_deadline_is_refused_and_audited(gw: Gateway) -> None:
    session = gw.open("t1", deadline_seconds=10)
    client = gw.client(session)
    client.wait(10)
    for call in (client.alerts, client.task, client.started):
        with pytest.raises(ITBenchAPIError) as err:
            call()
        assert err.value.status == 409
        assert err.value.slug == "deadline-passed"
    refused = [e for e in session.audit if e.outcome == "refused"]
    assert len(refused) == 3
    assert all("deadline" in e.reason for e in refused)
    assert client.finished().state == "Finished"


def test_wait_rejects_a_bad_body_with_a_field_path(gw: Gateway) -> None:
    session = gw.open("t1")
    response = gw.http.post("/v1/trials/t1/wait", json={"seconds": -1}, headers=gw.headers(session))
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "body.seconds"
    assert session.audit[-1].outcome == "rejected"


def test_each_call_costs_virtual_seconds_by_kind(gw: Gateway) -> None:
    session = gw.open("t1")
    client = gw.client(session)
    start = session.env.now()
    client.task()
    client.alerts()
    client.get("pods")
    assert session.env.now() - start == timedelta(seconds=4)
    client.act(AgentAction(verb="rollout-undo", kind="Deployment", name="cart"))
    assert session.env.now() - start == timedelta(seconds=9)


def test_live_sessions_do_not_charge_virtual_time(gw: Gateway) -> None:
    session = gw.open("t1")
    session.virtual_time = False
    client = gw.client(session)
    client.alerts()
    client.get("pods")
    assert session.env.advanced == []  # type: ignore[attr-defined]
    assert client.task().call_costs_seconds["observation"] == 0.0


def test_a_closed_session_token_stops_working(gw: Gateway) -> None:
    session = gw.open("t1")
    gw.registry.close("t1")
    response = gw.http.get("/v1/trials/t1/task", headers=gw.headers(session))
    assert response.status_code == 401
    assert "no open trial" in response.json()["detail"]
    assert session.state == AgentState.CLOSED


def test_mark_ready_refuses_a_started_trial(gw: Gateway) -> None:
    session = gw.open("t1")
    gw.client(session).started()
    with pytest.raises(ValueError, match="only a Waiting trial"):
        gw.registry.mark_ready("t1", session.env.now())
    assert [s.trial_id for s in gw.registry.ready_trials("agent-a")] == []
