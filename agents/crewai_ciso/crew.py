"""The CISO crew: a compliance analyst reads the requirement and the environment it concerns
(the namespace's objects, or the RHEL9 host's files and read-only commands) and says what
decides compliance; a compliance engineer then writes the artefacts the requirement asks for,
each linted and tried before it is kept, and submits them."""

from __future__ import annotations

from crewai import Agent, Crew, Process, Task

from agents.crew.session import Session, member_options
from agents.crew.tools import Toolkit
from agents.crewai_ciso.artefacts import Shape, read_requirement
from agents.crewai_ciso.tools import Drafts, analyst_tools, engineer_tools

ANALYST = "CISO compliance analyst"
ENGINEER = "Compliance engineer"

LOOK = {
    Shape.POLICY: "Read the namespace's Deployments and Pods (read_objects) to see where the "
    "setting lives in a pod's spec.",
    Shape.POLICY_SET: "Read the installed policy set (read_objects, kind validatingpolicies) "
    "and the Pods, and say how the concerned policy's validation must change.",
    Shape.K8S_REGO: "Read the objects of the kind the requirement assesses (read_objects) to see "
    "the fields that decide it.",
    Shape.HOST_REGO: "Read the host's files (host_files) and its read-only commands "
    "(host_command) that show the setting.",
}
WRITE = {
    Shape.POLICY: "Write the policy with write_policy (one CEL validation, true exactly when a "
    "pod complies).",
    Shape.POLICY_SET: "Write the updated policy set with write_policy: every installed policy, "
    "only the concerned one changed.",
    Shape.K8S_REGO: "Write the collection with write_collection (kubectl get ... -o json of "
    "the objects the control reads, one JSON document), then the Rego with write_rego "
    "(`violations` as Kind/name).",
    Shape.HOST_REGO: "Write the collection with write_collection (a script or playbook that "
    "reads the host's configuration into one JSON document), then the Rego with write_rego "
    "(`compliant`).",
}


def build(session: Session) -> Crew:
    """The crew for one CISO trial."""
    task = session.task
    settings = session.settings
    requirement = read_requirement(task.requirement)
    kit = Toolkit(
        client=session.client,
        namespace=task.namespace,
        tool_model=session.tool_model,
        trajectory=session.trajectory,
        budget=settings.token_budget,
        retries=settings.max_retries,
        telemetry=task.telemetry,
    )
    drafts = Drafts(requirement)
    common = member_options(settings)
    analyst = Agent(
        role=ANALYST,
        goal=(
            "Understand the CIS requirement and find, in the environment, exactly which "
            "fields, files or command outputs decide whether each target complies."
        ),
        backstory=(
            "You audit Kubernetes clusters and RHEL servers against the CIS benchmarks. You "
            "read the configuration as it is, note where a setting can be absent as well as "
            "set, and never guess a value you have not seen."
        ),
        llm=session.reasoning_model,
        tools=analyst_tools(kit, drafts, ANALYST),
        **common,
    )
    engineer = Agent(
        role=ENGINEER,
        goal=(
            "Turn the requirement into executable policy (and evidence collection) that gives "
            "every target its right posture in any state of the environment, and submit it."
        ),
        backstory=(
            "You write Kyverno and Rego policies and read-only evidence collections. A policy "
            "that passes everything or fails everything is worthless to you: it must decide "
            "on the setting itself, present or absent."
        ),
        llm=session.reasoning_model,
        tools=engineer_tools(kit, drafts, ENGINEER),
        **common,
    )
    analyse = Task(
        description=(
            f"The compliance requirement (namespace {task.namespace}):\n{task.requirement}\n\n"
            f"{LOOK[requirement.shape]} Then say precisely what decides compliance for each "
            "target, including when the field is absent."
        ),
        expected_output="Which fields, files or outputs decide compliance, and how.",
        agent=analyst,
    )
    author = Task(
        description=(
            f"Using the analysis, write the artefacts for the requirement:\n{requirement.control}"
            f"\n{WRITE[requirement.shape]} Each writer lints and tries what it writes; if it "
            "reports a problem, call it again with a clearer request. Then call "
            "submit_compliance once with your reasoning."
        ),
        expected_output="What was submitted and why it decides the requirement.",
        agent=engineer,
        context=[analyse],
    )
    return Crew(
        agents=[analyst, engineer],
        tasks=[analyse, author],
        process=Process.sequential,
        verbose=False,
        memory=False,
        cache=False,
        tracing=False,
    )
