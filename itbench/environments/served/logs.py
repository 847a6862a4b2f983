"""A pod's log as kube-apiserver and the kubelet answer `GET .../pods/<name>/log`: the container
named or defaulted, `previous`, `sinceSeconds`/`sinceTime`, `tailLines`, `timestamps` and
`limitBytes`; `follow` streams the lines written after those (`kubeapi` does the streaming).

The twin keeps one log per pod; a container instance's lines are those written while it ran
(from its status' startedAt to its finishedAt).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from itbench.environments.served.store import ApiError
from itbench.environments.served.wire import Entry

Json = dict[str, Any]


@dataclass(frozen=True)
class LogOptions:
    """The query of a log request (PodLogOptions)."""

    container: str | None = None
    previous: bool = False
    follow: bool = False
    since_seconds: int | None = None
    since_time: float | None = None
    tail_lines: int | None = None
    timestamps: bool = False
    limit_bytes: int | None = None


def _true(value: str | None) -> bool:
    return value in ("1", "true", "True")


def _positive(query: Mapping[str, str], key: str) -> int | None:
    text = query.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, "BadRequest", f"{key}: invalid value {text!r}") from None
    return value


def parse_time(text: str) -> float:
    """An RFC 3339 time in epoch seconds.

    Raises:
        ApiError: 400 when it is not one.
    """
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ApiError(400, "BadRequest", f"sinceTime: invalid value {text!r}") from None


def options(query: Mapping[str, str]) -> LogOptions:
    """The PodLogOptions of a query string, validated as kube-apiserver validates them.

    Raises:
        ApiError: 400 on a malformed value, 422 on an invalid one.
    """
    since_seconds = _positive(query, "sinceSeconds")
    since_text = query.get("sinceTime") or None
    tail = _positive(query, "tailLines")
    limit = _positive(query, "limitBytes")
    problems = []
    if since_seconds is not None and since_text is not None:
        problems.append("at most one of `sinceTime` or `sinceSeconds` may be specified")
    if since_seconds is not None and since_seconds < 1:
        problems.append("sinceSeconds: Invalid value: must be greater than 0")
    if tail is not None and tail < 0:
        problems.append(f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        problems.append(f"limitBytes: Invalid value: {limit}: must be greater than 0")
    if problems:
        raise ApiError(422, "Invalid", f'PodLogOptions "" is invalid: [{", ".join(problems)}]')
    return LogOptions(
        container=query.get("container") or None,
        previous=_true(query.get("previous")),
        follow=_true(query.get("follow")),
        since_seconds=since_seconds,
        since_time=parse_time(since_text) if since_text is not None else None,
        tail_lines=tail,
        timestamps=_true(query.get("timestamps")),
        limit_bytes=limit,
    )


def container_of(pod: Json, wanted: str | None) -> str:
    """The container a request reads: the one named, else the pod's only one.

    Raises:
        ApiError: 400 as kube-apiserver answers for a missing or unknown container name.
    """
    name = str(pod["metadata"]["name"])
    spec = pod.get("spec") or {}
    containers = [str(c.get("name")) for c in spec.get("containers") or []]
    inits = [str(c.get("name")) for c in spec.get("initContainers") or []]
    if wanted is None:
        if len(containers) == 1:
            return containers[0]
        message = (
            f"a container name must be specified for pod {name}, choose one of: "
            f"[{' '.join(containers)}]"
        )
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise ApiError(400, "BadRequest", message)
    if wanted not in containers + inits:
        raise ApiError(400, "BadRequest", f"container {wanted} is not valid for pod {name}")
    return wanted


def _status(pod: Json, container: str) -> Json:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for entry in status.get(key) or []:
            if entry.get("name") == container:
                return dict(entry)
    return {}


def _window(state: Json) -> tuple[float, float]:
    started, finished = state.get("startedAt"), state.get("finishedAt")
    return (
        parse_time(str(started)) if started else -math.inf,
        parse_time(str(finished)) if finished else math.inf,
    )


def instance(pod: Json, container: str, previous: bool, entries: Sequence[Entry]) -> list[Entry]:
    """The entries of the container instance asked for, as the kubelet chooses it: with
    `previous` the last terminated instance; else the running one, or when none runs the last
    terminated one (a crash-looping container's last run).

    Raises:
        ApiError: 400 as the kubelet answers when that instance does not exist.
    """
    name = pod["metadata"]["name"]
    status = _status(pod, container)
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated")
    restarted = int(status.get("restartCount") or 0) > 0
    if previous:
        if not restarted or not last:
            raise ApiError(
                400,
                "BadRequest",
                f'previous terminated container "{container}" in pod "{name}" not found',
            )
        start, end = _window(last)
    elif "running" in state or not status:
        if not restarted:
            return list(entries)
        start, end = _window(state.get("running") or {})
    elif "terminated" in state:
        start, end = _window(state["terminated"])
    elif last:
        start, end = _window(last)
    else:
        reason = str((state.get("waiting") or {}).get("reason") or "ContainerCreating")
        why = {
            "ErrImagePull": "image can't be pulled",
            "ImagePullBackOff": "trying and failing to pull image",
        }.get(reason, reason)
        raise ApiError(
            400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: {why}'
        )
    return [e for e in entries if start <= e[0] <= end]


def since(entries: Sequence[Entry], opts: LogOptions, now: float) -> list[Entry]:
    """The entries at or after `sinceSeconds` ago or `sinceTime`."""
    start = None
    if opts.since_seconds is not None:
        start = now - opts.since_seconds
    elif opts.since_time is not None:
        start = opts.since_time
    return [e for e in entries if start is None or e[0] >= start]


def rfc3339_nano(t: float) -> str:
    """Time as Go's RFC3339Nano writes it (trailing zeros of the fraction dropped)."""
    whole = math.floor(t)
    nanos = round((t - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    stamp = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{stamp}.{fraction}Z" if fraction else f"{stamp}Z"


def render(entries: Sequence[Entry], opts: LogOptions) -> bytes:
    """Entries as the log body: one line each, with its time first under `timestamps`."""
    text = "".join(
        f"{rfc3339_nano(t)} {line}\n" if opts.timestamps else f"{line}\n" for t, line in entries
    )
    return text.encode()


def select(pod: Json, entries: Sequence[Entry], opts: LogOptions, now: float) -> list[Entry]:
    """The entries a request reads: the instance, then `since`, then `tailLines`."""
    container = container_of(pod, opts.container)
    chosen = since(instance(pod, container, opts.previous, entries), opts, now)
    if opts.tail_lines is not None:
        chosen = chosen[-opts.tail_lines :] if opts.tail_lines else []
    return chosen
