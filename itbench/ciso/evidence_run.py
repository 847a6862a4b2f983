"""The evidence Pod's runner and the reading of what it prints: the runner runs the collection
under its limits and prints its exit status, stdout, stderr and evidence after a marker line;
the platform reads the last such block of the Pod's log and judges it as the evidence sandbox
judges a local run (the same reasons, the same signs).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from itbench.ciso import sandbox
from itbench.core.models.compliance import EvidenceCollection

LOG_MARGIN_BYTES = 64 * 1024
EXTRA_NETWORK_SIGNS = ("No route to host", "Connection timed out")
"""What reaching out looks like from a Pod whose traffic a NetworkPolicy drops (besides the
sandbox's signs)."""

RUN_SCRIPT = r"""#!/bin/bash
# The evidence pod's command: run the collection under its limits, then print its stdout, stderr
# and evidence (base64) after a marker line, once nothing else of the collection runs.
set -u
mark="$1"; limit="$2"; shift 2
out=/tmp/.itbench-run
mkdir -p "$out" && cp "$COLLECTION_SOURCE" "$WORKDIR/$COLLECTION_NAME" || exit 70
mkfifo "$out/o" "$out/e" || exit 70
head -c $((MAXOUT + 1)) < "$out/o" > "$out/stdout" & ho=$!
head -c $((MAXOUT + 1)) < "$out/e" > "$out/stderr" & he=$!
cd "$WORKDIR" || exit 70
started=$SECONDS
status=0
(
  ulimit -t "$CPU" -f "$FSIZE" -v "$MEM" 2>/dev/null
  exec timeout -k 2 "$limit" "$@"
) > "$out/o" 2> "$out/e" < /dev/null || status=$?
elapsed=$((SECONDS - started))
if [ "$$" = 1 ]; then
  # PID 1 of the Pod: whatever the collection left running is stopped before anything is
  # printed, so nothing of it writes after the marker.
  for attempt in 1 2; do
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      case " $$ $ho $he " in *" $p "*) ;; *) kill -KILL "$p" 2>/dev/null ;; esac
    done
  done
fi
wait "$ho" "$he"
printf '\n%s begin status=%s seconds=%s\n' "$mark" "$status" "$elapsed"
for f in stdout stderr; do
  printf '%s %s\n' "$mark" "$f"; base64 -w 0 "$out/$f"; printf '\n'
done
if [ -f "$WORKDIR/evidence.json" ]; then
  printf '%s evidence\n' "$mark"
  head -c $((MAXEV + 1)) "$WORKDIR/evidence.json" | base64 -w 0; printf '\n'
fi
printf '%s end\n' "$mark"
exit 0
"""


def marker(token: str) -> str:
    """The line prefix the runner prints its results after."""
    return f"==itbench-evidence-{token}=="


def log_limit_bytes() -> int:
    """The most of the Pod's log the platform reads: the runner's marker lines plus stdout and
    stderr (each at most MAX_OUTPUT_BYTES + 1) and the evidence, in base64."""

    def b64(n: int) -> int:
        return 4 * ((n + 2) // 3)

    return (
        2 * b64(sandbox.MAX_OUTPUT_BYTES + 1)
        + b64(sandbox.MAX_EVIDENCE_BYTES + 1)
        + LOG_MARGIN_BYTES
    )


def parse_log(text: str, token: str) -> dict[str, Any] | None:
    """The runner's results in a Pod's log: status, seconds and the decoded stdout, stderr and
    evidence (None when the log holds no complete results).

    Only the last `begin` line counts: the runner prints it once nothing else of the
    collection runs, so whatever the collection printed before cannot stand in for it.
    """
    mark = marker(token)
    start = text.rfind(f"\n{mark} begin ")
    if start < 0:
        return None
    lines = text[start + 1 :].splitlines()
    head = lines[0].split()
    fields = dict(part.split("=", 1) for part in head[2:] if "=" in part)
    try:
        out: dict[str, Any] = {
            "status": int(fields["status"]),
            "seconds": float(fields["seconds"]),
            "stdout": b"",
            "stderr": b"",
            "evidence": None,
        }
    except (KeyError, ValueError):
        return None
    i = 1
    ended = False
    while i < len(lines):
        line = lines[i]
        if line == f"{mark} end":
            ended = True
            break
        if line.startswith(f"{mark} ") and i + 1 < len(lines):
            section = line[len(mark) + 1 :]
            try:
                out[section] = base64.b64decode(lines[i + 1], validate=True)
            except (binascii.Error, ValueError):
                return None
            i += 2
            continue
        i += 1
    return out if ended else None


def judge(
    collection: EvidenceCollection,
    printed: Mapping[str, Any],
    timeout: float,
) -> sandbox.CollectionResult:
    """The sandbox's reading of a collection's run, from what the evidence pod printed: the same
    reasons (time limit, too much output, writes, network, exit status, no evidence) and signs."""
    stdout: bytes = printed.get("stdout") or b""
    stderr: bytes = printed.get("stderr") or b""
    raw: bytes | None = printed.get("evidence")
    status = int(printed.get("status", 0))
    seconds = float(printed.get("seconds", 0.0))
    timed_out = status == 124 or (status == 137 and seconds >= int(timeout))
    result = sandbox.CollectionResult(
        ok=False,
        exit_code=None if timed_out else status,
        stdout=sandbox._tail(stdout),
        stderr=sandbox._tail(stderr),
        seconds=seconds,
    )
    stopped = ""
    if timed_out:
        stopped = "timeout"
    elif len(stdout) + len(stderr) > sandbox.MAX_OUTPUT_BYTES:
        result.exit_code = None
        stopped = "output"
    signs = (*sandbox.NETWORK_SIGNS, *EXTRA_NETWORK_SIGNS)
    return sandbox.read_run(result, collection, stopped, stdout, stderr, raw, timeout, signs)
