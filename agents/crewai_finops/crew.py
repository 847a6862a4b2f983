"""The FinOps crew: a diagnosis agent finds where a cost alert comes from (cost and usage series,
autoscalers, resource requests and limits, the budget) and a mitigation agent moves the footprint
toward the optimal cost without breaking the service, then checks the alerts stay cleared."""

from __future__ import annotations

from crewai import Agent, Crew, Process, Task

from agents.crew.session import Session, alert_lines, member_options
from agents.crew.tools import Toolkit, diagnosis_tools, mitigation_tools

DIAGNOSIS = "FinOps analyst"
MITIGATION = "FinOps engineer"


def build(session: Session) -> Crew:
    """The crew for one FinOps trial."""
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
    common = member_options(settings)
    analyst = Agent(
        role=DIAGNOSIS,
        goal=(
            f"Find what makes namespace {task.namespace} cost more than it should: which "
            "autoscaler, resource setting or budget is behind the cost alert."
        ),
        backstory=(
            "You look after a shop's cloud bill. You compare what workloads request with what "
            "they use, read autoscalers' targets and replica bounds, and check whether a "
            "budget is simply set below the normal cost, before you name a cause."
        ),
        llm=session.reasoning_model,
        tools=diagnosis_tools(kit, DIAGNOSIS),
        **common,
    )
    engineer = Agent(
        role=MITIGATION,
        goal=(
            "Bring the cost back to the optimum without hurting the service, with the "
            "smallest change, and report truthfully what the alerts show."
        ),
        backstory=(
            "You tune Kubernetes workloads for cost. You write a plan first, change one setting "
            "at a time, never remove capacity a service needs, and check the result."
        ),
        llm=session.reasoning_model,
        tools=mitigation_tools(kit, MITIGATION, metrics=True),
        **common,
    )
    diagnose = Task(
        description=(
            f"Cost alerts fire in namespace {task.namespace}:\n{alert_lines(task)}\n"
            f"Time left: {task.remaining_seconds or 0:.0f} s (every call costs some).\n"
            "Find the origin: compare the cost and usage series with the budget, read the "
            "HorizontalPodAutoscalers (targets, min and max replicas) and the workloads' "
            "resource requests, and the budget configuration. Then call submit_diagnosis once "
            "with the entity at the origin (root_cause true and its category, e.g. a "
            "HorizontalPodAutoscaler with Autoscaling, a Deployment with ResourceLimits or a "
            "ConfigMap with AlertingThreshold), what it affects, and your evidence."
        ),
        expected_output="The origin of the cost (Kind/name and why), the diagnosis submitted.",
        agent=analyst,
    )
    mitigate = Task(
        description=(
            "Using the diagnosis, write your plan with mitigation_plan, then change the setting "
            "with nl2kubectl (e.g. patch an autoscaler's target or bounds, or a budget set below "
            "the normal cost). Then wait (at least 120 s), check with nl2alerts and nl2metrics "
            "that the cost alert cleared and the service still runs, wait again and check it "
            "stays cleared, and call submit_mitigation (resolved true only if it did)."
        ),
        expected_output="What was changed, the cost after, and whether the alerts cleared.",
        agent=engineer,
        context=[diagnose],
    )
    return Crew(
        agents=[analyst, engineer],
        tasks=[diagnose, mitigate],
        process=Process.sequential,
        verbose=False,
        memory=False,
        cache=False,
        tracing=False,
    )
