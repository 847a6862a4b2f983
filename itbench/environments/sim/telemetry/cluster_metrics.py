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
            deployment = str(d["metadata"]["name"])
            handles = self._deployment_handles.get(deployment)
            if handles is None:
                name = ("deployment", deployment)
                handles = [self._ksm_series(metric, (name, ns)) for metric, _ in _DEPLOYMENT_SERIES]
                self._deployment_handles[deployment] = handles
            st = d.get("status") or {}
            _put(handles[0], t, float(d["spec"].get("replicas", 1)))
            for series, (_, field_name) in zip(handles[1:], _DEPLOYMENT_SERIES[1:], strict=True):
                _put(series, t, float(st.get(field_name, 0)))
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
        meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
        name = str(meta["name"])
        uid = str(meta.get("uid", ""))
        node = str(spec.get("nodeName", ""))
        ready = bool(rt is not None and c.pod_ready(pod))
        fixed = self._pod_handles.get((name, uid))
        if fixed is None:
            labels = (("namespace", c.namespace), ("pod", name), ("uid", uid))
            fixed = [
                self._ksm_series("kube_pod_status_ready", (("condition", condition), *labels))
                for condition in ("true", "false", "unknown")
            ]
            fixed += [
                self._ksm_series(
                    "kube_pod_status_phase", (labels[0], ("phase", ph), labels[1], labels[2])
                )
                for ph in _PHASES
            ]
            self._pod_handles[(name, uid)] = fixed
        for series, value in zip(fixed, (ready, not ready, False), strict=False):
            _put(series, t, float(value))
        phase = status.get("phase", "Pending")
        for series, ph in zip(fixed[3:], _PHASES, strict=True):
            _put(series, t, 1.0 if ph == phase else 0.0)
        info = (
            name,
            uid,
            _owner_kind(pod),
            _owner(pod),
            str(status.get("hostIP", "")),
            bool(spec.get("hostNetwork")),
            node,
            str(status.get("podIP", "")),
            str(spec.get("priorityClassName") or ""),
        )
        info_series = self._info_handles.get(info)
        if info_series is None:
            info_labels = tuple(
                (k, v)
                for k, v in (
                    ("created_by_kind", info[2]),
                    ("created_by_name", info[3]),
                    ("host_ip", info[4]),
                    ("host_network", str(info[5]).lower()),
                    ("namespace", c.namespace),
                    ("node", node),
                    ("pod", name),
                    ("pod_ip", info[7]),
                    ("priority_class", info[8]),
                    ("uid", uid),
                )
                if v  # Prometheus stores no label with an empty value
            )
            info_series = self._ksm_series("kube_pod_info", info_labels)
            self._info_handles[info] = info_series
        _put(info_series, t, 1.0)
        statuses = {s["name"]: s for s in status.get("containerStatuses") or []}
        for container in spec.get("containers") or []:
            cname = str(container.get("name", ""))
            container_status = statuses.get(cname, {})
            per_container = self._container_handles.get((name, uid, cname))
            if per_container is None:
                base = self._container_base(cname, name, uid)
                per_container = [self._ksm_series(m, base) for m in _CONTAINER_SERIES]
                self._container_handles[(name, uid, cname)] = per_container
            restarts, ready_series, running = per_container
            _put(restarts, t, float(container_status.get("restartCount", 0)))
            _put(ready_series, t, float(bool(container_status.get("ready"))))
            state = container_status.get("state") or {}
            _put(running, t, float("running" in state))
            waiting = state.get("waiting")
            if waiting and waiting.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_waiting_reason",
                    (*self._container_base(cname, name, uid), ("reason", str(waiting["reason"]))),
                    1.0,
                )
            last = (container_status.get("lastState") or {}).get("terminated")
            if last and last.get("reason"):
                self._ksm(
                    t,
                    "kube_pod_container_status_last_terminated_reason",
                    (*self._container_base(cname, name, uid), ("reason", str(last["reason"]))),
                    1.0,
                )
            self._resources(t, container, name, uid, cname, node)
        for init in status.get("initContainerStatuses") or []:
            base = self._container_base(str(init.get("name", "")), name, uid)
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

    def _container_base(self, container: str, pod: str, uid: str) -> tuple[tuple[str, str], ...]:
        """The labels kube-state-metrics gives a container's series."""
        return (
            ("container", container),
            ("namespace", self.cluster.namespace),
            ("pod", pod),
            ("uid", uid),
        )

    def _resources(
        self, t: float, container: Obj, pod: str, uid: str, name: str, node: str
    ) -> None:
        """A container's `kube_pod_container_resource_requests` and `_limits` series."""
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
        key = (pod, uid, name, node, *((r.__class__, r) for r in raws))
        cacheable = True
        try:
            written = self._resource_handles.get(key)
        except TypeError:  # a quantity that is no scalar: parsed (and refused) every time
            cacheable, written = False, None
        if written is None:
            written = []
            base = self._container_base(name, pod, uid)
            for (section, resource, unit, parse), raw in zip(_RESOURCE_FIELDS, raws, strict=True):
                if raw is None:
                    continue
                try:
                    amount = parse(raw)
                except ValueError:
                    continue
                labels = (*base, ("node", node), ("resource", resource), ("unit", unit))
                written.append(
                    (self._ksm_series(f"kube_pod_container_resource_{section}", labels), amount)
                )
            if cacheable:
                self._resource_handles[key] = written
        for series, amount in written:
            _put(series, t, amount)

    # ---- cAdvisor ---------------------------------------------------------------------------
    def _cadvisor(self, t: float) -> None:
        c = self.cluster
        for pod in c.of_kind("Pod"):
            pname = str(pod["metadata"]["name"])
            rt = c.runtime.get(pname)
            if rt is None or not pod["spec"].get("nodeName") or not rt.container_ids:
                continue
            uid = str(pod["metadata"].get("uid", ""))
            container = main_container(pod["spec"])
            cname = str(container.get("name", ""))
            running = rt.state == "running"
            ws = float(round(rt.working_set if running else 0.0))
            # The pod's own cgroup (container="" and no image) and the application container's.
            pod_handles = self._cgroup_handles.get((pname, uid))
            if pod_handles is None:
                pod_handles = self._cgroup_series(self._cgroup_base(uid, pname, "", None, ""))
                self._cgroup_handles[(pname, uid)] = pod_handles
            _put(pod_handles[0], t, ws)
            _put(pod_handles[1], t, rt.cpu_seconds)
            # A container's cgroup counts from its own start (the pod's cgroup counts on across
            # restarts); an exited container's cgroup keeps its counts while cAdvisor still
            # reports it.
            counters = (rt.cpu_seconds, rt.cfs_periods, rt.cfs_throttled)
            before = self._pod_counters.get(pname, (0.0, 0.0, 0.0))
            self._pod_counters[pname] = counters
            for cid, _started, ended in rt.container_ids:
                alive = ended == 0.0
                if not alive and t - ended > OLD_CONTAINER_SECONDS:
                    continue
                image = str(rt.image or container.get("image", ""))
                if alive and not running:
                    continue
                own = self._containers.get((pname, cid))
                if own is None:
                    if not alive:
                        continue  # exited before any scrape saw it
                    own = [*before, 0.0, 0.0, 0.0, 0.0]
                    self._containers[(pname, cid)] = own
                if alive:
                    own[3] = ws
                    own[4] = counters[0] - own[0]
                    own[5] = counters[1] - own[1]
                    own[6] = counters[2] - own[2]
                else:
                    own[3] = 0.0  # its processes are gone
                cache_key = (pname, uid, cid, cname, image)
                handles = self._cgroup_handles.get(cache_key)
                if handles is None:
                    handles = self._cgroup_series(self._cgroup_base(uid, pname, cname, cid, image))
                    self._cgroup_handles[cache_key] = handles
                _put(handles[0], t, own[3])
                _put(handles[1], t, own[4])
                if cpu_limit_of(container) is not None:
                    cfs = self._cfs_handles.get(cache_key)
                    if cfs is None:
                        base = self._cgroup_base(uid, pname, cname, cid, image)
                        cfs = [
                            self._series((("__name__", name), *base, *KUBELET_TARGET))
                            for name in (
                                "container_cpu_cfs_periods_total",
                                "container_cpu_cfs_throttled_periods_total",
                            )
                        ]
                        self._cfs_handles[cache_key] = cfs
                    _put(cfs[0], t, float(int(own[5])))
                    _put(cfs[1], t, float(int(own[6])))

    def _cgroup_base(
        self, uid: str, pod: str, container: str, cid: int | None, image: str
    ) -> tuple[tuple[str, str], ...]:
        """The labels cAdvisor gives a cgroup: a pod's own (cid None) or one of its
        containers'."""
        cgroup = (
            "/kubepods.slice/kubepods-burstable.slice/"
            f"kubepods-burstable-pod{uid.replace('-', '_')}.slice"
        )
        if cid is None:
            cgroup_id, name = cgroup, ""
        else:
            name = f"{cid:064x}"[-64:]
            cgroup_id = f"{cgroup}/cri-containerd-{name}.scope"
        return (
            ("container", container),
            ("id", cgroup_id),
            ("image", image),
            ("name", name),
            ("namespace", self.cluster.namespace),
            ("pod", pod),
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
