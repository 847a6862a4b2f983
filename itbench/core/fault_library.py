"""The fault definitions of the library (registered on first use of `itbench.core.faults`).

Three families: flagd feature flags of the Astronomy Shop, direct Kubernetes object changes, and
Chaos Mesh experiments. Each effect is the list of object changes its live playbooks make too.
Object names and fields are those of the pinned chart (its Deployments' containers carry the
component's name; Services expose `port` 8080 unless said otherwise).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from itbench.core.faults import (
    EffectFn,
    FaultArgs,
    FaultDefinition,
    Mechanism,
    ObjectChange,
    register,
)
from itbench.core.models.scenario import FaultCategory
from itbench.core.shop import FLAGD_CONFIGMAP, FLAGD_DEPLOYMENT

CHAOS_API_VERSION = "chaos-mesh.org/v1alpha1"
COMPONENT_LABEL = "opentelemetry.io/name"
"""The label the chart puts on every component's pods (and uses as the Service selector)."""
ARCH_IMAGES = {
    "amd64": "quay.io/it-bench/hello-bench-arm64:2.0.0",
    "arm64": "quay.io/it-bench/hello-bench-amd64:2.0.0",
}
"""Single-architecture images (upstream ITBench's), keyed by the node architecture they do not
run on; the demo itself publishes only multi-arch images."""
WORKER_NODE = "kind-worker"

_FLAGD_PLAYBOOK = "faults/flagd.yaml"
_PATCH_PLAYBOOK = "faults/object-patch.yaml"
_CREATE_PLAYBOOK = "faults/object-create.yaml"

_SPANS = ("traces_span_metrics_calls_total", "traces_span_metrics_duration_milliseconds_bucket")
_PODS = (
    "kube_deployment_status_replicas_available",
    "kube_deployment_status_replicas_ready",
    "kube_pod_container_status_waiting_reason",
)


# ---- argument schemas ------------------------------------------------------------------------


class NoArgs(FaultArgs):
    """A fault without arguments."""


class VariantArgs(FaultArgs):
    """A flag fault whose variant may be chosen."""

    variant: str = Field(default="on", min_length=1, description="The flagd variant to select.")


class PaymentFailureArgs(FaultArgs):
    """paymentFailure: the share of Charge requests that fail."""

    percent: Literal[10, 25, 50, 75, 90, 100] = Field(
        default=100, description="Percentage of payment requests that fail."
    )


class MemoryLeakArgs(FaultArgs):
    """emailMemoryLeak: how fast the email service leaks."""

    variant: Literal["1x", "10x", "100x", "1000x", "10000x"] = Field(
        default="1000x", description="Leak multiplier variant."
    )


class WorkloadArgs(FaultArgs):
    """Names the Deployment to act on."""

    workload: str = Field(min_length=1, description="Deployment name.")


class ImageArgs(WorkloadArgs):
    """A Deployment and the image to put in its container."""

    image: str = Field(
        default="ghcr.io/open-telemetry/demo:does-not-exist",
        min_length=1,
        description="Image reference that cannot be pulled.",
    )


class WrongArchImageArgs(WorkloadArgs):
    """A Deployment and an image built for another CPU architecture."""

    image: str = Field(
        default="",
        description="Image for another architecture; default: a single-arch image that does not "
        "run on the nodes' architecture (`node_architecture`).",
    )
    node_architecture: Literal["amd64", "arm64"] = Field(
        default="amd64", alias="nodeArchitecture", description="The nodes' CPU architecture."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class MemoryLimitArgs(WorkloadArgs):
    """A Deployment and the memory limit to give its container."""

    memory: str = Field(default="16Mi", min_length=1, description="Memory limit and request.")


class CpuLimitArgs(WorkloadArgs):
    """A Deployment and the CPU limit to give its container."""

    cpu: str = Field(default="10m", min_length=1, description="CPU limit and request.")


class NetworkPolicyArgs(WorkloadArgs):
    """A Deployment whose ingress is blocked on a port."""

    port: int = Field(ge=1, le=65535, description="The TCP port to block.")


class ServiceArgs(FaultArgs):
    """Names a Service."""

    service: str = Field(min_length=1, description="Service name.")


class ServiceSelectorArgs(ServiceArgs):
    """A Service whose selector is changed."""

    value: str = Field(default="wrong", min_length=1, description="New selector label value.")


class ServicePortArgs(ServiceArgs):
    """A Service whose targetPort is changed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    port: int = Field(ge=1, le=65535, description="The wrong targetPort.")
    service_port: int = Field(
        default=8080,
        ge=1,
        le=65535,
        alias="servicePort",
        description="The Service port whose targetPort changes (the merge key of Service ports).",
    )


class EnvArgs(WorkloadArgs):
    """A Deployment whose dependency address variable is changed."""

    variable: str = Field(min_length=1, description="Environment variable, e.g. CART_ADDR.")
    value: str = Field(min_length=1, description="The broken address, e.g. cart:9999.")


class ReadinessArgs(WorkloadArgs):
    """A Deployment given a readiness probe on a port nothing listens on."""

    port: int = Field(default=9999, ge=1, le=65535, description="Port the probe checks.")


class NodeArgs(WorkloadArgs):
    """A Deployment pinned to a node that does not exist."""

    node: str = Field(
        default="node-does-not-exist", min_length=1, description="kubernetes.io/hostname value."
    )


class ValkeyPasswordArgs(FaultArgs):
    """The password valkey-cart starts to require."""

    password: str = Field(default="valkey-rotated-2026", min_length=1, description="New password.")


class HpaArgs(WorkloadArgs):
    """An HPA with a CPU target that scales far beyond need."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    cpu_utilization: int = Field(
        default=5, ge=1, le=100, alias="cpuUtilization", description="Target CPU utilisation %."
    )
    min_replicas: int = Field(default=1, ge=1, le=100, alias="minReplicas", description="Minimum.")
    max_replicas: int = Field(default=8, ge=1, le=100, alias="maxReplicas", description="Maximum.")


class CommandArgs(WorkloadArgs):
    """A Deployment whose container runs a command its image does not have."""

    command: str = Field(default="invalid-command", min_length=1, description="The command.")


class InitContainerArgs(WorkloadArgs):
    """A Deployment given an init container."""

    name: str = Field(default="prepare", min_length=1, description="Init container name.")


class QuotaArgs(WorkloadArgs):
    """A ResourceQuota too small for the namespace, and a workload whose pods are recreated."""

    memory: str = Field(default="1Gi", min_length=1, description="The quota's `memory` hard limit.")


class CordonArgs(WorkloadArgs):
    """A workload pinned to a node that is then cordoned, and scaled up."""

    node: str = Field(default=WORKER_NODE, min_length=1, description="The node to cordon.")
    replicas: int = Field(
        default=2,
        ge=1,
        le=20,
        description="Replicas after the scale-up (1: no scale-up; the chart runs one replica).",
    )


class PreemptionArgs(WorkloadArgs):
    """A low-priority workload and a high-priority one that takes the node's CPU."""

    replicas: int = Field(default=20, ge=1, le=100, description="Replicas of the greedy workload.")
    cpu: str = Field(default="330m", min_length=1, description="CPU request of each of them.")


class SecretArgs(WorkloadArgs):
    """A workload whose connection string moves into a Secret with a wrong password."""

    variable: str = Field(
        default="DB_CONNECTION_STRING", min_length=1, description="The variable read from it."
    )
    value: str = Field(
        default="host=postgresql user=otelu password=0tel-rotated dbname=otel",
        min_length=1,
        description="The Secret's (corrupted) connection string.",
    )


class ClaimArgs(WorkloadArgs):
    """A workload given a volume from a claim no storage class can provision."""

    storage_class: str = Field(
        default="fast-ssd", min_length=1, alias="storageClass", description="Storage class."
    )
    path: str = Field(
        default="/var/lib/postgresql/data", min_length=1, description="Where it is mounted."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ChaosArgs(WorkloadArgs):
    """A Chaos Mesh experiment on a workload's pods, once or on a schedule."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schedule: str = Field(
        default="",
        description="Run as a Chaos Mesh Schedule with this cron schedule (e.g. `* * * * *`); "
        "empty: one experiment.",
    )
    duration: str = Field(
        default="",
        description="How long each experiment lasts (a Go duration such as `55s`); empty: until "
        "deleted. Required with a schedule.",
    )

    @model_validator(mode="after")
    def _schedule_needs_duration(self) -> ChaosArgs:
        if self.schedule and not self.duration:
            raise ValueError("a scheduled experiment needs a duration shorter than its period")
        return self


class NetworkDelayArgs(ChaosArgs):
    """Network latency added to a workload's pods."""

    latency_ms: int = Field(
        default=2000, ge=1, le=60000, alias="latencyMs", description="Added latency in ms."
    )


class PartitionArgs(ChaosArgs):
    """A network partition between a workload and a target workload."""

    target: str = Field(min_length=1, description="The workload cut off from `workload`.")
    direction: Literal["to", "from", "both"] = Field(
        default="both", description="Which way packets are dropped."
    )


class LossArgs(ChaosArgs):
    """Packet loss on a workload's traffic (to a target workload, when given)."""

    loss: int = Field(default=100, ge=1, le=100, description="Percentage of packets lost.")
    target: str = Field(default="", description="Only traffic to this workload ('' for all).")


class CpuStressArgs(ChaosArgs):
    """CPU stress inside a workload's pods."""

    workers: int = Field(default=2, ge=1, le=64, description="Stress workers.")
    load: int = Field(default=100, ge=1, le=100, description="Load per worker, percent.")


class MemoryStressArgs(ChaosArgs):
    """Memory stress inside a workload's pods."""

    size: str = Field(default="512MB", min_length=1, description="Memory each worker allocates.")
    workers: int = Field(default=1, ge=1, le=16, description="Stress workers.")


class HttpChaosArgs(ChaosArgs):
    """HTTP requests to a workload's port (and path) are disturbed."""

    port: int = Field(default=8080, ge=1, le=65535, description="Target HTTP port.")
    path: str = Field(default="*", min_length=1, description="Request path pattern.")
    method: str = Field(default="", description="Only requests with this method ('' for all).")


class JvmReturnArgs(ChaosArgs):
    """A JVM method of a workload returns a chosen value."""

    class_name: str = Field(
        default="oteldemo.AdService", alias="class", min_length=1, description="Java class."
    )
    method: str = Field(default="getInstance", min_length=1, description="Method name.")
    value: str = Field(
        default="null", min_length=1, description="The value the method returns (returnValue)."
    )


# ---- effect builders -------------------------------------------------------------------------


def _flag(flag: str, variant: str, namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="set-flag",
            kind="ConfigMap",
            name=FLAGD_CONFIGMAP,
            namespace=namespace,
            flag=flag,
            variant=variant,
        ),
        # flagd reads a copy of the ConfigMap made at pod start: roll it to serve the change.
        ObjectChange(
            op="rollout",
            api_version="apps/v1",
            kind="Deployment",
            name=FLAGD_DEPLOYMENT,
            namespace=namespace,
        ),
    ]


def _patch(
    kind: str, name: str, namespace: str | None, body: dict[str, Any], api: str = "v1"
) -> ObjectChange:
    return ObjectChange(
        op="merge-patch", api_version=api, kind=kind, name=name, namespace=namespace, body=body
    )


def _deployment_patch(
    workload: str, namespace: str, container: dict[str, Any], pod: dict[str, Any] | None = None
) -> list[ObjectChange]:
    pod_spec: dict[str, Any] = (
        {"containers": [{"name": workload, **container}]} if container else {}
    )
    pod_spec.update(pod or {})
    body = {"spec": {"template": {"spec": pod_spec}}}
    return [_patch("Deployment", workload, namespace, body, "apps/v1")]


def _create(
    kind: str,
    api_version: str,
    name: str,
    namespace: str | None,
    spec: dict[str, Any],
    top: str = "spec",
) -> ObjectChange:
    """A create change; `top` names the field that holds `spec` (`data` for a ConfigMap; an
    empty `top` puts `spec`'s keys at the top level, as a PriorityClass has them)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if top:
        body[top] = spec
    else:
        body.update(spec)
    return ObjectChange(
        op="create",
        api_version=api_version,
        kind=kind,
        name=name,
        namespace=namespace,
        body=body,
    )


def _selector(workload: str, namespace: str) -> dict[str, Any]:
    return {"namespaces": [namespace], "labelSelectors": {COMPONENT_LABEL: workload}}


_SCHEDULE_FIELD = {
    "NetworkChaos": "networkChaos",
    "PodChaos": "podChaos",
    "StressChaos": "stressChaos",
    "HTTPChaos": "httpChaos",
    "JVMChaos": "jvmChaos",
}


def _chaos(
    kind: str, name: str, namespace: str, spec: dict[str, Any], args: ChaosArgs
) -> list[ObjectChange]:
    if args.duration:
        spec = {**spec, "duration": args.duration}
    if not args.schedule:
        return [_create(kind, CHAOS_API_VERSION, name, namespace, spec)]
    schedule = {
        "schedule": args.schedule,
        "concurrencyPolicy": "Forbid",
        "historyLimit": 1,
        "type": kind,
        _SCHEDULE_FIELD[kind]: spec,
    }
    return [_create("Schedule", CHAOS_API_VERSION, name, namespace, schedule)]


def _flag_fault(fault_id: str, flag: str, description: str) -> None:
    register(
        FaultDefinition(
            id=fault_id,
            description=description,
            mechanism=Mechanism.FLAGD,
            args_model=NoArgs,
            effect=lambda _a, ns: _flag(flag, "on", ns),
            playbook=_FLAGD_PLAYBOOK,
            category=FaultCategory.FEATURE_FLAG,
            signals=_SPANS,
        )
    )


# ---- flagd -----------------------------------------------------------------------------------

_flag_fault("flagd.ad-failure", "adFailure", "flagd adFailure: the ad service fails GetAds calls.")
_flag_fault(
    "flagd.ad-high-cpu", "adHighCpu", "flagd adHighCpu: the ad service burns CPU and slows down."
)
_flag_fault(
    "flagd.ad-manual-gc",
    "adManualGc",
    "flagd adManualGc: the ad service triggers full garbage collections; latency spikes.",
)
_flag_fault(
    "flagd.cart-failure", "cartFailure", "flagd cartFailure: the cart service fails EmptyCart."
)
_flag_fault(
    "flagd.recommendation-cache-failure",
    "recommendationCacheFailure",
    "flagd recommendationCacheFailure: the recommendation cache grows without bound.",
)
_flag_fault(
    "flagd.payment-unreachable",
    "paymentUnreachable",
    "flagd paymentUnreachable: checkout calls the payment service at an unreachable address.",
)
_flag_fault(
    "flagd.kafka-queue-problems",
    "kafkaQueueProblems",
    "flagd kafkaQueueProblems: checkout floods Kafka and fraud-detection sleeps per record; its "
    "consumer lag grows.",
)
_flag_fault(
    "flagd.load-generator-flood",
    "loadGeneratorFloodHomepage",
    "flagd loadGeneratorFloodHomepage: the load generator floods the homepage.",
)

register(
    FaultDefinition(
        id="flagd.product-catalog-failure",
        description="flagd productCatalogFailure: GetProduct fails for one product.",
        mechanism=Mechanism.FLAGD,
        args_model=VariantArgs,
        effect=lambda a, ns: _flag("productCatalogFailure", a.variant, ns),
        playbook=_FLAGD_PLAYBOOK,
        category=FaultCategory.FEATURE_FLAG,
        signals=_SPANS,
    )
)
register(
    FaultDefinition(
        id="flagd.payment-failure",
        description="flagd paymentFailure: a percentage of payment Charge calls fail.",
        mechanism=Mechanism.FLAGD,
        args_model=PaymentFailureArgs,
        effect=lambda a, ns: _flag("paymentFailure", f"{a.percent}%", ns),
        playbook=_FLAGD_PLAYBOOK,
        category=FaultCategory.FEATURE_FLAG,
        signals=_SPANS,
    )
)
register(
    FaultDefinition(
        id="flagd.email-memory-leak",
        description="flagd emailMemoryLeak: the email service leaks memory until it is OOM-killed.",
        mechanism=Mechanism.FLAGD,
        args_model=MemoryLeakArgs,
        effect=lambda a, ns: _flag("emailMemoryLeak", a.variant, ns),
        playbook=_FLAGD_PLAYBOOK,
        category=FaultCategory.FEATURE_FLAG,
        signals=("container_memory_working_set_bytes", "kube_pod_container_status_restarts_total"),
    )
)


# ---- kubernetes ------------------------------------------------------------------------------


def _nonexistent_image(args: ImageArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(args.workload, namespace, {"image": args.image})


def _wrong_arch_image(args: WrongArchImageArgs, namespace: str) -> list[ObjectChange]:
    image = args.image or ARCH_IMAGES[args.node_architecture]
    return _deployment_patch(args.workload, namespace, {"image": image})


def _memory_limit(args: MemoryLimitArgs, namespace: str) -> list[ObjectChange]:
    resources = {"limits": {"memory": args.memory}, "requests": {"memory": args.memory}}
    return _deployment_patch(args.workload, namespace, {"resources": resources})


def _cpu_limit(args: CpuLimitArgs, namespace: str) -> list[ObjectChange]:
    resources = {"limits": {"cpu": args.cpu}, "requests": {"cpu": args.cpu}}
    return _deployment_patch(args.workload, namespace, {"resources": resources})


def _block_ingress(args: NetworkPolicyArgs, namespace: str) -> list[ObjectChange]:
    # NetworkPolicies only allow; blocking one port means allowing every other port.
    allowed: list[dict[str, Any]] = []
    if args.port > 1:
        allowed.append({"protocol": "TCP", "port": 1, "endPort": args.port - 1})
    if args.port < 65535:
        allowed.append({"protocol": "TCP", "port": args.port + 1, "endPort": 65535})
    spec = {
        "podSelector": {"matchLabels": {COMPONENT_LABEL: args.workload}},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": allowed}],
    }
    name = f"{args.workload}-ingress"
    return [_create("NetworkPolicy", "networking.k8s.io/v1", name, namespace, spec)]


def _scale_to_zero(args: WorkloadArgs, namespace: str) -> list[ObjectChange]:
    return [_patch("Deployment", args.workload, namespace, {"spec": {"replicas": 0}}, "apps/v1")]


def _service_selector(args: ServiceSelectorArgs, namespace: str) -> list[ObjectChange]:
    body = {"spec": {"selector": {COMPONENT_LABEL: args.value}}}
    return [_patch("Service", args.service, namespace, body)]


def _service_target_port(args: ServicePortArgs, namespace: str) -> list[ObjectChange]:
    # Service ports merge by `port`: the patch names the port whose targetPort it changes.
    body = {"spec": {"ports": [{"port": args.service_port, "targetPort": args.port}]}}
    return [_patch("Service", args.service, namespace, body)]


def _deleted_service(args: ServiceArgs, namespace: str) -> list[ObjectChange]:
    return [ObjectChange(op="delete", kind="Service", name=args.service, namespace=namespace)]


def _env_address(args: EnvArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(
        args.workload, namespace, {"env": [{"name": args.variable, "value": args.value}]}
    )


def _readiness(args: ReadinessArgs, namespace: str) -> list[ObjectChange]:
    probe = {"tcpSocket": {"port": args.port}, "periodSeconds": 10, "failureThreshold": 3}
    return _deployment_patch(args.workload, namespace, {"readinessProbe": probe})


def _nonexistent_node(args: NodeArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(
        args.workload, namespace, {}, {"nodeSelector": {"kubernetes.io/hostname": args.node}}
    )


def _valkey_password(args: ValkeyPasswordArgs, namespace: str) -> list[ObjectChange]:
    secret = _create(
        "Secret",
        "v1",
        "valkey-credentials",
        namespace,
        {"valkey-password": args.password},
        top="stringData",
    )
    container = {
        "command": ["valkey-server"],
        "args": ["--requirepass", "$(VALKEY_PASSWORD)"],
        "env": [
            {
                "name": "VALKEY_PASSWORD",
                "valueFrom": {
                    "secretKeyRef": {"name": "valkey-credentials", "key": "valkey-password"}
                },
            }
        ],
    }
    return [secret, *_deployment_patch("valkey-cart", namespace, container)]


def _hpa(args: HpaArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": args.workload},
        "minReplicas": args.min_replicas,
        "maxReplicas": args.max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": args.cpu_utilization},
                },
            }
        ],
    }
    return [_create("HorizontalPodAutoscaler", "autoscaling/v2", args.workload, namespace, spec)]


def _dns_policy(args: WorkloadArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(args.workload, namespace, {}, {"dnsPolicy": "Default"})


def _invalid_command(args: CommandArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(args.workload, namespace, {"command": [args.command]})


def _hanging_init(args: InitContainerArgs, namespace: str) -> list[ObjectChange]:
    init = {"name": args.name, "image": "busybox:1.36", "command": ["sh", "-c", "sleep infinity"]}
    return _deployment_patch(args.workload, namespace, {}, {"initContainers": [init]})


def _crashing_init(args: InitContainerArgs, namespace: str) -> list[ObjectChange]:
    config = f"{args.workload}-config"
    configmap = _create(
        "ConfigMap",
        "v1",
        config,
        namespace,
        # A trailing comma: not JSON.
        {"config.json": '{"cache": {"size": 512, "ttlSeconds": 30,}}\n'},
        top="data",
    )
    init = {
        "name": args.name,
        "image": "python:3.12-alpine",
        "command": ["python3", "-c", "import json; json.load(open('/config/config.json'))"],
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
    }
    pod = {
        "initContainers": [init],
        "volumes": [{"name": "config", "configMap": {"name": config}}],
    }
    return [configmap, *_deployment_patch(args.workload, namespace, {}, pod)]


def _quota(args: QuotaArgs, namespace: str) -> list[ObjectChange]:
    quota = _create("ResourceQuota", "v1", "memory", namespace, {"hard": {"memory": args.memory}})
    # The workload's pods are recreated, and the quota refuses the new ones.
    pods = ObjectChange(
        op="delete",
        kind="Pod",
        name=f"{args.workload}-*",
        namespace=namespace,
        selector={COMPONENT_LABEL: args.workload},
    )
    return [quota, pods]


def _cordon(args: CordonArgs, namespace: str) -> list[ObjectChange]:
    pin = _deployment_patch(
        args.workload, namespace, {}, {"nodeSelector": {"kubernetes.io/hostname": args.node}}
    )
    node = _patch("Node", args.node, None, {"spec": {"unschedulable": True}})
    if args.replicas == 1:
        return [*pin, node]
    scale = _patch(
        "Deployment", args.workload, namespace, {"spec": {"replicas": args.replicas}}, "apps/v1"
    )
    return [*pin, node, scale]


def _preemption(args: PreemptionArgs, namespace: str) -> list[ObjectChange]:
    high = _create(
        "PriorityClass",
        "scheduling.k8s.io/v1",
        "application-critical",
        None,
        {"value": 10000, "globalDefault": False, "description": "Data collection for audits."},
        top="",
    )
    low = _create(
        "PriorityClass",
        "scheduling.k8s.io/v1",
        "application-non-critical",
        None,
        {"value": -10, "globalDefault": False, "description": "Work that may wait."},
        top="",
    )
    target = _deployment_patch(
        args.workload, namespace, {}, {"priorityClassName": "application-non-critical"}
    )
    labels = {"app.kubernetes.io/name": "critical-data-collector"}
    greedy = _create(
        "Deployment",
        "apps/v1",
        "critical-data-collector",
        namespace,
        {
            "replicas": args.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "application-critical",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "sleep infinity"],
                            "resources": {"requests": {"cpu": args.cpu, "memory": "1Mi"}},
                        }
                    ],
                },
            },
        },
    )
    return [high, low, *target, greedy]


def _anti_affinity(args: WorkloadArgs, namespace: str) -> list[ObjectChange]:
    labels = {"app.kubernetes.io/name": "application-operator"}
    daemon = _create(
        "DaemonSet",
        "apps/v1",
        "application-operator",
        namespace,
        {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "worker",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "sleep infinity"],
                        }
                    ]
                },
            },
        },
    )
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {
                                "key": "app.kubernetes.io/name",
                                "operator": "In",
                                "values": ["application-operator"],
                            }
                        ]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return [daemon, *_deployment_patch(args.workload, namespace, {}, {"affinity": affinity})]


def _secret_credentials(args: SecretArgs, namespace: str) -> list[ObjectChange]:
    name = f"{args.workload}-db"
    secret = _create("Secret", "v1", name, namespace, {"connection": args.value}, top="stringData")
    env = [
        {
            "name": args.variable,
            "value": None,
            "valueFrom": {"secretKeyRef": {"name": name, "key": "connection"}},
        }
    ]
    return [secret, *_deployment_patch(args.workload, namespace, {"env": env})]


def _missing_claim(args: ClaimArgs, namespace: str) -> list[ObjectChange]:
    name = f"{args.workload}-data"
    claim = _create(
        "PersistentVolumeClaim",
        "v1",
        name,
        namespace,
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": args.storage_class,
        },
    )
    container = {"volumeMounts": [{"name": "data", "mountPath": args.path}]}
    pod = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}
    return [claim, *_deployment_patch(args.workload, namespace, container, pod)]


_CATEGORIES: dict[str, FaultCategory] = {
    "kubernetes.nonexistent-image": FaultCategory.BAD_IMAGE,
    "kubernetes.wrong-arch-image": FaultCategory.BAD_IMAGE,
    "kubernetes.memory-limit": FaultCategory.RESOURCE_LIMITS,
    "kubernetes.cpu-limit": FaultCategory.RESOURCE_LIMITS,
    "kubernetes.block-ingress": FaultCategory.TRAFFIC_BLOCKED,
    "kubernetes.scale-to-zero": FaultCategory.SCALED_DOWN,
    "kubernetes.service-selector": FaultCategory.SERVICE_MISROUTED,
    "kubernetes.service-target-port": FaultCategory.SERVICE_MISROUTED,
    "kubernetes.deleted-service": FaultCategory.SERVICE_MISROUTED,
    "kubernetes.env-dependency-address": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.valkey-password": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.secret-credentials": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.invalid-command": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.dns-policy": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.hanging-init-container": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.crashing-init-container": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.bad-readiness-probe": FaultCategory.BAD_PROBE,
    "kubernetes.nonexistent-node": FaultCategory.UNSCHEDULABLE,
    "kubernetes.cordoned-node": FaultCategory.UNSCHEDULABLE,
    "kubernetes.anti-affinity": FaultCategory.UNSCHEDULABLE,
    "kubernetes.priority-preemption": FaultCategory.UNSCHEDULABLE,
    "kubernetes.missing-volume-claim": FaultCategory.UNSCHEDULABLE,
    "kubernetes.resource-quota": FaultCategory.UNSCHEDULABLE,
    "kubernetes.hpa-misconfiguration": FaultCategory.AUTOSCALING,
    "chaos.network-delay": FaultCategory.NETWORK_DEGRADED,
    "chaos.network-partition": FaultCategory.NETWORK_DEGRADED,
    "chaos.network-loss": FaultCategory.NETWORK_DEGRADED,
    "chaos.pod-failure": FaultCategory.PODS_DOWN,
    "chaos.cpu-stress": FaultCategory.RESOURCE_STRESS,
    "chaos.memory-stress": FaultCategory.RESOURCE_STRESS,
    "chaos.jvm-heap-stress": FaultCategory.RESOURCE_STRESS,
    "chaos.http-abort": FaultCategory.APPLICATION_FAILURE,
    "chaos.http-tamper": FaultCategory.APPLICATION_FAILURE,
    "chaos.http-patch": FaultCategory.APPLICATION_FAILURE,
    "chaos.jvm-return": FaultCategory.APPLICATION_FAILURE,
}
"""What is wrong at each Kubernetes and Chaos Mesh fault's root cause (a ResourceQuota that
refuses pods counts as unschedulable: no pod can be placed)."""

_KUBERNETES_FAULTS: list[tuple[str, str, type[FaultArgs], EffectFn, str, tuple[str, ...]]] = [
    (
        "kubernetes.nonexistent-image",
        "Point a Deployment's container at an image that does not exist.",
        ImageArgs,
        _nonexistent_image,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.wrong-arch-image",
        "Point a Deployment's container at an image built for another CPU architecture.",
        WrongArchImageArgs,
        _wrong_arch_image,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.memory-limit",
        "Give a Deployment's container a memory limit below its working set.",
        MemoryLimitArgs,
        _memory_limit,
        _PATCH_PLAYBOOK,
        ("kube_pod_container_status_last_terminated_reason", *_PODS),
    ),
    (
        "kubernetes.cpu-limit",
        "Give a Deployment's container a CPU limit far below its demand.",
        CpuLimitArgs,
        _cpu_limit,
        _PATCH_PLAYBOOK,
        ("container_cpu_cfs_throttled_periods_total", *_SPANS),
    ),
    (
        "kubernetes.block-ingress",
        "A NetworkPolicy that denies ingress to a workload's pods on one port.",
        NetworkPolicyArgs,
        _block_ingress,
        _CREATE_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.scale-to-zero",
        "Scale a Deployment to zero replicas.",
        WorkloadArgs,
        _scale_to_zero,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.service-selector",
        "Change a Service's selector so that it selects no pods.",
        ServiceSelectorArgs,
        _service_selector,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.service-target-port",
        "Change a Service port's targetPort to a port its pods do not listen on.",
        ServicePortArgs,
        _service_target_port,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.deleted-service",
        "Delete a Service, so its name no longer resolves.",
        ServiceArgs,
        _deleted_service,
        _CREATE_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.env-dependency-address",
        "Set a Deployment's dependency address variable to a wrong address.",
        EnvArgs,
        _env_address,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.bad-readiness-probe",
        "Give a Deployment a readiness probe on a port nothing listens on.",
        ReadinessArgs,
        _readiness,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.nonexistent-node",
        "Pin a Deployment's pods to a node that does not exist.",
        NodeArgs,
        _nonexistent_node,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.valkey-password",
        "valkey-cart starts requiring a password (from a new Secret) the cart does not send.",
        ValkeyPasswordArgs,
        _valkey_password,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.hpa-misconfiguration",
        "An HPA's CPU target is set so low that it scales the workload to its maximum.",
        HpaArgs,
        _hpa,
        _CREATE_PLAYBOOK,  # creates the HPA, or updates the one that exists
        ("kube_horizontalpodautoscaler_status_current_replicas",),
    ),
    (
        "kubernetes.dns-policy",
        "A Deployment's pods resolve names with the node's DNS (dnsPolicy Default), which knows "
        "no Services.",
        WorkloadArgs,
        _dns_policy,
        _PATCH_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.invalid-command",
        "A Deployment's container runs a command its image does not have.",
        CommandArgs,
        _invalid_command,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.hanging-init-container",
        "A Deployment gets an init container that never finishes.",
        InitContainerArgs,
        _hanging_init,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.crashing-init-container",
        "A Deployment gets an init container that fails on a malformed ConfigMap.",
        InitContainerArgs,
        _crashing_init,
        _PATCH_PLAYBOOK,
        ("kube_pod_init_container_status_restarts_total", *_PODS),
    ),
    (
        "kubernetes.resource-quota",
        "A memory ResourceQuota below the namespace's requests; the workload's pods are "
        "recreated and refused.",
        QuotaArgs,
        _quota,
        _CREATE_PLAYBOOK,
        ("kube_resourcequota", *_PODS),
    ),
    (
        "kubernetes.cordoned-node",
        "A workload is pinned to a node, the node is cordoned and the workload scaled up.",
        CordonArgs,
        _cordon,
        _PATCH_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.priority-preemption",
        "A high-priority workload takes the node's CPU and preempts a low-priority one.",
        PreemptionArgs,
        _preemption,
        _CREATE_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.anti-affinity",
        "A workload's new pods must avoid every node running a DaemonSet's pod.",
        WorkloadArgs,
        _anti_affinity,
        _CREATE_PLAYBOOK,
        _PODS,
    ),
    (
        "kubernetes.secret-credentials",
        "A workload's connection string moves into a Secret holding a wrong password.",
        SecretArgs,
        _secret_credentials,
        _CREATE_PLAYBOOK,
        _SPANS,
    ),
    (
        "kubernetes.missing-volume-claim",
        "A workload gets a volume from a claim that no storage class can provision.",
        ClaimArgs,
        _missing_claim,
        _CREATE_PLAYBOOK,
        _PODS,
    ),
]
for _id, _desc, _model, _fn, _pb, _signals in _KUBERNETES_FAULTS:
    register(
        FaultDefinition(
            id=_id,
            description=_desc,
            mechanism=Mechanism.KUBERNETES,
            args_model=_model,
            effect=_fn,
            playbook=_pb,
            category=_CATEGORIES[_id],
            signals=_signals,
        )
    )


# ---- chaos mesh ------------------------------------------------------------------------------


def _network_delay(args: NetworkDelayArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "delay",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "delay": {"latency": f"{args.latency_ms}ms", "jitter": "0ms", "correlation": "100"},
        "direction": "to",
    }
    return _chaos("NetworkChaos", f"{args.workload}-network-delay", namespace, spec, args)


def _network_partition(args: PartitionArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "partition",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "direction": args.direction,
        "target": {"mode": "all", "selector": _selector(args.target, namespace)},
    }
    name = f"{args.workload}-{args.target}-partition"
    return _chaos("NetworkChaos", name, namespace, spec, args)


def _network_loss(args: LossArgs, namespace: str) -> list[ObjectChange]:
    spec: dict[str, Any] = {
        "action": "loss",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "loss": {"loss": str(args.loss), "correlation": "0"},
        "direction": "to",
    }
    if args.target:
        spec["target"] = {"mode": "all", "selector": _selector(args.target, namespace)}
    name = f"{args.workload}-{args.target or 'all'}-network-loss"
    return _chaos("NetworkChaos", name, namespace, spec, args)


def _pod_failure(args: ChaosArgs, namespace: str) -> list[ObjectChange]:
    spec = {"action": "pod-failure", "mode": "all", "selector": _selector(args.workload, namespace)}
    return _chaos("PodChaos", f"{args.workload}-pod-failure", namespace, spec, args)


def _cpu_stress(args: CpuStressArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "stressors": {"cpu": {"workers": args.workers, "load": args.load}},
    }
    return _chaos("StressChaos", f"{args.workload}-cpu-stress", namespace, spec, args)


def _memory_stress(args: MemoryStressArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "stressors": {"memory": {"workers": args.workers, "size": args.size}},
    }
    return _chaos("StressChaos", f"{args.workload}-memory-stress", namespace, spec, args)


def _http(
    args: HttpChaosArgs, namespace: str, kind: str, extra: dict[str, Any]
) -> list[ObjectChange]:
    spec: dict[str, Any] = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "target": "Request",
        "port": args.port,
        "path": args.path,
        **extra,
    }
    if args.method:
        spec["method"] = args.method
    return _chaos("HTTPChaos", f"{args.workload}-http-{kind}", namespace, spec, args)


def _http_abort(args: HttpChaosArgs, namespace: str) -> list[ObjectChange]:
    return _http(args, namespace, "abort", {"abort": True})


def _http_tamper(args: HttpChaosArgs, namespace: str) -> list[ObjectChange]:
    return _http(args, namespace, "tamper", {"replace": {"body": "eyJ0YW1wZXJlZCI6dHJ1ZX0="}})


def _http_patch(args: HttpChaosArgs, namespace: str) -> list[ObjectChange]:
    body = {"type": "JSON", "value": '{"email": "12345", "order": "error body"}'}
    return _http(args, namespace, "patch", {"patch": {"body": body}})


def _jvm_return(args: JvmReturnArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "return",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "class": args.class_name,
        "method": args.method,
        # Chaos Mesh 2.8 reads the value from `returnValue` (`value` is the selector's).
        "returnValue": args.value,
        "port": 9277,
    }
    return _chaos("JVMChaos", f"{args.workload}-jvm-return", namespace, spec, args)


def _jvm_heap(args: ChaosArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "stress",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "memType": "heap",
        "port": 9277,
    }
    return _chaos("JVMChaos", f"{args.workload}-jvm-heap-stress", namespace, spec, args)


_CHAOS_FAULTS: list[tuple[str, str, type[FaultArgs], EffectFn, tuple[str, ...]]] = [
    (
        "chaos.network-delay",
        "NetworkChaos delay: packets to and from a workload's pods are delayed.",
        NetworkDelayArgs,
        _network_delay,
        _SPANS,
    ),
    (
        "chaos.network-partition",
        "NetworkChaos partition: a workload and a target workload cannot reach each other "
        "(in the given direction).",
        PartitionArgs,
        _network_partition,
        _SPANS,
    ),
    (
        "chaos.network-loss",
        "NetworkChaos loss: a share of a workload's packets (to a target) is dropped.",
        LossArgs,
        _network_loss,
        _SPANS,
    ),
    (
        "chaos.pod-failure",
        "PodChaos pod-failure: a workload's containers run the pause image (still Ready) and "
        "serve nothing.",
        ChaosArgs,
        _pod_failure,
        (*_SPANS, "kube_pod_container_status_restarts_total"),
    ),
    (
        "chaos.cpu-stress",
        "StressChaos cpu: stress workers burn CPU inside a workload's pods.",
        CpuStressArgs,
        _cpu_stress,
        ("container_cpu_cfs_throttled_periods_total", *_SPANS),
    ),
    (
        "chaos.memory-stress",
        "StressChaos memory: stress workers allocate memory inside a workload's pods.",
        MemoryStressArgs,
        _memory_stress,
        ("container_memory_working_set_bytes", "kube_pod_container_status_last_terminated_reason"),
    ),
    (
        "chaos.http-abort",
        "HTTPChaos abort: HTTP requests to a workload's port are aborted.",
        HttpChaosArgs,
        _http_abort,
        _SPANS,
    ),
    (
        "chaos.http-tamper",
        "HTTPChaos replace: HTTP request bodies to a workload's port are replaced.",
        HttpChaosArgs,
        _http_tamper,
        _SPANS,
    ),
    (
        "chaos.http-patch",
        "HTTPChaos patch: HTTP request bodies to a workload's port get JSON fields that break "
        "them.",
        HttpChaosArgs,
        _http_patch,
        _SPANS,
    ),
    (
        "chaos.jvm-return",
        "JVMChaos return: a JVM method of a workload returns a chosen value.",
        JvmReturnArgs,
        _jvm_return,
        _SPANS,
    ),
    (
        "chaos.jvm-heap-stress",
        "JVMChaos stress: a workload's JVM heap fills up.",
        ChaosArgs,
        _jvm_heap,
        (*_SPANS, "container_memory_working_set_bytes"),
    ),
]
for _cid, _cdesc, _cmodel, _cfn, _csignals in _CHAOS_FAULTS:
    register(
        FaultDefinition(
            id=_cid,
            description=_cdesc,
            mechanism=Mechanism.CHAOS_MESH,
            args_model=_cmodel,
            effect=_cfn,
            playbook=_CREATE_PLAYBOOK,
            agent_reachable=False,
            category=_CATEGORIES[_cid],
            signals=_csignals,
        )
    )
