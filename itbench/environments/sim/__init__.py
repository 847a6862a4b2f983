"""environments/sim."""
