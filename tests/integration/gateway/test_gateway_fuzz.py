"""Schemathesis over the checked-in OpenAPI document (docs/openapi.json): generated requests,
valid and invalid, against the gateway on the real simulator. The invariant: never a 5xx, every
error a bounded problem document, and the gateway still answering.

Budget: FUZZ_EXAMPLES (15) examples per operation over the 23 operations, derandomized so every
run sends the same requests: at most 345 requests, about 35 s of CPU on the 2-core machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import schemathesis
from gateway_fakes import Gateway
from hypothesis import HealthCheck, Phase, settings

from itbench.client import InProcessTransport
from itbench.gateway.sessions import TrialSession

ROOT = Path(__file__).resolve().parents[3]
FUZZ_EXAMPLES = 15
MAX_ANSWER_BYTES = 1_000_000
"""The largest answer a generated request may get (observations of a whole namespace)."""
MAX_PROBLEM_BYTES = 8192

schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.json")


class _Target:
    """One gateway on the simulator for the whole module, with a session renewed whenever a
    generated request finished it or waited it past its deadline."""

    def __init__(self) -> None:
        self.gateway = Gateway(inline=True)
        self.transport = InProcessTransport(self.gateway.app)
        self.renewals = 0
        self.session: TrialSession = self.gateway.open_sim("fuzz")

    def ready(self) -> TrialSession:
        remaining = self.session.remaining_seconds() or 0.0
        if self.session.state.value not in ("Ready", "Started") or remaining < 4000:
            self.gateway.registry.close("fuzz")
            self.renewals += 1
            self.session = self.gateway.open_sim("fuzz", seed=self.renewals)
        return self.session


@pytest.fixture(scope="module")
def target() -> Iterator[_Target]:
    yield _Target()


def _body(case: Any) -> tuple[bytes, str]:
    media = case.media_type or "application/json"
    body = case.body
    if body is None or type(body).__name__ == "NotSet":
        return b"", media
    if isinstance(body, bytes):
        return body, media
    if "x-www-form-urlencoded" in media and isinstance(body, dict):
        return urlencode(body).encode(), media
    return json.dumps(body).encode(), media


@schema.parametrize()
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_never_get_a_server_error(case: Any, target: _Target) -> None:
    session = target.ready()
    path = case.operation.path.replace("{trial_id}", "fuzz")
    body, media = _body(case)
    headers = [(b"authorization", f"Bearer {session.token}".encode())]
    if body:
        headers += [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    query = urlencode(
        {
            k: json.dumps(v) if isinstance(v, dict | list) else v
            for k, v in (case.query or {}).items()
        },
        doseq=True,
    ).encode()
    status, raw_headers, content = target.transport.exchange(
        case.method.upper(), path.encode(), query, headers, body
    )
    assert status < 500, content[:2000]
    assert len(content) <= MAX_ANSWER_BYTES
    if status >= 400:
        kinds = {k.decode().lower(): v.decode() for k, v in raw_headers}
        assert kinds["content-type"].startswith("application/problem+json")
        assert len(content) <= MAX_PROBLEM_BYTES, len(content)
    alive, _, _ = target.transport.exchange(
        "GET", b"/v1/trials", b"", [(b"authorization", f"Bearer {session.token}".encode())], b""
    )
    assert alive == 200
