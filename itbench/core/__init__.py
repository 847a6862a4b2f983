"""The pure core: models, catalog, faults, topology, trial state machine and scoring (no I/O)."""
