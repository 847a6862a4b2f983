"""Write the stack playbooks' extra variables (`make stack-up`, `make stack-down`) as JSON.

The shop's alert rules come from the one source the twin evaluates
(`itbench.core.alert_rules.prometheus_rule`), labelled for the pinned kube-prometheus-stack
release's rule selector; the kubeconfig is the one whose current context the playbooks act on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from itbench.core.alert_rules import prometheus_rule
from itbench.stack import chart_pin, release


def stack_vars(kubeconfig: str) -> dict[str, object]:
    """The extra variables of the stack playbooks for a kubeconfig."""
    selector = {"release": str(chart_pin("kube-prometheus-stack")["release"])}
    return {
        "kubeconfig": kubeconfig,
        "alert_rules": prometheus_rule(release()["namespace"], selector),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig the playbooks use")
    parser.add_argument("--output", type=Path, help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    path = Path(args.kubeconfig).expanduser()
    if not path.is_file():
        print(
            f"kubeconfig {path} does not exist: create the cluster first (make kind-up) "
            "or pass KUBECONFIG_FILE=...",
            file=sys.stderr,
        )
        return 2
    text = json.dumps(stack_vars(str(path.resolve())), indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
