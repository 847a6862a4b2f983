"""Load scenario files from disk: `scenarios/<domain>/<id>/scenario.yaml` into a validated Catalog.

Every file is read with the bounded YAML loader (`itbench.bounded_yaml`: size, depth, alias and
duplicate-key limits, reported with line and column); everything else is validated by the pure
`itbench.core.catalog`, so every problem names its file, field path and reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from itbench.bounded_yaml import YamlError, parse_one, read_bounded
from itbench.core.catalog import Catalog, Problem, Variants, check_catalog, validate_template
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario

SCENARIO_FILE = "scenario.yaml"
DOMAIN_DIRS: dict[str, Domain] = {"sre": Domain.SRE, "ciso": Domain.CISO, "finops": Domain.FINOPS}


def read_document(path: Path) -> tuple[object, list[Problem]]:
    """Parse one YAML file holding exactly one document, within the bounded loader's limits.

    Args:
        path: The file.

    Returns:
        (document, problems); the document is None when there are problems.
    """
    source = str(path)
    try:
        text = read_bounded(path)
        return parse_one(text), []
    except OSError as exc:
        return None, [Problem(source, "", f"cannot read file: {exc.strerror or exc}")]
    except YamlError as exc:
        return None, [Problem(source, "", str(exc))]


def _placement_problems(path: Path, scenario: Scenario) -> list[Problem]:
    # Only files laid out as <domain>/<id>/scenario.yaml are held to the layout.
    if path.name != SCENARIO_FILE or path.parent.parent.name not in DOMAIN_DIRS:
        return []
    problems: list[Problem] = []
    directory = path.parent.name
    if scenario.metadata.name != directory:
        problems.append(
            Problem(
                str(path),
                "metadata.name",
                f"name {scenario.metadata.name!r} differs from its directory {directory!r}; "
                "rename one of them",
            )
        )
    expected = DOMAIN_DIRS[path.parent.parent.name]
    if scenario.spec.domain != expected:
        problems.append(
            Problem(
                str(path),
                "spec.domain",
                f"domain {scenario.spec.domain.value} in a {path.parent.parent.name}/ directory "
                f"(expected {expected.value})",
            )
        )
    return problems


def load_variants(path: Path) -> tuple[Variants | None, list[Problem]]:
    """Read and validate one scenario file, expanding a template into every instance.

    Args:
        path: A scenario YAML file.

    Returns:
        (variants, problems); the variants are None when there are problems.
    """
    doc, problems = read_document(path)
    if problems:
        return None, problems
    variants, problems = validate_template(doc, str(path))
    if variants is None:
        return None, problems
    placement = _placement_problems(path, variants.scenario)
    return (None if placement else variants), placement


def load_file(path: Path) -> tuple[Scenario | None, list[Problem]]:
    """Read and validate one scenario file.

    Args:
        path: A scenario YAML file.

    Returns:
        (scenario, problems); the scenario (a template's representative instance) is None
        when there are problems.
    """
    variants, problems = load_variants(path)
    return (variants.scenario if variants is not None else None), problems


def scenario_files(paths: Sequence[Path]) -> tuple[list[Path], list[Problem]]:
    """Expand files and directories into scenario files.

    A directory contributes every `scenario.yaml` below it; a file is taken as given.

    Args:
        paths: Files or directories.

    Returns:
        (files sorted within each argument, problems for paths that do not exist or hold none).
    """
    files: list[Path] = []
    problems: list[Problem] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.rglob(SCENARIO_FILE))
            if not found:
                problems.append(Problem(str(path), "", f"no {SCENARIO_FILE} files below it"))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(Problem(str(path), "", "no such file or directory"))
    return list(dict.fromkeys(files)), problems


@dataclass(frozen=True)
class LoadResult:
    """What loading scenario files found.

    Attributes:
        catalog: The valid scenarios.
        problems: Every problem, each naming its file and field path.
        claims: For every file read, the scenario names it stands for (its `metadata.name`, if
            it has one, and its directory), so a command asked for a name can say which file
            holding it is invalid.
    """

    catalog: Catalog
    problems: list[Problem]
    claims: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def problems_of(self, name: str) -> list[Problem]:
        """The problems of every file that stands for a scenario name."""
        sources = {src for src, names in self.claims.items() if name in names}
        return [p for p in self.problems if p.source in sources]


def _claimed_names(path: Path, doc: object) -> frozenset[str]:
    names = {path.parent.name} if path.name == SCENARIO_FILE else {path.stem}
    if isinstance(doc, Mapping):
        meta = doc.get("metadata")
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            names.add(meta["name"][:253])
    return frozenset(names)


def load_tree(paths: Sequence[Path]) -> LoadResult:
    """Load and validate scenario files and directories into one catalog.

    Invalid files and later duplicates of a name are left out of the catalog and reported.

    Args:
        paths: Files or directories.

    Returns:
        The catalog, the problems, and which names each file stands for.
    """
    files, problems = scenario_files(paths)
    loaded: list[tuple[str, Variants]] = []
    claims: dict[str, frozenset[str]] = {}
    for path in files:
        doc, found = read_document(path)
        claims[str(path)] = _claimed_names(path, doc)
        variants: Variants | None = None
        if not found:
            variants, found = validate_template(doc, str(path))
            if variants is not None:
                found = _placement_problems(path, variants.scenario)
        problems.extend(found)
        if variants is not None and not found:
            loaded.append((str(path), variants))
    duplicates = check_catalog((src, v.scenario) for src, v in loaded)
    problems.extend(duplicates)
    dropped = {(p.source, p.path) for p in duplicates}
    kept = [v for src, v in loaded if (src, "metadata.name") not in dropped]
    return LoadResult(Catalog(kept), problems, claims)


def load_paths(paths: Sequence[Path]) -> tuple[Catalog, list[Problem]]:
    """Load and validate scenario files and directories into one catalog (see `load_tree`).

    Args:
        paths: Files or directories.

    Returns:
        (catalog of the valid scenarios, every problem found).
    """
    result = load_tree(paths)
    return result.catalog, result.problems


def load_catalog(root: Path) -> tuple[Catalog, list[Problem]]:
    """Load the catalog under a scenarios directory (`<root>/<domain>/<id>/scenario.yaml`).

    Args:
        root: The scenarios directory.

    Returns:
        (catalog of the valid scenarios, every problem found).
    """
    return load_paths([root])


BUNDLE_HEADER = (
    "# The scenario catalog as one multi-document manifest (`kubectl apply -f`, or the Helm\n"
    "# chart's scenarios.install). Generated from scenarios/ by `make generate`; do not edit.\n"
)


class CatalogBundleError(ValueError):
    """The catalog cannot be bundled because some of its files are invalid."""


def bundle(root: Path) -> str:
    """The whole catalog under `root` as one YAML stream of Scenario manifests, by file path.

    Each document is the scenario file as written (comments kept), headed by its source path
    relative to `root`'s parent, so the bundle is reproducible and reviewable.

    Args:
        root: The scenarios directory.

    Raises:
        CatalogBundleError: Any file is invalid (the message lists every problem).
    """
    catalog, problems = load_catalog(root)
    if problems:
        listed = "; ".join(str(p) for p in problems)
        raise CatalogBundleError(
            f"the catalog under {root} has {len(problems)} problem(s): {listed}"
        )
    files, _ = scenario_files([root])
    parts = [BUNDLE_HEADER]
    for path in files:
        lines = read_bounded(path).splitlines()
        body = [line for line in lines if not line.startswith("# yaml-language-server:")]
        source = path.relative_to(root.parent).as_posix()
        parts.append("---\n# Source: " + source + "\n" + "\n".join(body).strip("\n") + "\n")
    assert len(files) == len(catalog), "every valid file is one catalog entry"
    return "".join(parts)
