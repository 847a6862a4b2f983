"""A LogQL subset over in-memory log streams, answering like Loki's ``query_range`` for log queries.

Supported: a stream selector with ``=``, ``!=``, ``=~``, ``!~`` matchers and chained line filters
``|=``, ``!=``, ``|~``, ``!~``. Parsers, formatters and metric queries raise :class:`LogQLError`.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from itbench.environments.sim.regex import RegexError, compile_regex


class LogLine:
    """One log entry: its time in epoch seconds and its text.

    The text may be written when it is first read (`deferred`): most lines of a trial are never
    read, and formatting them is a fair share of what the twin does per tick.
    """

    t: float
    _line: str | None
    _render: Callable[..., str] | None
    _args: tuple[Any, ...]

    def __init__(self, t: float, line: str) -> None:
        """A log entry (written out: see "Compiled build" in docs/architecture.md)."""
        self.t = t
        self._line = line
        self._render = None
        self._args = ()

    @staticmethod
    def deferred(t: float, render: Callable[..., str], args: tuple[Any, ...]) -> LogLine:
        """A log entry whose text is `render(*args)`, written when first read (`args` must not
        change in between: plain values)."""
        entry = LogLine(t, "")
        entry._line = None
        entry._render = render
        entry._args = args
        return entry

    @property
    def line(self) -> str:
        """The text."""
        line = self._line
        if line is None:
            render = self._render
            assert render is not None
            line = render(*self._args)
            self._line = line
            self._render = None
            self._args = ()
        return line

    def __eq__(self, other: object) -> bool:
        """Equal time and text."""
        if not isinstance(other, LogLine):
            return NotImplemented
        return self.t == other.t and self.line == other.line

    def __hash__(self) -> int:
        """Of the time and text."""
        return hash((self.t, self.line))

    def __repr__(self) -> str:
        """`LogLine(t=..., line=...)`."""
        return f"LogLine(t={self.t!r}, line={self.line!r})"


class LogStore(Protocol):
    """Anything that can hand log streams to the LogQL engine."""

    def streams(self) -> Iterable[tuple[dict[str, str], Sequence[LogLine]]]:
        """Every stream: its labels and its lines in ascending time order."""
        ...


class LogQLError(ValueError):
    """A LogQL query that cannot be parsed or uses an unsupported construct."""


class LogQueryLimitError(LogQLError):
    """A query beyond one of the limits, refused before it is parsed (or, for streams, run).

    Attributes:
        limit: The limit's name (`length`, `matchers`, `line-filters`, `streams`).
        maximum: The limit.
        actual: What the query has (at least).
    """

    def __init__(self, limit: str, maximum: int, actual: int, what: str) -> None:
        """Name the limit and what the query has."""
        super().__init__(f"the LogQL query has {what}; the limit is {maximum} ({limit})")
        self.limit = limit
        self.maximum = maximum
        self.actual = actual


@dataclass(frozen=True)
class LogQueryLimits:
    """How large a LogQL query may be and how many streams it may read (Loki's own limits are
    of this kind: `max_query_length`, `max_query_series`).

    Attributes:
        max_length: Characters.
        max_matchers: Label matchers in the stream selector.
        max_line_filters: Chained line filters.
        max_streams: Streams one query may select.
    """

    max_length: int = 16_384
    max_matchers: int = 64
    max_line_filters: int = 64
    max_streams: int = 10_000


DEFAULT_LOG_LIMITS = LogQueryLimits()


def check_logql_limits(query: str, limits: LogQueryLimits = DEFAULT_LOG_LIMITS) -> None:
    """Refuse a query beyond the length and size limits without parsing it.

    Matchers are counted by their operators inside the selector's braces, line filters by
    theirs after it (strings skipped), so the count is never below the parser's.

    Raises:
        LogQueryLimitError: Naming the first limit the query exceeds.
    """
    if len(query) > limits.max_length:
        raise LogQueryLimitError(
            "length", limits.max_length, len(query), f"{len(query)} characters"
        )
    unquoted = _QUOTED.sub('""', query)
    close = unquoted.find("}")
    selector, rest = (
        (unquoted[: close + 1], unquoted[close + 1 :]) if close >= 0 else (unquoted, "")
    )
    matchers = len(_MATCHER_OP.findall(selector))
    if matchers > limits.max_matchers:
        raise LogQueryLimitError(
            "matchers", limits.max_matchers, matchers, f"{matchers} label matchers"
        )
    filters = len(_FILTER_OP.findall(rest))
    if filters > limits.max_line_filters:
        raise LogQueryLimitError(
            "line-filters", limits.max_line_filters, filters, f"{filters} line filters"
        )


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"?|`[^`]*`?')
_MATCHER_OP = re.compile(r"=~|!~|!=|=")
_FILTER_OP = re.compile(r"\|=|\|~|!=|!~")


@dataclass(frozen=True)
class LabelMatcher:
    """One stream-selector matcher, e.g. ``app=~"cart.*"``."""

    name: str
    op: str
    value: str


@dataclass(frozen=True)
class LineFilter:
    """One line filter, e.g. ``|= "error"``."""

    op: str
    value: str


@dataclass(frozen=True)
class LogQuery:
    """A parsed log query: the stream selector and the line filters, in order."""

    matchers: tuple[LabelMatcher, ...]
    filters: tuple[LineFilter, ...] = field(default=())


@dataclass
class MemoryLogStore:
    """Log streams in memory, keyed by their label set; lines must be appended in time order."""

    _streams: dict[frozenset[tuple[str, str]], tuple[dict[str, str], list[LogLine]]] = field(
        default_factory=dict
    )

    def append(self, labels: Mapping[str, str], t: float, line: str) -> None:
        """Append a line to the stream with these labels, creating the stream if needed.

        Args:
            labels: The stream's labels.
            t: Time of the line in epoch seconds; not earlier than the stream's last line.
            line: The log text.

        Raises:
            ValueError: When ``t`` is earlier than the stream's last line.
        """
        key = frozenset(labels.items())
        stream = self._streams.get(key)
        if stream is None:
            stream = (dict(labels), [])
            self._streams[key] = stream
        lines = stream[1]
        if lines and t < lines[-1].t:
            raise ValueError(
                f"out-of-order log line for {stream[0]}: t={t} is before t={lines[-1].t}"
            )
        lines.append(LogLine(t, line))

    def streams(self) -> Iterable[tuple[dict[str, str], Sequence[LogLine]]]:
        """Every stream with its lines, in creation order."""
        return list(self._streams.values())


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_OPS = ("=~", "!~", "!=", "=")
_FILTER_OPS = ("|=", "|~", "!=", "!~")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.pos = 0

    def error(self, message: str) -> LogQLError:
        return LogQLError(f"{message} at position {self.pos} in LogQL query {self.query!r}")

    def skip_space(self) -> None:
        while self.pos < len(self.query) and self.query[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.query)

    def peek(self, text: str) -> bool:
        self.skip_space()
        return self.query.startswith(text, self.pos)

    def expect(self, text: str) -> None:
        if not self.peek(text):
            raise self.error(f"expected {text!r}")
        self.pos += len(text)

    def ident(self) -> str | None:
        self.skip_space()
        match = _IDENT.match(self.query, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group()

    def string(self) -> str:
        self.skip_space()
        if self.pos >= len(self.query):
            raise self.error("expected a quoted string")
        quote = self.query[self.pos]
        if quote == "`":
            end = self.query.find("`", self.pos + 1)
            if end < 0:
                raise self.error("unterminated raw string")
            value = self.query[self.pos + 1 : end]
            self.pos = end + 1
            return value
        if quote != '"':
            raise self.error("expected a quoted string")
        out: list[str] = []
        i = self.pos + 1
        while i < len(self.query):
            char = self.query[i]
            if char == '"':
                self.pos = i + 1
                return "".join(out)
            if char == "\\" and i + 1 < len(self.query):
                escaped = self.query[i + 1]
                if escaped not in _ESCAPES:
                    out.append("\\" + escaped)
                else:
                    out.append(_ESCAPES[escaped])
                i += 2
                continue
            out.append(char)
            i += 1
        raise self.error("unterminated string")

    def parse(self) -> LogQuery:
        self.skip_space()
        if not self.peek("{"):
            word = self.ident()
            if word is not None and not any(self.peek(op) for op in _LABEL_OPS):
                raise self.error(f"metric query {word}(...) is not supported; only log queries")
            raise self.error("a log query must start with a stream selector '{...}'")
        matchers = self.selector()
        filters: list[LineFilter] = []
        while not self.at_end():
            if self.peek("["):
                raise self.error("range vectors (metric queries) are not supported")
            op = next((o for o in _FILTER_OPS if self.peek(o)), None)
            if op is None:
                if self.peek("|"):
                    self.pos += 1
                    stage = self.ident() or self.query[self.pos :].strip()
                    raise self.error(f"pipeline stage '| {stage}' is not supported")
                raise self.error(f"unexpected {self.query[self.pos :]!r}")
            self.pos += len(op)
            if self.peek("ip("):
                raise self.error("ip() line filters are not supported")
            value = self.string()
            if op in ("|~", "!~"):
                _compile(value, self.query)
            mark = self.pos
            if self.ident() == "or":
                raise self.error("'or' in line filters is not supported")
            self.pos = mark
            filters.append(LineFilter(op, value))
        return LogQuery(tuple(matchers), tuple(filters))

    def selector(self) -> list[LabelMatcher]:
        self.expect("{")
        matchers: list[LabelMatcher] = []
        while True:
            if self.peek("}") and not matchers:
                raise self.error("a stream selector needs at least one matcher")
            name = self.ident()
            if name is None:
                raise self.error("expected a label name")
            op = next((o for o in _LABEL_OPS if self.peek(o)), None)
            if op is None:
                raise self.error(f"expected a matcher operator after label {name!r}")
            self.pos += len(op)
            value = self.string()
            if op in ("=~", "!~"):
                _compile(value, self.query)
            matchers.append(LabelMatcher(name, op, value))
            if self.peek(","):
                self.pos += 1
                continue
            self.expect("}")
            break
        if all(_matches_empty(m) for m in matchers):
            raise LogQLError(
                f"queries require at least one regexp or equality matcher that does not match "
                f'the empty string, e.g. {{app="frontend"}}; got LogQL query {self.query!r}'
            )
        return matchers


def _compile(pattern: str, query: str) -> Any:
    try:
        return compile_regex(pattern)
    except RegexError as exc:
        raise LogQLError(
            f"invalid regular expression {pattern!r} in LogQL query {query!r}: {exc}"
        ) from exc


def _label_predicate(matcher: LabelMatcher, query: str) -> Callable[[str], bool]:
    value = matcher.value
    if matcher.op == "=":
        return lambda v: v == value
    if matcher.op == "!=":
        return lambda v: v != value
    pattern = _compile(f"(?:{value})", query)
    if matcher.op == "=~":
        return lambda v: pattern.fullmatch(v) is not None
    return lambda v: pattern.fullmatch(v) is None


def _matches_empty(matcher: LabelMatcher) -> bool:
    return _label_predicate(matcher, "")("")


def _line_predicate(line_filter: LineFilter, query: str) -> Callable[[str], bool]:
    value = line_filter.value
    if line_filter.op == "|=":
        return lambda line: value in line
    if line_filter.op == "!=":
        return lambda line: value not in line
    pattern = _compile(value, query)
    if line_filter.op == "|~":
        return lambda line: pattern.search(line) is not None
    return lambda line: pattern.search(line) is None


def parse_logql(query: str) -> LogQuery:
    """Parse a LogQL log query.

    Args:
        query: e.g. ``{app="cart", level=~"warn|error"} |= "timeout" != "retry"``.

    Returns:
        The stream matchers and line filters.

    Raises:
        LogQLError: The query is malformed or uses an unsupported construct (named in the message).
    """
    check_logql_limits(query)
    return _Parser(query).parse()


def _nanoseconds(t: float) -> str:
    return str(round(t * 1_000_000_000))


def query_logs(
    store: LogStore,
    query: str,
    start: float,
    end: float,
    limit: int,
    direction: str = "backward",
) -> dict[str, Any]:
    """Run a LogQL log query, answering like Loki's ``/loki/api/v1/query_range``.

    Args:
        store: Where the log streams come from.
        query: A stream selector with optional line filters.
        start: Start of the time range in epoch seconds (inclusive).
        end: End of the time range in epoch seconds (exclusive).
        limit: Most lines to return across all streams; positive.
        direction: ``backward`` returns the newest lines, ``forward`` the oldest.

    Returns:
        Loki's ``data`` object: ``{"resultType": "streams", "result": [{"stream": labels,
        "values": [["<unix ns>", line], ...]}]}``, streams ordered by labels, values in
        ``direction`` order.

    Raises:
        LogQLError: Bad query, limit or direction.
    """
    if direction not in ("backward", "forward"):
        raise LogQLError(f"direction must be 'backward' or 'forward', got {direction!r}")
    if limit <= 0:
        raise LogQLError(f"limit must be positive, got {limit} for LogQL query {query!r}")
    parsed = parse_logql(query)
    label_checks = [(m.name, _label_predicate(m, query)) for m in parsed.matchers]
    line_checks = [_line_predicate(f, query) for f in parsed.filters]
    backward = direction == "backward"

    streams: list[dict[str, str]] = []
    picked: list[tuple[float, int, int, str]] = []
    for labels, lines in store.streams():
        if not all(check(labels.get(name, "")) for name, check in label_checks):
            continue
        index = len(streams)
        if index >= DEFAULT_LOG_LIMITS.max_streams:
            raise LogQueryLimitError(
                "streams",
                DEFAULT_LOG_LIMITS.max_streams,
                index + 1,
                f"a selector that selects more than {DEFAULT_LOG_LIMITS.max_streams} streams",
            )
        streams.append(labels)
        lo = bisect_left(lines, start, key=lambda entry: entry.t)
        hi = bisect_left(lines, end, key=lambda entry: entry.t)
        order = range(hi - 1, lo - 1, -1) if backward else range(lo, hi)
        taken = 0
        for i in order:
            entry = lines[i]
            if all(check(entry.line) for check in line_checks):
                picked.append((entry.t, index, i, entry.line))
                taken += 1
                if taken >= limit:
                    break
    picked.sort(reverse=backward)
    picked = picked[:limit]

    values: dict[int, list[list[str]]] = {}
    for t, index, _, line in picked:
        values.setdefault(index, []).append([_nanoseconds(t), line])
    result = [
        {"stream": dict(streams[index]), "values": rows}
        for index, rows in sorted(values.items(), key=lambda kv: sorted(streams[kv[0]].items()))
    ]
    return {"resultType": "streams", "result": result}
