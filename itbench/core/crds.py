"""CustomResourceDefinitions and editor JSON Schemas, derived from the API models.

Structural schemas come from each model's pydantic JSON schema: `$ref`s inlined, optional `null`
alternatives dropped, `int | str` as `x-kubernetes-int-or-string`, defaults kept (also those of
default factories), a description on every field. CEL rules carry what the schema cannot say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from itbench.core.models import (
    AgentSubmission,
    BenchmarkRun,
    DiagnosisReport,
    MitigationReport,
    PostureReport,
    Scenario,
    Trial,
)
from itbench.core.models.base import GROUP, VERSION
from itbench.core.models.benchmark_run import BenchmarkRunSpec

CATEGORY = "itbench"
_DROP = frozenset({"title", "$defs", "discriminator", "examples"})
_KEEP = frozenset(
    {
        "type",
        "description",
        "default",
        "enum",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "required",
    }
)


class CrdSchemaError(ValueError):
    """A model uses a type that has no structural-schema form."""


class _WithFactoryDefaults(GenerateJsonSchema):
    """Record defaults built by default factories too, so the API server applies them."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            value = factory()  # type: ignore[call-arg]
            if isinstance(value, BaseModel):
                return value.model_dump(mode="json", by_alias=True, exclude_none=True)
            return value
        return schema.get("default", NoDefault)


@dataclass(frozen=True)
class PrinterColumn:
    """An additionalPrinterColumns entry (`kubectl get` column)."""

    name: str
    type: str
    json_path: str
    description: str
    priority: int = 0

    def wire(self) -> dict[str, Any]:
        """The CRD form of the column."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "jsonPath": self.json_path,
            "description": self.description,
        }
        if self.priority:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class Rule:
    """A CEL validation rule (`x-kubernetes-validations`) placed at a schema path."""

    path: str
    rule: str
    message: str
    reason: str = "FieldValueInvalid"

    def wire(self) -> dict[str, str]:
        """The CRD form of the rule."""
        return {"rule": self.rule, "message": self.message, "reason": self.reason}


@dataclass(frozen=True)
class Kind:
    """How one API model becomes a CRD."""

    model: type[BaseModel]
    plural: str
    short_names: tuple[str, ...]
    scope: str
    columns: tuple[PrinterColumn, ...]
    rules: tuple[Rule, ...] = field(default=())

    @property
    def kind(self) -> str:
        """The kind name."""
        return self.model.__name__

    @property
    def crd_name(self) -> str:
        """`<plural>.<group>`."""
        return f"{self.plural}.{GROUP}"


def _age() -> PrinterColumn:
    return PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation.")


def _spec_frozen_rule() -> Rule:
    # A root-level transition rule: once the run has started, every spec field but cancel must
    # keep its value. Pending runs, and Invalid runs that never started a trial, may be fixed in
    # place. Generated from the model so new fields are frozen too.
    parts: list[str] = []
    for name, info in BenchmarkRunSpec.model_fields.items():
        if name == "cancel":
            continue
        key = info.alias or name
        if info.is_required():
            parts.append(f"self.spec.{key} == oldSelf.spec.{key}")
        else:
            parts.append(
                f"(has(self.spec.{key}) ? (has(oldSelf.spec.{key}) && "
                f"self.spec.{key} == oldSelf.spec.{key}) : !has(oldSelf.spec.{key}))"
            )
    started = (
        "!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Pending'"
        " || (oldSelf.status.phase == 'Invalid' && !has(oldSelf.status.startedAt))"
    )
    return Rule(
        path="",
        rule=f"{started} || ({' && '.join(parts)})",
        message="spec is immutable once the run has started; only spec.cancel may change "
        "(create a new BenchmarkRun instead)",
        reason="FieldValueForbidden",
    )


KINDS: tuple[Kind, ...] = (
    Kind(
        model=Scenario,
        plural="scenarios",
        short_names=("scn",),
        scope="Cluster",
        columns=(
            PrinterColumn("Domain", "string", ".spec.domain", "SRE, CISO or FinOps."),
            PrinterColumn("Class", "string", ".spec.class", "Scenario class."),
            PrinterColumn("Complexity", "string", ".status.complexity", "Effective complexity."),
            PrinterColumn("Phase", "string", ".status.phase", "Validation phase.", priority=1),
            _age(),
        ),
        rules=(
            Rule(
                path="spec",
                rule="!has(self.control) || !self.control || "
                "((!has(self.faults) || size(self.faults) == 0) && (!has(self.triggers) || "
                "!has(self.triggers.alerts) || size(self.triggers.alerts) == 0))",
                message="a control scenario injects no faults and expects no alerts",
            ),
            Rule(
                path="spec",
                rule="(has(self.control) && self.control) || self.domain == 'CISO' || "
                "(has(self.faults) && size(self.faults) > 0)",
                message="at least one fault is required (or set control: true)",
            ),
        ),
    ),
    Kind(
        model=AgentSubmission,
        plural="agentsubmissions",
        short_names=("agsub",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Type", "string", ".spec.type", "Persona: SRE, CISO or FinOps."),
            PrinterColumn("Level", "string", ".spec.level", "Beginner, Intermediate or Expert."),
            PrinterColumn("Ready", "boolean", ".status.ready", "Runs may use this agent."),
            PrinterColumn(
                "Best diagnosis",
                "number",
                ".status.bestDiagnosisPassAt1",
                "Best diagnosis pass@1 over its runs.",
            ),
            PrinterColumn(
                "Best mitigation",
                "number",
                ".status.bestMitigationPassAt1",
                "Best mitigation pass@1 over its runs.",
            ),
            _age(),
        ),
        rules=(
            Rule(
                path="spec.runtime",
                rule="(has(self.image) ? 1 : 0) + (has(self.external) ? 1 : 0) + "
                "(has(self.builtin) ? 1 : 0) + (has(self.command) ? 1 : 0) == 1",
                message="set exactly one of image, external, builtin or command",
            ),
        ),
    ),
    Kind(
        model=BenchmarkRun,
        plural="benchmarkruns",
        short_names=("bench", "br"),
        scope="Namespaced",
        columns=(
            PrinterColumn("Agent", "string", ".spec.agentRef.name", "The AgentSubmission."),
            PrinterColumn("Phase", "string", ".status.phase", "Lifecycle phase."),
            PrinterColumn("Progress", "string", ".status.progress", "Finished / total trials."),
            PrinterColumn(
                "Diagnosis pass@1",
                "number",
                ".status.summary.diagnosisPassAt1",
                "Diagnosis pass@1 of the agent's persona (SRE or FinOps).",
            ),
            PrinterColumn(
                "Mitigation pass@1",
                "number",
                ".status.summary.mitigationPassAt1",
                "Mitigation pass@1 of the agent's persona (SRE or FinOps).",
            ),
            _age(),
            PrinterColumn(
                "Domain", "string", ".status.summary.domain", "The agent's persona.", priority=1
            ),
            PrinterColumn(
                "Errored",
                "integer",
                ".status.summary.errored",
                "Trials the platform could not run.",
                priority=1,
            ),
            PrinterColumn(
                "FL-NTAM",
                "number",
                ".status.summary.flNtam",
                "SRE: mean fault-localization NTAM.",
                priority=1,
            ),
            PrinterColumn(
                "Cost proximity",
                "number",
                ".status.summary.costProximity",
                "FinOps: mean proximity to the optimal cost.",
                priority=1,
            ),
        ),
        rules=(
            Rule(
                path="spec.scenarios",
                rule="(has(self.names) && size(self.names) > 0) != has(self.selector)",
                message="set exactly one of names or selector",
            ),
            Rule(
                path="spec.cancel",
                rule="self || !oldSelf",
                message="a cancelled run cannot be resumed (cancel cannot go back to false)",
                reason="FieldValueForbidden",
            ),
            _spec_frozen_rule(),
        ),
    ),
    Kind(
        model=Trial,
        plural="trials",
        short_names=("trl",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Scenario", "string", ".spec.scenario", "Scenario name."),
            PrinterColumn("Attempt", "integer", ".spec.attempt", "Attempt index."),
            PrinterColumn("Phase", "string", ".status.phase", "State-machine phase."),
            PrinterColumn("Reason", "string", ".status.reason", "Why the trial is in its phase."),
            PrinterColumn(
                "Diagnosis", "boolean", ".status.scores.diagnosis.passed", "SRE diagnosis passed."
            ),
            PrinterColumn(
                "Mitigation",
                "boolean",
                ".status.scores.mitigation.passed",
                "SRE mitigation passed.",
            ),
            _age(),
            PrinterColumn(
                "FinOps diagnosis",
                "boolean",
                ".status.scores.finops.diagnosisPassed",
                "FinOps: the inefficiency was identified.",
                priority=1,
            ),
            PrinterColumn(
                "FinOps mitigation",
                "boolean",
                ".status.scores.finops.mitigationPassed",
                "FinOps: the inefficiency was removed.",
                priority=1,
            ),
        ),
    ),
)
"""Every kind ITBench serves, with its CRD presentation."""

EDITOR_SCHEMAS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("scenario", Scenario),
    ("agentsubmission", AgentSubmission),
    ("benchmarkrun", BenchmarkRun),
    ("trial", Trial),
    ("diagnosis-report", DiagnosisReport),
    ("mitigation-report", MitigationReport),
    ("posture-report", PostureReport),
)
"""File stem and model of every JSON Schema written for editors and agent authors."""


def _merge(inner: dict[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(inner)
    for key in ("description", "default"):
        if key in outer:
            merged[key] = outer[key]
    return merged


def _exclusive(node: Mapping[str, Any], out: dict[str, Any]) -> None:
    # JSON Schema 2020-12 exclusive bounds are numbers; OpenAPI v3.0 wants booleans.
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if key in node:
            out[bound] = node[key]
            out[key] = True


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _structural(node: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
        return _ordered(_merge(_structural(target, defs, where), _structural_outer(node)))
    if "allOf" in node and len(node["allOf"]) == 1:
        inner = _structural(node["allOf"][0], defs, where)
        return _ordered(_merge(inner, _structural_outer(node)))
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        types = {o.get("type") for o in options}
        if len(options) == 1:
            inner = _structural(options[0], defs, where)
        elif types == {"integer", "string"} and all(len(o) == 1 for o in options):
            inner = {"x-kubernetes-int-or-string": True}
        else:
            raise CrdSchemaError(f"{where}: union of {sorted(map(str, types))} is not structural")
        return _ordered(_merge(inner, _structural_outer(node)))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _KEEP:
            out[key] = value
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            _exclusive(node, out)
        elif key == "items":
            out["items"] = _structural(value, defs, f"{where}[]")
        elif key == "properties":
            out["properties"] = {
                name: _structural(sub, defs, f"{where}.{name}" if where else name)
                for name, sub in value.items()
            }
        elif key == "additionalProperties":
            if isinstance(value, dict) and "properties" not in node:
                out["additionalProperties"] = _structural(value, defs, f"{where}.*")
        elif key not in _DROP:
            raise CrdSchemaError(f"{where}: JSON-schema keyword {key!r} has no structural form")
    if "default" in out:
        if out["default"] is None:
            del out["default"]
        else:
            out["default"] = _strip_nulls(out["default"])
    if "enum" in out and "maxLength" not in out and all(isinstance(v, str) for v in out["enum"]):
        # Bounds string size for the API server's CEL cost estimate; the enum already implies it.
        out["maxLength"] = max(len(v) for v in out["enum"])
    if "type" not in out and "x-kubernetes-int-or-string" not in out:
        if "enum" in out:
            out["type"] = "string"
        else:
            raise CrdSchemaError(
                f"{where or '<root>'}: field has no type (untyped values such as Any are not "
                "allowed in ITBench's API)"
            )
    return _ordered(out)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    # description and type first, nested schemas last: easier to read in the generated YAML.
    first = [k for k in ("description", "type") if k in node]
    last = [k for k in ("items", "additionalProperties", "properties", "required") if k in node]
    middle = sorted(k for k in node if k not in first and k not in last)
    return {k: node[k] for k in (*first, *middle, *last)}


def _structural_outer(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "description" in node:
        out["description"] = node["description"]
    if "default" in node and node["default"] is not None:
        out["default"] = _strip_nulls(node["default"])
    return out


def _model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(
        by_alias=True, mode="validation", schema_generator=_WithFactoryDefaults
    )


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The openAPIV3Schema of a kind: structural, `$ref`-free, every field typed and described.

    `metadata` is left to the API server (`type: object` and nothing else): kube-apiserver refuses
    a CRD whose `metadata` schema carries anything but `name` and `generateName`, a description too.

    Args:
        model: A top-level API model (apiVersion, kind, metadata, spec, status).

    Returns:
        The schema.

    Raises:
        CrdSchemaError: If a field has no structural form.
    """
    raw = _model_json_schema(model)
    defs: Mapping[str, Any] = raw.get("$defs", {})
    schema = _structural(raw, defs, "")
    props: dict[str, Any] = schema["properties"]
    props["metadata"] = {"type": "object"}
    for key in ("apiVersion", "kind"):
        props[key] = {"type": "string", "description": props[key].get("description", key)}
    schema["required"] = [r for r in schema.get("required", []) if r not in ("metadata",)]
    return schema


def _node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in filter(None, path.split(".")):
        node = node["properties"][part]
    return node


def build_crd(kind: Kind) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one kind.

    Args:
        kind: The kind and its presentation.

    Returns:
        The CRD as a JSON-compatible dict.
    """
    schema = structural_schema(kind.model)
    for rule in kind.rules:
        _node(schema, rule.path).setdefault("x-kubernetes-validations", []).append(rule.wire())
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name,
            "labels": {"app.kubernetes.io/part-of": "itbench"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": list(kind.short_names),
                "categories": [CATEGORY],
            },
            "scope": kind.scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.wire() for c in kind.columns],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """Every CRD, keyed by its file name (`<group>_<plural>.yaml`).

    Returns:
        File name -> CRD.
    """
    return {f"{GROUP}_{k.plural}.yaml": build_crd(k) for k in KINDS}


def editor_schema(stem: str, model: type[BaseModel]) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of a model for editors and validators.

    Args:
        stem: The file stem, used in `$id`.
        model: The model.

    Returns:
        The schema with `$schema`, `$id` and `title`.
    """
    raw = _model_json_schema(model)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://{GROUP}/schemas/{VERSION}/{stem}.schema.json",
        **raw,
    }


def all_editor_schemas() -> dict[str, dict[str, Any]]:
    """Every editor JSON Schema, keyed by file name (`<stem>.schema.json`).

    Returns:
        File name -> schema.
    """
    return {f"{stem}.schema.json": editor_schema(stem, model) for stem, model in EDITOR_SCHEMAS}


def structural_problems(schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Check a schema against Kubernetes' structural-schema rules.

    Every node has a type (or is int-or-string); no `$ref`, `definitions`, `anyOf`, `oneOf`,
    `allOf`, `not` or `nullable` appear; `properties` and `additionalProperties` are never both
    set; array nodes have `items`; every property has a description, except the root's `metadata`,
    whose schema may hold only `type: object` and the properties `name` and `generateName` (as
    kube-apiserver's "must not specify anything other than name and generateName" rule says).

    Args:
        schema: An openAPIV3Schema.
        path: The path of `schema` (for messages).

    Returns:
        One message per violation; empty when structural.
    """
    where = path or "<root>"
    out: list[str] = []
    for key in ("$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "nullable"):
        if key in schema:
            out.append(f"{where}: uses {key}")
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        out.append(f"{where}: has no type")
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        out.append(f"{where}: preserves unknown fields")
    if "properties" in schema and "additionalProperties" in schema:
        out.append(f"{where}: sets both properties and additionalProperties")
    if schema.get("type") == "array" and "items" not in schema:
        out.append(f"{where}: array without items")
    for name, sub in schema.get("properties", {}).items():
        sub_path = f"{path}.{name}" if path else name
        if not path and name == "metadata":
            out.extend(_metadata_problems(sub))
            continue
        if not sub.get("description"):
            out.append(f"{sub_path}: has no description")
        out.extend(structural_problems(sub, sub_path))
    if isinstance(schema.get("items"), Mapping):
        out.extend(structural_problems(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), Mapping):
        out.extend(structural_problems(schema["additionalProperties"], f"{path}.*"))
    return out


def crd_problems(crd: Mapping[str, Any]) -> list[str]:
    """What kube-apiserver refuses in a CRD's version schemas that a stand-in API must refuse too.

    Today that is the root `metadata` rule (anything but `type: object`, `name` and
    `generateName`), in the words kube-apiserver uses, so a stand-in answers as the real one does.

    Args:
        crd: A CustomResourceDefinition document.

    Returns:
        One message per refused field, with its path; empty when acceptable.
    """
    out: list[str] = []
    versions = crd.get("spec", {}).get("versions") or []
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
        metadata = (schema.get("properties") or {}).get("metadata")
        if isinstance(metadata, Mapping) and _metadata_problems(metadata):
            out.append(
                f"spec.versions[{i}].schema.openAPIV3Schema.properties[metadata]: Forbidden: "
                "must not specify anything other than name and generateName, but metadata is "
                "implicitly specified"
            )
    return out


def crd_refusal(crd: Mapping[str, Any]) -> str | None:
    """kube-apiserver's answer to a CRD it refuses (`crd_problems`), None when it accepts it."""
    problems = crd_problems(crd)
    if not problems:
        return None
    name = (crd.get("metadata") or {}).get("name", "")
    return f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: ' + ", ".join(
        problems
    )


def _metadata_problems(metadata: Mapping[str, Any]) -> list[str]:
    out = [
        f"metadata: must not specify {key}" for key in metadata if key not in ("type", "properties")
    ]
    if metadata.get("type") != "object":
        out.append("metadata: type must be object")
    out.extend(
        f"metadata.{name}: must not be specified (only name and generateName)"
        for name in metadata.get("properties", {})
        if name not in ("name", "generateName")
    )
    return out


def cel_rules(crd: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every CEL rule of a CRD with the schema path it sits on.

    Args:
        crd: A CRD as built by `build_crd`.

    Returns:
        (path, rule) pairs; the root's path is empty.
    """
    found: list[tuple[str, Mapping[str, Any]]] = []

    def walk(node: Mapping[str, Any], path: str) -> None:
        for rule in node.get("x-kubernetes-validations", []):
            found.append((path, rule))
        for name, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{name}" if path else name)
        if isinstance(node.get("items"), Mapping):
            walk(node["items"], f"{path}[]")

    for version in crd["spec"]["versions"]:
        walk(version["schema"]["openAPIV3Schema"], "")
    return found


def kind_names() -> Sequence[str]:
    """The kinds with a CRD, in generation order."""
    return [k.kind for k in KINDS]


__all__ = [
    "CATEGORY",
    "EDITOR_SCHEMAS",
    "KINDS",
    "CrdSchemaError",
    "Kind",
    "PrinterColumn",
    "Rule",
    "all_crds",
    "all_editor_schemas",
    "build_crd",
    "cel_rules",
    "editor_schema",
    "kind_names",
    "structural_problems",
    "structural_schema",
]
