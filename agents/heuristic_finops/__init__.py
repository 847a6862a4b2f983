"""The heuristic FinOps baseline: reads the cost alert, finds the waste behind it, removes it."""
