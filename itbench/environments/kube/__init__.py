"""The live cluster: what the `cluster` environment does on real Kubernetes.

`faults` injects and removes the fault library's object changes with the Ansible playbooks under
`playbooks/faults/` (kubernetes.core), recording each touched object's earlier state so that
removal puts it back. The rest of the live environment (the Astronomy Shop and observability
stack, telemetry over Prometheus, Loki and Jaeger) plugs into the same `Environment` port.
"""
