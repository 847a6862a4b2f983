"""The heuristic SRE baseline: follows alerts and errors to the root cause and remedies it."""
