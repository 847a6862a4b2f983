"""The CISO reference agent: reads the requirement's control, submits its hand-written
artefacts and finishes.

Kyverno class: a ValidatingPolicy with the control's CEL validation. K8sOPA: a kubectl
collection of the namespace's objects and Rego naming the violating targets. RHEL9OPA: a host
collection (an Ansible playbook for the sshd controls, a script for the others) and Rego deciding
`compliant`. KyvernoUpdate: the installed policy set as read through the objects API, with only
the concerned policy's validation replaced. The control is read from the requirement's first
line (`[<recommendation> <setting>] ...`); a requirement it does not know gets no artefacts.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from agents.ciso_reference import solutions
from agents.plugin import Agent
from agents.routines import begin, finish
from itbench.client import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
    ITBenchClient,
    TaskDescription,
)

CONTROL_LINE = re.compile(r"^\[(?P<cis>CIS [A-Za-z0-9]+ [0-9.]+) (?P<setting>[a-z0-9-]+)\]")
CLASS_LINE = re.compile(r"^Submit `(?P<what>[a-z]+)`")


def control_setting(requirement: str) -> str:
    """The setting the requirement's control assesses ('' when the first line names none)."""
    first = requirement.strip().splitlines()[0] if requirement.strip() else ""
    match = CONTROL_LINE.match(first)
    return match.group("setting") if match else ""


def concerned_policy(requirement: str) -> str:
    """Update class: the installed policy the requirement concerns ('' when none is named)."""
    match = re.search(r"the requirement concerns ([a-z0-9-]+)\.", requirement)
    return match.group(1) if match else ""


def _dump(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, width=100)


def _clean(policy: dict[str, Any]) -> dict[str, Any]:
    meta = policy.get("metadata") or {}
    keep = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    return {
        "apiVersion": policy["apiVersion"],
        "kind": policy["kind"],
        "metadata": keep,
        "spec": policy["spec"],
    }


def updated_set(client: ITBenchClient, setting: str, concerned: str) -> str:
    """The installed policy set with the concerned policy's validation replaced."""
    installed = client.get("validatingpolicies").items
    out = []
    for policy in sorted(installed, key=lambda p: str(p["metadata"]["name"])):
        doc = _clean(policy)
        if doc["metadata"]["name"] == concerned:
            doc = copy.deepcopy(doc)
            doc["spec"]["validations"][0]["expression"] = solutions.UPDATES[setting]
        out.append(doc)
    return _dump(out)


def artefacts(client: ITBenchClient, task: TaskDescription) -> ComplianceSubmission | None:
    """The reference artefacts for the trial's requirement (None: an unknown control)."""
    requirement = task.requirement
    setting = control_setting(requirement)
    concerned = concerned_policy(requirement)
    if concerned and setting in solutions.UPDATES:
        return ComplianceSubmission(
            kyverno=updated_set(client, setting, concerned),
            reasoning=f"{concerned} updated for the new requirement; the rest unchanged",
        )
    if setting in solutions.CEL:
        policy = solutions.validating_policy(
            f"cis-{setting}", solutions.CEL[setting], f"{setting}: not compliant"
        )
        return ComplianceSubmission(kyverno=_dump([policy]), reasoning=f"CEL check of {setting}")
    if setting in solutions.REGO_K8S:
        return ComplianceSubmission(
            rego=solutions.rego_module(solutions.REGO_K8S[setting]),
            collection=EvidenceCollection(
                kind=CollectionKind.SCRIPT, content=solutions.k8s_collection(task.namespace)
            ),
            reasoning=f"kubectl evidence, Rego check of {setting}",
        )
    if setting in solutions.REGO_HOST:
        playbook = setting in solutions.PLAYBOOK_SETTINGS
        collection = EvidenceCollection(
            kind=CollectionKind.PLAYBOOK if playbook else CollectionKind.SCRIPT,
            content=solutions.SSHD_PLAYBOOK if playbook else solutions.HOST_SCRIPT,
        )
        return ComplianceSubmission(
            rego=solutions.rego_module(solutions.REGO_HOST[setting]),
            collection=collection,
            reasoning=f"host evidence, Rego check of {setting}",
        )
    return None


def run(client: ITBenchClient) -> None:
    """Work one CISO trial with the reference artefacts.

    Args:
        client: The SDK client holding the trial's token.
    """
    task = begin(client)
    submission = artefacts(client, task)
    if submission is not None:
        client.submit_compliance(submission)
    finish(client)


AGENT = Agent(
    run=run,
    domains=("CISO",),
    description="Hand-written CIS policies and evidence collections for every CISO control.",
)
"""The registry's entry (`itbench.agents`)."""
