"""Bounded YAML parsing: a safe loader that refuses what could hang, exhaust or mislead a reader.

Refused, each with its line and column: documents larger than a size, nesting deeper than a
depth, more aliases than a count or aliases that expand the document beyond a number of nodes
(alias bombs), recursive aliases, duplicate mapping keys, keys that are not strings, integers of
absurd length and tags that have no JSON form (`!!binary`, `!!set`, `!!timestamp`, ...). Dates
stay strings, as they do when kubectl turns YAML into JSON. Every check runs while the document
is composed, before any value is built, so a refusal takes time and memory proportional to the
text read so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from itbench.core.excerpts import bounded, excerpt

_MERGE_TAG = "tag:yaml.org,2002:merge"
_REFUSED_TAGS = ("binary", "set", "omap", "pairs", "timestamp")


@dataclass(frozen=True)
class YamlLimits:
    """What one YAML text may hold.

    Attributes:
        max_bytes: Size of the text in UTF-8 bytes.
        max_depth: Nesting of collections (a flat mapping is depth 1).
        max_aliases: Alias nodes (`*name`) in the whole text.
        max_nodes: Nodes of one document with every alias expanded.
        max_documents: Documents in one text.
        max_int_digits: Characters of one integer scalar.
    """

    max_bytes: int = 128 * 1024
    max_depth: int = 64
    max_aliases: int = 128
    max_nodes: int = 50_000
    max_documents: int = 16
    max_int_digits: int = 64


DEFAULT_LIMITS = YamlLimits()
"""The limits scenario files are read with (the largest catalog file is about 7 KiB)."""


class YamlError(ValueError):
    """The text is not YAML that ITBench reads, or breaks a limit; names line and column."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        *,
        syntax: bool = False,
    ) -> None:
        self.message = bounded(message)
        self.line = line
        self.column = column
        self.syntax = syntax
        super().__init__(self.message)

    def __str__(self) -> str:
        where = f" at line {self.line}, column {self.column}" if self.line is not None else ""
        return f"YAML {'syntax ' if self.syntax else ''}error{where}: {self.message}"


class DocumentCountError(YamlError):
    """A text that should hold one document holds none or several."""

    def __str__(self) -> str:
        return self.message


class _LimitError(yaml.MarkedYAMLError):
    """A limit was broken at a mark (raised inside the loader, mapped to YamlError)."""


def _timestamp_free(
    resolvers: dict[Any, list[tuple[str, Any]]],
) -> dict[Any, list[tuple[str, Any]]]:
    return {
        first: [(tag, rx) for tag, rx in entries if not tag.endswith(":timestamp")]
        for first, entries in resolvers.items()
    }


_LOADER_BASE: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML has it (fast, and itself refuses nesting beyond 1000), else
PyYAML's own; ITBench composes the nodes either way, so the limits below hold for both."""


if TYPE_CHECKING:
    _MixinBase = yaml.SafeLoader
else:
    _MixinBase = object


class _Bounded(_MixinBase):
    """A safe loader whose nodes are composed here, from parser events, with limits checked.

    A mixin over a PyYAML loader class (libyaml's or PyYAML's own).
    """

    yaml_implicit_resolvers = _timestamp_free(yaml.SafeLoader.yaml_implicit_resolvers)

    def __init__(self, text: str, limits: YamlLimits) -> None:
        super().__init__(text)
        self.limits = limits
        self.aliases = 0
        self.node_anchors: dict[str, Node] = {}
        self.sizes: dict[int, int] = {}

    # PyYAML's pure-Python scanner looks ahead over every open flow collection and indentation
    # level for each token, so unbounded nesting costs quadratic time before any event comes
    # out; with that scanner the depth limit therefore starts there (libyaml stops at 1000).
    def _event(self) -> Any:
        return self.get_event()  # type: ignore[no-untyped-call]

    def _resolve(self, kind: type, value: str | None, implicit: Any) -> str:
        tag: str = self.resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag

    def increase_flow_level(self) -> None:
        super().increase_flow_level()  # type: ignore[misc]
        if self.flow_level > self.limits.max_depth:
            raise self._limit(f"nesting deeper than {self.limits.max_depth} levels", None)

    def add_indent(self, column: int) -> bool:
        added: bool = super().add_indent(column)
        if len(self.indents) > self.limits.max_depth:
            raise self._limit(f"nesting deeper than {self.limits.max_depth} levels", None)
        return added

    def _limit(self, message: str, mark: Any) -> _LimitError:
        return _LimitError(None, None, message, mark if mark is not None else self.get_mark())

    def documents(self) -> list[object]:
        """Compose and construct every document of the stream, checking the limits."""
        out: list[object] = []
        self._event()  # StreamStartEvent
        count = 0
        while not self.check_event(StreamEndEvent):
            count += 1
            if count > self.limits.max_documents:
                raise YamlError(f"more than {self.limits.max_documents} documents in one text")
            self._event()  # DocumentStartEvent
            node = self._compose(1)
            self._event()  # DocumentEndEvent
            self.node_anchors = {}
            value = self.construct_document(node)
            if value is not None:
                out.append(value)
        return out

    def _compose(self, depth: int) -> Node:
        event: Any = self._event()
        start: Any = event.start_mark  # libyaml's marks and PyYAML's have the same fields
        if isinstance(event, AliasEvent):
            return self._alias(event)
        if depth > self.limits.max_depth and not isinstance(event, ScalarEvent):
            raise self._limit(
                f"nesting deeper than {self.limits.max_depth} levels", event.start_mark
            )
        anchor = event.anchor
        if anchor is not None and anchor in self.node_anchors:
            raise self._limit(f"anchor {excerpt(anchor)} is defined twice", event.start_mark)
        node: Node
        if isinstance(event, ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self._resolve(ScalarNode, event.value, event.implicit)
            end: Any = event.end_mark
            node = ScalarNode(tag, event.value, start, end, style=event.style)
            if anchor is not None:
                self.node_anchors[anchor] = node
            self.sizes[id(node)] = 1
            return node
        if isinstance(event, SequenceStartEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self._resolve(SequenceNode, None, event.implicit)
            items: list[Node] = []
            node = SequenceNode(tag, items, start, None, flow_style=event.flow_style)
            if anchor is not None:
                self.node_anchors[anchor] = node
            size = 1
            while not self.check_event(SequenceEndEvent):
                child = self._compose(depth + 1)
                items.append(child)
                size += self.sizes[id(child)]
                self._check_size(size, event.start_mark)
        elif isinstance(event, MappingStartEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self._resolve(MappingNode, None, event.implicit)
            pairs: list[tuple[Node, Node]] = []
            node = MappingNode(tag, pairs, start, None, flow_style=event.flow_style)
            if anchor is not None:
                self.node_anchors[anchor] = node
            size = 1
            while not self.check_event(MappingEndEvent):
                key = self._compose(depth + 1)
                value = self._compose(depth + 1)
                pairs.append((key, value))
                size += self.sizes[id(key)] + self.sizes[id(value)]
                self._check_size(size, event.start_mark)
        else:  # pragma: no cover - the parser emits only the events above here
            raise self._limit(f"unexpected {type(event).__name__}", event.start_mark)
        node.end_mark = self._event().end_mark
        self.sizes[id(node)] = size
        return node

    def _alias(self, event: Any) -> Node:
        self.aliases += 1
        if self.aliases > self.limits.max_aliases:
            raise self._limit(
                f"more than {self.limits.max_aliases} aliases in one text", event.start_mark
            )
        target = self.node_anchors.get(event.anchor)
        if target is None:
            raise self._limit(f"alias {excerpt(event.anchor)} names no anchor", event.start_mark)
        if id(target) not in self.sizes:
            raise self._limit(
                f"alias {excerpt(event.anchor)} refers to a node that contains it "
                "(a recursive alias)",
                event.start_mark,
            )
        return target

    def _check_size(self, size: int, mark: Any) -> None:
        if size > self.limits.max_nodes:
            raise self._limit(
                f"the document expands to more than {self.limits.max_nodes} nodes "
                "(aliases repeat large parts of it)",
                mark,
            )

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first: dict[str, int] = {}
            for key_node, _value in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    kind = "null" if key is None else type(key).__name__
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"mapping key {excerpt(key)} is a {kind}, not a string; quote it",
                        key_node.start_mark,
                    )
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {excerpt(key)} (first at line {first[key]}); "
                        "a key may appear once in a mapping",
                        key_node.start_mark,
                    )
                first[key] = key_node.start_mark.line + 1
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]
        return mapping

    def construct_bounded_int(self, node: Node) -> int:
        if isinstance(node, ScalarNode) and len(node.value) > self.limits.max_int_digits:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(node.value)} characters (at most "
                f"{self.limits.max_int_digits})",
                node.start_mark,
            )
        value: int = self.construct_yaml_int(node)  # type: ignore[arg-type]
        return value

    def refuse_tag(self, node: Node) -> None:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"tag {excerpt(node.tag)} has no JSON form; scenario files hold only mappings, "
            "lists, strings, numbers, booleans and null",
            node.start_mark,
        )


class _BoundedLoader(_Bounded, _LOADER_BASE):  # type: ignore[misc]
    """The bounded loader over libyaml's parser (PyYAML's own when libyaml is missing)."""


class _PurePythonLoader(_Bounded, yaml.SafeLoader):
    """The bounded loader over PyYAML's pure-Python parser."""


for _cls in (_BoundedLoader, _PurePythonLoader):
    _cls.add_constructor("tag:yaml.org,2002:int", _cls.construct_bounded_int)
    for _tag in _REFUSED_TAGS:
        _cls.add_constructor(f"tag:yaml.org,2002:{_tag}", _cls.refuse_tag)


def _marked(exc: yaml.MarkedYAMLError, limits: YamlLimits) -> YamlError:
    mark = exc.problem_mark or exc.context_mark
    what = exc.problem or "invalid YAML"
    if "maximum nesting depth" in what:  # libyaml's own limit, met while scanning ahead
        return _marked(
            _LimitError(None, None, f"nesting deeper than {limits.max_depth} levels", mark), limits
        )
    if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
        what += f" ({exc.context} started at line {exc.context_mark.line + 1})"
    syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
    if mark is None:
        return YamlError(what, syntax=syntax)
    return YamlError(what, mark.line + 1, mark.column + 1, syntax=syntax)


def parse_all(
    text: str, limits: YamlLimits = DEFAULT_LIMITS, *, pure_python: bool = False
) -> list[object]:
    """Parse every document of a YAML text within limits; empty documents are skipped.

    Args:
        text: The YAML text.
        limits: What the text may hold.
        pure_python: Use PyYAML's own parser even when libyaml is there (the limits are the
            same; libyaml is about five times faster).

    Returns:
        The documents, as JSON-compatible values (mappings with string keys, lists, scalars).

    Raises:
        YamlError: The text is not valid YAML or breaks a limit (line and column named).
    """
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > limits.max_bytes:
        raise YamlError(f"the text is {size} bytes, more than the {limits.max_bytes} allowed")
    documents: list[object] = []
    loader: _Bounded | None = None
    try:
        loader = (_PurePythonLoader if pure_python else _BoundedLoader)(text, limits)
        documents = loader.documents()
    except yaml.MarkedYAMLError as exc:
        raise _marked(exc, limits) from None
    except yaml.reader.ReaderError as exc:
        char = exc.character
        code = f"U+{char:04X}" if isinstance(char, int) else excerpt(char)
        raise YamlError(
            f"character {code} at position {exc.position} is not allowed in YAML"
        ) from None
    except yaml.YAMLError as exc:
        raise YamlError(str(exc)) from None
    except RecursionError:
        raise YamlError("nesting too deep to read") from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents


def parse_one(
    text: str, limits: YamlLimits = DEFAULT_LIMITS, *, pure_python: bool = False
) -> object:
    """Parse a YAML text that holds exactly one (non-empty) document.

    Args:
        text: The YAML text.
        limits: What the text may hold.
        pure_python: Use PyYAML's own parser (see `parse_all`).

    Returns:
        The document.

    Raises:
        YamlError: Invalid YAML, a broken limit, or not exactly one document.
    """
    documents = parse_all(text, limits, pure_python=pure_python)
    if len(documents) != 1:
        raise DocumentCountError(f"expected one YAML document, found {len(documents)}")
    return documents[0]


def read_bounded(path: Any, limits: YamlLimits = DEFAULT_LIMITS) -> str:
    """Read a UTF-8 text file of at most `limits.max_bytes` bytes, without reading more.

    Args:
        path: A `pathlib.Path`.
        limits: The size limit.

    Returns:
        The text.

    Raises:
        OSError: The file cannot be read.
        YamlError: It is larger than the limit or not UTF-8.
    """
    with path.open("rb") as handle:
        data = handle.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        size = path.stat().st_size
        raise YamlError(f"the file is {size} bytes, more than the {limits.max_bytes} allowed")
    try:
        text: str = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    return text
