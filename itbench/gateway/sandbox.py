"""The native PromQL parser, tried first in a child process, so that a query that crashes or hangs
it costs that query, never the serving process.

`promql-parser` is native code: a query it cannot handle can overflow its stack and kill the whole
process (a signal, not an exception). The gateway's length and depth limits keep such queries
out; this is the second wall. Each new query is parsed once in a child, on a thread with a stack
smaller than any thread of the server has, so that a query the child survives is one the
server's own parse survives too; only then does the environment parse it. A crashed or hung
child is replaced for the next query. Queries that passed are remembered, so a repeated query
costs nothing.

Run as `python -m itbench.gateway.sandbox`, it is the child: length-prefixed queries on stdin,
one line per answer on stdout.
"""

from __future__ import annotations

import logging
import select
import subprocess
import sys
import threading
from collections import OrderedDict

log = logging.getLogger(__name__)

CHILD_STACK_BYTES = 2 * 1024 * 1024
"""The stack of the child's parsing thread: below the 8 MiB of the server's threads."""


class ParserSandbox:
    """A child process that tries the native PromQL parser on queries first (thread-safe)."""

    def __init__(self, timeout_seconds: float = 10.0, remember: int = 4096) -> None:
        """Prepare a sandbox; the child starts on first use.

        Args:
            timeout_seconds: How long one parse may take before the child is killed.
            remember: How many passed queries to remember.
        """
        self._timeout = timeout_seconds
        self._remember = remember
        self._passed: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None

    def check(self, query: str) -> str | None:
        """Try a query on the native parser in the child.

        Returns:
            None when the parser handled it (accepting or rejecting it as ordinary input),
            else why the query is refused (it crashed or hung the parser).
        """
        with self._lock:
            if query in self._passed:
                self._passed.move_to_end(query)
                return None
            problem = self._try(query.encode("utf-8", "surrogatepass"))
            if problem is None:
                self._passed[query] = None
                if len(self._passed) > self._remember:
                    self._passed.popitem(last=False)
            return problem

    def _try(self, data: bytes) -> str | None:
        child = self._running()
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(b"%d\n" % len(data) + data)
            child.stdin.flush()
            ready, _, _ = select.select([child.stdout], [], [], self._timeout)
            answer = child.stdout.readline() if ready else None
        except (BrokenPipeError, OSError):
            answer = b""
        if answer == b"ok\n":
            return None
        self._stop()
        if answer is None:
            return f"parsing the query took longer than {self._timeout:g} s"
        log.warning("the PromQL parser crashed on a query; its process is replaced")
        return "the query crashed the PromQL parser"

    def _running(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "itbench.gateway.sandbox"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        return self._child

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
        """Stop the child (it also stops by itself when this process goes away)."""
        with self._lock:
            self._stop()

    def child_pid(self) -> int | None:
        """The running child's process id, if any (for tests)."""
        child = self._child
        return child.pid if child is not None and child.poll() is None else None


def _serve() -> None:
    import resource

    import promql_parser

    # A crash should cost no time: no core file.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer

    def parse(text: str) -> None:
        try:
            promql_parser.parse(text)
        except Exception:  # an ordinary rejection: the server's own parse reports it
            return

    threading.stack_size(CHILD_STACK_BYTES)
    while True:
        header = stdin.readline()
        if not header:
            return
        data = stdin.read(int(header))
        worker = threading.Thread(target=parse, args=(data.decode("utf-8", "replace"),))
        worker.start()
        worker.join()
        stdout.write(b"ok\n")
        stdout.flush()


if __name__ == "__main__":
    _serve()
