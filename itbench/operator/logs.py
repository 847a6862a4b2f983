"""Log records of the operator: JSON lines in a cluster, one object per record, identifiers as
fields; Kopf's routine success lines at DEBUG, so the default level carries what a user reads."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_INTERNAL = {"settings", "k8s_skip", "k8s_ref", "color_message"}
"""Record attributes that are plumbing, not identifiers: Kopf's settings object (about 2 KB),
its skip flag and object reference (rendered as `object`), uvicorn's ANSI-coloured copy."""

ROUTINE = re.compile(
    r"^(?:(?:Timer|Handler|Daemon) '[^']*' succeeded\.|"
    r"(?:Creation|Updating|Deletion|Resuming) is processed: .*|"
    r"Removing the finalizer, as there are no handlers requiring it\.|"
    r"Adding the finalizer, thus preventing the actual deletion\.|"
    r"Something has changed, but we are not interested .*|"
    r"Handler '[^']*' is invoked\.)$",
    re.DOTALL,
)
"""Kopf's messages about handlers that did what they were asked: DEBUG, not INFO."""

WAITING = re.compile(
    r"^Handler 'release(?:-trials)?' failed temporarily: "
    r"(?:waiting for \d+ trials to release their environments|.*a tick is still running.*)$",
    re.DOTALL,
)
"""A deletion waiting for its Trials (or a Trial's for its tick in flight): an ordinary step that
Kopf reports as an error of a handler; INFO."""


class JsonFormatter(logging.Formatter):
    """Formats a record as JSON: time, level, logger, message, and every `extra=` field."""

    def format(self, record: logging.LogRecord) -> str:
        """Render one record."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ref = getattr(record, "k8s_ref", None)
        if isinstance(ref, Mapping) and ref.get("name"):
            where = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else ref["name"]
            entry["object"] = f"{ref.get('kind', '')} {where}".strip()
        for key, value in record.__dict__.items():
            if key in _STANDARD or key in _INTERNAL or key.startswith("_"):
                continue
            entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class RoutineToDebug(logging.Filter):
    """Lowers Kopf's routine lines (to DEBUG) and waiting deletions (to INFO), then drops records
    below `level`.

    Kopf logs each timer run ("Timer 'advance' succeeded.") at INFO: ten thousand lines for a
    50-trial run. The handler keeps them when its level is DEBUG.
    """

    def __init__(self, level: int) -> None:
        """Keep records at `level` and above (after lowering routine ones)."""
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        """Lower a routine record, then keep it only at or above the handler's level."""
        if record.name.startswith("kopf"):
            message = record.getMessage()
            if record.levelno == logging.INFO and ROUTINE.match(message):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            elif record.levelno == logging.ERROR and WAITING.match(message):
                record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= self.level


def configure_logging(level: int = logging.INFO, *, json_lines: bool = True) -> None:
    """Send log records to stderr, as JSON lines or as plain text.

    uvicorn's loggers (the gateway) go through the same handler, as plain records.

    Args:
        level: The lowest level written.
        json_lines: JSON lines (in a cluster) or human-readable text.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    handler.addFilter(RoutineToDebug(level))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
