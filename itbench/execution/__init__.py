"""Carries out the state machine's actions: executor, embedded benchmark, artefact store."""
