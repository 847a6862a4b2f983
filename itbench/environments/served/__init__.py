"""The twin served as a cluster: the simulator behind a Kubernetes API, a Prometheus exposition
endpoint, and Loki-, Jaeger- and flagd-compatible endpoints, on a real-time clock.

`itbench twin serve` starts it (`itbench.environments.served.server`); kubectl, ansible-runner
with kubernetes.core, a real Prometheus and the cluster environment then work against it as
against a cluster.
"""
