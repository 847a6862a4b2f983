"""The policy engines, run in a child process so that a policy that never terminates or exhausts
memory costs one evaluation, never the gateway or the trial.

`engines()` is this process's engine sandbox (started on first use); each call sends one request
to the child (`itbench.ciso.worker`) and waits at most its time limit, after which the child is
killed and replaced and the call answers with a timeout.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import select
import subprocess
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

EVAL_TIMEOUT_SECONDS = 5.0
"""How long one evaluation may take before the engine process is killed."""
START_TIMEOUT_SECONDS = 30.0
"""How long the engine process may take to start (it imports both engines)."""


class EngineUnavailableError(RuntimeError):
    """The engine process cannot start or answer: a platform failure, not the agent's."""


class EngineSandbox:
    """A child process running the Rego and CEL engines, one request at a time (thread-safe)."""

    def __init__(self, timeout_seconds: float = EVAL_TIMEOUT_SECONDS) -> None:
        """Prepare the sandbox; the child starts on first use.

        Args:
            timeout_seconds: How long one evaluation may take.
        """
        self._timeout = timeout_seconds
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def call(self, request: dict[str, Any], timeout_seconds: float | None = None) -> dict[str, Any]:
        """Send one request and return the child's answer.

        A request that takes longer than the limit answers `{"ok": False, "timeout": True}`; a
        child that dies answers `{"ok": False, "crashed": True}`. Either way the child is
        replaced for the next request.

        Raises:
            EngineUnavailableError: The child cannot be started.
        """
        limit = self._timeout if timeout_seconds is None else timeout_seconds
        data = json.dumps(request, default=str).encode()
        with self._lock:
            child = self._running()
            assert child.stdin is not None and child.stdout is not None
            try:
                child.stdin.write(b"%d\n" % len(data) + data)
                child.stdin.flush()
                ready, _, _ = select.select([child.stdout], [], [], limit)
                line = child.stdout.readline() if ready else None
            except (BrokenPipeError, OSError):
                line = b""
            if line:
                try:
                    answer: dict[str, Any] = json.loads(line)
                    return answer
                except json.JSONDecodeError:
                    line = b""
            self._stop()
            self.restarts += 1
            if line is None:
                return {
                    "ok": False,
                    "timeout": True,
                    "error": f"the evaluation did not finish within {limit:g} s and was stopped",
                }
            return {
                "ok": False,
                "crashed": True,
                "error": "the evaluation crashed the policy engine (out of memory, or an engine "
                "fault); the engine is replaced",
            }

    def _running(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        env = {**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "itbench.ciso.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                env=env,
            )
        except OSError as exc:
            raise EngineUnavailableError(f"the policy engine process cannot start: {exc}") from exc
        self._child = child
        assert child.stdin is not None and child.stdout is not None
        ping = json.dumps({"op": "ping"}).encode()
        try:
            child.stdin.write(b"%d\n" % len(ping) + ping)
            child.stdin.flush()
            ready, _, _ = select.select([child.stdout], [], [], START_TIMEOUT_SECONDS)
            line = child.stdout.readline() if ready else b""
        except OSError:
            line = b""
        if not line:
            self._stop()
            raise EngineUnavailableError(
                "the policy engine process did not start (are regorus and "
                "common-expression-language installed?)"
            )
        return child

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        """Stop the child."""
        with self._lock:
            self._stop()

    def child_pid(self) -> int | None:
        """The running child's pid (for tests)."""
        child = self._child
        return child.pid if child is not None and child.poll() is None else None


@functools.cache
def engines() -> EngineSandbox:
    """This process's engine sandbox (built on first use, never at import)."""
    return EngineSandbox()
