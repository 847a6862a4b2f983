"""The platform's evaluation of a CISO trial's artefacts, on the trial's variant and on its
counterpart (the same scenario with every setting flipped).

Each variant is a fresh compliance twin with the variant's faults injected. A Kyverno or
admission policy (set) is evaluated with the CEL engine on the namespace's objects; a collection
is run in the evidence sandbox against a read-only view of the twin and the Rego policy is
evaluated with regorus on the evidence it wrote. Verdicts on Pods and ReplicaSets count for the
Deployment that owns them. Nothing an artefact does can stop the evaluation: a problem is
recorded with its reason and the variant fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from itbench.bounded_yaml import YamlError, YamlLimits, parse_all
from itbench.ciso.engines import EngineSandbox, EngineUnavailableError, engines
from itbench.ciso.sandbox import EnvironmentView, run_collection
from itbench.core.ciso.classes import CLASS_RULES, CisoClass, class_of
from itbench.core.ciso.namespace import TARGET_KINDS
from itbench.core.ciso.policies import POLICY_SETS
from itbench.core.ciso.posture import aggregate, counterpart, environment_targets, policy_update
from itbench.core.faults import get_fault
from itbench.core.models.compliance import (
    ComplianceEvaluation,
    ComplianceSubmission,
    TargetVerdict,
    VariantEvaluation,
    VerdictResult,
)
from itbench.core.models.scenario import Scenario
from itbench.environments.sim.compliance import POLICY_KINDS, ComplianceEnvironment

POLICY_YAML_LIMITS = YamlLimits(max_bytes=64 * 1024, max_depth=32, max_documents=16)
"""What a submitted policy (set) may hold."""
MAX_VIOLATIONS = 10_000
"""Most entries of a Rego `violations` the platform reads."""


def twin_of(scenario: Scenario, seed: int = 0) -> ComplianceEnvironment:
    """A provisioned compliance twin with the scenario's faults injected."""
    env = ComplianceEnvironment.for_scenario(scenario, seed=seed)
    env.provision()
    ns = scenario.spec.environment.namespace
    for n, fault in enumerate(scenario.spec.faults):
        env.inject(f"fault-{n}", get_fault(fault.id).changes(fault.args, ns))
    return env


def parse_policies(text: str) -> list[dict[str, Any]]:
    """The policy documents of a submission's `kyverno` text.

    Raises:
        ValueError: Not YAML, or a document that is not a mapping (the message says which).
    """
    try:
        docs = parse_all(text, POLICY_YAML_LIMITS)
    except YamlError as exc:
        raise ValueError(f"InvalidYAML: {exc}") from None
    out: list[dict[str, Any]] = []
    for n, doc in enumerate(docs):
        if (
            isinstance(doc, dict)
            and doc.get("kind") == "List"
            and isinstance(doc.get("items"), list)
        ):
            out += [d for d in doc["items"] if isinstance(d, dict)]
            continue
        if not isinstance(doc, dict):
            raise ValueError(
                f"InvalidYAML: document {n + 1} is a {type(doc).__name__}, not a policy"
            )
        out.append(doc)
    if not out:
        raise ValueError("InvalidYAML: the text holds no document")
    return out


def _normal(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return json.dumps(
        {
            "apiVersion": doc.get("apiVersion"),
            "kind": doc.get("kind"),
            "name": meta.get("name"),
            "spec": doc.get("spec"),
        },
        sort_keys=True,
    )


def policy_set_changes(docs: list[dict[str, Any]], scenario: Scenario) -> list[str]:
    """Update class: what the submitted set changed beyond the policy the requirement concerns.

    Every installed policy but that one must come back exactly (apiVersion, kind, name and
    spec); none may be added or removed.
    """
    update = policy_update(scenario)
    if update is None:
        return []
    set_id, concerned = update
    installed = {str(p["metadata"]["name"]): p for p in POLICY_SETS.get(set_id, ())}
    submitted: dict[str, dict[str, Any]] = {}
    out: list[str] = []
    for doc in docs:
        name = str((doc.get("metadata") or {}).get("name", ""))
        if name in submitted:
            out.append(f"{name} is submitted twice")
        submitted[name] = doc
    for name, policy in installed.items():
        if name not in submitted:
            out.append(f"{name} was removed")
        elif name != concerned and _normal(submitted[name]) != _normal(policy):
            out.append(f"{name} was changed, but the requirement does not concern it")
    out += [f"{name} was added" for name in submitted if name not in installed]
    return out


def _namespace_object(env: ComplianceEnvironment) -> dict[str, Any]:
    found = env.get_objects("Namespace", env.namespace)
    return found[0] if found else {"kind": "Namespace", "metadata": {"name": env.namespace}}


def _assessed(env: ComplianceEnvironment) -> list[dict[str, Any]]:
    """The objects a policy is evaluated on: the namespace's, less the policies themselves."""
    return [o for o in env.objects() if o.get("kind") not in POLICY_KINDS]


def target_verdicts(verdicts: Mapping[str, TargetVerdict]) -> list[TargetVerdict]:
    """The verdicts on targets (of the kinds controls assess), sorted by target."""
    kinds = (*TARGET_KINDS, "Host")
    return [v for t, v in sorted(verdicts.items()) if t.split("/", 1)[0] in kinds]


def _kyverno(
    submission: ComplianceSubmission,
    scenario: Scenario,
    cls: CisoClass,
    variants: list[tuple[str, Scenario]],
    box: EngineSandbox,
) -> ComplianceEvaluation:
    try:
        docs = parse_policies(submission.kyverno)
    except ValueError as exc:
        return ComplianceEvaluation(submitted=True, problem=str(exc)[:2000])
    built = box.call({"op": "cel-build", "docs": docs})
    if not built.get("ok"):
        if built.get("liveOnly"):
            return ComplianceEvaluation(
                submitted=True, live_only=True, problem=str(built.get("error", ""))[:2000]
            )
        return ComplianceEvaluation(
            submitted=True, problem=f"InvalidPolicy: {built.get('error', '')}"[:2000]
        )
    untouched = policy_set_changes(docs, scenario) if cls == CisoClass.KYVERNO_UPDATE else []
    out: list[VariantEvaluation] = []
    for label, variant in variants:
        env = twin_of(variant)
        answer = box.call(
            {
                "op": "cel-eval",
                "docs": docs,
                "objects": _assessed(env),
                "namespace": _namespace_object(env),
            }
        )
        if not answer.get("ok"):
            out.append(
                VariantEvaluation(
                    variant=label,
                    engine="cel",
                    problem=f"PolicyFailed: {answer.get('error', '')}"[:2000],
                )
            )
            continue
        verdicts = [
            TargetVerdict(target=str(t), result=VerdictResult(str(r)), detail=str(d)[:1000])
            for t, r, d in answer.get("results", [])
        ]
        out.append(
            VariantEvaluation(
                variant=label,
                engine="cel",
                verdicts=target_verdicts(aggregate(verdicts, env.owners())),
            )
        )
    return ComplianceEvaluation(submitted=True, untouched=untouched[:200], variants=out)


def rego_verdicts(
    value: Any, targets: list[str], owners: Mapping[str, str]
) -> tuple[list[TargetVerdict], str]:
    """The verdicts a Rego package's document gives the targets, or why it gives none.

    `violations` (a set or array of `Kind/name`) fails the targets it names and passes every
    other; a target of another kind it names (a Role when the control assesses Deployments) gets
    a failing verdict too, which grading counts as a finding outside the control. `compliant` (a
    boolean) decides the one target of a single-target control.
    """
    if not isinstance(value, dict):
        return [], "the policy's package evaluated to nothing (is a rule defined?)"
    if "violations" in value:
        raw = value["violations"]
        if isinstance(raw, dict):
            raw = [k for k, v in raw.items() if v]
        if not isinstance(raw, list):
            return [], f"violations is a {type(raw).__name__}, not a set of `Kind/name`"
        if len(raw) > MAX_VIOLATIONS:
            return [], f"violations holds {len(raw)} entries, more than {MAX_VIOLATIONS}"
        named: set[str] = set()
        for item in raw:
            text = item if isinstance(item, str) else None
            if isinstance(item, dict):
                text = item.get("target") if isinstance(item.get("target"), str) else None
            if text is None:
                return [], f"violations holds {json.dumps(item)[:120]}, not a `Kind/name` string"
            named.add(owners.get(text.strip(), text.strip()))
        verdicts = [
            TargetVerdict(
                target=t,
                result=VerdictResult.FAIL if t in named else VerdictResult.PASS,
                detail="listed in violations" if t in named else "",
            )
            for t in targets
        ]
        kinds = (*TARGET_KINDS, "Host")
        verdicts += [
            TargetVerdict(
                target=t,
                result=VerdictResult.FAIL,
                detail="listed in violations, but not a target of this control",
            )
            for t in sorted(named - set(targets))
            if t.split("/", 1)[0] in kinds
        ]
        return verdicts, ""
    if "compliant" in value:
        flag = value["compliant"]
        if not isinstance(flag, bool):
            return [], f"compliant is a {type(flag).__name__}, not a boolean"
        if len(targets) != 1:
            return [], (
                f"compliant decides one target, but this control assesses {len(targets)}: "
                "define violations"
            )
        result = VerdictResult.PASS if flag else VerdictResult.FAIL
        return [TargetVerdict(target=targets[0], result=result)], ""
    return [], "the policy's package defines neither violations nor compliant"


def _rego(
    submission: ComplianceSubmission,
    variants: list[tuple[str, Scenario]],
    box: EngineSandbox,
    collection_timeout: float,
) -> ComplianceEvaluation:
    if not submission.rego.strip():
        return ComplianceEvaluation(
            submitted=True, problem="MissingRego: this class takes `rego` with a `collection`"
        )
    if submission.collection is None:
        return ComplianceEvaluation(
            submitted=True,
            problem="MissingCollection: this class takes a `collection` that writes the evidence",
        )
    compiled = box.call({"op": "rego-compile", "module": submission.rego})
    if not compiled.get("ok"):
        return ComplianceEvaluation(
            submitted=True, problem=f"RegoCompile: {compiled.get('error', '')}"[:2000]
        )
    out: list[VariantEvaluation] = []
    platform_error = False
    for label, variant in variants:
        env = twin_of(variant)
        view = EnvironmentView(env.namespace, env.objects(), env.host_state())
        result = run_collection(submission.collection, view, timeout_seconds=collection_timeout)
        if not result.ok:
            platform_error = platform_error or result.platform_error
            out.append(
                VariantEvaluation(
                    variant=label,
                    engine="regorus",
                    evidence_bytes=result.evidence_bytes,
                    problem=f"CollectionFailed: {result.problem}"[:2000],
                )
            )
            continue
        answer = box.call({"op": "rego-eval", "module": submission.rego, "input": result.evidence})
        if not answer.get("ok"):
            out.append(
                VariantEvaluation(
                    variant=label,
                    engine="regorus",
                    evidence_bytes=result.evidence_bytes,
                    problem=f"RegoFailed: {answer.get('error', '')}"[:2000],
                )
            )
            continue
        verdicts, problem = rego_verdicts(
            answer.get("value"), environment_targets(variant), env.owners()
        )
        out.append(
            VariantEvaluation(
                variant=label,
                engine="regorus",
                evidence_bytes=result.evidence_bytes,
                verdicts=verdicts,
                problem=f"RegoResult: {problem}" if problem else "",
            )
        )
    return ComplianceEvaluation(submitted=True, variants=out, platform_error=platform_error)


def evaluate_submission(
    scenario: Scenario,
    submission: ComplianceSubmission,
    *,
    box: EngineSandbox | None = None,
    collection_timeout: float = 60.0,
) -> ComplianceEvaluation:
    """Evaluate a trial's artefacts on its variant and on the counterpart.

    Args:
        scenario: The trial's instance.
        submission: The accepted artefacts.
        box: The engine process (default: this process's).
        collection_timeout: Wall-clock limit of one collection run.
    """
    cls = class_of(scenario.spec.scenario_class)
    if cls is None:
        return ComplianceEvaluation(
            submitted=True, problem=f"{scenario.spec.scenario_class} is not a CISO class"
        )
    variants = [("trial", scenario), ("counterpart", counterpart(scenario))]
    engine = box or engines()
    started = time.monotonic()
    try:
        if CLASS_RULES[cls].policy == "kyverno":
            if not submission.kyverno.strip():
                evaluation = ComplianceEvaluation(
                    submitted=True,
                    problem=f"MissingPolicy: the {cls.value} class takes `kyverno` (policy YAML)",
                )
            else:
                evaluation = _kyverno(submission, scenario, cls, variants, engine)
        else:
            evaluation = _rego(submission, variants, engine, collection_timeout)
    except EngineUnavailableError as exc:
        evaluation = ComplianceEvaluation(submitted=True, problem=str(exc), platform_error=True)
    seconds = round(time.monotonic() - started, 3)
    return evaluation.model_copy(update={"evaluation_seconds": seconds})
