"""The agent registry: agents are found, never imported by name.

An agent is named by a registered name (entry points of group `itbench.agents`; the built-in
baselines are registered like any other package's agents), a callable path (`pkg.module:run`), a
command (one process per trial) or an image (on a cluster). Each resolves to an `AgentInfo` that
records its name, version, what runs and its arguments, and that the runner runs (`runners.py`).

A registered or callable agent is either a callable `run(client, **args)` or an object with
`run` and optionally `domains` (domain names), `wall_seconds`, `description` and
`check(args) -> list[str]` (problems that stop a run before it starts, e.g. no model set).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench.core.catalog import did_you_mean
from itbench.core.models.agent_record import AgentInfo, AgentRuntimeKind
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.base import Domain

ENTRY_POINT_GROUP = "itbench.agents"
"""The entry-point group agents are registered in (`[project.entry-points."itbench.agents"]`)."""

CALLABLE_WALL_SECONDS = 120.0
"""Real seconds an in-process agent may take per trial unless it or the run says otherwise."""

COMMAND_WALL_SECONDS = 600.0
"""Real seconds an agent command may take per trial unless the run says otherwise."""

TRAJECTORY_PARAMETER = "trajectory"
"""A callable agent that takes this keyword gets the path of its trajectory file (JSON lines)."""

_ARG_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_CALLABLE_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_NAME_CHARS = re.compile(r"[^a-z0-9.-]+")


class AgentNotFoundError(LookupError):
    """No agent of that name is registered, or a callable path does not import."""


class AgentProblemError(ValueError):
    """An agent cannot run as asked; the message names the agent and what to change."""


@dataclass(frozen=True)
class AgentDefinition:
    """What a registered or callable agent declares about itself.

    Attributes:
        run: `run(client, **args)`; works one trial through the SDK client.
        domains: The domains it takes (empty: every domain).
        wall_seconds: Its own real-time limit per trial (None: the default).
        description: One line about it.
        check: Problems that stop a run before it starts (given the agent's arguments).
        parameters: The keyword arguments `run` takes (None: any).
    """

    run: Callable[..., None]
    domains: tuple[Domain, ...] = ()
    wall_seconds: float | None = None
    description: str = ""
    check: Callable[[Mapping[str, str]], list[str]] | None = None
    parameters: tuple[str, ...] | None = None

    def takes_trajectory(self) -> bool:
        """Whether `run` accepts the trajectory file's path."""
        return self.parameters is None or TRAJECTORY_PARAMETER in self.parameters


@dataclass(frozen=True)
class RegisteredAgent:
    """One entry of the registry.

    Attributes:
        name: Its registered name.
        target: `module:attribute`.
        distribution: The distribution that registers it.
        version: That distribution's version.
    """

    name: str
    target: str
    distribution: str
    version: str


def registered() -> dict[str, RegisteredAgent]:
    """Every registered agent by name (entry points of group `itbench.agents`)."""
    found: dict[str, RegisteredAgent] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        found.setdefault(
            ep.name,
            RegisteredAgent(
                name=ep.name,
                target=ep.value,
                distribution=dist.name if dist is not None else "",
                version=dist.version if dist is not None else "",
            ),
        )
    return dict(sorted(found.items()))


def load_target(target: str) -> Any:
    """Import `module:attribute` (the attribute may be dotted).

    Raises:
        AgentNotFoundError: When the module or attribute is missing.
    """
    module_name, _, attribute = target.partition(":")
    _cwd_importable()
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentNotFoundError(f"agent {target!r}: cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AgentNotFoundError(
                f"agent {target!r}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return obj


def _cwd_importable() -> None:
    # As `python -m` and uvicorn do: a user's `my_pkg.agent:run` is found from where it runs.
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def definition_of(obj: Any, target: str) -> AgentDefinition:
    """Read an agent's declaration from what its target names.

    Raises:
        AgentProblemError: When it is neither a callable nor an object with `run`.
    """
    if isinstance(obj, AgentDefinition):
        return obj
    run = obj if callable(obj) and not hasattr(obj, "run") else getattr(obj, "run", None)
    if not callable(run):
        raise AgentProblemError(
            f"agent {target!r} is neither a callable run(client, **args) nor an object with run"
        )
    domains = tuple(_domain(d, target) for d in getattr(obj, "domains", ()) or ())
    wall = getattr(obj, "wall_seconds", None)
    check = getattr(obj, "check", None)
    return AgentDefinition(
        run=run,
        domains=domains,
        wall_seconds=float(wall) if wall is not None else None,
        description=str(getattr(obj, "description", "") or (run.__doc__ or "").split("\n")[0]),
        check=check if callable(check) else None,
        parameters=_parameters(run),
    )


def _domain(value: Any, target: str) -> Domain:
    for domain in Domain:
        if str(value).lower() == domain.value.lower():
            return domain
    raise AgentProblemError(f"agent {target!r} declares an unknown domain {value!r}")


def _parameters(run: Callable[..., Any]) -> tuple[str, ...] | None:
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())[1:]  # the first is the client
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


@functools.cache
def load_definition(target: str) -> AgentDefinition:
    """The declaration of the agent at `module:attribute` (imported once per process)."""
    return definition_of(load_target(target), target)


def agent_name(text: str) -> str:
    """A valid agent name made from any text (lower case, `-` for anything else)."""
    name = _NAME_CHARS.sub("-", text.lower()).strip("-.")[:63].strip("-.")
    return name or "agent"


def _check_args(args: Mapping[str, str], who: str) -> dict[str, str]:
    bad = sorted(k for k in args if not _ARG_NAME.match(k))
    if bad:
        raise AgentProblemError(
            f"agent {who}: argument names {', '.join(map(repr, bad))} are not valid; use lower "
            "case letters, digits and '_' (e.g. model, base_url)"
        )
    return dict(sorted(args.items()))


def _wall(value: float | None, default: float) -> float:
    return float(value) if value is not None else default


def from_registry(
    name: str,
    *,
    args: Mapping[str, str] | None = None,
    wall_seconds: float | None = None,
    strict: bool = True,
) -> AgentInfo:
    """A registered agent.

    Args:
        name: Its registered name.
        args: Its arguments.
        wall_seconds: Its real-time limit per trial (None: its own, or the default).
        strict: Refuse arguments it does not take (False: leave them out).

    Raises:
        AgentNotFoundError: When no agent of that name is registered.
        AgentProblemError: When it does not take the arguments.
    """
    entries = registered()
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(entries) or "none"
        raise AgentNotFoundError(
            f"no agent named {name!r} is registered{did_you_mean(name, entries)} (registered: "
            f"{known}); give a callable as module:function, or a command with --agent-cmd"
        )
    definition = load_definition(entry.target)
    return _info(
        definition,
        name=name,
        version=entry.version,
        target=entry.target,
        registered=True,
        args=args or {},
        wall_seconds=wall_seconds,
        strict=strict,
    )


def from_callable(
    path: str,
    *,
    args: Mapping[str, str] | None = None,
    wall_seconds: float | None = None,
    name: str | None = None,
    version: str | None = None,
    strict: bool = True,
) -> AgentInfo:
    """An agent given as `module:function` (or `module:object` with `run`), run in-process.

    Args:
        path: `module:function`.
        args: Its arguments.
        wall_seconds: Its real-time limit per trial (None: its own, or the default).
        name: Its name (default: made from the path).
        version: Its version (default: its distribution's, or a digest of its module).
        strict: Refuse arguments it does not take (False: leave them out).

    Raises:
        AgentNotFoundError: When it does not import.
        AgentProblemError: When it is not an agent or does not take the arguments.
    """
    if not _CALLABLE_PATH.match(path):
        raise AgentProblemError(f"agent {path!r}: a callable is given as module:function")
    definition = load_definition(path)
    module = path.partition(":")[0]
    return _info(
        definition,
        name=name or _callable_name(path),
        version=version if version is not None else _module_version(module),
        target=path,
        registered=False,
        args=args or {},
        wall_seconds=wall_seconds,
        strict=strict,
    )


_GENERIC = frozenset({"run", "main", "agent", "app", "entry", "plugin"})


def _callable_name(path: str) -> str:
    module, _, attribute = path.partition(":")
    parts = [*module.split("."), *attribute.split(".")]
    meaningful = [p for p in parts if p.lower() not in _GENERIC]
    return agent_name(meaningful[-1] if meaningful else parts[-1])


def _info(
    definition: AgentDefinition,
    *,
    name: str,
    version: str,
    target: str,
    registered: bool,
    args: Mapping[str, str],
    wall_seconds: float | None,
    strict: bool,
) -> AgentInfo:
    clean = _check_args(args, repr(name))
    if definition.parameters is not None:
        unknown = sorted(set(clean) - set(definition.parameters) - {TRAJECTORY_PARAMETER})
        if unknown and not strict:
            clean = {k: v for k, v in clean.items() if k not in unknown}
        elif unknown:
            takes = [p for p in definition.parameters if p != TRAJECTORY_PARAMETER]
            raise AgentProblemError(
                f"agent {name!r} takes no argument {', '.join(map(repr, unknown))} (it takes: "
                f"{', '.join(takes) or 'none'})"
            )
    return AgentInfo(
        name=agent_name(name),
        version=version,
        runtime=AgentRuntimeKind.CALLABLE,
        target=target,
        registered=registered,
        args=clean,
        domains=list(definition.domains),
        wall_seconds=_wall(wall_seconds, definition.wall_seconds or CALLABLE_WALL_SECONDS),
    )


def _module_version(module: str) -> str:
    top = module.split(".", 1)[0]
    dists = importlib.metadata.packages_distributions().get(top) or []
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    if origin and Path(origin).is_file():
        return _digest([Path(origin)])
    return ""


def _digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return f"sha256:{h.hexdigest()[:12]}"


def from_command(
    command: str,
    *,
    args: Mapping[str, str] | None = None,
    wall_seconds: float | None = None,
    name: str | None = None,
    version: str | None = None,
    domains: Sequence[Domain] = (),
) -> AgentInfo:
    """An agent given as a command, run as one process per trial (no shell).

    Raises:
        AgentProblemError: When the command is empty, cannot be split or its program is missing.
    """
    argv = split_command(command)
    program = argv[0]
    if shutil.which(program) is None:
        raise AgentProblemError(
            f"agent command {command!r}: program {program!r} is not found (not on PATH and not "
            "an executable file)"
        )
    derived = _command_name(argv)
    return AgentInfo(
        name=agent_name(name or derived),
        version=version if version is not None else _command_version(argv),
        runtime=AgentRuntimeKind.COMMAND,
        target=command,
        registered=False,
        args=_check_args(args or {}, repr(command)),
        domains=list(domains),
        wall_seconds=_wall(wall_seconds, COMMAND_WALL_SECONDS),
    )


def _command_version(argv: Sequence[str]) -> str:
    # `python -m pkg.mod`: the module's distribution (or a digest of its file); otherwise a
    # digest of the scripts the command names (an interpreter binary is no part of the agent).
    rest = list(argv[1:])
    if "-m" in rest and rest.index("-m") + 1 < len(rest):
        try:
            return _module_version(rest[rest.index("-m") + 1])
        except (ImportError, ValueError):
            return ""
    files = [Path(a) for a in rest if not a.startswith("-") and Path(a).is_file()]
    program = Path(argv[0])
    if "/" in argv[0] and program.is_file() and _is_script(program):
        files.insert(0, program)
    return _digest(files) if files else ""


def _is_script(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == b"#!"


def split_command(command: str) -> list[str]:
    """The argv of a command line (POSIX shell words; no shell runs it).

    Raises:
        AgentProblemError: When it is empty or its quotes do not close.
    """
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise AgentProblemError(f"agent command {command!r}: {exc}") from None
    if not argv:
        raise AgentProblemError("agent command is empty")
    return argv


def _command_name(argv: Sequence[str]) -> str:
    rest = list(argv[1:])
    if "-m" in rest and rest.index("-m") + 1 < len(rest):
        return rest[rest.index("-m") + 1].rsplit(".", 1)[-1]
    for arg in rest:
        if not arg.startswith("-"):
            return Path(arg).stem
    return Path(argv[0]).stem


def from_image(image: str, *, name: str, version: str = "") -> AgentInfo:
    """An agent given as a container image (it runs on a cluster, as an AgentSubmission)."""
    return AgentInfo(
        name=agent_name(name),
        version=version or (image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""),
        runtime=AgentRuntimeKind.IMAGE,
        target=image,
        wall_seconds=COMMAND_WALL_SECONDS,
    )


def builtin(agent: BuiltinAgent, *, wall_seconds: float | None = None) -> AgentInfo:
    """A built-in baseline, found in the registry like any other agent."""
    return from_registry(agent.value, wall_seconds=wall_seconds)


def resolve(
    spec: str,
    *,
    args: Mapping[str, str] | None = None,
    wall_seconds: float | None = None,
    name: str | None = None,
    strict: bool = True,
) -> AgentInfo:
    """A registered name or a callable path (`module:function`).

    Raises:
        AgentNotFoundError: When it names nothing.
        AgentProblemError: When it cannot run as asked.
    """
    if ":" in spec:
        return from_callable(spec, args=args, wall_seconds=wall_seconds, name=name, strict=strict)
    info = from_registry(spec, args=args, wall_seconds=wall_seconds, strict=strict)
    return info.model_copy(update={"name": agent_name(name)}) if name else info


def preflight(info: AgentInfo) -> list[str]:
    """Problems that stop an agent before its first trial (e.g. no model configured).

    Commands and images are checked by their own process; a callable by its `check`.
    """
    if info.runtime != AgentRuntimeKind.CALLABLE:
        return []
    definition = load_definition(info.target)
    if definition.check is None:
        return []
    return [f"agent {info.name!r}: {p}" for p in definition.check(dict(info.args))]


def command_env(info: AgentInfo) -> dict[str, str]:
    """The arguments of a command or image agent, as `ITBENCH_AGENT__<NAME>` variables."""
    return {f"ITBENCH_AGENT__{k.upper()}": v for k, v in info.args.items()}
