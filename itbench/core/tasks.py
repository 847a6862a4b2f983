"""Which tasks a scenario's trials are scored on, by key.

Fault scenarios of SRE and FinOps have a diagnosis task, and a mitigation task when the agent can
reach the fault's cause. No-fault controls have one task of their own, the false-alarm check, so
that they are never averaged into the pass@1 of fault scenarios. CISO scenarios have posture.
"""

from __future__ import annotations

from itbench.core.faults import get_fault
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario

SRE_DIAGNOSIS = "sre.diagnosis"
SRE_MITIGATION = "sre.mitigation"
SRE_FALSE_ALARM = "sre.false-alarm"
FINOPS_DIAGNOSIS = "finops.diagnosis"
FINOPS_MITIGATION = "finops.mitigation"
FINOPS_FALSE_ALARM = "finops.false-alarm"
CISO_POSTURE = "ciso.posture"

ALL_TASKS = (
    SRE_DIAGNOSIS,
    SRE_MITIGATION,
    SRE_FALSE_ALARM,
    CISO_POSTURE,
    FINOPS_DIAGNOSIS,
    FINOPS_MITIGATION,
    FINOPS_FALSE_ALARM,
)
"""Every task key, in report order."""

DOMAIN_TASKS: dict[Domain, tuple[str, ...]] = {
    Domain.SRE: (SRE_DIAGNOSIS, SRE_MITIGATION),
    Domain.FINOPS: (FINOPS_DIAGNOSIS, FINOPS_MITIGATION),
    Domain.CISO: (CISO_POSTURE,),
}
"""The tasks of a fault scenario of each domain, when every task applies."""

FALSE_ALARM_TASKS: dict[Domain, str] = {
    Domain.SRE: SRE_FALSE_ALARM,
    Domain.FINOPS: FINOPS_FALSE_ALARM,
}


def mitigation_applies(scenario: Scenario) -> bool:
    """Whether the agent can reach every injected fault's cause (no injector-side fault); never
    in CISO, whose trials assess and do not repair."""
    if scenario.spec.domain == Domain.CISO:
        return False
    return all(get_fault(f.id).agent_reachable for f in scenario.spec.faults)


def tasks_for(scenario: Scenario) -> list[str]:
    """The keys of the tasks a scenario's trials are scored on.

    Controls: the false-alarm task only. Fault scenarios: the domain's tasks, without
    mitigation when a fault's cause is out of the agent's reach.
    """
    domain = scenario.spec.domain
    if scenario.spec.control:
        task = FALSE_ALARM_TASKS.get(domain)
        return [task] if task is not None else []
    tasks = list(DOMAIN_TASKS.get(domain, ()))
    if not mitigation_applies(scenario):
        tasks = [t for t in tasks if not t.endswith(".mitigation")]
    return tasks
