"""A CISO trial's RHEL9 host and evidence sandbox through the gateway and the SDK: files and
commands agree with the trial's variant, changes are refused, and a collection can be tried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agent_harness import Harness, catalog

from itbench.ciso import sandbox
from itbench.client import (
    CollectionKind,
    EvidenceCollection,
    ITBenchAPIError,
    ITBenchClient,
)
from itbench.core.models.base import Domain


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    yield Harness()


def _scenario(name: str) -> Any:
    return next(s for s in catalog() if s.name == name)


def test_host_files_and_commands_show_the_trials_variant(harness: Harness) -> None:
    seen: dict[str, Any] = {}

    def agent(client: ITBenchClient) -> None:
        client.next_trial()
        listing = client.host_files()
        seen["paths"] = {f.path: f.mode for f in listing.files}
        seen["sshd"] = client.host_files("/etc/ssh/sshd_config").files[0].content
        seen["forward"] = client.host_command(["sysctl", "-n", "net.ipv4.ip_forward"]).stdout
        seen["stop"] = client.host_command(["systemctl", "stop", "auditd"])
        with pytest.raises(ITBenchAPIError) as unknown:
            client.host_command(["rm", "-rf", "/"])
        seen["unknown"] = unknown.value.status
        with pytest.raises(ITBenchAPIError) as missing:
            client.host_files("/etc/nothing")
        seen["missing"] = missing.value.status
        client.finished()

    scenario = _scenario("ciso-rhel9-ip-forwarding")  # the first instance: compliant
    attempt = harness.attempt(scenario, agent)
    assert seen["paths"]["/etc/shadow"] == "0000"
    assert "PermitRootLogin no" in seen["sshd"]
    assert seen["forward"] == "0\n"
    assert seen["stop"].status == 77 and "read-only" in seen["stop"].stderr
    assert (seen["unknown"], seen["missing"]) == (400, 404)
    outcomes = {e.action: e.outcome for e in attempt.session.audit}
    assert outcomes["observe.host.command"] in ("refused", "error")


def test_an_sre_trial_has_no_host(harness: Harness) -> None:
    sre = next(s for s in catalog() if s.spec.domain == Domain.SRE and not s.spec.control)
    seen: dict[str, int] = {}

    def agent(client: ITBenchClient) -> None:
        client.next_trial()
        with pytest.raises(ITBenchAPIError) as caught:
            client.host_files()
        seen["status"] = caught.value.status
        client.finished()

    harness.attempt_or_skip(sre, agent)
    assert seen["status"] == 404


@pytest.mark.skipif(bool(sandbox.sandbox_problem()), reason="no evidence sandbox here")
def test_a_collection_can_be_tried_before_it_is_submitted(harness: Harness) -> None:
    seen: dict[str, Any] = {}

    def agent(client: ITBenchClient) -> None:
        client.next_trial()
        good = EvidenceCollection(
            kind=CollectionKind.SCRIPT,
            content='kubectl get roles -n otel-demo -o json > "$ITBENCH_EVIDENCE"\n',
        )
        seen["good"] = client.collect(good)
        bad = EvidenceCollection(kind=CollectionKind.SCRIPT, content="rm -f /etc/passwd\n")
        seen["bad"] = client.collect(bad)
        client.finished()

    harness.attempt(_scenario("ciso-opa-role-wildcard"), agent)
    names = {r["metadata"]["name"] for r in seen["good"].evidence["items"]}
    assert {"config-reader", "deploy-viewer", "release-manager"} <= names
    assert seen["bad"].ok is False
    assert "tried to write to the environment" in seen["bad"].problem
