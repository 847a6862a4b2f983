"""The fault definitions of the library (registered on first use of `itbench.core.faults`)."""

from __future__ import annotations

from pydantic import Field

from itbench.core.faults import FaultArgs, FaultDefinition, Mechanism, ObjectChange, register

FLAGD_CONFIGMAP = "flagd-config"


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


class NoArgs(FaultArgs):
    """A fault without arguments."""


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


class NetworkPolicyArgs(WorkloadArgs):
    """A Deployment whose ingress is blocked on a port."""

    port: int = Field(ge=1, le=65535, description="The TCP port to block.")


register(
    FaultDefinition(
        id="flagd.cart-failure",
        description="flagd cartFailure: the cart service fails EmptyCart calls.",
        mechanism=Mechanism.FLAGD,
        args_model=NoArgs,
        effect=lambda _a, ns: _flag("cartFailure", "on", ns),
        playbook="faults/flagd.yaml",
    )
)


def _nonexistent_image(args: ImageArgs, namespace: str) -> list[ObjectChange]:
    return [
        ObjectChange(
            op="merge-patch",
            api_version="apps/v1",
            kind="Deployment",
            name=args.workload,
            namespace=namespace,
            body={
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": args.workload, "image": args.image}]}
                    }
                }
            },
        )
    ]


register(
    FaultDefinition(
        id="kubernetes.nonexistent-image",
        description="Point a Deployment's container at an image that does not exist.",
        mechanism=Mechanism.KUBERNETES,
        args_model=ImageArgs,
        effect=_nonexistent_image,
        playbook="faults/deployment-patch.yaml",
    )
)


def _block_ingress(args: NetworkPolicyArgs, namespace: str) -> list[ObjectChange]:
    name = f"itbench-block-{args.workload}"
    return [
        ObjectChange(
            op="create",
            api_version="networking.k8s.io/v1",
            kind="NetworkPolicy",
            name=name,
            namespace=namespace,
            body={
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "podSelector": {
                        "matchLabels": {"app.kubernetes.io/component": args.workload}
                    },
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {"ports": [{"protocol": "TCP", "port": p}]}
                        for p in range(1, 1)  # nothing allowed on the blocked port
                    ],
                },
            },
        )
    ]


register(
    FaultDefinition(
        id="kubernetes.block-ingress",
        description="A NetworkPolicy that denies all ingress to a workload's pods on a port.",
        mechanism=Mechanism.KUBERNETES,
        args_model=NetworkPolicyArgs,
        effect=_block_ingress,
        playbook="faults/object-create.yaml",
    )
)
