"""Fault injection on a live cluster, through the fault library's Ansible playbooks.

A fault is a list of `ObjectChange`s (the same data the simulator applies to its twin). Before a
change is made, the object it touches is read and kept (or noted absent, or its flag's variant
noted), so that removal can put everything back: created objects are deleted, patched objects
are replaced by their earlier version (flagd's ConfigMap too, so its text is the chart's byte
for byte), and a rolled-out Deployment is rolled out again once everything else is back, its
pod template's stamp put back as it was (flagd then reads the restored flags, and the Deployment
equals its baseline). Each kind of change has its playbook: `faults/object-patch.yaml`,
`faults/object-create.yaml` (which waits for Chaos Mesh's AllInjected), `faults/flagd.yaml`,
`faults/rollout.yaml` (which waits for the rollout); `faults/restore.yaml` puts patched objects
back.

An injection is one playbook run, and so is a removal: consecutive changes of one kind make one
step, and several steps run as `faults/steps.yaml`, which runs each step's playbook tasks in
order (an Ansible process and each module's start-up cost seconds of CPU; the steps share them).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from itbench.core.faults import ObjectChange
from itbench.core.shop import FLAGD_CONFIG_KEY
from itbench.environments.port import EnvironmentFailure

log = logging.getLogger(__name__)

PLAYBOOK_DIR = Path(__file__).parent / "playbooks"
"""Root of the playbooks; the fault library names them relative to it (`faults/flagd.yaml`)."""

PLAYBOOK_FOR_OP = {
    "merge-patch": "faults/object-patch.yaml",
    "create": "faults/object-create.yaml",
    "delete": "faults/object-create.yaml",
    "set-flag": "faults/flagd.yaml",
    "rollout": "faults/rollout.yaml",
}
"""The playbook that makes each kind of change."""

RESTORE_PLAYBOOK = "faults/restore.yaml"

STEPS_PLAYBOOK = "faults/steps.yaml"
"""Runs several steps (each the tasks of one of the playbooks above) in one Ansible run."""

STEP_VARS = ("changes", "objects", "restarted_at")
"""The extra vars of a playbook that belong to its step in a steps run (the rest are shared)."""

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
"""The pod-template annotation a rollout stamps (as `kubectl rollout restart` does)."""

SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
"""Metadata the API server owns; dropped from an object before it is put back."""

Json = dict[str, Any]


class PlaybookError(RuntimeError):
    """A playbook failed; the message names the task and what the module said."""


class ObjectReader(Protocol):
    """Reads one object from the cluster (None when it does not exist)."""

    def read(self, api_version: str, kind: str, name: str, namespace: str | None) -> Json | None:
        """The object as the API server has it now."""
        ...


class PlaybookRunner(Protocol):
    """Runs one playbook with extra variables, raising PlaybookError when it fails."""

    def run(self, playbook: str, extravars: Mapping[str, Any]) -> None:
        """Run `playbook` (relative to PLAYBOOK_DIR)."""
        ...


@dataclass(frozen=True)
class AppliedChange:
    """One change made, with what removal needs to undo it.

    Attributes:
        change: The change.
        before: The object before the change (None: it did not exist).
        previous_variant: For set-flag: the flag's variant before the change.
    """

    change: ObjectChange
    before: Json | None
    previous_variant: str | None = None

    def wire(self) -> Json:
        """A JSON-ready form, to keep with the trial (a restarted operator removes from it)."""
        return {
            "change": self.change.model_dump(mode="json", by_alias=True),
            "before": self.before,
            "previousVariant": self.previous_variant,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> AppliedChange:
        """Read the form `wire` wrote."""
        return cls(
            change=ObjectChange.model_validate(data["change"]),
            before=data.get("before"),
            previous_variant=data.get("previousVariant"),
        )


def restorable(obj: Json) -> Json:
    """An object as it can be written back: no status, no server-owned metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


def flag_variant(configmap: Json | None, flag: str, key: str = FLAGD_CONFIG_KEY) -> str | None:
    """A flag's default variant in flagd's ConfigMap (None when it is not defined)."""
    if configmap is None:
        return None
    try:
        doc = json.loads(str((configmap.get("data") or {}).get(key, "")))
    except json.JSONDecodeError:
        return None
    flags = doc.get("flags") if isinstance(doc, dict) else None
    entry = flags.get(flag) if isinstance(flags, dict) else None
    variant = entry.get("defaultVariant") if isinstance(entry, dict) else None
    return str(variant) if variant is not None else None


def undo_plan(applied: Sequence[AppliedChange]) -> list[tuple[str, Json]]:
    """The playbook steps that undo applied changes, in order (latest change first, consecutive
    restores as one step, and every rolled-out Deployment rolled out again last, so it starts
    from the restored objects).

    Args:
        applied: The changes as made, in the order they were made.

    Returns:
        (playbook, extra vars) pairs.
    """
    runs: list[tuple[str, Json]] = []
    again: list[ObjectChange] = []
    restarted: dict[str, str | None] = {}
    for item in reversed(applied):
        change = item.change
        if change.op == "rollout":
            if change not in again:
                again.append(change)
            # The earliest rollout's `before` holds the template's stamp before the fault.
            restarted[change.name] = restarted_at(item.before)
            continue
        if change.op == "set-flag":
            if item.before is not None:
                # The ConfigMap as it was, byte for byte (the playbook re-serialises the JSON).
                runs.append((RESTORE_PLAYBOOK, {"objects": [restorable(item.before)]}))
                continue
            if item.previous_variant is None:
                continue
            undo = change.model_copy(update={"variant": item.previous_variant})
            runs.append(
                (
                    PLAYBOOK_FOR_OP["set-flag"],
                    {
                        "changes": [undo.model_dump(mode="json", by_alias=True)],
                        "flagd_key": FLAGD_CONFIG_KEY,
                    },
                )
            )
        elif item.before is None:
            if change.op == "create":
                gone = change.model_copy(update={"op": "delete", "body": {}})
                runs.append(
                    (
                        PLAYBOOK_FOR_OP["delete"],
                        {"changes": [gone.model_dump(mode="json", by_alias=True)]},
                    )
                )
        elif change.op == "delete":
            again_obj = ObjectChange(
                op="create",
                api_version=change.api_version,
                kind=change.kind,
                name=change.name,
                namespace=change.namespace,
                body=restorable(item.before),
            )
            runs.append(
                (
                    PLAYBOOK_FOR_OP["create"],
                    {"changes": [again_obj.model_dump(mode="json", by_alias=True)]},
                )
            )
        else:
            runs.append((RESTORE_PLAYBOOK, {"objects": [restorable(item.before)]}))
    runs = _merge_restores(runs)
    if again:
        runs.append(
            (
                PLAYBOOK_FOR_OP["rollout"],
                {
                    "changes": [c.model_dump(mode="json", by_alias=True) for c in reversed(again)],
                    "restarted_at": {c.name: restarted[c.name] for c in again},
                },
            )
        )
    return runs


def _merge_restores(runs: list[tuple[str, Json]]) -> list[tuple[str, Json]]:
    """Consecutive restores as one (the playbook replaces its objects in order)."""
    out: list[tuple[str, Json]] = []
    for playbook, extravars in runs:
        if playbook == RESTORE_PLAYBOOK and out and out[-1][0] == RESTORE_PLAYBOOK:
            out[-1][1]["objects"].extend(extravars["objects"])
        else:
            out.append((playbook, extravars))
    return out


def inject_plan(
    changes: Sequence[ObjectChange], flagd_key: str = FLAGD_CONFIG_KEY
) -> list[tuple[str, Json]]:
    """The playbook steps that make changes, in order: consecutive changes of one kind (and,
    for set-flag, of one ConfigMap) make one step.

    Raises:
        KeyError: A change's op has no playbook.
    """
    runs: list[tuple[str, Json]] = []
    previous: tuple[str, str] | None = None
    for change in changes:
        playbook = PLAYBOOK_FOR_OP[change.op]
        key = (change.op, change.name if change.op == "set-flag" else "")
        wire = change.model_dump(mode="json", by_alias=True)
        if key == previous:
            runs[-1][1]["changes"].append(wire)
            continue
        extravars: Json = {"changes": [wire]}
        if change.op == "set-flag":
            extravars["flagd_key"] = flagd_key
        runs.append((playbook, extravars))
        previous = key
    return runs


def one_run(runs: Sequence[tuple[str, Json]], keep_going: bool = False) -> tuple[str, Json]:
    """One playbook run that makes every step: the step's own playbook when there is one, else
    `faults/steps.yaml` with each step's tasks and variables.

    Args:
        runs: (playbook, extra vars) steps, in order (at least one).
        keep_going: A failed step does not stop the later ones (removal); the run still fails.
    """
    if len(runs) == 1:
        return runs[0]
    shared: Json = {}
    steps: list[Json] = []
    for playbook, extravars in runs:
        step: Json = {"tasks": Path(playbook).stem, "label": step_label(playbook, extravars)}
        for key, value in extravars.items():
            if key in STEP_VARS:
                step[key] = value
            else:
                shared[key] = value
        steps.append(step)
    return STEPS_PLAYBOOK, {**shared, "steps": steps, "keep_going": keep_going}


def step_label(playbook: str, extravars: Mapping[str, Any]) -> str:
    """What a step changes, for messages (`merge-patch Deployment/cart, ...`)."""
    if "objects" in extravars:
        objects = extravars["objects"]
        return ", ".join(f"restore {o['kind']}/{o['metadata']['name']}" for o in objects)
    changes = extravars.get("changes") or []
    return ", ".join(f"{c['op']} {c['kind']}/{c['name']}" for c in changes) or playbook


def restarted_at(deployment: Json | None) -> str | None:
    """A Deployment's rollout stamp (`kubectl.kubernetes.io/restartedAt` on its pod template)."""
    template = ((deployment or {}).get("spec") or {}).get("template") or {}
    value = ((template.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_AT)
    return str(value) if value is not None else None


@dataclass
class ClusterFaults:
    """Injects and removes faults on a live cluster.

    Attributes:
        reader: Reads objects before they change.
        runner: Runs the playbooks.
        flagd_key: The key of flagd's ConfigMap that holds the flag definitions.
        rollout_timeout: Seconds a rollout may take before the injection fails (0: no wait).
        chaos_timeout: Seconds Chaos Mesh may take to report AllInjected (0: no wait).
    """

    reader: ObjectReader
    runner: PlaybookRunner
    flagd_key: str = FLAGD_CONFIG_KEY
    rollout_timeout: int = 300
    chaos_timeout: int = 120

    def _vars(self, extravars: Json) -> Json:
        return {
            **extravars,
            "rollout_timeout": self.rollout_timeout,
            "chaos_timeout": self.chaos_timeout,
        }

    def inject(self, changes: Sequence[ObjectChange]) -> list[AppliedChange]:
        """Make a fault's changes in one playbook run, keeping what undoes them.

        The same as `apply(prepare(changes))`.

        Raises:
            EnvironmentFailure: A change failed; whatever the run made has been undone.
        """
        return self.apply(self.prepare(changes))

    def prepare(self, changes: Sequence[ObjectChange]) -> list[AppliedChange]:
        """Read every object the changes touch, before anything is changed.

        What this returns is all that removal needs: a caller that keeps it before `apply` can
        undo a run that was cut short (its process killed), whatever part of it was made.

        Raises:
            EnvironmentFailure: An object a change needs does not exist, or the cluster cannot
                be read; nothing has been changed.
        """
        attempted: list[AppliedChange] = []
        for change in changes:
            try:
                before = (
                    None
                    if change.selector
                    else self.reader.read(
                        change.api_version, change.kind, change.name, change.namespace
                    )
                )
                if before is None and change.op in ("merge-patch", "set-flag", "rollout"):
                    raise PlaybookError(
                        f"{change.kind} {change.namespace or ''}/{change.name} not found"
                    )
            except PlaybookError as exc:
                raise EnvironmentFailure(
                    f"injecting {change.op} {change.kind}/{change.name} failed: {exc}"
                ) from None
            previous = flag_variant(before, change.flag, self.flagd_key)
            attempted.append(
                AppliedChange(
                    change=change,
                    before=before,
                    previous_variant=previous if change.op == "set-flag" else None,
                )
            )
        return attempted

    def apply(self, prepared: Sequence[AppliedChange]) -> list[AppliedChange]:
        """Make the prepared changes in one playbook run.

        Raises:
            EnvironmentFailure: A change failed; whatever the run made has been undone.
        """
        attempted = list(prepared)
        if not attempted:
            return attempted
        try:
            playbook, extravars = one_run(
                inject_plan([a.change for a in attempted], self.flagd_key)
            )
        except KeyError as exc:
            raise EnvironmentFailure(f"injecting: no playbook makes {exc}") from None
        try:
            self.runner.run(playbook, self._vars(extravars))
        except PlaybookError as exc:
            # A run that failed part-way (a Chaos Mesh experiment never injected, a rollout that
            # never finished, a later patch refused) leaves changes in place: undo them all
            # (undoing a change that was not made writes the object as it already is).
            self._undo_quietly(attempted)
            made = ", ".join(f"{a.change.op} {a.change.kind}/{a.change.name}" for a in attempted)
            raise EnvironmentFailure(f"injecting {made} failed: {exc}") from None
        return attempted

    def remove(self, applied: Sequence[AppliedChange]) -> None:
        """Undo applied changes (latest first) in one playbook run.

        Raises:
            EnvironmentFailure: A step failed (the others were still attempted).
        """
        runs = undo_plan(applied)
        if not runs:
            return
        playbook, extravars = one_run(runs, keep_going=True)
        try:
            self.runner.run(playbook, self._vars(extravars))
        except PlaybookError as exc:
            raise EnvironmentFailure(f"removing the fault failed: {exc}") from None

    def _undo_quietly(self, applied: Sequence[AppliedChange]) -> None:
        try:
            self.remove(applied)
        except EnvironmentFailure as exc:
            log.warning("undoing a partial injection failed", extra={"error": str(exc)})


class KubeObjectReader:
    """Reads objects through the official client's dynamic API (discovery-driven)."""

    def __init__(self, api_client: Any) -> None:
        """Wrap a `kubernetes.client.ApiClient`."""
        from kubernetes.dynamic import DynamicClient

        self._client = DynamicClient(api_client)

    def read(self, api_version: str, kind: str, name: str, namespace: str | None) -> Json | None:
        """The object as the API server has it now (None when it does not exist).

        Raises:
            PlaybookError: The cluster cannot be reached (so the change is never attempted).
        """
        import urllib3
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            resource = self._client.resources.get(api_version=api_version, kind=kind)
            obj = resource.get(name=name, namespace=namespace)
        except NotFoundError:
            return None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise PlaybookError(
                f"reading {kind} {namespace or ''}/{name}: the cluster is unreachable: {exc}"
            ) from None
        result: Json = obj.to_dict()
        return result


@dataclass
class AnsiblePlaybookRunner:
    """Runs the fault playbooks with ansible-runner, each in a fresh private directory.

    Attributes:
        kubeconfig: Kubeconfig the playbooks use (None: in-cluster configuration).
        collections_path: Where the kubernetes.core collection is installed (None: Ansible's
            default search path).
        timeout_seconds: Longest a playbook may run.
        project_dir: Where the playbooks are (the fault library's by default).
    """

    kubeconfig: str | None = None
    collections_path: str | None = None
    timeout_seconds: int = 300
    project_dir: Path = PLAYBOOK_DIR

    def run(self, playbook: str, extravars: Mapping[str, Any]) -> None:
        """Run a playbook; raise PlaybookError naming the failed task and its message.

        The playbook runs in a child process (`itbench.environments.kube.playbook_process`)
        that dies, with every process the playbook started, when this process dies: a run
        never goes on changing the cluster after the operator that asked for it was killed,
        so a restarted operator can undo what it made without racing it.
        """
        variables = dict(extravars)
        if self.kubeconfig is not None:
            variables["kubeconfig"] = self.kubeconfig
        bin_dir = str(Path(ansible_playbook()).parent)
        envvars = {
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            # Modules run on this host: fed to the interpreter, not copied to a file first.
            "ANSIBLE_PIPELINING": "1",
            # ansible-runner starts `ansible-playbook` by name: find the one installed with us.
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        }
        if self.collections_path is not None:
            envvars["ANSIBLE_COLLECTIONS_PATH"] = self.collections_path
        private = Path(tempfile.mkdtemp(prefix="itbench-playbook-"))
        request = {
            "parent": os.getpid(),
            "private_data_dir": str(private),
            "project_dir": str(self.project_dir),
            "playbook": playbook,
            "extravars": variables,
            "envvars": envvars,
        }
        try:
            answer = _run_guarded(request, self.timeout_seconds)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        if answer.get("status") != "successful":
            raise PlaybookError(f"{playbook}: {answer.get('failure') or answer.get('status')}")


def _stop(child: Any) -> None:
    """End a playbook process with every process it started (its STOP handler kills them,
    wherever they are; its process group is killed after, in case it could not)."""
    import signal
    import subprocess

    from itbench.environments.kube.playbook_process import STOP

    with contextlib.suppress(ProcessLookupError):
        child.send_signal(STOP)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.communicate(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _run_guarded(request: Mapping[str, Any], timeout_seconds: int) -> Json:
    import subprocess

    child = subprocess.Popen(
        [sys.executable, "-m", "itbench.environments.kube.playbook_process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the playbook's processes join it
        text=True,
    )
    try:
        out, err = child.communicate(json.dumps(request), timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        _stop(child)
        raise PlaybookError(
            f"{request['playbook']}: did not finish within {timeout_seconds} s"
        ) from None
    except BaseException:
        # Interrupted here (a cancelled handler): the run must not outlive the request.
        _stop(child)
        raise
    try:
        answer: Json = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = " / ".join(line for line in err.strip().splitlines()[-3:])
        raise PlaybookError(
            f"{request['playbook']}: the playbook process exited with {child.returncode}"
            + (f": {tail}" if tail else "")
        ) from None
    return answer


def ansible_playbook() -> str:
    """The ansible-playbook command: the one installed with this Python, else the one on PATH.

    Raises:
        PlaybookError: Neither exists (install ansible-core).
    """
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ansible-playbook")
    if found is None:
        raise PlaybookError("ansible-playbook is not installed (pip install ansible-core)")
    return found


def failure_of(result: Any) -> str:
    """What the failed task that stopped the run said (or the run's status).

    The last failure is the one that stopped the run (a steps run notes its steps' failures and
    fails at the end naming them); a failed loop says which item failed and why.
    """
    failed = [e for e in result.events if e.get("event") == "runner_on_failed"]
    if failed:
        data = failed[-1].get("event_data") or {}
        res = data.get("res") or {}
        items = [r for r in res.get("results") or [] if isinstance(r, dict) and r.get("failed")]
        detail = items[0] if items else res
        message = detail.get("msg") or detail.get("reason") or "failed"
        label = detail.get("_ansible_item_label") if items else None
        where = f" ({label})" if label else ""
        return f"task {data.get('task', '?')!r}{where}: {message}"
    try:
        tail = [line.strip() for line in result.stdout.read().splitlines() if line.strip()][-3:]
    except (OSError, ValueError):
        tail = []
    return f"status {result.status}, rc {result.rc}" + (f": {' / '.join(tail)}" if tail else "")
