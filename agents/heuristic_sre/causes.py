"""The checks an SRE runs where an incident starts, each yielding a cause with its remedy.

A flag flagd serves switched on that concerns the incident's services; a workload's pods (waiting
and termination reasons, events, OOM kills, throttling) read against what its latest rollout
changed, which counts only when the change explains the symptom; what stands between callers and
a callee (its Service, replica count, NetworkPolicies, a changed command); a dependency address a
rollout broke. A cause backed by an object is definite and carries the narrowest remedy on that
object; one read from the pods' symptoms alone is a likely cause without a remedy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.heuristic_sre.flags import flag_concerns, flag_is_on, off_variant
from agents.heuristic_sre.graph import Graph
from agents.heuristic_sre.objects import (
    Objects,
    TemplateChange,
    address_broken,
    is_address_variable,
)
from agents.heuristic_sre.signals import THROTTLED, Failure, Signals
from agents.routines import name_of, ref, value_before_change
from itbench.client import ActionVerb, AgentAction, FaultCategory, ITBenchClient

MEMORY_FULL = 0.9
"""Working set as a share of the memory limit from which a container is about to be killed."""
IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
CRASH_REASONS = frozenset({"CrashLoopBackOff", "Error", "RunContainerError"})
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
UNHEALTHY_REASONS = IMAGE_REASONS | CRASH_REASONS | CONFIG_REASONS | {"Pending", "OOMKilled"}
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName")
PROBE_FIELDS = ("readinessProbe", "livenessProbe", "startupProbe")


@dataclass
class Finding:
    """A cause: the entity to blame, what is wrong with it, and what undoes it.

    Attributes:
        kind: Kind of the entity.
        name: Name of the entity.
        category: What is wrong there.
        service: The workload it sits on (the propagation chain starts there).
        condition: The evidence, in words.
        remedy: The actions that undo it (empty: no object an agent can change shows it).
        remedy_words: The remedy in words.
        definite: Object evidence backs it (else it is read from symptoms alone).
        follow_up: Workloads to restart if their symptoms outlast the remedy (a flag's leak).
    """

    kind: str
    name: str
    category: FaultCategory
    service: str
    condition: str
    remedy: list[AgentAction] = field(default_factory=list)
    remedy_words: str = ""
    definite: bool = True
    follow_up: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        """The entity, `Kind/name`."""
        return ref(self.kind, self.name)


def likely(workload: str, category: FaultCategory, condition: str) -> Finding:
    """A cause read from a workload's symptoms alone: named, not acted on."""
    return Finding("Deployment", workload, category, workload, condition, definite=False)


def _restore(workload: str, change: TemplateChange) -> tuple[list[AgentAction], str]:
    action = AgentAction(
        verb=ActionVerb.PATCH, kind="Deployment", name=workload, patch=change.patch
    )
    words = (
        f"restore Deployment {workload}'s pod template fields that changed since revision "
        f"{change.previous_revision} ({', '.join(change.fields)})"
    )
    return [action], words


@dataclass(frozen=True)
class PodSymptoms:
    """What a workload's pods show, each as a yes or no."""

    image: bool
    exec_format: bool
    crash: bool
    oom: bool
    memory: bool
    throttled: bool
    pending: bool
    probe: bool
    config: bool
    not_ready: bool

    def named(self) -> list[str]:
        """The symptoms present, in words."""
        words = (
            ("image cannot be pulled", self.image),
            ("binary cannot run (exec format error)", self.exec_format),
            ("crash looping", self.crash),
            ("OOM-killed", self.oom),
            ("close to its memory limit", self.memory),
            ("CPU throttled", self.throttled),
            ("pods cannot be scheduled", self.pending),
            ("readiness probe fails", self.probe),
            ("container config error", self.config),
            ("pods not ready", self.not_ready),
        )
        return [w for w, present in words if present]

    def explained_by(self, change: TemplateChange) -> tuple[FaultCategory, str] | None:
        """What a template change explains of these symptoms (None: nothing)."""
        crash_alone = self.crash and not self.oom  # an OOM kill explains its own crash loop
        if (self.image or self.exec_format or crash_alone) and change.touches("image"):
            return FaultCategory.BAD_IMAGE, "its image changed and cannot run"
        if self.pending and change.touches(*SCHEDULING_FIELDS):
            return FaultCategory.UNSCHEDULABLE, "its node placement changed"
        if self.probe and change.touches(*PROBE_FIELDS):
            return FaultCategory.BAD_PROBE, "its probe changed and fails"
        if self.oom and change.memory_lowered:
            return FaultCategory.RESOURCE_LIMITS, "its memory limit was lowered"
        if self.throttled and change.cpu_lowered:
            return FaultCategory.RESOURCE_LIMITS, "its CPU limit was lowered"
        if (crash_alone or self.config) and (
            change.touches("args", "command", "volumeMounts") or change.behaviour_env()
        ):
            return FaultCategory.BAD_CONFIGURATION, "its command or environment changed"
        return None

    def read_alone(self) -> tuple[FaultCategory, str] | None:
        """The likely cause when nothing the agent can see explains the symptoms."""
        if self.oom or self.memory or self.throttled:
            return FaultCategory.RESOURCE_STRESS, (
                "limits unchanged since the previous revision: something inside the pods burns "
                "CPU or memory"
            )
        if self.image or self.exec_format:
            return FaultCategory.BAD_IMAGE, "the image cannot run"
        if self.pending:
            return FaultCategory.UNSCHEDULABLE, "no node takes the pods"
        if self.probe:
            return FaultCategory.BAD_PROBE, "the probe fails"
        if self.not_ready or self.crash:
            return FaultCategory.PODS_DOWN, (
                "no failing probe, bad image or changed template: the pods run but do not serve"
            )
        return None


@dataclass
class Investigation:
    """What was read of the trial, and the causes found in it."""

    client: ITBenchClient
    objects: Objects
    signals: Signals
    graph: Graph
    notes: list[str] = field(default_factory=list)
    findings: dict[str, Finding] = field(default_factory=dict)
    flags: dict[str, set[str]] = field(default_factory=dict)
    """Flags switched on that concern the incident, with the services each concerns."""
    _inspected: set[str] = field(default_factory=set)

    def add(self, finding: Finding) -> None:
        """Record a finding once per entity (a definite one wins over a symptom reading)."""
        have = self.findings.get(finding.ref)
        if have is not None and (have.definite or not finding.definite):
            have.remedy += [a for a in finding.remedy if a not in have.remedy]
            return
        self.findings[finding.ref] = finding
        kind = "cause" if finding.definite else "likely cause"
        self.notes.append(f"{kind}: {finding.ref} [{finding.category.value}]: {finding.condition}")

    def definite_at(self, workload: str) -> bool:
        """Whether a definite finding sits on this workload."""
        return any(f.definite and f.service == workload for f in self.findings.values())

    def named(self, workload: str) -> bool:
        """Whether any finding names this workload's Deployment."""
        return ref("Deployment", workload) in self.findings

    def flag_covers(self, services: set[str]) -> bool:
        """Whether a flag switched on concerns one of these services."""
        return any(concerns & services for concerns in self.flags.values())

    # ---- flags -----------------------------------------------------------------------------
    def inspect_flags(self, symptomatic: set[str]) -> None:
        """Flags flagd serves switched on that concern the services with symptoms or their
        direct neighbours."""
        workloads = sorted(self.objects.deployments)
        near = set(symptomatic)
        for s in symptomatic:
            near |= self.graph.neighbours(s)
        for key, spec in sorted(self.objects.flags().items()):
            if not flag_is_on(spec):
                continue
            concerns = flag_concerns(key, spec, workloads)
            if not concerns & near:
                self.notes.append(
                    f"flag {key} is on but concerns {sorted(concerns)}, not the incident's"
                )
                continue
            off = off_variant(spec)
            service = (sorted(concerns & symptomatic) or sorted(concerns))[0]
            action = AgentAction(
                verb=ActionVerb.SET_FLAG, kind="Flag", name=key, flag=key, variant=off
            )
            self.add(
                Finding(
                    kind="Flag",
                    name=key,
                    category=FaultCategory.FEATURE_FLAG,
                    service=service,
                    condition=f"flagd serves {key}={spec.get('defaultVariant')} "
                    f"({spec.get('description', '')}); it concerns {', '.join(sorted(concerns))}",
                    remedy=[action] if off else [],
                    remedy_words=f"switch flag {key} to {off}",
                    follow_up=sorted(concerns & symptomatic),
                )
            )
            self.flags[key] = concerns

    # ---- workloads -------------------------------------------------------------------------
    def pod_symptoms(self, w: str) -> tuple[PodSymptoms, str]:
        """What a workload's pods show, and a line describing them."""
        sig, state = self.signals, self.objects.pod_state(w)
        reasons, alerts = state.reasons, sig.alerts(w)
        symptoms = PodSymptoms(
            image=bool(reasons & IMAGE_REASONS)
            or any("pull" in e.lower() for e in state.event("Failed", "ErrImagePull")),
            exec_format="exec format error" in " ".join(sig.lines.get(w, [])),
            crash=bool(reasons & CRASH_REASONS) or "PodCrashLooping" in alerts,
            oom="OOMKilled" in reasons
            or bool(state.event("OOMKilling"))
            or "ContainerOOMKilled" in alerts,
            memory=sig.memory.get(w, 0.0) > MEMORY_FULL or "MemoryUsageHigh" in alerts,
            throttled=sig.throttled.get(w, 0.0) > THROTTLED or "CPUThrottlingHigh" in alerts,
            pending="Pending" in reasons or bool(state.event("FailedScheduling")),
            probe=any("probe failed" in e.lower() for e in state.event("Unhealthy")),
            config=bool(reasons & CONFIG_REASONS),
            not_ready=bool(state.pods) and state.ready < len(state.pods),
        )
        line = (
            f"{w}: {', '.join(symptoms.named())}; pods {state.ready}/{len(state.pods)} ready, "
            f"reasons {sorted(reasons)}, restarts {state.restarts}"
        )
        return symptoms, line

    def inspect_workload(self, w: str) -> None:
        """A workload's pods, read against what its latest rollout changed."""
        if w in self._inspected or w not in self.objects.deployments:
            return
        self._inspected.add(w)
        symptoms, line = self.pod_symptoms(w)
        if not symptoms.named():
            return
        change = self.objects.template_change(w)
        if change is not None:
            line += f"; template changed since revision {change.previous_revision}: "
            line += ", ".join(change.fields)
        self.notes.append(line)
        explained = symptoms.explained_by(change) if change is not None else None
        if explained is not None and change is not None:
            category, why = explained
            remedy, words = _restore(w, change)
            self.add(
                Finding(
                    "Deployment",
                    w,
                    category,
                    w,
                    f"{', '.join(symptoms.named())}: {why} in its latest rollout "
                    f"({', '.join(change.fields)})",
                    remedy=remedy,
                    remedy_words=words,
                )
            )
            return
        if self.flag_covers({w}):
            return  # the flag that concerns the workload explains what its pods do
        alone = symptoms.read_alone()
        if alone is not None:
            category, why = alone
            self.add(likely(w, category, f"{', '.join(symptoms.named())}: {why}"))

    def inspect_target(self, caller: str, target: str, failures: list[Failure]) -> None:
        """What stands between callers and a callee they fail to reach: its Service, replica
        count, NetworkPolicies, and a change of its command or dependency addresses."""
        objects = self.objects
        if target not in objects.deployments:
            return
        if target in objects.services:
            for why, patch in objects.service_problems(target, target):
                action = AgentAction(
                    verb=ActionVerb.PATCH, kind="Service", name=target, patch=patch
                )
                self.add(
                    Finding(
                        "Service",
                        target,
                        FaultCategory.SERVICE_MISROUTED,
                        target,
                        why,
                        remedy=[action],
                        remedy_words=f"fix Service {target}",
                    )
                )
        self._inspect_replicas(target)
        self._inspect_policies(caller, target)
        change = objects.template_change(target)
        if change is None or self.definite_at(target):
            return
        if change.touches("args", "command") or self._broken_addresses(change):
            remedy, words = _restore(target, change)
            self.add(
                Finding(
                    "Deployment",
                    target,
                    FaultCategory.BAD_CONFIGURATION,
                    target,
                    f"calls to {target} fail ({texts(failures)}) since its latest rollout "
                    f"changed {', '.join(change.fields)}",
                    remedy=remedy,
                    remedy_words=words,
                )
            )

    def _inspect_replicas(self, target: str) -> None:
        objects = self.objects
        if objects.replicas(target) != 0 or objects.autoscaled(target):
            return
        earlier = value_before_change(
            self.client,
            f'kube_deployment_spec_replicas{{namespace="{objects.namespace}", '
            f'deployment="{target}"}}',
        )
        count = int(earlier[0]) if earlier and earlier[0] >= 1 else 1
        self.add(
            Finding(
                "Deployment",
                target,
                FaultCategory.SCALED_DOWN,
                target,
                f"Deployment {target} asks for 0 replicas (it ran {count} before), so calls to "
                "it find no endpoints",
                remedy=[
                    AgentAction(
                        verb=ActionVerb.SCALE, kind="Deployment", name=target, replicas=count
                    )
                ],
                remedy_words=f"scale Deployment {target} back to {count}",
            )
        )

    def _inspect_policies(self, caller: str, target: str) -> None:
        callers = sorted(self.graph.callers.get(target, [])) or [caller]
        blocking = self.objects.blocking_policies(target, callers)
        if not blocking:
            return
        # Together they leave the port out; admitting it in one of them is enough.
        policy, ports = min(blocking, key=lambda pb: name_of(pb[0]))
        name, shown = name_of(policy), ", ".join(map(str, ports))
        self.add(
            Finding(
                "NetworkPolicy",
                name,
                FaultCategory.TRAFFIC_BLOCKED,
                target,
                f"NetworkPolicy {name} selects {target}'s pods and admits none of the ports they "
                f"serve ({shown}) from its callers",
                remedy=[admit(policy, ports)],
                remedy_words=f"let NetworkPolicy {name} admit port(s) {shown}",
            )
        )

    def inspect_caller_config(self, caller: str, failures: list[Failure]) -> None:
        """A dependency address in the caller's environment that its latest rollout broke."""
        change = self.objects.template_change(caller)
        broken = self._broken_addresses(change) if change is not None else []
        if change is None or not broken:
            return
        remedy, words = _restore(caller, change)
        self.add(
            Finding(
                "Deployment",
                caller,
                FaultCategory.BAD_CONFIGURATION,
                caller,
                f"its latest rollout set {'; '.join(broken)}, and its calls fail "
                f"({texts(failures)})",
                remedy=remedy,
                remedy_words=words,
            )
        )

    def _broken_addresses(self, change: TemplateChange) -> list[str]:
        out = []
        for var, (_before, now) in change.behaviour_env().items():
            if now is None or not is_address_variable(var):
                continue
            why = address_broken(str(now), self.objects.services)
            if why:
                out.append(f"{var}={now} ({why})")
        return out


def admit(policy: dict[str, Any], ports: list[int]) -> AgentAction:
    """A patch adding an ingress rule that admits the blocked ports from the same peers."""
    rules = list((policy.get("spec") or {}).get("ingress") or [])
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": p} for p in ports]}
    peers = next((r.get("from") for r in rules if r.get("from")), None)
    if peers:
        rule["from"] = peers
    return AgentAction(
        verb=ActionVerb.PATCH,
        kind="NetworkPolicy",
        name=name_of(policy),
        patch={"spec": {"ingress": [*rules, rule]}},
    )


def texts(failures: list[Failure]) -> str:
    """The first distinct messages of some failures, for a condition."""
    seen = list(dict.fromkeys(f.text[:100] for f in failures))
    return "; ".join(seen[:2]) or "no error message"
