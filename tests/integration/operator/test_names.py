"""Names the operator derives are deterministic and within Kubernetes' limits."""

from __future__ import annotations

from itbench.operator.artefacts import trajectory_name
from itbench.operator.benchmark_runs import report_name, trial_name
from itbench.operator.workloads import workload_name


def test_trial_names_are_deterministic_and_bounded() -> None:
    name = trial_name("run", "cart-flagd-failure", 2)
    assert name.startswith("run-cart-flagd-failure-") and name.endswith("-2")
    assert name == trial_name("run", "cart-flagd-failure", 2)
    long = trial_name("r" * 200, "s" * 200, 7)
    assert len(long) <= 253 and long.endswith("-7")
    assert long == trial_name("r" * 200, "s" * 200, 7)
    assert long != trial_name("r" * 200, "s" * 199 + "t", 7)
    assert len(report_name("r" * 253)) <= 253


def test_workload_names_are_dns_labels() -> None:
    assert workload_name("run-a-0") == "run-a-0-agent"
    name = workload_name("x" * 100 + "-0")
    assert len(name) <= 63 and name.endswith("-agent")
    assert name != workload_name("x" * 100 + "-1")


def test_runs_whose_names_join_alike_get_different_trial_names() -> None:
    # Both catalogs' scenarios exist: no-fault-control and finops-no-fault-control.
    assert trial_name("r-finops", "no-fault-control", 0) != trial_name(
        "r", "finops-no-fault-control", 0
    )


def test_trajectory_config_maps_are_named_per_trial_within_the_limit() -> None:
    assert trajectory_name("run-a-0") == "run-a-0-trajectory"
    longest = trial_name("r" * 200, "s" * 200, 7)
    name = trajectory_name(longest)
    assert len(name) <= 253 and name.endswith("-trajectory")
    assert name != trajectory_name(trial_name("r" * 200, "s" * 199 + "t", 7))
