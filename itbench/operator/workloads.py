"""Manifests of an image agent's per-trial workload: a Job, its token Secret, a ServiceAccount."""

from __future__ import annotations

import hashlib

from itbench.core.models.agent_submission import ImageRuntime
from itbench.core.runner import session_id_for
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
) -> Json:
    """The Job running an image agent against one trial through the gateway.

    The pod runs as non-root without privileges or an API token; it reaches the trial only
    through the gateway URL and the trial's own bearer token (from the token Secret).

    Args:
        trial: The Trial object.
        image: The agent's image runtime.
        gateway_url: The gateway URL reachable from the agent's pod.
        service_account_name: The agents' ServiceAccount.
        deadline_seconds: Hard wall-clock limit of the Job.
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
        "itbench.io/trial": meta["name"][:63].rstrip("-."),
    }
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
                "spec": {
                    "serviceAccountName": service_account_name,
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    "containers": [container],
                },
            },
        },
    }
