"""Cheap strategies that a benchmark must not reward: each is an honest attempt at a high score
without diagnosis or repair skill. `itbench validity` runs them over the catalog and holds each
to its ceiling."""
