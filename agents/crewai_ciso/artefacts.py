"""What the CISO crew writes and the lint behind its reflection: which artefacts a requirement
asks for, and the checks a policy, a Rego module or a collection passes before it is tried or
submitted (YAML parses, the kinds are ones the class takes, CEL and Rego compile with the
engines the platform uses, a collection only reads).

A problem raises `LintError` (the tool model is re-prompted with it); a collection that would
change the environment or reach the network raises `GuardrailError` (a line not to cross).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from agents.crew.linters import GuardrailError, LintError

REGO_TIMEOUT_SECONDS = 10.0
"""How long the local trial of a Rego module on the collected evidence may take."""


class Shape(StrEnum):
    """What a requirement asks for (the scenario classes, as the task words them)."""

    POLICY = "policy"
    """A new Kyverno (or admission) policy."""
    POLICY_SET = "policy-set"
    """The installed Kyverno policy set, updated."""
    K8S_REGO = "k8s-rego"
    """A kubectl collection of the namespace's objects and Rego naming violating targets."""
    HOST_REGO = "host-rego"
    """A host collection (script or Ansible playbook) and Rego deciding the host's posture."""


@dataclass(frozen=True)
class Requirement:
    """A CISO task's requirement, read from its text.

    Attributes:
        text: The requirement as the task gives it.
        shape: What to submit.
        control: The control's first line (`[CIS ... setting] title`).
        concerned: For an update, the installed policy the requirement concerns ('' unknown).
    """

    text: str
    shape: Shape
    control: str
    concerned: str = ""

    @property
    def policy(self) -> bool:
        """Whether the artefact is Kyverno YAML (else a collection and Rego)."""
        return self.shape in (Shape.POLICY, Shape.POLICY_SET)


def read_requirement(text: str) -> Requirement:
    """The shape of what a requirement asks for, from the task's words.

    Raises:
        ValueError: When the text asks for neither a policy nor a collection.
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    concerned = re.search(r"the requirement concerns ([A-Za-z0-9.-]+?)\.?(?:\s|$)", text)
    if "Submit `kyverno`" in text:
        set_asked = "policy set" in text and concerned is not None
        shape = Shape.POLICY_SET if set_asked else Shape.POLICY
    elif "Submit `collection`" in text:
        shape = Shape.HOST_REGO if re.search(r"Assess the .*\bHost/", text) else Shape.K8S_REGO
    else:
        raise ValueError(
            "the requirement names no artefact (neither `kyverno` nor `collection`); "
            "nothing to write"
        )
    return Requirement(text, shape, first, concerned.group(1) if concerned else "")


def artefact_text(answer: str) -> str:
    """The artefact in a model's answer: the first fenced block, or the whole answer."""
    body = answer.strip()
    fence = re.search(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", body, re.DOTALL)
    return (fence.group(1) if fence else body).strip("\n") + "\n"


# ---- policies -----------------------------------------------------------------------------

POLICY_KINDS: dict[str, tuple[str, ...]] = {
    "ValidatingPolicy": (
        "policies.kyverno.io/v1",
        "policies.kyverno.io/v1beta1",
        "policies.kyverno.io/v1alpha1",
    ),
    "ValidatingAdmissionPolicy": (
        "admissionregistration.k8s.io/v1",
        "admissionregistration.k8s.io/v1beta1",
    ),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io/v1",
        "admissionregistration.k8s.io/v1beta1",
    ),
    "ClusterPolicy": ("kyverno.io/v1", "kyverno.io/v2beta1"),
    "Policy": ("kyverno.io/v1", "kyverno.io/v2beta1"),
}
"""The policy kinds the task names, with their API versions (docs/agent-api.md, CISO)."""


def _documents(text: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise LintError(f"the YAML does not parse: {str(exc).splitlines()[0]}") from None
    out: list[dict[str, Any]] = []
    for n, doc in enumerate(docs, 1):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out += [d for d in doc.get("items") or [] if isinstance(d, dict)]
        elif isinstance(doc, dict):
            out.append(doc)
        else:
            raise LintError(f"document {n} is a {type(doc).__name__}, not a policy object")
    if not out:
        raise LintError("the YAML holds no document")
    return out


def _expressions(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, CEL) of a policy's expressions."""
    name = (doc.get("metadata") or {}).get("name", "?")
    spec = doc.get("spec") or {}
    found: list[tuple[str, str]] = []
    if doc.get("kind") in ("ClusterPolicy", "Policy"):
        for r, rule in enumerate(spec.get("rules") or []):
            cel = ((rule or {}).get("validate") or {}).get("cel") or {}
            for e, item in enumerate(cel.get("expressions") or []):
                if isinstance(item, dict):
                    where = f"{name}.spec.rules[{r}].validate.cel.expressions[{e}]"
                    found.append((where, str(item.get("expression", ""))))
        return found
    for key in ("validations", "matchConditions", "variables"):
        for n, item in enumerate(spec.get(key) or []):
            if isinstance(item, dict) and "expression" in item:
                found.append((f"{name}.spec.{key}[{n}].expression", str(item["expression"])))
    return found


def _cel_problems(expressions: list[tuple[str, str]]) -> list[str]:
    try:
        import cel
    except ImportError:  # the platform still compiles them; the lint does what it can
        return []
    problems = []
    for where, expression in expressions:
        if not expression.strip():
            problems.append(f"{where}: empty expression")
            continue
        try:
            cel.compile(expression)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            problems.append(f"{where}: CEL does not compile: {first[:300]}")
    return problems


def lint_policies(
    text: str, requirement: Requirement, installed: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Check a Kyverno answer: YAML, kinds and versions the class takes, CEL rules that compile;
    for an update, the installed set with only the concerned policy changed.

    Args:
        text: The policy YAML.
        requirement: The task's requirement.
        installed: For an update, the installed policies as read (apiVersion, kind, metadata,
            spec).

    Returns:
        The policy documents.

    Raises:
        LintError: Naming the document and what is wrong.
    """
    docs = _documents(text)
    for n, doc in enumerate(docs, 1):
        kind, api = doc.get("kind"), doc.get("apiVersion")
        if kind not in POLICY_KINDS:
            raise LintError(
                f"document {n}: kind {kind!r} is not a policy the task takes; use "
                f"{', '.join(POLICY_KINDS)}"
            )
        if api not in POLICY_KINDS[str(kind)]:
            raise LintError(
                f"document {n} ({kind}): apiVersion {api!r}; use "
                f"{' or '.join(POLICY_KINDS[str(kind)])}"
            )
        if not (doc.get("metadata") or {}).get("name"):
            raise LintError(f"document {n} ({kind}): metadata.name is required")
        if kind in ("ClusterPolicy", "Policy"):
            rules = (doc.get("spec") or {}).get("rules") or []
            if not rules or any(not ((r or {}).get("validate") or {}).get("cel") for r in rules):
                raise LintError(
                    f"document {n} ({kind}): every rule needs validate.cel; pattern-style rules "
                    "are evaluated on a live cluster only (a ValidatingPolicy is simplest)"
                )
        elif kind != "ValidatingAdmissionPolicyBinding" and not (doc.get("spec") or {}).get(
            "validations"
        ):
            raise LintError(f"document {n} ({kind}): spec.validations is empty")
    problems = _cel_problems([e for doc in docs for e in _expressions(doc)])
    if problems:
        raise LintError("; ".join(problems[:5]))
    if requirement.shape == Shape.POLICY_SET and installed is not None:
        _lint_update(docs, requirement, installed)
    return docs


def _normal(doc: dict[str, Any]) -> str:
    return json.dumps(
        [doc.get("apiVersion"), doc.get("kind"), doc.get("spec")], sort_keys=True, default=str
    )


def _lint_update(
    docs: list[dict[str, Any]], requirement: Requirement, installed: list[dict[str, Any]]
) -> None:
    names = [str((d.get("metadata") or {}).get("name")) for d in docs]
    before = {str(p["metadata"]["name"]): p for p in installed}
    problems = [f"{n} is given twice" for n in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"{n} is missing (keep every installed policy)" for n in before if n not in names]
    problems += [f"{n} is not installed (add no policy)" for n in names if n not in before]
    for doc, name in zip(docs, names, strict=True):
        changed = name in before and _normal(doc) != _normal(before[name])
        if changed and requirement.concerned and name != requirement.concerned:
            problems.append(
                f"{name} was changed, but the requirement concerns {requirement.concerned} "
                "only; give it back as installed"
            )
    mine = [d for d, n in zip(docs, names, strict=True) if n == requirement.concerned]
    same = mine and requirement.concerned in before
    if same and _normal(mine[0]) == _normal(before[requirement.concerned]):
        problems.append(f"{requirement.concerned} is unchanged; update it for the requirement")
    if problems:
        raise LintError("; ".join(problems))


def dump_policies(docs: list[dict[str, Any]]) -> str:
    """Policies as one YAML stream."""
    return yaml.safe_dump_all(docs, sort_keys=False, width=100)


def installed_policy(obj: dict[str, Any]) -> dict[str, Any]:
    """An installed policy as an update gives it back (without the server's bookkeeping)."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
        "spec": obj.get("spec"),
    }


# ---- collections --------------------------------------------------------------------------

_MUTATING_KUBECTL = re.compile(
    r"\bkubectl\b[^\n|;&]*?\s(apply|create|delete|patch|replace|edit|scale|label|annotate|"
    r"set|rollout|exec|cp|run|drain|cordon|taint)\b"
)
_NETWORK = re.compile(r"(^|[\s;|&(`'\"])(curl|wget|nc|ncat|ssh|scp|telnet|ftp)(\s|$)")
_MUTATING_HOST = re.compile(
    r"\b(systemctl\s+(start|stop|restart|enable|disable|mask)|chmod|chown|rm\s+-|sed\s+-i|"
    r"setenforce|sysctl\s+-w|useradd|passwd\s)"
)


def collection_kind(text: str) -> str:
    """`playbook` when the text is a YAML list of plays, else `script`."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return "script"
    is_plays = isinstance(doc, list) and bool(doc)
    if is_plays and all(isinstance(p, dict) and "hosts" in p for p in doc):
        return "playbook"
    return "script"


def lint_collection(text: str) -> str:
    """Check a collection before it is tried: it parses (bash -n, or YAML plays) and only reads.

    Returns:
        Its kind, `script` or `playbook`.

    Raises:
        GuardrailError: It would change the environment or reach the network.
        LintError: It does not parse, or writes no evidence.
    """
    if not text.strip():
        raise LintError("the collection is empty")
    for pattern, why in (
        (_MUTATING_KUBECTL, "changes objects with kubectl; a collection only reads (get)"),
        (_NETWORK, "reaches for the network; the sandbox has none and collections stay local"),
        (_MUTATING_HOST, "changes the host; a collection only reads its configuration"),
    ):
        found = pattern.search(text)
        if found:
            raise GuardrailError(f"the collection {why} (`{found.group(0).strip()}`)")
    kind = collection_kind(text)
    if kind == "playbook":
        return kind
    try:
        checked = subprocess.run(
            ["bash", "-n"], input=text, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return kind
    if checked.returncode != 0:
        error = checked.stderr.strip().replace("bash: ", "")
        raise LintError(f"the script does not parse (bash -n): {error[:500]}")
    return kind


# ---- Rego ---------------------------------------------------------------------------------

_DECISION = re.compile(r"^(?:default\s+)?(violations|compliant)\b", re.MULTILINE)
REGO_HINT = "Rego v1 (OPA 1.0) syntax: `import rego.v1`, `rule if { ... }`, `set contains x if`"


def lint_rego(module: str, requirement: Requirement) -> str:
    """Check a Rego module: it compiles with regorus (the platform's engine) as one package and
    defines the decision the requirement asks for.

    Returns:
        The package path (`data.<package>`).

    Raises:
        LintError: The compiler's message, or the missing decision.
    """
    import regorus

    engine = regorus.Engine()
    try:
        engine.add_policy("policy.rego", module)
        packages = [str(p) for p in engine.get_packages()]
    except Exception as exc:
        message = str(exc).split("Stack backtrace:", 1)[0].strip()
        lines = [line for line in message.splitlines() if line.strip()][:8]
        error = " | ".join(lines)[:800]
        raise LintError(f"the Rego does not compile: {error} ({REGO_HINT})") from None
    if len(packages) != 1:
        raise LintError(f"the module must declare one package, it declares {len(packages)}")
    decisions = set(_DECISION.findall(module))
    if requirement.shape == Shape.K8S_REGO and "violations" not in decisions:
        raise LintError(
            'define `violations`: the set of targets that do not comply, as "Kind/name" '
            '(e.g. `violations contains sprintf("Deployment/%s", [d.metadata.name]) if {...}`)'
        )
    if not decisions:
        raise LintError("define `compliant` (a boolean, with `default compliant := false`)")
    return packages[0]


def try_rego(module: str, package: str, evidence: Any) -> dict[str, Any]:
    """Evaluate the module's package on evidence in a child process with a time limit, as
    `opa eval` would, so a module that never terminates costs one try.

    Returns:
        `{"ok": True, "value": ...}` or `{"ok": False, "error": ...}`.
    """
    request = json.dumps({"module": module, "package": package, "input": evidence}, default=str)
    try:
        child = subprocess.run(
            [sys.executable, "-m", "agents.crewai_ciso.artefacts"],
            input=request,
            capture_output=True,
            text=True,
            timeout=REGO_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the evaluation took over {REGO_TIMEOUT_SECONDS:g} s"}
    try:
        answer: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": (child.stderr.strip() or "the evaluation crashed")[-500:]}
    return answer


def _evaluate_stdin() -> None:
    import regorus

    request = json.loads(sys.stdin.read())
    try:
        engine = regorus.Engine()
        engine.add_policy("policy.rego", request["module"])
        engine.set_input_json(json.dumps(request["input"]))
        result = json.loads(engine.eval_query_as_json(request["package"]))
        rows = result.get("result") or []
        value = rows[0]["expressions"][0].get("value") if rows else None
        print(json.dumps({"ok": True, "value": value}, default=str))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": str(exc).split("Stack backtrace:")[0][:800]}))


if __name__ == "__main__":
    _evaluate_stdin()
