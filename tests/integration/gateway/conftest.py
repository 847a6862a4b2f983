"""Fixtures: a gateway over fake environments, served in-process over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway_fakes import Gateway


@pytest.fixture
def gw() -> Iterator[Gateway]:
    gateway = Gateway()
    yield gateway
    gateway.http.close()
