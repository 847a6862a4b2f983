"""`itbench scenarios list|show|validate`: the scenario catalog on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from itbench.catalog_files import CatalogBundleError, bundle, load_catalog, load_paths
from itbench.cli.context import (
    BadInput,
    OutputFormat,
    dump,
    output_option,
    pass_settings,
    print_rows,
    stdout_console,
    warn,
)
from itbench.core.catalog import Catalog, UnknownScenarioError
from itbench.core.models.base import Complexity, Domain
from itbench.core.models.scenario import Scenario
from itbench.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])

LIST_COLUMNS = (
    ("name", "NAME"),
    ("domain", "DOMAIN"),
    ("class", "CLASS"),
    ("complexity", "COMPLEXITY"),
    ("score", "SCORE"),
    ("faults", "FAULTS"),
    ("traces", "TRACES"),
)


def scenarios_dir_option(command: F) -> F:
    """The `--scenarios-dir` option (env ITBENCH_SCENARIOS_DIR), passed as `scenarios_dir`."""
    return click.option(
        "--scenarios-dir",
        "scenarios_dir",
        type=click.Path(path_type=Path, file_okay=False),
        envvar="ITBENCH_SCENARIOS_DIR",
        default=None,
        help="Scenario catalog directory "
        "[default: $ITBENCH_CATALOG__SCENARIOS_DIR or ./scenarios].",
    )(command)


def open_catalog(settings: Settings, scenarios_dir: Path | None) -> Catalog:
    """Load the catalog for a command; warn about invalid files on stderr.

    Args:
        settings: The settings (default directory).
        scenarios_dir: The directory given on the command line, if any.

    Returns:
        The catalog of the valid scenarios.

    Raises:
        BadInput: If the directory does not exist.
    """
    root = scenarios_dir or settings.catalog.scenarios_dir
    if not root.is_dir():
        raise BadInput(
            f"scenario directory {root} does not exist; pass --scenarios-dir or set "
            "ITBENCH_SCENARIOS_DIR"
        )
    catalog, problems = load_catalog(root)
    if problems:
        warn(
            f"warning: {len(problems)} problem(s) in {root}; invalid scenarios are left out "
            f"(run `itbench scenarios validate {root}`)"
        )
    return catalog


@click.group("scenarios")
def scenarios() -> None:
    """List, show and validate scenarios of the catalog."""


@scenarios.command("list")
@scenarios_dir_option
@click.option(
    "--domain",
    type=click.Choice([d.value for d in Domain], case_sensitive=False),
    help="Only this domain.",
)
@click.option("--class", "scenario_class", help="Only this scenario class.")
@click.option(
    "--complexity",
    type=click.Choice([c.value for c in Complexity], case_sensitive=False),
    help="Only this (effective) complexity.",
)
@output_option()
@pass_settings
def list_scenarios(
    settings: Settings,
    scenarios_dir: Path | None,
    domain: str | None,
    scenario_class: str | None,
    complexity: str | None,
    output: str,
) -> None:
    """List the scenarios with their domain, class and (computed) complexity."""
    catalog = open_catalog(settings, scenarios_dir)
    rows = [
        r
        for r in catalog.summary()
        if (domain is None or r["domain"].lower() == domain.lower())
        and (scenario_class is None or r["class"] == scenario_class)
        and (complexity is None or r["complexity"].lower() == complexity.lower())
    ]
    print_rows(rows, LIST_COLUMNS, output, title=f"{len(rows)} scenarios")


def _show_table(scenario: Scenario, catalog: Catalog) -> None:
    spec = scenario.spec
    complexity, score = catalog.complexity(scenario.name)
    truth = spec.ground_truth
    lines: list[tuple[str, str]] = [
        ("Name", scenario.name),
        ("Title", spec.title or "-"),
        ("Domain", spec.domain.value),
        ("Class", spec.scenario_class),
        ("Complexity", complexity.value + (f" (Eq. 6 score {score:.2f})" if score else "")),
        ("Description", spec.description),
        ("Technologies", ", ".join(spec.environment.technologies) or "-"),
        (
            "Telemetry",
            ", ".join(k for k, v in spec.environment.telemetry.model_dump().items() if v) or "none",
        ),
        (
            "Faults",
            "; ".join(f"{f.id} {f.args}" if f.args else f.id for f in spec.faults) or "none",
        ),
        (
            "Triggers",
            "; ".join(f"{a.alertname}{a.labels}" for a in spec.triggers.alerts) or "none",
        ),
        ("Root causes", ", ".join(f"{e.kind.value}/{e.name}" for e in truth.root_causes()) or "-"),
        (
            "Propagation",
            "; ".join(f"{e.source} -> {e.target}" for e in truth.propagation) or "-",
        ),
        ("Mitigations", "; ".join(m.description for m in truth.mitigations) or "-"),
    ]
    console = stdout_console()
    for key, value in lines:
        console.print(f"[bold]{key}:[/bold] {value}", highlight=False, markup=True)


@scenarios.command("show")
@click.argument("name")
@scenarios_dir_option
@output_option(default=OutputFormat.YAML)
@pass_settings
def show_scenario(settings: Settings, name: str, scenarios_dir: Path | None, output: str) -> None:
    """Show one scenario: as applied to the cluster (yaml, json) or summarised (table)."""
    catalog = open_catalog(settings, scenarios_dir)
    try:
        scenario = catalog.get(name)
    except UnknownScenarioError as exc:
        raise BadInput(str(exc)) from None
    if OutputFormat(output) == OutputFormat.TABLE:
        _show_table(scenario, catalog)
    else:
        click.echo(dump(scenario.wire(), output), nl=False)


@scenarios.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, exists=True))
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: problems on stderr; json: a report on stdout.",
)
@pass_settings
def validate(settings: Settings, paths: tuple[Path, ...], output: str) -> None:
    """Validate scenario files and directories (default: the catalog directory).

    Every problem names the file, the field path and the reason. Exits 2 when there is any.
    """
    targets = list(paths) or [settings.catalog.scenarios_dir]
    missing = [p for p in targets if not p.exists()]
    if missing:
        raise BadInput(f"no such file or directory: {', '.join(map(str, missing))}")
    catalog, problems = load_paths(targets)
    if output == "json":
        report = {
            "valid": catalog.names,
            "problems": [{"file": p.source, "path": p.path, "reason": p.reason} for p in problems],
        }
        click.echo(dump(report, OutputFormat.JSON), nl=False)
    else:
        for problem in problems:
            warn(str(problem))
    if problems:
        files = len({p.source for p in problems})
        raise BadInput(
            f"{len(problems)} problem(s) in {files} file(s); {len(catalog)} scenario(s) valid"
        )
    if output == "text":
        click.echo(f"{len(catalog)} scenario(s) valid in {', '.join(map(str, targets))}")


@scenarios.command("bundle")
@scenarios_dir_option
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the bundle to this file (default: standard output).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 if the --output file differs from a fresh bundle.",
)
@pass_settings
def bundle_scenarios(
    settings: Settings, scenarios_dir: Path | None, output: Path | None, check: bool
) -> None:
    """Write the catalog as one multi-document manifest (for `kubectl apply -f` and the chart).

    Refuses (exit 2) when any scenario file is invalid, naming every problem.
    """
    root = scenarios_dir or settings.catalog.scenarios_dir
    if not root.is_dir():
        raise BadInput(f"scenarios directory {root} does not exist")
    try:
        text = bundle(root)
    except CatalogBundleError as exc:
        raise BadInput(str(exc)) from exc
    if output is None:
        if check:
            raise BadInput("--check needs --output")
        click.echo(text, nl=False)
        return
    current = output.read_text(encoding="utf-8") if output.is_file() else None
    if check:
        if current != text:
            raise click.ClickException(f"{output} is out of date; run `make generate`")
        click.echo(f"{output} is up to date")
        return
    if current != text:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output}")


@scenarios.command("selftest")
@click.argument("names", nargs=-1)
@scenarios_dir_option
@click.option("--seed", type=int, default=0, show_default=True, help="Simulator seed.")
@click.option(
    "--workers", type=click.IntRange(1, 64), default=1, show_default=True, help="Processes."
)
@output_option(default=OutputFormat.TABLE)
@pass_settings
def selftest(
    settings: Settings,
    names: tuple[str, ...],
    scenarios_dir: Path | None,
    seed: int,
    workers: int,
    output: str,
) -> None:
    """Run scenarios in the simulator: healthy baseline, alerts fire, mitigation clears, recovery.

    Exits 1 when any scenario fails a check (the failed check is named).
    """
    from itbench.environments.sim.selftest import run_catalog_selftest

    catalog = open_catalog(settings, scenarios_dir)
    try:
        chosen = [catalog.get(n) for n in names] if names else list(catalog)
    except UnknownScenarioError as exc:
        raise BadInput(str(exc)) from None
    results = run_catalog_selftest(chosen, seed, workers=workers)
    rows = []
    for result in results:
        failures = result.failures()
        rows.append(
            {
                "scenario": result.scenario,
                "passed": result.passed,
                "checks": len(result.checks),
                "failed": "; ".join(f"{c.name}: {c.detail}" for c in failures),
            }
        )
    print_rows(
        rows,
        (
            ("scenario", "SCENARIO"),
            ("passed", "PASSED"),
            ("checks", "CHECKS"),
            ("failed", "FAILED"),
        ),
        output,
        title=f"self-test (seed {seed})",
    )
    failed = [r for r in results if not r.passed]
    if failed:
        warn(f"{len(failed)} of {len(results)} scenario(s) failed the self-test")
        raise SystemExit(1)
    warn(f"{len(results)} scenario(s) passed the self-test")
