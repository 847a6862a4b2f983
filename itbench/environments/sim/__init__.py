"""The simulator: a deterministic digital twin of the Astronomy Shop behind the Environment port."""

from itbench.environments.sim.environment import SimEnvironment

__all__ = ["SimEnvironment"]
