"""The twin's kubelet: runs one scheduled pod's containers over an interval.

Volumes mount (or the pod waits in ContainerCreating), init containers run one after another
(waiting for a dependency, copying a ConfigMap into an emptyDir, sleeping, or failing and backing
off), then the application container and its sidecars start, crash on OOM, a missing binary or a
foreign CPU architecture, back off, and become ready when their readiness probe passes. What the
programs do comes from the image registry and the shop's data.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from itbench.core.shop import SERVICE_BY_NAME, ServiceSpec
from itbench.environments.sim.objects import (
    NODE_ARCHITECTURE,
    Obj,
    parse_cpu,
    parse_memory,
    resolve_env,
)
from itbench.environments.sim.registry import image_platforms, image_program

if TYPE_CHECKING:
    from itbench.environments.sim.cluster import Cluster

MiB = 2**20
STARTUP_SECONDS = 5.0
"""Seconds from container start until the application listens and passes readiness."""
CRASH_AFTER_SECONDS = 2.0
"""Seconds a container runs before a start-up crash (OOM at start, a missing dependency)."""
MAX_BACKOFF_SECONDS = 300.0
CONFIG_VOLUME = "config-rw"
"""flagd's emptyDir: its init container copies the ConfigMap's flags there at pod start, and the
flagd UI (a sidecar) edits them there."""
INIT_SECONDS = 1.0
"""Seconds a short init step (a copy, a check) takes."""

KNOWN_COMMANDS: dict[str, frozenset[str]] = {
    "valkey-cart": frozenset({"valkey-server", "/usr/local/bin/valkey-server"}),
    "flagd": frozenset({"/flagd-build"}),
    "postgresql": frozenset({"postgres", "docker-entrypoint.sh"}),
    "opentelemetry-collector": frozenset({"/otelcol-contrib"}),
}
"""Executables a program's image ships besides its entrypoint (`command` must name one, or a
shell); anything else fails to start (`executable file not found in $PATH`)."""
_SHELLS = frozenset({"sh", "/bin/sh", "bash", "/bin/bash"})
_NC_WAIT = re.compile(r"until nc -z(?: -v)?(?: -w\s*\d+)? (\S+) (\d+);")
_COPY = re.compile(r"^cp (\S+) (\S+)")
_JSON_LOAD = re.compile(r"json\.load\(open\(['\"]([^'\"]+)['\"]\)\)")


@dataclass
class SidecarRuntime:
    """What the kubelet knows about a sidecar container."""

    image: str = ""
    state: str = "waiting"
    reason: str = "PodInitializing"
    started_at: float = 0.0
    restarts: int = 0
    ready: bool = False


_NOT_STARTED = SidecarRuntime()
"""What a sidecar the kubelet has not run yet reads as (never modified)."""


@dataclass
class ContainerRuntime:
    """What the kubelet knows about a pod: its init sequence, application container, sidecars
    and the files its init containers wrote into emptyDir volumes."""

    state: str = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    image: str = ""
    started_at: float = 0.0
    next_start: float = 0.0
    restarts: int = 0
    last_reason: str = ""
    last_exit_code: int = 0
    last_finished_at: float = 0.0
    pulled: bool = False
    ready: bool = False
    cpu_seconds: float = 0.0
    cfs_periods: float = 0.0
    cfs_throttled: float = 0.0
    working_set: float = 0.0
    leaked: float = 0.0
    container_ids: list[tuple[int, float, float]] = field(default_factory=list)
    """(id, started, ended) of each run of the application container (ended 0: running)."""
    init_done: bool = False
    init_index: int = 0
    init_state: str = "waiting"
    init_reason: str = "PodInitializing"
    init_message: str = ""
    init_started: float = 0.0
    init_next: float = 0.0
    init_restarts: int = 0
    init_exit_code: int = 0
    init_log: list[str] = field(default_factory=list)
    init_pulled: set[str] = field(default_factory=set)
    files: dict[tuple[str, str], str] = field(default_factory=dict)
    """emptyDir contents: (volume, file name) -> text (flagd serves its copy of the flags)."""
    sidecars: dict[str, SidecarRuntime] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """The application container's environment, resolved when it started."""
    crash_log: str = ""
    """What the application container printed before its last crash."""


@dataclass
class PodDemand:
    """Resource demand of one pod, reported by the traffic model for the last interval."""

    cpu_cores: float = 0.0
    leak_bytes_per_second: float = 0.0
    extra_memory_bytes: float = 0.0

    def __init__(
        self,
        cpu_cores: float = 0.0,
        leak_bytes_per_second: float = 0.0,
        extra_memory_bytes: float = 0.0,
    ) -> None:
        """A pod's demand (written out: see "Compiled build" in docs/architecture.md)."""
        self.cpu_cores = cpu_cores
        self.leak_bytes_per_second = leak_bytes_per_second
        self.extra_memory_bytes = extra_memory_bytes


IDLE = PodDemand()
"""The demand of a pod that served nothing (shared: never modified)."""


def main_container_of(pod: Obj) -> Obj:
    """The pod's application container: the first one (the chart lists it first)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    first = containers[0] if containers else {}
    return first if isinstance(first, dict) else {}


def program_of(container: Obj) -> ServiceSpec | None:
    """The shop program a container's image runs (None: another program, or none)."""
    name = image_program(str(container.get("image", "")))
    return SERVICE_BY_NAME.get(name or "")


def listening_ports(image: str) -> set[int]:
    """Ports the program in an image listens on (none on a foreign architecture)."""
    program = SERVICE_BY_NAME.get(image_program(image) or "")
    if program is None or NODE_ARCHITECTURE not in (image_platforms(image) or frozenset()):
        return set()
    return program.listens()


def memory_limit(container: Obj) -> float | None:
    """The container's memory limit in bytes (None: unlimited or unparsable)."""
    raw = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    try:
        return parse_memory(raw) if raw is not None else None
    except ValueError:
        return None


def cpu_limit(container: Obj) -> float | None:
    """The container's CPU limit in cores (None: unlimited or unparsable)."""
    raw = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
    try:
        return parse_cpu(raw) if raw is not None else None
    except ValueError:
        return None


def probe_port(container: Obj) -> int | None:
    """The port a readiness probe checks (-1 for a named port the container lacks)."""
    probe = container.get("readinessProbe") or {}
    for handler in ("tcpSocket", "httpGet", "grpc"):
        if handler in probe:
            port = (probe[handler] or {}).get("port")
            if isinstance(port, int):
                return port
            for p in container.get("ports") or []:
                if p.get("name") == port:
                    return int(p.get("containerPort", 0))
            return -1
    return None


def _backoff(restarts: int) -> float:
    return float(min(10.0 * 2 ** (restarts - 1), MAX_BACKOFF_SECONDS))


class Kubelet:
    """Runs pods on the twin's node; one instance per cluster."""

    def __init__(self, cluster: Cluster) -> None:
        """Bind to the cluster whose objects the pods read (ConfigMaps, Secrets, Services)."""
        self.cluster = cluster
        self._container_serial = 0

    # ---- one pod ----------------------------------------------------------------------------
    def run(self, pod: Obj, rt: ContainerRuntime, demand: PodDemand, dt: float) -> None:
        """Advance a scheduled pod's containers over the interval that just ended."""
        c = self.cluster
        spec = pod["spec"]
        container = main_container_of(pod)
        cname = str(container.get("name", ""))
        start = c.now - dt
        problem = self._volume_problem(spec)
        if problem is not None:
            rt.ready = False
            rt.state, rt.reason, rt.message = "waiting", "ContainerCreating", ""
            c.event(pod, "FailedMount", problem, "Warning")
            self.status(pod, rt)
            return
        t = start
        if not rt.init_done:
            finished = self._init(pod, rt, start)
            if finished is None:
                rt.ready = False
                self.status(pod, rt)
                return
            t = max(t, finished)
            rt.next_start = max(rt.next_start, t)
        image = str(container.get("image", ""))
        if rt.state == "running" and image != rt.image:
            # The pod's image changed in place (Chaos Mesh pod-failure does this): restart.
            self._stop(rt, t, "Error", 137)
            rt.state, rt.reason, rt.pulled = "waiting", "ContainerCreating", False
            rt.next_start = t
            c.event(pod, "Killing", f"Container {cname} definition changed, will be restarted")
        if not rt.pulled:
            if not self._pull(pod, rt, image):
                self.status(pod, rt)
                return
            rt.next_start = max(rt.next_start, t)
        config_error = self._config_error(container)
        if config_error is not None:
            rt.ready = False
            rt.state, rt.reason, rt.message = "waiting", "CreateContainerConfigError", config_error
            c.event(pod, "Failed", f"Error: {config_error}", "Warning")
            self.status(pod, rt)
            return
        self._run_main(pod, rt, container, demand, t, dt)
        self._sidecars(pod, rt, t)
        self.status(pod, rt)

    def _stop(self, rt: ContainerRuntime, t: float, reason: str, code: int) -> None:
        rt.restarts += 1
        rt.last_reason, rt.last_exit_code, rt.last_finished_at = reason, code, t
        rt.ready = False
        rt.leaked = 0.0
        if rt.container_ids and rt.container_ids[-1][2] == 0.0:
            cid, began, _ = rt.container_ids[-1]
            rt.container_ids[-1] = (cid, began, t)

    def _pull(self, pod: Obj, rt: ContainerRuntime, image: str) -> bool:
        c = self.cluster
        c.event(pod, "Pulling", f'Pulling image "{image}"')
        if image_platforms(image) is None:
            first = rt.reason not in ("ErrImagePull", "ImagePullBackOff")
            rt.state, rt.ready = "waiting", False
            rt.reason = "ErrImagePull" if first else "ImagePullBackOff"
            rt.message = (
                f'failed to pull and unpack image "{image}": failed to resolve reference '
                f'"{image}": {image}: not found'
            )
            c.event(pod, "Failed", f'Failed to pull image "{image}": {rt.message}', "Warning")
            if not first:
                c.event(pod, "BackOff", f'Back-off pulling image "{image}"', "Normal")
            return False
        rt.pulled = True
        c.event(pod, "Pulled", f'Successfully pulled image "{image}"')
        return True

    # ---- volumes and configuration ----------------------------------------------------------
    def _volume_problem(self, spec: Obj) -> str | None:
        c = self.cluster
        for volume in spec.get("volumes") or []:
            for source, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
                ref = volume.get(source)
                if not isinstance(ref, dict) or ref.get("optional"):
                    continue
                obj_name = str(ref.get("name") or ref.get("secretName") or "")
                obj = c.get(kind, obj_name)
                vol = volume.get("name")
                if obj is None:
                    return (
                        f'MountVolume.SetUp failed for volume "{vol}" : {kind.lower()} '
                        f'"{obj_name}" not found'
                    )
                data = {**(obj.get("data") or {}), **(obj.get("stringData") or {})}
                for item in ref.get("items") or []:
                    if item.get("key") not in data:
                        return (
                            f'MountVolume.SetUp failed for volume "{vol}" : configmap references '
                            f"non-existent config key: {item.get('key')}"
                        )
        return None

    def _config_error(self, container: Obj) -> str | None:
        c = self.cluster
        for item in container.get("env") or []:
            source = item.get("valueFrom") if item else None
            if not source:
                continue  # a plain value: most variables, skipped without building anything
            for key_ref, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                ref = source.get(key_ref)
                if not isinstance(ref, dict) or ref.get("optional"):
                    continue
                obj = c.get(kind, str(ref.get("name", "")))
                if obj is None:
                    return f'{kind.lower()} "{ref.get("name")}" not found'
                key = ref.get("key")
                if key not in (obj.get("data") or {}) and key not in (obj.get("stringData") or {}):
                    return (
                        f"couldn't find key {ref.get('key')} in {kind} "
                        f"{c.namespace}/{ref.get('name')}"
                    )
        return None

    def mounted_file(self, spec: Obj, container: Obj, path: str) -> str | None:
        """The text at a path inside a container, from its ConfigMap/Secret mounts."""
        c = self.cluster
        volumes = {str(v.get("name")): v for v in spec.get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            root = str(mount.get("mountPath", "")).rstrip("/")
            if not path.startswith(root + "/"):
                continue
            rel = path[len(root) + 1 :]
            volume = volumes.get(str(mount.get("name")), {})
            for source, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
                ref = volume.get(source)
                if not isinstance(ref, dict):
                    continue
                obj = c.get(kind, str(ref.get("name") or ref.get("secretName") or "")) or {}
                data = dict(obj.get("data") or {})
                items = {str(i.get("path")): str(i.get("key")) for i in ref.get("items") or []}
                key = items.get(rel, rel if not items else "")
                if key in data:
                    return str(data[key])
        return None

    # ---- init containers --------------------------------------------------------------------
    def _init(self, pod: Obj, rt: ContainerRuntime, start: float) -> float | None:
        """Run the init sequence; the time it finished, or None while it has not."""
        c = self.cluster
        inits = pod["spec"].get("initContainers") or []
        t = start
        for _ in range(64):
            if rt.init_index >= len(inits):
                rt.init_done = True
                return t
            container = inits[rt.init_index]
            cname = str(container.get("name", ""))
            image = str(container.get("image", ""))
            if image not in rt.init_pulled:
                platforms = image_platforms(image)
                if platforms is None:
                    first = rt.init_reason not in ("ErrImagePull", "ImagePullBackOff")
                    rt.init_state = "waiting"
                    rt.init_reason = "ErrImagePull" if first else "ImagePullBackOff"
                    rt.init_message = f'failed to pull and unpack image "{image}": not found'
                    c.event(pod, "Failed", f'Failed to pull image "{image}"', "Warning")
                    return None
                rt.init_pulled.add(image)
            if rt.init_state != "running":
                if rt.init_next > c.now:
                    return None
                t = max(t, rt.init_next)
                rt.init_state, rt.init_reason, rt.init_message = "running", "", ""
                rt.init_started = t
                if rt.init_restarts == 0:
                    c.event(pod, "Started", f"Started container {cname}")
            outcome, code, message = self._init_outcome(pod, container)
            if outcome == "wait":
                return None
            end = rt.init_started + INIT_SECONDS
            if end > c.now:
                return None
            if outcome == "fail":
                rt.init_restarts += 1
                rt.init_state, rt.init_reason = "waiting", "CrashLoopBackOff"
                rt.init_exit_code = code
                rt.init_message = (
                    f"back-off {int(_backoff(rt.init_restarts))}s restarting failed "
                    f"container={cname} pod={pod['metadata']['name']}"
                )
                rt.init_log = [message]
                rt.init_next = end + _backoff(rt.init_restarts)
                c.event(
                    pod,
                    "BackOff",
                    f"Back-off restarting failed container {cname} in pod "
                    f"{pod['metadata']['name']}_{c.namespace}({pod['metadata']['uid']})",
                    "Warning",
                )
                return None
            rt.init_state = "terminated"
            rt.init_index += 1
            rt.init_restarts = 0
            t = end
        return None

    def _init_outcome(self, pod: Obj, container: Obj) -> tuple[str, int, str]:
        """(done | wait | fail, exit code, log line) of an init container's command."""
        command = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        script = command[-1] if command and command[0] in _SHELLS | {"-c"} else " ".join(command)
        if len(command) >= 3 and command[0] in _SHELLS and command[1] == "-c":
            script = command[2]
        if NODE_ARCHITECTURE not in (image_platforms(str(container.get("image", ""))) or set()):
            return "fail", 1, "exec /bin/sh: exec format error"
        wait = _NC_WAIT.search(script)
        if wait:
            host, port = wait.group(1), int(wait.group(2))
            if self.cluster.tcp_reachable(host, port):
                return "done", 0, ""
            return "wait", 0, f"waiting for {host}"
        if re.search(r"\bsleep (infinity|inf)\b", script):
            return "wait", 0, ""
        copy = _COPY.search(script)
        if copy:
            src, dst = copy.group(1), copy.group(2)
            text = self.mounted_file(pod["spec"], container, src)
            if text is None:
                return "fail", 1, f"cp: can't stat '{src}': No such file or directory"
            self._write_empty_dir(pod, container, dst, text)
            return "done", 0, ""
        load = _JSON_LOAD.search(script)
        if load:
            path = load.group(1)
            text = self.mounted_file(pod["spec"], container, path)
            if text is None:
                return (
                    "fail",
                    1,
                    f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'",
                )
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                return "fail", 1, f"json.decoder.JSONDecodeError: {exc}"
            return "done", 0, ""
        exit_code = re.search(r"\bexit (\d+)\b", script)
        if exit_code and int(exit_code.group(1)) != 0:
            return "fail", int(exit_code.group(1)), ""
        return "done", 0, ""

    def _write_empty_dir(self, pod: Obj, container: Obj, path: str, text: str) -> None:
        volumes = {str(v.get("name")): v for v in pod["spec"].get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            root = str(mount.get("mountPath", "")).rstrip("/")
            volume = volumes.get(str(mount.get("name")), {})
            if path.startswith(root + "/") and "emptyDir" in volume:
                rt = self.cluster.runtime[pod["metadata"]["name"]]
                rt.files[(str(mount.get("name")), path[len(root) + 1 :])] = text

    # ---- the application container ----------------------------------------------------------
    def _start_failure(self, container: Obj, program: ServiceSpec | None) -> tuple[str, int] | None:
        command = [str(a) for a in container.get("command") or []]
        if not command or command[0] in _SHELLS:
            return None
        known = KNOWN_COMMANDS.get(program.name if program else "", frozenset())
        if command[0] in known:
            return None
        return (
            "failed to create containerd task: failed to create shim task: OCI runtime create "
            "failed: runc create failed: unable to start container process: error during "
            f'container init: exec: "{command[0]}": executable file not found in $PATH',
            128,
        )

    def _run_main(
        self, pod: Obj, rt: ContainerRuntime, container: Obj, demand: PodDemand, t: float, dt: float
    ) -> None:
        c = self.cluster
        cname = str(container.get("name", ""))
        image = str(container.get("image", ""))
        program = program_of(container)
        limit = memory_limit(container)
        limit_cpu = cpu_limit(container)
        base = float(program.working_set_mi * MiB) if program else 4.0 * MiB
        arch_ok = NODE_ARCHITECTURE in (image_platforms(image) or frozenset())
        start_failure = self._start_failure(container, program)
        for _ in range(64):
            if rt.state == "waiting":
                if rt.next_start > c.now:
                    break
                t = max(t, rt.next_start)
                if start_failure is not None:
                    message, code = start_failure
                    self._crash(pod, rt, cname, t, "StartError", code, message)
                    continue
                rt.state, rt.reason, rt.message = "running", "", ""
                rt.started_at = t
                rt.image = image
                rt.env = resolve_env(container, c.lookup)
                rt.working_set = base
                rt.leaked = 0.0
                self._container_serial += 1
                rt.container_ids.append((self._container_serial, t, 0.0))
                if rt.restarts == 0 and rt.last_reason == "":
                    c.event(pod, "Created", f"Created container {cname}")
                    c.event(pod, "Started", f"Started container {cname}")
            if rt.state != "running":
                break
            dependency = self._startup_dependency(
                container, program, rt.started_at + CRASH_AFTER_SECONDS
            )
            crash_at, reason, code = self._crash_time(
                rt, t, base, limit, demand, arch_ok, dependency
            )
            if crash_at is None or crash_at > c.now:
                break
            if not arch_ok:
                rt.crash_log = f"exec /app/{cname}: exec format error"
            elif not dependency:
                rt.crash_log = (
                    "Error initializing database: failed to ping database: dial tcp: connect: "
                    "connection refused"
                )
            else:
                rt.crash_log = ""
            self._crash(pod, rt, cname, crash_at, reason, code, "")
            t = crash_at
        if rt.state == "running":
            up = c.now - rt.started_at
            rt.leaked += demand.leak_bytes_per_second * (c.now - t)
            rt.working_set = min(base + demand.extra_memory_bytes + rt.leaked, limit or math.inf)
            ran = min(dt, up)
            used = demand.cpu_cores if limit_cpu is None else min(demand.cpu_cores, limit_cpu)
            rt.cpu_seconds += used * ran
            if limit_cpu is not None and limit_cpu > 0:
                periods = ran / 0.1
                rt.cfs_periods += periods
                rt.cfs_throttled += periods * throttled_share(demand.cpu_cores / limit_cpu)
            probe_ok = self._probe_ok(container, image)
            rt.ready = probe_ok and up >= STARTUP_SECONDS
            if not probe_ok and up >= STARTUP_SECONDS:
                port = probe_port(container)
                c.event(
                    pod,
                    "Unhealthy",
                    f"Readiness probe failed: dial tcp {pod['status'].get('podIP')}:{port}: "
                    "connect: connection refused",
                    "Warning",
                )

    def _crash(
        self,
        pod: Obj,
        rt: ContainerRuntime,
        cname: str,
        at: float,
        reason: str,
        code: int,
        why: str,
    ) -> None:
        c = self.cluster
        name = pod["metadata"]["name"]
        self._stop(rt, at, reason, code)
        backoff = _backoff(rt.restarts)
        rt.state, rt.reason = "waiting", "CrashLoopBackOff"
        rt.message = (
            f"back-off {int(backoff)}s restarting failed container={cname} pod={name}"
            f"_{c.namespace}({pod['metadata']['uid']})"
        )
        rt.next_start = at + backoff
        if reason == "OOMKilled":
            c.event(
                pod,
                "OOMKilling",
                f"Memory cgroup out of memory: Killed process (container {cname})",
                "Warning",
            )
        if why:
            c.event(pod, "Failed", f"Error: {why}", "Warning")
        c.event(
            pod,
            "BackOff",
            f"Back-off restarting failed container {cname} in pod {name}_{c.namespace}"
            f"({pod['metadata']['uid']})",
            "Warning",
        )

    def _startup_dependency(self, container: Obj, program: ServiceSpec | None, at: float) -> bool:
        """Whether a dependency the program needs at start answers at a time (True: none)."""
        if program is None or program.startup_dependency is None:
            return True
        var, protocol = program.startup_dependency
        env = resolve_env(container, self.cluster.lookup)
        return self.cluster.address_reachable(env, var, protocol, at)

    def _crash_time(
        self,
        rt: ContainerRuntime,
        t: float,
        base: float,
        limit: float | None,
        demand: PodDemand,
        arch_ok: bool,
        dependency_ok: bool,
    ) -> tuple[float | None, str, int]:
        if not arch_ok:
            return max(rt.started_at + 0.5, t), "Error", 1
        if not dependency_ok:
            return max(rt.started_at + CRASH_AFTER_SECONDS, t), "Error", 1
        need = base + demand.extra_memory_bytes
        if limit is not None and need > limit:
            return max(rt.started_at + CRASH_AFTER_SECONDS, t), "OOMKilled", 137
        if limit is not None and demand.leak_bytes_per_second > 0:
            room = max(limit - need - rt.leaked, 0.0)
            return t + room / demand.leak_bytes_per_second, "OOMKilled", 137
        return None, "", 0

    def _probe_ok(self, container: Obj, image: str) -> bool:
        probe = container.get("readinessProbe")
        if not probe:
            return True
        port = probe_port(container)
        if port is None:
            return "exec" in probe
        return port in listening_ports(image)

    def _sidecars(self, pod: Obj, rt: ContainerRuntime, t: float) -> None:
        c = self.cluster
        for container in (pod["spec"].get("containers") or [])[1:]:
            cname = str(container.get("name", ""))
            side = rt.sidecars.get(cname)
            if side is None:
                side = rt.sidecars[cname] = SidecarRuntime()
            image = str(container.get("image", ""))
            if side.state == "running" and side.image != image:
                side.restarts += 1
                side.state = "waiting"
            if side.state != "running":
                if image_platforms(image) is None:
                    side.reason, side.ready = "ErrImagePull", False
                    continue
                side.state, side.reason, side.image = "running", "", image
                side.started_at = max(t, rt.started_at)
                c.event(pod, "Started", f"Started container {cname}")
            side.ready = (
                NODE_ARCHITECTURE in (image_platforms(image) or frozenset())
                and c.now - side.started_at >= STARTUP_SECONDS
            )

    # ---- status -----------------------------------------------------------------------------
    def status(self, pod: Obj, rt: ContainerRuntime) -> None:
        """Write the pod's status from the runtime (phase, container statuses, conditions)."""
        c = self.cluster
        status = pod["status"]
        container = main_container_of(pod)
        cname = str(container.get("name", ""))
        image = str(container.get("image", ""))
        started = rt.restarts > 0 or rt.state == "running"
        status["phase"] = "Running" if started else "Pending"
        state: Obj
        if rt.state == "running":
            state = {"running": {"startedAt": c.timestamp(rt.started_at)}}
        elif not rt.init_done:
            state = {"waiting": {"reason": "PodInitializing"}}
        else:
            state = {"waiting": {"reason": rt.reason, "message": rt.message}}
        cs: Obj = {
            "name": cname,
            "image": image,
            "ready": rt.ready,
            "started": rt.state == "running",
            "restartCount": rt.restarts,
            "state": state,
        }
        if rt.last_reason:
            cs["lastState"] = {
                "terminated": {
                    "reason": rt.last_reason,
                    "exitCode": rt.last_exit_code,
                    "finishedAt": c.timestamp(rt.last_finished_at),
                }
            }
        statuses = [cs]
        for side_container in (pod["spec"].get("containers") or [])[1:]:
            side = rt.sidecars.get(str(side_container.get("name"))) or _NOT_STARTED
            side_state: Obj = (
                {"running": {"startedAt": c.timestamp(side.started_at)}}
                if side.state == "running"
                else {"waiting": {"reason": side.reason}}
            )
            statuses.append(
                {
                    "name": side_container.get("name"),
                    "image": side_container.get("image"),
                    "ready": side.ready,
                    "started": side.state == "running",
                    "restartCount": side.restarts,
                    "state": side_state,
                }
            )
        status["containerStatuses"] = statuses
        inits = pod["spec"].get("initContainers") or []
        if inits:
            init_statuses = []
            for n, init in enumerate(inits):
                init_state: Obj
                if n < rt.init_index or rt.init_done:
                    init_state = {"terminated": {"reason": "Completed", "exitCode": 0}}
                elif n == rt.init_index and rt.init_state == "running":
                    init_state = {"running": {"startedAt": c.timestamp(rt.init_started)}}
                elif n == rt.init_index:
                    init_state = {"waiting": {"reason": rt.init_reason, "message": rt.init_message}}
                else:
                    init_state = {"waiting": {"reason": "PodInitializing"}}
                entry: Obj = {
                    "name": init.get("name"),
                    "image": init.get("image"),
                    "ready": n < rt.init_index or rt.init_done,
                    "restartCount": rt.init_restarts if n == rt.init_index else 0,
                    "state": init_state,
                }
                if n == rt.init_index and rt.init_exit_code and not rt.init_done:
                    entry["lastState"] = {
                        "terminated": {"reason": "Error", "exitCode": rt.init_exit_code}
                    }
                init_statuses.append(entry)
            status["initContainerStatuses"] = init_statuses
        ready = rt.ready and all(s["ready"] for s in statuses)
        flag = "True" if ready else "False"
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True" if rt.init_done else "False"},
            {"type": "ContainersReady", "status": flag},
            {"type": "Ready", "status": flag},
        ]
        status["hostIP"] = "172.18.0.2"

    def pod_ready(self, rt: ContainerRuntime, pod: Obj) -> bool:
        """Whether every container of the pod is ready."""
        if not rt.ready:
            return False
        sidecars = rt.sidecars
        for s in (pod["spec"].get("containers") or [])[1:]:
            side = sidecars.get(str(s.get("name")))
            if side is None or not side.ready:
                return False
        return True


def throttled_share(utilization: float) -> float:
    """Share of CFS periods that hit the quota at a demand/limit ratio (bursty traffic)."""
    return max(0.0, min(1.0, (utilization - 0.5) * 2.0))
