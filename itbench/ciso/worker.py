"""The policy engines' child process: Rego (regorus) and CEL evaluations, one request at a time.

Run as `python -m itbench.ciso.worker`. Requests arrive on stdin as a length line and a JSON
body; each answer is one JSON line on stdout. The process limits its own memory and never dumps
core, so a policy that exhausts memory costs one evaluation; the parent kills and replaces it
when one takes too long (`itbench.ciso.engines`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

MEMORY_BYTES = 2 * 1024**3
"""Address space the child may use (2 GiB)."""
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""Largest answer the parent reads (a policy whose result is larger fails with that reason)."""
MAX_POLICY_BYTES = 64 * 1024
MAX_POLICY_LINES = 4000
MAX_POLICY_COLUMNS = 1000

REGO_HINT = "(the Rego engine reads Rego v1, the syntax of OPA 1.0: `rule if { ... }`)"


def _rego_error(exc: BaseException) -> str:
    text = str(exc)
    text = text.split("Stack backtrace:", 1)[0].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[:12])[:1500]


def _engine(module: str) -> tuple[Any, str]:
    import regorus

    engine = regorus.Engine()
    engine.set_policy_length_config(
        max_col=MAX_POLICY_COLUMNS, max_file_bytes=MAX_POLICY_BYTES, max_lines=MAX_POLICY_LINES
    )
    engine.add_policy("policy.rego", module)
    packages = engine.get_packages()
    if len(packages) != 1:
        raise ValueError(f"the module must declare one package, it declares {len(packages)}")
    return engine, str(packages[0])


def rego_compile(request: dict[str, Any]) -> dict[str, Any]:
    """Parse and check a Rego module; say its package."""
    try:
        _unused, package = _engine(str(request["module"]))
    except Exception as exc:
        message = _rego_error(exc)
        if "`if` keyword" in message or "contains" in message:
            message = f"{message}\n{REGO_HINT}"
        return {"ok": False, "error": message}
    return {"ok": True, "package": package}


def rego_eval(request: dict[str, Any]) -> dict[str, Any]:
    """Evaluate a module's package with the evidence as input."""
    try:
        engine, package = _engine(str(request["module"]))
        engine.set_input_json(json.dumps(request.get("input")))
        answer = json.loads(engine.eval_query_as_json(package))
    except Exception as exc:
        return {"ok": False, "error": _rego_error(exc)}
    results = answer.get("result") or []
    value: Any = None
    if results and results[0].get("expressions"):
        value = results[0]["expressions"][0].get("value")
    return {"ok": True, "package": package, "value": value}


def cel_build(request: dict[str, Any]) -> dict[str, Any]:
    """Build CEL policies from documents and compile every expression."""
    from itbench.ciso import cel_policies

    try:
        policies = cel_policies.build(list(request["docs"]))
    except cel_policies.LiveOnlyError as exc:
        return {"ok": False, "liveOnly": True, "error": str(exc)}
    except cel_policies.PolicyError as exc:
        return {"ok": False, "error": str(exc)}
    problems = cel_policies.compile_problems(policies)
    if problems:
        return {"ok": False, "error": "; ".join(problems[:10])}
    return {"ok": True, "policies": [p.ref for p in policies]}


def cel_eval(request: dict[str, Any]) -> dict[str, Any]:
    """Evaluate CEL policies on objects."""
    from itbench.ciso import cel_policies

    try:
        policies = cel_policies.build(list(request["docs"]))
        results = cel_policies.evaluate(
            policies, list(request["objects"]), dict(request["namespace"])
        )
    except cel_policies.LiveOnlyError as exc:
        return {"ok": False, "liveOnly": True, "error": str(exc)}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    return {"ok": True, "results": [list(r) for r in results]}


def _ping(_request: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "rego-compile": rego_compile,
    "rego-eval": rego_eval,
    "cel-build": cel_build,
    "cel-eval": cel_eval,
    "ping": _ping,
}


def _serve() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    os.environ.setdefault("RUST_BACKTRACE", "0")
    # Import the engines before the first request, so that it does not pay for them.
    import regorus  # noqa: F401

    from itbench.ciso import cel_policies

    cel_policies.engine()

    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    while True:
        header = stdin.readline()
        if not header:
            return
        body = stdin.read(int(header))
        try:
            request = json.loads(body)
            op = OPS.get(str(request.get("op")))
            answer = op(request) if op else {"ok": False, "error": "unknown operation"}
        except MemoryError:
            answer = {"ok": False, "error": "the evaluation ran out of memory", "memory": True}
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        line = json.dumps(answer, default=str).encode()
        if len(line) > MAX_ANSWER_BYTES:
            line = json.dumps(
                {
                    "ok": False,
                    "error": f"the result is {len(line)} bytes, more than the "
                    f"{MAX_ANSWER_BYTES // (1024 * 1024)} MiB the platform reads",
                }
            ).encode()
        stdout.write(line + b"\n")
        stdout.flush()


if __name__ == "__main__":
    os.environ["RUST_BACKTRACE"] = "0"
    os.environ["RUST_LIB_BACKTRACE"] = "0"
    _serve()
