"""Regular expressions as Prometheus and Loki run them: Go's RE2 syntax, matched in linear time.

Python's `re` backtracks, so a pattern such as `(.*)*x` from an agent's query could keep the
gateway busy for minutes; RE2 cannot. RE2 also refuses what Go refuses (backreferences,
lookaround), so a query the twin accepts is one the live stack accepts too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are reported to the caller, not logged by the library


class RegexError(ValueError):
    """A pattern RE2 does not accept (the message says why)."""


@lru_cache(maxsize=2048)
def compile_regex(pattern: str) -> Any:
    """Compile a pattern with RE2 (`search`, `match`, `fullmatch` and groups as in `re`).

    Raises:
        RegexError: The pattern is not valid RE2 syntax.
    """
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise RegexError(text) from None
