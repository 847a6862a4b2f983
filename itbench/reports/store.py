"""Stored trial records (`trials.jsonl`, one TrialRecord per line) and report JSON files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from itbench.core.models.report import Report, RunComparison, TrialRecord

TRIALS_FILE = "trials.jsonl"
"""The trial records file name inside a run's result directory."""


class TrialRecordError(ValueError):
    """A trial records file cannot be read; the message names the file and line."""


def _records_path(path: Path) -> Path:
    return path / TRIALS_FILE if path.is_dir() else path


def load_trial_records(path: Path) -> list[TrialRecord]:
    """Read trial records from a JSON-lines file (or a directory holding `trials.jsonl`).

    Blank lines are skipped.

    Raises:
        TrialRecordError: The file is missing or a line is not a valid record (every bad line
            is reported with its number and field path).
    """
    file = _records_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TrialRecordError(f"{file}: cannot read trial records ({exc.strerror})") from exc
    records: list[TrialRecord] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(TrialRecord.model_validate_json(line))
        except ValidationError as exc:
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "(line)"
                errors.append(f"{file}:{number}: {where}: {err['msg']}")
    if errors:
        raise TrialRecordError("invalid trial records:\n" + "\n".join(errors))
    return records


def trial_records_text(records: Iterable[TrialRecord]) -> str:
    """Trial records as the JSON lines of `trials.jsonl` (camelCase, keys sorted)."""
    return "".join(json.dumps(r.wire(), sort_keys=True) + "\n" for r in records)


def save_trial_records(records: Iterable[TrialRecord], path: Path) -> None:
    """Write trial records as JSON lines (camelCase), replacing the file atomically.

    Args:
        records: The records, written in order.
        path: The file (or a directory, which gets `trials.jsonl`); parents are created.
    """
    file = _records_path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_text(trial_records_text(records))
    tmp.replace(file)


def write_report_json(report: Report | RunComparison, path: Path) -> None:
    """Write a report (or a comparison of runs) as indented JSON (camelCase, unset optional
    fields left out).

    Args:
        report: The report.
        path: Destination file; parents are created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.wire(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
