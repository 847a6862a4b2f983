"""Keeping tool outputs within the model's token budget: repeated lines are folded into one with a
count, then the middle is cut, keeping the head and the tail, saying what was left out.

Tokens are estimated as one per four characters (no tokenizer download; close enough for
English and JSON), so a budget of N tokens keeps at most 4N characters.
"""

from __future__ import annotations

import math
import re
from collections import Counter

CHARS_PER_TOKEN = 4
_DIGITS = re.compile(r"\d+")


def estimate_tokens(text: str) -> int:
    """The tokens a text takes, estimated."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _fold(lines: list[str]) -> list[str]:
    # Lines that differ only in numbers (timestamps, ids, counters) are one kind of line.
    shapes = Counter(_DIGITS.sub("#", line) for line in lines)
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        shape = _DIGITS.sub("#", line)
        if shape in seen:
            continue
        seen.add(shape)
        n = shapes[shape]
        out.append(f"{line}  [x{n} similar lines]" if n > 1 else line)
    return out


def fit(text: str, budget_tokens: int) -> tuple[str, bool]:
    """Fit a tool output into a token budget.

    Args:
        text: The output.
        budget_tokens: The most tokens the model may see of it.

    Returns:
        The text to show (at most `budget_tokens` estimated tokens) and whether it was cut.
    """
    limit = max(budget_tokens, 50) * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, False
    lines = text.splitlines()
    folded = "\n".join(_fold(lines))
    if len(folded) <= limit:
        return folded, True
    lines = folded.splitlines()
    note_room = 120
    room = limit - note_room
    head_room, tail_room = int(room * 0.6), room - int(room * 0.6)
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > head_room:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    used = 0
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > tail_room:
            break
        tail.insert(0, line)
        used += len(line) + 1
    if not head and not tail:  # one enormous line
        return text[:head_room] + "\n[... cut to the token budget ...]\n" + text[-tail_room:], True
    left = len(lines) - len(head) - len(tail)
    note = (
        f"[... {left} lines left out to stay within {budget_tokens} tokens; narrow the "
        "request to see them ...]"
    )
    return "\n".join([*head, note, *tail]), True
