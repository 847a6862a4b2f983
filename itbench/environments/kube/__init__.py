"""environments/kube."""
