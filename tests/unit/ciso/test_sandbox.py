"""The evidence sandbox runs a collection against a read-only copy of the environment without a
network; what a collection tries beyond reading is named and fails it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from itbench.ciso import sandbox
from itbench.core.ciso import host
from itbench.core.ciso.namespace import NAMESPACE, baseline_objects
from itbench.core.models.compliance import CollectionKind, EvidenceCollection

pytestmark = pytest.mark.skipif(
    bool(sandbox.sandbox_problem()), reason=f"no evidence sandbox here: {sandbox.sandbox_problem()}"
)

VIEW = sandbox.EnvironmentView(NAMESPACE, baseline_objects(), host.baseline_state())


def _script(text: str) -> sandbox.CollectionResult:
    collection = EvidenceCollection(kind=CollectionKind.SCRIPT, content=text)
    return sandbox.run_collection(collection, VIEW, timeout_seconds=20.0)


def test_a_script_reads_host_files_commands_and_kubectl() -> None:
    result = _script(
        "root=$(sshd -T | awk '$1==\"permitrootlogin\"{print $2}')\n"
        "mode=$(stat -c %a /etc/shadow)\n"
        "n=$(kubectl get deployments -n otel-demo -o json | python3 -c "
        "'import json,sys; print(len(json.load(sys.stdin)[\"items\"]))')\n"
        'printf \'{"root":"%s","mode":"%s","deployments":%s}\' "$root" "$mode" "$n" '
        '> "$ITBENCH_EVIDENCE"\n'
    )
    assert result.ok, result.problem or result.stderr
    assert result.evidence == {"root": "no", "mode": "0", "deployments": 10}


def test_evidence_on_stdout_is_taken_from_a_script() -> None:
    result = _script("echo '{\"a\": 1}'\n")
    assert result.ok and result.evidence == {"a": 1}


def test_writing_to_the_environment_fails_the_collection() -> None:
    result = _script("echo PermitRootLogin yes >> /etc/ssh/sshd_config\necho '{}'\n")
    assert not result.ok
    assert "tried to write to the environment" in result.problem


def test_changing_the_host_through_its_commands_fails_the_collection() -> None:
    result = _script("systemctl stop auditd\nkubectl delete pod x\necho '{}'\n")
    assert not result.ok
    assert "tried to write to the environment" in result.problem


def test_reaching_for_the_network_fails_the_collection() -> None:
    result = _script("curl -s https://example.com/cis.json || true\necho '{}'\n")
    assert not result.ok
    assert "reach the network" in result.problem
    raw = _script(
        "python3 -c 'import socket; socket.create_connection((\"192.0.2.1\", 80), 2)' || true\n"
        "echo '{}'\n"
    )
    assert not raw.ok
    assert "reach the network" in raw.problem


def test_a_collection_that_hangs_is_stopped() -> None:
    collection = EvidenceCollection(kind=CollectionKind.SCRIPT, content="sleep 600\n")
    result = sandbox.run_collection(collection, VIEW, timeout_seconds=2.0)
    assert not result.ok
    assert "did not finish within 2 s" in result.problem


def test_huge_output_is_stopped_and_bad_evidence_named() -> None:
    flood = _script("yes 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'\n")
    assert not flood.ok
    assert "printed more than" in flood.problem
    not_json = _script("echo 'not json' > \"$ITBENCH_EVIDENCE\"\n")
    assert not not_json.ok
    assert "not one JSON document" in not_json.problem
    nothing = _script("true\n")
    assert "left no evidence" in nothing.problem


def test_an_ansible_playbook_collects_from_the_host() -> None:
    playbook = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: effective sshd configuration
      ansible.builtin.command: sshd -T
      register: sshd
      changed_when: false
    - name: write the evidence
      ansible.builtin.copy:
        dest: "{{ lookup('env', 'ITBENCH_EVIDENCE') }}"
        content: "{{ {'sshd': sshd.stdout_lines} | to_json }}"
"""
    collection = EvidenceCollection(kind=CollectionKind.PLAYBOOK, content=playbook)
    result = sandbox.run_collection(collection, VIEW, timeout_seconds=60.0)
    assert result.ok, result.problem or result.stdout[-800:]
    assert "permitrootlogin no" in result.evidence["sshd"]


LINKED_DRIVER = """\
import json
import sys

from itbench.ciso import sandbox
from itbench.core.ciso import host
from itbench.core.models.compliance import CollectionKind, EvidenceCollection

playbook = '''\\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: write the evidence
      ansible.builtin.copy:
        dest: "{{ lookup('env', 'ITBENCH_EVIDENCE') }}"
        content: '{"ran": true}'
'''
view = sandbox.EnvironmentView("otel-demo", [], host.baseline_state())
collection = EvidenceCollection(kind=CollectionKind.PLAYBOOK, content=playbook)
result = sandbox.run_collection(collection, view, timeout_seconds=60.0)
json.dump({"ok": result.ok, "evidence": result.evidence, "problem": result.problem}, sys.stdout)
"""


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not run from a virtual environment")
def test_a_playbook_runs_from_a_virtual_environment_reached_through_a_link(tmp_path: Path) -> None:
    """A virtual environment reached through a symbolic link (a linked checkout's `.venv`) is
    bound where the link points, and the playbook runs on the interpreter found there."""
    link = tmp_path / "linked-venv"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    driver = tmp_path / "driver.py"
    driver.write_text(LINKED_DRIVER)
    ran = subprocess.run(
        [str(link / "bin" / "python"), str(driver)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    answer = json.loads(ran.stdout)
    assert answer == {"ok": True, "evidence": {"ran": True}, "problem": ""}, answer


def test_an_interpreter_installed_under_tmp_stays_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout (and its virtual environment) under /tmp is bound into the sandbox after its
    own /tmp is mounted, not hidden beneath it."""
    base = tmp_path.resolve()
    assert str(base).startswith("/tmp/"), "pytest's temporary directories live under /tmp here"
    (base / "marker.txt").write_text("seen\n")
    binds = sandbox._binds
    monkeypatch.setattr(sandbox, "_binds", lambda: [*binds(), str(base)])
    result = _script(f'printf \'{{"marker": "%s"}}\' "$(cat {base}/marker.txt)"\n')
    assert result.ok, result.problem or result.stderr
    assert result.evidence == {"marker": "seen"}
