"""kube-state-metrics and the kubelet's cAdvisor as the Scraper writes them: the series of the
cluster's objects and of its containers' cgroups, with the labels of their scrapes."""

from __future__ import annotations

from itbench.environments.sim.cluster import ContainerRuntime
from itbench.environments.sim.objects import (
    NODE_NAME,
    Obj,
    main_container,
    parse_cpu,
    parse_memory,
)
from itbench.environments.sim.telemetry.state import ScraperState
from itbench.environments.sim.telemetry.store import SimSeries, _put

KSM_TARGET = (
    ("container", "kube-state-metrics"),
    ("endpoint", "http"),
    ("instance", "10.244.0.12:8080"),
    ("job", "kube-state-metrics"),
    ("service", "kube-prometheus-stack-kube-state-metrics"),
)
"""Labels kube-prometheus-stack's scrape of kube-state-metrics adds (honorLabels keeps the
object's own namespace, pod and container)."""
KSM_POD = "kube-prometheus-stack-kube-state-metrics-6c5d7b9f4d-lmx2k"
"""The scrape's `pod` label on kube-state-metrics series that describe no pod."""
KUBELET_TARGET = (
    ("endpoint", "https-metrics"),
    ("instance", "172.18.0.2:10250"),
    ("job", "kubelet"),
    ("metrics_path", "/metrics/cadvisor"),
    ("node", NODE_NAME),
    ("service", "kube-prometheus-stack-kubelet"),
)
"""Labels of kube-prometheus-stack's cAdvisor scrape of the worker's kubelet."""
OLD_CONTAINER_SECONDS = 30.0
"""How long cAdvisor keeps reporting a replaced container's cgroup after a restart."""
_DEPLOYMENT_SERIES = (
    ("kube_deployment_spec_replicas", "replicas"),
    ("kube_deployment_status_replicas", "replicas"),
    ("kube_deployment_status_replicas_ready", "readyReplicas"),
    ("kube_deployment_status_replicas_available", "availableReplicas"),
    ("kube_deployment_status_replicas_unavailable", "unavailableReplicas"),
    ("kube_deployment_status_replicas_updated", "updatedReplicas"),
)

_RESOURCE_FIELDS = (
    ("requests", "cpu", "core", parse_cpu),
    ("requests", "memory", "byte", parse_memory),
    ("limits", "cpu", "core", parse_cpu),
    ("limits", "memory", "byte", parse_memory),
)
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_CONTAINER_SERIES = (
    "kube_pod_container_status_restarts_total",
    "kube_pod_container_status_ready",
    "kube_pod_container_status_running",
)


class ClusterMetrics(ScraperState):
    """The Scraper's targets that read the cluster: kube-state-metrics and cAdvisor."""

    # ---- kube-state-metrics -----------------------------------------------------------------
    def _ksm(self, t: float, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        _put(self._ksm_series(name, labels), t, value)

    def _ksm_series(self, name: str, labels: tuple[tuple[str, str], ...]) -> SimSeries:
        s = self._ksm_handles.get((name, labels))
        if s is None:
            # honorLabels: the object's own labels win over the scrape's.
            own = {k for k, _ in labels}
            extra = tuple(kv for kv in (*KSM_TARGET, ("pod", KSM_POD)) if kv[0] not in own)
            s = self._series((("__name__", name), *labels, *extra))
            self._ksm_handles[(name, labels)] = s
        return s

    def _kube_state(self, t: float) -> None:
        c = self.cluster
        ns = ("namespace", c.namespace)
        for d in c.of_kind("Deployment"):
            name = ("deployment", d["metadata"]["name"])
            st = d.get("status") or {}
            self._ksm(
                t, "kube_deployment_spec_replicas", (name, ns), float(d["spec"].get("replicas", 1))
            )
            for metric, field_name in _DEPLOYMENT_SERIES[1:]:
                self._ksm(t, metric, (name, ns), float(st.get(field_name, 0)))
        for pod in c.of_kind("Pod"):
            self._pod_series(t, pod, c.runtime.get(pod["metadata"]["name"]))
        for h in c.of_kind("HorizontalPodAutoscaler"):
            label = ("horizontalpodautoscaler", h["metadata"]["name"])
            spec = h.get("spec") or {}
            st = h.get("status") or {}
            for metric, value in (
                ("kube_horizontalpodautoscaler_spec_max_replicas", spec.get("maxReplicas", 1)),
                ("kube_horizontalpodautoscaler_spec_min_replicas", spec.get("minReplicas", 1)),
                (
                    "kube_horizontalpodautoscaler_status_current_replicas",
                    st.get("currentReplicas", 0),
                ),
                (
                    "kube_horizontalpodautoscaler_status_desired_replicas",
                    st.get("desiredReplicas", 0),
                ),
            ):
                self._ksm(t, metric, (label, ns), float(value))
        for quota in c.of_kind("ResourceQuota"):
            st = quota.get("status") or {}
            for kind in ("hard", "used"):
                for resource, text in (st.get(kind) or {}).items():
                    amount = _amount(str(resource), str(text))
                    labels = (
                        ns,
                        ("resource", str(resource)),
                        ("resourcequota", quota["metadata"]["name"]),
                        ("type", kind),
                    )
                    self._ksm(t, "kube_resourcequota", labels, amount)

    def _pod_series(self, t: float, pod: Obj, rt: ContainerRuntime | None) -> None:
        c = self.cluster
        ns = ("namespace", c.namespace)
        name = str(pod["metadata"]["name"])
        p = ("pod", name)
        uid = ("uid", str(pod["metadata"].get("uid", "")))
        node = ("node", str(pod["spec"].get("nodeName", "")))
        ready = bool(rt is not None and c.pod_ready(pod))
        fixed = self._pod_handles.get((ns, p, uid))
        if fixed is None:
            fixed = [
                self._ksm_series("kube_pod_status_ready", (("condition", condition), ns, p, uid))
                for condition in ("true", "false", "unknown")
            ]
            fixed += [
                self._ksm_series("kube_pod_status_phase", (ns, ("phase", ph), p, uid))
                for ph in _PHASES
            ]
            self._pod_handles[(ns, p, uid)] = fixed
        for series, value in zip(fixed, (ready, not ready, False), strict=False):
            _put(series, t, float(value))
        phase = pod["status"].get("phase", "Pending")
        for series, ph in zip(fixed[3:], _PHASES, strict=True):
            _put(series, t, 1.0 if ph == phase else 0.0)
        info = tuple(
            (k, v)
            for k, v in (
                ("created_by_kind", _owner_kind(pod)),
                ("created_by_name", _owner(pod)),
                ("host_ip", str(pod["status"].get("hostIP", ""))),
                ("host_network", str(bool(pod["spec"].get("hostNetwork"))).lower()),
                ns,
                node,
                p,
                ("pod_ip", str(pod["status"].get("podIP", ""))),
                ("priority_class", str(pod["spec"].get("priorityClassName") or "")),
                uid,
            )
            if v  # Prometheus stores no label with an empty value
        )
        self._ksm(t, "kube_pod_info", info, 1.0)
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
        for container in pod["spec"].get("containers") or []:
            cname = ("container", str(container.get("name", "")))
            status = statuses.get(cname[1], {})
            base = (cname, ns, p, uid)
            per_container = self._container_handles.get(base)
            if per_container is None:
                per_container = [self._ksm_series(m, base) for m in _CONTAINER_SERIES]
                self._container_handles[base] = per_container
            restarts, ready_series, running = per_container
            _put(restarts, t, float(status.get("restartCount", 0)))
            _put(ready_series, t, float(bool(status.get("ready"))))
            state = status.get("state") or {}
            _put(running, t, float("running" in state))
            waiting = state.get("waiting")
            if waiting and waiting.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_waiting_reason",
                    (*base, ("reason", str(waiting["reason"]))),
                    1.0,
                )
            last = (status.get("lastState") or {}).get("terminated")
            if last and last.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_last_terminated_reason",
                    (*base, ("reason", str(last["reason"]))),
                    1.0,
                )
            self._resources(t, container, base, node, "kube_pod_container_resource")
        for init in pod["status"].get("initContainerStatuses") or []:
            base = (("container", str(init.get("name", ""))), ns, p, uid)
            self._ksm(
                t,
                "kube_pod_init_container_status_restarts_total",
                base,
                float(init.get("restartCount", 0)),
            )
            state = init.get("state") or {}
            self._ksm(t, "kube_pod_init_container_status_running", base, float("running" in state))
            waiting = state.get("waiting")
            if waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
                self._ksm(
                    t,
                    "kube_pod_init_container_status_waiting_reason",
                    (*base, ("reason", str(waiting["reason"]))),
                    1.0,
                )

    def _resources(
        self,
        t: float,
        container: Obj,
        base: tuple[tuple[str, str], ...],
        node: tuple[str, str],
        prefix: str,
    ) -> None:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        raws = (
            requests.get("cpu"),
            requests.get("memory"),
            limits.get("cpu"),
            limits.get("memory"),
        )
        # The series and amounts are functions of the labels and the quantities as written:
        # found and parsed once per distinct set, not every scrape.
        key = (prefix, base, node, *((r.__class__, r) for r in raws))
        cacheable = True
        try:
            written = self._resource_handles.get(key)
        except TypeError:  # a quantity that is no scalar: parsed (and refused) every time
            cacheable, written = False, None
        if written is None:
            written = []
            for (section, resource, unit, parse), raw in zip(_RESOURCE_FIELDS, raws, strict=True):
                if raw is None:
                    continue
                try:
                    amount = parse(raw)
                except ValueError:
                    continue
                labels = (*base, node, ("resource", resource), ("unit", unit))
                written.append((self._ksm_series(f"{prefix}_{section}", labels), amount))
            if cacheable:
                self._resource_handles[key] = written
        for series, amount in written:
            _put(series, t, amount)

    # ---- cAdvisor ---------------------------------------------------------------------------
    def _cadvisor(self, t: float) -> None:
        c = self.cluster
        for pod in c.of_kind("Pod"):
            rt = c.runtime.get(pod["metadata"]["name"])
            if rt is None or not pod["spec"].get("nodeName") or not rt.container_ids:
                continue
            uid = str(pod["metadata"].get("uid", "")).replace("-", "_")
            ns = ("namespace", c.namespace)
            p = ("pod", str(pod["metadata"]["name"]))
            cgroup = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice"
            container = main_container(pod["spec"])
            cname = str(container.get("name", ""))
            running = rt.state == "running"
            ws = float(round(rt.working_set if running else 0.0))
            # The pod's own cgroup (container="" and no image) and the application container's.
            pod_handles = self._cgroup_handles.get((cgroup, "", "", "", p[1]))
            if pod_handles is None:
                pod_base = (("container", ""), ("id", cgroup), ("image", ""), ("name", ""), ns, p)
                pod_handles = self._cgroup_series(pod_base)
                self._cgroup_handles[(cgroup, "", "", "", p[1])] = pod_handles
            _put(pod_handles[0], t, ws)
            _put(pod_handles[1], t, rt.cpu_seconds)
            # A container's cgroup counts from its own start (the pod's cgroup counts on across
            # restarts); an exited container's cgroup keeps its counts while cAdvisor still
            # reports it.
            counters = (rt.cpu_seconds, rt.cfs_periods, rt.cfs_throttled)
            before = self._pod_counters.get(p[1], (0.0, 0.0, 0.0))
            self._pod_counters[p[1]] = counters
            for cid, _started, ended in rt.container_ids:
                alive = ended == 0.0
                if not alive and t - ended > OLD_CONTAINER_SECONDS:
                    continue
                container_id = f"{cid:064x}"[-64:]
                image = str(rt.image or container.get("image", ""))
                if alive and not running:
                    continue
                own = self._containers.get((p[1], cid))
                if own is None:
                    if not alive:
                        continue  # exited before any scrape saw it
                    own = [*before, 0.0, 0.0, 0.0, 0.0]
                    self._containers[(p[1], cid)] = own
                if alive:
                    own[3] = ws
                    own[4] = counters[0] - own[0]
                    own[5] = counters[1] - own[1]
                    own[6] = counters[2] - own[2]
                else:
                    own[3] = 0.0  # its processes are gone
                base = (
                    ("container", cname),
                    ("id", f"{cgroup}/cri-containerd-{container_id}.scope"),
                    ("image", image),
                    ("name", container_id),
                    ns,
                    p,
                )
                cache_key = (cgroup, cname, container_id, image, p[1])
                handles = self._cgroup_handles.get(cache_key)
                if handles is None:
                    handles = self._cgroup_series(base)
                    self._cgroup_handles[cache_key] = handles
                _put(handles[0], t, own[3])
                _put(handles[1], t, own[4])
                if cpu_limit_of(container) is not None:
                    self._set(
                        (("__name__", "container_cpu_cfs_periods_total"), *base, *KUBELET_TARGET),
                        t,
                        float(int(own[5])),
                    )
                    self._set(
                        (
                            ("__name__", "container_cpu_cfs_throttled_periods_total"),
                            *base,
                            *KUBELET_TARGET,
                        ),
                        t,
                        float(int(own[6])),
                    )

    def _cgroup_series(self, base: tuple[tuple[str, str], ...]) -> list[SimSeries]:
        """A cgroup's working-set and CPU usage series (the ones cAdvisor always writes)."""
        return [
            self._series(
                (("__name__", "container_memory_working_set_bytes"), *base, *KUBELET_TARGET)
            ),
            self._series(
                (
                    ("__name__", "container_cpu_usage_seconds_total"),
                    ("cpu", "total"),
                    *base,
                    *KUBELET_TARGET,
                )
            ),
        ]


def cpu_limit_of(container: Obj) -> float | None:
    """A container's CPU limit in cores (None: none, so cAdvisor writes no CFS series)."""
    raw = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
    try:
        return parse_cpu(raw) if raw is not None else None
    except ValueError:
        return None


def _amount(resource: str, text: str) -> float:
    try:
        if resource.endswith("cpu"):
            return parse_cpu(text)
        if resource.endswith("memory"):
            return parse_memory(text)
        return float(text)
    except ValueError:
        return 0.0


def _owner(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or [{}]
    return str(refs[0].get("name", ""))


def _owner_kind(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or [{}]
    return str(refs[0].get("kind", ""))
