"""The agent API's OpenAPI document, generated from the app; `docs/openapi.json` is its copy.

Regenerate with `python -m itbench.gateway.openapi docs/openapi.json`; a test fails when stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from itbench.gateway.app import create_app
from itbench.gateway.sessions import SessionRegistry


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the agent API."""
    return create_app(SessionRegistry()).openapi()


def render() -> str:
    """The document as the stable JSON text that is checked in."""
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the document to the given path (default: stdout)."""
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
