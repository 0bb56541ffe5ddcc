"""Pure functions from a session to attribution, a verdict and comparisons (no torch, no I/O)."""
