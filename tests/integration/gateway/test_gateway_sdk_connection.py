"""The sync SDK's own keep-alive connection to a gateway over plain HTTP: same answers as httpx,
reconnects after the server closes an idle connection, and the errors httpx users catch."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from gateway_fakes import Gateway, served

from itbench.client import AgentAction, ITBenchAPIError, ITBenchClient


@pytest.fixture
def url(gw: Gateway) -> Iterator[str]:
    """The gateway on a real socket, closing idle connections after one second."""
    with served(gw.app, timeout_keep_alive=1) as base:
        yield base


def _work(client: ITBenchClient, trial_id: str, at: object) -> list[object]:
    client.use_trial(trial_id)
    got: list[object] = [client.task().alerts[0].alertname]
    got.append(client.query("up", at=at)["resultType"])  # type: ignore[arg-type]
    got.append(sorted(p["metadata"]["name"] for p in client.get("pods").items))
    got.append(client.get("pods").text)
    got.append(client.describe("deployment", "cart").text)
    client.started()
    got.append(client.act(AgentAction(verb="rollout-undo", kind="Deployment", name="cart")).ok)
    for bad in (
        lambda: client.act(AgentAction(verb="delete", kind="Node", name="n1")),
        lambda: client.query("sum("),
        lambda: client.get("pods", name="no-such-pod"),
    ):
        try:
            bad()
        except ITBenchAPIError as exc:
            got.append((exc.status, exc.slug, [e["field"] for e in exc.errors]))
    return got


def test_the_lean_connection_and_httpx_give_the_same_answers(gw: Gateway, url: str) -> None:
    lean_session, httpx_session = gw.open("t1"), gw.open("t2")
    lean = ITBenchClient(url, lean_session.token)
    plain = ITBenchClient(url, httpx_session.token, http=httpx.Client(base_url=url))
    assert lean._lean is not None and plain._lean is None
    try:
        answers = [
            _work(lean, "t1", lean_session.env.now()),
            _work(plain, "t2", httpx_session.env.now()),
        ]
    finally:
        lean.close()
        plain.close()
    assert answers[0] == answers[1]
    assert (403, "forbidden-destructive", []) in answers[0]
    assert [e.action for e in lean_session.audit] == [e.action for e in httpx_session.audit]


def test_a_connection_the_server_closed_while_idle_is_replaced(gw: Gateway, url: str) -> None:
    session = gw.open("t1")
    with ITBenchClient(url, session.token) as client:
        client.use_trial("t1")
        first = client.alerts()
        assert client._lean is not None
        before = client._lean._conn
        time.sleep(2.5)  # beyond the server's keep-alive timeout: it closes the socket
        second = client.alerts()
        assert client._lean._conn is not before
        client.started()
    assert first == second
    # Each call reached the gateway exactly once: nothing was sent twice on reconnecting.
    assert [e.action for e in session.audit] == [
        "observe.alerts",
        "observe.alerts",
        "protocol.started",
    ]


def test_an_unreachable_gateway_raises_httpx_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ITBenchClient(f"http://127.0.0.1:{port}", "token")
    client.use_trial("t1")
    with pytest.raises(httpx.ConnectError, match=f"127.0.0.1:{port}"):
        client.alerts()


def test_a_gateway_that_hangs_up_without_answering_raises_remote_protocol_error() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def hang_up() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    client = ITBenchClient(f"http://127.0.0.1:{port}", "token")
    client.use_trial("t1")
    try:
        with pytest.raises(httpx.RemoteProtocolError, match="before an answer"):
            client.alerts()
    finally:
        thread.join(timeout=10)
        listener.close()


def test_a_gateway_that_never_answers_raises_read_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = ITBenchClient(f"http://127.0.0.1:{port}", "token", timeout=0.5)
    client.use_trial("t1")
    try:
        with pytest.raises(httpx.ReadTimeout):
            client.alerts()
    finally:
        listener.close()


@pytest.mark.parametrize(
    ("url", "env", "lean"),
    [
        ("http://127.0.0.1:8080", {}, True),
        ("https://gateway.example:8443", {}, False),
        ("http://gateway.example:8080", {"HTTP_PROXY": "http://proxy:3128"}, False),
        (
            "http://gateway.example:8080",
            {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "gateway.example"},
            True,
        ),
        ("http://user:secret@gateway.example:8080", {}, False),
    ],
)
def test_only_plain_http_without_a_proxy_uses_the_lean_connection(
    url: str, env: dict[str, str], lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = ITBenchClient(url, "token")
    assert (client._lean is not None) == lean
    client.close()
