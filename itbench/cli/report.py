"""`itbench report recompute`: rebuild a report from stored trial records and a profile."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from itbench.cli.context import BadInput
from itbench.core.scoring import UnknownProfileError, build_report, get_profile
from itbench.reports import TrialRecordError, load_trial_records, render_markdown, write_report_json


@click.group("report")
def report_group() -> None:
    """Build benchmark reports from stored trial records."""


@report_group.command("recompute")
@click.option(
    "--trials",
    "trials_path",
    required=True,
    type=click.Path(path_type=Path),
    envvar="ITBENCH_REPORT__TRIALS",
    help="trials.jsonl (or a directory holding it) with one trial record per line.",
)
@click.option(
    "--profile",
    "profile_id",
    default=None,
    envvar="ITBENCH_REPORT__PROFILE",
    help="Evaluation profile id, name@version (a bare name: its newest version) [default: the "
    "profile the trials were scored with, else the newest default].",
)
@click.option(
    "--output",
    type=click.Choice(["json", "markdown"]),
    default="markdown",
    show_default=True,
    help="Format printed to stdout.",
)
@click.option("--agent", default=None, help="Agent name (default: the records' agent).")
@click.option(
    "--created-at",
    type=click.DateTime(formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S"]),
    default=None,
    help="Timestamp stored in the report (default: now, UTC); fix it for byte-identical output.",
)
@click.option(
    "--write",
    "write_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the report as JSON to this file.",
)
def recompute(
    trials_path: Path,
    profile_id: str | None,
    output: str,
    agent: str | None,
    created_at: datetime | None,
    write_path: Path | None,
) -> None:
    """Recompute a report from stored trial records under an evaluation profile."""
    try:
        records = load_trial_records(trials_path)
    except TrialRecordError as exc:
        raise BadInput(str(exc)) from None
    scored_with = sorted({r.scores.profile for r in records if r.scores is not None})
    if profile_id is None:
        profile_id = scored_with[0] if len(scored_with) == 1 else "default"
    try:
        profile = get_profile(profile_id)
    except UnknownProfileError as exc:
        raise BadInput(str(exc)) from None
    foreign = [p for p in scored_with if p != profile.id]
    if foreign:
        raise BadInput(
            f"{trials_path}: trials were scored with {', '.join(foreign)}, not {profile.id}; "
            f"aggregate them under that profile (re-scoring needs the trials' evidence, "
            f"not just their records)"
        )
    agents = sorted({r.agent for r in records})
    if agent is None:
        if len(agents) > 1:
            raise BadInput(
                f"{trials_path}: records of several agents ({', '.join(agents)}); pick one "
                "with --agent"
            )
        agent = agents[0] if agents else "unknown"
    else:
        records = [r for r in records if r.agent == agent]
    stamp = created_at or datetime.now(UTC)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    report = build_report(records, profile, agent=agent, created_at=stamp)
    if write_path is not None:
        write_report_json(report, write_path)
    if output == "json":
        click.echo(json.dumps(report.wire(), indent=2, sort_keys=True))
    else:
        click.echo(render_markdown(report), nl=False)
