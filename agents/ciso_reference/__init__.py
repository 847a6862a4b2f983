"""The CISO reference solution: a non-LLM agent that writes each control's policy (and evidence
collection) by hand, proving every CISO scenario solvable."""
