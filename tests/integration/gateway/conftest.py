"""Fixtures: a gateway over fake environments, served in-process over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway_fakes import Gateway


@pytest.fixture(params=["threaded", "inline"])
def gw(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    """Every gateway test runs against both ways of serving endpoints (worker threads, and on
    the event loop as the embedded benchmark serves them)."""
    gateway = Gateway(inline=request.param == "inline")
    yield gateway
    gateway.http.close()
