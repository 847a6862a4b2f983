"""Trials on live clusters: the target clusters of a run, leases on them, the cluster
environment whose injection records live on the Trial, and the evidence that outlives the
operator.

A run with `environment.type: cluster` names its cluster by a kubeconfig Secret
(`spec.environment.kubeconfigSecretRef`, key `kubeconfig`), several clusters by
`spec.environment.kubeconfigSecretRefs`, or, without either, runs on the operator's own cluster.
A cluster is known by its API server's URL, so two Secrets naming one server share its capacity.
A trial takes a lease (one of a cluster's `environment.capacity` slots, on whichever of the
run's clusters has the most free) before its environment is built, recorded in the Trial's
`itbench.io/lease` annotation; a cluster that cannot be reached or still carries an ended
trial's faults is passed over and named on the run (`itbench.io/unusable-clusters`, shown as its
`ClustersUsable` condition). What each fault changed is recorded in
`itbench.io/injection-records` as it is injected, and the trial's snapshots (its baseline first)
in a ConfigMap it owns. All of it is read back from the API, so a restarted operator resumes the
trial without injecting again and scores it against the baseline taken before its faults; a
lease is held while its Trial runs or still carries faults: it ends when the Trial ends clean or
is deleted.

A CISO trial runs in a workspace namespace of its own (`itbench.ciso.workspace`), named from the
Trial's namespace, name and UID, so a restarted operator finds the same one. The workspace is
recorded among the injection records before it is built, so it is deleted with the trial's
other injections (when the trial ends, also Errored, or its Trial is deleted), and a deletion
that fails leaves the record, and the cluster counted dirty, until it is done.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from itbench.ciso.workspace import Workspace, WorkspaceEnvironment, uses_workspace
from itbench.core.faults import ObjectChange
from itbench.core.models.benchmark_run import EnvironmentSpec, EnvironmentType
from itbench.core.models.observations import EnvironmentSnapshot
from itbench.core.models.trial import TrialPhase
from itbench.core.runner.context import TrialContext
from itbench.environments.kube.environment import ClusterEnvironment
from itbench.environments.kube.faults import AppliedChange
from itbench.environments.port import EnvironmentFailure
from itbench.execution.evidence import AgentRecord, EvidenceStore, TopologyRecord
from itbench.operator.artefacts import ARTEFACT_LABEL, MAX_NAME
from itbench.operator.bodies import ANNOTATION_PREFIX, bounded
from itbench.operator.kubeapi import BENCHMARK_RUNS, TRIALS, WRITE_ERRORS, Json, KubeApi
from itbench.operator.workloads import service_account

log = logging.getLogger(__name__)

LEASE = f"{ANNOTATION_PREFIX}lease"
"""Annotation of a Trial holding a cluster lease: JSON {cluster, slot, secret, provisionedAt}."""
RECORDS = f"{ANNOTATION_PREFIX}injection-records"
"""Annotation of a Trial on a cluster: JSON {records, order, pending} of its injections."""
KUBECONFIG_KEY = "kubeconfig"
"""The key of a run's kubeconfig Secret."""
SECRET_FIELD = "spec.environment.kubeconfigSecretRef"
SECRETS_FIELD = "spec.environment.kubeconfigSecretRefs"
UNUSABLE = f"{ANNOTATION_PREFIX}unusable-clusters"
"""Annotation of a BenchmarkRun: JSON {secret: why} of its clusters not given new trials when
a trial last looked for a lease (unreachable, or still carrying an ended trial's faults)."""
CLUSTERS_CONDITION = "ClustersUsable"
"""Condition of a cluster run: whether every target cluster could take trials when last tried."""
OWN_CLUSTER = "the operator's own cluster"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
RECORD_LIMIT_BYTES = 200_000
"""Most bytes of a Trial's injection records (annotations of an object share 256 KiB)."""


class EnvironmentUnavailable(Exception):  # noqa: N818 - a state to wait out, not an error
    """No environment can be had now (every lease of the cluster is held); try again later."""


class KubeconfigError(Exception):
    """A kubeconfig Secret is missing or holds no usable kubeconfig (the message says which)."""


# ---- kubeconfigs ----------------------------------------------------------------------------
def kubeconfig_server(text: str) -> str:
    """The API server URL of a kubeconfig's current context.

    Raises:
        KubeconfigError: The text is not a kubeconfig a client can use.
    """
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"is not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise KubeconfigError("is not a kubeconfig (a mapping with clusters and contexts)")
    current = config.get("current-context")
    contexts = {
        c.get("name"): c.get("context") or {}
        for c in config.get("contexts") or []
        if isinstance(c, dict)
    }
    if not current or current not in contexts:
        raise KubeconfigError("has no current-context naming one of its contexts")
    cluster_name = contexts[current].get("cluster")
    for cluster in config.get("clusters") or []:
        if isinstance(cluster, dict) and cluster.get("name") == cluster_name:
            server = (cluster.get("cluster") or {}).get("server")
            if isinstance(server, str) and server.startswith(("https://", "http://")):
                break
            raise KubeconfigError(f"cluster {cluster_name!r} has no server URL")
    else:
        raise KubeconfigError(f"names cluster {cluster_name!r}, which it does not define")
    from kubernetes import config as kube_config

    try:
        kube_config.new_client_from_config_dict(config).close()
    except (kube_config.ConfigException, ValueError, TypeError, OSError) as exc:
        raise KubeconfigError(f"cannot be used by a client ({exc})") from None
    return server


def in_cluster_kubeconfig(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str:
    """A kubeconfig for the cluster this process runs in (its ServiceAccount's token file).

    Raises:
        EnvironmentFailure: The process does not run in a cluster.
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token = service_account_dir / "token"
    if not host or not token.is_file():
        raise EnvironmentFailure(
            f"{SECRET_FIELD} is not set and the operator does not run in a cluster (no "
            "KUBERNETES_SERVICE_HOST or ServiceAccount token): name a kubeconfig Secret"
        )
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cluster: Json = {"server": server}
    ca = service_account_dir / "ca.crt"
    if ca.is_file():
        cluster["certificate-authority"] = str(ca)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": cluster}],
        "users": [{"name": "operator", "user": {"tokenFile": str(token)}}],
        "contexts": [
            {"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "operator"}}
        ],
        "current-context": "in-cluster",
    }
    return yaml.safe_dump(config)


def read_kubeconfig(
    api: KubeApi, namespace: str, environment: EnvironmentSpec, name: str | None = None
) -> str:
    """The kubeconfig text of one of a run's kubeconfig Secrets (`name`; None: the only one).

    Raises:
        KubeconfigError: The Secret is missing, lacks the key, or holds no usable kubeconfig.
    """
    names = environment.secret_names()
    name = name if name is not None else (names[0] if names else None)
    assert name is not None
    where = f"Secret {namespace}/{name} ({secret_field(environment)})"
    if not api.secret_exists(namespace, name):
        raise KubeconfigError(
            f"{where} does not exist; create it with the target cluster's kubeconfig under "
            f"the key {KUBECONFIG_KEY!r}"
        )
    text = api.secret_data(namespace, name).get(KUBECONFIG_KEY)
    if not text:
        raise KubeconfigError(f"{where} has no key {KUBECONFIG_KEY!r} holding a kubeconfig")
    try:
        kubeconfig_server(text)
    except KubeconfigError as exc:
        raise KubeconfigError(f"{where}: its {KUBECONFIG_KEY!r} {exc}") from None
    return text


def secret_field(environment: EnvironmentSpec) -> str:
    """The field of a run's spec that names its kubeconfig Secrets."""
    return SECRETS_FIELD if environment.kubeconfig_secret_refs is not None else SECRET_FIELD


# ---- leases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lease:
    """One slot of a cluster held by a trial.

    Attributes:
        cluster: The cluster's API server URL (its identity).
        slot: Which of the cluster's `capacity` slots.
        secret: Where its kubeconfig came from (`namespace/name`, or the operator's own cluster).
        provisioned_at: When the environment was provisioned (the cluster's clock), once it is.
    """

    cluster: str
    slot: int
    secret: str
    provisioned_at: float | None = None

    def wire(self) -> str:
        """The annotation's text."""
        return json.dumps(
            {
                "cluster": self.cluster,
                "slot": self.slot,
                "secret": self.secret,
                "provisionedAt": self.provisioned_at,
            },
            sort_keys=True,
        )

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Lease | None:
        """The lease a Trial body records (None: none, or not readable)."""
        text = _annotations(body).get(LEASE)
        if not text:
            return None
        try:
            data = json.loads(text)
            at = data.get("provisionedAt")
            return cls(
                cluster=str(data["cluster"]),
                slot=int(data["slot"]),
                secret=str(data.get("secret", "")),
                provisioned_at=float(at) if at is not None else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class InjectionRecords:
    """What a trial's injections changed, as kept on its Trial.

    Attributes:
        records: By injection key, the wire form of each applied change (removal's input).
        order: Every key ever injected, in order.
        pending: A key whose injection started and has not been recorded yet.
        prepared: For the pending key, what undoes it, kept before its playbook ran (so an
            injection cut short, whatever part of it was made, can be rolled back).
    """

    records: dict[str, list[Json]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    pending: str | None = None
    prepared: list[Json] | None = None

    @property
    def outstanding(self) -> bool:
        """Whether the cluster may still carry a change of this trial."""
        return bool(self.records) or self.pending is not None

    def wire(self) -> str:
        """The annotation's text (objects keep their keys' order: a restored object is the one
        read before the change, byte for byte)."""
        data: Json = {"records": self.records, "order": self.order, "pending": self.pending}
        if self.prepared is not None:
            data["prepared"] = self.prepared
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> InjectionRecords:
        """The records a Trial body keeps (empty when it keeps none).

        Raises:
            EnvironmentFailure: The annotation is there but unreadable (what is in the cluster
                is then unknown).
        """
        text = _annotations(body).get(RECORDS)
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(
                records={str(k): list(v) for k, v in (data.get("records") or {}).items()},
                order=[str(k) for k in data.get("order") or []],
                pending=str(data["pending"]) if data.get("pending") is not None else None,
                prepared=(
                    [dict(a) for a in data["prepared"]]
                    if data.get("prepared") is not None
                    else None
                ),
            )
        except (ValueError, TypeError, AttributeError) as exc:
            raise EnvironmentFailure(
                f"the Trial's {RECORDS} annotation is unreadable ({exc})"
            ) from None


def _annotations(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return (body.get("metadata") or {}).get("annotations") or {}


def _final(body: Mapping[str, Any]) -> bool:
    phase = (body.get("status") or {}).get("phase")
    return phase in (TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.ERRORED)


def _trial_ref(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def holders(trials: list[Json], cluster: str, uid: str) -> tuple[dict[int, str], list[str]]:
    """Who holds the leases of a cluster, besides the Trial `uid`.

    A Trial holds its lease while it runs, and after it ends while its injection records say
    the cluster may still carry its faults (a removal that failed).

    Returns:
        The held slots with their Trials, and the Trials among them that ended with faults
        still outstanding (the cluster is dirty until they are removed or released).
    """
    held: dict[int, str] = {}
    dirty: list[str] = []
    for body in trials:
        meta = body.get("metadata") or {}
        if meta.get("uid") == uid:
            continue
        lease = Lease.of(body)
        if lease is None or lease.cluster != cluster:
            continue
        try:
            outstanding = InjectionRecords.of(body).outstanding
        except EnvironmentFailure:
            outstanding = True
        if _final(body):
            if not outstanding:
                continue
            dirty.append(_trial_ref(body))
        held[lease.slot] = _trial_ref(body)
    return held, dirty


# ---- the environment ------------------------------------------------------------------------
@dataclass
class LeasedClusterEnvironment(ClusterEnvironment):
    """The cluster environment of one trial, writing its injection records to the Trial.

    Before a fault is injected its key is noted as pending; once the playbooks are done, what
    they changed replaces the note. A restarted operator adopts the records (`resume`), so a
    keyed injection is never made twice and removal still knows what to put back.

    Attributes:
        api: The operator's API (where the Trial lives).
        trial: The Trial's namespace and name.
        lease: The lease this environment runs under.
    """

    api: KubeApi | None = None
    trial: tuple[str, str] = ("", "")
    lease: Lease | None = None
    _pending: str | None = field(init=False, default=None)
    _prepared: list[Json] | None = field(init=False, default=None)

    def resume(self, records: InjectionRecords) -> None:
        """Take over a trial that a previous operator process ran (after a restart).

        An injection that was under way when that process stopped is rolled back (its
        playbook died with the process; what undoes it was kept before it ran), so the trial
        injects it again on a clean application.

        Raises:
            EnvironmentFailure: That injection cannot be rolled back (records without what
                undoes it, or the undo failed): the cluster may carry part of it.
        """
        rolled_back = records.pending is not None and records.pending not in records.records
        if rolled_back:
            self._roll_back(records)
        for key in records.order:  # in the order they were made: removal undoes them last first
            if key not in self._order:
                self._order.append(key)
        adopted: dict[str, list[Mapping[str, Any]]] = {
            k: list(v) for k, v in records.records.items()
        }
        self.adopt(adopted)
        if self.lease is not None and self.lease.provisioned_at is not None:
            self._provisioned_at = self.lease.provisioned_at
        if rolled_back:
            self._save()  # the Trial no longer says an injection is under way

    def _roll_back(self, records: InjectionRecords) -> None:
        """Undo an injection a previous operator process was making when it stopped.

        Its playbook died with that process, so what the cluster carries is some part of the
        prepared changes: undoing all of them (an undo of a change that was never made writes
        the object as it already is) leaves the cluster as it was before the injection, and the
        trial may inject it again.

        Raises:
            EnvironmentFailure: Nothing says what undoes it (records of an older operator), or
                undoing it failed.
        """
        key = records.pending
        if records.prepared is None or self.faults is None:
            raise EnvironmentFailure(
                f"injection {key} on {self._where()} never finished cleanly (the operator "
                "stopped during it, or it failed and undoing it may have failed too), and its "
                "records do not say what undoes it; the cluster may carry part of that fault. "
                "Check the application against its baseline before running more trials there, "
                "then delete this Trial"
            )
        self.faults.remove([AppliedChange.from_wire(a) for a in records.prepared])
        log.info(
            "rolled back injection %s of %s/%s, cut short by an operator restart",
            key,
            *self.trial,
            extra={"trial": self.trial[1], "injection": key},
        )
        self._pending = None
        self._prepared = None
        self._event_rolled_back(str(key))

    def _event_rolled_back(self, key: str) -> None:
        """Note on the Trial that an injection was rolled back (an Event, when it has an API)."""
        if self.api is None:
            return
        namespace, name = self.trial
        body = self.api.get(TRIALS, namespace, name)
        if body is not None:
            self.api.event(
                body,
                "InjectionRolledBack",
                f"injection {key} was cut short by an operator restart; what it had made was "
                "undone, and the fault is injected again",
            )

    def _where(self) -> str:
        return self.lease.cluster if self.lease is not None else str(self.kubeconfig)

    def provision(self) -> None:
        """Check the cluster and take the baseline; the lease notes when (once)."""
        first = self._provisioned_at is None
        super().provision()
        if first and self.lease is not None and self._provisioned_at is not None:
            self.lease = Lease(
                self.lease.cluster, self.lease.slot, self.lease.secret, self._provisioned_at
            )
            self._annotate({LEASE: self.lease.wire()})

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        """Inject once per key, noting it as pending with what undoes it before its playbook
        runs, and recording what it changed after."""
        self._require()
        if key in self._applied:
            return False
        self._pending = key
        self._prepared = None
        self._save()
        try:
            done = super().inject(key, changes)
        except EnvironmentFailure:
            # The injector tried to undo what it had done, quietly: the key stays pending, so
            # the cluster counts as possibly dirty until this Trial is deleted.
            raise
        self._pending = None
        self._prepared = None
        self._save()
        return done

    def _injecting(self, key: str, prepared: list[AppliedChange]) -> None:
        """Keep what undoes the injection on the Trial before its playbook runs."""
        self._prepared = [a.wire() for a in prepared]
        self._save()

    def remove(self, key: str) -> bool:
        """Remove an injection and drop its record from the Trial."""
        try:
            return super().remove(key)
        finally:
            self._save()

    def _save(self) -> None:
        records = InjectionRecords(self.records(), self.injections(), self._pending, self._prepared)
        text = records.wire()
        if len(text) > RECORD_LIMIT_BYTES:
            raise EnvironmentFailure(
                f"the injection records of {self.trial[0]}/{self.trial[1]} take {len(text)} "
                f"bytes, more than the {RECORD_LIMIT_BYTES} a Trial's annotations can keep"
            )
        self._annotate({RECORDS: text})

    def _records_changed(self) -> None:
        """Keep the records on the Trial (a workspace's is noted before it is built)."""
        self._save()

    def _annotate(self, annotations: dict[str, str]) -> None:
        if self.api is None:
            return
        namespace, name = self.trial
        self.api.annotate(TRIALS, namespace, name, annotations)


@dataclass
class LeasedWorkspaceEnvironment(LeasedClusterEnvironment, WorkspaceEnvironment):
    """The environment of one CISO trial in its workspace, its records on the Trial."""


def connect(
    kind: type[LeasedClusterEnvironment], cluster: str, **fields: Any
) -> LeasedClusterEnvironment:
    """Build a cluster environment (it discovers the cluster's API); an unreachable cluster is
    the environment's failure.

    Raises:
        EnvironmentFailure: The cluster cannot be reached or refuses the credentials.
    """
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        return kind(**fields)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise EnvironmentFailure(f"cluster {cluster} is unreachable: {exc}") from None
    except ApiException as exc:
        raise EnvironmentFailure(
            f"cluster {cluster} refused the discovery of its API ({exc.status} {exc.reason}); "
            "check the kubeconfig's credentials"
        ) from None


# ---- the factory ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A cluster a run targets.

    Attributes:
        secret: Where its kubeconfig comes from (`namespace/name`, or the operator's own
            cluster).
        text: The kubeconfig.
        server: Its API server's URL (the cluster's identity).
    """

    secret: str
    text: str
    server: str


PROBE_SECONDS = 5.0
"""How long a reachability probe of a cluster may take."""
PROBE_REUSE_SECONDS = 30.0
"""How long a probe's result stands."""


def probe(server: str, kubeconfig: str) -> str | None:
    """Why a cluster cannot be reached now (None: its API server answered `/version`)."""
    import urllib3
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config
    from kubernetes.client.exceptions import ApiException

    try:
        api_client = kube_config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
    except (kube_config.ConfigException, ValueError, TypeError, OSError) as exc:
        return f"cluster {server} cannot be used ({exc})"
    try:
        kube_client.VersionApi(api_client).get_code(_request_timeout=PROBE_SECONDS)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return f"cluster {server} is unreachable: {exc}"
    except ApiException as exc:
        return f"cluster {server} refused the probe ({exc.status} {exc.reason})"
    finally:
        api_client.close()
    return None


class ClusterTargets:
    """Builds the environments of cluster trials, leasing a slot of the target cluster first.

    Leases are read from the Trials in the API on every acquisition (under one lock, so two
    trials of this operator never take the same slot), so they survive a restart.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        own_kubeconfig: str | None = None,
        collections_path: str | None = None,
        workdir: Path | None = None,
        injector: tuple[str, str] | None = None,
        agent_account: str | None = None,
        ciso_evaluator: tuple[str, str] | None = None,
        ciso_host_image: str | None = None,
    ) -> None:
        """Bind the factory to the operator's API.

        Args:
            api: The operator's API (Trials and kubeconfig Secrets are read through it).
            own_kubeconfig: Kubeconfig of the operator's own cluster (None: in-cluster config).
            collections_path: Where kubernetes.core is installed (None: Ansible's search path).
            workdir: Where kubeconfigs are written for the playbooks (None: a private temporary
                directory).
            injector: On the operator's own cluster, the ServiceAccount (namespace, name) the
                fault playbooks run as (None: the operator's identity).
            agent_account: On the operator's own cluster, the ServiceAccount (in the Trial's
                namespace) agent actions are carried out as (None: the operator's identity).
            ciso_evaluator: On the operator's own cluster, the ServiceAccount (namespace, name)
                the live CISO evaluation runs as (None: the operator's identity).
            ciso_host_image: The image of the RHEL9 class's evidence Pods on every target (None:
                the default).
        """
        self.api = api
        self.own_kubeconfig = own_kubeconfig
        self.collections_path = collections_path
        self.injector = injector
        self.agent_account = agent_account
        self.ciso_evaluator = ciso_evaluator
        self.ciso_host_image = ciso_host_image or ""
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="itbench-clusters-"))
        self._lock = threading.Lock()
        self._reported: dict[tuple[str, str], str] = {}
        self._probed: dict[str, tuple[float, str | None]] = {}

    def __call__(self, ctx: TrialContext) -> LeasedClusterEnvironment:
        """The environment of a cluster trial (resumed from its lease when it has one).

        Raises:
            EnvironmentUnavailable: Every slot of the run's usable clusters is held by other
                trials.
            EnvironmentFailure: The Trial, its kubeconfig or every cluster of the run cannot be
                used.
        """
        namespace, name = ctx.name.split(".", 1)  # gateway ids are `<namespace>.<name>`
        body = self.api.get(TRIALS, namespace, name)
        if body is None:
            raise EnvironmentFailure(f"Trial {namespace}/{name} no longer exists")
        records = InjectionRecords.of(body)
        lease = Lease.of(body)
        env: LeasedClusterEnvironment | None = None
        if lease is not None:
            target = self._leased_target(namespace, ctx.spec.environment, lease)
            if target is not None and target.server == lease.cluster:
                env = self._connect(target, ctx, namespace, name, lease)
            elif records.outstanding:
                raise EnvironmentFailure(
                    f"Trial {namespace}/{name} has injection records on {lease.cluster}, which "
                    f"its lease's Secret ({lease.secret}) no longer names"
                )
        if env is None:
            env = self._acquire(ctx, namespace, name)
        try:
            env.resume(records)
        except EnvironmentFailure:
            env.close()
            raise
        assert env.lease is not None
        log.info(
            "trial %s/%s leased slot %d of %s",
            namespace,
            name,
            env.lease.slot,
            env.lease.cluster,
            extra={"trial": name, "cluster": env.lease.cluster, "slot": env.lease.slot},
        )
        return env

    def _target(self, namespace: str, environment: EnvironmentSpec, secret: str | None) -> Target:
        """One target cluster of a run: a kubeconfig Secret's (None: the operator's own)."""
        if secret is None:
            if self.own_kubeconfig is not None:
                text = Path(self.own_kubeconfig).read_text(encoding="utf-8")
            else:
                text = in_cluster_kubeconfig()
            try:
                return Target(OWN_CLUSTER, text, kubeconfig_server(text))
            except KubeconfigError as exc:
                raise EnvironmentFailure(f"the kubeconfig of {OWN_CLUSTER} {exc}") from None
        try:
            text = read_kubeconfig(self.api, namespace, environment, secret)
        except KubeconfigError as exc:
            raise EnvironmentFailure(str(exc)) from None
        return Target(f"{namespace}/{secret}", text, kubeconfig_server(text))

    def _leased_target(
        self, namespace: str, environment: EnvironmentSpec, lease: Lease
    ) -> Target | None:
        """The target a Trial's lease was taken on (None: the run no longer names it)."""
        names: list[str | None] = [*environment.secret_names()] or [None]
        for secret in names:
            if (secret is None and lease.secret == OWN_CLUSTER) or (
                lease.secret == f"{namespace}/{secret}"
            ):
                return self._target(namespace, environment, secret)
        return None

    def _connect(
        self, target: Target, ctx: TrialContext, namespace: str, name: str, lease: Lease
    ) -> LeasedClusterEnvironment:
        """The trial's environment on a target. On the operator's own cluster the playbooks
        run as the injector's account and agent actions as the cluster agents' account of the
        Trial's namespace (each when configured); on a registered cluster both use the
        kubeconfig's identity. A CISO trial's namespace is its workspace."""
        own = target.secret == OWN_CLUSTER
        workspace = (
            Workspace.of_trial(ctx.scenario, namespace, name, ctx.uid, ctx.fault_keys())
            if uses_workspace(ctx.scenario)
            else None
        )
        agent: tuple[str, str] | None = None
        if own and self.agent_account is not None:
            agent = (namespace, self.agent_account)
            self.api.ensure(service_account(namespace, self.agent_account))
        in_workspace: dict[str, Any] = (
            {"namespace": workspace.namespace, "workspace": workspace}
            if workspace is not None
            else {"namespace": ctx.namespace}
        )
        return connect(
            LeasedWorkspaceEnvironment if workspace is not None else LeasedClusterEnvironment,
            target.server,
            kubeconfig=self._write(target.text),
            **in_workspace,
            collections_path=self.collections_path,
            injector=self.injector if own else None,
            agent_account=agent,
            ciso_evaluator=self.ciso_evaluator if own else None,
            ciso_host_image=self.ciso_host_image,
            api=self.api,
            trial=(namespace, name),
            lease=lease,
        )

    def _acquire(self, ctx: TrialContext, namespace: str, name: str) -> LeasedClusterEnvironment:
        """Lease a free slot on one of the run's clusters: the one with the most free slots
        first, passing over clusters that cannot be reached or still carry an ended trial's
        faults (the run's `itbench.io/unusable-clusters` annotation names them)."""
        environment = ctx.spec.environment
        capacity = environment.capacity or 1
        secrets: list[str | None] = [*environment.secret_names()] or [None]
        busy: list[str] = []
        unusable: dict[str, str] = {}
        env: LeasedClusterEnvironment | None = None
        with self._lock:
            trials = self.api.list_objects(TRIALS)
            candidates: list[tuple[int, int, Target, int]] = []
            for order, secret in enumerate(secrets):
                label = OWN_CLUSTER if secret is None else f"{namespace}/{secret}"
                try:
                    target = self._target(namespace, environment, secret)
                except EnvironmentFailure as exc:
                    unusable[label] = str(exc)
                    continue
                held, dirty = holders(trials, target.server, ctx.uid)
                if dirty:
                    why = (
                        f"cluster {target.server} may still carry faults of ended trial(s) "
                        f"{', '.join(sorted(dirty))} whose removal failed; delete them (or "
                        "annotate them itbench.io/force-release=true and repair the cluster) "
                        "before running more trials there"
                    )
                    unreachable = self._probe(target)
                    unusable[label] = f"{unreachable}; {why}" if unreachable else why
                    continue
                free = [slot for slot in range(capacity) if slot not in held]
                if not free:
                    busy.append(
                        f"waiting for a lease on cluster {target.server}: its {capacity} slot(s) "
                        f"are held by {', '.join(sorted(held.values()))}"
                    )
                    continue
                candidates.append((-len(free), order, target, free[0]))
            for _, _, target, slot in sorted(candidates, key=lambda c: (c[0], c[1])):
                lease = Lease(cluster=target.server, slot=slot, secret=target.secret)
                try:
                    env = self._connect(target, ctx, namespace, name, lease)
                except EnvironmentFailure as exc:
                    unusable[target.secret] = str(exc)
                    continue
                self.api.annotate(TRIALS, namespace, name, {LEASE: lease.wire()})
                break
        self._report(namespace, ctx.spec.run_ref.name, unusable)
        if env is not None:
            return env
        if busy:
            raise EnvironmentUnavailable(bounded("; ".join(busy)))
        raise EnvironmentFailure(
            bounded("; ".join(f"{k}: {v}" if len(unusable) > 1 else v for k, v in unusable.items()))
        )

    def _probe(self, target: Target) -> str | None:
        """Whether a cluster answers (a result is reused for `PROBE_REUSE_SECONDS`, so trials
        waiting for a lease do not probe an unreachable cluster on every tick)."""
        now = time.monotonic()
        cached = self._probed.get(target.server)
        if cached is not None and now - cached[0] < PROBE_REUSE_SECONDS:
            return cached[1]
        result = probe(target.server, target.text)
        self._probed[target.server] = (now, result)
        return result

    def _report(self, namespace: str, run: str, unusable: dict[str, str]) -> None:
        """Name on the run the clusters not given this trial, when that changed."""
        text = json.dumps(unusable, sort_keys=True)
        key = (namespace, run)
        with self._lock:
            if self._reported.get(key) == text:
                return
            self._reported[key] = text
        self.api.annotate(BENCHMARK_RUNS, namespace, run, {UNUSABLE: text})

    def _write(self, text: str) -> Path:
        """A private file holding a kubeconfig (one per distinct content)."""
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = self.workdir / digest / "kubeconfig"
        if not path.is_file():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            Path(temporary).replace(path)
        return path


def usable_condition(
    environment: EnvironmentSpec, run: Mapping[str, Any]
) -> tuple[bool, str, str] | None:
    """The `ClustersUsable` condition of a run, from its `itbench.io/unusable-clusters`
    annotation: (ok, reason, message); None for a run not on a cluster."""
    if environment.type != EnvironmentType.CLUSTER:
        return None
    text = _annotations(run).get(UNUSABLE)
    try:
        unusable = json.loads(text) if text else {}
    except ValueError:
        unusable = {}
    if not isinstance(unusable, dict) or not unusable:
        count = max(len(environment.secret_names()), 1)
        return True, "Usable", f"every one of the run's {count} cluster(s) took trials when tried"
    named = "; ".join(
        f"Secret {secret}: {why}" if secret != OWN_CLUSTER else f"{OWN_CLUSTER}: {why}"
        for secret, why in sorted(unusable.items())
    )
    return False, "ClusterUnusable", f"not given new trials: {named}"


# ---- evidence that outlives the operator process ------------------------------------------
EVIDENCE = "evidence"
"""The `itbench.io/artefact` label of a Trial's evidence ConfigMap."""
EVIDENCE_BYTES = 900_000
"""Most bytes of a Trial's evidence ConfigMap (the API server refuses objects over 1 MiB)."""


def evidence_name(trial: str) -> str:
    """The name of the ConfigMap holding a cluster Trial's snapshots (stable per Trial name)."""
    name = f"{trial}-evidence"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(trial.encode()).hexdigest()[:12]
    return f"{trial[: MAX_NAME - 22].rstrip('-.')}-{digest}-evidence"


def _evidence_key(key: str) -> str:
    # `<uid>/baseline`, `<uid>/sample/3`: ConfigMap keys are `[-._a-zA-Z0-9]+`.
    return key.split("/", 1)[-1].replace("/", "-") + ".json.gz.b64"


class PersistedEvidence:
    """The evidence of a cluster trial: in the operator's memory, with every snapshot (the
    baseline and the observation window's samples) also kept gzip'd in a ConfigMap the Trial
    owns, so that an operator restarted mid-trial scores it against the baseline taken before
    the faults went in. Agent records and topologies stay in memory (a restarted operator
    reopens the agent's session and records the topology again when it scores).

    A snapshot that would take the ConfigMap over `EVIDENCE_BYTES` is kept in memory only and
    logged: if the operator then restarts, a missing baseline ends the trial Errored
    (PlatformError, its faults removed) and missing samples are taken again when it resumes.
    """

    def __init__(self, inner: EvidenceStore, api: KubeApi, trial: Json) -> None:
        """Bind the store to one Trial.

        Args:
            inner: The operator's in-memory evidence.
            api: Where the ConfigMap is written.
            trial: The Trial (apiVersion, kind and metadata with its UID): the owner.
        """
        self.inner = inner
        self.api = api
        self.trial = trial
        meta = trial["metadata"]
        self.namespace = str(meta["namespace"])
        self.name = evidence_name(str(meta["name"]))
        self._kept: dict[str, str] | None = None
        self._unsaved: dict[str, str] = {}
        self._lock = threading.Lock()

    def _stored(self) -> dict[str, str]:
        if self._kept is None:
            self._kept = dict(self.api.config_map(self.namespace, self.name) or {})
        return self._kept

    def put_snapshot(self, key: str, snapshot: EnvironmentSnapshot) -> bool:
        """Store a snapshot (first write wins), in memory and in the Trial's ConfigMap (a
        refused write is logged and tried again with the next snapshot)."""
        if not self.inner.put_snapshot(key, snapshot):
            return False
        with self._lock:
            kept = self._stored()
            field = _evidence_key(key)
            if field in kept:
                return True
            text = base64.b64encode(
                gzip.compress(snapshot.model_dump_json(by_alias=True).encode(), mtime=0)
            ).decode()
            data = {**kept, **self._unsaved}
            size = sum(len(k) + len(v) for k, v in data.items()) + len(field) + len(text)
            if size > EVIDENCE_BYTES:
                log.warning(
                    "snapshot %s not persisted: ConfigMap %s/%s would take %d bytes, more than "
                    "%d; a restarted operator will not find it",
                    key,
                    self.namespace,
                    self.name,
                    size,
                    EVIDENCE_BYTES,
                    extra={"trial": self.trial["metadata"]["name"]},
                )
                return True
            data[field] = text
            try:
                self.api.put_config_map(
                    self.namespace, self.name, data, self.trial, labels={ARTEFACT_LABEL: EVIDENCE}
                )
            except WRITE_ERRORS as exc:
                log.warning(
                    "snapshot %s not persisted yet (%s); retrying with the next one",
                    key,
                    bounded(str(exc), 200),
                    extra={"trial": self.trial["metadata"]["name"]},
                )
                self._unsaved[field] = text
                return True
            self._kept = data
            self._unsaved.clear()
        return True

    def snapshot(self, key: str) -> EnvironmentSnapshot | None:
        """The snapshot under key: from memory, else from the Trial's ConfigMap."""
        found = self.inner.snapshot(key)
        if found is not None:
            return found
        with self._lock:
            text = self._stored().get(_evidence_key(key))
        if text is None:
            return None
        try:
            snapshot = EnvironmentSnapshot.model_validate_json(
                gzip.decompress(base64.b64decode(text))
            )
        except (ValueError, OSError) as exc:
            log.warning(
                "snapshot %s in ConfigMap %s/%s is unreadable (%s)",
                key,
                self.namespace,
                self.name,
                exc,
            )
            return None
        self.inner.put_snapshot(key, snapshot)
        return snapshot

    def put_agent(self, key: str, record: AgentRecord) -> bool:
        """Store the agent's record (in memory)."""
        return self.inner.put_agent(key, record)

    def agent(self, key: str) -> AgentRecord | None:
        """The agent's record (from memory)."""
        return self.inner.agent(key)

    def put_topology(self, key: str, record: TopologyRecord) -> bool:
        """Store a topology record (in memory)."""
        return self.inner.put_topology(key, record)

    def topology(self, key: str) -> TopologyRecord | None:
        """The topology record (from memory)."""
        return self.inner.topology(key)


def lease_condition(trial: Mapping[str, Any]) -> tuple[bool, str, str] | None:
    """The `Leased` condition of a cluster Trial: which cluster and slot it runs on (None: it
    holds no lease)."""
    lease = Lease.of(trial)
    if lease is None:
        return None
    where = f"Secret {lease.secret}" if lease.secret != OWN_CLUSTER else OWN_CLUSTER
    return True, "ClusterLeased", f"slot {lease.slot} of cluster {lease.cluster} ({where})"


def trial_evidence(
    inner: EvidenceStore, api: KubeApi, namespace: str, name: str, uid: str
) -> PersistedEvidence:
    """The evidence store of a cluster Trial (its snapshots survive an operator restart)."""
    from itbench.core.models.base import GROUP, VERSION

    owner: Json = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Trial",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }
    return PersistedEvidence(inner, api, owner)
