"""Load scenario files from disk: `scenarios/<domain>/<id>/scenario.yaml` into a validated Catalog.

YAML syntax errors are reported with line and column; everything else is validated by the pure
`itbench.core.catalog`, so every problem names its file, field path and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from itbench.core.catalog import Catalog, Problem, check_catalog, validate_document
from itbench.core.models.base import Domain
from itbench.core.models.scenario import Scenario

SCENARIO_FILE = "scenario.yaml"
DOMAIN_DIRS: dict[str, Domain] = {"sre": Domain.SRE, "ciso": Domain.CISO, "finops": Domain.FINOPS}


def read_document(path: Path) -> tuple[object, list[Problem]]:
    """Parse one YAML file holding exactly one document.

    Args:
        path: The file.

    Returns:
        (document, problems); the document is None when there are problems.
    """
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(source, "", f"cannot read file: {exc}")]
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or "invalid YAML"
        if exc.context and exc.context_mark is not None:
            what += f" ({exc.context} started at line {exc.context_mark.line + 1})"
        return None, [Problem(source, "", f"YAML syntax error{where}: {what}")]
    except yaml.YAMLError as exc:
        return None, [Problem(source, "", f"YAML syntax error: {exc}")]
    if len(docs) != 1:
        return None, [Problem(source, "", f"expected one YAML document, found {len(docs)}")]
    return docs[0], []


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


def load_file(path: Path) -> tuple[Scenario | None, list[Problem]]:
    """Read and validate one scenario file.

    Args:
        path: A scenario YAML file.

    Returns:
        (scenario, problems); the scenario is None when there are problems.
    """
    doc, problems = read_document(path)
    if problems:
        return None, problems
    scenario, problems = validate_document(doc, str(path))
    if scenario is None:
        return None, problems
    placement = _placement_problems(path, scenario)
    return (None if placement else scenario), placement


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


def load_paths(paths: Sequence[Path]) -> tuple[Catalog, list[Problem]]:
    """Load and validate scenario files and directories into one catalog.

    Invalid files and later duplicates of a name are left out of the catalog and reported.

    Args:
        paths: Files or directories.

    Returns:
        (catalog of the valid scenarios, every problem found).
    """
    files, problems = scenario_files(paths)
    loaded: list[tuple[str, Scenario]] = []
    for path in files:
        scenario, found = load_file(path)
        problems.extend(found)
        if scenario is not None:
            loaded.append((str(path), scenario))
    duplicates = check_catalog(loaded)
    problems.extend(duplicates)
    dropped = {(p.source, p.path) for p in duplicates}
    kept = [s for src, s in loaded if (src, "metadata.name") not in dropped]
    return Catalog(kept), problems


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
        lines = path.read_text(encoding="utf-8").splitlines()
        body = [line for line in lines if not line.startswith("# yaml-language-server:")]
        source = path.relative_to(root.parent).as_posix()
        parts.append("---\n# Source: " + source + "\n" + "\n".join(body).strip("\n") + "\n")
    assert len(files) == len(catalog), "every valid file is one catalog entry"
    return "".join(parts)
