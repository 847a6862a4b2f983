"""The fault definitions of the library (registered on first use of `itbench.core.faults`).

Three families: flagd feature flags of the Astronomy Shop, direct Kubernetes object changes, and
Chaos Mesh experiments. Each effect is the list of object changes its live playbook makes too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from itbench.core.faults import (
    EffectFn,
    FaultArgs,
    FaultDefinition,
    Mechanism,
    ObjectChange,
    register,
)
from itbench.core.models.scenario import FaultCategory
from itbench.core.shop import (
    COST_BUDGET_KEY,
    COST_CONFIGMAP,
    DEMO_REPOSITORY,
    DEMO_VERSION,
    FLAGD_CONFIGMAP,
)

CHAOS_API_VERSION = "chaos-mesh.org/v1alpha1"
COMPONENT_LABEL = "opentelemetry.io/name"
"""The label the chart puts on every component's pods (and uses as the Service selector)."""

_FLAGD_PLAYBOOK = "faults/flagd.yaml"
_PATCH_PLAYBOOK = "faults/object-patch.yaml"
_CREATE_PLAYBOOK = "faults/object-create.yaml"


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


class ImageSlowLoadArgs(FaultArgs):
    """imageSlowLoad: how slow images load."""

    variant: Literal["5sec", "10sec"] = Field(default="10sec", description="Delay variant.")


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
        description="Image for another architecture; default: the workload's arm64-only image.",
    )


class MemoryLimitArgs(WorkloadArgs):
    """A Deployment and the memory limit to give its container."""

    memory: str = Field(default="16Mi", min_length=1, description="Memory limit and request.")


class CpuLimitArgs(WorkloadArgs):
    """A Deployment and the CPU limit to give its container."""

    cpu: str = Field(default="10m", min_length=1, description="CPU limit and request.")


class NetworkPolicyArgs(WorkloadArgs):
    """A Deployment whose ingress is blocked on a port."""

    port: int = Field(ge=1, le=65535, description="The TCP port to block.")


class ServiceSelectorArgs(FaultArgs):
    """A Service whose selector is changed."""

    service: str = Field(min_length=1, description="Service name.")
    value: str = Field(default="wrong", min_length=1, description="New selector label value.")


class ServicePortArgs(FaultArgs):
    """A Service whose targetPort is changed."""

    service: str = Field(min_length=1, description="Service name.")
    port: int = Field(ge=1, le=65535, description="The wrong targetPort.")


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


class CostThresholdArgs(FaultArgs):
    """The hourly budget written into cost-alert-config."""

    threshold: str = Field(
        default="0.03", min_length=1, description="Budget in USD per hour (decimal text)."
    )


class NetworkDelayArgs(WorkloadArgs):
    """Network latency added to a workload's pods."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    latency_ms: int = Field(
        default=2000, ge=1, le=60000, alias="latencyMs", description="Added latency in ms."
    )


class PartitionArgs(WorkloadArgs):
    """A network partition between a workload and a target workload."""

    target: str = Field(min_length=1, description="The workload cut off from `workload`.")


class CpuStressArgs(WorkloadArgs):
    """CPU stress inside a workload's pods."""

    workers: int = Field(default=2, ge=1, le=64, description="Stress workers.")
    load: int = Field(default=100, ge=1, le=100, description="Load per worker, percent.")


class MemoryStressArgs(WorkloadArgs):
    """Memory stress inside a workload's pods."""

    size: str = Field(default="512MB", min_length=1, description="Memory each worker allocates.")


class HttpChaosArgs(WorkloadArgs):
    """HTTP requests to a workload's port (and path) are disturbed."""

    port: int = Field(default=8080, ge=1, le=65535, description="Target HTTP port.")
    path: str = Field(default="*", min_length=1, description="Request path pattern.")


class JvmReturnArgs(WorkloadArgs):
    """A JVM method of a workload returns a chosen value."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    class_name: str = Field(
        default="oteldemo.AdService", alias="class", min_length=1, description="Java class."
    )
    method: str = Field(default="getAds", min_length=1, description="Method name.")
    value: str = Field(default="null", description="The value the method returns.")


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
        )
    ]


def _deployment_patch(
    workload: str, namespace: str, container: dict[str, Any], pod: dict[str, Any] | None = None
) -> list[ObjectChange]:
    pod_spec: dict[str, Any] = (
        {"containers": [{"name": workload, **container}]} if container else {}
    )
    pod_spec.update(pod or {})
    return [
        ObjectChange(
            op="merge-patch",
            api_version="apps/v1",
            kind="Deployment",
            name=workload,
            namespace=namespace,
            body={"spec": {"template": {"spec": pod_spec}}},
        )
    ]


def _create(
    kind: str, api_version: str, name: str, namespace: str, spec: dict[str, Any]
) -> ObjectChange:
    return ObjectChange(
        op="create",
        api_version=api_version,
        kind=kind,
        name=name,
        namespace=namespace,
        body={
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        },
    )


def _selector(workload: str, namespace: str) -> dict[str, Any]:
    return {"namespaces": [namespace], "labelSelectors": {COMPONENT_LABEL: workload}}


def _chaos(kind: str, name: str, namespace: str, spec: dict[str, Any]) -> list[ObjectChange]:
    return [_create(kind, CHAOS_API_VERSION, name, namespace, spec)]


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
    "flagd kafkaQueueProblems: Kafka is flooded and consumers slow down; consumer lag grows.",
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
    )
)
register(
    FaultDefinition(
        id="flagd.image-slow-load",
        description="flagd imageSlowLoad: the frontend proxy delays every image response.",
        mechanism=Mechanism.FLAGD,
        args_model=ImageSlowLoadArgs,
        effect=lambda a, ns: _flag("imageSlowLoad", a.variant, ns),
        playbook=_FLAGD_PLAYBOOK,
        category=FaultCategory.FEATURE_FLAG,
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
    )
)


# ---- kubernetes ------------------------------------------------------------------------------


def _nonexistent_image(args: ImageArgs, namespace: str) -> list[ObjectChange]:
    return _deployment_patch(args.workload, namespace, {"image": args.image})


def _wrong_arch_image(args: WrongArchImageArgs, namespace: str) -> list[ObjectChange]:
    image = args.image or f"{DEMO_REPOSITORY}:{DEMO_VERSION}-{args.workload}-arm64"
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
    return [
        ObjectChange(
            op="merge-patch",
            api_version="apps/v1",
            kind="Deployment",
            name=args.workload,
            namespace=namespace,
            body={"spec": {"replicas": 0}},
        )
    ]


def _service_selector(args: ServiceSelectorArgs, namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="merge-patch",
            kind="Service",
            name=args.service,
            namespace=namespace,
            body={"spec": {"selector": {COMPONENT_LABEL: args.value}}},
        )
    ]


def _service_target_port(args: ServicePortArgs, namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="merge-patch",
            kind="Service",
            name=args.service,
            namespace=namespace,
            body={"spec": {"ports": [{"name": "tcp-service", "targetPort": args.port}]}},
        )
    ]


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
    return _deployment_patch(
        "valkey-cart", namespace, {"args": ["valkey-server", "--requirepass", args.password]}
    )


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


def _cost_threshold(args: CostThresholdArgs, namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="merge-patch",
            kind="ConfigMap",
            name=COST_CONFIGMAP,
            namespace=namespace,
            body={"data": {COST_BUDGET_KEY: args.threshold}},
        )
    ]


_CATEGORIES: dict[str, FaultCategory] = {
    "kubernetes.nonexistent-image": FaultCategory.BAD_IMAGE,
    "kubernetes.wrong-arch-image": FaultCategory.BAD_IMAGE,
    "kubernetes.memory-limit": FaultCategory.RESOURCE_LIMITS,
    "kubernetes.cpu-limit": FaultCategory.RESOURCE_LIMITS,
    "kubernetes.block-ingress": FaultCategory.TRAFFIC_BLOCKED,
    "kubernetes.scale-to-zero": FaultCategory.SCALED_DOWN,
    "kubernetes.service-selector": FaultCategory.SERVICE_MISROUTED,
    "kubernetes.service-target-port": FaultCategory.SERVICE_MISROUTED,
    "kubernetes.env-dependency-address": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.bad-readiness-probe": FaultCategory.BAD_PROBE,
    "kubernetes.nonexistent-node": FaultCategory.UNSCHEDULABLE,
    "kubernetes.valkey-password": FaultCategory.BAD_CONFIGURATION,
    "kubernetes.hpa-misconfiguration": FaultCategory.AUTOSCALING,
    "kubernetes.cost-alert-threshold": FaultCategory.ALERTING_THRESHOLD,
    "chaos.network-delay": FaultCategory.NETWORK_DEGRADED,
    "chaos.network-partition": FaultCategory.NETWORK_DEGRADED,
    "chaos.pod-failure": FaultCategory.PODS_DOWN,
    "chaos.cpu-stress": FaultCategory.RESOURCE_STRESS,
    "chaos.memory-stress": FaultCategory.RESOURCE_STRESS,
    "chaos.http-abort": FaultCategory.APPLICATION_FAILURE,
    "chaos.http-tamper": FaultCategory.APPLICATION_FAILURE,
    "chaos.jvm-return": FaultCategory.APPLICATION_FAILURE,
}
"""What is wrong at each Kubernetes and Chaos Mesh fault's root cause."""

_KUBERNETES_FAULTS: list[tuple[str, str, type[FaultArgs], EffectFn, str]] = [
    (
        "kubernetes.nonexistent-image",
        "Point a Deployment's container at an image that does not exist.",
        ImageArgs,
        _nonexistent_image,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.wrong-arch-image",
        "Point a Deployment's container at an image built for another CPU architecture.",
        WrongArchImageArgs,
        _wrong_arch_image,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.memory-limit",
        "Give a Deployment's container a memory limit below its working set.",
        MemoryLimitArgs,
        _memory_limit,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.cpu-limit",
        "Give a Deployment's container a CPU limit far below its demand.",
        CpuLimitArgs,
        _cpu_limit,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.block-ingress",
        "A NetworkPolicy that denies ingress to a workload's pods on one port.",
        NetworkPolicyArgs,
        _block_ingress,
        _CREATE_PLAYBOOK,
    ),
    (
        "kubernetes.scale-to-zero",
        "Scale a Deployment to zero replicas.",
        WorkloadArgs,
        _scale_to_zero,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.service-selector",
        "Change a Service's selector so that it selects no pods.",
        ServiceSelectorArgs,
        _service_selector,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.service-target-port",
        "Change a Service's targetPort to a port its pods do not listen on.",
        ServicePortArgs,
        _service_target_port,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.env-dependency-address",
        "Set a Deployment's dependency address variable to a wrong address.",
        EnvArgs,
        _env_address,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.bad-readiness-probe",
        "Give a Deployment a readiness probe on a port nothing listens on.",
        ReadinessArgs,
        _readiness,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.nonexistent-node",
        "Pin a Deployment's pods to a node that does not exist.",
        NodeArgs,
        _nonexistent_node,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.valkey-password",
        "valkey-cart starts requiring a password the cart does not send.",
        ValkeyPasswordArgs,
        _valkey_password,
        _PATCH_PLAYBOOK,
    ),
    (
        "kubernetes.hpa-misconfiguration",
        "An HPA's CPU target is set so low that it scales the workload to its maximum.",
        HpaArgs,
        _hpa,
        _CREATE_PLAYBOOK,  # creates the HPA, or updates the one that exists
    ),
    (
        "kubernetes.cost-alert-threshold",
        "The hourly budget in ConfigMap cost-alert-config is set below the real cost.",
        CostThresholdArgs,
        _cost_threshold,
        _PATCH_PLAYBOOK,
    ),
]
for _id, _desc, _model, _fn, _pb in _KUBERNETES_FAULTS:
    register(
        FaultDefinition(
            id=_id,
            description=_desc,
            mechanism=Mechanism.KUBERNETES,
            args_model=_model,
            effect=_fn,
            playbook=_pb,
            category=_CATEGORIES[_id],
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
    return _chaos("NetworkChaos", f"{args.workload}-network-delay", namespace, spec)


def _network_partition(args: PartitionArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "partition",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "direction": "both",
        "target": {"mode": "all", "selector": _selector(args.target, namespace)},
    }
    name = f"{args.workload}-{args.target}-partition"
    return _chaos("NetworkChaos", name, namespace, spec)


def _pod_failure(args: WorkloadArgs, namespace: str) -> list[ObjectChange]:
    spec = {"action": "pod-failure", "mode": "all", "selector": _selector(args.workload, namespace)}
    return _chaos("PodChaos", f"{args.workload}-pod-failure", namespace, spec)


def _cpu_stress(args: CpuStressArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "stressors": {"cpu": {"workers": args.workers, "load": args.load}},
    }
    return _chaos("StressChaos", f"{args.workload}-cpu-stress", namespace, spec)


def _memory_stress(args: MemoryStressArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "stressors": {"memory": {"workers": 1, "size": args.size}},
    }
    return _chaos("StressChaos", f"{args.workload}-memory-stress", namespace, spec)


def _http(
    args: HttpChaosArgs, namespace: str, kind: str, extra: dict[str, Any]
) -> list[ObjectChange]:
    spec = {
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "target": "Request",
        "port": args.port,
        "path": args.path,
        **extra,
    }
    return _chaos("HTTPChaos", f"{args.workload}-http-{kind}", namespace, spec)


def _http_abort(args: HttpChaosArgs, namespace: str) -> list[ObjectChange]:
    return _http(args, namespace, "abort", {"abort": True})


def _http_tamper(args: HttpChaosArgs, namespace: str) -> list[ObjectChange]:
    return _http(args, namespace, "tamper", {"replace": {"body": "eyJ0YW1wZXJlZCI6dHJ1ZX0="}})


def _jvm_return(args: JvmReturnArgs, namespace: str) -> list[ObjectChange]:
    spec = {
        "action": "return",
        "mode": "all",
        "selector": _selector(args.workload, namespace),
        "class": args.class_name,
        "method": args.method,
        "value": args.value,
        "port": 9277,
    }
    return _chaos("JVMChaos", f"{args.workload}-jvm-return", namespace, spec)


_CHAOS_FAULTS: list[tuple[str, str, type[FaultArgs], EffectFn]] = [
    (
        "chaos.network-delay",
        "NetworkChaos delay: packets to a workload's pods are delayed.",
        NetworkDelayArgs,
        _network_delay,
    ),
    (
        "chaos.network-partition",
        "NetworkChaos partition: a workload cannot reach a target workload (nor it, it).",
        PartitionArgs,
        _network_partition,
    ),
    (
        "chaos.pod-failure",
        "PodChaos pod-failure: a workload's pods stop serving.",
        WorkloadArgs,
        _pod_failure,
    ),
    (
        "chaos.cpu-stress",
        "StressChaos cpu: stress workers burn CPU inside a workload's pods.",
        CpuStressArgs,
        _cpu_stress,
    ),
    (
        "chaos.memory-stress",
        "StressChaos memory: stress workers allocate memory inside a workload's pods.",
        MemoryStressArgs,
        _memory_stress,
    ),
    (
        "chaos.http-abort",
        "HTTPChaos abort: HTTP requests to a workload's port are aborted.",
        HttpChaosArgs,
        _http_abort,
    ),
    (
        "chaos.http-tamper",
        "HTTPChaos replace: HTTP request bodies to a workload's port are tampered with.",
        HttpChaosArgs,
        _http_tamper,
    ),
    (
        "chaos.jvm-return",
        "JVMChaos return: a JVM method of a workload returns a chosen value.",
        JvmReturnArgs,
        _jvm_return,
    ),
]
for _cid, _cdesc, _cmodel, _cfn in _CHAOS_FAULTS:
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
        )
    )
