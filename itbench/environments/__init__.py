"""Environments a trial runs in, behind one port (`port.Environment`)."""
