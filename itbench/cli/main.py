"""The `itbench` command: one sub-command group per noun."""

import sys


def main() -> None:
    """Entry point of the `itbench` console script."""
    print("itbench", file=sys.stderr)
