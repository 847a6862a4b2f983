"""`itbench run`: benchmark agents (registered, callables or commands) over the catalog on the
embedded simulator."""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table as RichTable

from itbench.cli.context import BadInput, pass_settings, stdout_console, warn
from itbench.cli.scenarios import load_catalog_dir, refuse_problems, scenarios_dir_option
from itbench.core.catalog import Catalog, did_you_mean
from itbench.core.complexity import effective_complexity
from itbench.core.models.agent_record import AgentInfo
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import Complexity, Domain, TelemetryToggles
from itbench.core.models.scenario import Scenario, Split
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import trial_outcome
from itbench.execution.agents import (
    AgentNotFoundError,
    AgentProblemError,
    from_command,
    preflight,
    registered,
    resolve,
)
from itbench.execution.artefacts import RunStore
from itbench.execution.benchmark import default_workers
from itbench.execution.embedded import (
    BenchmarkOptions,
    BenchmarkResult,
    resume_benchmark,
    run_benchmark,
)
from itbench.execution.plan import TrialPlan
from itbench.reports.tables import (
    DIMENSIONS,
    FLAG_NOTE,
    Table,
    breakdown_table,
    collateral_table,
    comparisons_table,
    failures_table,
    main_table,
    outcomes_table,
    scores_table,
    usage_table,
)
from itbench.settings import Settings

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MIN_SECRET_CHARS = 16
"""Characters a seed secret needs: published instances must not let anyone guess it."""


AGENT_ARG = re.compile(r"^([a-z][a-z0-9_]*)=(.*)$", re.DOTALL)


def agent_args(
    model: str | None, tool_model: str | None, base_url: str | None, pairs: Sequence[str]
) -> dict[str, str]:
    """The agents' arguments from `--model`, `--tool-model`, `--base-url` and `--agent-arg`.

    Raises:
        BadInput: When an `--agent-arg` is not KEY=VALUE.
    """
    args: dict[str, str] = {}
    for pair in pairs:
        match = AGENT_ARG.match(pair)
        if match is None:
            raise BadInput(
                f"--agent-arg {pair!r}: write KEY=VALUE with a lower-case key, e.g. max_retries=3"
            )
        args[match.group(1)] = match.group(2)
    named = {"model": model, "tool_model": tool_model, "base_url": base_url}
    args.update({k: v for k, v in named.items() if v is not None})
    return args


DEFAULT_RUN_AGENTS = ("heuristic-sre", "heuristic-finops", "null", "alert-echo")
"""What `itbench run` benchmarks without --agent: the baselines between a floor (null) and a cheap
strategy (alert-echo names whatever the alert names), so the table shows what skill adds; the
oracle joins them with --allow-oracle."""


def choose_agents(
    names: Sequence[str],
    commands: Sequence[str],
    *,
    defaults: Sequence[str] = DEFAULT_RUN_AGENTS,
    args: dict[str, str],
    wall_seconds: float | None,
    name: str | None,
    version: str | None,
) -> list[AgentInfo]:
    """Resolve the agents of a run (registered names, callable paths, commands) and check them.

    Every argument goes to the agents that take it (a command takes all, as variables);
    one no agent takes is an error, as is an agent that says it cannot run (no model set).

    Raises:
        BadInput: Naming the agent and what to change.
    """
    if name is not None and len(names) + len(commands) != 1:
        raise BadInput("--agent-name names one agent; give exactly one --agent or --agent-cmd")
    chosen: list[AgentInfo] = []
    try:
        for spec in names or ([] if commands else list(defaults)):
            chosen.append(
                resolve(spec, args=args, wall_seconds=wall_seconds, name=name, strict=False)
            )
        for command in commands:
            chosen.append(
                from_command(
                    command, args=args, wall_seconds=wall_seconds, name=name, version=version
                )
            )
    except (AgentNotFoundError, AgentProblemError) as exc:
        raise BadInput(str(exc)) from None
    if version is not None and names:
        chosen = [a.model_copy(update={"version": version}) for a in chosen]
    taken = {k for a in chosen for k in a.args}
    unused = sorted(set(args) - taken)
    if unused:
        raise BadInput(
            f"no agent of this run takes {', '.join(unused)} ({', '.join(a.name for a in chosen)})"
        )
    seen = [a.name for a in chosen]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise BadInput(f"two agents are named {', '.join(twice)}; set --agent-name for one")
    problems = [p for a in chosen for p in preflight(a)]
    if problems:
        raise BadInput("; ".join(problems))
    return chosen


def resumed_agents(plans: Sequence[TrialPlan], given: Sequence[AgentInfo]) -> list[AgentInfo]:
    """The agents a resumed run uses: those of its plan, updated by the agents given again.

    An agent given again must be the one planned (same runtime, target and arguments); its
    wall-clock limit and version may change (the version with a warning).

    Raises:
        BadInput: When a given agent is not one of the run's.
    """
    planned = {p.agent.name: p.agent for p in plans}
    result = dict(planned)
    for agent in given:
        before = planned.get(agent.name)
        same = before is not None and (before.runtime, before.target, before.args) == (
            agent.runtime,
            agent.target,
            agent.args,
        )
        if before is None or not same:
            was = (
                f"{before.runtime.value} {before.target!r} {before.args}"
                if before is not None
                else "not in it"
            )
            raise BadInput(
                f"--resume keeps the run's agents: {agent.name} ({agent.runtime.value} "
                f"{agent.target!r} {agent.args}) differs from the planned one ({was}); "
                f"the run's agents: {', '.join(sorted(planned))}"
            )
        if before.version != agent.version:
            warn(
                f"warning: agent {agent.name} changed since the run was planned (version "
                f"{before.version or '?'} -> {agent.version or '?'}); finished trials keep "
                "their results"
            )
        result[agent.name] = agent
    problems = [p for a in result.values() for p in preflight(a)]
    if problems:
        raise BadInput("; ".join(problems))
    return list(result.values())


def select_scenarios(
    catalog: Catalog,
    names: tuple[str, ...],
    domain: str | None,
    classes: tuple[str, ...] = (),
    complexities: tuple[str, ...] = (),
) -> list[Scenario]:
    """The scenarios a run covers: the named ones (all when none), optionally only those of one
    domain, of some classes and of some complexities (as the run will score them).

    Raises:
        BadInput: When a name or class is unknown (with the closest known ones), or nothing is
            selected.
    """
    if names:
        unknown = [n for n in names if n not in catalog]
        if unknown:
            guesses = "".join(did_you_mean(n, catalog.names) for n in unknown[:3])
            raise BadInput(
                f"unknown scenario(s): {', '.join(unknown)}{guesses}; see `itbench scenarios list`"
            )
        chosen = [catalog.get(n) for n in dict.fromkeys(names)]
    else:
        chosen = list(catalog)
    if domain is not None:
        chosen = [s for s in chosen if s.spec.domain.value.lower() == domain.lower()]
    if classes:
        known = sorted({s.spec.scenario_class for s in catalog})
        lowered = {c.lower(): c for c in known}
        unknown = [c for c in classes if c.lower() not in lowered]
        if unknown:
            guesses = "".join(did_you_mean(c, known) for c in unknown[:3])
            raise BadInput(
                f"unknown scenario class(es): {', '.join(unknown)}{guesses} (known: "
                f"{', '.join(known)})"
            )
        wanted = {lowered[c.lower()] for c in classes}
        chosen = [s for s in chosen if s.spec.scenario_class in wanted]
    if complexities:
        wanted_levels = {c.lower() for c in complexities}
        chosen = [
            s for s in chosen if effective_complexity(s.spec)[0].value.lower() in wanted_levels
        ]
    if not chosen:
        raise BadInput(
            "no scenario selected; check --scenario, --domain, --class and --complexity "
            "(`itbench scenarios list` shows each scenario's class and complexity)"
        )
    return chosen


def _progress_console() -> Console:
    return Console(file=sys.stderr)


class _ProgressView:
    """A progress bar on stderr counting finished trials by outcome."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("[bold]trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=_progress_console(),
            transient=False,
        )
        self.task = self.progress.add_task("", total=None)
        self.counts: Counter[str] = Counter()

    def start(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def done(self, plan: TrialPlan, status: TrialStatus) -> None:
        self.counts[status.phase.value] += 1
        text = " ".join(
            f"{phase.lower()} {self.counts[phase]}"
            for phase in ("Succeeded", "Failed", "Errored")
            if self.counts[phase]
        )
        self.progress.update(self.task, advance=1, description=text)


def _print_table(console: Console, table: Table) -> None:
    if not table.rows:
        return
    out = RichTable(title=table.title, box=box.SIMPLE_HEAD, title_justify="left")
    for i, header in enumerate(table.short or table.headers):
        if i == 0:
            out.add_column(header, no_wrap=True)
        else:
            out.add_column(header, justify="right", overflow="fold")
    for row in table.rows:
        out.add_row(*row)
    console.print(out)
    for line in [*table.legend(), table.note]:
        if line:
            console.print(line, style="dim")


def print_result(result: BenchmarkResult, console: Console) -> None:
    """Print the report: agents by task (pass@1 with lower bounds and collateral), resolution,
    scores and times, outcomes, pairwise comparisons, breakdowns, and where the artefacts are."""
    report = result.report
    if report.lower_bound_differs:
        console.print(f"[bold]Flagged:[/bold] {FLAG_NOTE}")
    _print_table(console, main_table(report.columns, report.agents))
    for table in (
        scores_table(report),
        outcomes_table(report),
        failures_table(report),
        usage_table(report),
        collateral_table(report),
        comparisons_table(report.comparisons),
    ):
        _print_table(console, table)
    for dimension in DIMENSIONS:
        _print_table(console, breakdown_table(report, dimension))
    counts = result.counts()
    console.print(
        f"trials: {sum(counts.values())}  succeeded: {counts['Succeeded']}  "
        f"failed (agent): {counts['Failed']}  errored (not the agent's): {counts['Errored']}"
    )
    for phase in ("Failed", "Errored"):
        ended = [s for s in result.statuses.values() if s.phase.value == phase]
        for reason, n in Counter(s.reason for s in ended).most_common():
            owner = trial_outcome(reason)[1] or "-"
            console.print(f"  {phase.lower()} {reason}: {n} ({owner})")
    console.print(f"report: {result.root / 'report.json'}")
    console.print(f"page:   {result.root / 'report.html'}")
    console.print(f"trials: {result.root / 'trials.jsonl'}")


def _registered_names() -> str:
    try:
        return ", ".join(registered()) or "none"
    except Exception:  # help text must never fail
        return "see `itbench agents list`"


@click.command("run")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME|MODULE:FUNCTION",
    help="Agent to benchmark (repeatable): a registered name (`itbench agents list`) or a "
    "callable module:function taking the SDK client, run in-process "
    "[default: heuristic-sre, heuristic-finops, null and alert-echo, and the oracle with "
    "--allow-oracle].",
)
@click.option(
    "--agent-cmd",
    "agent_cmds",
    multiple=True,
    metavar="COMMAND",
    help="Agent to benchmark as a command (repeatable), one process per trial with "
    "ITBENCH_GATEWAY_URL, ITBENCH_TRIAL and ITBENCH_TOKEN set (no shell; e.g. "
    "'python my_agent.py').",
)
@click.option(
    "--model",
    default=None,
    help="Agent argument: the model, as a LiteLLM model string (e.g. openai/gpt-4o, "
    "hosted_vllm/<name>, ollama/<name>, watsonx/<id>, azure/<deployment>).",
)
@click.option(
    "--tool-model",
    default=None,
    help="Agent argument: the model that writes queries and commands [default: --model].",
)
@click.option(
    "--base-url",
    default=None,
    help="Agent argument: the model endpoint (an OpenAI-compatible server, e.g. "
    "http://127.0.0.1:8000/v1).",
)
@click.option(
    "--agent-arg",
    "agent_arg_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Another agent argument (repeatable); a command gets each as ITBENCH_AGENT__<KEY>.",
)
@click.option(
    "--agent-timeout",
    type=click.FloatRange(1, 86_400),
    default=None,
    help="Real seconds an agent may take per trial before it is stopped and the trial fails "
    "[default: the agent's own; 120 for in-process, 600 for commands].",
)
@click.option("--agent-name", default=None, help="Name of the one agent given [default: derived].")
@click.option(
    "--agent-version",
    default=None,
    help="Version recorded for the agents given [default: their distribution's, or a digest "
    "of a command's script].",
)
@click.option(
    "--scenario", "scenario_names", multiple=True, help="Scenario name (repeatable) [default: all]."
)
@click.option(
    "--domain",
    type=click.Choice([d.value for d in Domain], case_sensitive=False),
    help="Only scenarios of this domain.",
)
@click.option(
    "--class",
    "classes",
    multiple=True,
    metavar="CLASS",
    help="Only scenarios of this class (repeatable; e.g. ServiceFailure, CorruptImage).",
)
@click.option(
    "--complexity",
    "complexities",
    multiple=True,
    type=click.Choice([c.value for c in Complexity], case_sensitive=False),
    help="Only scenarios of this complexity (repeatable).",
)
@click.option(
    "--trials",
    default=3,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Trials per scenario and agent.",
)
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0), help="Run seed.")
@click.option(
    "--split",
    type=click.Choice([s.value for s in Split]),
    default=Split.DEV.value,
    show_default=True,
    help="dev: templates expanded with --seed (what `itbench scenarios expand --seed` shows); "
    "test: each trial's instance drawn from --seed-secret, which no agent sees.",
)
@click.option(
    "--seed-secret",
    envvar="ITBENCH_SEED_SECRET",
    default=None,
    show_default=False,
    show_envvar=True,
    help=f"Secret of the test split (at least {MIN_SECRET_CHARS} characters); never echoed "
    "or written to the run directory.",
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where run directories go [default: settings outputDir, ./out].",
)
@click.option("--run-name", default=None, help="Name of the run directory [default: run-<time>].")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Worker processes [default: the machine's cores].",
)
@click.option(
    "--traces/--no-traces",
    default=True,
    show_default=True,
    help="Show traces to the agent (--no-traces: the traces-off ablation).",
)
@click.option(
    "--allow-oracle", is_flag=True, help="Allow the oracle agent, which reads the ground truth."
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Continue an interrupted run directory with the agents it planned (scenario options "
    "are ignored; agent options given again must name the run's agents, --agent-timeout may "
    "change).",
)
@scenarios_dir_option
@pass_settings
def run_command(
    settings: Settings,
    agents: tuple[str, ...],
    agent_cmds: tuple[str, ...],
    model: str | None,
    tool_model: str | None,
    base_url: str | None,
    agent_arg_pairs: tuple[str, ...],
    agent_timeout: float | None,
    agent_name: str | None,
    agent_version: str | None,
    scenario_names: tuple[str, ...],
    domain: str | None,
    classes: tuple[str, ...],
    complexities: tuple[str, ...],
    trials: int,
    seed: int,
    split: str,
    seed_secret: str | None,
    output_dir: Path | None,
    run_name: str | None,
    workers: int | None,
    traces: bool,
    allow_oracle: bool,
    resume_dir: Path | None,
    scenarios_dir: Path | None,
) -> None:
    """Benchmark agents over the scenario catalog on the embedded simulator.

    By default heuristic-sre runs the SRE scenarios and heuristic-finops the FinOps ones, 3
    trials each, seed 42, in parallel; the report table is printed and the run directory gets
    report.json, trials.jsonl and a self-contained report.html. A catalog with any invalid file
    or repeated name is refused (exit 2). `--split test` draws each trial's instance of a
    template from a key derived from the seed secret; the report states the split and the
    catalog digest. An agent is a registered name, a callable (--agent my_pkg.agent:run) or a
    command (--agent-cmd 'python my_agent.py'); agents/<trial>/ keeps each trial's agent
    output and reported steps.
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
        seed_secret = None  # the dev split is public: a secret in the environment is not used
    now = datetime.now(UTC)
    view = _ProgressView()
    workers = workers or default_workers()
    args = agent_args(model, tool_model, base_url, agent_arg_pairs)
    chosen: list[AgentInfo] = []
    if resume_dir is not None:
        try:
            plans = RunStore(resume_dir).load_plan()
        except FileNotFoundError:
            raise BadInput(f"{resume_dir} holds no run (plan.json is missing)") from None
        if agents or agent_cmds:
            override = choose_agents(
                agents,
                agent_cmds,
                args=args,
                wall_seconds=agent_timeout,
                name=agent_name,
                version=agent_version,
            )
        elif args or agent_name or agent_version:
            raise BadInput(
                "with --resume, agent arguments, --agent-name and --agent-version go with the "
                "--agent or --agent-cmd they belong to (the run's own agents)"
            )
        else:
            planned = {p.agent.name: p.agent for p in plans}
            override = (
                [a.model_copy(update={"wall_seconds": agent_timeout}) for a in planned.values()]
                if agent_timeout is not None
                else []
            )
        chosen = resumed_agents(plans, override)
    with view.progress:
        if resume_dir is not None:
            result = resume_benchmark(
                resume_dir,
                workers=workers,
                created_at=now,
                on_start=view.start,
                on_done=view.done,
                agents=chosen,
            )
        else:
            chosen_agents = choose_agents(
                agents,
                agent_cmds,
                defaults=(
                    *DEFAULT_RUN_AGENTS,
                    *((BuiltinAgent.ORACLE.value,) if allow_oracle else ()),
                ),
                args=args,
                wall_seconds=agent_timeout,
                name=agent_name,
                version=agent_version,
            )
            if not allow_oracle and any(
                a.registered and a.name == BuiltinAgent.ORACLE.value for a in chosen_agents
            ):
                raise BadInput(
                    "the oracle agent reads the ground truth; pass --allow-oracle to run it"
                )
            name = run_name or f"run-{now:%Y%m%d-%H%M%S}"
            if not RUN_NAME.match(name):
                raise BadInput(f"--run-name {name!r}: use letters, digits, '.', '_' or '-'")
            loaded = load_catalog_dir(settings, scenarios_dir)
            refuse_problems(loaded, "run the benchmark")
            catalog = loaded.catalog
            scenarios = select_scenarios(catalog, scenario_names, domain, classes, complexities)
            if not any(a.takes(s.spec.domain) for a in chosen_agents for s in scenarios):
                domains = {d for a in chosen_agents for d in (a.domains or list(Domain))}
                raise BadInput(
                    "none of the selected scenarios is in the agents' domains "
                    f"({', '.join(sorted(d.value for d in domains))})"
                )
            options = BenchmarkOptions(
                run=name,
                agents=chosen_agents,
                scenarios=scenarios,
                trials=trials,
                seed=seed,
                workers=workers,
                telemetry=TelemetryToggles(traces=traces),
                allow_oracle=allow_oracle,
                variants={n: catalog.variants(n) for n in catalog.names},
                split=chosen_split,
                seed_secret=seed_secret,
                catalog_digest=catalog.digest,
            )
            result = run_benchmark(
                options,
                output_dir or settings.output_dir,
                created_at=now,
                on_start=view.start,
                on_done=view.done,
            )
    print_result(result, stdout_console())
    counts = result.counts()
    if counts and counts["Errored"] == sum(counts.values()):
        warn("error: every trial errored (the platform's fault); see report.html")
        raise SystemExit(1)
