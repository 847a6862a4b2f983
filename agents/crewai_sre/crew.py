"""The SRE crew: a diagnosis agent (NL2Alerts, NL2Kubectl, NL2Metrics, NL2Logs, NL2Traces,
topology, the diagnosis report) then a mitigation agent (a plan in words, NL2Kubectl, a flag
switch, NL2Alerts, wait, the mitigation report), in sequence, the second reading the first's
findings."""

from __future__ import annotations

from crewai import Agent, Crew, Process, Task

from agents.crew.session import Session, alert_lines, member_options
from agents.crew.tools import Toolkit, diagnosis_tools, mitigation_tools

DIAGNOSIS = "SRE diagnosis engineer"
MITIGATION = "SRE mitigation engineer"


def build(session: Session) -> Crew:
    """The crew for one SRE trial."""
    task = session.task
    settings = session.settings
    kit = Toolkit(
        client=session.client,
        namespace=task.namespace,
        tool_model=session.tool_model,
        trajectory=session.trajectory,
        budget=settings.token_budget,
        retries=settings.max_retries,
        telemetry=task.telemetry,
    )
    signals = ", ".join(k for k, on in task.telemetry.model_dump().items() if on) or "none"
    common = member_options(settings)
    diagnoser = Agent(
        role=DIAGNOSIS,
        goal=(
            f"Find the root cause of the incident in namespace {task.namespace} and the chain "
            "along which it spread, from evidence: alerts, metrics, logs, traces, events and "
            "the state of the objects."
        ),
        backstory=(
            "You investigate incidents in a microservice shop on Kubernetes. You follow the "
            "symptoms from the alerting services down their calls to the service that fails "
            "first, and you check what is wrong with it (flags, configuration, images, "
            "resources, pods, network policies, selectors and ports) before you name it."
        ),
        llm=session.reasoning_model,
        tools=diagnosis_tools(kit, DIAGNOSIS),
        **common,
    )
    mitigator = Agent(
        role=MITIGATION,
        goal=(
            "Make the triggering alerts clear and stay cleared with the smallest safe change, "
            "and report truthfully what you did and what the alerts show."
        ),
        backstory=(
            "You fix incidents in production. You write a plan before you change anything, "
            "change one thing at a time, never touch the monitoring, and you believe the "
            "alerts, not your hopes."
        ),
        llm=session.reasoning_model,
        tools=mitigation_tools(kit, MITIGATION),
        **common,
    )
    diagnose = Task(
        description=(
            f"Alerts fire in namespace {task.namespace}:\n{alert_lines(task)}\n"
            f"Signals available: {signals}. Time left: {task.remaining_seconds or 0:.0f} s "
            "(every call costs some).\n"
            "Find the root cause: follow the failing calls to the service where the errors "
            "start, then find what is wrong with it. Then call submit_diagnosis once with the "
            "entities involved (root_cause true and its category for the root cause; kinds such "
            "as Deployment, Service, Pod, ConfigMap, Flag, NetworkPolicy), the propagation chain "
            "from the root cause to the alerting services (Kind/name), and your evidence."
        ),
        expected_output=(
            "The root cause (Kind/name and its condition), the propagation chain, and the "
            "evidence; the diagnosis report submitted."
        ),
        agent=diagnoser,
    )
    mitigate = Task(
        description=(
            "Using the diagnosis, first write your plan with mitigation_plan. Then carry it out "
            "one step at a time with nl2kubectl (or set_feature_flag for a feature flag). Then "
            "wait (at least 60 s) and check with nl2alerts that the triggering alerts cleared; "
            "wait again and check they stay cleared. Then call submit_mitigation with what you "
            "changed and resolved true only if the alerts stayed cleared. Do not change the "
            "monitoring or scale services to zero to silence alerts."
        ),
        expected_output="What was changed and whether the alerts stayed cleared.",
        agent=mitigator,
        context=[diagnose],
    )
    return Crew(
        agents=[diagnoser, mitigator],
        tasks=[diagnose, mitigate],
        process=Process.sequential,
        verbose=False,
        memory=False,
        cache=False,
        tracing=False,
    )
