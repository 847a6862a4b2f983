"""The operator's only door to the Kubernetes API: typed reads and idempotent writes.

Everything else in `itbench.operator` asks this module; nothing else constructs a client.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from itbench.core.models.base import GROUP, VERSION
from itbench.operator.bodies import bounded

log = logging.getLogger(__name__)

WRITE_ERRORS: tuple[type[Exception], ...] = (ApiException, HTTPError, OSError)
"""What a call to the API raises when the server refuses it or cannot be reached."""

Json = dict[str, Any]

SCENARIOS = "scenarios"
AGENT_SUBMISSIONS = "agentsubmissions"
BENCHMARK_RUNS = "benchmarkruns"
TRIALS = "trials"
COMPONENT = "itbench-operator"


def object_ref(body: Json) -> Json:
    """An `involvedObject` / owner-style reference to an object body."""
    meta = body.get("metadata", {})
    ref: Json = {
        "apiVersion": body.get("apiVersion", f"{GROUP}/{VERSION}"),
        "kind": body.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def owner_reference(body: Json) -> Json:
    """A controller owner reference to an object body (dependents go when it goes)."""
    ref = object_ref(body)
    ref.pop("namespace", None)
    return {**ref, "controller": True, "blockOwnerDeletion": True}


def status_patch(new: Json, old: Json | None) -> Json:
    """A merge patch turning status `old` into `new` (keys that disappeared are nulled)."""
    patch: Json = dict(new)
    for key in old or {}:
        if key not in new:
            patch[key] = None
    return patch


class KubeApi:
    """Reads and writes ITBench resources, Secrets, ConfigMaps, Jobs and Events."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        """Wrap an API client (built by the entry point from a kubeconfig or in-cluster config).

        Args:
            api_client: The official client's ApiClient.
        """
        self.api_client = api_client
        self.custom = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)
        self.batch = k8s.BatchV1Api(api_client)

    # ---- ITBench resources ---------------------------------------------------------------
    def get(self, plural: str, namespace: str | None, name: str) -> Json | None:
        """One custom object, or None when it does not exist."""
        try:
            if namespace is None:
                obj = self.custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
            else:
                obj = self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name
                )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(obj)

    def list_objects(
        self, plural: str, namespace: str | None = None, label_selector: str = ""
    ) -> list[Json]:
        """Custom objects of a kind (cluster-wide when namespace is None)."""
        if namespace is None:
            result = self.custom.list_cluster_custom_object(
                GROUP, VERSION, plural, label_selector=label_selector
            )
        else:
            result = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, label_selector=label_selector
            )
        return [dict(item) for item in result.get("items", [])]

    def create(self, plural: str, namespace: str, body: Json) -> bool:
        """Create a namespaced custom object; False when it already exists (idempotent)."""
        try:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def patch_status(
        self, plural: str, namespace: str | None, name: str, new: Json, old: Json | None
    ) -> None:
        """Write an object's status (through the status subresource) when it changed."""
        if new == (old or {}):
            return
        body = {"status": status_patch(new, old)}
        try:
            if namespace is None:
                self.custom.patch_cluster_custom_object_status(GROUP, VERSION, plural, name, body)
            else:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, plural, name, body
                )
        except ApiException as exc:
            if exc.status != 404:  # deleted meanwhile: nothing left to report on
                raise

    def annotate(self, plural: str, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Set annotations on a namespaced custom object."""
        body = {"metadata": {"annotations": annotations}}
        try:
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, body
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def delete(self, plural: str, namespace: str, name: str) -> bool:
        """Delete a namespaced custom object; False when it was already gone."""
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ---- core objects --------------------------------------------------------------------
    def secret_exists(self, namespace: str, name: str) -> bool:
        """Whether a Secret exists."""
        try:
            self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """A Secret's keys and decoded values ({} when it is absent)."""
        import base64

        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        data.update(secret.string_data or {})
        return data

    def put_config_map(
        self,
        namespace: str,
        name: str,
        data: dict[str, str],
        owner: Json | None = None,
        *,
        binary_data: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """Create or replace a ConfigMap (owned by `owner` when given).

        Args:
            namespace: Its namespace.
            name: Its name.
            data: Text keys.
            owner: The object it is garbage-collected with.
            binary_data: Base64-encoded binary keys.
            labels: Labels besides `app.kubernetes.io/part-of: itbench`.
        """
        meta: Json = {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "itbench", **(labels or {})},
        }
        if owner is not None:
            meta["ownerReferences"] = [owner_reference(owner)]
        body: Json = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        if binary_data:
            body["binaryData"] = binary_data
        try:
            self.core.create_namespaced_config_map(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.replace_namespaced_config_map(name, namespace, body)

    def config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's text keys, or None when it does not exist."""
        try:
            found = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found.data or {})

    def config_map_names(self, namespace: str, label_selector: str) -> list[str]:
        """Names of the ConfigMaps in a namespace that match a label selector."""
        found = self.core.list_namespaced_config_map(namespace, label_selector=label_selector)
        return [item.metadata.name for item in found.items]

    def ensure(self, manifest: Json) -> bool:
        """Create a core/v1 or batch/v1 object unless it exists; True when it was created."""
        kind = manifest["kind"]
        namespace = manifest["metadata"]["namespace"]
        create = {
            "ServiceAccount": self.core.create_namespaced_service_account,
            "Secret": self.core.create_namespaced_secret,
            "Job": self.batch.create_namespaced_job,
        }[kind]
        try:
            create(namespace, manifest)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def job(self, namespace: str, name: str) -> Json | None:
        """A Job as the API serves it (camelCase keys), or None when it does not exist."""
        try:
            found = self.batch.read_namespaced_job(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        served: Json = self.api_client.sanitize_for_serialization(found)
        return served

    def job_pods(self, namespace: str, job: str) -> list[Json]:
        """The pods of a Job (by the `job-name` label the Job controller sets), as served."""
        found = self.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}")
        return [self.api_client.sanitize_for_serialization(p) for p in found.items]

    def remove(self, kind: str, namespace: str, name: str) -> bool:
        """Delete a Secret or Job (its pods in the background); False when it was gone."""
        delete = {
            "Secret": self.core.delete_namespaced_secret,
            "Job": self.batch.delete_namespaced_job,
        }[kind]
        try:
            delete(name, namespace, propagation_policy="Background")
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def event(self, body: Json, reason: str, message: str, *, warning: bool = False) -> None:
        """Post an Event about an object (cluster-scoped objects report in `default`)."""
        ref = object_ref(body)
        namespace = ref.get("namespace", "default")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref['name']}.", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": bounded(message),
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(namespace, event)
        except ApiException as exc:  # an event is best effort: never fail a reconcile on it
            log.warning("event not posted", extra={"object": ref["name"], "status": exc.status})

    def events(self, namespace: str, name: str) -> list[Json]:
        """Events about an object, oldest first (for tests and `describe`-like views)."""
        result = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        return [self.api_client.sanitize_for_serialization(e) for e in result.items]


def connect(kubeconfig: str | None = None) -> KubeApi:
    """Build the API door for an entry point: in-cluster config, else a kubeconfig.

    Args:
        kubeconfig: Path of a kubeconfig (None: in-cluster, then $KUBECONFIG or ~/.kube/config).
    """
    from kubernetes import config

    if kubeconfig is None:
        try:
            config.load_incluster_config()
            return KubeApi(k8s.ApiClient())
        except config.ConfigException:
            pass
    return KubeApi(config.new_client_from_config(config_file=kubeconfig))
