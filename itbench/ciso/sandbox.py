"""The evidence sandbox: an agent's collection (a bash script or an Ansible playbook) run by the
platform against a copy of the environment that it cannot change, without a network.

The sandbox is a set of Linux namespaces (user, mount, network, PID, IPC, UTS), entered twice so
that every mount it is given is locked read-only: its root is a read-only tmpfs holding the RHEL9
host's modelled `/etc` (modes and owners as modelled), the machine's `/usr` under an overlay that
adds the host's commands and `kubectl` (`itbench.ciso.shim`), the Python that runs Ansible
(read-only), a fresh `/proc`, four device nodes, and two small writable tmpfs: `/tmp` and the
collection's working directory `/run/collection`. There is no network interface. Limits: wall
clock, CPU, file size, processes, address space, and how much of stdout, stderr and evidence is
read. Writes the collection attempts fail (a read-only file system, or a refusal by the command
that would make them); the platform reads those failures and names them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itbench.core.ciso import host as host_model
from itbench.core.models.compliance import CollectionKind, EvidenceCollection

TIMEOUT_SECONDS = 60.0
"""Wall-clock limit of one collection."""
CPU_SECONDS = 60
MAX_FILE_KB = 16 * 1024
"""Largest file the collection may write (16 MiB), also the evidence's hard ceiling."""
MAX_EVIDENCE_BYTES = 4 * 1024 * 1024
"""Largest evidence the platform reads (4 MiB)."""
MAX_OUTPUT_BYTES = 1024 * 1024
"""Most of stdout plus stderr read before the collection is stopped (1 MiB)."""
MAX_PROCESSES = 256
MEMORY_KB = 2 * 1024 * 1024
TAIL_CHARS = 4000

WORKDIR = "/run/collection"
EVIDENCE = f"{WORKDIR}/evidence.json"
TWIN_DIR = "/usr/lib/itbench-twin"
HOST_BINARIES = {
    "bin": (
        "curl",
        "wget",
        "nc",
        "ncat",
        "ssh",
        "scp",
        "telnet",
        "ping",
        "dig",
        "nslookup",
        "kubectl",
        "systemctl",
        "rpm",
        "findmnt",
        "update-crypto-policies",
        "hostnamectl",
        "uname",
        "sudo",
    ),
    "sbin": ("sshd", "sysctl", "getenforce", "sestatus", "auditctl", "modprobe", "lsmod"),
}
"""Where each command of the sandbox lives under /usr (as on RHEL 9)."""
NETWORK_SIGNS = (
    "itbench-sandbox: no network:",
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname",
    "getaddrinfo failed",
    "Connection refused",
)
WRITE_SIGNS = ("Read-only file system", "itbench-sandbox: refused:")


@dataclass(frozen=True)
class EnvironmentView:
    """What the sandbox shows: the namespace's objects and the host's state.

    Attributes:
        namespace: The scenario namespace.
        objects: Every object (namespaced and the cluster-scoped ones the namespace uses).
        host: The RHEL9 host's state.
    """

    namespace: str
    objects: list[dict[str, Any]]
    host: host_model.HostState


@dataclass
class CollectionResult:
    """What a collection produced.

    Attributes:
        ok: It ran to completion, wrote nothing, reached for no network and left evidence.
        evidence: The evidence (parsed JSON), when ok.
        evidence_bytes: Size of the evidence read.
        exit_code: The collection's exit status (None when it was stopped).
        stdout: The end of its stdout.
        stderr: The end of its stderr.
        problem: Why it is not ok: what it tried, or what went wrong.
        seconds: Wall-clock time it took.
        platform_error: The sandbox itself could not run (not the collection's fault).
    """

    ok: bool
    evidence: Any = None
    evidence_bytes: int = 0
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    problem: str = ""
    seconds: float = 0.0
    platform_error: bool = False
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The result as the agent sees it (the evidence bounded)."""
        text = json.dumps(self.evidence) if self.evidence is not None else ""
        return {
            "ok": self.ok,
            "problem": self.problem,
            "exitCode": self.exit_code,
            "evidenceBytes": self.evidence_bytes,
            "evidence": self.evidence if len(text) <= 64 * 1024 else None,
            "evidenceTruncated": len(text) > 64 * 1024,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _materialize(view: EnvironmentView, root: Path) -> None:
    """The host's /etc and the twin's files, under `root` (etc/, usr/ for the overlay)."""
    etc = root / "etc"
    for path, f in host_model.render_files(view.host).items():
        _write(root / path.lstrip("/"), f.content, int(f.mode, 8))
    for name in ("ld.so.cache", "ld.so.conf"):
        source = Path("/etc") / name
        if source.exists():
            shutil.copy2(source, etc / name)
    for name in ("ld.so.conf.d", "alternatives"):
        source = Path("/etc") / name
        if source.is_dir():
            shutil.copytree(source, etc / name, symlinks=True, dirs_exist_ok=True)
    _write(etc / "hosts", f"127.0.0.1 localhost {view.host.get('hostname', 'localhost')}\n")
    _write(etc / "resolv.conf", "")
    twin = root / "usr" / TWIN_DIR.removeprefix("/usr/")
    twin.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).resolve().parent
    shutil.copy2(here / "shim.py", twin / "shim.py")
    shutil.copy2(Path(host_model.__file__).resolve(), twin / "host_model.py")
    state = {"namespace": view.namespace, "objects": view.objects, "host": view.host}
    _write(twin / "state.json", json.dumps(state))
    python = _python()
    for directory, names in HOST_BINARIES.items():
        for name in names:
            _write(
                root / "usr" / directory / name,
                f'#!/bin/sh\nexec {shlex.quote(python)} -I -S {TWIN_DIR}/shim.py {name} "$@"\n',
                0o755,
            )


def _python() -> str:
    """The interpreter the shims run on (the base interpreter: the standard library suffices)."""
    base = (
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )
    return str(base if base.exists() else Path(sys.executable).resolve())


def _binds() -> list[str]:
    """Directories from the machine the sandbox sees read-only (besides /usr)."""
    out = []
    for path in {sys.base_prefix, sys.prefix}:
        resolved = str(Path(path).resolve())
        if not resolved.startswith("/usr/") and resolved != "/usr":
            out.append(resolved)
    return sorted(out)


SETUP = r"""
set -eu
R="$1"; D="$2"; shift 2
mount -t tmpfs -o size=32m,mode=755 tmpfs "$R"
for d in usr etc proc dev tmp run/collection; do mkdir -p "$R/$d"; done
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then
    mkdir -p "$R/$d" && mount --bind "/$d" "$R/$d" && mount -o remount,bind,ro "$R/$d"
  fi
done
mkdir -p "$D/work"
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$D/usr,workdir=$D/work" "$R/usr"
cp -a "$D/etc/." "$R/etc/"
# /tmp first: a bound directory under /tmp (a virtual environment there) stays visible.
mount -t tmpfs -o size=64m,mode=1777 tmpfs "$R/tmp"
for b in $BINDS; do mkdir -p "$R$b"; mount --bind "$b" "$R$b"; mount -o remount,bind,ro "$R$b"; done
mount -t proc proc "$R/proc"
for n in null zero random urandom; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done
mkdir -p "$R/dev/shm" && mount -t tmpfs -o size=16m,mode=1777 tmpfs "$R/dev/shm"
mount -t tmpfs -o size=32m,mode=755 tmpfs "$R/run/collection"
cp "$D/collection" "$R/run/collection/$COLLECTION"
mount -o remount,ro "$R/usr"
mount -o remount,ro "$R"
status=0
unshare --user --map-root-user --mount --root="$R" --wd=/run/collection -- /bin/bash -c \
  'ulimit -t '"$CPU"' -f '"$FSIZE"' -u '"$NPROC"' -v '"$MEM"' 2>/dev/null; exec "$@"' collect "$@" \
  || status=$?
if [ -f "$R/run/collection/evidence.json" ]; then
  head -c $((MAXEV + 1)) "$R/run/collection/evidence.json" > "$D/out/evidence.json" || true
fi
exit $status
"""


@functools.cache
def sandbox_problem() -> str:
    """Why collections cannot run on this machine ('' when they can): namespaces, overlay."""
    if not sys.platform.startswith("linux"):
        return "the evidence sandbox needs Linux namespaces"
    for tool in ("unshare", "bash"):
        if shutil.which(tool) is None:
            return f"the evidence sandbox needs {tool}"
    view = EnvironmentView("default", [], host_model.baseline_state())
    result = _run(EvidenceCollection(kind=CollectionKind.SCRIPT, content="echo '{}'\n"), view, 30.0)
    if not result.ok:
        return (
            "the evidence sandbox cannot start here (user, mount and network namespaces and "
            f"overlayfs are needed): {result.problem or result.stderr[-300:]}"
        )
    return ""


def run_collection(
    collection: EvidenceCollection,
    view: EnvironmentView,
    *,
    timeout_seconds: float = TIMEOUT_SECONDS,
) -> CollectionResult:
    """Run a collection in the sandbox against a view of the environment.

    Args:
        collection: The script or playbook.
        view: What the sandbox shows.
        timeout_seconds: Wall-clock limit.

    Returns:
        The result; `platform_error` when the sandbox cannot run on this machine.
    """
    problem = sandbox_problem()
    if problem:
        return CollectionResult(ok=False, problem=problem, platform_error=True)
    return _run(collection, view, timeout_seconds)


def _command(collection: EvidenceCollection) -> tuple[str, list[str], dict[str, str]]:
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "ITBENCH_EVIDENCE": EVIDENCE,
        "TMPDIR": "/tmp",
    }
    if collection.kind == CollectionKind.SCRIPT:
        return "collect.sh", ["/bin/bash", f"{WORKDIR}/collect.sh"], env
    # The interpreter by the path the sandbox binds (the environment's resolved prefix): a
    # virtual environment reached through a symbolic link is bound where the link points.
    venv_bin = Path(sys.prefix).resolve() / "bin"
    python = venv_bin / Path(sys.executable).name
    interpreter = str(python) if python.exists() else sys.executable
    env.update(
        {
            "ANSIBLE_HOME": "/tmp/ansible",
            "ANSIBLE_LOCAL_TEMP": "/tmp/ansible/tmp",
            "ANSIBLE_REMOTE_TMP": "/tmp/ansible/remote",
            "ANSIBLE_PYTHON_INTERPRETER": interpreter,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_HOST_KEY_CHECKING": "0",
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_SYSTEM_WARNINGS": "0",
            "ANSIBLE_LOCALHOST_WARNING": "0",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "ANSIBLE_GATHER_TIMEOUT": "10",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    playbook = str(venv_bin / "ansible-playbook")
    return (
        "collect.yml",
        [interpreter, playbook, "-i", "localhost,", "-c", "local", f"{WORKDIR}/collect.yml"],
        env,
    )


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text[-TAIL_CHARS:]


def _run(collection: EvidenceCollection, view: EnvironmentView, timeout: float) -> CollectionResult:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="itbench-collect-") as tmp:
        d = Path(tmp)
        (d / "root").mkdir()
        (d / "out").mkdir()
        _materialize(view, d)
        name, argv, env = _command(collection)
        (d / "collection").write_text(collection.content)
        setup_env = {
            **env,
            "BINDS": " ".join(_binds()),
            "COLLECTION": name,
            "CPU": str(CPU_SECONDS),
            "FSIZE": str(MAX_FILE_KB),
            "NPROC": str(MAX_PROCESSES),
            "MEM": str(MEMORY_KB),
            "MAXEV": str(MAX_EVIDENCE_BYTES),
        }
        outer = [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "--net",
            "--pid",
            "--ipc",
            "--uts",
            "--fork",
            "--kill-child",
            "/bin/sh",
            "-c",
            SETUP,
            "setup",
            str(d / "root"),
            str(d),
            *argv,
        ]
        try:
            proc = subprocess.Popen(
                outer,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=setup_env,
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            return CollectionResult(
                ok=False, problem=f"the sandbox cannot start: {exc}", platform_error=True
            )
        stdout, stderr, stopped = _read(proc, timeout)
        seconds = time.monotonic() - started
        code = None if stopped else proc.returncode
        evidence_path = d / "out" / "evidence.json"
        raw = evidence_path.read_bytes() if evidence_path.exists() else None
    result = CollectionResult(
        ok=False,
        exit_code=code,
        stdout=_tail(stdout),
        stderr=_tail(stderr),
        seconds=seconds,
    )
    return read_run(result, collection, stopped, stdout, stderr, raw, timeout)


def read_run(
    result: CollectionResult,
    collection: EvidenceCollection,
    stopped: str,
    stdout: bytes,
    stderr: bytes,
    raw: bytes | None,
    timeout: float,
    network_signs: tuple[str, ...] = NETWORK_SIGNS,
) -> CollectionResult:
    """Read a finished collection run into its result: the first reason it is not ok (its time
    limit, too much output, a write, a network attempt, its exit status, no, too much or
    malformed evidence), else its evidence. Shared by the local sandbox and the evidence Pods.

    Args:
        result: The result so far (exit code, output tails, seconds); filled in and returned.
        collection: The collection that ran.
        stopped: Why it was stopped ("timeout", "output"), or "" when it ended by itself.
        stdout: What it printed on stdout.
        stderr: What it printed on stderr.
        raw: The evidence file it left (None: none; a script's stdout stands in).
        timeout: Its time limit, in seconds.
        network_signs: The lines that say it reached for a network.
    """
    code = result.exit_code
    output = (stdout + stderr).decode("utf-8", "replace")
    if stopped == "timeout":
        result.problem = f"the collection did not finish within {timeout:g} s and was stopped"
        return result
    if stopped == "output":
        result.problem = (
            f"the collection printed more than {MAX_OUTPUT_BYTES // 1024} KiB and was stopped"
        )
        return result
    writes = [line for line in output.splitlines() if any(s in line for s in WRITE_SIGNS)]
    if writes:
        result.problem = (
            "the collection tried to write to the environment, which the sandbox does not "
            f"allow: {writes[0].strip()[:300]}"
        )
        return result
    network = [line for line in output.splitlines() if any(s in line for s in network_signs)]
    if network:
        result.problem = (
            "the collection tried to reach the network, which the sandbox does not have: "
            f"{network[0].strip()[:300]}"
        )
        return result
    if code != 0:
        if code in (153, -25) or "File size limit exceeded" in output:
            result.problem = f"the collection wrote a file beyond {MAX_FILE_KB // 1024} MiB"
        else:
            result.problem = f"the collection failed with exit status {code}"
        return result
    if raw is None:
        raw = stdout if collection.kind == CollectionKind.SCRIPT else b""
        if not raw.strip():
            result.problem = (
                "the collection left no evidence: write one JSON document to "
                "$ITBENCH_EVIDENCE (a script may print it on stdout)"
            )
            return result
    if len(raw) > MAX_EVIDENCE_BYTES:
        result.problem = f"the evidence is larger than {MAX_EVIDENCE_BYTES // (1024 * 1024)} MiB"
        return result
    result.evidence_bytes = len(raw)
    try:
        result.evidence = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        result.problem = f"the evidence is not one JSON document: {exc}"[:300]
        return result
    result.ok = True
    return result


def _read(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes, str]:
    """Read a process's output within a time and size budget; stop it when either runs out."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout
    stopped = ""
    open_fds = {out_fd, err_fd}
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped = "timeout"
            break
        ready, _, _ = select.select(list(open_fds), [], [], min(remaining, 1.0))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                continue
            buffers[fd].extend(chunk)
        if len(buffers[out_fd]) + len(buffers[err_fd]) > MAX_OUTPUT_BYTES:
            stopped = "output"
            break
    if stopped:
        _kill(proc)
    else:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            stopped = "timeout"
            _kill(proc)
    proc.stdout.close()
    proc.stderr.close()
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), stopped


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)
    proc.wait()
