"""The trajectory an agent reports: each thought, tool call, tool result as the model saw it, and
each model call with its tokens, latency and estimated cost, one JSON object per line.

The platform gives the file's path (`ITBENCH_TRAJECTORY_FILE` for a command, the `trajectory`
argument for a callable) and keeps it with the trial.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

MAX_TEXT = 20_000
"""Characters of one step's text kept (the platform keeps no more)."""


class Trajectory:
    """Appends steps to a JSON-lines file (and keeps them in memory), thread-safe."""

    def __init__(self, path: str | Path | None = None) -> None:
        """Record to `path` (None: in memory only)."""
        self.path = Path(path) if path else None
        self.steps: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._start = time.monotonic()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def step(self, kind: str, text: str = "", **fields: Any) -> dict[str, Any]:
        """Record one step.

        Args:
            kind: thought, tool-call, tool-result, model-call or note.
            text: Its text (cut to MAX_TEXT characters).
            **fields: actor, tool, model, promptTokens, completionTokens, latencySeconds,
                costUsd, truncatedFrom (None values are left out).
        """
        if len(text) > MAX_TEXT:
            text = f"{text[:MAX_TEXT]}\n[... {len(text) - MAX_TEXT} chars cut]"
        doc: dict[str, Any] = {
            "kind": kind,
            "elapsedSeconds": round(time.monotonic() - self._start, 3),
            "text": text,
        }
        doc.update({k: v for k, v in fields.items() if v is not None})
        with self._lock:
            self.steps.append(doc)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
        return doc

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The steps of one kind, in order."""
        with self._lock:
            return [s for s in self.steps if s["kind"] == kind]
