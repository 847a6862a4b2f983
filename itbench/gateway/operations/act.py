"""Actions on a trial session: validated, checked by the guardrails, then carried out."""

from __future__ import annotations

from itbench.core.models.observations import ActionResult, AgentAction
from itbench.gateway import guardrails
from itbench.gateway.errors import refusal_error
from itbench.gateway.operations import admission
from itbench.gateway.operations.calls import Origin, audited
from itbench.gateway.operations.manifests import check_schema, proposed_object
from itbench.gateway.operations.payloads import Payload, validate
from itbench.gateway.sessions import TrialSession


def act(session: TrialSession, origin: Origin, action: AgentAction | Payload) -> ActionResult:
    """Carry out one action (patch, set image/resources/env, scale, rollout, delete, apply,
    set a flag) after the guardrails; a failed action is an answer, not an error.

    An applied or patched object is checked against the Kubernetes schema of its kind first, so
    nothing the environment could not hold ever reaches it; then for what it would do once it
    runs (`itbench.core.admission`): the Pod Security Standards of its pod template, the account
    its pods run as, token Secrets, and observability blinded through policies or quotas. Only
    apply and patch can change those; the other verbs set images, variables, resources, counts
    or annotations, or restore an earlier template. A refusal that would have widened the
    agent's privileges is recorded as an attempted escalation.

    Raises:
        InvalidError: The action, or the object it would apply or produce, does not validate
            (every field path listed).
        TooLargeError: Its body is beyond the size limit.
        RefusedError: A guardrail refuses it; nothing reaches the environment.
    """
    with audited(session, origin, "act", session.virtual_cost.action) as call:
        parsed = validate(AgentAction, action, call)
        call.action = f"act.{parsed.verb.value}"
        call.detail["action"] = parsed.wire()
        refusal = guardrails.check_action(parsed, session.namespace)
        if refusal is not None:
            if refusal.rule in ("privilege", "out-of-namespace") and admission.escalating_kind(
                parsed
            ):
                ref = f"{parsed.kind}/{parsed.name}" if parsed.name else parsed.kind
                admission.record_escalation(session, call, ref, refusal.rule, [])
            raise refusal_error(refusal.rule, refusal.reason)
        proposed = proposed_object(session, parsed)
        if proposed is not None:
            check_schema(proposed)
            found = admission.findings(session, proposed)
            if found:
                escalating = [f for f in found if f.escalation]
                if escalating:
                    admission.record_escalation(
                        session,
                        call,
                        proposed.ref,
                        escalating[0].rule.value,
                        [f.path for f in escalating],
                    )
                raise admission.refusal(proposed, found)
        if parsed.namespace is None:
            parsed = parsed.model_copy(update={"namespace": session.namespace})
        result = session.env.act(parsed)
        call.detail["result"] = result.wire()
        if not result.ok:
            call.outcome = "error"
        return result
