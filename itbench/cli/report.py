"""`itbench report`: rebuild a report from stored trial records (`recompute`) and compare two
runs agent by agent (`compare`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from itbench.cli.context import BadInput
from itbench.core.models.report import TrialRecord
from itbench.core.scoring import (
    EvaluationProfile,
    UnknownProfileError,
    build_report,
    get_profile,
)
from itbench.core.scoring.runs import NothingToCompareError, compare_runs
from itbench.reports import (
    TrialRecordError,
    load_trial_records,
    render_comparison_markdown,
    render_markdown,
    write_report_json,
)

F = TypeVar("F", bound=Callable[..., Any])


@click.group("report")
def report_group() -> None:
    """Build benchmark reports from stored trial records."""


def _load(path: Path) -> list[TrialRecord]:
    try:
        return load_trial_records(path)
    except TrialRecordError as exc:
        raise BadInput(str(exc)) from None


def _profile(
    records: Sequence[TrialRecord], profile_id: str | None, where: str
) -> EvaluationProfile:
    """The profile to aggregate under: the one asked for, else the one the trials were scored
    with; records scored under another profile are refused."""
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
            f"{where}: trials were scored with {', '.join(foreign)}, not {profile.id}; "
            f"aggregate them under that profile (re-scoring needs the trials' evidence, "
            f"not just their records)"
        )
    return profile


def _stamp(created_at: datetime | None) -> datetime:
    stamp = created_at or datetime.now(UTC)
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _common_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--profile",
                "profile_id",
                default=None,
                envvar="ITBENCH_REPORT__PROFILE",
                help="Evaluation profile id, name@version (a bare name: its newest version) "
                "[default: the profile the trials were scored with, else the newest default].",
            ),
            click.option(
                "--output",
                type=click.Choice(["json", "markdown"]),
                default="markdown",
                show_default=True,
                help="Format printed to stdout.",
            ),
            click.option(
                "--created-at",
                type=click.DateTime(formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S"]),
                default=None,
                help="Timestamp stored in the output (default: now, UTC); fix it for "
                "byte-identical output.",
            ),
            click.option(
                "--write",
                "write_path",
                type=click.Path(path_type=Path),
                default=None,
                help="Also write the result as JSON to this file.",
            ),
        ]
    ):
        func = option(func)
    return func


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
    "--agent",
    "agents",
    multiple=True,
    help="Only this agent's trials (repeatable) [default: every agent, one row each].",
)
@click.option(
    "--pooled",
    is_flag=True,
    help="Also pool every agent's trials into the top-level numbers.",
)
@_common_options
def recompute(
    trials_path: Path,
    agents: tuple[str, ...],
    pooled: bool,
    profile_id: str | None,
    output: str,
    created_at: datetime | None,
    write_path: Path | None,
) -> None:
    """Recompute a report from stored trial records under an evaluation profile.

    Every agent of the records gets its own row, breakdowns and pairwise comparisons; records
    written before tasks were named per trial are scored on every task of their domain.
    """
    records = _load(trials_path)
    if agents:
        known = sorted({r.agent for r in records})
        missing = [a for a in agents if a not in known]
        if missing:
            raise BadInput(
                f"{trials_path}: no trials of agent(s) {', '.join(missing)} "
                f"(agents: {', '.join(known) or 'none'})"
            )
        records = [r for r in records if r.agent in agents]
    profile = _profile(records, profile_id, str(trials_path))
    names = list(dict.fromkeys(r.agent for r in records))
    report = build_report(
        records,
        profile,
        agent=", ".join(names) or "unknown",
        created_at=_stamp(created_at),
        pooled=pooled,
    )
    if write_path is not None:
        write_report_json(report, write_path)
    if output == "json":
        click.echo(json.dumps(report.wire(), indent=2, sort_keys=True))
    else:
        click.echo(render_markdown(report), nl=False)


@report_group.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--agent-a", default=None, help="The agent of RUN_A to compare.")
@click.option("--agent-b", default=None, help="The agent of RUN_B to compare.")
@_common_options
def compare(
    run_a: Path,
    run_b: Path,
    agent_a: str | None,
    agent_b: str | None,
    profile_id: str | None,
    output: str,
    created_at: datetime | None,
    write_path: Path | None,
) -> None:
    """Compare two runs (run directories or trials.jsonl files) agent by agent.

    Each run's agents get a row per task; each agent both runs have (or the two named with
    --agent-a and --agent-b, or the only agent of each) is compared A minus B per task, paired
    over the scenarios both ran, with a 95 % paired t interval.
    """
    if (agent_a is None) != (agent_b is None):
        raise BadInput("name both --agent-a and --agent-b, or neither")
    a, b = _load(run_a), _load(run_b)
    profile = _profile([*a, *b], profile_id, f"{run_a} and {run_b}")
    try:
        comparison = compare_runs(
            a,
            b,
            profile,
            created_at=_stamp(created_at),
            sources=(str(run_a), str(run_b)),
            agents=(agent_a, agent_b) if agent_a is not None and agent_b is not None else None,
        )
    except NothingToCompareError as exc:
        raise BadInput(str(exc)) from None
    if write_path is not None:
        write_report_json(comparison, write_path)
    if output == "json":
        click.echo(json.dumps(comparison.wire(), indent=2, sort_keys=True))
    else:
        click.echo(render_comparison_markdown(comparison), nl=False)
