"""The null baseline: reports STARTED and FINISHED and does nothing else."""
