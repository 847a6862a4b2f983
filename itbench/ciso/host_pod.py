"""The RHEL9 host on a cluster: an agent's evidence collection run in a short-lived Pod on a UBI 9
userland (real bash, Python 3 and Ansible; the host's modelled files mounted at their paths and
its commands answered by the shims), which can change nothing and reach no network.

`evidence_manifests` builds the objects (a ConfigMap, a deny-all NetworkPolicy, the Pod) and
`run_on_cluster` creates them, waits for the Pod, reads what it printed from its log and removes
them, answering the evidence sandbox's `CollectionResult` (the runner and the reading of its
output are `itbench.ciso.evidence_run`).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from itbench.ciso import sandbox
from itbench.ciso.cluster import COUNTERPART_PREFIX, ClusterError, RefusedError, Rest, _path
from itbench.ciso.evidence_run import RUN_SCRIPT, judge, log_limit_bytes, marker, parse_log
from itbench.core.ciso import host as host_model
from itbench.core.models.compliance import CollectionKind, EvidenceCollection
from itbench.core.models.scenario import Scenario

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_IMAGE = "ghcr.io/itbench/rhel9-host:9.6"
"""The evidence pod's image (deploy/rhel9-host/Dockerfile) unless configured otherwise."""
CONTAINER = "collect"
TWIN_DIR = sandbox.TWIN_DIR
WORKDIR = sandbox.WORKDIR
RUNNER = f"{TWIN_DIR}/run.sh"
PYTHON = "/usr/bin/python3"
STARTUP_SECONDS = 120.0
"""How long the Pod may take to be scheduled and started (its image pulled) on top of the
collection's own time limit."""
GRACE_SECONDS = 30
"""What the Pod's activeDeadlineSeconds adds to the collection's time limit (the runner stops
the collection itself; the deadline stops a Pod whose runner could not)."""
POLL_SECONDS = 1.0
EVIDENCE_LABEL = "itbench.io/evidence"
START_FAILURES = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Waiting reasons of a container that will not start without someone's help."""


def _key(path: str) -> str:
    """A ConfigMap key for a file path (keys allow letters, digits, '-', '_' and '.')."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", path.strip("/"))


def _files(
    collection: EvidenceCollection,
    host_state: host_model.HostState,
    namespace: str,
    objects: list[Obj],
) -> dict[str, tuple[str, str, int]]:
    """Every file the Pod sees from the ConfigMap: path -> (key, text, mode)."""
    out: dict[str, tuple[str, str, int]] = {}

    def add(path: str, text: str, mode: int) -> None:
        key = _key(path)
        if any(k == key for k, _t, _m in out.values()):
            raise ValueError(f"host file {path}: its ConfigMap key {key} is taken")
        out[path] = (key, text, mode)

    for path, f in sorted(host_model.render_files(host_state).items()):
        add(path, f.content, int(f.mode, 8))
    hostname = str(host_state.get("hostname", host_model.HOSTNAME))
    add("/etc/hosts", f"127.0.0.1 localhost {hostname}\n", 0o644)
    add("/etc/resolv.conf", "", 0o644)
    here = Path(__file__).resolve().parent
    add(f"{TWIN_DIR}/shim.py", (here / "shim.py").read_text(encoding="utf-8"), 0o444)
    add(
        f"{TWIN_DIR}/host_model.py",
        Path(host_model.__file__).resolve().read_text(encoding="utf-8"),
        0o444,
    )
    state = {"namespace": namespace, "objects": objects, "host": host_state}
    add(f"{TWIN_DIR}/state.json", json.dumps(state), 0o444)
    add(RUNNER, RUN_SCRIPT, 0o555)
    add(f"{TWIN_DIR}/{_collection_name(collection)}", collection.content, 0o444)
    for directory, names in sandbox.HOST_BINARIES.items():
        for name in names:
            add(
                f"/usr/{directory}/{name}",
                f'#!/bin/sh\nexec {PYTHON} -I -S {TWIN_DIR}/shim.py {name} "$@"\n',
                0o555,
            )
    return out


def _collection_name(collection: EvidenceCollection) -> str:
    return "collect.sh" if collection.kind == CollectionKind.SCRIPT else "collect.yml"


def _argv(collection: EvidenceCollection) -> list[str]:
    name = f"{WORKDIR}/{_collection_name(collection)}"
    if collection.kind == CollectionKind.SCRIPT:
        return ["/bin/bash", name]
    return ["ansible-playbook", "-i", "localhost,", "-c", "local", name]


def _env(collection: EvidenceCollection) -> list[Obj]:
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "ITBENCH_EVIDENCE": sandbox.EVIDENCE,
        "WORKDIR": WORKDIR,
        "COLLECTION_SOURCE": f"{TWIN_DIR}/{_collection_name(collection)}",
        "COLLECTION_NAME": _collection_name(collection),
        "CPU": str(sandbox.CPU_SECONDS),
        "FSIZE": str(sandbox.MAX_FILE_KB),
        "MEM": str(sandbox.MEMORY_KB),
        "MAXOUT": str(sandbox.MAX_OUTPUT_BYTES),
        "MAXEV": str(sandbox.MAX_EVIDENCE_BYTES),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if collection.kind == CollectionKind.PLAYBOOK:
        env.update(
            {
                "ANSIBLE_HOME": "/tmp/ansible",
                "ANSIBLE_LOCAL_TEMP": "/tmp/ansible/tmp",
                "ANSIBLE_REMOTE_TMP": "/tmp/ansible/remote",
                "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_RETRY_FILES_ENABLED": "0",
                "ANSIBLE_HOST_KEY_CHECKING": "0",
                "ANSIBLE_DEPRECATION_WARNINGS": "0",
                "ANSIBLE_SYSTEM_WARNINGS": "0",
                "ANSIBLE_LOCALHOST_WARNING": "0",
                "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
                "ANSIBLE_GATHER_TIMEOUT": "10",
            }
        )
    return [{"name": k, "value": v} for k, v in env.items()]


def namespace_manifest(name: str) -> Obj:
    """The evaluation namespace evidence Pods run in: Pod Security `baseline` enforced, so no
    Pod there may be privileged or use the node's namespaces or paths."""
    if not name.startswith(COUNTERPART_PREFIX):
        raise ValueError(f"namespace {name}: evidence runs only in {COUNTERPART_PREFIX} namespaces")
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/metadata.name": name,
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/warn": "baseline",
            },
        },
    }


def evidence_manifests(
    collection: EvidenceCollection,
    host_state: host_model.HostState,
    *,
    namespace: str,
    name: str,
    token: str,
    image: str = DEFAULT_IMAGE,
    timeout_seconds: float = sandbox.TIMEOUT_SECONDS,
    scenario_namespace: str = "default",
    objects: list[Obj] | None = None,
) -> list[Obj]:
    """The objects of one evidence run, in creation order: the ConfigMap of its files, the
    NetworkPolicy denying the Pod all traffic, and the Pod.

    Args:
        collection: The agent's script or playbook.
        host_state: The modelled host's state (files and command answers).
        namespace: Where the objects live (an `itbench-ciso-` namespace).
        name: Their name (starts with `itbench-ciso-`).
        token: Makes the runner's marker unique.
        image: The UBI 9 image with bash, Python 3 and ansible-core.
        timeout_seconds: The collection's wall-clock limit.
        scenario_namespace: The namespace `kubectl` in the Pod answers for.
        objects: The objects `kubectl` in the Pod answers with.

    Raises:
        ValueError: A name outside the platform's prefix, or an empty image.
    """
    for what, value in (("namespace", namespace), ("name", name)):
        if not value.startswith(COUNTERPART_PREFIX):
            raise ValueError(f"evidence {what} {value!r}: it must start with {COUNTERPART_PREFIX}")
    if not image.strip():
        raise ValueError("evidence image: give an image reference (e.g. the default)")
    files = _files(collection, host_state, scenario_namespace, list(objects or []))
    limit = max(1, int(timeout_seconds))
    labels = {"app.kubernetes.io/name": "itbench-ciso-evidence", EVIDENCE_LABEL: name}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "immutable": True,
        "data": {key: text for key, text, _mode in files.values()},
    }
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "podSelector": {"matchLabels": {EVIDENCE_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }
    mounts = [
        {"name": "host", "mountPath": path, "subPath": key, "readOnly": True}
        for path, (key, _text, _mode) in sorted(files.items())
    ]
    mounts += [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "work", "mountPath": WORKDIR},
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": limit + GRACE_SECONDS,
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "hostname": str(host_state.get("hostname", host_model.HOSTNAME)),
            "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["127.0.0.1"]},
            "securityContext": {
                "runAsUser": 0,
                "runAsGroup": 0,
                "runAsNonRoot": False,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/bash", RUNNER, marker(token), str(limit), *_argv(collection)],
                    "workingDir": WORKDIR,
                    "env": _env(collection),
                    "securityContext": {
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        # Root reads the host's root-only files (/etc/shadow is mode 0000) only
                        # with DAC_OVERRIDE or DAC_READ_SEARCH; Pod Security `baseline` allows
                        # the first. Every write it could allow meets a read-only mount.
                        "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]},
                    },
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "256Mi"},
                    },
                    "volumeMounts": mounts,
                }
            ],
            "volumes": [
                {
                    "name": "host",
                    "configMap": {
                        "name": name,
                        "defaultMode": 0o444,
                        "items": [
                            {"key": key, "path": key, "mode": mode}
                            for key, _text, mode in sorted(files.values())
                        ],
                    },
                },
                {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                {"name": "work", "emptyDir": {"sizeLimit": "32Mi"}},
            ],
        },
    }
    return [config_map, policy, pod]


# ---- running on the cluster -------------------------------------------------------------------

LogReader = Callable[[Rest, str, str, int], bytes]
"""Reads (namespace, pod, limitBytes) of a Pod's log."""


def read_pod_log(rest: Rest, namespace: str, name: str, limit_bytes: int) -> bytes:
    """The first `limit_bytes` of the evidence container's log.

    Raises:
        ClusterError: The cluster failed or refused.
    """
    import urllib3
    from kubernetes.client.exceptions import ApiException

    path = _path("", "v1", "pods", namespace, name) + "/log"
    try:
        response = rest.api.call_api(
            path,
            "GET",
            query_params=[("container", CONTAINER), ("limitBytes", str(limit_bytes))],
            header_params={"Accept": "text/plain, */*"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
    except ApiException as exc:
        raise ClusterError(f"reading the log of Pod {namespace}/{name}: {exc.status}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterError(f"reading the log of Pod {namespace}/{name}: {exc}") from None
    try:
        data = response.read(limit_bytes + 1) if hasattr(response, "read") else response.data
    finally:
        if hasattr(response, "release_conn"):
            response.release_conn()
    return bytes(data[:limit_bytes])


def _kinds(body: Obj) -> tuple[str, str, str]:
    return {
        "ConfigMap": ("", "v1", "configmaps"),
        "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies"),
        "Pod": ("", "v1", "pods"),
    }[str(body["kind"])]


def _waiting(pod: Obj) -> str:
    """Why the evidence container cannot start ('' when it may yet)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        if reason in START_FAILURES:
            return f"{reason}: {str(waiting.get('message') or '')[:500]}"
    return ""


def _terminated(pod: Obj) -> Obj:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated")
        if isinstance(done, dict):
            return done
    return {}


def run_on_cluster(
    rest: Rest,
    namespace: str,
    collection: EvidenceCollection,
    host_state: host_model.HostState,
    *,
    name: str | None = None,
    image: str = DEFAULT_IMAGE,
    scenario_namespace: str = "default",
    objects: list[Obj] | None = None,
    timeout: float = sandbox.TIMEOUT_SECONDS,
    startup_seconds: float = STARTUP_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    read_log: LogReader = read_pod_log,
) -> sandbox.CollectionResult:
    """Run a collection in an evidence Pod and read what it produced; every object made is
    deleted afterwards, whatever happened.

    Args:
        rest: The cluster's API.
        namespace: An existing `itbench-ciso-` namespace to run in.
        collection: The agent's script or playbook.
        host_state: The modelled host's state.
        name: The objects' name (default: `itbench-ciso-evidence-<random>`).
        image: The evidence image.
        scenario_namespace: The namespace `kubectl` in the Pod answers for.
        objects: The objects `kubectl` in the Pod answers with.
        timeout: The collection's wall-clock limit.
        startup_seconds: How long the Pod may take to start on top of it.
        poll_seconds: How often the Pod is read meanwhile.
        sleep: Waits between reads.
        monotonic: The clock the limits are measured on.
        read_log: Reads the Pod's log.

    Returns:
        The sandbox's result shape; `platform_error` when the cluster failed or the Pod could
        not run (not the collection's fault).
    """
    token = secrets.token_hex(8)
    name = name or f"{COUNTERPART_PREFIX}evidence-{token[:10]}"
    started = monotonic()
    try:
        manifests = evidence_manifests(
            collection,
            host_state,
            namespace=namespace,
            name=name,
            token=token,
            image=image,
            timeout_seconds=timeout,
            scenario_namespace=scenario_namespace,
            objects=objects,
        )
    except ValueError as exc:
        return sandbox.CollectionResult(ok=False, problem=str(exc), platform_error=True)
    made: list[Obj] = []
    try:
        for body in manifests:
            group, version, plural = _kinds(body)
            try:
                rest.call("POST", _path(group, version, plural, namespace), body)
            except RefusedError as exc:
                raise ClusterError(
                    f"creating {body['kind']}/{name} in {namespace}: {exc}"
                ) from None
            made.append(body)
        return _await(
            rest,
            namespace,
            name,
            token,
            collection,
            timeout,
            started + timeout + startup_seconds,
            poll_seconds,
            sleep,
            monotonic,
            read_log,
            started,
        )
    except ClusterError as exc:
        log.warning("evidence pod %s/%s failed: %s", namespace, name, exc)
        return sandbox.CollectionResult(
            ok=False,
            problem=f"the evidence pod could not run: {exc}"[:2000],
            platform_error=True,
            seconds=max(0.0, monotonic() - started),
        )
    finally:
        _delete(rest, made)


def _await(
    rest: Rest,
    namespace: str,
    name: str,
    token: str,
    collection: EvidenceCollection,
    timeout: float,
    deadline: float,
    poll_seconds: float,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
    read_log: LogReader,
    started: float,
) -> sandbox.CollectionResult:
    path = _path("", "v1", "pods", namespace, name)
    while True:
        pod = rest.call("GET", path)
        if pod is None:
            raise ClusterError(f"the evidence Pod {namespace}/{name} disappeared")
        status = pod.get("status") or {}
        phase = str(status.get("phase") or "Pending")
        if phase in ("Succeeded", "Failed"):
            break
        cannot = _waiting(pod)
        if cannot:
            raise ClusterError(
                f"the evidence Pod {namespace}/{name} cannot start ({cannot}); is the image "
                "available to the cluster? (docs/stack.md, The RHEL9 host on a cluster)"
            )
        if monotonic() >= deadline:
            seconds = max(0.0, monotonic() - started)
            if phase == "Running":
                return sandbox.CollectionResult(
                    ok=False,
                    problem=f"the collection did not finish within {timeout:g} s and was stopped",
                    seconds=seconds,
                )
            raise ClusterError(
                f"the evidence Pod {namespace}/{name} did not start within "
                f"{deadline - started - timeout:g} s (phase {phase})"
            )
        sleep(poll_seconds)
    seconds = max(0.0, monotonic() - started)
    if phase == "Failed" and status.get("reason") == "DeadlineExceeded":
        return sandbox.CollectionResult(
            ok=False,
            problem=f"the collection did not finish within {timeout:g} s and was stopped",
            seconds=seconds,
        )
    text = read_log(rest, namespace, name, log_limit_bytes()).decode("utf-8", "replace")
    printed = parse_log(text, token)
    if printed is None:
        done = _terminated(pod)
        if done.get("reason") == "OOMKilled":
            return sandbox.CollectionResult(
                ok=False,
                problem="the collection ran out of the evidence pod's memory and was stopped",
                seconds=seconds,
            )
        raise ClusterError(
            f"the evidence Pod {namespace}/{name} ended ({phase}, "
            f"{done.get('reason') or status.get('reason') or 'no reason'}) without printing its "
            f"results; its log ends: {text[-300:]!r}"
        )
    return judge(collection, printed, timeout)


def _delete(rest: Rest, made: list[Obj]) -> list[str]:
    """Delete what a run made, newest first; what could not be deleted is logged and named."""
    left: list[str] = []
    for body in reversed(made):
        group, version, plural = _kinds(body)
        meta = body["metadata"]
        try:
            rest.call(
                "DELETE",
                _path(group, version, plural, meta["namespace"], meta["name"]),
                query={"gracePeriodSeconds": "0"} if body["kind"] == "Pod" else None,
            )
        except (ClusterError, RefusedError) as exc:
            left.append(f"{body['kind']}/{meta['name']}: {exc}")
    for item in left:
        log.warning("could not delete the evidence run's %s", item)
    return left


def collect_on(
    env: object,
    scenario: Scenario,
    collection: EvidenceCollection,
    *,
    timeout: float = sandbox.TIMEOUT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    read_log: LogReader = read_pod_log,
) -> sandbox.CollectionResult | None:
    """Run a collection on a cluster trial's cluster, in an evidence Pod over the trial's
    modelled host, in an evaluation namespace of its own removed afterwards (None: the trial
    is not on a cluster, or its class has no host).

    Args:
        env: The trial's environment.
        scenario: The trial's instance (its host state).
        collection: The agent's script or playbook.
        timeout: The collection's wall-clock limit.
        sleep: Waits between reads of the Pod.
        monotonic: The clock the limits are measured on.
        read_log: Reads the Pod's log.
    """
    from itbench.ciso import reports as rp
    from itbench.ciso.cluster import apply_manifests, cluster_of, host_image_of
    from itbench.ciso.evaluate import twin_of
    from itbench.core.ciso.classes import CLASS_RULES, class_of

    found = cluster_of(env)
    cls = class_of(scenario.spec.scenario_class)
    if found is None or cls is None or CLASS_RULES[cls].scope != "host":
        return None
    from itbench.environments.port import EnvironmentFailure

    _kubeconfig, trial_namespace = found
    try:
        api = env.ciso_evaluator_api()  # type: ignore[attr-defined]
    except EnvironmentFailure as exc:
        return sandbox.CollectionResult(
            ok=False, problem=f"the cluster is unavailable: {exc}"[:2000], platform_error=True
        )
    rest = Rest(api)
    namespace = f"{COUNTERPART_PREFIX}{rp.evaluation_token(trial_namespace, secrets.token_hex(8))}"
    try:
        twin = twin_of(scenario)
        apply_manifests(rest, [namespace_manifest(namespace)])
        return run_on_cluster(
            rest,
            namespace,
            collection,
            twin.host_state(),
            name=f"{namespace}-try",
            image=host_image_of(env) or DEFAULT_IMAGE,
            scenario_namespace=twin.namespace,
            objects=twin.objects(),
            timeout=timeout,
            sleep=sleep,
            monotonic=monotonic,
            read_log=read_log,
        )
    except ClusterError as exc:
        return sandbox.CollectionResult(
            ok=False, problem=f"the evidence pod could not run: {exc}"[:2000], platform_error=True
        )
    finally:
        try:
            rest.call("DELETE", _path("", "v1", "namespaces", None, namespace))
        except (ClusterError, RefusedError) as exc:
            log.warning("could not delete the evidence namespace %s: %s", namespace, exc)
        api.close()
