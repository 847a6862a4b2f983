"""Write the CISO scenarios of the catalog from their controls (`itbench.core.ciso.controls`).

    python -m itbench.ciso.catalog [scenarios/ciso]

Each control becomes `scenarios/ciso/<name>/scenario.yaml`; files of controls that no longer
exist are left alone (the catalog's validation names them). A test checks that the files on
disk are what this writes, so the table and the catalog cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from itbench.core.ciso.controls import CONTROLS, Control, scenario_document

HEADER = "# Written by `python -m itbench.ciso.catalog` from itbench/core/ciso/controls.py.\n"


def render(control: Control) -> str:
    """The scenario file of a control."""
    body = yaml.safe_dump(
        scenario_document(control), sort_keys=False, width=100, allow_unicode=True
    )
    return HEADER + body


def write(directory: Path) -> list[Path]:
    """Write every control's scenario file under `directory`; return the files written."""
    written = []
    for control in CONTROLS:
        path = directory / control.name / "scenario.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(control))
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    """Write the files (default directory: scenarios/ciso)."""
    directory = Path(argv[0]) if argv else Path("scenarios/ciso")
    for path in write(directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
