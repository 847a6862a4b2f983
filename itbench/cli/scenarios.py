"""`itbench scenarios list|show|validate|expand|selftest|bundle`: the scenario catalog on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape

from itbench.catalog_files import CatalogBundleError, LoadResult, bundle, load_paths, load_tree
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
from itbench.core.catalog import Catalog, Problem, UnknownScenarioError, Variants
from itbench.core.models.base import Complexity, Domain
from itbench.core.variants import Instance, parameter_choices
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
    ("instances", "INSTANCES"),
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


SHOWN_PROBLEMS = 20
"""Problems a refusal lists before it counts the rest."""


def load_catalog_dir(settings: Settings, scenarios_dir: Path | None) -> LoadResult:
    """Load the catalog directory of a command.

    Args:
        settings: The settings (default directory).
        scenarios_dir: The directory given on the command line, if any.

    Raises:
        BadInput: If the directory does not exist.
    """
    root = scenarios_dir or settings.catalog.scenarios_dir
    if not root.is_dir():
        raise BadInput(
            f"scenario directory {root} does not exist; pass --scenarios-dir or set "
            "ITBENCH_SCENARIOS_DIR"
        )
    return load_tree([root])


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
    result = load_catalog_dir(settings, scenarios_dir)
    if result.problems:
        root = scenarios_dir or settings.catalog.scenarios_dir
        warn(
            f"warning: {len(result.problems)} problem(s) in {root}; invalid scenarios are left "
            f"out (run `itbench scenarios validate {root}`)"
        )
    return result.catalog


def problem_lines(problems: list[Problem]) -> str:
    """Problems one per line, at most SHOWN_PROBLEMS of them."""
    lines = [f"  {p}" for p in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"  ... and {len(problems) - SHOWN_PROBLEMS} more")
    return "\n".join(lines)


def refuse_problems(result: LoadResult, what: str) -> None:
    """Refuse (exit 2) to go on with a catalog that has problems, listing them.

    Args:
        result: The loaded catalog.
        what: What the command would have done, for the message.

    Raises:
        BadInput: When there is any problem (an invalid file or a repeated name).
    """
    if result.problems:
        files = len({p.source for p in result.problems})
        raise BadInput(
            f"cannot {what}: {len(result.problems)} problem(s) in {files} scenario file(s); fix "
            f"them (`itbench scenarios validate`) or pass --scenarios-dir:\n"
            + problem_lines(result.problems)
        )


def require_variants(result: LoadResult, name: str) -> Variants:
    """The named scenario, or a refusal naming the invalid file(s) that hold it.

    Args:
        result: The loaded catalog.
        name: The scenario name.

    Raises:
        BadInput: The name is invalid in its file, repeated, or unknown.
    """
    problems = result.problems_of(name)
    if problems:
        raise BadInput(f"scenario {name} is invalid:\n" + problem_lines(problems))
    try:
        return result.catalog.variants(name)
    except UnknownScenarioError as exc:
        raise BadInput(str(exc)) from None


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


def _parameters_text(variants: Variants) -> str:
    parameters = variants.template.parameters
    if not parameters:
        return "none (a single instance)"
    parts = []
    for name in variants.template.names:
        pool = parameter_choices(parameters[name])
        parts.append(f"{name} in {' | '.join(map(str, pool))}")
    return "; ".join(parts) + f" ({len(variants.instances)} instances)"


def _show_table(variants: Variants, catalog: Catalog) -> None:
    scenario = variants.scenario
    spec = scenario.spec
    complexity, score = catalog.complexity(scenario.name)
    truth = spec.ground_truth
    lines: list[tuple[str, str]] = [
        ("Name", scenario.name),
        ("Title", spec.title or "-"),
        ("Domain", spec.domain.value),
        ("Class", spec.scenario_class),
        ("Complexity", complexity.value + (f" (Eq. 6 score {score:.2f})" if score else "")),
        ("Parameters", _parameters_text(variants)),
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
    if variants.template.parameters:
        lines.append(("Shown", f"the first instance ({variants.instances[0].label()})"))
    console = stdout_console()
    for key, value in lines:
        console.print(f"[bold]{key}:[/bold] {escape(value)}", highlight=False, markup=True)


@scenarios.command("show")
@click.argument("name")
@scenarios_dir_option
@output_option(default=OutputFormat.YAML)
@pass_settings
def show_scenario(settings: Settings, name: str, scenarios_dir: Path | None, output: str) -> None:
    """Show one scenario: its file as applied to the cluster (yaml, json) or summarised (table).

    A template is shown as written, with its parameters; `itbench scenarios expand` shows its
    instances. An invalid file is named with its problems (exit 2).
    """
    result = load_catalog_dir(settings, scenarios_dir)
    variants = require_variants(result, name)
    if OutputFormat(output) == OutputFormat.TABLE:
        _show_table(variants, result.catalog)
    elif variants.template.parameters:
        click.echo(dump(dict(variants.template.document), output), nl=False)
    else:
        click.echo(dump(_instance_document(variants.instances[0]), output), nl=False)


def _instance_document(instance: Instance) -> dict[str, Any]:
    doc = instance.scenario.wire()
    doc.pop("status", None)
    if not doc["spec"].get("parameters"):
        doc["spec"].pop("parameters", None)  # an instance has values, not parameters
    return doc


@scenarios.command("expand")
@click.argument("name")
@scenarios_dir_option
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="First seed.")
@click.option(
    "--count",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Instances to print, for seeds seed, seed+1, ...",
)
@output_option(default=OutputFormat.YAML)
@pass_settings
def expand_scenario(
    settings: Settings,
    name: str,
    scenarios_dir: Path | None,
    seed: int,
    count: int,
    output: str,
) -> None:
    """Print the instances of a scenario that seeds draw (the dev split of a run with that seed).

    yaml: one Scenario manifest per seed (values in the itbench.io/parameters annotation);
    json: a list of {seed, parameters, scenario}; table: the values each seed draws. The same
    seed always gives the same instance; a file without parameters is its only instance.
    """
    result = load_catalog_dir(settings, scenarios_dir)
    variants = require_variants(result, name)
    drawn = [(s, variants.instance(s)) for s in range(seed, seed + count)]
    fmt = OutputFormat(output)
    if fmt == OutputFormat.TABLE:
        rows = [{"seed": s, "parameters": i.label() or "-"} for s, i in drawn]
        print_rows(rows, (("seed", "SEED"), ("parameters", "PARAMETERS")), fmt, title=name)
    elif fmt == OutputFormat.JSON:
        docs = [
            {"seed": s, "parameters": i.values, "scenario": _instance_document(i)} for s, i in drawn
        ]
        click.echo(dump(docs, fmt), nl=False)
    else:
        texts = [f"# seed {s}\n" + dump(_instance_document(i), fmt) for s, i in drawn]
        click.echo("---\n".join(texts), nl=False)


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
            "instances": {n: len(catalog.variants(n).instances) for n in catalog.names},
            "digest": catalog.digest,
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
        instances = sum(len(catalog.variants(n).instances) for n in catalog.names)
        click.echo(
            f"{len(catalog)} scenario(s) valid ({instances} instance(s)) in "
            f"{', '.join(map(str, targets))}"
        )


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
@click.option(
    "--seed",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Simulator seed, and the seed that draws each template's instance.",
)
@click.option(
    "--all-instances",
    is_flag=True,
    help="Test every instance of each template, not only the one the seed draws.",
)
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
    all_instances: bool,
    workers: int,
    output: str,
) -> None:
    """Run scenarios in the simulator: healthy baseline, alerts fire, mitigation clears, recovery.

    Without names, every scenario of the catalog (refused when any file is invalid). Exits 1
    when any instance fails a check (the failed check is named).
    """
    from itbench.environments.sim.selftest import run_catalog_selftest

    result = load_catalog_dir(settings, scenarios_dir)
    if names:
        chosen = [require_variants(result, n) for n in dict.fromkeys(names)]
    else:
        refuse_problems(result, "self-test the catalog")
        chosen = [result.catalog.variants(n) for n in result.catalog.names]
    instances: list[Instance] = []
    for variants in chosen:
        instances.extend(variants.instances if all_instances else [variants.instance(seed)])
    results = run_catalog_selftest([i.scenario for i in instances], seed, workers=workers)
    rows = []
    for instance, outcome in zip(instances, results, strict=True):
        failures = outcome.failures()
        rows.append(
            {
                "scenario": outcome.scenario,
                "parameters": instance.values,
                "instance": instance.label() or "-",
                "passed": outcome.passed,
                "checks": len(outcome.checks),
                "failed": "; ".join(f"{c.name}: {c.detail}" for c in failures),
            }
        )
    print_rows(
        rows,
        (
            ("scenario", "SCENARIO"),
            ("instance", "INSTANCE"),
            ("passed", "PASSED"),
            ("checks", "CHECKS"),
            ("failed", "FAILED"),
        ),
        output,
        title=f"self-test (seed {seed})",
    )
    failed = [r for r in results if not r.passed]
    if failed:
        warn(f"{len(failed)} of {len(results)} instance(s) failed the self-test")
        raise SystemExit(1)
    warn(f"{len(results)} instance(s) of {len(chosen)} scenario(s) passed the self-test")
