"""`itbench crds generate`: write the CRDs, the chart's copy and the editor JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from itbench.cli.context import warn
from itbench.core.crds import all_crds, all_editor_schemas
from itbench.core.models.base import GROUP

HEADER = "# Generated from itbench/core/models by `make generate`; do not edit.\n"


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-objects in full instead of as YAML anchors and aliases."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def render_crd(crd: dict[str, object]) -> str:
    """A CRD as YAML text with the generated-file header."""
    body = yaml.dump(crd, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=100)
    return HEADER + body


def render_schema(schema: dict[str, object]) -> str:
    """A JSON Schema as indented JSON text."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def generated_files(
    output_dir: Path, chart_dir: Path | None, schema_dir: Path | None
) -> dict[Path, str]:
    """Every generated file's path and content.

    Args:
        output_dir: Where the CRDs go.
        chart_dir: Where the chart's copy of the CRDs goes (None: no copy).
        schema_dir: Where the editor JSON Schemas go (None: none).

    Returns:
        Path -> text.
    """
    files: dict[Path, str] = {}
    for name, crd in all_crds().items():
        text = render_crd(crd)
        files[output_dir / name] = text
        if chart_dir is not None:
            files[chart_dir / name] = text
    if schema_dir is not None:
        for name, schema in all_editor_schemas().items():
            files[schema_dir / name] = render_schema(schema)
    return files


def stale_files(files: dict[Path, str], dirs: list[tuple[Path, str]]) -> list[Path]:
    """Generated-looking files in the output directories that are no longer generated.

    Args:
        files: The files that are generated.
        dirs: (directory, glob of generated files) pairs.

    Returns:
        The leftover files, sorted.
    """
    leftovers: set[Path] = set()
    for directory, pattern in dirs:
        if directory.is_dir():
            leftovers.update(p for p in directory.glob(pattern) if p not in files)
    return sorted(leftovers)


@click.group("crds")
def crds() -> None:
    """CustomResourceDefinitions generated from the API models."""


@crds.command("generate")
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("crds"),
    show_default=True,
    help="Directory for the CRD YAML files.",
)
@click.option(
    "--chart-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("charts/itbench/crds"),
    show_default=True,
    help="Directory of the Helm chart's CRD copy.",
)
@click.option(
    "--schema-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("schemas"),
    show_default=True,
    help="Directory for the editor JSON Schemas.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 if any generated file is missing, different or left over.",
)
def generate(output_dir: Path, chart_dir: Path, schema_dir: Path, check: bool) -> None:
    """Write crds/*.yaml, the chart's CRD copy and schemas/*.schema.json from the models."""
    files = generated_files(output_dir, chart_dir, schema_dir)
    crd_glob = f"{GROUP}_*.yaml"
    leftovers = stale_files(
        files, [(output_dir, crd_glob), (chart_dir, crd_glob), (schema_dir, "*.schema.json")]
    )
    if check:
        differing = [
            p
            for p, text in files.items()
            if not p.is_file() or p.read_text(encoding="utf-8") != text
        ]
        for path in differing:
            warn(f"stale: {path}")
        for path in leftovers:
            warn(f"left over: {path}")
        if differing or leftovers:
            raise click.ClickException(
                f"{len(differing) + len(leftovers)} generated file(s) out of date; "
                "run `make generate`"
            )
        click.echo(f"{len(files)} generated files are up to date")
        return
    written = 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
    for path in leftovers:
        path.unlink()
        warn(f"removed {path}")
    click.echo(
        f"{len(files)} files generated ({written} changed) in "
        f"{output_dir}, {chart_dir}, {schema_dir}"
    )
