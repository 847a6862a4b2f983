"""The twin's Chaos Mesh controller: experiments select their pods once, at injection.

As Chaos Mesh does, an experiment records the pods its selector picks when it starts (and, for a
partition, its target's pods) and acts on those pods only: a pod created later, by a rollout or a
deleted pod's replacement, is not affected. An experiment with `duration` recovers when it runs
out; the `experiment.chaos-mesh.org/pause` annotation pauses it. A Schedule starts a new
experiment on its cron schedule. PodChaos pod-failure swaps every container image for the pause
image (the originals kept in pod annotations) and puts them back on recovery.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from itbench.core.shop import JVM_METHODS
from itbench.environments.sim.objects import Obj, clone, labels_match, main_container
from itbench.environments.sim.registry import PAUSE_IMAGE, image_program
from itbench.stack import snapshot

if TYPE_CHECKING:
    from itbench.environments.sim.cluster import Cluster

CHAOS_KINDS = ("NetworkChaos", "PodChaos", "StressChaos", "HTTPChaos", "JVMChaos", "IOChaos")
PAUSE_ANNOTATION = "experiment.chaos-mesh.org/pause"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _schedule_fields() -> dict[str, str]:
    spec = snapshot("chaos-mesh.yaml")["kinds"]["Schedule"]["schema"]["properties"]["spec"]
    return {
        str(v["x-itbench-schema-of"]): str(k)
        for k, v in spec["properties"].items()
        if "x-itbench-schema-of" in v
    }


SCHEDULE_FIELDS: dict[str, str] = _schedule_fields()
"""The field of a Schedule's spec that holds each kind's experiment (the pinned CRD's)."""


def schedule_field(kind: str) -> str:
    """The Schedule spec field of an experiment kind (`HTTPChaos` -> `httpChaos`)."""
    return SCHEDULE_FIELDS.get(kind, kind[0].lower() + kind[1:])


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration (`55s`, `1m30s`, `500ms`); None when it does not parse."""
    total, pos = 0.0, 0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and text else None


def _cron_interval(schedule: str) -> float | None:
    """Seconds between runs of the cron forms Chaos Mesh users write for repeating faults."""
    text = schedule.strip()
    if text.startswith("@every "):
        return parse_go_duration(text[len("@every ") :])
    fields = text.split()
    if len(fields) != 5 or fields[1:] != ["*", "*", "*", "*"]:
        return None
    if fields[0] == "*":
        return 60.0
    if fields[0].startswith("*/") and fields[0][2:].isdigit():
        return 60.0 * int(fields[0][2:])
    return None


def jvm_rule_valid(spec: Obj, program: str) -> bool:
    """Whether a JVMChaos rule can be installed in a program: its class has the method and, for
    `return`, the method returns a value and the rule names one in `returnValue` (Chaos Mesh
    2.8's field; `value` is the selector's)."""
    action = spec.get("action")
    if action in ("stress", "gc", "ruleData", "mysql"):
        return True
    returns = JVM_METHODS.get(program, {}).get(f"{spec.get('class', '')}.{spec.get('method', '')}")
    if returns is None:
        return False
    if action == "return":
        return returns != "void" and bool(str(spec.get("returnValue", "")))
    return True


def selects(selector: Obj, pod: Obj, namespace: str) -> bool:
    """Whether a Chaos Mesh PodSelectorSpec picks a pod."""
    namespaces = selector.get("namespaces")
    if namespaces and namespace not in namespaces:
        return False
    wanted = selector.get("labelSelectors") or {}
    expressions = selector.get("expressionSelectors") or []
    names = selector.get("pods") or {}
    labels = pod["metadata"].get("labels") or {}
    if names:
        return pod["metadata"]["name"] in (names.get(namespace) or [])
    if not wanted and not expressions:
        return False
    if not all(labels.get(k) == v for k, v in wanted.items()):
        return False
    return labels_match({"matchExpressions": expressions}, labels)


def _pick(spec: Obj, pods: list[Obj], namespace: str) -> list[str]:
    chosen = [
        p["metadata"]["name"] for p in pods if selects(spec.get("selector") or {}, p, namespace)
    ]
    mode = spec.get("mode", "one")
    value = str(spec.get("value", ""))
    if mode == "one":
        return chosen[:1]
    if mode == "fixed" and value.isdigit():
        return chosen[: int(value)]
    if mode in ("fixed-percent", "random-max-percent") and value.isdigit():
        return chosen[: max(1, len(chosen) * int(value) // 100)] if chosen else []
    return chosen


class ChaosMesh:
    """Reconciles the twin's Chaos Mesh objects; one instance per cluster."""

    def __init__(self, cluster: Cluster) -> None:
        """Bind to the cluster whose pods the experiments act on."""
        self.cluster = cluster
        self._last_run: dict[str, float] = {}

    def reconcile(self) -> None:
        """Start due scheduled experiments, record new experiments' pods, expire finished ones
        and apply or undo pod failures."""
        for schedule in self.cluster.of_kind("Schedule"):
            self._schedule(schedule)
        pods = [p for p in self.cluster.of_kind("Pod") if p["spec"].get("nodeName")]
        for kind in CHAOS_KINDS:
            for chaos in self.cluster.of_kind(kind):
                self._experiment(chaos, pods)
        self._pod_failures()

    # ---- experiments ------------------------------------------------------------------------
    def _experiment(self, chaos: Obj, pods: list[Obj]) -> None:
        c = self.cluster
        spec = chaos.get("spec") or {}
        status = chaos.setdefault("status", {})
        experiment = status.get("experiment")
        if experiment is None:
            records = [
                {
                    "id": f"{c.namespace}/{name}",
                    "selectorKey": ".",
                    "phase": "Injected",
                    "injectedCount": 1,
                }
                for name in _pick(spec, pods, c.namespace)
            ]
            target = spec.get("target")
            if isinstance(target, dict):
                records += [
                    {
                        "id": f"{c.namespace}/{name}",
                        "selectorKey": ".Target",
                        "phase": "Injected",
                        "injectedCount": 1,
                    }
                    for name in _pick(target, pods, c.namespace)
                ]
            status["experiment"] = {
                "containerRecords": records,
                "desiredPhase": "Run",
                "startTime": c.timestamp(),
                "startedAt": c.now,
            }
        active = self.active(chaos)
        injected = "True" if active and self._installs(chaos) else "False"
        status["conditions"] = [
            {
                "type": "Selected",
                "status": "True" if status["experiment"]["containerRecords"] else "False",
            },
            {"type": "AllInjected", "status": injected},
            {"type": "AllRecovered", "status": "False" if active else "True"},
            {"type": "Paused", "status": "True" if self._paused(chaos) else "False"},
        ]
        status["experiment"]["desiredPhase"] = "Run" if active else "Stop"
        for record in status["experiment"]["containerRecords"]:
            record["phase"] = "Injected" if active else "Recovered"

    def _installs(self, chaos: Obj) -> bool:
        if chaos.get("kind") != "JVMChaos":
            return True
        for record in (chaos.get("status") or {}).get("experiment", {}).get(
            "containerRecords"
        ) or []:
            pod = self.cluster.get("Pod", str(record["id"]).split("/", 1)[1])
            if pod is None:
                continue
            program = image_program(str(main_container(pod["spec"]).get("image", ""))) or ""
            if not jvm_rule_valid(chaos.get("spec") or {}, program):
                return False
        return True

    def _paused(self, chaos: Obj) -> bool:
        annotations = chaos["metadata"].get("annotations") or {}
        return str(annotations.get(PAUSE_ANNOTATION, "")).lower() == "true"

    def active(self, chaos: Obj) -> bool:
        """Whether an experiment acts now (started, not paused, not past its duration)."""
        experiment = (chaos.get("status") or {}).get("experiment")
        if experiment is None or self._paused(chaos):
            return False
        duration = parse_go_duration(str((chaos.get("spec") or {}).get("duration", "")))
        if duration is None:
            return True
        return self.cluster.now < float(experiment.get("startedAt", 0.0)) + duration

    def targets(self, chaos: Obj, pod: str, key: str = ".") -> bool:
        """Whether an active experiment acts on a pod (`.Target`: as its partition target)."""
        if not self.active(chaos):
            return False
        experiment = (chaos.get("status") or {}).get("experiment") or {}
        wanted = f"{self.cluster.namespace}/{pod}"
        return any(
            r.get("id") == wanted and r.get("selectorKey") == key
            for r in experiment.get("containerRecords") or []
        )

    def acting(self, kind: str, pod: str, key: str = ".") -> list[Obj]:
        """The active experiments of a kind that act on a pod."""
        return [o for o in self.cluster.of_kind(kind) if self.targets(o, pod, key)]

    # ---- pod failure ------------------------------------------------------------------------
    def _image_key(self, chaos: str, container: str, init: bool) -> str:
        name = container + ("-init" if init else "-normal")
        key = f"chaos-mesh-{chaos}-pod-failure-{name}-image"
        return key if len(key) <= 63 else name

    def _pod_failures(self) -> None:
        c = self.cluster
        failing: dict[str, str] = {}
        for chaos in c.of_kind("PodChaos"):
            if (chaos.get("spec") or {}).get("action") != "pod-failure" or not self.active(chaos):
                continue
            for record in (chaos.get("status") or {}).get("experiment", {}).get(
                "containerRecords"
            ) or []:
                failing[str(record["id"]).split("/", 1)[1]] = chaos["metadata"]["name"]
        for pod in c.of_kind("Pod"):
            name = pod["metadata"]["name"]
            annotations = pod["metadata"].setdefault("annotations", {})
            chaos_name = failing.get(name)
            changed = False
            for init, group in ((False, "containers"), (True, "initContainers")):
                for container in pod["spec"].get(group) or []:
                    if chaos_name is not None:
                        key = self._image_key(chaos_name, str(container["name"]), init)
                        if key not in annotations:
                            annotations[key] = container["image"]
                            container["image"] = PAUSE_IMAGE
                            changed = True
                        continue
                    for key in [
                        k
                        for k in annotations
                        if self._is_image_key(k, str(container["name"]), init)
                    ]:
                        container["image"] = annotations.pop(key)
                        changed = True
            if changed:
                c.touch(pod)

    def _is_image_key(self, key: str, container: str, init: bool) -> bool:
        suffix = container + ("-init" if init else "-normal")
        return key == suffix or (
            key.startswith("chaos-mesh-") and key.endswith(f"-pod-failure-{suffix}-image")
        )

    # ---- schedules --------------------------------------------------------------------------
    def _schedule(self, schedule: Obj) -> None:
        c = self.cluster
        spec = schedule.get("spec") or {}
        name = schedule["metadata"]["name"]
        kind = str(spec.get("type", ""))
        if kind not in CHAOS_KINDS:
            return
        interval = _cron_interval(str(spec.get("schedule", "")))
        if interval is None:
            return
        paused = (
            str((schedule["metadata"].get("annotations") or {}).get(PAUSE_ANNOTATION, "")).lower()
            == "true"
        )
        children = c.owned(kind, schedule)
        last = self._last_run.get(name)
        due = last is None or c.now >= last + interval
        running = [o for o in children if self.active(o)]
        schedule.setdefault("status", {})["active"] = [
            {
                "apiVersion": "chaos-mesh.org/v1alpha1",
                "kind": kind,
                "name": o["metadata"]["name"],
                "namespace": c.namespace,
            }
            for o in running
        ]
        if paused or not due or (spec.get("concurrencyPolicy", "Forbid") == "Forbid" and running):
            return
        self._last_run[name] = c.now
        body = clone(spec.get(schedule_field(kind)) or {})
        serial = len(children) + 1
        c.put(
            {
                "apiVersion": "chaos-mesh.org/v1alpha1",
                "kind": kind,
                "metadata": {
                    "name": f"{name}-{serial:05d}",
                    "labels": {"chaos-mesh.org/controlled-by": name},
                    "ownerReferences": [c.owner_ref(schedule)],
                },
                "spec": body,
            }
        )
        history = int(spec.get("historyLimit", 1) or 1)
        finished = [o for o in c.owned(kind, schedule) if not self.active(o) and "status" in o]
        for old in finished[: max(0, len(finished) - history)]:
            c.delete(kind, old["metadata"]["name"])
        schedule.setdefault("status", {})["lastScheduleTime"] = c.timestamp()


def chaos_spec(chaos: Obj) -> dict[str, Any]:
    """An experiment's spec (empty when it has none)."""
    spec = chaos.get("spec")
    return spec if isinstance(spec, dict) else {}
