"""The run's artefact store: one directory per run with plans, per-trial status, trajectories
(the gateway's audit trail and the agent's own steps), agent output, trials.jsonl, report.json and
report.html. Writes are atomic so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from itbench.core.models.agent_record import (
    MAX_STEP_TEXT,
    AgentStep,
    AgentStepKind,
    ModelUsage,
    usage_of,
)
from itbench.core.models.trial import TrialStatus
from itbench.execution.plan import TrialPlan
from itbench.execution.runners import AgentFiles

MAX_STEPS = 20_000
"""Steps of an agent's trajectory read per trial; the rest is dropped (and said so)."""

MAX_STEPS_BYTES = 32 << 20
"""Bytes of an agent's trajectory file read per trial."""

_PLANS = TypeAdapter(list[TrialPlan])


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see the old or the new content, never a mix.

    Every worker writes a trial's status at each phase change: the common case (the directory
    exists) costs four system calls, and the directory is made only when missing.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    tmp.replace(path)


class RunStore:
    """Files of one benchmark run under `root` (e.g. `out/<run>/`)."""

    def __init__(self, root: Path) -> None:
        """Use (and create) the run directory.

        Args:
            root: The run directory.
        """
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    @property
    def plan_path(self) -> Path:
        """The planned trials (scenarios included), written before the first trial starts."""
        return self.root / "plan.json"

    @property
    def trials_path(self) -> Path:
        """One TrialRecord per line, per finished trial."""
        return self.root / "trials.jsonl"

    @property
    def report_json_path(self) -> Path:
        """The report as JSON."""
        return self.root / "report.json"

    @property
    def report_html_path(self) -> Path:
        """The self-contained HTML report."""
        return self.root / "report.html"

    def status_path(self, trial: str) -> Path:
        """Where a trial's status is persisted after every step."""
        return self.root / "trials" / f"{trial}.json"

    def trajectory_path(self, trial: str) -> Path:
        """Where a trial's audit trail is stored."""
        return self.root / "trajectories" / f"{trial}.json"

    def agent_dir(self, trial: str) -> Path:
        """Where a trial's agent artefacts go: stdout.log, stderr.log, steps.jsonl and, for an
        in-process agent that raised or was abandoned, traceback.txt."""
        return self.root / "agents" / trial

    def agent_files(self, trial: str) -> AgentFiles:
        """The paths of a trial's agent artefacts."""
        base = self.agent_dir(trial)
        return AgentFiles(
            stdout=base / "stdout.log",
            stderr=base / "stderr.log",
            steps=base / "steps.jsonl",
            traceback=base / "traceback.txt",
        )

    def clear_agent_files(self, trial: str) -> None:
        """Drop what an earlier, interrupted attempt of the trial's agent left."""
        shutil.rmtree(self.agent_dir(trial), ignore_errors=True)

    # ---- plan ---------------------------------------------------------------------------
    def save_plan(self, plans: Sequence[TrialPlan]) -> None:
        """Store the planned trials."""
        write_atomic(self.plan_path, _PLANS.dump_json(list(plans), by_alias=True).decode())

    def load_plan(self) -> list[TrialPlan]:
        """The planned trials.

        Raises:
            FileNotFoundError: When the directory holds no run.
        """
        return _PLANS.validate_json(self.plan_path.read_bytes())

    # ---- per-trial ----------------------------------------------------------------------
    def save_status(self, trial: str, status: TrialStatus) -> None:
        """Persist a trial's status."""
        write_atomic(self.status_path(trial), status.model_dump_json(by_alias=True))

    def load_status(self, trial: str) -> TrialStatus | None:
        """A trial's last persisted status, if any."""
        path = self.status_path(trial)
        if not path.exists():
            return None
        return TrialStatus.model_validate_json(path.read_bytes())

    def save_trajectory(self, trial: str, entries: Sequence[dict[str, Any]]) -> str:
        """Store a trial's audit trail; returns its path relative to the run directory."""
        path = self.trajectory_path(trial)
        write_atomic(path, json.dumps(list(entries), indent=1))
        return str(path.relative_to(self.root))

    def load_trajectory(self, trial: str) -> list[dict[str, Any]]:
        """A trial's audit trail (empty when none was stored)."""
        path = self.trajectory_path(trial)
        if not path.exists():
            return []
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data) if isinstance(data, list) else []

    def load_steps(self, trial: str) -> list[AgentStep]:
        """The trajectory the trial's agent reported (bounded; empty when it reported none).

        Lines that are not valid steps are skipped; a last `note` step says how many lines
        were skipped or dropped over the limits.
        """
        return read_steps(self.agent_files(trial).steps)

    def load_step_file(self, trial: str) -> StepFile:
        """The trajectory the trial's agent reported, with the lines left out counted."""
        return read_step_file(self.agent_files(trial).steps)


@dataclass(frozen=True)
class StepFile:
    """What an agent's steps file holds.

    Attributes:
        steps: The valid steps, in order, plus a final note when lines were left out.
        invalid: Lines that were not valid steps.
        dropped: Lines or chunks beyond the limits.
    """

    steps: list[AgentStep]
    invalid: int = 0
    dropped: int = 0

    def usage(self) -> ModelUsage | None:
        """The model usage of the steps, with the lines left out counted (None: no file, or an
        empty one)."""
        if not self.steps:
            return None
        return usage_of(self.steps).model_copy(
            update={"invalid_steps": self.invalid, "dropped_steps": self.dropped}
        )


def read_steps(path: Path) -> list[AgentStep]:
    """Read an agent's trajectory file (JSON lines of `AgentStep`), within the limits.

    Args:
        path: The file.

    Returns:
        The valid steps, in order, plus a final note when lines were skipped or dropped.
    """
    return read_step_file(path).steps


def read_step_file(path: Path) -> StepFile:
    """Read an agent's trajectory file and count what was left out (see `read_steps`)."""
    if not path.is_file():
        return StepFile([])
    steps: list[AgentStep] = []
    skipped = dropped = 0
    with path.open("rb") as fh:
        data = fh.read(MAX_STEPS_BYTES + 1)
    if len(data) > MAX_STEPS_BYTES:
        data = data[:MAX_STEPS_BYTES]
        dropped += 1
    for raw in data.splitlines():
        if not raw.strip():
            continue
        if len(steps) >= MAX_STEPS:
            dropped += 1
            continue
        try:
            doc = json.loads(raw)
            if isinstance(doc, dict) and isinstance(doc.get("text"), str):
                text = doc["text"]
                if len(text) > MAX_STEP_TEXT:
                    cut = len(text) - MAX_STEP_TEXT
                    doc["text"] = f"{text[:MAX_STEP_TEXT]}\n[... {cut} chars cut]"
            steps.append(AgentStep.model_validate(doc))
        except (ValueError, ValidationError):
            skipped += 1
    if skipped or dropped:
        steps.append(
            AgentStep(
                kind=AgentStepKind.NOTE,
                actor="platform",
                text=f"{skipped} line(s) were not valid steps; {dropped} line(s) or chunks "
                f"beyond the limits ({MAX_STEPS} steps, {MAX_STEPS_BYTES} bytes) were dropped",
            )
        )
    return StepFile(steps, skipped, dropped)
