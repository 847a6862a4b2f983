"""Simulator trials as Kubernetes Jobs (`environment.execution: job`): one Job per Trial.

The operator creates the Job (owned by the Trial, idempotent by name) and watches it; the Job's
pod runs `itbench trial run`, which drives the Trial with the same `TrialDriver` the operator
runs in process, so a seed scores the same either way, and writes status, scores, timeline and
trajectory to the Trial itself. A Job that fails or outlives its deadline ends its Trial Errored,
naming the Job.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from itbench.core.models.agent_submission import AgentSubmission
from itbench.core.models.benchmark_run import EnvironmentSpec, Execution, Timeouts
from itbench.core.models.trial import Trial, TrialPhase, TrialStatus
from itbench.operator import workloads
from itbench.operator.bodies import CANCELLED, RUN_LABEL, annotation, bounded, parse, parsed_status
from itbench.operator.kubeapi import AGENT_SUBMISSIONS, TRIALS, Json, KubeApi
from itbench.operator.runtime import OperatorConfig

log = logging.getLogger(__name__)

MAX_DNS_LABEL = 63
JOB_FAILED = "TrialJobFailed"
"""Reason of a Trial whose Job failed, outlived its deadline or ended without a final status."""
NO_TRIAL_IMAGE = "TrialImageNotSet"
"""Reason of a job-executed Trial on an operator started without `--trial-image`."""
WAITING_FOR_JOB = "WaitingForJob"
"""Reason of a Trial whose Job exists and whose pod has not written a status yet."""
COMPONENT_LABEL = "app.kubernetes.io/component"
TRIAL_LABEL = "itbench.io/trial"
STARTUP_SECONDS = 300
"""Seconds a trial Job gets beyond its trial's time limits: scheduling, image pull, start-up."""
DEFAULT_ALERTS_SECONDS = 600
"""Seconds counted for the wait for alerts when the run does not set timeouts.alertsSeconds."""
CREDENTIALS_DIR = "/var/run/itbench/credentials"
"""Where a trial pod finds its command agent's credentials Secret (a volume, one file a key)."""
RESOURCES: Json = {
    "requests": {"cpu": "250m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
"""Requests and limits of a trial pod: one simulator and one built-in or command agent."""

StatusWriter = Callable[[Any, Json, TrialStatus | None, TrialStatus], TrialStatus]
"""Writes a Trial's status as the driver does: (body, stored status, previous, new)."""


def job_name(trial: str) -> str:
    """The name of the Job running a Trial (a DNS label, stable per Trial name)."""
    name = f"{trial}-run"
    if len(name) <= MAX_DNS_LABEL:
        return name
    digest = hashlib.sha256(trial.encode()).hexdigest()[:8]
    return f"{trial[: MAX_DNS_LABEL - 13].rstrip('-.')}-{digest}-run"


def deadline_seconds(timeouts: Timeouts) -> int:
    """A trial Job's activeDeadlineSeconds: the trial's time limits plus the start-up allowance.

    Formula: agentSeconds + recoverySeconds + (alertsSeconds or 600) + 300, in seconds.
    """
    alerts = timeouts.alerts_seconds or DEFAULT_ALERTS_SECONDS
    return timeouts.agent_seconds + timeouts.recovery_seconds + alerts + STARTUP_SECONDS


def refusal(
    environment: EnvironmentSpec, agent: AgentSubmission, field: str = "spec"
) -> str | None:
    """Why trials cannot run as Jobs with this agent (None: they can, or they run in process).

    A trial pod hosts the simulator, the gateway and the agent in one process, so only agents
    that run there (built-in and command agents) can work in it.
    """
    if environment.execution != Execution.JOB:
        return None
    kind = agent.spec.runtime.kind()
    if kind in ("builtin", "command"):
        return None
    return (
        f"{field}.environment.execution: job runs built-in and command agents only, and "
        f"AgentSubmission {agent.metadata.namespace}/{agent.metadata.name} is an {kind} agent "
        "(it needs the operator's gateway); set execution: process"
    )


def trial_job(
    trial: Json,
    agent: AgentSubmission,
    *,
    image: str,
    service_account_name: str,
    deadline: int,
    trajectories_per_run: int,
) -> Json:
    """The Job whose pod runs one Trial (`itbench trial run`) and writes its results back.

    The pod runs as non-root with a read-only root filesystem and no privileges; its
    ServiceAccount may read the Trial's plan and write the Trial's status, Events and trajectory
    ConfigMap, nothing more. A command agent's credentials Secret is mounted as files rather
    than read through the API, so the pod needs no right on Secrets.

    Args:
        trial: The Trial object.
        agent: Its AgentSubmission (built-in or command).
        image: The operator's image (it holds the `itbench` command).
        service_account_name: The trial pods' ServiceAccount.
        deadline: activeDeadlineSeconds of the Job.
        trajectories_per_run: The operator's limit of stored trajectories per run (the pod
            keeps to it as the operator would).
    """
    meta = trial["metadata"]
    name = job_name(meta["name"])
    run = str((meta.get("labels") or {}).get(RUN_LABEL, ""))
    labels = {
        "app.kubernetes.io/part-of": "itbench",
        COMPONENT_LABEL: "trial",
        TRIAL_LABEL: meta["name"][:MAX_DNS_LABEL].rstrip("-."),
    }
    if run:
        labels[RUN_LABEL] = run[:MAX_DNS_LABEL].rstrip("-.")
    mounts: list[Json] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[Json] = [{"name": "tmp", "emptyDir": {}}]
    command = agent.spec.runtime.command
    if command is not None and command.credentials_secret_ref is not None:
        secret = command.credentials_secret_ref.name
        mounts.append(
            {"name": "credentials", "mountPath": f"{CREDENTIALS_DIR}/{secret}", "readOnly": True}
        )
        volumes.append({"name": "credentials", "secret": {"secretName": secret}})
    container: Json = {
        "name": "trial",
        "image": image,
        "command": [
            *("itbench", "trial", "run"),
            *("--namespace", meta["namespace"], "--name", meta["name"]),
        ],
        "env": [
            {"name": "ITBENCH_TRIAL__CREDENTIALS_DIR", "value": CREDENTIALS_DIR},
            {
                "name": "ITBENCH_OPERATOR__TRAJECTORIES_PER_RUN",
                "value": str(trajectories_per_run),
            },
        ],
        "resources": RESOURCES,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    }
    return workloads.trial_job(
        trial,
        name,
        labels=labels,
        deadline_seconds=deadline,
        pod={
            "serviceAccountName": service_account_name,
            "automountServiceAccountToken": True,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": volumes,
        },
    )


def service_account(namespace: str, name: str) -> Json:
    """The trial pods' ServiceAccount (its rights come from the chart's RoleBinding)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "itbench", COMPONENT_LABEL: "trial"},
        },
    }


def _condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def job_failed(job: Mapping[str, Any]) -> bool:
    """Whether a Job failed: its Failed condition is true or a pod of it failed."""
    count = int((job.get("status") or {}).get("failed") or 0)
    return _condition(job, "Failed") is not None or count > 0


def job_failure(job: Mapping[str, Any], pods: list[Json]) -> str | None:
    """What went wrong with a trial's Job, in words (None while it runs or after it completed).

    A Job failed when its Failed condition is true (its pod failed, or it outlived
    activeDeadlineSeconds) or when a pod of it failed; the pod's termination reason and message
    (its last log lines when it wrote no message) say why.
    """
    failed = _condition(job, "Failed")
    count = int((job.get("status") or {}).get("failed") or 0)
    if failed is None and count == 0:
        return None
    parts: list[str] = []
    if failed is not None:
        parts.append(f"{failed.get('reason') or 'Failed'}: {failed.get('message') or ''}".strip())
    else:
        parts.append(f"{count} pod(s) failed")
    for pod in pods:
        for state in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (state.get("state") or {}).get("terminated") or {}
            if ended:
                parts.append(
                    f"pod {pod['metadata']['name']} exited {ended.get('exitCode')} "
                    f"({ended.get('reason') or 'Error'}): {ended.get('message') or 'no message'}"
                )
    return bounded("; ".join(p.rstrip(": ") for p in parts), 600)


def job_completed(job: Mapping[str, Any]) -> bool:
    """Whether a Job's pod exited successfully (its Complete condition, or a succeeded pod)."""
    status = job.get("status") or {}
    return _condition(job, "Complete") is not None or int(status.get("succeeded") or 0) > 0


class TrialJobs:
    """The operator's side of job-executed trials: create each Trial's Job, watch it, and end
    the Trial Errored when the Job dies without having written a final status."""

    def __init__(self, api: KubeApi, config: OperatorConfig, write: StatusWriter) -> None:
        """Bind to the API, the operator's configuration and the driver's status writer."""
        self.api = api
        self.config = config
        self.write = write

    def handles(self, body: Any, trial: Trial, old: Json, status: TrialStatus | None) -> bool:
        """Advance an admitted Trial that runs as a Job; False when the in-process path should.

        The in-process path keeps what needs no Job: trials that run in process, trials run by
        this very pod, a trial cancelled before its Job exists and a trial whose AgentSubmission
        is missing or invalid (it ends Errored naming the submission).
        """
        if trial.spec.environment.execution != Execution.JOB or self.config.trial_pod:
            return False
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        job_ref = f"Job {namespace}/{job_name(name)}"
        job = self.api.job(namespace, job_name(name))
        if job is None:
            if annotation(body, CANCELLED):
                return False
            agent_body = self.api.get(AGENT_SUBMISSIONS, namespace, trial.spec.agent_ref.name)
            agent, _ = parse(AgentSubmission, agent_body) if agent_body else (None, [])
            if agent is None:
                return False
            why = refusal(trial.spec.environment, agent, "Trial spec")
            if why is not None:
                self._error(body, old, status, JOB_FAILED, why)
                return True
            if self.config.trial_image is None:
                self._error(
                    body,
                    old,
                    status,
                    NO_TRIAL_IMAGE,
                    "this Trial runs as a Job (environment.execution: job) but the operator "
                    "has no trial image; start it with --trial-image (the chart sets it to the "
                    "operator's image) or run with execution: process",
                )
                return True
            self.api.ensure(service_account(namespace, self.config.trial_service_account))
            manifest = trial_job(
                _plain(body),
                agent,
                image=self.config.trial_image,
                service_account_name=self.config.trial_service_account,
                deadline=deadline_seconds(trial.spec.timeouts),
                trajectories_per_run=self.config.trajectories_per_run,
            )
            created = self.api.ensure(manifest)
            if created and (status is None or not status.timeline):
                waiting = TrialStatus(
                    phase=TrialPhase.QUEUED,
                    reason=WAITING_FOR_JOB,
                    message=f"admitted; {job_ref} created, waiting for its pod to run the trial",
                )
                self.write(body, old, status, waiting)
            return True
        if not job_failed(job) and not job_completed(job):
            return True  # the pod is running the trial and writes its status itself
        failure = (
            job_failure(job, self.api.job_pods(namespace, job_name(name)))
            if job_failed(job)
            else None
        )
        fresh = self.api.get(TRIALS, namespace, name)
        now = parsed_status(TrialStatus, fresh) if fresh is not None else None
        if fresh is None or (now is not None and now.phase.final):
            return True  # the pod wrote the result; this body predates it
        message = (
            f"{job_ref} failed before the trial ended: {failure}"
            if failure is not None
            else f"{job_ref} completed without writing a final status to the Trial"
        )
        self._error(fresh, _stored(fresh), now, JOB_FAILED, message)
        return True

    def _error(
        self, body: Any, old: Json, status: TrialStatus | None, reason: str, message: str
    ) -> None:
        base = status or TrialStatus()
        final = base.model_copy(
            update={
                "phase": TrialPhase.ERRORED,
                "reason": reason,
                "message": f"platform: {message}",
            }
        )
        log.warning("trial job failed", extra={"trial": body["metadata"]["name"], "why": message})
        self.write(body, old, status, final)


def _plain(body: Mapping[str, Any]) -> Json:
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": dict(body["metadata"]),
    }


def _stored(body: Mapping[str, Any]) -> Json:
    raw = body.get("status")
    return dict(raw) if isinstance(raw, Mapping) else {}


class PodApi(KubeApi):
    """The API door of a trial pod: Secrets come from files mounted in the pod, never the API.

    A command agent's credentials Secret is mounted at `<credentials_dir>/<name>/<key>`, so the
    pod's ServiceAccount needs no right on Secrets (which would expose e.g. a run's seed secret).
    """

    def __init__(self, api: KubeApi, credentials_dir: Path) -> None:
        """Share an existing door's client; read Secrets from `credentials_dir`."""
        super().__init__(api.api_client)
        self.credentials_dir = credentials_dir

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """A mounted Secret's keys and values ({} when it is not mounted)."""
        folder = self.credentials_dir / name
        if not folder.is_dir():
            return {}
        return {
            p.name: p.read_text(encoding="utf-8")
            for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")
        }


class TrialGoneError(Exception):
    """The Trial a pod was to run does not exist (any more)."""


def run_trial(
    api: KubeApi,
    namespace: str,
    name: str,
    *,
    config: OperatorConfig | None = None,
    credentials_dir: Path | None = None,
    pause_seconds: float = 0.0,
    max_ticks: int = 1_000_000,
) -> TrialStatus:
    """Run one Trial in this process, as a trial Job's pod does, and return its final status.

    The Trial's plan (scenario, parameters, agent, seed, timeouts) is read from the API; the
    trial is driven by `TrialDriver`, exactly as the operator drives in-process trials, and
    every status, Event and the trajectory ConfigMap are written as the operator writes them.

    Args:
        api: The API door (in a pod: in-cluster configuration).
        namespace: The Trial's namespace.
        name: The Trial's name.
        config: Timing constants (the operator's defaults when None).
        credentials_dir: Where mounted credentials Secrets are (None: read through the API).
        pause_seconds: Real seconds between ticks (the simulator's clock is virtual).
        max_ticks: Most ticks before giving up (the Job's deadline normally comes first).

    Raises:
        TrialGoneError: The Trial does not exist or was deleted meanwhile.
        RuntimeError: The trial did not end within `max_ticks`.
    """
    from itbench.operator.runtime import EnvironmentRegistry, OperatorRuntime
    from itbench.operator.trials import TrialDriver

    door = PodApi(api, credentials_dir) if credentials_dir is not None else api
    runtime = OperatorRuntime(
        api=door,
        config=replace(config or OperatorConfig(), trial_pod=True),
        environments=EnvironmentRegistry(),
    )
    driver = TrialDriver(runtime)
    for _ in range(max_ticks):
        body = api.get(TRIALS, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            raise TrialGoneError(f"Trial {namespace}/{name} does not exist (any more)")
        status = parsed_status(TrialStatus, body)
        uid = str(body["metadata"].get("uid", ""))
        if status is not None and status.phase.final and not driver.retrying(uid):
            return status
        driver.advance(cast(Any, body))  # a plain body serves as well as a Kopf one
        if pause_seconds:
            time.sleep(pause_seconds)
    raise RuntimeError(f"Trial {namespace}/{name} did not end within {max_ticks} ticks")
