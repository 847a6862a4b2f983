"""The scenario catalog: validation of scenario documents and selection of scenarios for a run.

Pure: documents come in already parsed (see `itbench.catalog_files` for the directory loader) and
every finding is a `Problem` naming its source, field path and reason.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from itbench.core.complexity import UnknownComplexityError, effective_complexity
from itbench.core.excerpts import bounded, excerpt
from itbench.core.faults import fault_arg_errors
from itbench.core.models.base import COMPLEXITY_ORDER, AgentLevel, Complexity, Domain
from itbench.core.models.benchmark_run import ScenarioSelection
from itbench.core.models.scenario import Scenario
from itbench.core.scenario_checks import Inventory, document_findings, reference_findings
from itbench.core.variants import (
    Instance,
    Template,
    canonical_values,
    template_problems,
    values_label,
)

MAX_PROBLEMS = 50
"""Problems reported for one document; beyond that they are counted."""
_PATH_PART_CHARS = 64

_UNION_TAGS = frozenset({"int", "str", "float", "bool"})
_MESSAGE_PATH = re.compile(r"^([A-Za-z_][\w]*(?:\[\d+\])?(?:\.[A-Za-z_][\w]*(?:\[\d+\])?)*): (.*)$")


@dataclass(frozen=True, order=True)
class Problem:
    """One finding about a scenario document.

    Attributes:
        source: Where the document came from (a file path or an object name).
        path: Field path inside the document, e.g. `spec.faults[0].args.port`; empty for the whole
            document.
        reason: What is wrong and, where possible, what to do.
    """

    source: str
    path: str
    reason: str

    def __post_init__(self) -> None:
        # Paths and reasons may quote user input; both stay small whatever the input was.
        object.__setattr__(self, "path", bounded(self.path, 200))
        object.__setattr__(self, "reason", bounded(self.reason))

    def __str__(self) -> str:
        return f"{self.source}: {self.path or '<document>'}: {self.reason}"


class CatalogError(ValueError):
    """A catalog operation cannot be carried out as asked."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`; did you mean a or b?` naming the known names closest to a mistyped one (difflib's
    ratio of at least 0.6, at most three), or nothing when none is close."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


class UnknownScenarioError(CatalogError, KeyError):
    """One or more scenario names are not in the catalog."""

    def __init__(self, names: Sequence[str], known: Sequence[str]) -> None:
        self.names = list(names)
        hint = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        guesses = "".join(did_you_mean(n, known) for n in names[:3])
        super().__init__(
            f"unknown scenario{'s' if len(names) > 1 else ''}: {', '.join(names)}{guesses} "
            f"(known: {hint or 'none'}; see `itbench scenarios list`)"
        )

    def __str__(self) -> str:
        return str(self.args[0])


class SelectionError(CatalogError):
    """A selection that names scenarios the agent cannot take, or matches none."""


def field_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic error location as a field path like `spec.faults[0].args.port`.

    Args:
        loc: The location tuple of a pydantic error.

    Returns:
        The dotted path with list indices in brackets.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if len(text) > _PATH_PART_CHARS:
                text = excerpt(text, _PATH_PART_CHARS // 2)
            out += f".{text}" if out else text
    return out


def _join(base: str, sub: str) -> str:
    if not base:
        return sub
    if not sub:
        return base
    return f"{base}{sub}" if sub.startswith("[") else f"{base}.{sub}"


def validation_problems(exc: ValidationError, source: str, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ValidationError into problems with field paths.

    Union alternatives of one field are merged into one problem, and a model validator's message
    that starts with a relative path (`propagation[0].target: ...`) extends the field path.

    Args:
        exc: The validation error.
        source: Where the document came from.
        prefix: Path prepended to every location (for documents nested in another).

    Returns:
        The problems, de-duplicated, in the order pydantic reported them.
    """
    merged: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = list(err["loc"])
        msg = str(err["msg"])
        if loc and isinstance(loc[-1], str) and loc[-1] in _UNION_TAGS:
            loc = loc[:-1]
        path = _join(prefix, field_path(loc))
        if err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
            match = _MESSAGE_PATH.match(msg)
            if match:
                sub, msg = match.group(1), match.group(2)
                last = str(loc[-1]) if loc else ""
                if sub != last and not sub.startswith(f"{last}."):
                    path = _join(path, sub)
                elif sub.startswith(f"{last}."):
                    path = _join(path, sub[len(last) + 1 :])
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] in ("enum", "literal_error"):
            msg = f"{msg}, got {excerpt(err['input'])}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (check spelling and camelCase)"
        reasons = merged.setdefault(path, [])
        if msg not in reasons:
            reasons.append(msg)
    return [Problem(source, path, " or ".join(reasons)) for path, reasons in merged.items()]


def _semantic_problems(scenario: Scenario, source: str) -> list[Problem]:
    spec = scenario.spec
    problems: list[Problem] = []
    for n, fault in enumerate(spec.faults):
        for sub, reason in fault_arg_errors(fault.id, fault.args):
            problems.append(Problem(source, f"spec.faults[{n}].{sub}", reason))
    if spec.domain == Domain.SRE and not spec.control:
        if not spec.triggers.alerts:
            problems.append(
                Problem(
                    source,
                    "spec.triggers.alerts",
                    "an SRE fault scenario needs at least one triggering alert",
                )
            )
        if not spec.ground_truth.root_causes():
            problems.append(
                Problem(
                    source,
                    "spec.groundTruth.entities",
                    "no entity is flagged rootCause: true; diagnosis cannot be scored",
                )
            )
    try:
        effective_complexity(spec)
    except UnknownComplexityError as exc:
        problems.append(Problem(source, "spec.complexity", str(exc)))
    return problems


def _capped(problems: list[Problem], source: str) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    extra = len(problems) - MAX_PROBLEMS
    return [
        *problems[:MAX_PROBLEMS],
        Problem(source, "", f"{extra} more problem(s) not listed; fix these first"),
    ]


def _validate_instance(
    doc: Mapping[str, Any], source: str, inventory: Inventory | None
) -> tuple[Scenario | None, list[Problem]]:
    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as exc:
        return None, validation_problems(exc, source)
    problems = _semantic_problems(scenario, source)
    problems.extend(Problem(source, p, r) for p, r in reference_findings(scenario, inventory))
    return (None if problems else scenario), problems


@dataclass(frozen=True)
class Variants:
    """One scenario of the catalog: its file (a template, or a plain scenario) and every instance.

    Attributes:
        template: The document and its parameters.
        instances: Every instance, validated, in the order of `Template.combinations`; the
            first (every parameter at its first value) represents the scenario in listings.
    """

    template: Template
    instances: tuple[Instance, ...]

    @property
    def scenario(self) -> Scenario:
        """The representative instance."""
        return self.instances[0].scenario

    @property
    def name(self) -> str:
        """The scenario name."""
        return self.scenario.name

    def instance(self, seed: int) -> Instance:
        """The instance a seed draws (the only one, for a plain scenario)."""
        if len(self.instances) == 1:
            return self.instances[0]
        wanted = canonical_values(self.template.draw(seed))
        for instance in self.instances:
            if canonical_values(instance.values) == wanted:
                return instance
        raise CatalogError(f"{self.name}: no instance for seed {seed}")  # pragma: no cover

    @classmethod
    def of(cls, scenario: Scenario) -> Variants:
        """A plain scenario as its own single instance."""
        document = {k: v for k, v in scenario.wire().items() if k != "status"}
        return cls(Template(document=document), (Instance(scenario),))


def validate_template(
    doc: object, source: str, inventory: Inventory | None = None
) -> tuple[Variants | None, list[Problem]]:
    """Validate one parsed scenario document, expanding a template into every instance.

    First the document itself (apiVersion and kind given, finite numbers, no invisible
    characters, parameters and placeholders well formed), then every instance: the schema, fault
    ids and arguments against the fault library, SRE triggers and root cause, a known
    complexity, and every name it uses against the shop (`scenario_checks.reference_findings`).
    A problem found in only some instances says which parameter values break. A `status` is
    ignored (the API server ignores it on apply too), so cluster objects validate.

    Args:
        doc: The parsed document (a mapping for a valid scenario).
        source: Where it came from, used in every problem.
        inventory: The application's objects [default: the Astronomy Shop].

    Returns:
        (variants, problems): the variants when there are no problems, else None.
    """
    if not isinstance(doc, Mapping):
        kind = "nothing" if doc is None else type(doc).__name__
        return None, [Problem(source, "", f"expected a Scenario object (a mapping), got {kind}")]
    raw = {k: v for k, v in doc.items() if k != "status"}
    problems = [Problem(source, p, r) for p, r in document_findings(raw)]
    if problems:
        return None, _capped(problems, source)
    template, found = template_problems(raw)
    if template is None:
        return None, _capped([Problem(source, p, r) for p, r in found], source)
    if not template.parameters:
        scenario, problems = _validate_instance(raw, source, inventory)
        if scenario is None:
            return None, _capped(problems, source)
        return Variants(template, (Instance(scenario),)), []
    instances: list[Instance] = []
    per_instance: list[tuple[str, list[Problem]]] = []
    for values in template.combinations():
        scenario, problems = _validate_instance(template.expand(values), source, inventory)
        if scenario is not None:
            instances.append(Instance(scenario, values))
        per_instance.append((values_label(values), problems))
    problems = _merge_instance_problems(per_instance, source)
    if not problems:
        problems = _consistency_problems(instances, source)
    if problems:
        return None, _capped(problems, source)
    return Variants(template, tuple(instances)), []


def _merge_instance_problems(
    per_instance: list[tuple[str, list[Problem]]], source: str
) -> list[Problem]:
    """One problem for what breaks every instance; the values named for what breaks some."""
    counts: dict[tuple[str, str], list[str]] = {}
    for label, problems in per_instance:
        for p in problems:
            counts.setdefault((p.path, p.reason), []).append(label)
    out: list[Problem] = []
    for (path, reason), labels in counts.items():
        if len(labels) == len(per_instance):
            out.append(Problem(source, path, reason))
        else:
            shown = "; ".join(labels[:3]) + (
                f"; and {len(labels) - 3} more" if len(labels) > 3 else ""
            )
            out.append(Problem(source, path, f"with {shown}: {reason}"))
        if len(out) > MAX_PROBLEMS:
            break
    return out


def _consistency_problems(instances: list[Instance], source: str) -> list[Problem]:
    complexities = {
        instance.label(): effective_complexity(instance.scenario.spec)[0] for instance in instances
    }
    if len(set(complexities.values())) > 1:
        listed = "; ".join(f"{c.value} with {label}" for label, c in list(complexities.items())[:4])
        return [
            Problem(
                source,
                "spec.parameters",
                f"the instances differ in complexity ({listed}); every instance of a template "
                "must share its complexity",
            )
        ]
    return []


def validate_document(
    doc: object, source: str, inventory: Inventory | None = None
) -> tuple[Scenario | None, list[Problem]]:
    """Validate one parsed scenario document (see `validate_template`).

    Args:
        doc: The parsed document (a mapping for a valid scenario).
        source: Where it came from, used in every problem.
        inventory: The application's objects [default: the Astronomy Shop].

    Returns:
        (scenario, problems): the scenario (for a template, its representative instance) when
        there are no problems, else None.
    """
    variants, problems = validate_template(doc, source, inventory)
    return (variants.scenario if variants is not None else None), problems


def canonical_json(document: object) -> str:
    """A document as canonical JSON: sorted keys, no whitespace, UTF-8 characters kept."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def catalog_digest(documents: Iterable[object]) -> str:
    """The digest of a catalog: sha256 of its documents' canonical JSON, sorted, one per line.

    Args:
        documents: Every scenario document (as written, without status).

    Returns:
        `sha256:<hex>`.
    """
    lines = sorted(canonical_json(d) for d in documents)
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def check_catalog(entries: Iterable[tuple[str, Scenario]]) -> list[Problem]:
    """Cross-scenario checks: every scenario name appears once.

    Args:
        entries: (source, scenario) pairs, in load order.

    Returns:
        One problem for each repeated name, at the later source, naming the first.
    """
    first: dict[str, str] = {}
    problems: list[Problem] = []
    for source, scenario in entries:
        name = scenario.metadata.name
        if name in first:
            problems.append(
                Problem(
                    source,
                    "metadata.name",
                    f"duplicate scenario name {name!r} (also defined in {first[name]})",
                )
            )
        else:
            first[name] = source
    return problems


def _at_most(level: AgentLevel | None, complexity: Complexity) -> bool:
    if level is None:
        return True
    return COMPLEXITY_ORDER[complexity] <= COMPLEXITY_ORDER[level.max_complexity()]


class Catalog:
    """An immutable set of validated scenarios, looked up by name and selected for runs."""

    def __init__(self, scenarios: Iterable[Scenario | Variants]) -> None:
        """Build a catalog.

        Args:
            scenarios: Validated scenarios (each its own single instance) or validated
                variants of templates, with distinct names.

        Raises:
            CatalogError: If two scenarios share a name.
            UnknownComplexityError: If a scenario's complexity cannot be determined (documents
                that passed `validate_document` never raise this).
        """
        by_name: dict[str, Variants] = {}
        for item in scenarios:
            variants = item if isinstance(item, Variants) else Variants.of(item)
            if variants.name in by_name:
                raise CatalogError(f"duplicate scenario name {variants.name!r}")
            by_name[variants.name] = variants
        self._variants: Mapping[str, Variants] = dict(sorted(by_name.items()))
        self._by_name: Mapping[str, Scenario] = {
            name: v.scenario for name, v in self._variants.items()
        }
        self._complexity: Mapping[str, tuple[Complexity, float | None]] = {
            name: effective_complexity(s.spec) for name, s in self._by_name.items()
        }

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[Scenario]:
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> list[str]:
        """Every scenario name, sorted."""
        return list(self._by_name)

    def get(self, name: str) -> Scenario:
        """Return a scenario by name.

        Args:
            name: The scenario name.

        Returns:
            The scenario.

        Raises:
            UnknownScenarioError: If the name is not in the catalog.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownScenarioError([name], self.names) from None

    def variants(self, name: str) -> Variants:
        """A scenario's file and every instance of it.

        Raises:
            UnknownScenarioError: If the name is not in the catalog.
        """
        self.get(name)
        return self._variants[name]

    def instance(self, name: str, seed: int) -> Instance:
        """The instance of a scenario a seed draws (a plain scenario is its only instance).

        Raises:
            UnknownScenarioError: If the name is not in the catalog.
        """
        return self.variants(name).instance(seed)

    @property
    def digest(self) -> str:
        """`catalog_digest` of every scenario file of the catalog."""
        return catalog_digest(v.template.document for v in self._variants.values())

    def complexity(self, name: str) -> tuple[Complexity, float | None]:
        """The effective complexity and Eq. 6 score of a scenario (see `effective_complexity`).

        Args:
            name: The scenario name.

        Returns:
            (complexity, score); score is None outside SRE.

        Raises:
            UnknownScenarioError: If the name is not in the catalog.
        """
        self.get(name)
        return self._complexity[name]

    def select(
        self,
        selection: ScenarioSelection,
        level: AgentLevel | None = None,
        classes: Sequence[str] = (),
        domain: Domain | None = None,
    ) -> list[Scenario]:
        """Resolve a run's scenario selection for an agent.

        Explicit names must exist and suit the agent; a selector keeps the scenarios that match it
        and suit the agent. The agent's constraints are its domain, its level (scenarios up to
        `level.max_complexity()`) and its classes (empty means all; control scenarios always
        qualify). An optional sample draws `size` scenarios with `random.Random(seed)`.

        Args:
            selection: Names or a selector, optionally sampled.
            level: The agent's level, or None for no complexity limit.
            classes: Scenario classes the agent takes; empty for all.
            domain: The agent's domain, or None for any.

        Returns:
            The selected scenarios, sorted by name.

        Raises:
            UnknownScenarioError: If explicit names are not in the catalog (all are named).
            SelectionError: If named scenarios do not suit the agent, or nothing matches.
        """

        def misfit(s: Scenario) -> str:
            spec = s.spec
            if domain is not None and spec.domain != domain:
                return f"domain {spec.domain.value}, agent is {domain.value}"
            complexity = self._complexity[s.name][0]
            if not _at_most(level, complexity):
                assert level is not None
                return f"{complexity.value} is above what a {level.value} agent takes"
            if classes and not spec.control and spec.scenario_class not in classes:
                return f"class {spec.scenario_class} is not among the agent's classes"
            return ""

        if selection.names:
            unknown = [n for n in dict.fromkeys(selection.names) if n not in self._by_name]
            if unknown:
                raise UnknownScenarioError(unknown, self.names)
            chosen = [self._by_name[n] for n in sorted(set(selection.names))]
            unfit = [f"{s.name} ({why})" for s in chosen if (why := misfit(s))]
            if unfit:
                raise SelectionError(f"scenarios the agent cannot take: {'; '.join(unfit)}")
        else:
            sel = selection.selector
            assert sel is not None  # ScenarioSelection guarantees names or selector
            chosen = [
                s
                for s in self._by_name.values()
                if (not sel.domains or s.spec.domain in sel.domains)
                and (not sel.classes or s.spec.scenario_class in sel.classes)
                and (not sel.complexities or self._complexity[s.name][0] in sel.complexities)
                and (sel.include_controls or not s.spec.control)
                and not misfit(s)
            ]
            if not chosen:
                raise SelectionError(
                    "the selector matches no scenario the agent can take "
                    f"({len(self)} in the catalog); widen the selector or check the agent's "
                    "type, level and classes"
                )
        if selection.sample is not None and selection.sample.size < len(chosen):
            rng = random.Random(selection.sample.seed)
            chosen = sorted(rng.sample(chosen, selection.sample.size), key=lambda s: s.name)
        return chosen

    def summary(self) -> list[dict[str, Any]]:
        """One row per scenario for listings: name, domain, class, complexity, score, faults.

        Returns:
            Rows sorted by name, JSON-compatible.
        """
        rows: list[dict[str, Any]] = []
        for name, s in self._by_name.items():
            complexity, score = self._complexity[name]
            rows.append(
                {
                    "name": name,
                    "domain": s.spec.domain.value,
                    "class": s.spec.scenario_class,
                    "complexity": complexity.value,
                    "score": score,
                    "faults": [f.id for f in s.spec.faults],
                    "traces": s.spec.environment.telemetry.traces,
                    "control": s.spec.control,
                    "instances": len(self._variants[name].instances),
                    "parameters": self._variants[name].template.names,
                }
            )
        return rows
