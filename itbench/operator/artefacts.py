"""What the operator keeps of a run in ConfigMaps: each Trial's trajectory and the run's reports.

A ConfigMap holds at most 1 MiB (its keys and values together), so every document here is cut
to fit under a cap and says in itself what was cut.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from itbench.operator.bodies import ANNOTATION_PREFIX

MAX_NAME = 253
CONFIG_MAP_BYTES = 1 << 20
"""kube-apiserver's limit on a ConfigMap's data and binaryData together."""
TRAJECTORY_BYTES = 900 << 10
"""Most bytes of a Trial's stored trajectory document (the rest of 1 MiB is left to metadata)."""
REPORT_BYTES = 900 << 10
"""Most bytes of the run's report ConfigMap (its keys and values)."""
PAGE_TRAJECTORY_BYTES = 32 << 20
"""Most bytes of stored trajectories the operator reads to render one run's report page (its
memory stays bounded; the trajectories beyond stay in their Trials' ConfigMaps)."""
TRAJECTORY_KEY = "trajectory.json"
"""The key of a trajectory ConfigMap holding the document."""
NOTES_KEY = "notes.txt"
"""The key of the run's report ConfigMap saying what was compressed or left out."""
ARTEFACT_LABEL = f"{ANNOTATION_PREFIX}artefact"
"""Label telling the operator's ConfigMaps apart: `trajectory` or `report`."""
TRAJECTORY = "trajectory"
REPORT = "report"


def trajectory_name(trial: str) -> str:
    """The name of the ConfigMap holding a Trial's trajectory (stable per Trial name)."""
    name = f"{trial}-trajectory"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(trial.encode()).hexdigest()[:12]
    return f"{trial[: MAX_NAME - 24].rstrip('-.')}-{digest}-trajectory"


def config_map_ref(name: str) -> str:
    """How status refers to a ConfigMap: `configmap/<name>`."""
    return f"configmap/{name}"


def referenced_config_map(ref: str | None) -> str | None:
    """The ConfigMap name a `configmap/<name>` reference names (None for anything else)."""
    if not ref or not ref.startswith("configmap/"):
        return None
    return ref.removeprefix("configmap/") or None


def _size(text: str) -> int:
    return len(text.encode())


def trajectory_document(
    trial: str, run: str, calls: Sequence[Mapping[str, Any]], limit: int = TRAJECTORY_BYTES
) -> tuple[str, int]:
    """A Trial's trajectory as the JSON document its ConfigMap stores, within `limit` bytes.

    The document holds the trial (`namespace/name`), its run, every call of the gateway's audit
    trail in order, and how many there were. When the calls do not fit, the first ones that do
    are kept and `truncated` and `note` say how many were dropped.

    Args:
        trial: The Trial, `namespace/name`.
        run: Its BenchmarkRun's name.
        calls: The audit trail, oldest call first.
        limit: Most bytes of the document (UTF-8).

    Returns:
        The document and the number of calls left out.
    """
    total = len(calls)

    def render(kept: int) -> str:
        doc: dict[str, Any] = {
            "trial": trial,
            "run": run,
            "totalCalls": total,
            "storedCalls": kept,
            "truncated": kept < total,
            "note": ""
            if kept == total
            else (
                f"{total - kept} of {total} calls were left out: the trajectory is stored in a "
                f"ConfigMap, which is capped at {limit} bytes (Kubernetes allows 1 MiB); the "
                f"first {kept} calls are kept"
            ),
            "calls": list(calls[:kept]),
        }
        return json.dumps(doc, sort_keys=True, default=str)

    text = render(total)
    if _size(text) <= limit:
        return text, 0
    low, high = 0, total - 1  # the most calls that fit lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if _size(render(middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    return render(low), total - low


def stored(key: str, data: Mapping[str, str], binary: Mapping[str, str]) -> bool:
    """Whether `report_data` kept a file, as text or compressed."""
    return key in data or f"{key}.gz" in binary


def trajectory_calls(data: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The calls a stored trajectory document holds (empty when there is none or it is bad)."""
    if not data or TRAJECTORY_KEY not in data:
        return []
    try:
        doc = json.loads(data[TRAJECTORY_KEY])
    except ValueError:
        return []
    calls = doc.get("calls") if isinstance(doc, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def report_data(
    files: Sequence[tuple[str, str]], limit: int = REPORT_BYTES, notes: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Fit the run's report files into one ConfigMap of at most `limit` bytes.

    Files are taken in order (most important first). One that does not fit as text is stored
    gzip-compressed as binaryData `<key>.gz`; one that does not fit even so is left out. Each
    compression or omission is a line of the returned notes (stored as `notes.txt`).

    Args:
        files: (key, text) pairs, e.g. report.json, trials.jsonl, report.html.
        limit: Most bytes of keys and values together.
        notes: Notes known beforehand (they come first).

    Returns:
        The text keys, the base64-encoded binary keys and the notes.
    """
    data: dict[str, str] = {}
    binary: dict[str, str] = {}
    notes = list(notes)
    # The notes take room too; keep a margin for them rather than refit afterwards.
    budget = limit - 4096
    used = 0
    for key, text in files:
        raw = text.encode()
        if used + len(key) + len(raw) <= budget:
            data[key] = text
            used += len(key) + len(raw)
            continue
        packed = gzip.compress(raw, mtime=0)
        packed_key = f"{key}.gz"
        if used + len(packed_key) + len(packed) <= budget:
            binary[packed_key] = base64.b64encode(packed).decode()
            used += len(packed_key) + len(packed)
            notes.append(
                f"{key} ({len(raw)} bytes) is stored gzip-compressed as binaryData {packed_key} "
                f"({len(packed)} bytes): as text it does not fit in the ConfigMap's {limit} bytes"
            )
            continue
        notes.append(
            f"{key} ({len(raw)} bytes, {len(packed)} compressed) was left out: it does not fit "
            f"in the ConfigMap's {limit} bytes; `itbench report recompute` rebuilds reports from "
            "trials.jsonl"
        )
    if notes:
        data[NOTES_KEY] = "\n".join(notes) + "\n"
    return data, binary, notes
