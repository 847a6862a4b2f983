"""The oracle baseline: applies the ground truth through the gateway, where a run allows it."""
