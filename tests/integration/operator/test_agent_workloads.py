"""The account an image agent's Job runs as: on the operator's own cluster in a cluster run, the
cluster agents' account with its token (the chart's Role limits it to the scenarios'
namespaces); everywhere else the account without bindings, and no token."""

from __future__ import annotations

from itbench.core.models.agent_submission import ImageRuntime
from itbench.core.models.benchmark_run import EnvironmentSpec
from itbench.operator.workloads import agent_account, agent_job

TRIAL = {"metadata": {"name": "run-a-0", "namespace": "team-a", "uid": "u-1"}}


def test_cluster_runs_on_the_own_cluster_get_the_cluster_account_with_its_token() -> None:
    own = EnvironmentSpec.model_validate({"type": "cluster"})
    assert agent_account(own, "itbench-agent", "itbench-cluster-agent") == (
        "itbench-cluster-agent",
        True,
    )
    assert agent_account(own, "itbench-agent", None) == ("itbench-agent", False)


def test_every_other_agent_gets_no_token() -> None:
    remote = EnvironmentSpec.model_validate(
        {"type": "cluster", "kubeconfigSecretRef": {"name": "lab"}}
    )
    several = EnvironmentSpec.model_validate(
        {"type": "cluster", "kubeconfigSecretRefs": [{"name": "lab-a"}, {"name": "lab-b"}]}
    )
    simulator = EnvironmentSpec.model_validate({"type": "simulator"})
    for environment in (remote, several, simulator):
        assert agent_account(environment, "itbench-agent", "itbench-cluster-agent") == (
            "itbench-agent",
            False,
        )


def test_the_job_mounts_the_token_only_when_asked_and_labels_its_pods_as_agents() -> None:
    image = ImageRuntime.model_validate({"image": "example.org/agent:1"})
    for token in (False, True):
        job = agent_job(
            TRIAL,
            image,
            gateway_url="http://gw:8080",
            service_account_name="acct",
            deadline_seconds=60,
            api_token=token,
        )
        pod = job["spec"]["template"]
        assert pod["spec"]["automountServiceAccountToken"] is token
        assert pod["spec"]["serviceAccountName"] == "acct"
        assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "agent"
        assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == "itbench"
