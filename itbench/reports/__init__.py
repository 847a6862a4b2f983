"""Report I/O: stored trial records (JSON lines) in, JSON and Markdown reports out."""

from itbench.reports.markdown import render_markdown
from itbench.reports.store import (
    TrialRecordError,
    load_trial_records,
    save_trial_records,
    write_report_json,
)

__all__ = [
    "TrialRecordError",
    "load_trial_records",
    "render_markdown",
    "save_trial_records",
    "write_report_json",
]
