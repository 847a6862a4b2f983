"""Bounded excerpts of untrusted values, so that no error message repeats a huge input whole."""

from __future__ import annotations

EXCERPT_CHARS = 48
"""Characters of a value an excerpt keeps."""

MESSAGE_CHARS = 600
"""Characters an error message keeps before it is cut."""


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quotation of a value, with its length when it was cut.

    Strings are quoted with `repr` (control characters show as escapes); other values by their
    `repr`, which is computed only for scalars, so a huge container is never rendered.

    Args:
        value: The value to quote.
        limit: Characters of the value to keep.

    Returns:
        e.g. `'checkout'`, or `'aaaaaaaa…' (1048576 characters)`, or `a list of 5000 items`.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
        if len(text) <= limit:
            return text
        return f"{text[:limit]}… ({len(text)} digits)"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} keys"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} items"
    return f"a value of type {type(value).__name__}"


def bounded(message: str, limit: int = MESSAGE_CHARS) -> str:
    """A message cut to at most `limit` characters, saying how much was left out.

    Args:
        message: The message.
        limit: Characters to keep.
    """
    if len(message) <= limit:
        return message
    return f"{message[:limit]}… ({len(message) - limit} more characters)"
