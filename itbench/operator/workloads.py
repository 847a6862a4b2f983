"""Manifests of an image agent's per-trial workload: a Job, its token Secret, a ServiceAccount."""

from __future__ import annotations

import hashlib

from itbench.core.models.agent_submission import ImageRuntime
from itbench.core.models.benchmark_run import EnvironmentSpec, EnvironmentType
from itbench.core.runner.context import session_id_for
from itbench.operator.kubeapi import Json, owner_reference

MAX_DNS_LABEL = 63


def gateway_trial_id(namespace: str, name: str) -> str:
    """A Trial's id at the gateway: `<namespace>.<name>`.

    The operator's gateway serves every namespace it watches, and two namespaces may hold Trials
    of the same name; namespaces never contain a dot, so the id is unique and unambiguous.
    """
    return f"{namespace}.{name}"


def workload_name(trial: str) -> str:
    """The Job and Secret name of a trial's agent (a DNS label, stable per trial)."""
    name = f"{trial}-agent"
    if len(name) <= MAX_DNS_LABEL:
        return name
    digest = hashlib.sha256(trial.encode()).hexdigest()[:8]
    return f"{trial[: MAX_DNS_LABEL - 15].rstrip('-.')}-{digest}-agent"


def service_account(namespace: str, name: str) -> Json:
    """The agents' ServiceAccount: no token mounted and no RBAC binding, so no API access."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "itbench"},
        },
        "automountServiceAccountToken": False,
    }


def agent_account(
    environment: EnvironmentSpec, default: str, cluster: str | None
) -> tuple[str, bool]:
    """The ServiceAccount an image agent's Job runs as, and whether its token is mounted.

    Agents of cluster runs on the operator's own cluster (no kubeconfig Secret) run as the
    cluster agents' account with its token: the chart binds it to a Role in the scenarios'
    namespaces only. On any other cluster that account means nothing, so every other agent runs
    as the default account, without a token, and acts only through the gateway.

    Args:
        environment: The trial's environment.
        default: The agents' account (no RBAC bindings).
        cluster: The cluster agents' account (None: none is configured).
    """
    own_cluster = (
        environment.type == EnvironmentType.CLUSTER
        and environment.kubeconfig_secret_ref is None
        and not environment.kubeconfig_secret_refs
    )
    if own_cluster and cluster is not None:
        return cluster, True
    return default, False


def token_secret(trial: Json, token: str) -> Json:
    """The Secret holding a trial's gateway token (owned by the Trial)."""
    meta = trial["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": workload_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {"app.kubernetes.io/part-of": "itbench"},
            "ownerReferences": [owner_reference(trial)],
        },
        "type": "Opaque",
        "stringData": {
            "token": token,
            "trialId": session_id_for(str(meta["uid"])),
        },
    }


def agent_job(
    trial: Json,
    image: ImageRuntime,
    *,
    gateway_url: str,
    service_account_name: str,
    deadline_seconds: int,
    api_token: bool = False,
) -> Json:
    """The Job running an image agent against one trial through the gateway.

    The pod runs as non-root without privileges; it reaches the trial through the gateway URL
    and the trial's own bearer token (from the token Secret). It has no API token unless
    `api_token`: an agent of a cluster run on the operator's own cluster gets its
    ServiceAccount's token, whose Role (the chart's) lets it act in the scenarios' namespaces
    only.

    Args:
        trial: The Trial object.
        image: The agent's image runtime.
        gateway_url: The gateway URL reachable from the agent's pod.
        service_account_name: The agents' ServiceAccount.
        deadline_seconds: Hard wall-clock limit of the Job.
        api_token: Mount the ServiceAccount's API token in the pod.
    """
    meta = trial["metadata"]
    name = workload_name(meta["name"])
    env: list[Json] = [
        {"name": "ITBENCH_GATEWAY_URL", "value": gateway_url},
        {"name": "ITBENCH_TRIAL_ID", "value": session_id_for(str(meta["uid"]))},
        {"name": "ITBENCH_TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}},
    ]
    env += [{"name": e.name, "value": e.value} for e in image.env]
    container: Json = {
        "name": "agent",
        "image": image.image,
        "env": env,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if image.command:
        container["command"] = list(image.command)
    if image.args:
        container["args"] = list(image.args)
    if image.credentials_secret_ref is not None:
        container["envFrom"] = [{"secretRef": {"name": image.credentials_secret_ref.name}}]
    resources = image.resources.wire()
    if resources.get("requests") or resources.get("limits"):
        container["resources"] = {k: v for k, v in resources.items() if v}
    labels = {
        "app.kubernetes.io/part-of": "itbench",
        "app.kubernetes.io/component": "agent",  # what the chart's NetworkPolicy selects
        "itbench.io/trial": meta["name"][:63].rstrip("-."),
    }
    return trial_job(
        trial,
        name,
        labels=labels,
        deadline_seconds=deadline_seconds,
        pod={
            "serviceAccountName": service_account_name,
            "automountServiceAccountToken": api_token,
            "containers": [container],
        },
    )


def trial_job(trial: Json, name: str, *, labels: Json, deadline_seconds: int, pod: Json) -> Json:
    """A Job of a Trial running one pod once: owned by the Trial, never retried, ended at its
    deadline, removed ten minutes after it finishes.

    Args:
        trial: The Trial.
        name: The Job's name.
        labels: The Job's and its pod's labels.
        deadline_seconds: The Job's activeDeadlineSeconds.
        pod: The pod's spec (restartPolicy Never is added).
    """
    meta = trial["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(trial)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {**pod, "restartPolicy": "Never"},
            },
        },
    }
