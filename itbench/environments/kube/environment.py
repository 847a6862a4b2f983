"""The `cluster` environment: the `Environment` port on a live Kubernetes cluster, reached by a
kubeconfig.

Objects are read and written with the official client; faults are injected and removed by the
fault playbooks (`itbench.environments.kube.faults`), the record of what they changed kept by
the platform (`records`), never on agent-visible objects; alerts, metrics, logs and traces come
from the stack's Prometheus, Loki and Jaeger over their HTTP APIs with httpx (through the API
server's Service proxy unless their URLs are given). A served twin's kubeconfig names its clock's
speed (`itbench.io/twin`): PromQL durations and times crossing to its Prometheus are mapped
(`itbench.environments.kube.clock`).

Agent actions have kubectl's semantics and messages: the objects an action reads are copied
from the cluster into a scratch store, the simulator's action code runs on them, and every
object it changed is written back (with its resourceVersion: a concurrent change is a conflict,
never overwritten). The environment is provisioned once, by the stack playbooks; `provision`
checks it and takes the baseline, it never reinstalls.

Identities: the kubeconfig's identity reads. Given an injector ServiceAccount, the fault
playbooks run as it (a fresh short-lived token from the TokenRequest API, in a kubeconfig written
to a private directory made for each playbook run and removed after it); given an agent
ServiceAccount, agent actions are read and written as it, so the cluster's own RBAC backs the
gateway's guardrails; given a CISO evaluator ServiceAccount, the live CISO evaluation installs
and removes its audit policies and counterpart namespace as it (`ciso_evaluator_api`).
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from itbench.core.alert_rules import EVALUATION_INTERVAL_SECONDS, rules_fingerprint
from itbench.core.faults import ObjectChange
from itbench.core.inventory import STATE_KINDS, object_states
from itbench.core.models.observations import (
    ActionResult,
    ActionVerb,
    AgentAction,
    Alert,
    AlertInterval,
    AlertState,
    EnvironmentSnapshot,
    WorkloadHealth,
)
from itbench.core.shop import (
    request_cost_per_hour,
    service_calls,
)
from itbench.environments.kube.baseline import (
    CONTROLLER_KINDS,
    Key,
    baseline_bytes,
    differences,
    read_baseline,
)
from itbench.environments.kube.clock import ClusterClock, scale_promql
from itbench.environments.kube.endpoints import (
    ServiceRef,
    TelemetryUrls,
    flagd_service,
    jaeger_service,
    loki_service,
    prometheus_service,
)
from itbench.environments.kube.faults import (
    AnsiblePlaybookRunner,
    AppliedChange,
    ClusterFaults,
    KubeObjectReader,
    PlaybookError,
    PlaybookRunner,
    restorable,
)
from itbench.environments.kube.scoping import scope_logql, scope_promql
from itbench.environments.port import EnvironmentFailure
from itbench.environments.sim.actions import perform
from itbench.environments.sim.cluster import Cluster
from itbench.environments.sim.objects import (
    INJECTOR_KINDS,
    KIND_INFO,
    canonical_kind,
    clone,
    involves,
    parse_cpu,
    parse_memory,
)

log = logging.getLogger(__name__)

Json = dict[str, Any]

TWIN_EXTENSION = "itbench.io/twin"
"""The kubeconfig cluster extension a served twin writes (its clock, its endpoints)."""
HTTP_TIMEOUT_SECONDS = 30.0
TOKEN_WALL_SECONDS = 1800.0
"""Wall seconds a requested ServiceAccount token is valid for; it is renewed at half its life,
so a playbook run (ansible-runner stops one after 300 s) never outlives its token."""
MIN_TOKEN_SECONDS = 600
"""The shortest token lifetime kube-apiserver grants (TokenRequest expirationSeconds)."""


def _quantity(text: object, parse: Any) -> float:
    try:
        return float(parse(text)) if text is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def twin_extension(kubeconfig: Path, context: str | None = None) -> Json:
    """The `itbench.io/twin` extension of a kubeconfig's current cluster ({} for a real one)."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
    name = context or config.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    cluster_name = contexts.get(name, {}).get("cluster")
    for cluster in config.get("clusters") or []:
        if cluster.get("name") == cluster_name:
            for ext in (cluster.get("cluster") or {}).get("extensions") or []:
                if ext.get("name") == TWIN_EXTENSION:
                    return dict(ext.get("extension") or {})
    return {}


def account_kubeconfig(kubeconfig: Path, user: str, token: str) -> Json:
    """A kubeconfig for the current cluster of `kubeconfig`, authenticating with a bearer token.

    The cluster entry (server, certificate authority, extensions) is copied as it is; the user
    is replaced, so nothing of the original identity is kept.
    """
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
    name = config.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    context = contexts.get(name) or {}
    clusters = [c for c in config.get("clusters") or [] if c.get("name") == context.get("cluster")]
    if not clusters:
        raise EnvironmentFailure(f"kubeconfig {kubeconfig} has no cluster for its current context")
    out_context: Json = {"cluster": clusters[0]["name"], "user": user}
    if context.get("namespace"):
        out_context["namespace"] = context["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [clusters[0]],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": out_context}],
        "current-context": user,
    }


@dataclass
class AccountTokens:
    """Short-lived tokens of one ServiceAccount from the TokenRequest API, renewed at half life.

    Lifetimes are the cluster's seconds (a served twin's clock runs fast), so a token requested
    for `wall_seconds` of real time lasts that long whatever the cluster's speed.

    Attributes:
        api: An API client allowed to create the account's `serviceaccounts/token`.
        namespace: The account's namespace.
        name: The account's name.
        clock: The cluster's clock.
        wall_seconds: Real seconds each token is valid for.
    """

    api: Any
    namespace: str
    name: str
    clock: ClusterClock
    wall_seconds: float = TOKEN_WALL_SECONDS
    _token: str | None = field(init=False, default=None)
    _renew_at: float = field(init=False, default=0.0)

    @property
    def user(self) -> str:
        """The user name the tokens authenticate as."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def token(self) -> str:
        """A token valid for at least half of `wall_seconds` from now.

        Raises:
            EnvironmentFailure: The account does not exist, the caller may not request its
                tokens, or the cluster is unreachable.
        """
        import kubernetes
        import urllib3

        now = self.clock.now()
        if self._token is not None and now < self._renew_at:
            return self._token
        seconds = max(MIN_TOKEN_SECONDS, math.ceil(self.wall_seconds * self.clock.speed))
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        where = f"ServiceAccount {self.namespace}/{self.name}"
        try:
            answer = kubernetes.client.CoreV1Api(self.api).create_namespaced_service_account_token(
                self.name, self.namespace, body
            )
        except kubernetes.client.ApiException as exc:
            raise EnvironmentFailure(
                f"requesting a token of {where} failed ({exc.status} {exc.reason}): the account "
                "must exist and the operator may create its serviceaccounts/token (the chart "
                "creates both)"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise EnvironmentFailure(
                f"requesting a token of {where}: the cluster is unreachable: {exc}"
            ) from None
        self._token = str(answer.status.token)
        self._renew_at = now + seconds / 2
        return self._token


@dataclass
class AccountPlaybookRunner:
    """Runs the fault playbooks as a ServiceAccount.

    Each run gets a private directory of its own, holding a kubeconfig with a fresh token of
    the account (mode 0600), removed when the run ends; the playbooks see no other identity.

    Attributes:
        kubeconfig: The cluster's kubeconfig (its cluster entry is used, not its user).
        tokens: Tokens of the account.
        collections_path: Where kubernetes.core is installed (None: Ansible's search path).
    """

    kubeconfig: Path
    tokens: AccountTokens
    collections_path: str | None = None

    def run(self, playbook: str, extravars: Mapping[str, Any]) -> None:
        """Run a playbook as the account.

        Raises:
            PlaybookError: The playbook failed, or no token of the account could be had.
        """
        try:
            config = account_kubeconfig(self.kubeconfig, "injector", self.tokens.token())
        except EnvironmentFailure as exc:
            raise PlaybookError(f"{playbook}: {exc}") from None
        private = Path(tempfile.mkdtemp(prefix="itbench-injector-"))
        try:
            path = private / "kubeconfig"
            path.touch(mode=0o600)
            path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
            runner = AnsiblePlaybookRunner(str(path), collections_path=self.collections_path)
            runner.run(playbook, extravars)
        finally:
            shutil.rmtree(private, ignore_errors=True)


@dataclass
class ClusterEnvironment:
    """The Environment port on a live cluster.

    Attributes:
        kubeconfig: The cluster's kubeconfig (its current context).
        namespace: The application's namespace.
        urls: Telemetry API URLs (None each: through the API server's Service proxy; a served
            twin's kubeconfig supplies its own).
        collections_path: Where kubernetes.core is installed (None: Ansible's search path).
        rollout_timeout: Seconds a fault's rollout may take.
        chaos_timeout: Seconds Chaos Mesh may take to report AllInjected.
        faults: The fault injector (default: the playbooks, ansible-runner on the kubeconfig).
        injector: The ServiceAccount (namespace, name) the fault playbooks run as (None: the
            kubeconfig's identity). The kubeconfig's identity requests its tokens.
        agent_account: The ServiceAccount (namespace, name) agent actions are read and written
            as (None: the kubeconfig's identity).
        ciso_evaluator: The ServiceAccount (namespace, name) the live CISO evaluation runs as
            (None: the kubeconfig's identity).
        ciso_host_image: The image of the RHEL9 class's evidence Pods ('': the default,
            `itbench.ciso.host_pod.DEFAULT_IMAGE`).
    """

    kubeconfig: Path
    namespace: str = "otel-demo"
    urls: TelemetryUrls = field(default_factory=TelemetryUrls)
    collections_path: str | None = None
    rollout_timeout: int = 300
    chaos_timeout: int = 120
    faults: ClusterFaults | None = None
    injector: tuple[str, str] | None = None
    agent_account: tuple[str, str] | None = None
    ciso_evaluator: tuple[str, str] | None = None
    ciso_host_image: str = ""
    clock: ClusterClock = field(init=False)
    _api: Any = field(init=False, default=None)
    _agent_tokens: AccountTokens | None = field(init=False, default=None)
    _agent_api: tuple[str, Any] | None = field(init=False, default=None)
    _evaluator_tokens: AccountTokens | None = field(init=False, default=None)
    _http: dict[str, httpx.Client] = field(init=False, default_factory=dict)
    _applied: dict[str, list[AppliedChange]] = field(init=False, default_factory=dict)
    _order: list[str] = field(init=False, default_factory=list)
    _provisioned_at: float | None = field(init=False, default=None)
    _baseline: dict[Key, bytes] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        import kubernetes

        if not self.kubeconfig.is_file():
            raise EnvironmentFailure(f"kubeconfig {self.kubeconfig} does not exist")
        twin = twin_extension(self.kubeconfig)
        self.clock = ClusterClock(
            speed=float(twin.get("speed", 1.0)),
            cluster_origin=float(twin.get("clusterOrigin", 0.0)),
            wall_origin=float(twin.get("wallOrigin", 0.0)),
        )
        self.urls = TelemetryUrls(
            prometheus=self.urls.prometheus or twin.get("prometheus"),
            loki=self.urls.loki or twin.get("loki"),
            jaeger=self.urls.jaeger or twin.get("jaeger"),
            flagd=self.urls.flagd or twin.get("flagd"),
        )
        try:
            self._api = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        except (kubernetes.config.ConfigException, OSError, ValueError) as exc:
            raise EnvironmentFailure(f"kubeconfig {self.kubeconfig}: {exc}") from None
        if self.agent_account is not None:
            self._agent_tokens = AccountTokens(self._api, *self.agent_account, clock=self.clock)
        if self.ciso_evaluator is not None:
            self._evaluator_tokens = AccountTokens(
                self._api, *self.ciso_evaluator, clock=self.clock
            )
        if self.faults is None:
            runner: PlaybookRunner = AnsiblePlaybookRunner(
                kubeconfig=str(self.kubeconfig), collections_path=self.collections_path
            )
            if self.injector is not None:
                runner = AccountPlaybookRunner(
                    self.kubeconfig,
                    AccountTokens(self._api, *self.injector, clock=self.clock),
                    collections_path=self.collections_path,
                )
            self.faults = ClusterFaults(
                reader=KubeObjectReader(self._api),
                runner=runner,
                rollout_timeout=self.rollout_timeout,
                chaos_timeout=self.chaos_timeout,
            )

    def close(self) -> None:
        """Close the HTTP clients and the API client."""
        for client in self._http.values():
            client.close()
        self._http.clear()
        if self._agent_api is not None:
            self._agent_api[1].close()
            self._agent_api = None
        if self._api is not None:
            self._api.close()

    # ---- time ---------------------------------------------------------------------------------
    def now(self) -> datetime:
        """The cluster's time (a served twin's runs at its speed)."""
        return datetime.fromtimestamp(self.clock.now(), tz=UTC)

    def advance(self, seconds: float) -> None:
        """Wait while the cluster's clock moves by seconds."""
        if seconds < 0:
            raise ValueError(f"cannot advance by {seconds} seconds")
        time.sleep(self.clock.wall_seconds(seconds))

    # ---- plumbing -----------------------------------------------------------------------------
    def _core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(self._api)

    def _acting_api(self) -> Any:
        """The API client agent actions go through: the agent account's (renewed with its
        token), else the kubeconfig's."""
        if self._agent_tokens is None:
            return self._api
        import kubernetes

        token = self._agent_tokens.token()
        if self._agent_api is not None and self._agent_api[0] == token:
            return self._agent_api[1]
        config = account_kubeconfig(self.kubeconfig, "agent", token)
        client = kubernetes.config.new_client_from_config_dict(config)
        if self._agent_api is not None:
            self._agent_api[1].close()
        self._agent_api = (token, client)
        return client

    def ciso_evaluator_api(self) -> Any:
        """A new API client for one live CISO evaluation (the caller closes it): the evaluator
        account's, with a fresh token, else the kubeconfig's.

        Raises:
            EnvironmentFailure: No token of the evaluator account could be had, or the
                kubeconfig cannot be used.
        """
        import kubernetes

        if self._evaluator_tokens is None:
            try:
                return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
            except (kubernetes.config.ConfigException, OSError, ValueError) as exc:
                raise EnvironmentFailure(f"kubeconfig {self.kubeconfig}: {exc}") from None
        token = self._evaluator_tokens.token()
        config = account_kubeconfig(self.kubeconfig, "ciso-evaluator", token)
        return kubernetes.config.new_client_from_config_dict(config)

    def _resource(self, kind: str, api: Any = None) -> Any:
        from kubernetes.dynamic import DynamicClient
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        info = KIND_INFO.get(kind)
        if info is None:
            raise ValueError(f'the server doesn\'t have a resource type "{kind}"')
        try:
            return DynamicClient(api or self._api).resources.get(api_version=info[0], kind=kind)
        except ResourceNotFoundError:
            raise ValueError(f'the server doesn\'t have a resource type "{kind}"') from None

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call the API; an unreachable cluster is the environment's failure."""
        import urllib3

        try:
            return fn(*args, **kwargs)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise EnvironmentFailure(f"{what}: the cluster is unreachable: {exc}") from None

    def _list(self, kind: str, api: Any = None) -> list[Json]:
        resource = self._resource(kind, api)
        listed = self._call(
            f"listing {kind}",
            resource.get,
            **({"namespace": self.namespace} if resource.namespaced else {}),
        )
        items: list[Json] = listed.to_dict().get("items") or []
        for item in items:
            item.setdefault("apiVersion", KIND_INFO[kind][0])
            item.setdefault("kind", kind)
        return items

    def _client(self, service: str, ref: ServiceRef, url: str | None) -> httpx.Client:
        client = self._http.get(service)
        if client is not None:
            return client
        if url is not None:
            client = httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_SECONDS)
        else:
            config = self._api.configuration
            headers = {}
            token = (config.api_key or {}).get("authorization") or (config.api_key or {}).get(
                "BearerToken"
            )
            if token:
                headers["Authorization"] = token if " " in token else f"Bearer {token}"
            verify: ssl.SSLContext | bool = config.verify_ssl
            if config.ssl_ca_cert:
                verify = ssl.create_default_context(cafile=config.ssl_ca_cert)
            cert = (config.cert_file, config.key_file) if config.cert_file else None
            client = httpx.Client(
                base_url=config.host + ref.proxy_path(),
                headers=headers,
                verify=verify,
                cert=cert,
                timeout=HTTP_TIMEOUT_SECONDS,
            )
        self._http[service] = client
        return client

    def _get(self, service: str, path: str, params: Mapping[str, Any]) -> Any:
        return self._request(service, "GET", path, params=dict(params))

    def _request(self, service: str, method: str, path: str, **kwargs: Any) -> Any:
        refs = {
            "prometheus": (prometheus_service(), self.urls.prometheus),
            "loki": (loki_service(), self.urls.loki),
            "jaeger": (jaeger_service(), self.urls.jaeger),
            "flagd": (flagd_service(self.namespace), self.urls.flagd),
        }
        ref, url = refs[service]
        try:
            answer = self._client(service, ref, url).request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise EnvironmentFailure(f"{service} is unreachable: {exc}") from None
        if answer.status_code == 400 or answer.status_code == 422:
            try:
                message = answer.json().get("error") or answer.text
            except ValueError:
                message = answer.text
            raise ValueError(str(message)[:500])
        if answer.status_code >= 300:
            raise EnvironmentFailure(
                f"{service} answered {answer.status_code}: {answer.text[:200]}"
            )
        return answer.json()

    # ---- lifecycle ----------------------------------------------------------------------------
    def provision(self) -> None:
        """Check that the shop runs (installed by the stack playbooks) and take the baseline.

        Raises:
            EnvironmentFailure: The cluster is unreachable, or the namespace or shop is missing.
        """
        if self._provisioned_at is not None:
            return
        import kubernetes

        try:
            self._call("reading the namespace", self._core().read_namespace, self.namespace)
        except kubernetes.client.ApiException as exc:
            raise EnvironmentFailure(
                f"namespace {self.namespace} not found: install the stack first ({exc.reason})"
            ) from None
        deployments = self._list("Deployment")
        if not deployments:
            raise EnvironmentFailure(f"no Deployments in {self.namespace}: install the stack first")
        self._baseline = self.read_baseline()
        self._provisioned_at = self.clock.now()

    def read_baseline(self) -> dict[Key, bytes]:
        """Every object of the application (and cluster-scoped ones) in its baseline form."""
        found: dict[Key, bytes] = self._call(
            "reading objects", read_baseline, self._api, self.namespace
        )
        return found

    def dirty(self) -> list[Key]:
        """Objects that differ from the baseline taken at provisioning (empty: clean)."""
        return differences(self._baseline, self.read_baseline())

    def _require(self) -> None:
        if self._provisioned_at is None:
            raise EnvironmentFailure("the cluster environment is not provisioned; call provision()")

    def snapshot(self) -> EnvironmentSnapshot:
        """Workloads, firing alerts, the alert rules' fingerprint, the footprint and flags now."""
        self._require()
        rates = self._service_rates()
        workloads = [
            WorkloadHealth(
                kind="Deployment",
                name=d["metadata"]["name"],
                desired_replicas=int((d.get("spec") or {}).get("replicas", 1)),
                ready_replicas=int((d.get("status") or {}).get("readyReplicas") or 0),
                requests_per_second=rates.get(d["metadata"]["name"], (0.0, 0.0))[0],
                error_ratio=rates.get(d["metadata"]["name"], (0.0, 0.0))[1],
            )
            for d in self._list("Deployment")
        ]
        cpu = memory = 0.0
        for pod in self._list("Pod"):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for container in (pod.get("spec") or {}).get("containers") or []:
                requests = (container.get("resources") or {}).get("requests") or {}
                cpu += _quantity(requests.get("cpu"), parse_cpu)
                memory += _quantity(requests.get("memory"), parse_memory)
        rules = self._list("PrometheusRule")
        fingerprint = (
            rules_fingerprint(rules[0])
            if len(rules) == 1
            else rules_fingerprint({"spec": [r.get("spec") for r in rules]})
        )
        objects = [o for kind in STATE_KINDS if kind in KIND_INFO for o in self._list_served(kind)]
        return EnvironmentSnapshot(
            time=self.now(),
            workloads=workloads,
            firing_alerts=[a for a in self.alerts() if a.state == AlertState.FIRING],
            alert_rules_fingerprint=fingerprint,
            frontend_requests_per_second=rates.get("frontend", (0.0, 0.0))[0],
            cpu_requests_cores=round(cpu, 6),
            memory_requests_bytes=int(memory),
            cost_per_hour=round(request_cost_per_hour(cpu, memory), 6),
            flags=self._flags(),
            objects=object_states(objects),
        )

    def _list_served(self, kind: str) -> list[Json]:
        try:
            return self._list(kind)
        except ValueError:
            return []

    def _service_rates(self) -> dict[str, tuple[float, float]]:
        calls = "traces_span_metrics_calls_total"
        scope = f'namespace="{self.namespace}",span_kind=~"SPAN_KIND_SERVER|SPAN_KIND_CONSUMER"'
        out: dict[str, tuple[float, float]] = {}
        try:
            total = self.query_metrics(
                f"sum by (service_name) (rate({calls}{{{scope}}}[2m]))", self.now()
            )
            errors = self.query_metrics(
                f'sum by (service_name) (rate({calls}{{{scope},status_code="STATUS_CODE_ERROR"}}'
                "[2m]))",
                self.now(),
            )
        except ValueError:
            return out
        failed = {
            r["metric"].get("service_name", ""): float(r["value"][1]) for r in errors["result"]
        }
        for row in total["result"]:
            service = row["metric"].get("service_name", "")
            rps = float(row["value"][1])
            out[service] = (rps, failed.get(service, 0.0) / rps if rps > 0 else 0.0)
        return out

    def _flags(self) -> dict[str, str]:
        """The variant flagd serves for each enabled flag (its OFREP bulk evaluation; empty
        while flagd is down)."""
        try:
            answer = self._request("flagd", "POST", "/ofrep/v1/evaluate/flags", json={})
        except EnvironmentFailure:
            return {}
        flags = answer.get("flags") if isinstance(answer, dict) else None
        return {
            str(f["key"]): str(f.get("variant", ""))
            for f in flags or []
            if isinstance(f, dict) and "key" in f
        }

    def inject(self, key: str, changes: list[ObjectChange]) -> bool:
        """Make a fault's changes once per key through the playbooks; the record stays here."""
        self._require()
        if key in self._applied:
            return False
        assert self.faults is not None
        prepared = self.faults.prepare(changes)
        self._injecting(key, prepared)
        self._applied[key] = self.faults.apply(prepared)
        if key not in self._order:
            self._order.append(key)
        return True

    def _injecting(self, key: str, prepared: list[AppliedChange]) -> None:
        """Called with everything that undoes an injection before its playbook runs (a
        subclass keeps it where a restarted operator finds it)."""

    def remove(self, key: str) -> bool:
        """Undo the changes injected under key (restore what they touched)."""
        self._require()
        applied = self._applied.pop(key, None)
        if applied is None:
            return False
        assert self.faults is not None
        try:
            self.faults.remove(applied)
        except EnvironmentFailure:
            self._applied[key] = applied  # kept: a later removal or repair still knows it
            raise
        return True

    def injections(self) -> list[str]:
        """Keys of every injection ever applied, in order."""
        return list(self._order)

    def records(self) -> dict[str, list[Json]]:
        """What removal needs, by key, JSON-ready (a restarted operator removes from it)."""
        return {key: [a.wire() for a in applied] for key, applied in self._applied.items()}

    def adopt(self, records: Mapping[str, list[Mapping[str, Any]]]) -> None:
        """Take over injections recorded by `records` (after a restart)."""
        for key, applied in records.items():
            self._applied[key] = [AppliedChange.from_wire(a) for a in applied]
            if key not in self._order:
                self._order.append(key)

    # ---- observe ------------------------------------------------------------------------------
    def _cluster_time(self, wall: float) -> float:
        return self.clock.to_cluster(wall)

    def alerts(self) -> list[Alert]:
        """Active alerts as the stack's Prometheus reports them (times on the cluster's clock)."""
        data = self._get("prometheus", "/api/v1/alerts", {})["data"]["alerts"]
        out = []
        for item in data:
            labels = {str(k): str(v) for k, v in (item.get("labels") or {}).items()}
            active = item.get("activeAt") or ""
            try:
                wall = datetime.fromisoformat(active.replace("Z", "+00:00")).timestamp()
            except ValueError:
                wall = self.clock.wall()
            out.append(
                Alert(
                    alertname=labels.get("alertname", ""),
                    labels=labels,
                    annotations={
                        str(k): str(v) for k, v in (item.get("annotations") or {}).items()
                    },
                    state=AlertState.FIRING
                    if item.get("state") == "firing"
                    else AlertState.PENDING,
                    active_at=datetime.fromtimestamp(self._cluster_time(wall), tz=UTC),
                    value=float(item.get("value") or 0.0),
                )
            )
        return [a for a in out if a.state in (AlertState.FIRING, AlertState.PENDING)]

    def alert_history(self) -> list[AlertInterval]:
        """Firing intervals since provisioning, from Prometheus' `ALERTS` series."""
        self._require()
        assert self._provisioned_at is not None
        step = EVALUATION_INTERVAL_SECONDS
        data = self.query_metrics_range(
            'ALERTS{alertstate="firing"}',
            datetime.fromtimestamp(self._provisioned_at, tz=UTC),
            self.now(),
            step,
        )
        intervals = []
        for row in data["result"]:
            labels = {k: v for k, v in row["metric"].items() if k not in ("__name__", "alertstate")}
            start: float | None = None
            last = 0.0
            for t, _ in row["values"]:
                t = float(t)
                if start is None:
                    start = t
                elif t - last > step * 1.5:
                    intervals.append(self._interval(labels, start, last))
                    start = t
                last = t
            if start is not None:
                ended = self.clock.now() - last > step * 1.5
                intervals.append(self._interval(labels, start, last if ended else None))
        return sorted(intervals, key=lambda i: (i.start, i.alertname))

    @staticmethod
    def _interval(labels: dict[str, str], start: float, end: float | None) -> AlertInterval:
        return AlertInterval(
            alertname=labels.get("alertname", ""),
            labels=labels,
            start=datetime.fromtimestamp(start, tz=UTC),
            end=datetime.fromtimestamp(end, tz=UTC) if end is not None else None,
        )

    def _to_cluster_times(self, data: Json) -> Json:
        speed = self.clock.speed
        if speed == 1 and self.clock.cluster_origin == self.clock.wall_origin:
            return data
        out = clone(data)
        for row in out.get("result") or []:
            if isinstance(row, dict):
                if "value" in row:
                    row["value"][0] = self._cluster_time(float(row["value"][0]))
                for pair in row.get("values") or []:
                    pair[0] = self._cluster_time(float(pair[0]))
        if out.get("resultType") in ("scalar", "string") and isinstance(out.get("result"), list):
            out["result"][0] = self._cluster_time(float(out["result"][0]))
        return out

    def query_metrics(self, query: str, time: datetime) -> Json:
        """Instant PromQL query on the stack's Prometheus (`data` of its answer), every series
        selector held to the namespace (`itbench.environments.kube.scoping`).

        Raises:
            ValueError: Prometheus refused the query (its message), or it cannot be scoped.
        """
        params = {
            "query": scale_promql(scope_promql(query, self.namespace), self.clock.speed),
            "time": f"{self.clock.to_wall(time.timestamp()):.3f}",
        }
        data: Json = self._get("prometheus", "/api/v1/query", params)["data"]
        return self._to_cluster_times(data)

    def query_metrics_range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> Json:
        """Range PromQL query on the stack's Prometheus (`data` of its answer).

        Raises:
            ValueError: A step that is not positive, or a query Prometheus refused.
        """
        if step_seconds <= 0:
            raise ValueError("step must be positive")
        params = {
            "query": scale_promql(scope_promql(query, self.namespace), self.clock.speed),
            "start": f"{self.clock.to_wall(start.timestamp()):.3f}",
            "end": f"{self.clock.to_wall(end.timestamp()):.3f}",
            "step": f"{self.clock.wall_seconds(step_seconds):.3f}",
        }
        data: Json = self._get("prometheus", "/api/v1/query_range", params)["data"]
        return self._to_cluster_times(data)

    def query_logs(self, query: str, start: datetime, end: datetime, limit: int) -> Json:
        """LogQL on the stack's Loki (`data` of its answer), scoped to the namespace.

        Raises:
            ValueError: A query that cannot be scoped (no stream selector).
        """
        params = {
            "query": scope_logql(query, self.namespace),
            "start": str(int(start.timestamp() * 1e9)),
            "end": str(int(end.timestamp() * 1e9)),
            "limit": str(limit),
        }
        data: Json = self._get("loki", "/loki/api/v1/query_range", params)["data"]
        return data

    def search_traces(
        self,
        service: str,
        operation: str | None,
        tags: dict[str, str],
        start: datetime,
        end: datetime,
        limit: int,
    ) -> list[Json]:
        """Jaeger's trace search (a list of Jaeger trace objects)."""
        import json

        params: dict[str, str] = {
            "service": service,
            "start": str(int(start.timestamp() * 1e6)),
            "end": str(int(end.timestamp() * 1e6)),
            "limit": str(limit),
        }
        if operation:
            params["operation"] = operation
        if tags:
            params["tags"] = json.dumps(tags)
        found: list[Json] = self._get("jaeger", "/api/traces", params).get("data") or []
        return found

    def get_objects(self, kind: str, name: str | None = None, *, copy: bool = True) -> list[Json]:
        """Objects of a kind in the namespace (the fault injector's kinds are not served).

        Every answer is read from the cluster afresh, so `copy` changes nothing here.
        """
        canonical = canonical_kind(kind)
        if canonical in INJECTOR_KINDS or canonical not in KIND_INFO:
            raise ValueError(f'the server doesn\'t have a resource type "{kind}"')
        items = self._list(canonical)
        return [o for o in items if name is None or o["metadata"]["name"] == name]

    def service_calls(self) -> list[tuple[str, str]]:
        """The shop's service call graph."""
        return service_calls()

    def events(
        self, kind: str | None = None, name: str | None = None, *, copy: bool = True
    ) -> list[Json]:
        """Kubernetes Events in the namespace, oldest first (of one object, given both).

        Every answer is read from the cluster afresh, so `copy` changes nothing here.
        """
        events = self._list("Event")
        if kind is not None and name is not None:
            events = [e for e in events if involves(e, kind, name)]
        return sorted(
            events,
            key=lambda e: str(e.get("lastTimestamp") or e["metadata"].get("creationTimestamp", "")),
        )

    def pod_logs(self, pod: str, tail: int) -> list[str]:
        """The last lines of a pod's log.

        Raises:
            ValueError: No such pod.
        """
        import kubernetes

        try:
            answer = self._call(
                "reading a log",
                self._core().read_namespaced_pod_log,
                pod,
                self.namespace,
                tail_lines=tail,
                _preload_content=False,
            )
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                raise ValueError(f'pods "{pod}" not found') from None
            raise EnvironmentFailure(f"reading the log of {pod}: {exc.reason}") from None
        return bytes(answer.data).decode("utf-8", errors="replace").splitlines()

    # ---- act ----------------------------------------------------------------------------------
    def act(self, action: AgentAction) -> ActionResult:
        """Carry out an agent action with kubectl's semantics, writing what it changed.

        With an agent account, what the action reads and writes goes through that account's
        identity: whatever its RBAC refuses is the API server's error, as kubectl shows it.
        """
        import kubernetes

        self._require()
        api = self._acting_api()
        kinds = {canonical_kind(action.kind)}
        if action.manifest.get("kind"):
            kinds.add(canonical_kind(str(action.manifest["kind"])))
        if action.verb == ActionVerb.ROLLOUT_UNDO:
            kinds.add("ReplicaSet")
        if action.verb == ActionVerb.SET_FLAG:
            kinds |= {"ConfigMap", "Deployment"}
        scratch = Cluster(namespace=self.namespace, rng=random.Random(0), now=self.clock.now())
        before: dict[tuple[str, str], Json] = {}
        try:
            for kind in sorted(k for k in kinds if k in KIND_INFO and k not in INJECTOR_KINDS):
                for obj in self._list(kind, api):
                    before[(kind, obj["metadata"]["name"])] = obj
                    scratch.objects.setdefault(kind, {})[obj["metadata"]["name"]] = clone(obj)
        except kubernetes.client.ApiException as exc:
            return _api_error(exc)
        result = perform(scratch, action)
        if not result.ok or result.outcome == "unchanged":
            return result
        try:
            for (kind, name), old in before.items():
                new = scratch.get(kind, name)
                if kind in CONTROLLER_KINDS and kind != "ReplicaSet":
                    continue
                if kind == "ReplicaSet":
                    continue  # the Deployment controller's; an undo writes the Deployment
                resource = self._resource(kind, api)
                namespace = self.namespace if resource.namespaced else None
                if new is None:
                    resource.delete(name=name, namespace=namespace)
                elif baseline_bytes(new) != baseline_bytes(old):
                    body = restorable(new)
                    body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                    resource.replace(body=body, namespace=namespace)
            for kind, bucket in scratch.objects.items():
                if kind in CONTROLLER_KINDS:
                    continue
                for name, obj in bucket.items():
                    if (kind, name) not in before:
                        resource = self._resource(kind, api)
                        namespace = self.namespace if resource.namespaced else None
                        resource.create(body=restorable(obj), namespace=namespace)
        except kubernetes.client.ApiException as exc:
            return _api_error(exc)
        except ValueError as exc:
            return ActionResult(
                ok=False, message=f"Error from server: {exc}"[:500], outcome="error"
            )
        return result


def _api_error(exc: Any) -> ActionResult:
    """An action the API server refused, as kubectl reports it."""
    return ActionResult(
        ok=False, message=f"Error from server ({exc.reason}): {exc.body}"[:500], outcome="error"
    )
