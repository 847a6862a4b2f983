"""Report I/O and rendering: stored trial records (JSON lines) in; JSON, Markdown and the
tables the CLI and the HTML page share out."""

from itbench.reports.markdown import render_comparison_markdown, render_markdown
from itbench.reports.store import (
    TrialRecordError,
    load_trial_records,
    save_trial_records,
    write_report_json,
)

__all__ = [
    "TrialRecordError",
    "load_trial_records",
    "render_comparison_markdown",
    "render_markdown",
    "save_trial_records",
    "write_report_json",
]
