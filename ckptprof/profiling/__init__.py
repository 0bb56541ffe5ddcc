"""Optional samplers attached to the rank processes (py-spy)."""
