"""A fault playbook dies with the process that runs it: an operator SIGKILLed while a playbook
runs leaves no ansible-playbook, no module and no command of that run behind to go on changing
the cluster after a restarted operator has undone what it made."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from itbench.environments.kube.faults import AnsiblePlaybookRunner, PlaybookError

SLEEP = """- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.command: sleep {seconds}
"""
FAIL = """- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Refuse
      ansible.builtin.fail:
        msg: refused on purpose
"""


def _processes_with(marker: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            out.append(int(entry.name))
    return out


def test_a_playbook_reports_the_failed_task_through_its_process(tmp_path: Path) -> None:
    (tmp_path / "fail.yaml").write_text(FAIL)
    runner = AnsiblePlaybookRunner(project_dir=tmp_path, timeout_seconds=120)
    with pytest.raises(PlaybookError, match="task 'Refuse': refused on purpose"):
        runner.run("fail.yaml", {})


def test_a_playbook_that_outruns_its_limit_is_killed_with_its_commands(tmp_path: Path) -> None:
    (tmp_path / "sleep.yaml").write_text(SLEEP.format(seconds=419))
    runner = AnsiblePlaybookRunner(project_dir=tmp_path, timeout_seconds=8)
    with pytest.raises(PlaybookError, match="did not finish within 8 s"):
        runner.run("sleep.yaml", {})
    assert _processes_with("sleep 419") == []


def test_killing_the_runner_kills_every_process_of_its_playbook(tmp_path: Path) -> None:
    (tmp_path / "sleep.yaml").write_text(SLEEP.format(seconds=417))
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from itbench.environments.kube.faults import AnsiblePlaybookRunner; "
            "AnsiblePlaybookRunner(project_dir=Path(sys.argv[1])).run('sleep.yaml', {})",
            str(tmp_path),
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _processes_with("sleep 417"):
            assert parent.poll() is None, "the runner ended before its playbook's command ran"
            time.sleep(0.2)
        assert _processes_with("sleep 417"), "the playbook's command never started"
        run_processes = _processes_with(str(tmp_path)) + _processes_with("sleep 417")
        assert len(run_processes) >= 2  # ansible-playbook (or its workers) and the command
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _processes_with("sleep 417"):
            time.sleep(0.2)
        assert _processes_with("sleep 417") == []
        assert [p for p in run_processes if _alive(p)] == []
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
