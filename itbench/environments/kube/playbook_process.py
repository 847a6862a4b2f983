"""One playbook run in a process that dies with the process that asked for it.

`AnsiblePlaybookRunner` starts this module with the run's request on standard input; it answers
one JSON line (the run's status and, when it failed, what the failed task said). When the
parent dies (the kernel's parent-death signal, or a watch on the parent's pid) this process kills
every process it started, however deep (ansible-runner starts ansible-playbook in a terminal
session of its own, out of this process group), then itself: a run never goes on changing a
cluster for an operator that is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

PR_SET_PDEATHSIG = 1


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _kill_group(*_: object) -> None:
    for _round in range(3):  # a process may fork while the first round kills
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    os.killpg(os.getpgrp(), signal.SIGKILL)


STOP = signal.SIGUSR1
"""The signal that ends a run with all its processes: the parent-death signal, and what the
runner sends on a timeout (ansible-runner takes SIGTERM and SIGINT over for its own cancel, which
leaves the playbook's forked workers running)."""


def _on_parent_death(parent: int) -> None:
    signal.signal(STOP, _terminate)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, STOP, 0, 0, 0)
    except (OSError, AttributeError):
        libc = None  # not Linux: the watch below still notices
    if os.getppid() != parent:  # the parent died before the signal was asked for
        _kill_group()

    def watch() -> None:
        while not stop.wait(0.5):
            if os.getppid() != parent:
                _kill_group()

    stop = threading.Event()
    threading.Thread(target=watch, daemon=True).start()


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    _kill_group()


def main() -> int:
    """Run the request on standard input; print the answer as one JSON line."""
    request: dict[str, Any] = json.loads(sys.stdin.read())
    _on_parent_death(int(request["parent"]))
    import ansible_runner

    from itbench.environments.kube.faults import failure_of

    result = ansible_runner.run(
        private_data_dir=request["private_data_dir"],
        project_dir=request["project_dir"],
        playbook=request["playbook"],
        extravars=request["extravars"],
        envvars=request["envvars"],
        quiet=True,
        # Only failures are read back (`failure_of`); the other events stay small.
        only_failed_event_data=True,
    )
    answer = {"status": result.status}
    if result.status != "successful":
        answer["failure"] = failure_of(result)
    print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
