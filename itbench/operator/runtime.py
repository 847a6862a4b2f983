"""What the operator's handlers share: configuration, the API door, trial environments, sessions.

Built once per operator instance by the entry point (or a test) and handed to every kind's
`register`; nothing here is a module-level singleton.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from itbench.core.models.benchmark_run import EnvironmentType
from itbench.core.models.observations import EnvironmentSnapshot
from itbench.core.runner.context import DEFAULT_CONFIG, RunnerConfig, TrialContext
from itbench.environments.port import Environment, EnvironmentFailure
from itbench.execution.evidence import AgentRecord, TopologyRecord
from itbench.gateway.sessions import SessionRegistry
from itbench.operator.artefacts import REPORT_BYTES, TRAJECTORY_BYTES
from itbench.operator.kubeapi import KubeApi
from itbench.operator.metrics import OperatorMetrics

EnvironmentFactory = Callable[[TrialContext], Environment]
"""Builds the environment of one trial."""


@dataclass(frozen=True)
class OperatorConfig:
    """Timing and wiring of the operator.

    Attributes:
        trial_tick_seconds: Interval of the Trial timer; each tick advances the trial by at most
            `steps_per_tick` steps and lets the environment's clock run once.
        run_tick_seconds: Interval of the BenchmarkRun timer (trial creation, scheduling,
            aggregation).
        agent_tick_seconds: Interval of the AgentSubmission timer (credentials, last runs).
        retry_seconds: Delay before a blocked deletion is tried again.
        steps_per_tick: Upper bound of state-machine steps per Trial tick.
        waits_per_tick: How often the environment's clock may run within one tick (the
            simulator's clock is virtual; more waits per tick finish a trial in fewer ticks).
        max_environments: Environments this operator hosts at once; admitted trials beyond it
            wait (Queued, reason WaitingForEnvironment) so memory stays bounded.
        agent_wall_seconds: Real seconds an in-process (built-in) agent may take on one trial.
        gateway_url: URL agents in Jobs reach the gateway at.
        agent_service_account: ServiceAccount the agent Jobs run as (no RBAC bindings).
        cluster_agent_service_account: ServiceAccount the agent Jobs of cluster runs on the
            operator's own cluster run as, with its token (None: agent_service_account, without),
            and the account every agent action of those runs is carried out as (None: the
            operator's identity).
        injector_service_account: ServiceAccount (namespace, name) the fault playbooks run as
            on the operator's own cluster (None: the operator's identity).
        ciso_evaluator_service_account: ServiceAccount (namespace, name) the live CISO
            evaluation runs as on the operator's own cluster (None: the operator's identity).
        trajectory_bytes: Most bytes of the trajectory document stored per Trial (a ConfigMap
            holds at most 1 MiB); longer trajectories keep their first calls and say so.
        trajectories_per_run: Most Trials of one run whose trajectories are stored (0: none);
            the first to finish are kept.
        report_bytes: Most bytes of the run's report ConfigMap (report.json, trials.jsonl,
            report.html; what does not fit is compressed or left out, and notes.txt says so).
        own_kubeconfig: Kubeconfig of the operator's own cluster, where cluster runs without a
            kubeconfig Secret go (None: the in-cluster configuration).
        collections_path: Where the fault playbooks find kubernetes.core (None: Ansible's
            search path).
        trial_image: Image of the Jobs that run `environment.execution: job` trials (the
            operator's own image; None: such trials end Errored, naming the setting).
        ciso_host_image: Image of the RHEL9 class's evidence Pods in live CISO evaluations
            (None: `itbench.ciso.host_pod.DEFAULT_IMAGE`).
        trial_service_account: ServiceAccount those Jobs run as (in the Trial's namespace; the
            chart grants it the rights of one trial pod, see `itbench.operator.jobs`).
        trial_pod: This process is a trial Job's pod: it runs its trial itself, whatever the
            trial's `environment.execution` says.
        runner: The state machine's timing constants.
    """

    trial_tick_seconds: float = 1.0
    run_tick_seconds: float = 2.0
    agent_tick_seconds: float = 10.0
    retry_seconds: float = 5.0
    steps_per_tick: int = 8
    waits_per_tick: int = 1
    max_environments: int = 32
    agent_wall_seconds: float = 120.0
    gateway_url: str = "http://itbench-gateway.itbench-system.svc:8080"
    agent_service_account: str = "itbench-agent"
    cluster_agent_service_account: str | None = None
    injector_service_account: tuple[str, str] | None = None
    ciso_evaluator_service_account: tuple[str, str] | None = None
    trajectory_bytes: int = TRAJECTORY_BYTES
    trajectories_per_run: int = 500
    report_bytes: int = REPORT_BYTES
    own_kubeconfig: str | None = None
    collections_path: str | None = None
    trial_image: str | None = None
    ciso_host_image: str | None = None
    trial_service_account: str = "itbench-trial"
    trial_pod: bool = False
    runner: RunnerConfig = DEFAULT_CONFIG


def simulator_environment(ctx: TrialContext) -> Environment:
    """The default environment factory: the simulator for `simulator`, an error otherwise.

    Raises:
        EnvironmentFailure: For environment types this operator cannot host.
    """
    if ctx.spec.environment.type != EnvironmentType.SIMULATOR:
        raise EnvironmentFailure(
            f"environment type {ctx.spec.environment.type.value!r} is not available in this "
            "operator; use environment.type: simulator"
        )
    from itbench.environments.sim.twins import twin_for

    return twin_for(ctx.scenario, seed=ctx.spec.seed)


def operator_environments(api: KubeApi, config: OperatorConfig) -> EnvironmentFactory:
    """The operator's environment factory: the simulator, or a leased slot of a live cluster."""
    from itbench.operator.clusters import ClusterTargets

    clusters = ClusterTargets(
        api,
        own_kubeconfig=config.own_kubeconfig,
        collections_path=config.collections_path,
        injector=config.injector_service_account,
        ciso_evaluator=config.ciso_evaluator_service_account,
        ciso_host_image=config.ciso_host_image,
        agent_account=config.cluster_agent_service_account,
    )

    def factory(ctx: TrialContext) -> Environment:
        if ctx.spec.environment.type == EnvironmentType.CLUSTER:
            return clusters(ctx)
        return simulator_environment(ctx)

    return factory


class EnvironmentRegistry:
    """The environments of running trials, keyed by trial UID.

    A registry can outlive an operator instance (tests hand the same one to a restarted
    operator), which is how a restart finds every trial's environment again. When a trial ends,
    its environment is dropped and only its record of injections is kept.
    """

    def __init__(self, factory: EnvironmentFactory = simulator_environment) -> None:
        """Create an empty registry.

        Args:
            factory: Builds the environment of a trial on first use.
        """
        self._factory = factory
        self._lock = threading.Lock()
        self._envs: dict[str, Environment] = {}
        self._building: set[str] = set()
        self._injections: dict[str, list[str]] = {}
        self._waiting: dict[str, str] = {}
        self.created = 0

    def get(self, uid: str) -> Environment | None:
        """The trial's environment, if it exists."""
        with self._lock:
            return self._envs.get(uid)

    def create(self, ctx: TrialContext, limit: int | None = None) -> Environment | None:
        """The trial's environment, built on first use (idempotent per UID).

        Args:
            ctx: The trial.
            limit: Most environments to host at once (None: no limit). Concurrent callers are
                counted while they build, so the limit holds however the ticks interleave.

        Returns:
            The environment, or None when building one would exceed `limit` or the factory has
            none free now (`waiting` then says why).
        """
        from itbench.operator.clusters import EnvironmentUnavailable

        with self._lock:
            env = self._envs.get(ctx.uid)
            if env is not None:
                return env
            if limit is not None and len(self._envs) + len(self._building) >= limit:
                return None
            self._building.add(ctx.uid)
        try:
            env = self._factory(ctx)
        except EnvironmentUnavailable as exc:
            with self._lock:
                self._waiting[ctx.uid] = str(exc)
            return None
        finally:
            with self._lock:
                self._building.discard(ctx.uid)
        with self._lock:
            self._waiting.pop(ctx.uid, None)
            existing = self._envs.setdefault(ctx.uid, env)
            if existing is env:
                self.created += 1
            return existing

    def waiting(self, uid: str) -> str | None:
        """Why the factory had no environment for a trial on its last try (None: it had)."""
        with self._lock:
            return self._waiting.get(uid)

    def release(self, uid: str) -> None:
        """Drop a finished trial's environment, keeping its record of injections."""
        with self._lock:
            env = self._envs.pop(uid, None)
            self._waiting.pop(uid, None)
        if env is None:
            return
        try:
            keys = env.injections()
        except EnvironmentFailure:
            keys = []
        with self._lock:
            self._injections[uid] = keys
        _close(env)

    def discard(self, uid: str) -> None:
        """Drop a trial's environment without asking it anything (it is unreachable)."""
        with self._lock:
            env = self._envs.pop(uid, None)
            self._waiting.pop(uid, None)
            self._injections.setdefault(uid, [])
        if env is not None:
            _close(env)

    def injections(self, uid: str) -> list[str]:
        """Keys of every injection applied in the trial's environment (live or released)."""
        env = self.get(uid)
        if env is not None:
            return env.injections()
        with self._lock:
            return list(self._injections.get(uid, []))

    def __len__(self) -> int:
        with self._lock:
            return len(self._envs)


def _close(env: Environment) -> None:
    """Close what an environment holds open (a live cluster's HTTP and API clients)."""
    close = getattr(env, "close", None)
    if callable(close):
        close()


class TrialEvidence:
    """Baselines, window samples, topologies and agent records of running trials, in memory.

    Keys start with the trial's UID (`<uid>/baseline`, `<uid>/sample/<i>`, `<uid>/close`), so a
    finished trial's evidence is dropped as one (`forget`). First write wins, as the executor
    expects. The object can outlive an operator instance, like `EnvironmentRegistry`.
    """

    def __init__(self) -> None:
        """Create an empty store."""
        self._lock = threading.Lock()
        self._by_trial: dict[str, dict[tuple[str, str], Any]] = {}

    def _put(self, kind: str, key: str, value: Any) -> bool:
        with self._lock:
            bucket = self._by_trial.setdefault(key.split("/", 1)[0], {})
            if (kind, key) in bucket:
                return False
            bucket[(kind, key)] = value
            return True

    def _get(self, kind: str, key: str) -> Any:
        with self._lock:
            return self._by_trial.get(key.split("/", 1)[0], {}).get((kind, key))

    def put_snapshot(self, key: str, snapshot: EnvironmentSnapshot) -> bool:
        """Store a snapshot under key; False when the key already holds one."""
        return self._put("snapshot", key, snapshot)

    def snapshot(self, key: str) -> EnvironmentSnapshot | None:
        """The snapshot stored under key, if any."""
        found: EnvironmentSnapshot | None = self._get("snapshot", key)
        return found

    def put_agent(self, key: str, record: AgentRecord) -> bool:
        """Store the agent's record under key; False when the key already holds one."""
        return self._put("agent", key, record)

    def agent(self, key: str) -> AgentRecord | None:
        """The agent's record stored under key, if any."""
        found: AgentRecord | None = self._get("agent", key)
        return found

    def put_topology(self, key: str, record: TopologyRecord) -> bool:
        """Store a topology record under key; False when the key already holds one."""
        return self._put("topology", key, record)

    def topology(self, key: str) -> TopologyRecord | None:
        """The topology record stored under key, if any."""
        found: TopologyRecord | None = self._get("topology", key)
        return found

    def forget(self, uid: str) -> None:
        """Drop everything stored for one trial."""
        with self._lock:
            self._by_trial.pop(uid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_trial)


@dataclass
class OperatorRuntime:
    """Everything the handlers of one operator instance use.

    Attributes:
        api: The Kubernetes API.
        config: Timing and wiring.
        environments: Environments of running trials (may outlive the operator).
        sessions: Gateway sessions of ready trials (may outlive the operator).
        evidence: Baselines, samples and agent records (may outlive the operator).
        metrics: Prometheus metrics.
        gateway_app: The gateway application built-in agents are called through (in-process).
        run_statuses: The status this instance last wrote for each BenchmarkRun, by UID. Kopf
            hands a reconcile the body it last saw, which can predate the operator's own last
            status write; this is the newer of the two (empty after a process restart).
        unstored_reports: UIDs of runs whose report the API refused so far (its retries log at
            DEBUG, the first refusal at WARNING).
    """

    api: KubeApi
    config: OperatorConfig = field(default_factory=OperatorConfig)
    environments: EnvironmentRegistry = field(default_factory=EnvironmentRegistry)
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
    evidence: TrialEvidence = field(default_factory=TrialEvidence)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    gateway_app: Any = None
    run_statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    unstored_reports: set[str] = field(default_factory=set)
    _gateway_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def gateway(self) -> Any:
        """The gateway application over `sessions` (built once, on first use: trials ticking
        side by side in Kopf's threads share it and its metrics)."""
        with self._gateway_lock:
            if self.gateway_app is None:
                from itbench.gateway.app import create_app
                from itbench.gateway.metrics import GatewayMetrics

                self.gateway_app = create_app(
                    self.sessions, metrics=GatewayMetrics(self.metrics.registry)
                )
            return self.gateway_app
