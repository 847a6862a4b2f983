"""The bounded YAML loader refuses hostile texts with line and column, in bounded memory."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from itbench.bounded_yaml import (
    DEFAULT_LIMITS,
    DocumentCountError,
    YamlError,
    YamlLimits,
    parse_all,
    parse_one,
    read_bounded,
)

PARSERS = pytest.mark.parametrize("pure_python", [False, True], ids=["libyaml", "python"])


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion-laughs pattern: each level repeats the one before `width` times."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def refusal(text: str, pure_python: bool) -> YamlError:
    with pytest.raises(YamlError) as caught:
        parse_one(text, pure_python=pure_python)
    return caught.value


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    with contextlib.suppress(YamlError):
        call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@PARSERS
def test_alias_bomb_is_refused_where_it_grows_too_large(pure_python: bool) -> None:
    error = refusal(alias_bomb(), pure_python)
    assert "expands to more than 50000 nodes" in error.message
    assert error.line == 5  # l4 holds 9**5 leaves, the first level over the bound
    assert str(error).startswith("YAML error at line 5, column")


@PARSERS
def test_alias_bomb_refusal_stays_in_bounded_memory(pure_python: bool) -> None:
    peak = peak_bytes(lambda: parse_one(alias_bomb(levels=12), pure_python=pure_python))
    assert peak < 4 * 2**20


@PARSERS
@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "{a: " * 5000 + "x" + "}" * 5000,
        "- " * 5000 + "x",
        "".join("  " * n + "a:\n" for n in range(200)),
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences", "block-mappings"],
)
def test_deep_nesting_is_refused_without_recursion_error(text: str, pure_python: bool) -> None:
    error = refusal(text, pure_python)
    assert error.message == "nesting deeper than 64 levels"
    assert error.line is not None
    assert peak_bytes(lambda: parse_one(text, pure_python=pure_python)) < 4 * 2**20


def test_nesting_up_to_the_limit_is_read() -> None:
    depth = DEFAULT_LIMITS.max_depth
    assert parse_one("[" * depth + "1" + "]" * depth) is not None


@PARSERS
def test_duplicate_key_names_the_key_and_both_lines(pure_python: bool) -> None:
    text = "spec:\n  domain: SRE\n  title: a\n  domain: FinOps\n"
    error = refusal(text, pure_python)
    assert error.message.startswith("duplicate key 'domain' (first at line 2)")
    assert (error.line, error.column) == (4, 3)


def test_a_merge_key_override_is_not_a_duplicate() -> None:
    assert parse_one("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n") == {
        "base": {"x": 1, "y": 2},
        "m": {"x": 3, "y": 2},
    }


@pytest.mark.parametrize(
    ("text", "kind"), [("1: x", "int"), ("on: x", "bool"), ("? [a]\n: x", "list")]
)
def test_keys_that_are_not_strings_are_refused(text: str, kind: str) -> None:
    error = refusal(text, False)
    assert f"is a {kind}, not a string; quote it" in error.message


@PARSERS
def test_recursive_and_undefined_aliases_are_refused(pure_python: bool) -> None:
    assert "recursive alias" in refusal("a: &a [1, *a]", pure_python).message
    assert "names no anchor" in refusal("a: *nowhere", pure_python).message


def test_too_many_aliases_are_refused() -> None:
    text = "a: &a x\nb: [" + ", ".join(["*a"] * 200) + "]\n"
    assert refusal(text, False).message == "more than 128 aliases in one text"


def test_tags_without_a_json_form_are_refused_and_dates_stay_strings() -> None:
    for tag in ("!!binary aGk=", "!!set {a: null}", "!!timestamp 2025-01-01"):
        assert "has no JSON form" in refusal(f"a: {tag}", False).message
    assert parse_one("a: 2025-01-01\nb: 2025-01-01T10:00:00Z") == {
        "a": "2025-01-01",
        "b": "2025-01-01T10:00:00Z",
    }


def test_absurdly_long_integers_are_refused_before_conversion() -> None:
    error = refusal("a: " + "9" * 10_000, False)
    assert error.message == "an integer of 10000 characters (at most 64)"


def test_text_over_the_size_limit_is_refused_without_parsing() -> None:
    limits = YamlLimits(max_bytes=1000)
    with pytest.raises(YamlError, match="the text is 1003 bytes, more than the 1000 allowed"):
        parse_all("a: " + "x" * 1000, limits)


def test_a_file_over_the_size_limit_is_refused_after_reading_only_the_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 2_000_000, encoding="utf-8")
    with pytest.raises(YamlError) as caught:
        read_bounded(path)
    assert caught.value.message == "the file is 2000003 bytes, more than the 131072 allowed"
    assert peak_bytes(lambda: read_bounded(path)) < 2 * DEFAULT_LIMITS.max_bytes


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"a: caf\xe9\n")
    with pytest.raises(YamlError, match="not UTF-8 text"):
        read_bounded(path)


def test_syntax_errors_keep_their_line_and_context() -> None:
    error = refusal("a: [1, 2\nb: c\n", False)
    assert str(error).startswith("YAML syntax error at line 2")
    assert "flow sequence started at line 1" in error.message


def test_one_document_is_expected_and_empty_documents_are_skipped() -> None:
    assert parse_one("---\n...\n---\na: 1\n") == {"a": 1}
    with pytest.raises(DocumentCountError, match="expected one YAML document, found 2"):
        parse_one("a: 1\n---\nb: 2\n")
    with pytest.raises(YamlError, match="more than 16 documents"):
        parse_all("---\na: 1\n" * 17)


def test_error_messages_quote_only_an_excerpt_of_a_long_anchor() -> None:
    anchor = "x" * 100_000
    error = refusal(f"a: *{anchor}", False)
    assert len(str(error)) < 300
    assert "(100000 characters)" in error.message


def test_control_characters_are_refused_by_position() -> None:
    assert refusal("a: b\x07", False).message == (
        "character U+0007 at position 4 is not allowed in YAML"
    )
