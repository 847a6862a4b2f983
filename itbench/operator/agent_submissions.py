"""AgentSubmission handlers: validate, check an image agent's credentials Secret, summarise runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from itbench.core.models.agent_submission import (
    AgentSubmission,
    AgentSubmissionPhase,
    AgentSubmissionSpec,
    AgentSubmissionStatus,
    RunRecord,
)
from itbench.core.models.base import GROUP, VERSION
from itbench.core.models.benchmark_run import BenchmarkRunStatus
from itbench.operator.bodies import condition, parse, parsed_status, problem_text, source
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, BENCHMARK_RUNS
from itbench.operator.runtime import OperatorRuntime

LAST_RUNS = 10


def _agent_of_run(run: Mapping[str, Any]) -> object:
    # Read defensively: the run may be malformed (its own reconcile says how), and must not
    # break this agent's reconcile.
    spec = run.get("spec")
    ref = spec.get("agentRef") if isinstance(spec, Mapping) else None
    return ref.get("name") if isinstance(ref, Mapping) else None


def _last_runs(runtime: OperatorRuntime, namespace: str, agent: str) -> list[RunRecord]:
    runs = [
        r for r in runtime.api.list_objects(BENCHMARK_RUNS, namespace) if _agent_of_run(r) == agent
    ]
    runs.sort(
        key=lambda r: (str(r["metadata"].get("creationTimestamp", "")), r["metadata"]["name"])
    )
    records: list[RunRecord] = []
    for run in reversed(runs[-LAST_RUNS:]):
        status = parsed_status(BenchmarkRunStatus, run) or BenchmarkRunStatus()
        records.append(
            RunRecord(
                run=run["metadata"]["name"],
                phase=status.phase.value,
                diagnosis_pass_at_1=status.summary.diagnosis_pass_at_1,
                mitigation_pass_at_1=status.summary.mitigation_pass_at_1,
            )
        )
    return records


def _best(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def reconcile_agent(runtime: OperatorRuntime, body: kopf.Body) -> None:
    """Validate one AgentSubmission and write its status, with an Event when its phase changes.

    Args:
        runtime: The operator's runtime.
        body: The AgentSubmission object.
    """
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = meta.get("generation")
    raw = body.get("status")
    old = dict(raw) if isinstance(raw, Mapping) else {}
    previous = parsed_status(AgentSubmissionStatus, body) or AgentSubmissionStatus()
    agent, problems = parse(AgentSubmission, body)
    ready = False
    valid = agent is not None
    if agent is None:
        reason = "InvalidSpec"
        message = (
            f"{source(body)} is invalid: {problem_text(problems)}; fix the spec and apply again"
        )
    else:
        spec: AgentSubmissionSpec = agent.spec
        holder = spec.runtime.image or spec.runtime.command
        secret = holder.credentials_secret_ref if holder is not None else None
        if secret is not None and not runtime.api.secret_exists(namespace, secret.name):
            reason = "CredentialsSecretMissing"
            message = (
                f"Secret {namespace}/{secret.name} (spec.runtime.{spec.runtime.kind()}."
                "credentialsSecretRef) does not exist; create it with the model credentials"
            )
        else:
            ready = True
            reason = "Validated"
            message = f"{spec.runtime.kind()} agent {spec.agent_name!r} is ready"
    runs = _last_runs(runtime, namespace, name)
    status = previous.model_copy(
        update={
            "phase": AgentSubmissionPhase.READY if ready else AgentSubmissionPhase.INVALID,
            "ready": ready,
            "last_runs": runs,
            "best_diagnosis_pass_at_1": _best([r.diagnosis_pass_at_1 for r in runs]),
            "best_mitigation_pass_at_1": _best([r.mitigation_pass_at_1 for r in runs]),
            "observed_generation": generation,
            "conditions": condition(
                condition(
                    previous.conditions,
                    "Valid",
                    valid,
                    "Validated" if valid else reason,
                    "the spec is valid" if valid else message,
                    generation,
                ),
                "Ready",
                ready,
                reason,
                message,
                generation,
            ),
        }
    )
    new = status.wire()
    if status.phase != previous.phase or (not ready and previous.observed_generation != generation):
        runtime.api.event(dict(body), reason, message, warning=not ready)
    runtime.api.patch_status(AGENT_SUBMISSIONS, namespace, name, new, old)


def register(registry: kopf.OperatorRegistry, runtime: OperatorRuntime) -> None:
    """Register the AgentSubmission handlers of one operator instance.

    Args:
        registry: The operator's Kopf registry.
        runtime: What the handlers share.
    """

    @kopf.timer(
        GROUP,
        VERSION,
        AGENT_SUBMISSIONS,
        id="reconcile",
        interval=runtime.config.agent_tick_seconds,
        registry=registry,
    )
    def reconcile(body: kopf.Body, **_: Any) -> None:
        with runtime.metrics.reconcile("AgentSubmission"):
            reconcile_agent(runtime, body)
