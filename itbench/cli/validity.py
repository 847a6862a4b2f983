"""`itbench validity`: hold the cheap strategies to their ceilings over the catalog."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from itbench.cli.context import BadInput, pass_settings, stdout_console, warn
from itbench.cli.run import MIN_SECRET_CHARS, select_scenarios
from itbench.cli.scenarios import load_catalog_dir, refuse_problems, scenarios_dir_option
from itbench.core.models.scenario import Split
from itbench.core.models.trial import TrialStatus
from itbench.execution.benchmark import default_workers
from itbench.execution.plan import TrialPlan
from itbench.execution.validity import (
    StrategyError,
    ValidityOptions,
    ValidityResult,
    choose_strategies,
    reference_strategies,
    rows,
    run_validity,
    save_result,
)
from itbench.settings import Settings


class _Progress:
    """A progress bar on stderr counting finished trials by strategy."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("[bold]trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
        )
        self.task = self.bar.add_task("", total=None)
        self.counts: Counter[str] = Counter()

    def start(self, total: int) -> None:
        self.bar.update(self.task, total=total)

    def done(self, plan: TrialPlan, _status: TrialStatus) -> None:
        self.counts[plan.agent.name] += 1
        self.bar.update(self.task, advance=1, description=plan.agent.name)


def print_table(result: ValidityResult, console: Console) -> None:
    """Print one row per strategy and task: passed, rate, ceiling and verdict."""
    report = result.report
    table = Table(
        title=f"Validity: split {result.split.value}, seed {result.seed}, "
        f"{result.trials_per_scenario} trial(s) per scenario, profile {report.profile}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for header in ("strategy", "task", "passed", "errored", "rate", "ceiling", "verdict"):
        right = header in {"passed", "errored", "rate", "ceiling"}
        table.add_column(header, justify="right" if right else "left", no_wrap=True)
    for strategy, task, passed, trials, errored, rate, ceiling, verdict in rows(report):
        style = "" if verdict == "ok" else "bold red"
        table.add_row(
            strategy,
            task,
            f"{passed}/{trials}",
            str(errored),
            f"{rate:.1%}",
            f"{ceiling:.0%}",
            verdict,
            style=style,
        )
    console.print(table)
    console.print(f"scenarios: {len(result.scenarios)}   catalog: {report.catalog_digest or '-'}")
    if report.holds:
        console.print("holds: every strategy is at or below its ceilings, the oracle at 1, null 0")


@click.command("validity")
@click.option(
    "--split",
    type=click.Choice([s.value for s in Split]),
    default=Split.DEV.value,
    show_default=True,
    help="dev: templates expanded with --seed; test: instances drawn from --seed-secret.",
)
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0), help="Run seed.")
@click.option(
    "--seed-secret",
    envvar="ITBENCH_SEED_SECRET",
    default=None,
    show_envvar=True,
    help=f"Secret of the test split (at least {MIN_SECRET_CHARS} characters); never echoed "
    "or written.",
)
@click.option(
    "--trials",
    default=1,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Trials per scenario and strategy.",
)
@click.option(
    "--scenario", "scenario_names", multiple=True, help="Scenario name (repeatable) [default: all]."
)
@click.option(
    "--strategy",
    "strategy_specs",
    multiple=True,
    metavar="NAME|MODULE:FUNCTION",
    help="Strategy to hold to its ceiling (repeatable): a reference strategy's name or a "
    "callable agent module:function (held to the default ceiling) [default: every reference "
    "strategy]. The oracle and null always run.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where validity.json and trials.jsonl go [default: <outputDir>/validity-<time>].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON, not a table.")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Worker processes [default: the machine's cores].",
)
@scenarios_dir_option
@pass_settings
def validity_command(
    settings: Settings,
    split: str,
    seed: int,
    seed_secret: str | None,
    trials: int,
    scenario_names: tuple[str, ...],
    strategy_specs: tuple[str, ...],
    out_dir: Path | None,
    as_json: bool,
    workers: int | None,
    scenarios_dir: Path | None,
) -> None:
    """Run the cheap strategies, the null agent and the oracle over the catalog and hold them
    to their ceilings.

    Every reference strategy (agents/validity/strategies.py) runs over every scenario of every
    domain on the embedded simulator without the oracle; the oracle runs in a plan of its own
    that allows it. The table gives each strategy's pass rate on each task beside its ceiling.
    Exit 0 when every strategy is at or below its ceilings, the oracle passes every task and
    null none; exit 1 otherwise, naming each strategy and task that broke; exit 2 on bad input.
    """
    chosen_split = Split(split)
    if chosen_split == Split.TEST:
        if not seed_secret:
            raise BadInput("--split test needs --seed-secret (or ITBENCH_SEED_SECRET)")
        if len(seed_secret) < MIN_SECRET_CHARS:
            raise BadInput(
                f"the seed secret is too short: use at least {MIN_SECRET_CHARS} characters"
            )
    else:
        seed_secret = None
    try:
        reference = reference_strategies()
        strategies = choose_strategies(strategy_specs, reference)
    except StrategyError as exc:
        raise BadInput(str(exc)) from None
    loaded = load_catalog_dir(settings, scenarios_dir)
    refuse_problems(loaded, "check validity")
    catalog = loaded.catalog
    scenarios = select_scenarios(catalog, scenario_names, None)
    now = datetime.now(UTC)
    out = out_dir or settings.output_dir / f"validity-{now:%Y%m%d-%H%M%S}"
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: exists and is not a directory")
    options = ValidityOptions(
        strategies=strategies,
        scenarios=scenarios,
        catalog=catalog,
        trials=trials,
        seed=seed,
        workers=workers or default_workers(),
        reference=reference,
        split=chosen_split,
        seed_secret=seed_secret,
    )
    view = _Progress()
    with view.bar:
        result, records = run_validity(options, on_start=view.start, on_done=view.done)
    path = save_result(result, records, out)
    if as_json:
        click.echo(result.model_dump_json(by_alias=True, indent=2))
    else:
        console = stdout_console()
        print_table(result, console)
        console.print(f"result: {path}")
    if not result.report.holds:
        warn("error: the benchmark does not hold:\n  " + "\n  ".join(result.report.problems))
        raise SystemExit(1)
