"""The random baseline: a random workload as root cause and a random harmless action."""
