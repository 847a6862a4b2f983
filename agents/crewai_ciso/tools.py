"""The CISO crew's tools, over the SDK only: the namespace's objects, the RHEL9 host's files and
read-only commands, the writers of a policy, a collection and a Rego policy, and the submission.

A writer asks the tool model for the artefact from a request in words; reflection lints it
(`artefacts`), tries it where the platform lets an agent try (a collection in the evidence
sandbox, a Rego module on the evidence it collected) and re-prompts the tool model with the
error, a bounded number of times. A collection that would change the environment or reach the
network is refused outright, as a guardrail. What passes is kept as the draft the submission
sends; nothing unlinted is ever submitted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from crewai.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from agents.crew.budget import fit
from agents.crew.linters import GuardrailError, LintError, parse_kubectl
from agents.crew.tools import Toolkit, _ToolBase
from agents.crewai_ciso.artefacts import (
    Requirement,
    Shape,
    artefact_text,
    dump_policies,
    installed_policy,
    lint_collection,
    lint_policies,
    lint_rego,
    try_rego,
)
from itbench.client import (
    CollectionKind,
    ComplianceSubmission,
    EvidenceCollection,
    ITBenchAPIError,
)

POLICY_KIND = "validatingpolicies"
"""The kind an update's installed policy set is read as."""


@dataclass
class Drafts:
    """The artefacts that passed the lint (and, for a collection, the sandbox), to submit.

    Attributes:
        requirement: The task's requirement.
        installed: For an update, the installed policies as read.
        kyverno: The policy YAML.
        collection: The collection's kind and text.
        evidence: What the collection gathered when tried.
        rego: The Rego module.
        package: Its package path.
        submitted: Whether the gateway accepted a submission.
    """

    requirement: Requirement
    installed: list[dict[str, Any]] | None = None
    kyverno: str = ""
    collection: tuple[str, str] | None = None
    evidence: Any = None
    rego: str = ""
    package: str = ""
    submitted: bool = False


def write(
    kit: Toolkit,
    *,
    tool: str,
    actor: str,
    what: str,
    system: str,
    request: str,
    check: Callable[[str], str],
) -> str:
    """Write an artefact with the tool model; lint and try it; re-prompt with the error.

    Args:
        kit: The trial's toolkit.
        tool: The tool's name (for the trajectory).
        actor: Who asked.
        what: What is written ("Kyverno policy", "Rego policy", ...).
        system: The tool model's instructions.
        request: The request in words.
        check: Lints and tries the artefact and keeps it as the draft; returns what the
            reasoning model is told (raises LintError, or GuardrailError for a refusal).

    Returns:
        What the artefact did, a refusal, or why no valid one came.
    """
    messages: list[dict[str, str]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": request or "(no request given)"},
    ]
    last = ""
    for _attempt in range(kit.retries + 1):
        answer = str(kit.tool_model.call(messages, from_agent=None))
        candidate = artefact_text(answer)
        try:
            return check(candidate)
        except GuardrailError as exc:
            kit.trajectory.step("note", f"guardrail: {exc}", actor=actor, tool=tool)
            return f"Refused by the guardrails: {exc}. This is not allowed; choose another way."
        except LintError as exc:
            last = str(exc)
            kit.trajectory.step("note", f"lint: {exc}", actor=actor, tool=tool)
            messages += [
                {"role": "assistant", "content": answer},
                {
                    "role": "user",
                    "content": f"The {what} is not valid: {exc}\n"
                    f"Reply with the whole corrected {what} only.",
                },
            ]
    return (
        f"No valid {what} after {kit.retries + 1} attempts (last error: {last}). Rephrase the "
        "request more precisely."
    )


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")

    request: str = Field(
        default="", description="What the artefact must check or collect, in words."
    )


class _CisoTool(_ToolBase):
    drafts: Any = Field(default=None, exclude=True)


# ---- observation --------------------------------------------------------------------------


class _Objects(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: str = Field(description="The kind, as kubectl spells it: deployments, roles, ...")
    name: str = Field(default="", description="One object's name ('' for all of the kind).")


class ReadObjects(_CisoTool):
    """The namespace's objects of one kind, as YAML."""

    name: str = "read_objects"
    description: str = (
        "Read the namespace's objects of one kind as YAML (deployments, pods, roles, "
        "rolebindings, serviceaccounts, networkpolicies, validatingpolicies, ...). "
        'Input: {"kind": "deployments", "name": ""}.'
    )
    args_schema: type[BaseModel] = _Objects

    def work(self, kind: str = "", name: str = "") -> str:
        """The objects, without the server's bookkeeping."""
        kit: Toolkit = self.kit
        try:
            parse_kubectl(f"kubectl get {kind} {name}".strip(), kit.namespace, allow_actions=False)
        except LintError as exc:
            return f"Refused by the guardrails: {exc}. This is not allowed; choose another way."
        got = kit.client.get(kind, name or None)
        if not got.items:
            return f"No {kind} in namespace {kit.namespace}."
        items = []
        for obj in got.items:
            meta = {
                k: v
                for k, v in (obj.get("metadata") or {}).items()
                if k not in ("managedFields", "uid", "resourceVersion", "generation")
            }
            items.append({**obj, "metadata": meta})
        return yaml.safe_dump_all(items, sort_keys=False, width=100)


class _Path(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str = Field(default="", description="A file's path ('' lists every file).")


class HostFiles(_CisoTool):
    """The RHEL9 host's files: every path with mode and owners, or one file's text."""

    name: str = "host_files"
    description: str = (
        "List the RHEL9 host's files with mode and owners, or read one file's text. "
        'Input: {"path": "/etc/ssh/sshd_config"} (or {"path": ""} to list).'
    )
    args_schema: type[BaseModel] = _Path

    def work(self, path: str = "") -> str:
        """One file with its text, or one line per file."""
        files = self.kit.client.host_files(path or None)
        if path and files.files:
            f = files.files[0]
            return f"{f.path} {f.mode} {f.owner}:{f.group}\n{f.content or ''}"
        return "\n".join(f"{f.mode} {f.owner}:{f.group} {f.path}" for f in files.files)


class _Argv(BaseModel):
    model_config = ConfigDict(extra="ignore")

    argv: list[str] = Field(description='The command and its arguments, e.g. ["sshd", "-T"].')


class HostCommand(_CisoTool):
    """One of the RHEL9 host's read-only commands."""

    name: str = "host_command"
    description: str = (
        "Run one of the RHEL9 host's read-only commands (sshd -T, systemctl is-enabled, rpm -q, "
        "sysctl, getenforce, sestatus, auditctl -l, ...). "
        'Input: {"argv": ["sshd", "-T"]}.'
    )
    args_schema: type[BaseModel] = _Argv

    def work(self, argv: list[str] | None = None) -> str:
        """Its status and output; a command that would change the host is refused."""
        answer = self.kit.client.host_command(list(argv or []) or ["true"])
        if answer.status == 77:
            return f"Refused: {answer.stderr.strip() or 'the command would change the host'}."
        return f"exit {answer.status}\n{answer.stdout}{answer.stderr}"


# ---- writing ------------------------------------------------------------------------------

POLICY_SYSTEM = """You write Kubernetes compliance policies as YAML for a CIS requirement.
Reply with the YAML only (one ```yaml block), no explanations.
Write one Kyverno ValidatingPolicy (apiVersion policies.kyverno.io/v1) in Audit mode over pods
(matchConstraints.resourceRules: apiGroups [""], apiVersions ["v1"], operations [CREATE,
UPDATE], resources [pods]) whose spec.validations hold one CEL `expression` over `object` (the
Pod) that is true exactly when the pod complies, and a `message`. Use has() before reading an
optional field, and check init containers as well as containers.
The requirement:
{requirement}"""

POLICY_SET_SYSTEM = """You update an installed Kyverno policy set for a changed CIS requirement.
Reply with the whole set as YAML only (one ```yaml block, documents separated by ---), every
policy in it, no explanations. Change only the policy the requirement concerns ({concerned}):
its CEL validation `expression` over `object` (the Pod), true exactly when the pod complies.
Give every other policy back exactly as installed; add or remove none.
The requirement:
{requirement}
The installed set:
{installed}"""

K8S_COLLECTION_SYSTEM = """You write an evidence collection: a bash script that reads objects of
namespace {ns} with `kubectl get ... -n {ns} -o json` and writes ONE JSON document to the file
named by $ITBENCH_EVIDENCE (python3 is available to combine outputs). It runs in a sandbox
without network, on a read-only file system (/tmp is writable); it must never change anything.
Reply with the script only (one ```bash block). Collect what the requirement needs:
{requirement}"""

HOST_COLLECTION_SYSTEM = """You write an evidence collection for a RHEL9 host: a bash script (or
an Ansible playbook for hosts: localhost) that reads the host's configuration (files under /etc,
and read-only commands such as sshd -T, systemctl is-enabled, rpm -q, sysctl -n, getenforce)
and writes ONE JSON document to the file named by $ITBENCH_EVIDENCE (python3 is available). It
runs in a sandbox without network, on a read-only file system; it must never change anything.
Reply with the script or playbook only (one fenced block). Collect what the requirement needs:
{requirement}"""

REGO_SYSTEM = """You write one Rego v1 module (OPA 1.0 syntax: `import rego.v1`, `rule if {{...}}`,
`set contains x if {{...}}`) with one package, over `input`: the evidence a collection gathered.
{decision}
Reply with the module only (one ```rego block), no explanations.
The requirement:
{requirement}
The evidence as collected now (its shape; the environment may differ when it is assessed):
{evidence}"""

K8S_DECISION = (
    "Define `violations`: the set of targets that do not comply, each as a string "
    '"Kind/name" (e.g. sprintf("Deployment/%s", [d.metadata.name])); every other target '
    "complies."
)
HOST_DECISION = (
    "Define `compliant`: true exactly when the host complies (start with "
    "`default compliant := false`)."
)


class WritePolicy(_CisoTool):
    """The Kyverno policy (or the updated policy set), written, linted and kept to submit."""

    name: str = "write_policy"
    description: str = (
        "Have the policy written from your request (for an update: the whole installed set "
        "with the concerned policy changed), linted (YAML, policy kinds, CEL) and kept for "
        'submit_compliance. Input: {"request": "fail pods that set hostNetwork true"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The policy as kept, or why none is."""
        kit: Toolkit = self.kit
        drafts: Drafts = self.drafts
        req = drafts.requirement
        if req.shape == Shape.POLICY_SET:
            if drafts.installed is None:
                drafts.installed = [installed_policy(o) for o in kit.client.get(POLICY_KIND).items]
            system = POLICY_SET_SYSTEM.format(
                concerned=req.concerned or "the one named by the requirement",
                requirement=req.text,
                installed=dump_policies(drafts.installed),
            )
        else:
            system = POLICY_SYSTEM.format(requirement=req.text)

        def check(text: str) -> str:
            docs = lint_policies(text, req, drafts.installed)
            drafts.kyverno = dump_policies(docs)
            kinds = ", ".join(f"{d['kind']}/{(d.get('metadata') or {}).get('name')}" for d in docs)
            return f"Policy linted and kept for submission ({kinds}):\n{drafts.kyverno}"

        return write(
            kit,
            tool=self.name,
            actor=self.actor,
            what="policy YAML",
            system=system,
            request=request,
            check=check,
        )


class WriteCollection(_CisoTool):
    """The evidence collection, written, linted, tried in the sandbox and kept to submit."""

    name: str = "write_collection"
    description: str = (
        "Have the evidence collection written from your request, linted, tried in the "
        "platform's sandbox (read-only, no network) and kept for submit_compliance; shows the "
        'evidence it gathered. Input: {"request": "every Role of the namespace as JSON"}.'
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """The evidence gathered, or why no collection is kept."""
        kit: Toolkit = self.kit
        drafts: Drafts = self.drafts
        req = drafts.requirement
        template = HOST_COLLECTION_SYSTEM if req.shape == Shape.HOST_REGO else K8S_COLLECTION_SYSTEM
        system = template.format(ns=kit.namespace, requirement=req.text)

        def check(text: str) -> str:
            kind = lint_collection(text)
            collection = EvidenceCollection(kind=CollectionKind(kind), content=text)
            try:
                ran = kit.client.collect(collection)
            except ITBenchAPIError as exc:
                raise LintError(f"the sandbox refused it: {exc.detail}") from None
            if not ran.ok:
                tail = (ran.stderr or ran.stdout).strip()[-800:]
                raise LintError(
                    f"it failed in the sandbox: {ran.problem or 'no evidence'}"
                    + (f"\n{tail}" if tail else "")
                )
            drafts.collection = (kind, text)
            drafts.evidence = ran.evidence
            shown, _cut = fit(json.dumps(ran.evidence, indent=1, default=str), kit.budget // 2)
            return (
                f"Collection ({kind}) ran in the sandbox and is kept for submission; it gathered "
                f"{ran.evidence_bytes} bytes of evidence:\n{shown}"
            )

        return write(
            kit,
            tool=self.name,
            actor=self.actor,
            what="collection",
            system=system,
            request=request,
            check=check,
        )


class WriteRego(_CisoTool):
    """The Rego policy over the collected evidence, written, compiled, tried and kept."""

    name: str = "write_rego"
    description: str = (
        "Have the Rego policy written from your request over the evidence write_collection "
        "gathered (call that first), compiled with the platform's Rego engine, tried on the "
        'evidence and kept for submit_compliance. Input: {"request": "violations: every Role '
        "with '*' in its verbs\"}."
    )
    args_schema: type[BaseModel] = _Request

    def work(self, request: str = "") -> str:
        """What the policy decides on the evidence, or why none is kept."""
        kit: Toolkit = self.kit
        drafts: Drafts = self.drafts
        req = drafts.requirement
        if drafts.collection is None:
            return "No collection yet: call write_collection first, the Rego reads its evidence."
        evidence, _cut = fit(json.dumps(drafts.evidence, indent=1, default=str), kit.budget)
        system = REGO_SYSTEM.format(
            decision=HOST_DECISION if req.shape == Shape.HOST_REGO else K8S_DECISION,
            requirement=req.text,
            evidence=evidence,
        )

        def check(text: str) -> str:
            package = lint_rego(text, req)
            tried = try_rego(text, package, drafts.evidence)
            if not tried.get("ok"):
                raise LintError(f"evaluating it on the evidence failed: {tried.get('error')}")
            value = tried.get("value") or {}
            decision = {k: value[k] for k in ("violations", "compliant") if k in value}
            drafts.rego, drafts.package = text, package
            return (
                f"Rego ({package}) compiled and is kept for submission; on the evidence "
                f"collected now it decides {json.dumps(decision, default=str)}."
            )

        return write(
            kit,
            tool=self.name,
            actor=self.actor,
            what="Rego module",
            system=system,
            request=request,
            check=check,
        )


class _Submit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = Field(default="", description="Why the artefacts check the requirement.")


class SubmitCompliance(_CisoTool):
    """Submit the kept artefacts to the platform, which evaluates them."""

    name: str = "submit_compliance"
    description: str = (
        "Submit the artefacts kept by write_policy, or by write_collection and write_rego; the "
        'platform evaluates them on the environment. Input: {"reasoning": "..."}.'
    )
    args_schema: type[BaseModel] = _Submit

    def work(self, reasoning: str = "") -> str:
        """Accepted, or what is missing."""
        kit: Toolkit = self.kit
        drafts: Drafts = self.drafts
        req = drafts.requirement
        if req.policy:
            if not drafts.kyverno:
                return "Nothing to submit: no policy passed the lint yet; call write_policy."
            submission = ComplianceSubmission(kyverno=drafts.kyverno, reasoning=reasoning[:20_000])
        else:
            missing = [
                n
                for n, have in (
                    ("write_collection", drafts.collection),
                    ("write_rego", drafts.rego),
                )
                if not have
            ]
            if missing or drafts.collection is None:
                return f"Nothing to submit yet: call {' and '.join(missing)} first."
            kind, content = drafts.collection
            submission = ComplianceSubmission(
                rego=drafts.rego,
                collection=EvidenceCollection(kind=CollectionKind(kind), content=content),
                reasoning=reasoning[:20_000],
            )
        receipt = kit.client.submit_compliance(submission)
        drafts.submitted = True
        kit.submitted["compliance"] = receipt.accepted_at.isoformat()
        return "Artefacts accepted; the platform evaluates them on the environment."


def analyst_tools(kit: Toolkit, drafts: Drafts, actor: str) -> list[BaseTool]:
    """The analyst's tools: the objects, and for a host requirement the host."""
    tools: list[BaseTool] = [ReadObjects(kit=kit, drafts=drafts, actor=actor)]
    if drafts.requirement.shape == Shape.HOST_REGO:
        tools = [
            HostFiles(kit=kit, drafts=drafts, actor=actor),
            HostCommand(kit=kit, drafts=drafts, actor=actor),
        ]
    return tools


def engineer_tools(kit: Toolkit, drafts: Drafts, actor: str) -> list[BaseTool]:
    """The engineer's tools: the writers the requirement's artefacts need, and the submission."""
    writers: list[BaseTool]
    if drafts.requirement.policy:
        writers = [WritePolicy(kit=kit, drafts=drafts, actor=actor)]
    else:
        writers = [
            WriteCollection(kit=kit, drafts=drafts, actor=actor),
            WriteRego(kit=kit, drafts=drafts, actor=actor),
        ]
    return [*writers, SubmitCompliance(kit=kit, drafts=drafts, actor=actor)]
