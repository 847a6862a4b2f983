"""One runner for every agent: a callable works the trial in-process through the SDK; a command
runs as its own process against the gateway served on loopback. Both are bounded by the agent's
wall-clock limit; a crash (AgentCrashed), a hang (AgentTimeout) or an exit without FINISHED
(AgentExitedWithoutFinish) ends that trial Failed (the agent's), never the run; a failing model
endpoint (ModelUnavailable) ends it Errored. A command's stdout and stderr are kept with the trial,
bounded; an in-process agent's traceback is kept there too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from itbench.core.agent_failures import MODEL_UNAVAILABLE_EXIT
from itbench.core.models.agent_record import AgentInfo, AgentRuntimeKind
from itbench.core.runner.context import Reason
from itbench.execution.agents import (
    TRAJECTORY_PARAMETER,
    command_env,
    load_definition,
    split_command,
)
from itbench.execution.driver import AgentRunner, threaded_agent
from itbench.execution.executor import TrialExecutor
from itbench.gateway.sessions import AgentState

log = logging.getLogger(__name__)

LOG_LIMIT_BYTES = 1 << 20
"""Bytes of each of a command's streams kept per trial: the first and the last half."""

STOP_GRACE_SECONDS = 3.0
"""After SIGTERM, how long a command has to exit before it is killed."""


BASE_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
)
"""What a command inherits when it must not see the rest of its parent's environment."""


@dataclass(frozen=True)
class AgentFiles:
    """Where a trial's agent artefacts go.

    Attributes:
        stdout: The command's standard output (bounded).
        stderr: The command's standard error (bounded).
        steps: The trajectory the agent reports, one JSON `AgentStep` per line.
        traceback: Where an in-process agent's traceback goes when it raises or is abandoned
            (None: nowhere).
    """

    stdout: Path
    stderr: Path
    steps: Path
    traceback: Path | None = None


class LoopbackGateway:
    """A gateway app served over HTTP on 127.0.0.1 (a free port), in a background thread.

    Agent commands reach their trial through it, exactly as they would a remote gateway.
    """

    def __init__(self, app: Any) -> None:
        """Start serving `app` and wait until it accepts connections."""
        import uvicorn

        self.app = app
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="loopback-gateway",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 30.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback gateway did not start")
            time.sleep(0.01)

    def close(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()


_LOOPBACKS: dict[int, LoopbackGateway] = {}
_LOOPBACK_LOCK = threading.Lock()


def loopback_url(app: Any) -> str:
    """The URL of `app` served on loopback (one server per app in this process, started on
    first use and kept until the process ends)."""
    with _LOOPBACK_LOCK:
        served = _LOOPBACKS.get(id(app))
        if served is None or served.app is not app:
            served = LoopbackGateway(app)
            _LOOPBACKS[id(app)] = served
        return served.url


class BoundedCapture:
    """Reads a stream to its end in a thread, keeping its first and last bytes within a limit.

    The head is written to the file as it arrives (a running command can be followed with
    `tail -f`); the tail is written at the end, after a line saying how much was dropped.
    """

    def __init__(self, stream: IO[bytes], path: Path | None, limit: int = LOG_LIMIT_BYTES) -> None:
        """Start reading `stream` into `path` (None: keep only the tail in memory)."""
        self._stream = stream
        self._head_limit = limit // 2 if path is not None else 0
        self._tail_limit = limit - self._head_limit
        self._file = path.open("wb") if path is not None else None
        self._written = 0
        self._tail = bytearray()
        self._dropped = 0
        self.total = 0
        self._thread = threading.Thread(target=self._read, name="agent-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else b""
            if not chunk:
                break
            self.total += len(chunk)
            room = self._head_limit - self._written
            if room > 0 and self._file is not None:
                head, chunk = chunk[:room], chunk[room:]
                self._file.write(head)
                self._file.flush()
                self._written += len(head)
            if chunk:
                self._tail += chunk
                excess = len(self._tail) - self._tail_limit
                if excess > 0:
                    del self._tail[:excess]
                    self._dropped += excess

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the stream's end (bounded) and write the tail."""
        self._thread.join(timeout)
        with contextlib.suppress(OSError):
            self._stream.close()
        if self._file is not None:
            if self._dropped:
                self._file.write(f"\n[... {self._dropped} bytes dropped ...]\n".encode())
            self._file.write(bytes(self._tail))
            self._file.close()

    def last_line(self) -> str:
        """The last non-empty line seen (for a crash's reason)."""
        lines = [ln for ln in bytes(self._tail).decode("utf-8", "replace").splitlines() if ln]
        return lines[-1].strip()[:300] if lines else ""


def note_exit(executor: TrialExecutor, what: str) -> None:
    """Record that the agent's turn is over (`what`: how it ended, e.g. "the agent returned after
    3.0 s") when it has not reported FINISHED: AgentExitedWithoutFinish. Nothing is recorded when
    it finished, or when its (virtual) deadline passed first (the state machine says
    AgentTimeout)."""
    session = executor.session()
    if session is None or session.state in (AgentState.FINISHED, AgentState.CLOSED):
        return
    with executor.lock:
        remaining = session.remaining_seconds()
    if remaining is not None and remaining <= 0:
        return
    done = "it reported STARTED" if session.state == AgentState.STARTED else "nor STARTED"
    executor.record_agent_error(
        f"{what} without reporting FINISHED ({done}); an agent reports FINISHED when it is done",
        Reason.AGENT_EXITED,
    )


def callable_runner(info: AgentInfo, app: Any, steps: Path | None = None) -> AgentRunner:
    """A runner calling a callable agent in this process through the SDK's in-process client.

    The client arrives with the trial selected (`next_trial()` is not needed, and harmless).
    When the callable returns without reporting FINISHED the trial ends
    AgentExitedWithoutFinish.

    Args:
        info: The agent (runtime callable).
        app: The gateway app the client calls (no socket).
        steps: The trajectory file handed to an agent that takes `trajectory`.
    """
    from itbench.client import ITBenchClient

    definition = load_definition(info.target)
    kwargs: dict[str, Any] = dict(info.args)
    if steps is not None and definition.takes_trajectory():
        steps.parent.mkdir(parents=True, exist_ok=True)
        kwargs[TRAJECTORY_PARAMETER] = str(steps)

    def run(executor: TrialExecutor) -> None:
        session = executor.session()
        if session is None:
            raise RuntimeError(f"trial {executor.ctx.name!r} has no open session")
        client = ITBenchClient.in_process(app, session.token)
        client.use_trial(session.trial_id)
        began = time.monotonic()
        try:
            definition.run(client, **kwargs)
        finally:
            client.close()
        note_exit(executor, f"the agent returned after {time.monotonic() - began:.1f} s")

    return run


def command_runner(
    info: AgentInfo,
    gateway_url: Callable[[], str],
    files: AgentFiles | None = None,
    *,
    log_limit: int = LOG_LIMIT_BYTES,
    extra_env: dict[str, str] | None = None,
    inherit_env: bool = True,
) -> AgentRunner:
    """A runner starting the agent's command once per trial, against the gateway at a URL.

    The process gets `ITBENCH_GATEWAY_URL`, `ITBENCH_TRIAL` (also `ITBENCH_TRIAL_ID`, as image
    agents get it), `ITBENCH_TOKEN`, `ITBENCH_TRAJECTORY_FILE` and its arguments as
    `ITBENCH_AGENT__<NAME>`, on top of this process' environment (model credentials pass
    through) or, with `inherit_env` false, of `BASE_ENV` only. It runs in its own process
    group; past its wall-clock limit the group is stopped (AgentTimeout). A non-zero exit or a
    failure to start is AgentCrashed, an exit without FINISHED AgentExitedWithoutFinish, exit
    status 75 ModelUnavailable (the trial ends Errored).

    Args:
        info: The agent (runtime command).
        gateway_url: The URL the command reaches the gateway at (called per trial).
        files: Where its output and trajectory go (None: output kept in memory only).
        log_limit: Bytes kept of each stream.
        extra_env: More variables (e.g. credentials from a Secret).
        inherit_env: Pass this process' whole environment (False: only `BASE_ENV`).
    """
    argv = split_command(info.target)

    def run(executor: TrialExecutor) -> None:
        session = executor.session()
        if session is None:
            raise RuntimeError(f"trial {executor.ctx.name!r} has no open session")
        parent = (
            dict(os.environ)
            if inherit_env
            else {k: v for k, v in os.environ.items() if k in BASE_ENV}
        )
        env = {
            **parent,
            **command_env(info),
            **(extra_env or {}),
            "ITBENCH_GATEWAY_URL": gateway_url(),
            "ITBENCH_TRIAL": session.trial_id,
            "ITBENCH_TRIAL_ID": session.trial_id,
            "ITBENCH_TOKEN": session.token,
        }
        if files is not None:
            files.stdout.parent.mkdir(parents=True, exist_ok=True)
            env["ITBENCH_TRAJECTORY_FILE"] = str(files.steps.resolve())
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            executor.record_agent_error(f"the agent command could not start: {exc}")
            return
        assert proc.stdout is not None and proc.stderr is not None
        out = BoundedCapture(proc.stdout, files.stdout if files else None, log_limit)
        err = BoundedCapture(proc.stderr, files.stderr if files else None, log_limit)
        where = f"; its stderr is kept in {files.stderr}" if files is not None else ""
        began = time.monotonic()
        try:
            code = proc.wait(timeout=info.wall_seconds)
        except subprocess.TimeoutExpired:
            _stop(proc)
            out.close()
            err.close()
            executor.record_agent_error(
                f"the agent command did not exit within its {info.wall_seconds:g} s wall-clock "
                f"limit and was stopped{where}",
                Reason.AGENT_TIMEOUT,
            )
            return
        took = time.monotonic() - began
        out.close()
        err.close()
        if code == 0:
            note_exit(executor, f"the agent command exited with status 0 after {took:.1f} s{where}")
            return
        last = err.last_line() or out.last_line()
        detail = f": {last}" if last else ""
        if code == MODEL_UNAVAILABLE_EXIT:
            executor.record_agent_error(
                f"the agent command's model endpoint failed (exit status {code}){detail}{where}",
                Reason.MODEL_UNAVAILABLE,
            )
            return
        executor.record_agent_error(
            f"the agent command exited with status {_status(code)}{detail}{where}"
        )

    return run


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def agent_runner(
    info: AgentInfo,
    *,
    app: Any,
    gateway_url: Callable[[], str],
    files: AgentFiles | None = None,
    extra_env: dict[str, str] | None = None,
) -> AgentRunner:
    """The runner of any agent that runs next to the platform, bounded by its wall-clock limit.

    Args:
        info: The agent.
        app: The gateway app (for in-process callables).
        gateway_url: The gateway's URL (for commands; called when one starts).
        files: Where the trial's agent artefacts go (None: nowhere).
        extra_env: More variables for a command (e.g. credentials).

    Raises:
        ValueError: For an image agent, which runs on a cluster (an AgentSubmission's Job).
    """
    if info.runtime == AgentRuntimeKind.CALLABLE:
        steps = files.steps if files is not None else None
        traceback_file = files.traceback if files is not None else None
        return threaded_agent(callable_runner(info, app, steps), info.wall_seconds, traceback_file)
    if info.runtime == AgentRuntimeKind.COMMAND:
        return command_runner(info, gateway_url, files, extra_env=extra_env)
    raise ValueError(
        f"agent {info.name!r} is an image ({info.target}); images run on a cluster: apply an "
        "AgentSubmission with runtime.image and a BenchmarkRun"
    )
