"""The platform's own time per trial on a live cluster, measured on the served twin: the cluster
environment's provision check and baseline, a flag fault injected by the playbooks (the flag,
then flagd rolled out and waited for), readiness (the expected alert firing in the real
Prometheus; reported, not held to the target, since it includes the rule's `for:` window),
removal and the check that every object is back at its baseline.

The twin runs 30 times faster than the wall clock, so the rollout and the alert take seconds;
the playbook runs (ansible-runner, kubernetes.core) take what they take on any cluster. Their
CPU time (the Ansible processes', user + system) is reported too: on a loaded machine it is what
the wall time of a run is made of.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Figure

TRIAL_TARGET_SECONDS = 60.0
"""Provision check + inject + remove + verify clean, per trial."""
PLAYBOOK_CPU_TARGET_SECONDS = 20.0
"""CPU seconds of the playbook runs (inject + remove) of one flag fault (an Ansible process per
injection and per removal, four module processes in all)."""
FAULT = "flagd.cart-failure"
ALERT = ("RequestErrorRate", "cart")


def run() -> list[Figure]:
    """Measure one trial's platform time on a served twin."""
    import itbench.core.fault_library  # noqa: F401 (registers the faults)
    from itbench.core.faults import get_fault
    from itbench.environments.kube.environment import ClusterEnvironment
    from itbench.environments.served.server import ServedCluster
    from itbench.environments.sim.environment import SimEnvironment
    from tests.kube_collection import kubernetes_core

    if shutil.which("prometheus") is None:
        print("bench_cluster: prometheus is not installed; skipped")
        return []
    with tempfile.TemporaryDirectory(prefix="itbench-bench-cluster-") as tmp:
        workdir = Path(tmp)
        served = ServedCluster(
            SimEnvironment(seed=1), speed=30.0, prometheus="", workdir=workdir
        ).start()
        try:
            kubeconfig = workdir / "kubeconfig"
            served.kubeconfig(kubeconfig)
            env = ClusterEnvironment(kubeconfig, collections_path=kubernetes_core())
            t0 = time.perf_counter()
            env.provision()
            t1 = time.perf_counter()
            c1 = children_cpu()
            env.inject("bench", get_fault(FAULT).changes({}, env.namespace))
            c2 = children_cpu()
            t2 = time.perf_counter()
            deadline = t2 + 300
            while time.perf_counter() < deadline:
                firing = {
                    (a.alertname, a.labels.get("service_name", ""))
                    for a in env.alerts()
                    if a.state.value == "firing"
                }
                if ALERT in firing:
                    break
                time.sleep(0.2)
            t3 = time.perf_counter()
            c3 = children_cpu()
            env.remove("bench")
            c4 = children_cpu()
            t4 = time.perf_counter()
            dirty = env.dirty()
            t5 = time.perf_counter()
            env.close()
        finally:
            served.stop()
    if dirty:
        raise RuntimeError(f"objects not at their baseline after removal: {dirty}")
    platform = (t1 - t0) + (t2 - t1) + (t4 - t3) + (t5 - t4)
    return [
        Figure("cluster trial: provision check + baseline", t1 - t0, "s"),
        Figure("cluster trial: inject (flag + rollout)", t2 - t1, "s"),
        Figure("cluster trial: alert firing after inject", t3 - t2, "s"),
        Figure("cluster trial: remove (flag + rollout)", t4 - t3, "s"),
        Figure("cluster trial: verify clean", t5 - t4, "s"),
        Figure("cluster trial: platform time", platform, "s", TRIAL_TARGET_SECONDS),
        Figure("cluster trial: playbook CPU, inject", c2 - c1, "s"),
        Figure("cluster trial: playbook CPU, remove", c4 - c3, "s"),
        Figure(
            "cluster trial: playbook CPU, inject + remove",
            (c2 - c1) + (c4 - c3),
            "s",
            PLAYBOOK_CPU_TARGET_SECONDS,
        ),
    ]


def children_cpu() -> float:
    """User + system CPU seconds of the finished child processes (the playbook runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
