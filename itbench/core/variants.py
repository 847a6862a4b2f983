"""Procedural variants: scenario templates, their parameters, and the seeds that draw instances.

A scenario file declares `spec.parameters` (name -> choices or an integer range) and writes
`${name}` (or `${name.attribute}`) in any string of its spec. Expanding the file with a seed
gives one concrete instance; the same seed always gives the same instance. The exact rules
(also in scenarios/README.md):

* A parameter name and an attribute name match `[a-z][A-Za-z0-9]*` (at most 63 characters).
* A string that is exactly one placeholder takes the value with its type (an integer choice
  fills an integer field); a placeholder inside a longer string is replaced by the value's
  text. `$${` stands for a literal `${`; any other `${` that is not a placeholder is an error.
* Placeholders may appear in string values anywhere under `spec`, except `spec.parameters`
  and the fields that identify the scenario in the catalog (`domain`, `class`, `control`,
  `complexity`); never in keys or in `metadata`. Every declared parameter must be used.
* The seed draws each parameter on its own: the choice at index
  `int.from_bytes(sha256(f"itbench.io/variant/{scenario}/{seed}/{parameter}")[:8], "big") % n`
  (UTF-8, big-endian), where n is the number of choices (or of range values, ascending).
* The dev split expands every file with the run's public seed; the test split expands each
  trial with the seed `int.from_bytes(HMAC-SHA256(secret, f"{scenario}/{attempt}")[:8], "big")`.

Pure: documents come in parsed; problems come out as (field path, reason) pairs.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from itbench.core.excerpts import bounded as excerpt_message
from itbench.core.excerpts import excerpt
from itbench.core.models.base import LABEL_PREFIX
from itbench.core.models.scenario import ParameterValue, Scenario, ScenarioParameter, Split

PARAMETER_NAME = re.compile(r"^[a-z][A-Za-z0-9]{0,62}$")
"""Grammar of parameter and attribute names."""
MAX_PARAMETERS = 8
"""Parameters one template may declare."""
MAX_INSTANCES = 256
"""Instances one template may have (the product of its parameters' sizes); every one is
validated, so every instance a run can draw is known to be a valid scenario."""
FIXED_SPEC_FIELDS = ("domain", "class", "control", "complexity", "parameters")
"""Spec fields that identify a scenario in the catalog and so take no placeholder."""
PARAMETERS_ANNOTATION = f"{LABEL_PREFIX}parameters"
"""Annotation of an instance: its parameter values as canonical JSON."""

_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_REFERENCE = re.compile(r"^([a-z][A-Za-z0-9]{0,62})(?:\.([a-z][A-Za-z0-9]{0,62}))?$")
_PARAMETERS = TypeAdapter(dict[str, ScenarioParameter])
_RELATIVE = re.compile(r"^([a-z][A-Za-z]*): (.*)$", re.DOTALL)

Values = dict[str, ParameterValue]
"""One instance's parameter values, by parameter name."""


@dataclass(frozen=True)
class Reference:
    """One placeholder: a parameter and, optionally, one of its attributes."""

    parameter: str
    attribute: str | None = None

    def __str__(self) -> str:
        return self.parameter + (f".{self.attribute}" if self.attribute else "")


class PlaceholderError(ValueError):
    """A string holds a `${` that is not a well-formed placeholder."""


def references(text: str) -> list[Reference]:
    """The placeholders of one string, in order.

    Args:
        text: A string of a scenario spec.

    Raises:
        PlaceholderError: A `${` that is not `${name}`, `${name.attribute}` or the escape `$${`.
    """
    found: list[Reference] = []
    if "${" not in text:
        return found
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token == "$${":
            continue
        inner = match.group(1)
        ref = _REFERENCE.match(inner) if inner is not None else None
        if ref is None:
            shown = excerpt(text[match.start() : match.start() + 80])
            raise PlaceholderError(
                f"malformed placeholder in {shown}: write ${{name}} or ${{name.attribute}} "
                "(names match [a-z][A-Za-z0-9]*), or $${ for a literal ${"
            )
        found.append(Reference(ref.group(1), ref.group(2)))
    return found


def _substitute(text: str, lookup: Mapping[Reference, ParameterValue]) -> object:
    if "${" not in text:
        return text
    whole = _TOKEN.fullmatch(text)
    if whole is not None and whole.group(1) is not None:
        ref = _REFERENCE.match(whole.group(1))
        if ref is not None:
            return lookup[Reference(ref.group(1), ref.group(2))]

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        ref = _REFERENCE.match(match.group(1) or "")
        assert ref is not None, "references() accepted every placeholder before expansion"
        return str(lookup[Reference(ref.group(1), ref.group(2))])

    return _TOKEN.sub(one, text)


def _expand(value: object, lookup: Mapping[Reference, ParameterValue]) -> object:
    if isinstance(value, str):
        return _substitute(value, lookup)
    if isinstance(value, dict):
        return {k: _expand(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, lookup) for v in value]
    return value


def _walk_strings(value: object, path: str) -> Iterator[tuple[str, str, bool]]:
    """(path, text, is_key) for every string of a JSON-compatible value."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, dict):
        for key, sub in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "${" in key:
                yield where, key, True
            yield from _walk_strings(sub, where)
    elif isinstance(value, list):
        for n, sub in enumerate(value):
            yield from _walk_strings(sub, f"{path}[{n}]")


def parameter_choices(parameter: ScenarioParameter) -> list[ParameterValue]:
    """Every value a parameter can take, in declared (or ascending) order."""
    if parameter.choices is not None:
        return list(parameter.choices)
    assert parameter.range is not None  # the model guarantees one of the two
    return list(parameter.range.values())


def choice_index(scenario: str, seed: int, parameter: str, count: int) -> int:
    """The index a seed draws for one parameter of one scenario (see the module docstring).

    Args:
        scenario: The scenario (template) name.
        seed: The seed.
        parameter: The parameter name.
        count: How many values the parameter has.
    """
    digest = hashlib.sha256(f"itbench.io/variant/{scenario}/{seed}/{parameter}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def secret_seed(secret: str, scenario: str, attempt: int) -> int:
    """The seed of one trial's instance in the test split: HMAC-SHA256(secret, scenario/attempt).

    Args:
        secret: The run's seed secret (never stored or shown).
        scenario: The scenario name.
        attempt: The attempt index.
    """
    digest = hmac.new(
        secret.encode("utf-8"), f"{scenario}/{attempt}".encode(), hashlib.sha256
    ).digest()
    return int.from_bytes(digest[:8], "big")


def instance_seed(
    split: Split, *, seed: int, scenario: str, attempt: int, secret: str | None = None
) -> int:
    """The seed a trial expands its scenario with.

    Args:
        split: dev (the run's public seed) or test (derived from the secret).
        seed: The run's public seed.
        scenario: The scenario name.
        attempt: The attempt index.
        secret: The seed secret; required for the test split.

    Raises:
        ValueError: The test split without a secret.
    """
    if split == Split.DEV:
        return seed
    if not secret:
        raise ValueError("the test split needs a seed secret")
    return secret_seed(secret, scenario, attempt)


@dataclass(frozen=True)
class Instance:
    """One concrete scenario of a template, with the values that made it."""

    scenario: Scenario
    values: Values = field(default_factory=dict)

    def label(self) -> str:
        """The values as `a=x, b=y` (empty for a plain scenario)."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.values.items()))


@dataclass(frozen=True)
class Template:
    """A scenario document with its parameters; a plain document is a template of one instance.

    Attributes:
        document: The document as written (JSON-compatible, without `status`).
        parameters: The declared parameters, by name.
    """

    document: Mapping[str, Any]
    parameters: Mapping[str, ScenarioParameter] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The scenario name the document declares."""
        return str(self.document.get("metadata", {}).get("name", ""))

    @property
    def names(self) -> list[str]:
        """The parameter names, sorted (the order of combinations)."""
        return sorted(self.parameters)

    def count(self) -> int:
        """How many instances the template has (1 without parameters)."""
        total = 1
        for name in self.names:
            total *= len(parameter_choices(self.parameters[name]))
        return total

    def combinations(self) -> list[Values]:
        """Every instance's values: the product of the parameters' values, names sorted."""
        names = self.names
        pools = [parameter_choices(self.parameters[n]) for n in names]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*pools)]

    def first(self) -> Values:
        """The values of the representative instance: every parameter's first value."""
        return {n: parameter_choices(self.parameters[n])[0] for n in self.names}

    def draw(self, seed: int) -> Values:
        """The values a seed draws (see `choice_index`)."""
        out: Values = {}
        for name in self.names:
            pool = parameter_choices(self.parameters[name])
            out[name] = pool[choice_index(self.name, seed, name, len(pool))]
        return out

    def expand(self, values: Mapping[str, ParameterValue]) -> dict[str, Any]:
        """The instance document for some values: placeholders replaced, parameters dropped.

        The instance records its values in the annotation `itbench.io/parameters`.

        Args:
            values: A value for every parameter (as `combinations` or `draw` give them).
        """
        doc = json.loads(json.dumps(self.document))
        if not self.parameters:
            return doc  # type: ignore[no-any-return]
        lookup: dict[Reference, ParameterValue] = {}
        for name, parameter in self.parameters.items():
            value = values[name]
            lookup[Reference(name)] = value
            position = parameter_choices(parameter).index(value)
            for attribute, column in parameter.attributes.items():
                lookup[Reference(name, attribute)] = column[position]
        spec = dict(doc["spec"])
        spec.pop("parameters", None)
        doc["spec"] = _expand(spec, lookup)
        metadata = dict(doc.get("metadata") or {})
        annotations = dict(metadata.get("annotations") or {})
        annotations[PARAMETERS_ANNOTATION] = canonical_values(values)
        metadata["annotations"] = annotations
        doc["metadata"] = metadata
        return doc  # type: ignore[no-any-return]


def canonical_values(values: Mapping[str, ParameterValue]) -> str:
    """Parameter values as canonical JSON (sorted keys, no spaces)."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def template_problems(doc: Mapping[str, Any]) -> tuple[Template | None, list[tuple[str, str]]]:
    """Read a document's parameters and check every placeholder against them.

    Args:
        doc: A scenario document (JSON-compatible, without `status`).

    Returns:
        (template, problems as (field path, reason)); the template is None when there are
        problems.
    """
    spec = doc.get("spec")
    declared: object = spec.get("parameters", {}) if isinstance(spec, Mapping) else {}
    if declared is None:
        declared = {}
    problems: list[tuple[str, str]] = []
    try:
        parameters = _PARAMETERS.validate_python(declared)
    except ValidationError as exc:
        for err in exc.errors():
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            # A model validator's message may start with the field it is about.
            relative = _RELATIVE.match(message) if err["type"] == "value_error" else None
            if relative is not None:
                loc, message = f"{loc}.{relative.group(1)}", relative.group(2)
            problems.append((f"spec.parameters{loc}", excerpt_message(message)))
        return None, problems
    problems.extend(_declaration_problems(parameters))
    if not problems:
        problems.extend(_placeholder_problems(doc, parameters))
    if problems:
        return None, problems
    return Template(document=doc, parameters=parameters), []


def _declaration_problems(parameters: Mapping[str, ScenarioParameter]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if len(parameters) > MAX_PARAMETERS:
        problems.append(
            ("spec.parameters", f"{len(parameters)} parameters, at most {MAX_PARAMETERS}")
        )
        return problems
    total = 1
    for name, parameter in parameters.items():
        where = f"spec.parameters.{excerpt(name) if len(name) > 63 else name}"
        if not PARAMETER_NAME.match(name):
            problems.append((where, f"parameter name {excerpt(name)} must match [a-z][A-Za-z0-9]*"))
            continue
        pool_size = (
            len(parameter.choices)
            if parameter.choices is not None
            else len(range(parameter.range.min, parameter.range.max + 1, parameter.range.step))  # type: ignore[union-attr]
        )
        if pool_size > MAX_INSTANCES:
            field_name = "choices" if parameter.choices is not None else "range"
            problems.append(
                (f"{where}.{field_name}", f"{pool_size} values, at most {MAX_INSTANCES}")
            )
            continue
        total *= pool_size
        pool = parameter_choices(parameter)
        seen: set[tuple[str, ParameterValue]] = set()
        for n, value in enumerate(pool):
            if isinstance(value, str) and "${" in value:
                problems.append((f"{where}.choices[{n}]", "a choice cannot hold a placeholder"))
            key = (type(value).__name__, value)
            if key in seen:
                problems.append((f"{where}.choices[{n}]", f"{excerpt(value)} is listed twice"))
            seen.add(key)
        for attribute, column in parameter.attributes.items():
            at = f"{where}.attributes.{excerpt(attribute) if len(attribute) > 63 else attribute}"
            if not PARAMETER_NAME.match(attribute):
                problems.append(
                    (at, f"attribute name {excerpt(attribute)} must match [a-z][A-Za-z0-9]*")
                )
            elif len(column) != len(pool):
                problems.append(
                    (at, f"{len(column)} values for {len(pool)} choices; give one per choice")
                )
    if not problems and total > MAX_INSTANCES:
        problems.append(
            (
                "spec.parameters",
                f"the parameters make {total} instances, at most {MAX_INSTANCES} (every "
                "instance is validated); use fewer choices or a coarser range step",
            )
        )
    return problems


def _placeholder_problems(
    doc: Mapping[str, Any], parameters: Mapping[str, ScenarioParameter]
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    used: set[str] = set()
    for top, value in doc.items():
        if top == "spec" and isinstance(value, Mapping):
            continue
        for path, text, _key in _walk_strings(value, top):
            if "${" in text and _has_placeholder(text):
                problems.append((path, f"placeholders are allowed only under spec, not in {top}"))
    spec = doc.get("spec")
    if isinstance(spec, Mapping):
        for name, value in spec.items():
            if name == "parameters":
                continue
            for path, text, is_key in _walk_strings(value, f"spec.{name}"):
                try:
                    refs = references(text)
                except PlaceholderError as exc:
                    problems.append((path, str(exc)))
                    continue
                if not refs:
                    continue
                if is_key:
                    problems.append((path, "placeholders are not allowed in keys"))
                    continue
                if name in FIXED_SPEC_FIELDS:
                    problems.append(
                        (path, f"spec.{name} identifies the scenario and takes no placeholder")
                    )
                    continue
                for ref in refs:
                    problems.extend(_reference_problems(path, ref, parameters))
                    used.add(ref.parameter)
    if not problems:
        for name in sorted(set(parameters) - used):
            problems.append(
                (f"spec.parameters.{name}", "declared but never used as ${" + name + "}")
            )
    return problems


def _has_placeholder(text: str) -> bool:
    try:
        return bool(references(text))
    except PlaceholderError:
        return True


def _reference_problems(
    path: str, ref: Reference, parameters: Mapping[str, ScenarioParameter]
) -> list[tuple[str, str]]:
    parameter = parameters.get(ref.parameter)
    if parameter is None:
        known = ", ".join(sorted(parameters)) or "none declared"
        return [(path, f"${{{ref}}} names no parameter (known: {known})")]
    if ref.attribute is not None and ref.attribute not in parameter.attributes:
        known = ", ".join(sorted(parameter.attributes)) or "none"
        return [
            (
                path,
                f"${{{ref}}}: parameter {ref.parameter} has no attribute {ref.attribute} "
                f"(its attributes: {known})",
            )
        ]
    return []


def values_label(values: Mapping[str, ParameterValue]) -> str:
    """Values as `a=x, b=y` for messages."""
    return ", ".join(
        f"{k}={excerpt(v) if isinstance(v, str) and len(v) > 40 else v}"
        for k, v in sorted(values.items())
    )
